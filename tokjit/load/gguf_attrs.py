"""Token attributes as llama.cpp assigns them when it loads a GGUF vocabulary.

llama.cpp (``llama_vocab::impl::load``, ``src/llama-vocab.cpp`` at 0c1e570, the commit vendored by
llama-cpp-python 0.3.36) starts from ``tokenizer.ggml.token_type`` and then changes attributes by token
text and by model name, because converters do not always mark chat and FIM tokens as control. The
attributes are bit flags, so a promoted NORMAL token keeps its NORMAL bit beside CONTROL. What they
change for tokenizing:

* CONTROL | USER_DEFINED | UNKNOWN tokens are matched in the text before the model runs, longest text
  first; with ``parse_special=False`` tokens carrying CONTROL or UNKNOWN are skipped. So promoting a
  user-defined token to control stops it from being matched in untrusted text.
* LSTRIP / RSTRIP make a matched token swallow ASCII whitespace beside it.
* UGM (t5) builds its Viterbi trie from NORMAL | USER_DEFINED | UNUSED tokens, and a control token
  whose text contains "unused" gains UNUSED.

The rules, in llama.cpp's order (each table below is its list, comments name the models it cites):

1. EOT, EOM and the six FIM ids not given by their ``tokenizer.ggml.*_token_id`` key are found by
   text; the token found gains CONTROL.
2. A CONTROL token whose text contains "unused" gains UNUSED.
3. Every token whose text is in the end-of-generation list gains CONTROL.
4. gpt-oss's ``<|channel|>``, ``<|message|>``, ``<|start|>``, ``<|constrain|>`` become USER_DEFINED only.
5. With ``<|return|>`` + ``<|call|>``/``<|calls|>``, or ``<|call|>``/``<|calls|>`` + ``<|flush|>``, among the
   end-of-generation tokens, ``<|end|>`` becomes USER_DEFINED only (it is a turn separator there).
6. With ``<|tool_response>`` or ``<|plamo:eos|>`` among them, ``</s>`` becomes NORMAL only.
7. By name: jina-v2 pre types and nomic-bert-moe / jina-bert-v3 architectures give ``<mask>`` LSTRIP;
   a model name containing "phi-3"/"phi3" gives every matched token RSTRIP, and ``</s>`` too, except
   ``<unk>``, ``<s>``, ``<|endoftext|>``; "modern-bert" gives ``[MASK]`` LSTRIP.

Rule 1 visits tokens in ``std::unordered_map`` order and takes the first candidate of each kind, so
when a vocabulary holds two candidates of one kind (``<PRE>`` and ``▁<PRE>``) the one promoted depends
on the C++ library's string hash and bucket policy. tokjit replays libstdc++'s (Linux builds, the
reference here: :func:`unordered_map_order`); a llama.cpp built with libc++ (macOS) or MSVC may promote
the other one. One candidate per kind, the usual case, is the same everywhere.

Not mirrored, because llama.cpp's own result depends on the C++ standard library it was built with:

* Matched tokens of equal length are ordered by ``std::sort``, which is not stable; two equal-length
  tokens can only disagree where their texts overlap in the input (``ab`` / ``ba`` in ``aba``). tokjit
  takes the lower id first.

Not mirrored, rare: in a UGM vocabulary a NORMAL token promoted to CONTROL still takes part in
llama.cpp's unknown-token score (minimum over NORMAL bits) and a USER_DEFINED one keeps score 0; tokjit's
Unigram reads the final token type for both.
"""

from __future__ import annotations

import numpy as np

from tokjit.errors import ModelFileError
from tokjit.spec import TokenType

# llama_token_attr bits (include/llama.h)
ATTR_UNKNOWN = 1 << 0
ATTR_UNUSED = 1 << 1
ATTR_NORMAL = 1 << 2
ATTR_CONTROL = 1 << 3
ATTR_USER_DEFINED = 1 << 4
ATTR_BYTE = 1 << 5
ATTR_LSTRIP = 1 << 7
ATTR_RSTRIP = 1 << 8

#: tokens llama.cpp matches in the text before the model runs
ATTR_MATCHED = ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN
#: of those, the ones matched only with parse_special
ATTR_PARSE_SPECIAL_ONLY = ATTR_CONTROL | ATTR_UNKNOWN

# tokenizer.ggml.token_type -> attribute (types outside 0..6 are refused before this)
_TYPE_ATTR = np.array([0, ATTR_NORMAL, ATTR_UNKNOWN, ATTR_CONTROL, ATTR_USER_DEFINED, ATTR_UNUSED, ATTR_BYTE],
                      np.uint16)

