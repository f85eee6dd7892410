"""Tokenize a Parquet dataset with Dask, one task per Parquet file (or row group).

::

    from dask.distributed import Client
    import tokjit, tokjit.dask

    client = Client("tcp://scheduler:8786")           # or LocalCluster(); no client: dask's default scheduler
    tok = tokjit.load("/shared/models/tokenizer.json")  # the same path must exist on every worker
    stats = tokjit.dask.encode_parquet("s3://bucket/corpus/", "s3://bucket/corpus-ids/", tok, column="text")

Each task reads its fragment with pyarrow, encodes the column straight from the Arrow buffers
(:func:`tokjit.arrow.encode_arrow`) and writes one output file; nothing goes through pandas and no
data passes through the client. The tokenizer travels as its path, SHA-256 and load options (a few
hundred bytes, see ``Tokenizer.__reduce__``); each worker process rebuilds it once from its on-disk
cache and reuses it for every later task. If the file on a worker differs from the one the client
loaded, the task fails with a ``ModelFileError`` naming both hashes instead of producing other ids.

Needs ``dask`` and ``pyarrow`` (``pip install 'tokjit[dask]'``); ``distributed`` for a cluster.
"""

from __future__ import annotations

import os
import time

from tokjit.arrow import _pyarrow, encode_arrow


def _dask():
    try:
        import dask
    except ImportError as exc:  # optional dependency
        raise ImportError("tokjit.dask needs dask and pyarrow: pip install 'tokjit[dask]'") from exc
    return dask


def _resolve_tokenizer(tokenizer):
    import tokjit
    if isinstance(tokenizer, tokjit.Tokenizer):
        return tokenizer
    if isinstance(tokenizer, str) and tokenizer in tokjit.list_encoding_names():
        return tokjit.get_encoding(tokenizer)
    return tokjit.load(tokenizer)


def _filesystem(uri: str):
    """(pyarrow filesystem, path) for a local path or a URI such as ``s3://bucket/dir``."""
    from pyarrow import fs
    if "://" not in uri:
        return fs.LocalFileSystem(), os.path.abspath(uri)
    return fs.FileSystem.from_uri(uri)


def encode_table(tok, table, column: str = "text", *, out_column: str = "input_ids",
                 keep_columns=True, parse_special: bool = False, num_threads: int | None = 1):
    """``table`` (a ``pyarrow.Table``) with ``out_column`` = the ids of ``column`` (``list<int32>``).

    ``keep_columns``: True keeps every column, False only the ids, a list keeps those columns.
    The building block of :func:`encode_parquet`; use it in your own ``map_partitions`` as well.
    """
    if column not in table.column_names:
        raise KeyError(f"column {column!r} not in table (columns: {table.column_names})")
    ids = encode_arrow(tok, table.column(column), num_threads=num_threads, parse_special=parse_special)
    if keep_columns is True:
        kept = table
    elif keep_columns is False:
        kept = table.select([])
    else:
        kept = table.select(list(keep_columns))
    if out_column in kept.column_names:
        kept = kept.drop_columns([out_column])
    return kept.append_column(out_column, ids)


def encode_parquet_file(src_path: str, dst_path: str, tok, column: str = "text", *,
                        out_column: str = "input_ids", keep_columns=True, parse_special: bool = False,
                        num_threads: int | None = 1, row_groups=None) -> dict:
    """Encode one Parquet file (or some of its row groups) into ``dst_path``; returns counts."""
    import pyarrow.parquet as pq

    start = time.perf_counter()
    cpu_start = time.process_time()
    src_fs, src = _filesystem(src_path)
    dst_fs, dst = _filesystem(dst_path)
    columns = None if keep_columns is True else list(dict.fromkeys(
        [column] + ([] if keep_columns is False else list(keep_columns))))
    with src_fs.open_input_file(src) as fh:
        pf = pq.ParquetFile(fh)
        table = (pf.read_row_groups(row_groups, columns=columns) if row_groups is not None
                 else pf.read(columns=columns))
    text = table.column(column)
    import pyarrow.compute as pc
    n_bytes = pc.sum(pc.binary_length(text)).as_py() or 0
    out = encode_table(tok, table, column, out_column=out_column, keep_columns=keep_columns,
                       parse_special=parse_special, num_threads=num_threads)
    dst_fs.create_dir(os.path.dirname(dst), recursive=True)
    with dst_fs.open_output_stream(dst) as fh:
        pq.write_table(out, fh)
    ids = out.column(out_column)
    n_tokens = sum(len(c.flatten()) for c in ids.chunks)
    return {"rows": table.num_rows, "bytes": int(n_bytes), "tokens": int(n_tokens),
            "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu_start,
            "worker_pid": os.getpid()}


