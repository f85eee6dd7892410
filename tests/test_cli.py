"""The ``tokjit`` command line, run in-process through ``tokjit.cli.main`` (and once as a real
subprocess for the console entry point). Ids are checked against tiktoken / HF tokenizers."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest

import tokjit
from tokjit import cli

TEXT = "Hello world!\nSecond line, with ünïcödé and 🤖.\n<|endoftext|> tail\n"


def run(capsys, monkeypatch, argv, stdin: bytes | None = None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def tiktoken_o200k():
    tiktoken = pytest.importorskip("tiktoken")
    return cli._tiktoken_from_bundled(tiktoken, "o200k_base")


def test_count_on_bundled_sample(capsys, monkeypatch, tiktoken_o200k):
    code, out, _ = run(capsys, monkeypatch, ["count", "--json"])
    assert code == 0
    result = json.loads(out)
    from importlib import resources
    sample = resources.files("tokjit").joinpath("data/sample.txt").read_text(encoding="utf-8")
    assert result["tokens"] == len(tiktoken_o200k.encode_ordinary(sample))
    assert result["bytes"] == len(sample.encode("utf-8"))


def test_encode_stdin_lines_json_and_decode_round_trip(capsys, monkeypatch, tiktoken_o200k):
    code, out, _ = run(capsys, monkeypatch, ["encode", "-", "--lines", "--json"], TEXT.encode())
    assert code == 0
    seqs = [json.loads(line) for line in out.splitlines()]
    assert seqs == [tiktoken_o200k.encode_ordinary(t) for t in TEXT.splitlines(keepends=True)]
    code, out, _ = run(capsys, monkeypatch, ["decode", "-t", "o200k_base"],
                       "\n".join(json.dumps(s) for s in seqs).encode())
    assert code == 0 and out == TEXT  # the ids hold the newlines: nothing is added
    code, out, _ = run(capsys, monkeypatch, ["decode", "-t", "o200k_base", "--json"],
                       "\n".join(json.dumps(s) for s in seqs).encode())
    assert [json.loads(line) for line in out.splitlines()] == TEXT.splitlines(keepends=True)


def test_encode_then_decode_gives_the_input_back(capsys, monkeypatch):
    for extra in ([], ["--lines"]):
        code, ids, _ = run(capsys, monkeypatch, ["encode", "-", *extra], TEXT.encode())
        assert code == 0
        code, out, _ = run(capsys, monkeypatch, ["decode", "-t", "o200k_base", "-"], ids.encode())
        assert code == 0 and out == TEXT, extra


def test_parse_special_flag(capsys, monkeypatch):
    _, plain, _ = run(capsys, monkeypatch, ["encode", "-"], b"<|endoftext|>")
    _, special, _ = run(capsys, monkeypatch, ["encode", "-", "--parse-special"], b"<|endoftext|>")
    assert special.split() == ["199999"] and len(plain.split()) > 1


def test_encode_npy_from_file(tmp_path, capsys, monkeypatch, tiktoken_o200k):
    src = tmp_path / "in.txt"
    src.write_bytes(TEXT.encode())
    out_path = tmp_path / "ids.npy"
    code, _, err = run(capsys, monkeypatch, ["encode", str(src), "--lines", "--npy", str(out_path)])
    assert code == 0 and json.loads(err.strip().splitlines()[-1])["sequences"] == 3
    flat = np.load(out_path)
    offsets = np.load(tmp_path / "ids.offsets.npy")
    assert flat.dtype == np.int32 and offsets.dtype == np.int64
    lines = TEXT.splitlines(keepends=True)
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(3)] == \
        [tiktoken_o200k.encode_ordinary(t) for t in lines]
    code, out, _ = run(capsys, monkeypatch, ["decode", "-t", "o200k_base", str(out_path)])
    assert code == 0 and out == TEXT


def test_invalid_utf8_input_file(tmp_path, capsys, monkeypatch):
    src = tmp_path / "bad.txt"
    src.write_bytes(b"ab\xffcd")
    code, out, _ = run(capsys, monkeypatch, ["encode", str(src), "--json"])
    assert code == 0
    assert json.loads(out) == tokjit.get_encoding("o200k_base").encode("ab\ufffdcd")


def test_tokenizer_file_and_inspect(shared, capsys, monkeypatch):
    tokenizers = pytest.importorskip("tokenizers")
    path = shared / "data/hf/llama3/tokenizer.json"
    hf = tokenizers.Tokenizer.from_file(str(path))
    code, out, _ = run(capsys, monkeypatch, ["encode", "-t", str(path), "-", "--json"], TEXT.encode())
    assert json.loads(out) == hf.encode(TEXT, add_special_tokens=False).ids
    code, out, _ = run(capsys, monkeypatch, ["inspect", "-t", str(path), "--json"])
    info = json.loads(out)
    assert info["vocab_size"] == hf.get_vocab_size(with_added_tokens=True)
    assert info["model"] == "BPE" and info["pre_tokenizer"].startswith("Sequence[")
    assert "<|begin_of_text|>" in info["special_token_names"]


def test_convert_writes_cache_that_load_uses(shared, tmp_path, capsys, monkeypatch):
    expected = [str(i) for i in tokjit.get_encoding("cl100k_base").encode("hi")]  # before the cache moves
    monkeypatch.setenv("TOKJIT_CACHE_DIR", str(tmp_path / "cache"))
    path = shared / "data/tiktoken/cl100k_base.tiktoken"
    code, out, _ = run(capsys, monkeypatch, ["convert", "-t", str(path), "--like", "cl100k_base", "--json"])
    first = json.loads(out)
    assert code == 0 and first["status"] == "written"
    code, out, _ = run(capsys, monkeypatch, ["convert", "-t", str(path), "--like", "cl100k_base", "--json"])
    assert json.loads(out)["status"].startswith("already cached")
    # a normal load with the same options finds that entry (no second file appears)
    code, out, _ = run(capsys, monkeypatch, ["encode", "-t", str(path), "--like", "cl100k_base", "-"], b"hi")
    assert out.split() == expected
    assert len(list((tmp_path / "cache").glob("*.tokjit"))) == 1


def test_bench_compare_json(capsys, monkeypatch, tmp_path):
    pytest.importorskip("tiktoken")
    src = tmp_path / "in.txt"
    src.write_text(TEXT * 20, encoding="utf-8")
    code, out, _ = run(capsys, monkeypatch, ["bench", str(src), "--lines", "--compare", "--repeat", "1",
                                              "--threads", "2", "--json"])
    result = json.loads(out)
    engines = [r["engine"] for r in result["results"]]
    assert code == 0 and any(e.startswith("tiktoken") for e in engines)
    assert len({r["tokens"] for r in result["results"]}) == 1  # all engines agree on the count
    assert all(r["MB_per_s"] > 0 for r in result["results"])


def test_progress_bar_on_request(capsys, monkeypatch, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("word " * 1000 + "\n", encoding="utf-8")
    code, _, err = run(capsys, monkeypatch, ["count", str(src), "--progress"])
    assert code == 0 and "100%" in err and "B/s" in err and "5.00k/5.00k" in err  # tqdm's bar over bytes
    code, _, err = run(capsys, monkeypatch, ["count", str(src)])  # not a TTY, short input: silent
    assert err == ""


def test_errors_are_one_line(capsys, monkeypatch, tmp_path):
    code, _, err = run(capsys, monkeypatch, ["encode", "-t", str(tmp_path / "missing.json"), "-"], b"x")
    assert code == 2 and err.startswith("tokjit: error:") and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, monkeypatch, ["decode", "-t", "o200k_base"], b"1 2 x\n")
    assert code == 2 and "line 1" in err


def test_console_entry_point_and_module():
    for argv in (["tokjit", "count", "--json"], [sys.executable, "-m", "tokjit", "count", "--json"]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["tokens"] > 100


# ==================================================================================================
# Footguns (issue 16): each used to do something silent or misleading
# ==================================================================================================

def test_decode_needs_the_tokenizer(capsys, monkeypatch):
    code, out, err = run(capsys, monkeypatch, ["decode"], b"1 2 3\n")
    assert code == 2 and out == "" and "needs -t" in err and "o200k_base" in err


class _Terminal(io.StringIO):
    def isatty(self):
        return True

    def read(self, *args):  # a terminal would block here
        raise AssertionError("decode read from the terminal")


def test_decode_without_input_does_not_wait_on_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", _Terminal())
    code, _, err = run(capsys, monkeypatch, ["decode", "-t", "o200k_base"])
    assert code == 2 and "pipe" in err


def test_unknown_tokenizer_name_lists_bundled(capsys, monkeypatch):
    code, _, err = run(capsys, monkeypatch, ["encode", "-t", "o200k", "-"], b"x")
    assert code == 2 and "did you mean o200k_base" in err
    for name in tokjit.list_encoding_names():
        assert name in err


def test_tiktoken_file_without_like_names_the_cli_flags(shared, capsys, monkeypatch):
    path = shared / "data/tiktoken/cl100k_base.tiktoken"
    code, _, err = run(capsys, monkeypatch, ["encode", "-t", str(path), "-"], b"x")
    assert code == 2 and "--like" in err and "--like cl100k_base" in err and "pat_str=" not in err


def test_bench_compare_says_what_it_did_not_compare(capsys, monkeypatch, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(TEXT, encoding="utf-8")
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken -> ImportError
    argv = ["bench", str(src), "--compare", "--repeat", "1", "--threads", "1"]
    code, out, _ = run(capsys, monkeypatch, argv + ["--json"])
    result = json.loads(out)
    assert code == 0 and not any(r["engine"].startswith("tiktoken") for r in result["results"])
    assert any("tiktoken is not installed" in note for note in result["not_compared"])
    code, out, _ = run(capsys, monkeypatch, argv)
    assert "note: tiktoken is not installed" in out


def test_bench_compare_times_sentencepiece_for_model_files(shared, capsys, monkeypatch, tmp_path):
    sentencepiece = pytest.importorskip("sentencepiece")
    src = tmp_path / "in.txt"
    src.write_text(TEXT * 5, encoding="utf-8")
    model = shared / "data/spm/llama2/tokenizer.model"
    code, out, _ = run(capsys, monkeypatch, ["bench", "-t", str(model), str(src), "--lines", "--compare",
                                              "--repeat", "1", "--threads", "1", "--json"])
    result = json.loads(out)
    sp = sentencepiece.SentencePieceProcessor(model_file=str(model))
    expected = sum(len(ids) for ids in sp.encode((TEXT * 5).splitlines(keepends=True)))
    assert {r["engine"].split()[0] for r in result["results"]} == {"tokjit", "sentencepiece"}
    assert {r["tokens"] for r in result["results"]} == {expected}


def test_count_gives_no_throughput_for_tiny_inputs(capsys, monkeypatch, tiktoken_o200k):
    code, out, _ = run(capsys, monkeypatch, ["count"])
    assert code == 0 and "MB/s" not in out and "too little time" in out
    code, out, _ = run(capsys, monkeypatch, ["count", "--json"])
    assert json.loads(out)["MB_per_s"] is None


def test_count_gives_throughput_for_large_inputs(capsys, monkeypatch, tmp_path, tiktoken_o200k):
    text = "The quick brown fox jumps over the lazy dog. " * 25_000  # 1.1 MB
    src = tmp_path / "big.txt"
    src.write_text(text, encoding="utf-8")
    code, out, _ = run(capsys, monkeypatch, ["count", str(src), "--json"])
    result = json.loads(out)
    assert code == 0 and result["tokens"] == len(tiktoken_o200k.encode_ordinary(text))
    assert result["MB_per_s"] is not None
