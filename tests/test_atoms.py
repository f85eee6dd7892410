"""Atoms and cuts (tokjit/kernels/atoms.py) against the references, on text built to break them.

Byte-level BPE starts a character that BPE always forms whole as one symbol, and cuts runs of such
characters where no token joins them. The corpora pass through it in test_bpe_parity; here the text
is made of what could make either rule wrong: tokens that begin or end inside a character, glued to
each other and to CJK characters (so the straddling tokens the rules must see really occur), and
tokens BPE cannot build from their own bytes (llama3), which under ``ignore_merges`` are themselves
as a whole piece but not as part of a longer one. Ids come from tiktoken and HF ``tokenizers``.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import tokjit
from conftest import shared_path
from test_bpe_parity import first_mismatch, reference_tiktoken
from tokjit.kernels import atoms
from tokjit.kernels import piece_cache as pc
from tokjit.kernels.bpe import FLAG_ATOMS

tokenizers = pytest.importorskip("tokenizers")

HF = {"llama3": "hf/llama3/tokenizer.json", "gpt4o": "hf/gpt4o/tokenizer.json"}
TIKTOKEN = ["o200k_base", "cl100k_base"]


def _load(name):
    if name in HF:
        path = shared_path("data", *HF[name].split("/"))
        if not path.exists():
            pytest.skip(f"{path} not in the shared data")
        ref = tokenizers.Tokenizer.from_file(str(path))
        ref.no_truncation()
        ref.no_padding()
        return tokjit.load(path), lambda texts: [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    ref = reference_tiktoken(name)
    return tokjit.get_encoding(name), ref.encode_ordinary_batch


def _token_bytes(model):
    v = model.vocab
    return [v.blob[v.offsets[i]:v.offsets[i + 1]].tobytes() for i in range(v.offsets.shape[0] - 1)]


def _is_fragment(b: bytes) -> bool:
    """Starts with a continuation byte or ends inside a character."""
    if not b:
        return False
    if b[0] & 0xC0 == 0x80:
        return True
    try:
        b.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


def _adversarial_texts(model, seed: int, n: int) -> list[str]:
    tokens = _token_bytes(model)
    fragments = [b for b in tokens if _is_fragment(b)]
    chars = [b for b in tokens if len(b) in (2, 3) and not _is_fragment(b) and len(b.decode()) == 1]
    cjk = [b for b in chars if len(b) == 3]
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.35:
                parts.append(rng.choice(fragments))
            elif r < 0.8:
                parts.append(rng.choice(cjk))
            elif r < 0.9:
                parts.append(rng.choice(chars))
            else:
                parts.append(rng.choice([b" ", b"a", b"\n", b"1", b"."]))
        # glued fragments complete each other into characters: the straddling tokens occur in the text
        texts.append(b"".join(parts).decode("utf-8", errors="ignore"))
    return texts


@pytest.mark.parametrize("name", TIKTOKEN + list(HF))
def test_atoms_apply_and_match_the_reference_on_straddling_text(name):
    tok, reference = _load(name)
    assert int(tok.model.flags) & FLAG_ATOMS, f"{name}: no atoms found"
    texts = _adversarial_texts(tok.model, seed=7, n=4000)
    want = reference(texts)
    assert (m := first_mismatch(texts, tok.encode_batch(texts, num_threads=1), want)) is None, m
    assert (m := first_mismatch(texts[:800], [tok.encode(t) for t in texts[:800]], want[:800])) is None, m
    # the staged pipeline (no cuts, atoms in its BPE) too
    staged = [tok._encode_staged(np.frombuffer(t.encode(), np.uint8), False, want_spans=False)[0].tolist()
              for t in texts[:400]]
    assert (m := first_mismatch(texts[:400], staged, want[:400])) is None, m
    # a second pass reads what the first left in the piece cache
    assert (m := first_mismatch(texts, tok.encode_batch(texts, num_threads=1), want)) is None, m


@pytest.mark.parametrize("name", ["llama3", "o200k_base"])
def test_no_token_is_ever_cut(name):
    """The fused kernel skips the "piece is a token" lookup for a piece it cuts: every token of the
    vocabulary, taken as a piece, must run uncut to its end. Cutting one (e.g. a cut rule that
    ignored the pair bits) fails this."""
    tok, _ = _load(name)
    model = tok.model
    if not int(model.flags) & FLAG_ATOMS:
        pytest.skip("no atoms in this vocabulary")
    blob, offsets = model.vocab.blob, model.vocab.offsets
    checked = 0
    for tid in range(offsets.shape[0] - 1):
        s, e = int(offsets[tid]), int(offsets[tid + 1])
        if e - s < 4 or blob[s:e].max() < 0xC2:
            continue
        piece = np.ascontiguousarray(blob[s:e])
        assert atoms.atom_segment_end(piece, 0, e - s, model.atom_ids, model.edge_bits, model.pair_bits) == e - s, \
            (tid, piece.tobytes())
        checked += 1
    assert checked > 1000


def test_tokens_bpe_cannot_build_as_pieces_and_as_segments():
    tok, reference = _load("llama3")
    model = tok.model
    assert model.unreachable_bits.any(), "llama3 has tokens BPE cannot build; the set must hold them"
    tokens = _token_bytes(model)
    sym = np.empty(int(model.max_len) + 1, np.int64)
    unreachable = []
    for tid, b in enumerate(tokens[:128000]):
        if len(b) < 2:
            continue
        m, _ = atoms.bpe_of_bytes(model.vocab.blob, model.vocab.offsets[tid], model.vocab.offsets[tid + 1],
                                  model.byte_ids, model.pairs.arrays, sym)
        if m != 1 or sym[0] != tid:
            try:
                unreachable.append(b.decode("utf-8"))
            except UnicodeDecodeError:
                pass
    assert len(unreachable) > 100
    rng = random.Random(3)
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 2000)]
    texts = []
    for u in unreachable:
        texts.append(u)  # the whole piece: the token itself
        texts.append(rng.choice(han) + u.strip() + rng.choice(han))  # inside a longer run
        texts.append(u.strip() + rng.choice(han) + rng.choice(han) + u.strip())
    want = reference(texts)
    for _ in range(2):  # the second pass hits what the first cached, whole pieces and segments alike
        assert (m := first_mismatch(texts, tok.encode_batch(texts, num_threads=1), want)) is None, m
        assert (m := first_mismatch(texts, [tok.encode(t) for t in texts], want)) is None, m


def test_cuts_split_han_runs_into_short_segments():
    """The cut rule is not vacuous on real text: a Han run of the Chinese corpus becomes segments of a
    few characters (the piece cache then sees repeating segments instead of unique runs)."""
    tok, _ = _load("o200k_base")
    model = tok.model
    text = shared_path("corpus", "multilingual", "chinese.txt").read_text(encoding="utf-8")[:50000]
    buf = np.frombuffer(text.encode("utf-8"), np.uint8)
    n_segments = atoms.count_segments(buf, model.atom_ids, model.edge_bits, model.pair_bits)
    assert buf.shape[0] / n_segments < 16


def _whole_long_runs(tok, min_bytes: int = 16) -> int:
    """Rows of the calling thread's piece cache that hold a whole run of Han or kana of min_bytes+."""
    rows = tok._fused._thread().cache_arrays[0]
    length = rows[:, 2] & pc.N_MASK
    first = rows[:, 0] & 0xFF
    second = (rows[:, 0] >> 8) & 0xFF
    run = ((first >= 0xE3) & (first <= 0xED)) | ((second >= 0xE3) & (second <= 0xED))
    return int(((length >= min_bytes) & run).sum())


