"""tokjit.dask end to end on a real ``LocalCluster`` of 2 worker processes, and tokenizer pickling.

Ids are compared with ``encode_batch`` of the same tokenizer in the test process.
"""

from __future__ import annotations

import pickle
import shutil

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
distributed = pytest.importorskip("dask.distributed")

import tokjit  # noqa: E402
import tokjit.dask  # noqa: E402
import tokjit.tokenizer  # noqa: E402

from conftest import corpus_lines  # noqa: E402


def _write_dataset(root, texts, n_files=3, row_group_size=400):
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n_files):
        part = texts[i::n_files]
        table = pa.table({"doc_id": list(range(i, len(texts), n_files)), "text": part})
        pq.write_table(table, root / f"shard-{i}.parquet", row_group_size=row_group_size)


def _read_sorted(dst):
    table = pa.concat_tables([pq.read_table(p) for p in sorted(dst.glob("part-*.parquet"))])
    rows = sorted(zip(table.column("doc_id").to_pylist(), table.column("input_ids").to_pylist()))
    return [ids for _, ids in rows]


def test_pickle_is_small_and_rebuilds(shared, tmp_path):
    tok = tokjit.load(shared / "data/hf/llama3/tokenizer.json")
    data = pickle.dumps(tok)
    assert len(data) < 2000  # path + sha256 + options, not the 128k-token vocabulary
    tokjit.api._REBUILT.clear()
    again = pickle.loads(data)
    assert again.encode("Hello world") == tok.encode("Hello world")
    assert pickle.loads(data) is again  # one rebuild per process
    bundled = tokjit.get_encoding("o200k_base")
    assert len(pickle.dumps(bundled)) < 200 and pickle.loads(pickle.dumps(bundled)) is bundled


def test_pickle_refuses_a_changed_file(shared, tmp_path):
    path = tmp_path / "tokenizer.json"
    shutil.copy(shared / "data/hf/llama3/tokenizer.json", path)
    tok = tokjit.load(path)
    data = pickle.dumps(tok)
    with open(path, "ab") as fh:
        fh.write(b"\n")  # same JSON, different bytes: a different file all the same
    tokjit.api._REBUILT.clear()
    with pytest.raises(tokjit.ModelFileError, match="changed since it was pickled"):
        pickle.loads(data)


def test_encode_parquet_on_local_cluster(shared, tmp_path):
    # ~2.5 MB: every 5th text of each corpus file, at most 600 per file, edge cases in full
    texts = corpus_lines(step=5, limit_per_file=600)
    src, dst = tmp_path / "src", tmp_path / "dst"
    _write_dataset(src, texts)
    tok = tokjit.load(shared / "data/hf/llama3/tokenizer.json")
    expected = tok.encode_batch(texts)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        stats = tokjit.dask.encode_parquet(str(src), str(dst), tok, column="text", split_row_groups=True)
    assert stats["rows"] == len(texts) and stats["tasks"] > 3
    assert stats["workers"] == 2
    assert stats["tokens"] == sum(map(len, expected))
    assert _read_sorted(dst) == expected


def test_encode_parquet_without_cluster_and_options(tmp_path):
    texts = ["hello world", "", "<|endoftext|>", "tokens\tand\nlines"] * 5
    src, dst = tmp_path / "src", tmp_path / "dst"
    _write_dataset(src, texts, n_files=2)
    tok = tokjit.get_encoding("o200k_base")
    stats = tokjit.dask.encode_parquet(str(src), str(dst), "o200k_base", parse_special=True,
                                       keep_columns=["doc_id"], out_column="ids", scheduler="sync")
    assert stats["tasks"] == 2
    table = pa.concat_tables([pq.read_table(p) for p in sorted(dst.glob("part-*.parquet"))])
    assert table.column_names == ["doc_id", "ids"]
    got = [ids for _, ids in sorted(zip(table.column("doc_id").to_pylist(), table.column("ids").to_pylist()))]
    assert got == tok.encode_batch(texts, parse_special=True)
    with pytest.raises(KeyError, match="nope"):
        tokjit.dask.encode_parquet(str(src), str(tmp_path / "x"), tok, column="nope", scheduler="sync")