# rule 1: kind -> (GGUF keys that name the id, texts that stand for it when no key does)
_FOUND_BY_TEXT = {
    "eot": (("eot_token_id",), ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
                                "<end_of_utterance>")),
    "eom": (("eom_token_id",), ("<|eom_id|>",)),
    "fim_pre": (("fim_pre_token_id", "prefix_token_id"),
                ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                 "<|code_prefix|>", "<|prefix|>")),
    "fim_suf": (("fim_suf_token_id", "suffix_token_id"),
                ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                 "<|code_suffix|>", "<|suffix|>")),
    "fim_mid": (("fim_mid_token_id", "middle_token_id"),
                ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                 "<|code_middle|>", "<|middle|>")),
    "fim_pad": (("fim_pad_token_id",), ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]")),
    "fim_rep": (("fim_rep_token_id",), ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>")),
    "fim_sep": (("fim_sep_token_id",), ("<|file_sep|>",)),
}

# rule 3: end-of-generation texts
_END_OF_GENERATION = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                      "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                      "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                      "<｜end▁of▁sentence｜>", "[e~[")

# rule 4
_ALWAYS_RENDERED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")


def token_attributes(strings: list[str], types: np.ndarray, meta, eos_id: int | None) -> np.ndarray:
    """llama.cpp's attribute bits (uint16) for every token; ``meta`` reads the GGUF keys."""
    n = len(strings)
    attrs = _TYPE_ATTR[types.astype(np.int64)]
    index = {s: i for i, s in enumerate(strings)}

    found: dict[str, int | None] = {}
    rank = None
    for kind, (keys, texts) in _FOUND_BY_TEXT.items():
        found[kind] = _key_id(meta, keys, n)
        if found[kind] is None:
            candidates = [index[t] for t in texts if t in index]
            if len(candidates) > 1 and rank is None:  # the first one llama.cpp's map iteration meets
                rank = {tid: r for r, tid in enumerate(unordered_map_order(strings))}
            if candidates:
                found[kind] = min(candidates, key=rank.__getitem__) if len(candidates) > 1 else candidates[0]
                attrs[found[kind]] |= ATTR_CONTROL

    for i in np.flatnonzero(attrs & ATTR_CONTROL).tolist():
        if "unused" in strings[i].split("\0", 1)[0]:  # strstr stops at a NUL
            attrs[i] |= ATTR_UNUSED

    end_of_generation = {found[k] for k in ("fim_pad", "fim_rep", "fim_sep", "eot", "eom")} | {eos_id}
    for text in _END_OF_GENERATION:
        i = index.get(text)
        if i is not None:
            end_of_generation.add(i)
            attrs[i] |= ATTR_CONTROL
    end_of_generation.discard(None)

    for text in _ALWAYS_RENDERED:
        if text in index:
            attrs[index[text]] = ATTR_USER_DEFINED

    eog_texts = {strings[i] for i in end_of_generation}
    has_call = "<|call|>" in eog_texts or "<|calls|>" in eog_texts
    if "<|end|>" in eog_texts and has_call and ("<|return|>" in eog_texts or "<|flush|>" in eog_texts):
        attrs[index["<|end|>"]] = ATTR_USER_DEFINED
    if "</s>" in eog_texts and ("<|tool_response>" in eog_texts or "<|plamo:eos|>" in eog_texts):
        attrs[index["</s>"]] = ATTR_NORMAL

    _strip_rules(strings, attrs, index, meta)
    return attrs


# libstdc++'s unordered_map: bucket count after inserting the k-th element, for each k that grows it
# (measured with g++ / libstdc++ on x86-64; the prime rehash policy has not changed in many releases)
_GROWTH = ((1, 13), (14, 29), (30, 59), (60, 127), (128, 257), (258, 541), (542, 1109), (1110, 2357),
           (2358, 5087), (5088, 10273), (10274, 20753), (20754, 42043), (42044, 85229), (85230, 172933),
           (172934, 351061), (351062, 712697), (712698, 1447153), (1447154, 2938679), (2938680, 5967347))
_MASK64 = (1 << 64) - 1
_MUL = (0xC6A4A793 << 32) + 0x5BD1E995


def _std_hash(data: bytes) -> int:
    """libstdc++'s ``std::hash<std::string>`` on 64-bit (``_Hash_bytes``, seed 0xc70f6907)."""
    n = len(data)
    aligned = n & ~7
    h = 0xC70F6907 ^ ((n * _MUL) & _MASK64)
    for p in range(0, aligned, 8):
        d = (int.from_bytes(data[p:p + 8], "little") * _MUL) & _MASK64
        d = ((d ^ (d >> 47)) * _MUL) & _MASK64
        h = ((h ^ d) * _MUL) & _MASK64
    if n & 7:
        h = ((h ^ int.from_bytes(data[aligned:], "little")) * _MUL) & _MASK64
    h = ((h ^ (h >> 47)) * _MUL) & _MASK64
    return h ^ (h >> 47)


