"""Corrupted tokenizer files of every format: a typed tokjit error naming the problem, or a tokenizer
that loads and encodes like the reference library loading the same bytes.

A generator derives, from small versions of the real files in ``../shared``, many broken files:
truncations at many offsets, bit flips, overwritten byte runs, and field edits that only make sense
per format (GGUF arrays of the wrong length or type, lying string lengths and element counts;
tokenizer.json keys removed or of the wrong type, null components, bad added tokens, corrupted
Precompiled charsmaps; .model protobufs with lying varint lengths, bad piece types, broken
charsmaps; .tiktoken duplicate ranks and bad base64).

Every file is loaded by a worker subprocess (this module run as a script), one family per worker,
with a per-file watchdog: a segfault, a hang, a ``MemoryError`` or any exception that is not a
``tokjit.TokjitError`` fails the test naming the file that caused it. Where the reference library
(``tokenizers``, ``sentencepiece``, ``tiktoken``) also accepts a corrupted file, tokjit must encode
the probe texts to the same ids. ``TOKJIT_CORRUPT_SCALE`` multiplies the number of random mutations
(the long campaign in ``scripts/fuzz_campaign.py`` raises it).
"""

from __future__ import annotations

import base64
import copy
import faulthandler
import json
import os
import random
import struct
import subprocess
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from conftest import SHARED  # noqa: E402

FAMILIES = ("tokenizer.json-bpe", "tokenizer.json-bytefallback", "tokenizer.json-unigram",
            "tokenizer.json-wordpiece", "sentencepiece-bpe", "sentencepiece-unigram", "tiktoken", "gguf-gpt2",
            "gguf-llama", "gguf-bert", "vocab.txt")

PROBES = ["Hello world", "  leading and   inner spaces\n\ttabs", "naïve café 日本語 😀 ﬁ", "<s> </s> <unk> [CLS]",
          "<|endoftext|> tail", "x" * 300, "1234567 89", "\u2581 \u00a0 \u200b", ""]

SCALE = float(os.environ.get("TOKJIT_CORRUPT_SCALE", "1"))
PER_FILE_TIMEOUT_S = 60


def data_path(*parts) -> Path:
    return SHARED.joinpath("data", *parts)


# ==================================================================================================
# Generic byte mutations
# ==================================================================================================

