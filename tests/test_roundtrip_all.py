"""Every token id and every code point, for every tokenizer in ``../shared``.

* Every id decodes, alone, to what the reference decodes it to (HF ``decode([id])`` with specials
  kept, sentencepiece ``decode([id])``, tiktoken ``decode_single_token_bytes``); GGUF files (no
  Python reference) decode every id without error to the token's own bytes or text.
* Re-encoding: no family promises that every vocabulary token re-encodes to itself (BPE merges
  may never build a token, the pre-tokenizer may split it, an added token can shadow it). What is
  checked is that the set of ids that do re-encode to themselves is exactly the reference's set,
  over the whole vocabulary for llama3/llama2 and every 7th id elsewhere (CI budget).
* Every code point U+0000..U+10FFFF except surrogates round-trips through encode/decode for
  byte-level and byte-fallback tokenizers, fed as chunks of 4096 code points (64 per word,
  words separated by spaces); where the reference exists its ids for the chunks are compared too.
"""

from __future__ import annotations

import numpy as np
import pytest

from fuzz_targets import TARGETS, expected_round_trip

FULL_REENCODE = {"llama3.json", "llama2.model"}


@pytest.fixture(scope="module", params=TARGETS, ids=lambda t: t.name)
def target(request, shared):
    request.param.tok  # every file in ../shared loads: one that stops loading fails here
    return request.param


def test_every_id_decodes_like_the_reference(target):
    tok = target.tok
    ids = list(range(tok.vocab_size))
    mine = [tok.decode([i]) for i in ids]
    if target.ref is None:
        raw = [tok.decode_bytes([i]) for i in ids]
        assert all(isinstance(b, bytes) for b in raw)
        return
    if target.kind == "tiktoken":
        present = [i for i in ids if tok.spec.model_mask is None or tok.spec.model_mask[i]]
        want = target.ref.decode_singles(present)
        got = [tok.decode_bytes([i]) for i in present]
    else:
        want = target.ref.decode_singles(ids)
        got = mine
        present = ids
    bad = [(i, g, w) for i, g, w in zip(present, got, want) if g != w]
    assert not bad, f"{len(bad)} ids decode differently, e.g. {bad[:5]}"


def test_self_reencoding_set_matches_reference(target):
    tok, ref = target.tok, target.ref
    if ref is None:
        pytest.skip(f"{target.name}: no Python reference to define which tokens re-encode to themselves")
    step = 1 if target.name in FULL_REENCODE else 7
    ids = list(range(0, tok.vocab_size, step))
    texts = [tok.decode([i]) for i in ids]
    keep = [k for k, t in enumerate(texts) if t and "\ufffd" not in t]
    ids = [ids[k] for k in keep]
    texts = [texts[k] for k in keep]
    mine = tok.encode_batch(texts, num_threads=2, parse_special=target.kind == "hf")
    theirs = ref.encode_batch(texts)
    mine_self = {i for i, row in zip(ids, mine) if row == [i]}
    ref_self = {i for i, row in zip(ids, theirs) if row == [i]}
    assert mine_self == ref_self, (sorted(mine_self - ref_self)[:10], sorted(ref_self - mine_self)[:10])
    assert mine == theirs
    print(f"{target.name}: {len(ref_self)} of {len(ids)} decodable tokens re-encode to themselves")


def all_code_point_chunks(chunk=4096, word=64):
    cps = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x110000)])
    for lo in range(0, cps.shape[0], chunk):
        part = cps[lo:lo + chunk]
        words = ["".join(map(chr, part[k:k + word].tolist())) for k in range(0, part.shape[0], word)]
        yield " ".join(words)


def test_every_code_point_round_trips(target):
    if expected_round_trip(target, "a") is None:
        pytest.skip(f"{target.name} is lossy (charsmap / unk / lowercasing / bytes missing from the vocab): "
                    "no round trip promised")
    tok = target.tok
    chunks = list(all_code_point_chunks())
    ids = tok.encode_batch(chunks, num_threads=2)
    bad = []
    for chunk, row in zip(chunks, ids):
        want = expected_round_trip(target, chunk)
        got = tok.decode(row)
        if got != want:
            at = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            bad.append(f"U+{ord(want[at]) if at < len(want) else 0:04X}: {got[at:at + 3]!r} vs {want[at:at + 3]!r}")
    assert not bad, f"{len(bad)} of {len(chunks)} chunks do not round-trip: {bad[:5]}"
    if target.ref is not None:
        theirs = target.ref.encode_batch(chunks)
        mine = ids if target.kind != "hf" else tok.encode_batch(chunks, num_threads=2, parse_special=True)
        diff = [k for k in range(len(chunks)) if mine[k] != theirs[k]]
        assert not diff, f"{len(diff)} chunks differ from the reference, first at code point chunk {diff[0]}"


def test_ids_outside_the_vocabulary_raise(target):
    """Every decode form (joined per-id pieces, first-token forms, skipped specials) rejects a bad id
    wherever it sits, including negative ids that Python lists would count from the end."""
    tok = target.tok
    n = tok.vocab_size
    for bad in (n, n + 7, -1, -n - 3, -(2 ** 40), 2 ** 40):
        for ids in ([bad], [bad, 5], [5, bad], [5, 6, bad, 7]):
            for skip in (False, True):
                with pytest.raises(ValueError):
                    tok.decode(ids, skip_special_tokens=skip)