def unordered_map_order(strings: list[str]) -> list[int]:
    """Ids in the order llama.cpp's ``token_to_id`` (``std::unordered_map<std::string, int>`` filled id by
    id) iterates them when built with libstdc++: its node list and bucket heads replayed insert by insert."""
    n = len(strings)
    if n > _GROWTH[-1][0]:
        raise ValueError("vocabulary larger than the measured bucket growth")
    hashes = [_std_hash(s.encode("utf-8")) for s in strings]
    head = n  # the list's before-begin node
    nxt = [-1] * (n + 1)
    n_buckets = 1
    buckets = [-1]  # bucket -> node before its first node
    growth = iter(_GROWTH)
    grow_at, grow_to = next(growth)
    for x in range(n):
        if x + 1 == grow_at:
            n_buckets = grow_to
            fresh = [-1] * n_buckets
            p = nxt[head]
            nxt[head] = -1
            first_bucket = 0
            while p != -1:
                after = nxt[p]
                b = hashes[p] % n_buckets
                if fresh[b] == -1:
                    nxt[p] = nxt[head]
                    nxt[head] = p
                    fresh[b] = head
                    if nxt[p] != -1:
                        fresh[first_bucket] = p
                    first_bucket = b
                else:
                    nxt[p] = nxt[fresh[b]]
                    nxt[fresh[b]] = p
                p = after
            buckets = fresh
            grow_at, grow_to = next(growth, (0, 0))
        b = hashes[x] % n_buckets
        if buckets[b] != -1:
            nxt[x] = nxt[buckets[b]]
            nxt[buckets[b]] = x
        else:
            nxt[x] = nxt[head]
            nxt[head] = x
            if nxt[x] != -1:
                buckets[hashes[nxt[x]] % n_buckets] = x
            buckets[b] = head
    order = []
    p = nxt[head]
    while p != -1:
        order.append(p)
        p = nxt[p]
    return order


def _key_id(meta, keys, n):
    out = None
    for key in keys:  # the deprecated spellings come later and, as in llama.cpp, win when present
        v = meta.integer(f"tokenizer.ggml.{key}")
        if v is not None and 0 <= v < n:  # llama.cpp ignores ids outside the vocabulary
            out = v
    return out


def _strip_rules(strings, attrs, index, meta):
    """Rule 7: strip flags chosen by tokenizer pre type, architecture or model name."""
    name = (meta.string("general.name") or "").encode("utf-8").lower().decode("utf-8")  # std::tolower: ASCII
    pre = meta.string("tokenizer.ggml.pre") or ""
    arch = meta.string("general.architecture") or ""
    if any(k in pre for k in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or \
            any(k in arch for k in ("nomic-bert-moe", "jina-bert-v3")):
        if "<mask>" in index:
            attrs[index["<mask>"]] |= ATTR_LSTRIP
    elif "phi-3" in name or "phi3" in name:
        attrs[(attrs & ATTR_MATCHED) != 0] |= ATTR_RSTRIP
        for text, on in (("</s>", True), ("<unk>", False), ("<s>", False), ("<|endoftext|>", False)):
            if text not in index:  # llama.cpp looks these up with .at() and fails to load
                raise ModelFileError(f"general.name {name!r} selects llama.cpp's phi-3 token rules, which need "
                                     f"the token {text!r}; llama.cpp cannot load this vocabulary",
                                     path=meta.path, where="tokenizer.ggml.tokens")
            if on:
                attrs[index[text]] |= ATTR_RSTRIP
            else:
                attrs[index[text]] &= ~np.uint16(ATTR_RSTRIP)
    elif "modern-bert" in name:
        if "[MASK]" in index:
            attrs[index["[MASK]"]] |= ATTR_LSTRIP


def types_from_attributes(types: np.ndarray, attrs: np.ndarray) -> np.ndarray:
    """One TokenType per token for the rest of tokjit: CONTROL wherever llama.cpp has the CONTROL bit
    (matched only with parse_special, empty in decode), USER_DEFINED / NORMAL where a rule reset the
    attribute to that alone, the file's type elsewhere."""
    out = types.copy()
    out[attrs == ATTR_USER_DEFINED] = TokenType.USER_DEFINED
    out[attrs == ATTR_NORMAL] = TokenType.NORMAL
    out[(attrs & ATTR_CONTROL) != 0] = TokenType.CONTROL
    return out