def byte_mutations(name: str, data: bytes, seed: int, n_cuts: int, n_flips: int):
    """Truncations (every offset of the first 64 bytes, then spread over the file), single bit flips
    and overwritten runs at seeded random positions."""
    rng = random.Random(seed)
    n = len(data)
    cuts = set(range(0, min(64, n)))
    cuts.update(rng.randrange(n) for _ in range(n_cuts))
    cuts.update(int(n * f) for f in (0.25, 0.5, 0.75, 0.999))
    cuts.discard(n)
    for cut in sorted(cuts):
        yield f"{name}:truncate@{cut}", data[:cut]
    for _ in range(n_flips):
        pos = rng.randrange(n)
        bit = rng.randrange(8)
        out = bytearray(data)
        out[pos] ^= 1 << bit
        yield f"{name}:flip@{pos}.{bit}", bytes(out)
    for _ in range(max(1, n_flips // 4)):
        pos = rng.randrange(n)
        length = rng.choice((1, 4, 8, 16, 64))
        fill = rng.choice((b"\x00", b"\xff", b"\x7f", b"\x80"))
        out = bytearray(data)
        out[pos:pos + length] = fill * len(out[pos:pos + length])
        yield f"{name}:fill@{pos}+{length}x{fill.hex()}", bytes(out)


def scaled(n: int) -> int:
    return max(1, int(n * SCALE))


# ==================================================================================================
# tokenizer.json
# ==================================================================================================

def _read_json(*parts):
    return json.loads(data_path(*parts).read_text(encoding="utf-8"))


def small_byte_level_bpe() -> dict:
    """llama3's pipeline with the 256 byte tokens, the first merges (closed under their parts) and
    the special tokens renumbered after them."""
    doc = _read_json("hf", "llama3", "tokenizer.json")
    model = doc["model"]
    inv = {i: s for s, i in model["vocab"].items()}
    vocab = {inv[i]: i for i in range(256)}
    merges = []
    for m in model["merges"][:600]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b not in vocab:
            vocab[a + b] = len(vocab)
            merges.append(f"{a} {b}")
    added = []
    for t in doc["added_tokens"][:8]:
        added.append(dict(t, id=len(vocab) + len(added)))
    doc["model"] = dict(model, vocab=vocab, merges=merges)
    doc["added_tokens"] = added
    doc["post_processor"] = {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": added[0]["content"], "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                             "special_tokens": {added[0]["content"]: {"id": added[0]["content"],
                                                                      "ids": [added[0]["id"]],
                                                                      "tokens": [added[0]["content"]]}}}
    return doc


def small_byte_fallback_bpe() -> dict:
    """mistral-7b's pipeline (Prepend/Replace normalizer, byte fallback) on its first 1200 pieces."""
    doc = _read_json("hf", "mistral-7b", "tokenizer.json")
    model = doc["model"]
    vocab = {s: i for s, i in model["vocab"].items() if i < 1200}
    merges = []
    for m in model["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(f"{a} {b}")
    doc["model"] = dict(model, vocab=vocab, merges=merges)
    doc["added_tokens"] = [t for t in doc["added_tokens"] if t["id"] < 1200]
    return doc


def small_unigram() -> dict:
    """t5's pipeline (Precompiled charsmap, Metaspace) on its first 1500 pieces."""
    doc = _read_json("hf", "t5", "tokenizer.json")
    doc["model"] = dict(doc["model"], vocab=doc["model"]["vocab"][:1500])
    doc["added_tokens"] = [t for t in doc["added_tokens"] if t["id"] < 1500]
    doc["truncation"] = doc["padding"] = None
    return doc


def small_wordpiece() -> dict:
    doc = _read_json("hf", "bert-minilm", "tokenizer.json")
    doc["model"] = dict(doc["model"], vocab={s: i for s, i in doc["model"]["vocab"].items() if i < 3000})
    doc["truncation"] = doc["padding"] = None
    return doc


def _set(doc, path, value):
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        if isinstance(node, dict):
            node.pop(path[-1], None)
        else:
            del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


_DELETE = object()
WRONG_VALUES = [None, 0, -1, 2**63, 1.5, "", "x", [], [1, 2], {}, {"type": None}, {"type": "NoSuchThing"}, True]


def json_edits(name: str, doc: dict):
    """Field edits: every component and model key removed, nulled or of the wrong type, and
    targeted lies in vocab/merges/added tokens/charsmaps."""
    model = doc["model"]
    for key in list(doc):
        yield f"{name}:del.{key}", _set(doc, [key], _DELETE)
    for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder", "added_tokens", "model"):
        for i, v in enumerate(WRONG_VALUES):
            yield f"{name}:{key}={json.dumps(v)[:20]}#{i}", _set(doc, [key], v)
    for key in list(model):
        yield f"{name}:del.model.{key}", _set(doc, ["model", key], _DELETE)
        for i, v in enumerate(WRONG_VALUES):
            yield f"{name}:model.{key}={json.dumps(v)[:20]}#{i}", _set(doc, ["model", key], v)
    yield f"{name}:extra-keys", dict(copy.deepcopy(doc), future_field={"a": 1}, version="9.9")
    yield f"{name}:model-extra-key", _set(doc, ["model", "something_new"], [1, 2, 3])
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        items = list(vocab.items())
        yield f"{name}:vocab-as-list", _set(doc, ["model", "vocab"], [k for k, _ in items])
        yield f"{name}:vocab-pairs", _set(doc, ["model", "vocab"], [[k, v] for k, v in items])
        for i, bad in enumerate((-1, 2**40, "7", None, 1.5, 0)):
            k = items[len(items) // 2][0]
            yield f"{name}:vocab-id={bad!r}#{i}", _set(doc, ["model", "vocab", k], bad)
        yield f"{name}:vocab-sparse", _set(doc, ["model", "vocab"], {k: v * 1000 for k, v in items})
    elif isinstance(vocab, list):
        yield f"{name}:vocab-as-dict", _set(doc, ["model", "vocab"], {p: i for i, (p, _) in enumerate(vocab)})
        for i, bad in enumerate(([], ["a"], ["a", "b"], [1, 2], ["a", None], ["a", float("inf")], None, "ab",
                                 ["a", 1.0, 2])):
            yield f"{name}:vocab-entry#{i}", _set(doc, ["model", "vocab", len(vocab) // 2], bad)
        yield f"{name}:unk_id-big", _set(doc, ["model", "unk_id"], len(vocab) + 5)
        yield f"{name}:unk_id-neg", _set(doc, ["model", "unk_id"], -1)
    merges = model.get("merges")
    if merges:
        yield f"{name}:merges-ints", _set(doc, ["model", "merges"], list(range(len(merges))))
        for i, bad in enumerate(("a", "a b c", "", ["x"], ["a", "b", "c"], 7, None, ["Ġ", "nosuch"], [1, 2])):
            yield f"{name}:merge#{i}", _set(doc, ["model", "merges", len(merges) // 2], bad)
        yield f"{name}:merges-dup", _set(doc, ["model", "merges"], merges + merges[:10])
    added = doc.get("added_tokens") or []
    if added:
        for i, bad in enumerate((-1, 10**12, "x", None, 1.5, 2**31, 0)):
            yield f"{name}:added-id={bad!r}#{i}", _set(doc, ["added_tokens", 0, "id"], bad)
        for i, bad in enumerate((None, 5, "", ["a"])):
            yield f"{name}:added-content#{i}", _set(doc, ["added_tokens", 0, "content"], bad)
        yield f"{name}:added-missing-id", _set(doc, ["added_tokens", 0, "id"], _DELETE)
        yield f"{name}:added-dup", _set(doc, ["added_tokens"], added + [dict(added[0], content="<dup>")])
        yield f"{name}:added-flags-wrong", _set(doc, ["added_tokens", 0], dict(added[0], lstrip="yes", special=None))
        yield f"{name}:added-not-list", _set(doc, ["added_tokens"], {"0": added[0]})
    for key in ("normalizer", "pre_tokenizer", "decoder", "post_processor"):
        comp = doc.get(key)
        if not isinstance(comp, dict):
            continue
        for sub in list(comp):
            if sub == "type":
                continue
            yield f"{name}:del.{key}.{sub}", _set(doc, [key, sub], _DELETE)
            for i, v in enumerate((None, 5, "x", [None], {"type": "Nope"})):
                yield f"{name}:{key}.{sub}#{i}", _set(doc, [key, sub], v)
        for list_key in ("normalizers", "pretokenizers", "decoders", "processors"):
            if isinstance(comp.get(list_key), list) and comp[list_key]:
                for i, v in enumerate((None, {}, {"type": None}, 3, "Strip")):
                    yield f"{name}:{key}.{list_key}[0]#{i}", _set(doc, [key, list_key, 0], v)
    yield from charsmap_edits(name, doc)
    yield from split_regex_edits(name, doc)


def _find_components(node, path=()):
    """Yield (path, component dict) for every dict with a "type" key inside ``node``."""
    if isinstance(node, dict):
        if "type" in node:
            yield path, node
        for k, v in node.items():
            yield from _find_components(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _find_components(v, path + (i,))


def charsmap_edits(name, doc):
    """Precompiled normalizers with corrupted blobs: bad base64, truncated, lying sizes and offsets."""
    for path, comp in list(_find_components(doc)):
        if comp.get("type") != "Precompiled" or not isinstance(comp.get("precompiled_charsmap"), str):
            continue
        blob = base64.b64decode(comp["precompiled_charsmap"])
        target = list(path) + ["precompiled_charsmap"]
        yield f"{name}:charsmap-not-base64", _set(doc, target, "!!not base64!!")
        yield f"{name}:charsmap-empty", _set(doc, target, "")
        yield f"{name}:charsmap-null", _set(doc, target, None)
        for label, bad in charsmap_blob_mutations(blob, seed=len(name)):
            yield f"{name}:charsmap-{label}", _set(doc, target, base64.b64encode(bad).decode())


def charsmap_blob_mutations(blob: bytes, seed: int):
    """The charsmap blob is ``u32 trie size | XCDA trie units | normalized strings``: lie in the
    size, cut it, and scribble over trie units so offsets point outside the strings."""
    rng = random.Random(seed)
    (trie_size,) = struct.unpack_from("<I", blob, 0)
    for lie in (0, 1, 3, trie_size + 4, trie_size - 4, len(blob), len(blob) + 100, 2**31, 2**32 - 1):
        yield f"size={lie}", struct.pack("<I", lie & 0xFFFFFFFF) + blob[4:]
    for cut in (0, 2, 4, 5, 8, 4 + trie_size // 2, 4 + trie_size, 4 + trie_size + 1, len(blob) - 1):
        yield f"cut@{cut}", blob[:cut]
    n_units = trie_size // 4
    for _ in range(scaled(24)):
        unit = rng.randrange(n_units)
        value = rng.choice((0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, rng.getrandbits(32), 0))
        out = bytearray(blob)
        struct.pack_into("<I", out, 4 + unit * 4, value)
        yield f"unit[{unit}]={value:#x}", bytes(out)
    yield "no-strings", blob[:4 + trie_size]
    yield "strings-garbage", blob[:4 + trie_size] + bytes(rng.getrandbits(8) for _ in range(len(blob) - 4 - trie_size))


def split_regex_edits(name, doc):
    for path, comp in list(_find_components(doc)):
        if comp.get("type") == "Split" and isinstance(comp.get("pattern"), dict):
            for i, pat in enumerate(("(", "[a-", "\\p{NoSuchCategory}", "(?<=a+)b", "a{99999999}", "", "(?P<x>a)(?P<x>b)")):
                yield f"{name}:split-regex#{i}", _set(doc, list(path) + ["pattern"], {"Regex": pat})
            yield f"{name}:split-behavior", _set(doc, list(path) + ["behavior"], "Sideways")


# a placeholder written into one string, then replaced in the JSON text by text that parses
# to a lone surrogate
_MARK = "@@surrogate@@"
LONE_SURROGATES = {"lone-high": b"\\ud800", "lone-low": b"\\uDC00", "swapped-pair": b"\\ude00\\ud83d",
                   "high-then-text": b"\\ud83dx", "escaped-backslash-then-low": b"\\\\ud83d\\ude00",
                   # not an escape but UTF-8's form of U+D800, which json.loads also lets through
                   "utf8-encoded": b"\xed\xa0\x80"}
VALID_PAIR = b"\\ud83d\\ude00"  # an escaped emoji: valid JSON text that HF loads


def _json_path(path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _marked_strings(doc: dict):
    """(JSON path, doc with _MARK added to one string under it) for every kind of string a
    tokenizer.json holds: a vocab key or piece, a merge, an added token, each component's string
    fields and patterns, a post-processor special token, a field no loader reads."""
    model = doc["model"]
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        items = list(vocab.items())
        key = items[len(items) // 2][0]
        yield "model.vocab", _set(doc, ["model", "vocab"], {(k + _MARK if k == key else k): v for k, v in items})
    elif isinstance(vocab, list):
        mid = len(vocab) // 2
        yield f"model.vocab[{mid}]", _set(doc, ["model", "vocab", mid], [vocab[mid][0] + _MARK, vocab[mid][1]])
    merges = model.get("merges")
    if merges:
        mid = len(merges) // 2
        m = merges[mid]
        yield f"model.merges[{mid}]", _set(doc, ["model", "merges", mid],
                                           m + _MARK if isinstance(m, str) else [m[0], m[1] + _MARK])
    for key in ("unk_token", "continuing_subword_prefix"):
        if isinstance(model.get(key), str):
            yield f"model.{key}", _set(doc, ["model", key], model[key] + _MARK)
    if doc.get("added_tokens"):
        yield "added_tokens[0].content", _set(doc, ["added_tokens", 0, "content"],
                                              doc["added_tokens"][0]["content"] + _MARK)
    for stage in ("normalizer", "pre_tokenizer", "decoder", "post_processor"):
        for path, comp in _find_components(doc.get(stage), (stage,)):
            for field, value in comp.items():
                if field != "type" and isinstance(value, str):
                    yield _json_path(path + (field,)), _set(doc, list(path) + [field], value + _MARK)
                elif field == "pattern" and isinstance(value, dict) and len(value) == 1:
                    (kind, text), = value.items()
                    yield _json_path(path + (field,)), _set(doc, list(path) + [field], {kind: text + _MARK})
    special = (doc.get("post_processor") or {}).get("special_tokens")
    if isinstance(special, dict) and special:
        name, entry = next(iter(special.items()))
        yield "post_processor.special_tokens", _set(doc, ["post_processor", "special_tokens", name],
                                                    dict(entry, tokens=[t + _MARK for t in entry["tokens"]]))
    yield "future_field", dict(copy.deepcopy(doc), future_field=_MARK)


def surrogate_cases(family: str, doc: dict):
    """Lone UTF-16 surrogate escapes (valid JSON, not Unicode text) in every kind of string, and an
    escaped valid pair in the same places, which must load like the reference."""
    for where, marked in _marked_strings(doc):
        text = json.dumps(marked, ensure_ascii=False).encode("utf-8")
        assert text.count(_MARK.encode()) == 1, where
        for label, escape in LONE_SURROGATES.items():
            yield f"{family}:{label}-surrogate@{where}", text.replace(_MARK.encode(), escape)
        yield f"{family}:escaped-pair@{where}", text.replace(_MARK.encode(), VALID_PAIR)


def tokenizer_json_cases(family: str):
    doc = TOKENIZER_JSON_BUILDERS[family]()
    base = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    yield "base", base
    yield from byte_mutations(family, base, seed=sum(family.encode()), n_cuts=scaled(30), n_flips=scaled(40))
    for label, edited in json_edits(family, doc):
        yield label, json.dumps(edited, ensure_ascii=False).encode("utf-8")
    yield f"{family}:not-an-object", b"[1, 2, 3]"
    yield f"{family}:nan", base.replace(b"-", b"NaN", 1)
    yield f"{family}:deep", b"{" + b'"a":[' * 100_000 + b"]" * 100_000 + b"}"
    yield f"{family}:bom", b"\xef\xbb\xbf" + base
    yield f"{family}:utf16", json.dumps(doc).encode("utf-16")
    yield from surrogate_cases(family, doc)


TOKENIZER_JSON_BUILDERS = {"tokenizer.json-bpe": small_byte_level_bpe,
                           "tokenizer.json-bytefallback": small_byte_fallback_bpe,
                           "tokenizer.json-unigram": small_unigram, "tokenizer.json-wordpiece": small_wordpiece}


# ==================================================================================================
# SentencePiece .model
# ==================================================================================================

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(data: bytes):
    """Top-level (field number, wire type, start of key, start of value, end) of a protobuf."""
    pos = 0
    out = []
    while pos < len(data):
        key_at = pos
        key = 0
        shift = 0
        while True:
            b = data[pos]
            pos += 1
            key |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        number, wire = key >> 3, key & 7
        if wire == 0:
            while data[pos] & 0x80:
                pos += 1
            pos += 1
            out.append((number, wire, key_at, key_at, pos))
            continue
        if wire == 2:
            n = 0
            shift = 0
            while True:
                b = data[pos]
                pos += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if b < 0x80:
                    break
            out.append((number, wire, key_at, pos, pos + n))
            pos += n
            continue
        size = 4 if wire == 5 else 8
        out.append((number, wire, key_at, pos, pos + size))
        pos += size
    return out


def sentencepiece_cases(family: str):
    from sentencepiece import sentencepiece_model_pb2 as pb

    name = "botchan_en_bpe_1000.model" if family == "sentencepiece-bpe" else "botchan_en_unigram_1000.model"
    base = data_path("spm", "sentencepiece-tests", name).read_bytes()
    yield "base", base
    yield from byte_mutations(family, base, seed=len(family), n_cuts=scaled(60), n_flips=scaled(80))
    # cut inside every kind of top-level field, and lie about each length-delimited field's length
    fields = _fields(base)
    rng = random.Random(7)
    chosen = [f for f in fields if f[0] != 1] + rng.sample([f for f in fields if f[0] == 1], 12)
    for number, wire, key_at, value_at, end in chosen:
        yield f"{family}:cut-in-field{number}@{key_at}", base[:value_at + (end - value_at) // 2]
        if wire == 2:
            true_len = end - value_at
            for lie in (true_len + 1, true_len + 1000, 2**31, 2**62, 2**64 - 1):
                yield (f"{family}:field{number}@{key_at}-len={lie}",
                       base[:key_at] + _varint((number << 3) | 2) + _varint(lie) + base[value_at:])
    yield f"{family}:varint-11-bytes", b"\x0a" + b"\xff" * 10 + b"\x01" + base[3:]
    yield f"{family}:wire-type-3", b"\x0b" + base[1:]
    yield f"{family}:field-0", b"\x02\x00" + base

    proto = pb.ModelProto()
    proto.ParseFromString(base)

    def edited(label, fn):
        m = pb.ModelProto()
        m.CopyFrom(proto)
        fn(m)
        return f"{family}:{label}", m.SerializeToString()

    def set_attr(obj_path, attr, value):
        def fn(m):
            obj = m
            for p in obj_path:
                obj = getattr(obj, p)
            setattr(obj, attr, value)
        return fn

    yield edited("no-pieces", lambda m: m.ClearField("pieces"))
    yield edited("piece-type-99", lambda m: m.pieces[10].MergeFromString(b"\x18\x63"))
    yield edited("piece-type-0", lambda m: m.pieces[10].MergeFromString(b"\x18\x00"))
    yield edited("piece-score-nan", lambda m: setattr(m.pieces[20], "score", float("nan")))
    yield edited("piece-score-inf", lambda m: setattr(m.pieces[20], "score", float("inf")))
    yield edited("piece-empty", lambda m: setattr(m.pieces[30], "piece", ""))
    yield edited("piece-dup", lambda m: setattr(m.pieces[31], "piece", m.pieces[32].piece))
    yield edited("piece-invalid-utf8", lambda m: m.pieces[33].MergeFromString(b"\x0a\x02\xff\xfe"))
    yield edited("piece-surrogate-utf8", lambda m: m.pieces[33].MergeFromString(b"\x0a\x04a\xed\xa0\x80"))
    yield edited("two-unk", lambda m: setattr(m.pieces[40], "type", 2))
    yield edited("no-unk", lambda m: setattr(m.pieces[0], "type", 1))
    yield edited("unk-is-byte", lambda m: setattr(m.pieces[0], "type", 6))
    yield edited("byte-piece-bad-name", lambda m: setattr(m.pieces[50], "type", 6))
    yield edited("byte-fallback-without-bytes", lambda m: setattr(m.trainer_spec, "byte_fallback", True))
    for mt in (0, 3, 4, 5, 99):
        yield edited(f"model_type={mt}", lambda m, mt=mt: m.trainer_spec.MergeFromString(b"\x18" + _varint(mt)))
    for key in ("unk_id", "bos_id", "eos_id", "pad_id"):
        for v in (-5, 10**6, 2**31 - 1):
            yield edited(f"{key}={v}", set_attr(["trainer_spec"], key, v))
    for key in ("unk_piece", "bos_piece", "eos_piece", "unk_surface"):
        yield edited(f"{key}-empty", set_attr(["trainer_spec"], key, ""))
    yield edited("vocab_size-lie", set_attr(["trainer_spec"], "vocab_size", 10**9))
    yield edited("all-flags-flipped", lambda m: (
        setattr(m.normalizer_spec, "add_dummy_prefix", not m.normalizer_spec.add_dummy_prefix),
        setattr(m.normalizer_spec, "remove_extra_whitespaces", not m.normalizer_spec.remove_extra_whitespaces),
        setattr(m.trainer_spec, "treat_whitespace_as_suffix", True)))
    yield edited("escape-off", set_attr(["normalizer_spec"], "escape_whitespaces", False))
    yield edited("user-defined-empty-ish", lambda m: (setattr(m.pieces[60], "type", 4),
                                                       setattr(m.pieces[60], "piece", "\u2581")))
    blob = proto.normalizer_spec.precompiled_charsmap
    if blob:
        for label, bad in charsmap_blob_mutations(blob, seed=3):
            yield edited(f"charsmap-{label}", set_attr(["normalizer_spec"], "precompiled_charsmap", bad))
            yield edited(f"denorm-charsmap-{label}",
                         set_attr(["denormalizer_spec"], "precompiled_charsmap", bad))


# ==================================================================================================
# .tiktoken
# ==================================================================================================

def tiktoken_cases(family: str):
    lines = data_path("tiktoken", "r50k_base.tiktoken").read_bytes().splitlines()[:1200]
    base = b"\n".join(lines) + b"\n"
    yield "base", base
    yield from byte_mutations(family, base, seed=11, n_cuts=scaled(40), n_flips=scaled(60))
    edits = {
        "dup-rank": lines + [base64.b64encode(b"zzqq") + b" 5"],
        "dup-token": lines + [lines[300].split()[0] + b" 5000"],
        "bad-base64": lines[:500] + [b"!!!! 500"] + lines[501:],
        "bad-padding": lines[:500] + [b"YWJj= 500"] + lines[501:],
        "neg-rank": lines[:500] + [lines[500].split()[0] + b" -3"] + lines[501:],
        "huge-rank": lines[:500] + [lines[500].split()[0] + b" 99999999999999"] + lines[501:],
        "rank-float": lines[:500] + [lines[500].split()[0] + b" 5.0"] + lines[501:],
        "three-cols": lines[:500] + [lines[500] + b" extra"] + lines[501:],
        "one-col": lines[:500] + [lines[500].split()[0]] + lines[501:],
        "missing-byte": lines[:65] + lines[66:],
        "sparse-ranks": [ln.split()[0] + b" " + str(int(ln.split()[1]) * 7).encode() for ln in lines],
        "crlf": [ln + b"\r" for ln in lines],
        "blank-lines": [x for ln in lines for x in (ln, b"")],
        "nul": lines[:500] + [b"\x00\x00 500"] + lines[501:],
        "empty-token": lines[:500] + [b"= 500"] + lines[501:],
        "unicode-junk": lines[:500] + ["ÿÿ 500".encode()] + lines[501:],
        # tiktoken tokens are bytes, not text: the UTF-8 form of a surrogate is an ordinary token
        "surrogate-bytes-token": lines + [base64.b64encode(b"\xed\xa0\x80") + b" 1200"],
        "only-bytes": lines[:256],
    }
    for label, ls in edits.items():
        yield f"{family}:{label}", b"\n".join(ls) + b"\n"


# ==================================================================================================
# GGUF (own minimal writer, so every field can lie)
# ==================================================================================================

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
_FMT = {T_U8: "B", T_I8: "b", T_U16: "H", T_I16: "h", T_U32: "I", T_I32: "i", T_F32: "f", T_BOOL: "B",
        T_U64: "Q", T_I64: "q", T_F64: "d"}


def gguf_read(data: bytes) -> list:
    """[(key, vtype, value)] with arrays as (etype, list) — a plain reader for building test files."""
    pos = 24
    (n_kv,) = struct.unpack_from("<Q", data, 16)

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        s = data[pos + 8:pos + 8 + n]
        pos += 8 + n
        return s

    def value(vt):
        nonlocal pos
        if vt == T_STR:
            return string()
        if vt == T_ARR:
            et, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            return (et, [value(et) for _ in range(count)])
        fmt = _FMT[vt]
        v = struct.unpack_from("<" + fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    out = []
    for _ in range(n_kv):
        key = string().decode()
        (vt,) = struct.unpack_from("<I", data, pos)
        pos += 4
        out.append((key, vt, value(vt)))
    return out


def gguf_write(kvs: list, *, version=3, n_tensors=0, n_kv=None, lie=None) -> bytes:
    """Serialize [(key, vtype, value)]; ``lie`` = (key, kind, number) replaces one length field."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, n_tensors, len(kvs) if n_kv is None else n_kv))

    def string(s: bytes, lied=None):
        out.extend(struct.pack("<Q", len(s) if lied is None else lied))
        out.extend(s)

    def value(vt, v, key):
        if vt == T_STR:
            lied = lie[2] if lie and lie[0] == key and lie[1] == "strlen" else None
            string(v, lied)
        elif vt == T_ARR:
            et, items = v
            count = lie[2] if lie and lie[0] == key and lie[1] == "count" else len(items)
            out.extend(struct.pack("<IQ", et, count))
            for i, item in enumerate(items):
                if et == T_STR and lie and lie[0] == key and lie[1] == "elemlen" and i == len(items) // 2:
                    string(item, lie[2])
                else:
                    value(et, item, None)
        elif vt in _FMT:
            out.extend(struct.pack("<" + _FMT[vt], v))
        # an unknown value type has no encoding: nothing follows it

    for key, vt, v in kvs:
        string(key.encode())
        out.extend(struct.pack("<I", vt))
        value(vt, v, key)
    return bytes(out)


def small_gguf(name: str, n_tokens: int) -> list:
    kvs = gguf_read(data_path("gguf", name).read_bytes())
    out = []
    for key, vt, v in kvs:
        if vt == T_ARR and key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
            v = (v[0], v[1][:n_tokens])
        elif key == "tokenizer.ggml.merges":
            kept = {t for t in dict((k, x) for k, _, x in kvs)["tokenizer.ggml.tokens"][1][:n_tokens]}
            merges = []
            for m in v[1]:
                a, _, b = m.partition(b" ")
                if a in kept and b in kept and a + b in kept:
                    merges.append(m)
            v = (v[0], merges)
        elif key.endswith("_token_id") and isinstance(v, int) and v >= n_tokens:
            v = n_tokens - 1
        out.append((key, vt, v))
    return out


def gguf_cases(family: str):
    source = {"gguf-gpt2": ("ggml-vocab-gpt-2.gguf", 1500), "gguf-llama": ("ggml-vocab-llama-spm.gguf", 1200),
              "gguf-bert": ("ggml-vocab-bert-bge.gguf", 3000)}[family]
    kvs = small_gguf(*source)
    base = gguf_write(kvs)
    yield "base", base
    yield from byte_mutations(family, base, seed=17, n_cuts=scaled(50), n_flips=scaled(80))
    for version in (0, 1, 4, 2**31):
        yield f"{family}:version={version}", gguf_write(kvs, version=version)
    for n_kv in (0, len(kvs) + 1, 2**32, 2**63):
        yield f"{family}:n_kv={n_kv}", gguf_write(kvs, n_kv=n_kv)
    yield f"{family}:n_tensors-huge", gguf_write(kvs, n_tensors=2**63)
    yield f"{family}:big-endian-header", b"GGUF" + struct.pack(">IQQ", 3, 0, len(kvs)) + gguf_write(kvs)[24:]
    index = {k: i for i, (k, _, _) in enumerate(kvs)}
    for key, vt, v in kvs:
        if not key.startswith("tokenizer."):
            continue
        without = [kv for kv in kvs if kv[0] != key]
        yield f"{family}:del.{key}", gguf_write(without)
        if vt == T_ARR:
            et, items = v
            for lie in (len(items) + 1, len(items) * 4, 2**32, 2**62, 2**64 - 1):
                yield f"{family}:{key}.count={lie}", gguf_write(kvs, lie=(key, "count", lie))
            if et == T_STR:
                for lie in (2**63, 2**40, len(items[len(items) // 2]) + 3):
                    yield f"{family}:{key}.elemlen={lie}", gguf_write(kvs, lie=(key, "elemlen", lie))
            for label, nv in (("short", (et, items[:-7])), ("long", (et, items + items[:3])), ("empty", (et, [])),
                              ("as-i32", (T_I32, list(range(len(items))))), ("as-f32", (T_F32, [0.5] * len(items))),
                              ("as-str", (T_STR, [b"x"] * len(items))), ("as-bool", (T_BOOL, [1] * len(items))),
                              ("as-u64", (T_U64, [2**63] * len(items))),
                              ("nested", (T_ARR, [(T_U8, [1, 2])] * 3)), ("etype-99", (99, []))):
                if nv[0] == et and label.startswith("as-"):
                    continue
                kv2 = list(kvs)
                kv2[index[key]] = (key, T_ARR, nv)
                yield f"{family}:{key}-{label}", gguf_write(kv2)
            if key == "tokenizer.ggml.token_type":
                for bad in (-1, 7, 99, 2**31 - 1):
                    kv2 = list(kvs)
                    kv2[index[key]] = (key, T_ARR, (et, [bad if i == 5 else t for i, t in enumerate(items)]))
                    yield f"{family}:token_type[5]={bad}", gguf_write(kv2)
            if key == "tokenizer.ggml.scores":
                for bad in (float("nan"), float("inf"), -float("inf"), 3.4e38):
                    kv2 = list(kvs)
                    kv2[index[key]] = (key, T_ARR, (et, [bad if i == 9 else t for i, t in enumerate(items)]))
                    yield f"{family}:scores[9]={bad}", gguf_write(kv2)
            if key == "tokenizer.ggml.tokens":
                for label, bad in (("invalid-utf8", b"\xff\xfe"), ("surrogate-utf8", b"a\xed\xa0\x80"),
                                   ("dup", items[3]), ("empty", b""), ("huge", b"a" * 100_000)):
                    kv2 = list(kvs)
                    kv2[index[key]] = (key, T_ARR, (et, [bad if i == 400 else t for i, t in enumerate(items)]))
                    yield f"{family}:tokens[400]-{label}", gguf_write(kv2)
            if key == "tokenizer.ggml.merges":
                for label, bad in (("no-space", b"abc"), ("missing", b"zzqx yyqx"), ("empty", b""),
                                   ("three", b"a b c"), ("invalid-utf8", b"\xff \xfe")):
                    kv2 = list(kvs)
                    kv2[index[key]] = (key, T_ARR, (et, [bad] + items))
                    yield f"{family}:merges-{label}", gguf_write(kv2)
        else:
            for label, (nvt, nv) in (("as-u32", (T_U32, 7)), ("as-str", (T_STR, b"7")), ("as-f32", (T_F32, 1.5)),
                                     ("as-arr", (T_ARR, (T_U8, [1]))), ("as-bool", (T_BOOL, 1)),
                                     ("type-99", (99, 0))):
                if nvt == vt:
                    continue
                kv2 = list(kvs)
                kv2[index[key]] = (key, nvt, nv)
                yield f"{family}:{key}-{label}", gguf_write(kv2)
            if vt == T_STR:
                for lie in (len(v) + 1, 2**40, 2**64 - 1):
                    yield f"{family}:{key}.strlen={lie}", gguf_write(kvs, lie=(key, "strlen", lie))
                for label, bad in (("invalid-utf8", b"\xff"), ("empty", b""), ("unknown", b"nosuchmodel")):
                    kv2 = list(kvs)
                    kv2[index[key]] = (key, T_STR, bad)
                    yield f"{family}:{key}={label}", gguf_write(kv2)
            if key.endswith("_token_id"):
                for bad in (2**32 - 1, 10**6, len(dict((k, x) for k, _, x in kvs)["tokenizer.ggml.tokens"][1])):
                    kv2 = list(kvs)
                    kv2[index[key]] = (key, T_U32, bad)
                    yield f"{family}:{key}={bad}", gguf_write(kv2)
    for flag in ("tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"):
        yield f"{family}:{flag}-int", gguf_write(kvs + [(flag, T_I32, 5)])
    yield f"{family}:dup-key", gguf_write(kvs + [kvs[-1]])
    yield f"{family}:key-invalid-utf8", gguf_write(kvs)[:24] + struct.pack("<Q", 2) + b"\xff\xfe" + gguf_write(kvs)[24 + 8 + len(kvs[0][0]):]
    yield f"{family}:chat-template-jinja", gguf_write(kvs + [("tokenizer.chat_template", T_STR, b"{{ ''.__class__ }}")])


# ==================================================================================================
# vocab.txt
# ==================================================================================================

def vocab_txt_cases(family: str):
    lines = data_path("hf", "bert-minilm", "vocab.txt").read_bytes().split(b"\n")[:3000]
    base = b"\n".join(lines) + b"\n"
    yield "base", base
    yield from byte_mutations(family, base, seed=5, n_cuts=scaled(30), n_flips=scaled(40))
    yield f"{family}:invalid-utf8", base.replace(b"[UNK]", b"\xff\xfe\xfd\xfc\xfb", 1)
    yield f"{family}:surrogate-utf8", base.replace(b"\nthe\n", b"\nthe\xed\xa0\x80\n", 1)
    yield f"{family}:no-specials", b"\n".join(ln for ln in lines if not ln.startswith(b"[")) + b"\n"
    yield f"{family}:dup-lines", base + base
    yield f"{family}:only-newlines", b"\n" * 100


CASES = {"tiktoken": tiktoken_cases, "vocab.txt": vocab_txt_cases}
for _f in FAMILIES:
    if _f.startswith("tokenizer.json"):
        CASES[_f] = tokenizer_json_cases
    elif _f.startswith("sentencepiece"):
        CASES[_f] = sentencepiece_cases
    elif _f.startswith("gguf"):
        CASES[_f] = gguf_cases


# ==================================================================================================
# Worker: load every case, classify, compare with the reference where it accepts the file too
# ==================================================================================================

def _reference(family: str, data: bytes):
    """An ``encode(text) -> ids`` of the reference library for these bytes, or None if it refuses
    them (or there is no Python reference, as for GGUF)."""
    try:
        if family.startswith("tokenizer.json"):
            import tokenizers
            ref = tokenizers.Tokenizer.from_str(data.decode("utf-8"))
            ref.no_truncation()
            ref.no_padding()
            return lambda t: ref.encode(t, add_special_tokens=False).ids
        if family.startswith("sentencepiece"):
            import sentencepiece as spm
            sp = spm.SentencePieceProcessor()
            sp.LoadFromSerializedProto(data)
            return lambda t: sp.encode(t)
        if family == "tiktoken":
            import tiktoken
            ranks = {}
            for line in data.splitlines():
                if line:
                    tok, rank = line.split()
                    ranks[base64.b64decode(tok)] = int(rank)
            pat = json.loads(data_path("tiktoken", "encodings.json").read_text())["r50k_base"]["pat_str"]
            enc = tiktoken.Encoding("corrupt", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
            return enc.encode_ordinary
    except BaseException:  # noqa: BLE001 - any refusal of the reference means "no reference"
        return None
    return None


def _try(tokjit, fn, *args, **kwargs):
    """``fn(*args)``, or the typed tokjit error it raised (any error for the reference)."""
    try:
        return list(fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001
        if tokjit is not None and not isinstance(exc, tokjit.TokjitError):
            raise
        return exc


def run_worker(family: str) -> int:
    """Load every case of ``family``; one JSON line per case on stdout. Returns the number of bugs."""
    import numpy as np

    import tokjit
    from tokjit.api import load_bytes

    pat = json.loads(data_path("tiktoken", "encodings.json").read_text())["r50k_base"]["pat_str"]
    kwargs = {"pat_str": pat} if family == "tiktoken" else {}
    bugs = 0
    for name, data in CASES[family](family):
        print(json.dumps({"start": name}), flush=True)
        faulthandler.dump_traceback_later(PER_FILE_TIMEOUT_S, exit=True)
        stage = "load"
        record = {"case": name, "size": len(data)}
        try:
            tok = load_bytes(data, path=name, use_cache=False, **kwargs)
            stage = "encode"
            # a typed error for one text (e.g. WordPiece text needing a missing [UNK], as HF also
            # refuses) is an answer; it only has to agree with the reference below
            ids = [_try(tokjit, tok.encode, t) for t in PROBES]
            special = [_try(tokjit, tok.encode, t, parse_special=True, add_special_tokens=True) for t in PROBES]
            fine = [t for t, row in zip(PROBES, ids) if isinstance(row, list)]
            want = [row for row in ids if isinstance(row, list)]
            batch = tok.encode_batch(fine, num_threads=2)
            flat, offsets = tok.encode_batch_numpy(fine, num_threads=2)
            for row in ids + special:
                if isinstance(row, list) and row and (min(row) < 0 or max(row) >= tok.vocab_size):
                    raise AssertionError(f"id outside the vocabulary: {row}")
            if batch != want or [flat[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] != want:
                raise AssertionError("encode / encode_batch / encode_batch_numpy disagree")
            stage = "decode"
            for row in ids + special:
                if isinstance(row, list):
                    tok.decode(row)
                    tok.decode(row, skip_special_tokens=True)
            tok.decode(np.arange(tok.vocab_size))
            stage = "reference"
            ref = _reference(family, data)
            if ref is not None:
                # HF always splits added tokens out of the text: compare its ids with parse_special=True
                mine = ([_try(tokjit, tok.encode, t, parse_special=True) for t in PROBES]
                        if family.startswith("tokenizer.json") else ids)
                got = [row if isinstance(row, list) else "error" for row in mine]
                want = [_try(None, ref, t) for t in PROBES]
                want = [row if isinstance(row, list) else "error" for row in want]
                if want != got:
                    diff = next(i for i in range(len(PROBES)) if want[i] != got[i])
                    at = next((j for j, (a, b) in enumerate(zip(got[diff], want[diff])) if a != b),
                              min(len(got[diff]), len(want[diff])))
                    raise AssertionError(f"ids differ from the reference on {PROBES[diff]!r} at token {at}: "
                                         f"tokjit {got[diff][at:at + 8]} reference {want[diff][at:at + 8]}")
                record["reference"] = "same ids"
            record["outcome"] = "loaded"
            if any(not isinstance(row, list) for row in ids):
                record["encode_errors"] = sorted({str(r)[:120] for r in ids if not isinstance(r, list)})
        except tokjit.TokjitError as exc:
            record["outcome"] = "typed"
            record["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            if stage != "load":
                record["outcome"] = "bug"
                record["error"] = f"typed error while {stage}ing a loaded file: " + record["error"]
        except MemoryError:
            record["outcome"] = "bug"
            record["error"] = f"MemoryError while {stage}"
        except BaseException as exc:  # noqa: BLE001 - classifying is the point
            record["outcome"] = "bug"
            tb = traceback.extract_tb(exc.__traceback__)[-3:]
            where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb))
            record["error"] = f"{type(exc).__name__} while {stage}: {str(exc)[:300]} [{where}]"
        faulthandler.cancel_dump_traceback_later()
        if record["outcome"] == "bug":
            bugs += 1
        print(json.dumps(record), flush=True)
    return bugs


def run_family(family: str, timeout: float = 1800) -> dict:
    """Run the worker for ``family`` in a subprocess; summary with counts and every bug."""
    env = dict(os.environ, TOKJIT_CACHE_DIR="off", PYTHONFAULTHANDLER="1")
    # the worker runs as a script (tests/ first on sys.path): point it at this checkout's tokjit, not
    # whichever copy is installed
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), family], capture_output=True, text=True,
                          env=env, timeout=timeout)
    records, started = [], None
    for line in proc.stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if "start" in obj:
            started = obj["start"]
        else:
            records.append(obj)
            started = None
    bugs = [r for r in records if r["outcome"] == "bug"]
    if started is not None:  # the process died (segfault, watchdog) inside this case
        bugs.append({"case": started, "outcome": "bug",
                     "error": f"worker died (exit code {proc.returncode}): {proc.stderr[-1500:]}"})
    elif proc.returncode not in (0, 1):
        bugs.append({"case": "<worker>", "outcome": "bug", "error": proc.stderr[-1500:]})
    base = next((r for r in records if r["case"] == "base"), None)
    return {"family": family, "tried": len(records), "records": records, "bugs": bugs, "base": base,
            "typed": sum(r["outcome"] == "typed" for r in records),
            "loaded": sum(r["outcome"] == "loaded" for r in records)}


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] in CASES:
        sys.exit(1 if run_worker(sys.argv[1]) else 0)
    # summary mode: python tests/test_corrupted_files.py [families...]
    total = 0
    for fam in sys.argv[1:] or FAMILIES:
        summary = run_family(fam)
        total += summary["tried"]
        print(f"{fam}: {summary['tried']} files, {summary['typed']} typed errors, {summary['loaded']} loaded, "
              f"{len(summary['bugs'])} bugs")
        for bug in summary["bugs"]:
            print(f"  BUG {bug['case']}: {bug['error']}")
    print(f"total corrupted files tried: {total}")
    sys.exit(0)


# ==================================================================================================
# Tests
# ==================================================================================================

import pytest  # noqa: E402


@pytest.mark.parametrize("family", FAMILIES)
def test_corrupted_files_fail_typed_or_load_correctly(shared, family):
    summary = run_family(family)
    base = summary["base"]
    assert base is not None, f"worker produced no result for the unmodified file: {summary['bugs']}"
    assert base["outcome"] == "loaded", base
    bugs = summary["bugs"]
    assert not bugs, f"{len(bugs)} of {summary['tried']} corrupted {family} files misbehaved:\n" + "\n".join(
        f"{b['case']}: {b['error']}" for b in bugs[:25])
    # typed errors must say what is wrong, not just that something is
    vague = [r for r in summary["records"] if r["outcome"] == "typed" and len(r["error"]) < 25]
    assert not vague, vague[:5]
    if family.startswith("tokenizer.json"):
        lone = [r for r in summary["records"] if "-surrogate@" in r["case"]]
        assert len(lone) >= 4 * 5, [r["case"] for r in lone]
        wrong = [r for r in lone if r["outcome"] != "typed" or not r["error"].startswith("ModelFileError")]
        assert not wrong, wrong[:5]
    print(f"{family}: {summary['tried']} corrupted files, {summary['typed']} typed errors, "
          f"{summary['loaded']} loaded and encoded (like the reference where it accepts them)")


@pytest.mark.parametrize("family", sorted(TOKENIZER_JSON_BUILDERS))
def test_lone_surrogate_escapes_name_file_and_key(shared, family):
    """``"\\ud800"`` is valid JSON but no text: HF (serde_json) refuses the file, tokjit raises a
    ModelFileError naming the file and the key that holds it, wherever the string is."""
    import tokenizers

    import tokjit
    from tokjit.api import load_bytes

    cases = [(label, data) for label, data in surrogate_cases(family, TOKENIZER_JSON_BUILDERS[family]())
             if "-surrogate@" in label]
    wheres = {label.split("@", 1)[1] for label, _ in cases}
    assert {"added_tokens[0].content", "future_field"} <= wheres and any(w.startswith("model.vocab") for w in wheres)
    assert len(wheres) >= 5, wheres
    for label, data in cases:
        with pytest.raises(Exception):  # serde_json: "lone leading surrogate", "unexpected end of hex escape"
            tokenizers.Tokenizer.from_str(data.decode("utf-8"))
        with pytest.raises(tokjit.ModelFileError) as info:
            load_bytes(data, path=f"{label}.json", use_cache=False)
        assert info.value.path == f"{label}.json"
        assert str(info.value.where).startswith(label.split("@", 1)[1]), (label, str(info.value))


@pytest.mark.parametrize("family", sorted(TOKENIZER_JSON_BUILDERS))
def test_escaped_surrogate_pairs_load_like_the_reference(shared, family):
    """The same places holding an escaped valid pair (an emoji): no false alarm. Where HF loads the
    file, tokjit loads it and gives HF's ids."""
    import tokenizers

    import tokjit
    from tokjit.api import load_bytes

    loaded = 0
    for label, data in surrogate_cases(family, TOKENIZER_JSON_BUILDERS[family]()):
        if "escaped-pair@" not in label:
            continue
        try:
            ref = tokenizers.Tokenizer.from_str(data.decode("utf-8"))
        except BaseException:  # noqa: BLE001 - e.g. a merge naming the renamed vocab key; HF panics on a bad charsmap
            continue
        tok = load_bytes(data, path=label, use_cache=False)
        ref.no_truncation()
        ref.no_padding()
        for text in PROBES + ["\U0001F600 x\U0001F600y"]:
            got = _try(tokjit, tok.encode, text, parse_special=True)
            want = _try(None, lambda t: ref.encode(t, add_special_tokens=False).ids, text)
            # both refuse (a WordPiece [UNK] renamed away), or both give the same ids
            assert got == want or (isinstance(got, Exception) and isinstance(want, Exception)), (label, text)
        loaded += 1
    assert loaded >= 3


def test_surrogate_bytes_in_other_formats_name_the_place(shared):
    """ED A0 80 (UTF-8's form of U+D800) where a format wants UTF-8 text: the error names the file
    and the line or field. (.tiktoken tokens and .model pieces are bytes to their references, which
    load such files; the worker above checks that tokjit loads them to the same ids.)"""
    import tokjit
    from tokjit.api import load_bytes

    def case(generator, family, label):
        return next(data for name, data in generator(family) if name == f"{family}:{label}")

    data = case(vocab_txt_cases, "vocab.txt", "surrogate-utf8")
    line = data.split(b"\n").index(b"the\xed\xa0\x80") + 1
    with pytest.raises(tokjit.ModelFileError) as info:
        load_bytes(data, path="vocab.txt", use_cache=False)
    assert info.value.path == "vocab.txt" and info.value.where == f"line {line}", str(info.value)

    data = case(gguf_cases, "gguf-gpt2", "tokens[400]-surrogate-utf8")
    with pytest.raises(tokjit.ModelFileError) as info:
        load_bytes(data, path="x.gguf", use_cache=False)
    assert info.value.path == "x.gguf" and "tokenizer.ggml.tokens[400]" in str(info.value.where), str(info.value)