@pytest.mark.parametrize("name", ["llama3", "o200k_base"])
def test_long_runs_read_again_come_whole_from_the_cache(name):
    """Runs of Han or kana of 16+ bytes are segmented each time they are met, and from their third
    meeting looked up and kept whole (``piece_cache.met_before``), up to ``MAX_CACHED`` bytes: text
    read four times gives the reference's ids on every pass, and the cache takes in whole runs, those
    past ``MAX_PIECE`` too, at the third pass."""
    tok, reference = _load(name)
    lines = []
    for corpus in ("japanese.txt", "chinese.txt"):
        text = shared_path("corpus", "multilingual", corpus).read_text(encoding="utf-8")
        lines += [line for line in text.splitlines()[:300] if line.strip()]
    want = reference(lines)
    counts = [_whole_long_runs(tok)]
    for _ in range(4):
        got = tok.encode_batch(lines, num_threads=1)
        assert (m := first_mismatch(lines, got, want)) is None, m
        counts.append(_whole_long_runs(tok))
    # a pass keeps the runs met for the third time: in the first, those the text itself repeats; in
    # the second, few more; in the third, every run the text has
    kept = [b - a for a, b in zip(counts, counts[1:])]
    assert kept[2] > 200 and kept[2] > 3 * kept[1] and kept[3] < kept[2] // 10, counts
    # runs past MAX_PIECE (up to MAX_CACHED) are kept too, and the fourth pass read them whole
    assert _whole_long_runs(tok, pc.MAX_PIECE + 1) > 50
    assert (m := first_mismatch(lines, [tok.encode(t) for t in lines], want)) is None, m