def _tasks(src: str, split_row_groups: bool):
    """(source file, row groups or None) per task, in a stable order."""
    import pyarrow.parquet as pq
    from pyarrow import fs

    src_fs, base = _filesystem(src)
    info = src_fs.get_file_info(base)
    if info.type == fs.FileType.File:
        files = [base]
    else:
        selector = fs.FileSelector(base, recursive=True)
        files = sorted(f.path for f in src_fs.get_file_info(selector)
                       if f.type == fs.FileType.File and f.path.endswith(".parquet")
                       and not os.path.basename(f.path).startswith(("_", ".")))
    if not files:
        raise FileNotFoundError(f"no .parquet files under {src}")
    scheme = src.split("://", 1)[0] + "://" if "://" in src else ""
    tasks = []
    for path in files:
        uri = scheme + path if scheme else path
        if split_row_groups:
            with src_fs.open_input_file(path) as fh:
                n_groups = pq.ParquetFile(fh).num_row_groups
            tasks.extend((uri, [g]) for g in range(n_groups))
        else:
            tasks.append((uri, None))
    return tasks


def encode_parquet(src: str, dst: str, tokenizer, column: str = "text", *, out_column: str = "input_ids",
                   parse_special: bool = False, keep_columns=True, split_row_groups: bool = False,
                   num_threads: int | None = 1, scheduler=None) -> dict:
    """Tokenize ``column`` of every Parquet file under ``src`` into ``dst/part-NNNNN.parquet``.

    ``tokenizer``: a :class:`tokjit.Tokenizer`, a tokenizer file path or a bundled encoding name.
    One Dask task per file (per row group with ``split_row_groups=True``), run on the active
    ``distributed.Client`` if there is one, else on ``scheduler`` (any value ``dask.compute``
    accepts). ``num_threads`` per task: keep 1 when each worker has one thread per core.
    Returns totals: rows, bytes, tokens, tasks, seconds (wall clock), MB_per_s, workers, and
    cpu_seconds (summed over tasks: with a busy machine, bytes / cpu_seconds is the per-core rate).
    """
    dask = _dask()
    _pyarrow()
    tok = _resolve_tokenizer(tokenizer)
    tasks = _tasks(src, split_row_groups)
    dst = dst.rstrip("/")
    run = dask.delayed(encode_parquet_file, pure=True)
    graph = [run(path, f"{dst}/part-{i:05d}.parquet", tok, column, out_column=out_column,
                 keep_columns=keep_columns, parse_special=parse_special, num_threads=num_threads,
                 row_groups=groups)
             for i, (path, groups) in enumerate(tasks)]
    start = time.perf_counter()
    results = dask.compute(*graph, scheduler=scheduler) if scheduler is not None else dask.compute(*graph)
    elapsed = time.perf_counter() - start
    totals = {k: sum(r[k] for r in results) for k in ("rows", "bytes", "tokens", "cpu_seconds")}
    totals.update(tasks=len(results), seconds=elapsed, MB_per_s=totals["bytes"] / 1e6 / max(elapsed, 1e-9),
                  workers=len({r["worker_pid"] for r in results}))
    return totals


__all__ = ["encode_parquet", "encode_parquet_file", "encode_table"]
