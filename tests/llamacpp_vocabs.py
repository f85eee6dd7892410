"""Vectors written by llama.cpp itself (llama-cpp-python 0.3.36, llama.cpp 0c1e570) and the GGUF files
they were computed on, shared by ``scripts/gen_llamacpp_special_vectors.py`` and the tests.

Fixture files in ``tests/data/llamacpp-0c1e570/``:

* ``<vocab>.special.inp``: texts, separated by ``\\n__ggml_vocab_test__\\n`` like llama.cpp's ``.inp``;
* ``<vocab>.special.out``: one line of ids per text, ``tokenize(add_special=false, parse_special=true)``;
* ``<vocab>.special.noparse.out``: the same texts with ``parse_special=false``;
* ``<vocab>.corpus.refs`` / ``.corpus.out``: texts named by ``<corpus> <index>`` into the shared
  texts (:func:`ref_texts`), so no shared text is copied here, and their ids
  (``parse_special=false``); ``pre-<name>`` vocabularies share ``pre-types.corpus.refs``.

``<vocab>`` is a GGUF of ``../shared/data/gguf`` (``qwen2`` for ``ggml-vocab-qwen2.gguf``) or one that
:data:`BUILT_VOCABS` writes from a shared tokenizer file with the ``gguf`` package, as llama.cpp's
converter would.
"""

from __future__ import annotations

import functools
from pathlib import Path

FIXTURE_DIR = Path(__file__).resolve().parent / "data" / "llamacpp-0c1e570"
SEPARATOR = "\n__ggml_vocab_test__\n"

# llama.cpp reads the architecture's hyper-parameters even for a vocab-only load; these are the
# values of the shared ggml-vocab-llama-spm.gguf
_LLAMA_HPARAMS = {"block_count": 32, "context_length": 4096, "embedding_length": 4096,
                  "feed_forward_length": 11008, "head_count": 32, "head_count_kv": 32,
                  "layer_norm_rms_epsilon": 1e-5, "rope_dimension_count": 128}


def _writer(gguf, out_path: Path, name: str):
    w = gguf.GGUFWriter(str(out_path), arch="llama")
    w.add_name(name)
    h = _LLAMA_HPARAMS
    w.add_block_count(h["block_count"])
    w.add_context_length(h["context_length"])
    w.add_embedding_length(h["embedding_length"])
    w.add_feed_forward_length(h["feed_forward_length"])
    w.add_head_count(h["head_count"])
    w.add_head_count_kv(h["head_count_kv"])
    w.add_layer_norm_rms_eps(h["layer_norm_rms_epsilon"])
    w.add_rope_dimension_count(h["rope_dimension_count"])
    return w


def _finish(w, out_path: Path) -> Path:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out_path


def write_t5_gguf(shared: Path, out_path: Path, *, add_space_prefix: bool | None = None,
                  remove_extra_whitespaces: bool | None = None) -> Path:
    """A UGM vocabulary from ``hf/t5/spiece.model``, written as llama.cpp's T5 converter writes it
    (pieces, scores and types from sentencepiece, the normalizer's dummy-prefix / whitespace flags and
    precompiled charsmap, ids from the model); the two whitespace flags may be set otherwise."""
    import gguf
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    path = shared / "data" / "hf" / "t5" / "spiece.model"
    proto = pb.ModelProto()
    proto.ParseFromString(path.read_bytes())
    sp = spm.SentencePieceProcessor(model_file=str(path))
    tokens, scores, types = [], [], []
    T = gguf.TokenType
    for i in range(sp.vocab_size()):
        tokens.append(sp.IdToPiece(i).encode("utf-8"))
        scores.append(sp.GetScore(i))
        types.append(T.UNKNOWN if sp.IsUnknown(i) else T.CONTROL if sp.IsControl(i) else
                     T.UNUSED if sp.IsUnused(i) else T.BYTE if sp.IsByte(i) else T.NORMAL)
    w = _writer(gguf, out_path, "t5-spiece")
    w.add_tokenizer_model("t5")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    spec = proto.normalizer_spec
    w.add_add_space_prefix(spec.add_dummy_prefix if add_space_prefix is None else add_space_prefix)
    w.add_remove_extra_whitespaces(spec.remove_extra_whitespaces if remove_extra_whitespaces is None
                                   else remove_extra_whitespaces)
    if proto.normalizer_spec.precompiled_charsmap:
        w.add_precompiled_charsmap(proto.normalizer_spec.precompiled_charsmap)
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_pad_token_id(sp.pad_id())
    return _finish(w, out_path)


#: vocabularies written by a function of the shared data (name -> writer)
BUILT_VOCABS = {
    "t5-ugm": write_t5_gguf,
    # llama.cpp's UGM without merging spaces: its prefix goes before the first character that is not one
    "t5-ugm-keep-spaces": functools.partial(write_t5_gguf, remove_extra_whitespaces=False),
    "t5-ugm-keep-spaces-no-prefix": functools.partial(write_t5_gguf, add_space_prefix=False,
                                                      remove_extra_whitespaces=False),
}