@pytest.mark.parametrize("name", ["llama3", "o200k_base"])
def test_pieces_past_max_piece_come_whole_from_the_cache_from_their_third_meeting(name):
    """Any piece of MAX_PIECE+1..MAX_CACHED bytes (a line of box-drawing characters, a run of spaces
    or of '=', a long Han run) is kept whole from its third meeting and one past MAX_CACHED never: the
    same lines read four times give the reference's ids on every pass, the cache then holds such
    pieces whole, and none longer than a row can describe."""
    tok, reference = _load(name)
    rng = random.Random(5)
    lines = []
    for n in (17, 20, 40, 66, 84, 85, 86, 120, 200):
        lines.append("\u2500" * n)  # 3 bytes each: 51..600 bytes
        lines.append("\u251c" + "\u2500" * (n // 2) + "\u253c" + "\u2500" * (n - n // 2) + "\u2524")
        lines.append("x" + " " * (3 * n) + "y")
        lines.append("=" * (3 * n))
        lines.append("".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(n)))
    want = reference(lines)
    for _ in range(4):
        got = tok.encode_batch(lines, num_threads=1)
        assert (m := first_mismatch(lines, got, want)) is None, m
    rows = tok._fused._thread().cache_arrays[0]
    lengths = rows[:, 2] & pc.N_MASK
    assert int((lengths > pc.MAX_PIECE).sum()) >= 10
    assert int(lengths.max()) <= pc.MAX_CACHED
    assert (m := first_mismatch(lines, [tok.encode(t) for t in lines], want)) is None, m


MERGE_LISTS = {"llama3": ("hf/llama3/tokenizer.json", 280147), "gemma3": ("hf/gemma3/tokenizer.json", 514906)}


@pytest.mark.parametrize("name", list(MERGE_LISTS))
def test_merge_list_cut_to_reachable_rules_gives_the_reference_ids(name):
    """A merge list becomes one rule per token BPE can build from its own bytes (Llama 3, byte-level)
    or characters (Gemma 3) (lookup.reachable_merges); the dropped rules join two tokens that BPE
    never has side by side. Text made of the pairs merge rules name, glued to themselves and cut at a
    random character, must still give HF's ids."""
    rel, n_merges = MERGE_LISTS[name]
    path = shared_path("data", *rel.split("/"))
    if not path.exists():
        pytest.skip(f"{path} not in the shared data")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.no_truncation()
    ref.no_padding()
    tok = tokjit.load(path)
    assert tok.model.pairs.size < 0.6 * n_merges, "the merge list should have been cut to reachable rules"
    import json
    merges = json.loads(path.read_text(encoding="utf-8"))["model"]["merges"]
    rng = random.Random(11)
    texts = []
    for m in rng.sample(merges, 3000):
        a, b = m.split(" ") if isinstance(m, str) else m
        word = (a + b).replace("\u0120", " ").replace("\u010a", "\n").replace("\u2581", " ")
        if not word.isprintable() and "\n" not in word:
            continue
        texts.append(word)
        texts.append(word + word.strip() + rng.choice(["", "s", "ing", " the"]))
        cut = rng.randrange(len(word) + 1)
        texts.append(word[:cut] + rng.choice(["x", "é", "中", "1"]) + word[cut:])
    assert len(texts) > 6000
    got = [tok.encode(t) for t in texts]
    theirs = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    where = first_mismatch(texts, got, theirs)
    assert where is None, where
