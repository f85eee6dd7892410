"""Every tokenizer in ``../shared`` with its reference and what its family guarantees; shared by
test_fuzz.py, test_roundtrip_all.py and scripts/fuzz_campaign.py.

Guarantees (``lossless``):

* ``"exact"``: byte-level BPE (tiktoken, GPT-2-style tokenizer.json, GGUF gpt2):
  ``decode(encode(s)) == s`` for every string without lone surrogates (those become U+FFFD on
  encode, as in tiktoken).
* ``"metaspace"``: SentencePiece-style BPE with byte fallback and no charsmap (gemma3, mistral,
  llama2, GGUF llama): ``decode(encode(s)) == s.replace("\u2581", " ")`` -- U+2581 is how these
  models spell a space, so a U+2581 in the input decodes as a space (the references agree).
* byte-level vocabularies missing a byte that valid UTF-8 can contain (GGUF falcon, starcoder,
  refact lack lead bytes such as 0xF1) drop it as llama.cpp does, so they are treated as lossy.
* ``None``: lossy families (Unigram with an NFKC-style charsmap and ``<unk>``, WordPiece lowercasing,
  BPE without byte fallback): only "same ids and same decode as the reference".
"""

from __future__ import annotations

import functools
import json

import tokjit
from conftest import shared_path


@functools.lru_cache(maxsize=None)
def _tiktoken_entries():
    return json.loads(shared_path("data", "tiktoken", "encodings.json").read_text())


class Target:
    def __init__(self, name, kind, parts=None, lossless=None, bundled=None):
        self.name, self.kind, self.parts, self.lossless, self.bundled = name, kind, parts, lossless, bundled

    def __repr__(self):
        return self.name

    @functools.cached_property
    def tok(self):
        if self.bundled:
            return tokjit.get_encoding(self.bundled)
        return tokjit.load(shared_path("data", *self.parts))

    @functools.cached_property
    def ref(self):
        """``Ref`` with ``encode(text)``, ``decode(ids)``, ``single(id)`` (bytes or str), or None."""
        if self.kind == "hf":
            import tokenizers
            return HFRef(tokenizers.Tokenizer.from_file(str(shared_path("data", *self.parts))))
        if self.kind == "spm":
            import sentencepiece as spm
            return SPMRef(spm.SentencePieceProcessor(model_file=str(shared_path("data", *self.parts))))
        if self.kind == "tiktoken":
            import tiktoken
            import tiktoken.load
            entry = _tiktoken_entries()[self.bundled]
            ranks = tiktoken.load.load_tiktoken_bpe(str(shared_path("data", "tiktoken", entry["ranks_file"]
                                                                    if "ranks_file" in entry else
                                                                    f"{self.bundled}.tiktoken")))
            return TiktokenRef(tiktoken.Encoding(self.bundled, pat_str=entry["pat_str"], mergeable_ranks=ranks,
                                                 special_tokens=entry["special_tokens"]))
        return None

    def encode(self, text):
        """tokjit's ids in the mode the reference uses (HF always splits added tokens)."""
        return self.tok.encode(text, parse_special=self.kind == "hf")


class HFRef:
    def __init__(self, tok):
        tok.no_truncation()
        tok.no_padding()
        self.tok = tok

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts):
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=False)

    def decode_skipping_special(self, ids):
        return self.tok.decode(ids, skip_special_tokens=True)

    def decode_singles(self, ids):
        return self.tok.decode_batch([[i] for i in ids], skip_special_tokens=False)


class SPMRef:
    def __init__(self, sp):
        self.sp = sp

    def encode(self, text):
        return self.sp.encode(text)

    def encode_batch(self, texts):
        return self.sp.encode(texts)

    def decode(self, ids):
        return self.sp.decode(ids)

    def decode_skipping_special(self, ids):
        # sentencepiece has no such switch; transformers' sentencepiece tokenizers drop BOS/EOS/UNK,
        # the model's control and unknown pieces
        sp = self.sp
        return sp.decode([i for i in ids if not (sp.IsControl(i) or sp.IsUnknown(i))])

    def decode_singles(self, ids):
        return [self.sp.decode([i]) for i in ids]