def with_pre_type(src: Path, pre: str, out_path: Path, key: str = "tokenizer.ggml.pre") -> Path:
    """``src`` (a vocab-only GGUF, no tensors) with its ``tokenizer.ggml.pre`` string (or another string
    ``key``) replaced by ``pre``, so that one real vocabulary exercises every pre-tokenizer llama.cpp has."""
    import struct
    data = src.read_bytes()
    key = key.encode("utf-8")
    head = struct.pack("<Q", len(key)) + key + struct.pack("<I", 8)  # 8 = GGUF string
    at = data.index(head) + len(head)
    (old_len,) = struct.unpack_from("<Q", data, at)
    assert struct.unpack_from("<Q", data, 8)[0] == 0, "only tensor-free GGUFs can be patched in place"
    value = pre.encode("utf-8")
    out_path.write_bytes(data[:at] + struct.pack("<Q", len(value)) + value + data[at + 8 + old_len:])
    return out_path


def read_texts(path: Path) -> list[str]:
    with open(path, encoding="utf-8", newline="") as fh:  # texts hold "\r\n": no newline translation
        inp = fh.read()
    texts = inp.split(SEPARATOR)
    if inp.endswith(SEPARATOR):
        texts.pop()
    return texts


def write_texts(path: Path, texts: list[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("".join(t + SEPARATOR for t in texts))


def read_ids(path: Path) -> list[list[int]]:
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [[int(x) for x in line.split()] for line in lines]


def write_ids(path: Path, rows: list[list[int]]) -> None:
    path.write_text("".join(" ".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")


def read_refs(path: Path) -> list[tuple[str, int]]:
    return [(name, int(i)) for name, i in (line.split() for line in path.read_text().splitlines() if line)]


#: ``pre-<name>`` vocabularies: this shared GGUF with ``tokenizer.ggml.pre = <name>``
PRE_TYPE_BASE = "gpt-2"


def gguf_path(shared: Path, vocab: str, tmp_dir: Path) -> Path:
    """The GGUF a fixture was computed on (built into ``tmp_dir`` when it is not a shared file)."""
    if vocab in BUILT_VOCABS:
        return BUILT_VOCABS[vocab](shared, tmp_dir / f"{vocab}.gguf")
    if vocab.startswith("pre-"):
        base = shared / "data" / "gguf" / f"ggml-vocab-{PRE_TYPE_BASE}.gguf"
        return with_pre_type(base, vocab[len("pre-"):], tmp_dir / f"{vocab}.gguf")
    return shared / "data" / "gguf" / f"ggml-vocab-{vocab}.gguf"


def ref_texts() -> dict[str, list[str]]:
    """Texts that ``.corpus.refs`` files name: the shared corpora (``conftest.corpus_files``) and, as
    ``llamacpp-inp``, the test strings of the shared ``ggml-vocab-gpt-2.gguf.inp``."""
    from conftest import SHARED, corpus_files, gguf_vectors
    out = dict(corpus_files())
    out["llamacpp-inp"] = [t for t, _ in gguf_vectors(SHARED / "data" / "gguf" / f"ggml-vocab-{PRE_TYPE_BASE}.gguf")]
    return out


def refs_path(vocab: str) -> Path:
    """The ``.corpus.refs`` of a vocabulary; all ``pre-*`` vocabularies share ``pre-types.corpus.refs``."""
    return FIXTURE_DIR / ("pre-types.corpus.refs" if vocab.startswith("pre-") else f"{vocab}.corpus.refs")


def fixture_vocabs(kind: str) -> list[str]:
    """Vocabularies with fixtures of one kind: ``special`` (``.special.inp``) or ``corpus`` (``.corpus.out``)."""
    suffix = {"special": ".special.inp", "corpus": ".corpus.out"}[kind]
    return sorted(p.name[: -len(suffix)] for p in FIXTURE_DIR.glob("*" + suffix))


def write_gemma4_gguf(shared: Path, out_path: Path) -> Path:
    """A ``tokenizer.ggml.model = gemma4`` vocabulary (SentencePiece-style BPE on raw UTF-8, spaces as
    U+2581, ``<0xXX>`` byte fallback) from the Gemma 3 ``tokenizer.json``, written as llama.cpp's
    Gemma 4 converter writes one (``LlamaHfVocab`` tokens and types, its USER_DEFINED chat markers,
    merges and special ids from ``SpecialVocab``)."""
    import gguf
    src = shared / "data" / "hf" / "gemma3"
    vocab = gguf.LlamaHfVocab(src)
    visible = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
               '<|"|>'}
    tokens, scores, types = [], [], []
    for text, score, toktype in vocab.all_tokens():
        tokens.append(text)
        scores.append(score)
        types.append(gguf.TokenType.USER_DEFINED if text.decode() in visible else toktype)
    w = _writer(gguf, out_path, "gemma4-from-gemma3")
    w.add_tokenizer_model("gemma4")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    gguf.SpecialVocab(src, load_merges=True).add_to_gguf(w)
    w.add_add_space_prefix(False)
    w.add_add_bos_token(True)
    return _finish(w, out_path)


BUILT_VOCABS["gemma4"] = write_gemma4_gguf


def write_rwkv_gguf(shared: Path, out_path: Path) -> Path:
    """A ``tokenizer.ggml.model = rwkv`` vocabulary holding the byte strings of the shared gpt-2 GGUF's
    tokens, written as llama.cpp's RWKV-world converter writes its vocabulary (``<s>`` control at id 0,
    each token as the ``repr`` body of its bytes, bos = eos = 0)."""
    import gguf
    reader = gguf.GGUFReader(str(shared / "data" / "gguf" / f"ggml-vocab-{PRE_TYPE_BASE}.gguf"))
    field = reader.fields["tokenizer.ggml.tokens"]
    texts = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    # GPT-2's byte-to-unicode table, inverted
    visible = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    codes = visible + [256 + k for k in range(256 - len(visible))]
    byte_of = {chr(c): b for c, b in zip(codes, visible + [b for b in range(256) if b not in visible])}
    tokens, types = [b"<s>"], [gguf.TokenType.CONTROL]
    for t in texts:
        raw = bytes(byte_of[ch] for ch in t) if all(ch in byte_of for ch in t) else t.encode("utf-8")
        tokens.append(repr(raw)[2:-1].encode("utf-8"))
        types.append(gguf.TokenType.NORMAL)
    w = _writer(gguf, out_path, "rwkv-from-gpt2")
    w.add_tokenizer_model("rwkv")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    return _finish(w, out_path)


BUILT_VOCABS["rwkv"] = write_rwkv_gguf


def write_whitespace_gguf(shared: Path, out_path: Path) -> Path:
    """The shared gpt-2 GGUF as a ``tokenizer.ggml.model = whitespace`` vocabulary (llama.cpp drops the
    whitespace and runs the gpt-2 BPE on each run between it)."""
    base = shared / "data" / "gguf" / f"ggml-vocab-{PRE_TYPE_BASE}.gguf"
    return with_pre_type(base, "whitespace", out_path, key="tokenizer.ggml.model")


BUILT_VOCABS["whitespace"] = write_whitespace_gguf


# tokens appended to the gpt-2 vocabulary to meet every text rule of llama.cpp's loader:
# (text, GGUF token type) -- what llama.cpp makes of each is in tokjit/load/gguf_attrs.py
RULE_TOKENS = (
    ("<|channel|>", 3), ("<|message|>", 1),                       # gpt-oss: always USER_DEFINED
    ("<|return|>", 1), ("<|call|>", 1), ("<|end|>", 1),            # <|end|> USER_DEFINED beside these
    ("<|tool_response>", 1), ("</s>", 1),                          # </s> back to NORMAL beside it
    ("<PRE>", 1), ("▁<PRE>", 4), ("<|fim_middle|>", 1), ("<SUF>", 5),  # FIM kinds found by text
    ("<|fim_pad|>", 1),                                            # FIM pad named by key: stays NORMAL
    ("<ctl_unused_1>", 3), ("<|user_tok|>", 4), ("<eos>", 4),      # unused bit, user-defined, EOG list
    ("<end_of_turn>", 1), ("<|eom_id|>", 2), ("<unk>", 2), ("<s>", 3), ("[e~[", 1),
)


def _write_rules_gguf(shared: Path, out_path: Path, name: str) -> Path:
    import gguf
    reader = gguf.GGUFReader(str(shared / "data" / "gguf" / f"ggml-vocab-{PRE_TYPE_BASE}.gguf"))

    def strings(key):
        f = reader.fields[key]
        return [bytes(f.parts[i]) for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")
    types = [int(reader.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in
             reader.fields["tokenizer.ggml.token_type"].data]
    n = len(tokens)
    tokens += [t.encode("utf-8") for t, _ in RULE_TOKENS]
    types += [ty for _, ty in RULE_TOKENS]
    w = _writer(gguf, out_path, name)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(PRE_TYPE_BASE)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([m.decode("utf-8") for m in strings("tokenizer.ggml.merges")])
    w.add_bos_token_id(n - 1)
    w.add_eos_token_id(n - 1)
    w.add_uint32("tokenizer.ggml.fim_pad_token_id", n - 1)  # so <|fim_pad|> is not looked for by text
    return _finish(w, out_path)


BUILT_VOCABS["rules"] = lambda shared, out: _write_rules_gguf(shared, out, "text rules")
BUILT_VOCABS["rules-phi3"] = lambda shared, out: _write_rules_gguf(shared, out, "Phi-3 text rules")
