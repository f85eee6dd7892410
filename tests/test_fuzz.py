"""Property-based fuzzing of every tokenizer family against its reference.

Per tokenizer in ``fuzz_targets.TARGETS`` (every tokenizer file in ``../shared`` and the bundled
tiktoken encodings), hypothesis generates arbitrary code points, lone surrogates, long runs of one
character and mixtures with special-token text, tricky whitespace, byte-fallback look-alikes and
U+2581. Properties:

* no crash or hang (typed ``InputError`` is never expected for ``str`` input);
* ids equal the reference (HF ``tokenizers`` encode with added tokens split, ``sentencepiece``
  encode, ``tiktoken`` ``encode_ordinary``) on every input the reference accepts (lone surrogates
  only go to tiktoken, which replaces them with U+FFFD as tokjit does); decode equals the
  reference decode of those ids;
* ``decode(encode(s)) == s`` (with lone surrogates as U+FFFD) for byte-level BPE, and the same with
  U+2581 read as a space for byte-fallback SentencePiece-style BPE (see fuzz_targets for what each
  family guarantees); lossy families (Unigram + charsmap, WordPiece, BPE without byte fallback)
  only promise reference parity;
* ``encode``, ``encode_batch(num_threads=2)`` and ``encode_batch_numpy`` agree.

GGUF files have no Python reference: they are fuzzed for no-crash, round trip and path agreement
(their ids are checked against llama.cpp's vectors in test_gguf_vectors.py).

``TOKJIT_FUZZ_EXAMPLES`` sets examples per property (default 15, a few seconds per tokenizer);
``scripts/fuzz_campaign.py`` runs the same properties with many more.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_targets import TARGETS, expected_round_trip, specials

EXAMPLES = int(os.environ.get("TOKJIT_FUZZ_EXAMPLES", "15"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("TOKJIT_FUZZ_RANDOM") != "1",
                suppress_health_check=list(HealthCheck), database=None)

TRICKY = ["\u2581", " ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", "\u200b", "\u200d", "'s", "'LL", "<0x41>",
          "<unk>", "<s>", "</s>", "[CLS]", "##ing", "12345", "٣", "ﬁ", "é", "é", "😀", "👩‍👩‍👧", "日本", "ß", "İ",
          "\ufeff", "\x00", "\x7f", "\U0010ffff", "\ufffd", "a\u0301\u0302\u0303"]


def text_strategy(special_texts, surrogates: bool):
    chars = st.characters(codec=None if surrogates else "utf-8")
    piece = st.one_of(
        st.text(chars, max_size=40),
        st.sampled_from(TRICKY),
        st.sampled_from(special_texts),
        st.builds(lambda c, n: c * n, st.one_of(st.sampled_from(TRICKY), st.text(chars, min_size=1, max_size=2)),
                  st.integers(1, 3000)),
    )
    return st.lists(piece, max_size=8).map("".join)


@pytest.fixture(scope="module", params=TARGETS, ids=lambda t: t.name)
def target(request, shared):
    request.param.tok  # every file in ../shared loads: one that stops loading fails here
    return request.param


def test_fuzz_matches_reference_and_round_trips(target):
    tok = target.tok
    ref = target.ref

    @FUZZ
    @given(text_strategy(specials(tok), surrogates=False))
    def check(text):
        ids = target.encode(text)
        assert all(0 <= i < tok.vocab_size for i in ids)
        if ref is not None:
            assert ids == ref.encode(text), text
            assert tok.decode(ids) == ref.decode(ids), text
        plain = tok.encode(text)  # parse_special=False: the special texts stay text
        want = expected_round_trip(target, text)
        got = tok.decode(plain)
        assert want is None or got == want, text

    check()


def test_fuzz_lone_surrogates_and_raw_code_points(target):
    """Any Python str, including lone surrogates: no crash; lossless families round-trip with
    surrogates replaced; tiktoken (the only reference that accepts them) gives the same ids."""
    tok = target.tok

    @FUZZ
    @given(text_strategy(specials(tok), surrogates=True))
    def check(text):
        ids = tok.encode(text)
        want = expected_round_trip(target, text)
        assert want is None or tok.decode(ids) == want, text
        if target.kind == "tiktoken":
            assert ids == target.ref.encode(text)

    check()


def test_fuzz_paths_agree(target):
    tok = target.tok

    @FUZZ
    @given(st.lists(text_strategy(specials(tok), surrogates=True), min_size=1, max_size=6),
           st.booleans(), st.booleans())
    def check(texts, parse_special, add_special_tokens):
        kw = {"parse_special": parse_special, "add_special_tokens": add_special_tokens}
        single = [tok.encode(t, **kw) for t in texts]
        assert tok.encode_batch(texts, num_threads=2, **kw) == single
        flat, offsets = tok.encode_batch_numpy(texts, num_threads=2, **kw)
        assert [flat[a:b].tolist() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())] == single

    check()


def test_fuzz_decode_arbitrary_ids(target):
    """Any id sequence decodes (invalid UTF-8 -> U+FFFD) like the reference; out-of-range ids are a
    typed ``InputError``."""
    import tokjit
    tok = target.tok
    ref = target.ref
    n = tok.vocab_size

    @FUZZ
    @given(st.lists(st.one_of(st.integers(0, n - 1), st.integers(0, min(n - 1, 300))), max_size=40),
           st.booleans())
    def check(ids, skip):
        text = tok.decode(ids, skip_special_tokens=skip)
        data = tok.decode_bytes(ids)
        if ref is None:
            # GGUF: no Python reference (each id's text is checked in test_roundtrip_all); the text
            # and bytes paths must still agree for the byte-level vocabularies
            if target.lossless == "exact" and not skip:
                assert text == data.decode("utf-8", "replace"), ids
            return
        want = ref.decode_skipping_special(ids) if skip else ref.decode(ids)
        assert text == want, (ids, skip)
        if target.kind == "tiktoken":
            assert data == b"".join(ref.decode_singles(ids))

    check()
    for bad in ([n], [-1], [0, n + 5], [2**40]):
        with pytest.raises(tokjit.InputError):
            tok.decode(bad)
    for bad in ([1.5], [0, 2.0], [0, None]):  # refused as HF, tiktoken and sentencepiece refuse them
        for decode in (tok.decode, tok.decode_bytes):
            with pytest.raises(tokjit.TokenIdTypeError):
                decode(bad)