class TiktokenRef:
    def __init__(self, enc):
        self.enc = enc

    def encode(self, text):
        return self.enc.encode_ordinary(text)

    def encode_batch(self, texts):
        return self.enc.encode_ordinary_batch(texts)

    def decode(self, ids):
        return self.enc.decode(ids)

    def decode_skipping_special(self, ids):
        # tiktoken has no such switch: drop the ids of its own special tokens
        special = set(self.enc._special_tokens.values())
        return self.enc.decode([i for i in ids if i not in special])

    def decode_singles(self, ids):
        return [self.enc.decode_single_token_bytes(i) for i in ids]


TARGETS = [
    Target("o200k_base", "tiktoken", lossless="exact", bundled="o200k_base"),
    Target("cl100k_base", "tiktoken", lossless="exact", bundled="cl100k_base"),
    Target("p50k_base", "tiktoken", lossless="exact", bundled="p50k_base"),
    Target("r50k_base", "tiktoken", lossless="exact", bundled="r50k_base"),
    Target("llama3.json", "hf", ("hf", "llama3", "tokenizer.json"), "exact"),
    Target("gpt4o.json", "hf", ("hf", "gpt4o", "tokenizer.json"), "exact"),
    Target("gpt35turbo.json", "hf", ("hf", "gpt35turbo", "tokenizer.json"), "exact"),
    Target("gemma3.json", "hf", ("hf", "gemma3", "tokenizer.json"), "metaspace"),
    Target("mistral-7b.json", "hf", ("hf", "mistral-7b", "tokenizer.json"), "metaspace"),
    Target("t5.json", "hf", ("hf", "t5", "tokenizer.json")),
    Target("pegasus.json", "hf", ("hf", "pegasus", "tokenizer.json")),
    Target("envit5.json", "hf", ("hf", "envit5", "tokenizer.json")),
    Target("bert-minilm.json", "hf", ("hf", "bert-minilm", "tokenizer.json")),
    Target("llama2.model", "spm", ("spm", "llama2", "tokenizer.model"), "metaspace"),
    Target("mistral-7b.model", "spm", ("spm", "mistral-7b", "tokenizer.model"), "metaspace"),
    Target("t5-spiece.model", "spm", ("hf", "t5", "spiece.model")),
    Target("botchan-bpe.model", "spm", ("spm", "sentencepiece-tests", "botchan_en_bpe_1000.model")),
    Target("botchan-unigram.model", "spm", ("spm", "sentencepiece-tests", "botchan_en_unigram_1000.model")),
] + [
    Target(f"gguf-{n}", "gguf", ("gguf", f"ggml-vocab-{n}.gguf"),
           None if n == "bert-bge" else "metaspace" if n in ("llama-spm", "phi-3") else "exact")
    for n in ("gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "falcon", "mpt", "starcoder",
              "refact", "command-r", "llama-spm", "phi-3", "bert-bge")
]

BY_NAME = {t.name: t for t in TARGETS}


def specials(tok, limit=40) -> list[str]:
    """Text of special/added tokens (a sample for big sets), to mix into fuzz inputs."""
    items = sorted({t.content for t in tok.spec.added_tokens if t.content})
    if len(items) > limit:
        step = len(items) // limit
        items = items[::step][:limit]
    return items or ["<|endoftext|>"]


UTF8_BYTES = frozenset(range(0x00, 0xC0)) | frozenset(range(0xC2, 0xF5))


@functools.lru_cache(maxsize=None)
def has_every_utf8_byte(target: Target) -> bool:
    """Byte-level vocabularies round-trip only if every byte valid UTF-8 can contain has a token:
    falcon, starcoder and refact lack some lead bytes (e.g. 0xF1) and, like llama.cpp, drop them."""
    spec = target.tok.spec
    mask = spec.model_mask
    have = {t[0] for i, t in enumerate(spec.tokens) if len(t) == 1 and (mask is None or mask[i])}
    return UTF8_BYTES <= have


def expected_round_trip(target: Target, text: str) -> str | None:
    """What ``decode(encode(text))`` must give for the target's family, or None (lossy)."""
    text = repaired(text)
    if target.lossless == "exact":
        return text if has_every_utf8_byte(target) else None
    if target.lossless == "metaspace" and target.kind == "gguf" and any(
            t.content in text for t in target.tok.spec.added_tokens if not t.special):
        # llama.cpp gives the text after a user-defined token its own dummy-prefix space
        return None
    if target.lossless == "metaspace":
        return text.replace("\u2581", " ")
    return None


def repaired(text: str) -> str:
    """``text`` with lone surrogates as U+FFFD (what every tokenizer sees)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
