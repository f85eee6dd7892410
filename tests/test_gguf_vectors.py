"""GGUF vocabularies against llama.cpp's own test vectors (``data/gguf/*.gguf.inp/.out``).

llama.cpp wrote the vectors with add_special=false, parse_special=false, which are ``Tokenizer.encode``'s
defaults. One test per file, so a failure names the file, the first differing string and both id lists.
"""

from __future__ import annotations

import functools

import pytest

import numpy as np

from conftest import SHARED, corpus_lines, gguf_vectors

import tokjit

GGUF_DIR = SHARED / "data" / "gguf"
VOCABS = sorted(p.name[len("ggml-vocab-"):-len(".gguf")] for p in GGUF_DIR.glob("ggml-vocab-*.gguf")) or [
    "gpt-2"]  # keeps one (skipped) case visible when the data folder is missing

# vocabularies that do not match llama.cpp yet: name -> the precise reason (strict xfail)
KNOWN_FAILURES: dict[str, str] = {}


@functools.lru_cache(maxsize=None)
def _load(name):
    return tokjit.load(GGUF_DIR / f"ggml-vocab-{name}.gguf")


def _ids(out):
    return [int(i) for i in out]


def _first_mismatch(tok, vectors):
    for i, (text, expected) in enumerate(vectors):
        got = _ids(tok.encode(text))
        if got != expected:
            return i, text, expected, got
    return None


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[n])) if n in KNOWN_FAILURES
    else n for n in VOCABS])
def test_llamacpp_vectors(shared, name):
    path = shared / "data" / "gguf" / f"ggml-vocab-{name}.gguf"
    vectors = gguf_vectors(path)
    assert len(vectors) == 46
    tok = _load(name)
    bad = _first_mismatch(tok, vectors)
    if bad is not None:
        i, text, expected, got = bad
        n_bad = sum(_ids(tok.encode(t)) != ids for t, ids in vectors)
        pytest.fail(f"{name}: {n_bad}/{len(vectors)} vectors differ; first is #{i} {text[:80]!r}\n"
                    f"  llama.cpp: {expected}\n  tokjit:    {got}")


def test_gguf_metadata(shared):
    """Flags that the vectors do not exercise (add_special_tokens, chat template, token attributes)."""
    tok = _load("llama-bpe")
    assert _ids(tok.encode("Hello", add_special_tokens=True))[0] == 128000  # pre llama-bpe sets add_bos
    assert _ids(tok.encode("Hello", add_special_tokens=False)) == [9906]
    # parse_special=False leaves control tokens as text; True matches them
    assert 128009 not in _ids(tok.encode("<|eot_id|>"))
    assert _ids(tok.encode("<|eot_id|>", parse_special=True)) == [128009]
    gpt2 = _load("gpt-2")
    assert _ids(gpt2.encode("Hello", add_special_tokens=True)) == _ids(gpt2.encode("Hello"))


def test_llamacpp_vectors_interleaved(shared):
    """Every vocabulary's vectors again, one string per vocabulary in turn, so each tokenizer runs right
    after the others: no state a tokenizer keeps between calls (buffers, piece and pair caches) may
    leak into another's ids."""
    names = [n for n in VOCABS if n not in KNOWN_FAILURES]
    vectors = {n: gguf_vectors(shared / "data" / "gguf" / f"ggml-vocab-{n}.gguf") for n in names}
    for i in range(max(len(v) for v in vectors.values())):
        for n in names:
            if i < len(vectors[n]):
                text, expected = vectors[n][i]
                assert _ids(_load(n).encode(text)) == expected, (n, i, text[:80])


@pytest.mark.parametrize("name", [n for n in VOCABS if n not in KNOWN_FAILURES])
def test_llamacpp_vectors_batched(shared, name):
    """The vectors through the batch APIs (list and flat, two threads), which run other code than a
    single call: a fused kernel over chunks claimed by each thread, or the staged pipeline per text."""
    vectors = gguf_vectors(shared / "data" / "gguf" / f"ggml-vocab-{name}.gguf")
    texts = [t for t, _ in vectors]
    expected = [ids for _, ids in vectors]
    tok = _load(name)
    assert [_ids(x) for x in tok.encode_batch(texts, num_threads=2)] == expected
    flat, offsets = tok.encode_batch_numpy(texts * 3, num_threads=2)
    assert [_ids(flat[offsets[i]:offsets[i + 1]]) for i in range(len(texts))] == expected


@pytest.mark.parametrize("name", ["gpt-2", "llama-bpe", "qwen2", "command-r", "starcoder", "refact", "mpt", "falcon",
                                  "deepseek-llm", "deepseek-coder"])
def test_llamacpp_steps_fused(shared, name):
    """A GGUF byte-level vocabulary whose pre type is any sequence of std::regex patterns (each on
    llama.cpp's view of the text) and llama.cpp's hand-written GPT-2 or Llama 3 splitters runs the
    fused byte-level BPE kernel (those steps inside it, ``llamacpp_split.llamacpp_pieces``), and gives
    the staged pipeline's ids, which the vectors above hold to llama.cpp's, on every corpus (every 40th
    line), single calls and batches, with special-token text parsed and not."""
    tok = _load(name)
    assert type(tok._fused).__name__ == "FusedBPE"
    texts = corpus_lines(step=40)
    for parse_special in (False, True):
        staged = [tok._encode_staged(np.frombuffer(t.encode("utf-8", "surrogatepass"), np.uint8), parse_special,
                                     False)[0].tolist() for t in texts]
        assert [tok.encode(t, parse_special=parse_special) for t in texts] == staged
        assert tok.encode_batch(texts, num_threads=2, parse_special=parse_special) == staged


@pytest.mark.parametrize("name", ["gpt-2", "llama-bpe", "qwen2", "starcoder", "falcon", "deepseek-llm",
                                  "deepseek-coder"])
def test_llamacpp_view_malformed_bytes(shared, name):
    """Bytes that are not UTF-8 (which the public calls repair or refuse before a kernel sees them) on
    the kernels' byte path: llama.cpp's view reads a malformed byte as U+FFFD, so the regex engine,
    which reads valid UTF-8 only, never runs past the view (it did on a truncated sequence at the end
    of the text: an out-of-bounds read, a corrupted heap for qwen2), and the splitters' decoder never
    reads past the piece (a lead byte as the text's last byte read one byte beyond it); the fused
    kernel hands such text to the staged pipeline and gives its ids. (CI runs this under
    NUMBA_BOUNDSCHECK=1, where a read out of bounds raises.)"""
    import random
    tok = _load(name)
    rng = random.Random(7)
    for _ in range(1500):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 14)))
        staged = tok._encode_staged(np.frombuffer(data, np.uint8), False, False)[0].tolist()
        buf = np.frombuffer(data, np.uint8).copy()
        ids, _ = tok._fused.encode_docs(buf, np.zeros(1, np.int64), np.full(1, len(data), np.int64), False)
        assert ids.tolist() == staged, data
