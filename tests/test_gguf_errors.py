"""Broken GGUF files: every corruption must end in ModelFileError (or UnsupportedComponentError for a
tokenizer llama.cpp itself would refuse), never a crash, hang or MemoryError.

Small files are written with the ``gguf`` package's own writer, so the intact ones are real GGUF.
"""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from tokjit.errors import ModelFileError, UnsupportedComponentError
from tokjit.api import load_bytes
from tokjit.load.gguf_file import read_gguf_metadata

gguf = pytest.importorskip("gguf")
T = gguf.GGUFValueType

BYTE_LEVEL = ["a", "b", "c", "ab", "Ġ", "Ġa", "<|end|>"] + [chr(c) for c in range(0x100, 0x110)]


def write_gguf(tmp_path, *, model="gpt2", pre="gpt-2", tokens=None, types=None, merges=("a b", "Ġ a"),
               extra=(), endianess=None, skip=()):
    """Bytes of a vocab-only GGUF. ``extra``: (key, value, vtype, sub_type) added as they are;
    ``skip``: standard keys left out."""
    path = tmp_path / "vocab.gguf"
    kw = {} if endianess is None else {"endianess": endianess}
    w = gguf.GGUFWriter(str(path), arch="llama", **kw)
    tokens = BYTE_LEVEL if tokens is None else tokens
    if "model" not in skip:
        w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    if "tokens" not in skip:
        w.add_token_list(tokens)
    if "types" not in skip:
        w.add_token_types(types if types is not None else [3 if t.startswith("<|") else 1 for t in tokens])
    if merges is not None and "merges" not in skip:
        w.add_token_merges(list(merges))
    for key, value, vtype, sub in extra:
        w.add_key_value(key, value, vtype, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    return path.read_bytes()


def outcome(data: bytes) -> str:
    """"ok" / "error" (a clean tokjit error); anything else propagates and fails the test."""
    try:
        tok = load_bytes(data, use_cache=False)
        tok.encode("ab a abc <|end|>")
    except (ModelFileError, UnsupportedComponentError):
        return "error"
    return "ok"


def test_intact_file_loads(tmp_path):
    data = write_gguf(tmp_path)
    tok = load_bytes(data, use_cache=False)
    assert list(tok.encode("ab a")) == [3, 5]


def test_big_endian_file_reads_like_little_endian(tmp_path):
    little = read_gguf_metadata(write_gguf(tmp_path))
    big = read_gguf_metadata(write_gguf(tmp_path, endianess=gguf.GGUFEndian.BIG))
    assert little.keys() == big.keys()
    tok = load_bytes(write_gguf(tmp_path, endianess=gguf.GGUFEndian.BIG), use_cache=False)
    assert list(tok.encode("ab a")) == [3, 5]


def test_truncated_at_every_offset(tmp_path):
    data = write_gguf(tmp_path)
    for cut in range(len(data)):
        with pytest.raises(ModelFileError):
            load_bytes(data[:cut], use_cache=False)


def test_truncated_real_file(shared):
    data = (shared / "data" / "gguf" / "ggml-vocab-llama-spm.gguf").read_bytes()
    rng = random.Random(1)
    cuts = list(range(0, 600, 7)) + rng.sample(range(600, len(data) - 64), 25)
    for cut in cuts:
        with pytest.raises(ModelFileError) as exc:
            read_gguf_metadata(data[:cut], path="llama-spm.gguf")
        assert "llama-spm.gguf" in str(exc.value)


def _patch(data: bytes, offset: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _key_offset(data: bytes, key: str) -> int:
    """Offset just after the key string (where the value type starts)."""
    needle = struct.pack("<Q", len(key)) + key.encode()
    pos = data.index(needle)
    return pos + len(needle)


@pytest.mark.parametrize("field,value", [
    ("version", 1), ("version", 4), ("version", 0x7FFFFFFF),
    ("n_kv", 2 ** 63), ("n_kv", 10 ** 6), ("n_kv", 0),
])
def test_lying_header(tmp_path, field, value):
    data = write_gguf(tmp_path)
    offset, fmt = {"version": (4, "<I"), "n_kv": (16, "<Q")}[field]
    with pytest.raises(ModelFileError):
        load_bytes(_patch(data, offset, fmt, value), use_cache=False)


def test_bad_magic(tmp_path):
    data = write_gguf(tmp_path)
    with pytest.raises(ModelFileError):
        read_gguf_metadata(b"GGUX" + data[4:])


@pytest.mark.parametrize("count", [2 ** 63, 2 ** 62, 2 ** 40, 10 ** 9, len(BYTE_LEVEL) + 1])
def test_lying_array_length(tmp_path, count):
    data = write_gguf(tmp_path)
    pos = _key_offset(data, "tokenizer.ggml.tokens")  # then u32 type, u32 element type, u64 count
    with pytest.raises(ModelFileError):
        load_bytes(_patch(data, pos + 8, "<Q", count), use_cache=False)


@pytest.mark.parametrize("length", [2 ** 64 - 1, 2 ** 63, 10 ** 12, 5000])
def test_lying_string_length(tmp_path, length):
    data = write_gguf(tmp_path)
    pos = _key_offset(data, "tokenizer.ggml.tokens") + 16  # first element's length
    with pytest.raises(ModelFileError):
        load_bytes(_patch(data, pos, "<Q", length), use_cache=False)
    pos = _key_offset(data, "tokenizer.ggml.model") + 4
    with pytest.raises(ModelFileError):
        load_bytes(_patch(data, pos, "<Q", length), use_cache=False)


def test_unknown_value_type(tmp_path):
    data = write_gguf(tmp_path)
    pos = _key_offset(data, "tokenizer.ggml.pre")
    with pytest.raises(ModelFileError, match="tokenizer.ggml.pre"):
        load_bytes(_patch(data, pos, "<I", 77), use_cache=False)


@pytest.mark.parametrize("skip", ["model", "tokens", "merges"])
def test_required_key_missing(tmp_path, skip):
    with pytest.raises(ModelFileError, match=f"tokenizer.ggml.{skip}"):
        load_bytes(write_gguf(tmp_path, skip=(skip,)), use_cache=False)


@pytest.mark.parametrize("key,value,vtype,sub,msg", [
    ("tokenizer.ggml.token_type", [1, 1], T.ARRAY, T.INT32, "token_type"),  # wrong length
    ("tokenizer.ggml.token_type", [1.0] * len(BYTE_LEVEL), T.ARRAY, T.FLOAT32, "token_type"),  # wrong type
    ("tokenizer.ggml.token_type", [9] * len(BYTE_LEVEL), T.ARRAY, T.INT32, "token_type"),  # no such type
    ("tokenizer.ggml.scores", ["x"] * len(BYTE_LEVEL), T.ARRAY, T.STRING, "scores"),
    ("tokenizer.ggml.scores", [float("nan")] * len(BYTE_LEVEL), T.ARRAY, T.FLOAT32, "scores"),
    ("tokenizer.ggml.merges", [1, 2], T.ARRAY, T.INT32, "merges"),
    ("tokenizer.ggml.add_bos_token", "yes", T.STRING, None, "add_bos_token"),
    ("tokenizer.ggml.bos_token_id", "1", T.STRING, None, "bos_token_id"),
    ("tokenizer.chat_template", 5, T.UINT32, None, "chat_template"),
])
def test_wrong_value_types(tmp_path, key, value, vtype, sub, msg):
    skip = {"tokenizer.ggml.token_type": ("types",), "tokenizer.ggml.merges": ("merges",)}.get(key, ())
    data = write_gguf(tmp_path, extra=[(key, value, vtype, sub)], skip=skip)
    with pytest.raises(ModelFileError, match=msg.replace(".", r"\.")):
        load_bytes(data, use_cache=False)


def test_tokens_not_strings(tmp_path):
    data = write_gguf(tmp_path, skip=("tokens", "types", "merges"),
                      extra=[("tokenizer.ggml.tokens", [1, 2, 3], T.ARRAY, T.INT32)])
    with pytest.raises(ModelFileError, match="tokenizer.ggml.tokens"):
        load_bytes(data, use_cache=False)


def test_duplicate_token(tmp_path):
    tokens = BYTE_LEVEL + ["ab"]
    with pytest.raises(ModelFileError, match="duplicate"):
        load_bytes(write_gguf(tmp_path, tokens=tokens), use_cache=False)


def test_add_bos_without_bos_token(tmp_path):
    # gpt2's default bos id 11 is outside this 8-token vocab, so there is no bos token
    data = write_gguf(tmp_path, tokens=BYTE_LEVEL[:8], extra=[("tokenizer.ggml.add_bos_token", True, T.BOOL, None)])
    with pytest.raises(ModelFileError, match="add_bos_token"):
        load_bytes(data, use_cache=False)


def test_unknown_pre_type_lists_known_ones(tmp_path):
    with pytest.raises(UnsupportedComponentError) as exc:
        load_bytes(write_gguf(tmp_path, pre="my-new-model"), use_cache=False)
    msg = str(exc.value)
    assert "my-new-model" in msg and "llama-bpe" in msg and "qwen2" in msg


def test_unknown_model_type_is_named(tmp_path):
    with pytest.raises(UnsupportedComponentError, match="'rwkv-9'"):
        load_bytes(write_gguf(tmp_path, model="rwkv-9"), use_cache=False)


def test_random_byte_corruption(tmp_path):
    """Random 1-3 byte changes of a small file: a clean error or a working tokenizer, nothing else."""
    rng = random.Random(0)
    for model, pre, merges in (("gpt2", "gpt-2", ("a b", "Ġ a")), ("llama", None, None),
                               ("bert", None, None)):
        data = write_gguf(tmp_path, model=model, pre=pre, merges=merges)
        for _ in range(300):
            b = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            outcome(bytes(b))


def test_deeply_nested_arrays(tmp_path):
    data = write_gguf(tmp_path)
    depth = 100_000
    key = b"general.nested"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<I", 9) + (struct.pack("<IQ", 9, 1) * depth)
    kv += struct.pack("<IQ", 4, 0)  # innermost: empty uint32 array
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    crafted = data[:16] + struct.pack("<Q", n_kv + 1) + data[24:] + kv
    with pytest.raises(ModelFileError, match="nested"):
        read_gguf_metadata(crafted)


def test_phi3_name_without_its_tokens(tmp_path):
    """A general.name with "phi3" selects llama.cpp's phi-3 strip rules, which look up </s>, <unk>, <s> and
    <|endoftext|> by text; llama.cpp fails to load a vocabulary without them, so tokjit refuses it too."""
    data = write_gguf(tmp_path, extra=[("general.name", "Phi3-like", T.STRING, None)])
    with pytest.raises(ModelFileError, match="phi-3"):
        load_bytes(data, use_cache=False)
