"""StopSequenceDecoder: property tests over random text, random token boundaries and random stop
strings, plus examples against the real llama3 tokenizer (ids from HF ``tokenizers``)."""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokjit
from tokjit.serving import Held, Stopped, StoppedWithText, StopSequenceDecoder, Text

from conftest import SHARED

ALPHABET = "ab é中🎉\n"


@functools.lru_cache(maxsize=None)
def llama3():
    path = SHARED / "data" / "hf" / "llama3" / "tokenizer.json"
    if not path.exists():
        pytest.skip(f"{path} not found (set TOKJIT_TEST_DATA)")
    tok = tokjit.load(path)
    by_bytes = {bytes(b): i for i, b in enumerate(tok.spec.tokens)}
    return tok, by_bytes


def expected_output(text: str, hidden: list[str], visible: list[str]) -> tuple[str, bool]:
    """What the client must see: text up to the stop string that is complete first (hidden wins a
    tie, then the longest), including it when it is visible."""
    for end in range(1, len(text) + 1):
        head = text[:end]
        hits = [s for s in hidden if head.endswith(s)]
        if hits:
            return head[:end - max(map(len, hits))], True
        hits = [s for s in visible if head.endswith(s)]
        if hits:
            return head, True
    return text, False


def longest_held(text: str, stops: list[str]) -> int:
    best = 0
    for s in stops:
        for k in range(1, len(s)):
            if k <= len(text) and text.endswith(s[:k]):
                best = max(best, k)
    return best


def check_run(dec, feed, full_text, hidden, visible):
    """Feed chunks through ``feed`` and check every invariant; returns what the client saw."""
    shown = []
    fed = ""
    stopped = False
    stops = hidden + visible
    for chunk, visible_text_so_far in feed:
        out = chunk()
        fed = visible_text_so_far
        if isinstance(out, (Stopped, StoppedWithText)):
            if isinstance(out, StoppedWithText):
                shown.append(out.text)
            stopped = True
            break
        if isinstance(out, Text):
            shown.append(out.text)
        else:
            assert isinstance(out, Held)
        # emitted + held == decoded text so far; held is exactly the longest possible stop start
        assert "".join(shown) + dec.held == fed
        assert len(dec.held) == longest_held(fed, stops)
        for s in hidden:
            assert s not in "".join(shown)
    if not stopped:
        out = dec.flush()
        if isinstance(out, (Text, StoppedWithText)):
            shown.append(out.text)
    result = "".join(shown)
    want, _ = expected_output(full_text, hidden, visible)
    assert result == want
    for s in hidden:
        assert s not in result
    return result


stop_text = st.text(alphabet=ALPHABET, min_size=1, max_size=4)


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=40), cuts=st.lists(st.integers(0, 40), max_size=12),
       hidden=st.lists(stop_text, max_size=3), visible=st.lists(stop_text, max_size=2))
def test_text_chunks_property(text, cuts, hidden, visible):
    tok, _ = llama3()
    dec = StopSequenceDecoder(tok, stop_strings=hidden, visible_stop_strings=visible)
    bounds = sorted({0, len(text), *[c for c in cuts if c <= len(text)]})
    feed = [(functools.partial(dec.push_text, text[a:b]), text[:b]) for a, b in zip(bounds, bounds[1:])]
    check_run(dec, feed, text, hidden, visible)


def _ids_for(data: bytes, cuts, by_bytes):
    """Ids spelling ``data`` with token boundaries at ``cuts`` (bytes), splitting characters when a
    cut falls inside one: each piece is one token if the vocabulary has it, else single bytes."""
    bounds = sorted({0, len(data), *[c for c in cuts if c <= len(data)]})
    ids = []
    for a, b in zip(bounds, bounds[1:]):
        piece = data[a:b]
        if piece in by_bytes:
            ids.append(by_bytes[piece])
        else:
            ids.extend(by_bytes[bytes([x])] for x in piece)
    return ids


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet=ALPHABET, max_size=30), cuts=st.lists(st.integers(0, 90), max_size=20),
       hidden=st.lists(stop_text, max_size=3), visible=st.lists(stop_text, max_size=2),
       data=st.data())
def test_token_boundaries_property(text, cuts, hidden, visible, data):
    tok, by_bytes = llama3()
    raw = text.encode("utf-8")
    ids = _ids_for(raw, cuts, by_bytes)
    # a stop string taken from the text itself matches more often than a random one
    if text and data.draw(st.booleans()):
        a = data.draw(st.integers(0, len(text) - 1))
        hidden = hidden + [text[a:a + data.draw(st.integers(1, 3))]]
    dec = StopSequenceDecoder(tok, stop_strings=hidden, visible_stop_strings=visible)
    feed = []
    so_far = ""
    for k, tid in enumerate(ids):
        # the stream releases the pending text only once it no longer ends in an incomplete character
        decoded = tok.decode(ids[:k + 1])
        if not decoded.endswith("\ufffd"):
            so_far = decoded
        feed.append((functools.partial(dec.step, tid), so_far))
    check_run(dec, feed, tok.decode(ids), hidden, visible)


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=30), cut=st.integers(0, 30),
       hidden=st.lists(stop_text, max_size=2), visible_token=st.booleans())
def test_stop_token_property(text, cut, hidden, visible_token):
    tok, _ = llama3()
    eos = tok.token_to_id("<|eot_id|>")
    ids = tok.encode(text)
    cut = min(cut, len(ids))
    ids = ids[:cut] + [eos] + ids[cut:]
    kwargs = {"visible_stop_token_ids": [eos]} if visible_token else {"stop_token_ids": [eos]}
    dec = StopSequenceDecoder(tok, stop_strings=hidden, **kwargs)
    shown = []
    for tid in ids:
        out = dec.step(tid)
        if isinstance(out, (Text, StoppedWithText)):
            shown.append(out.text)
        if isinstance(out, (Stopped, StoppedWithText)):
            break
    assert dec.stopped
    before = tok.decode(ids[:cut + (1 if visible_token else 0)])
    want, _ = expected_output(before, hidden, [])
    assert "".join(shown) == want
    assert isinstance(dec.step(ids[0] if ids else eos), Stopped)


def test_examples_llama3():
    tok, _ = llama3()
    ids = tok.encode("The answer is 42.</s> ignored")
    dec = StopSequenceDecoder(tok, stop_strings=["</s>"])
    outs = [dec.step(i) for i in ids]
    shown = "".join(o.text for o in outs if isinstance(o, (Text, StoppedWithText)))
    assert shown == "The answer is 42."
    assert dec.stop_reason == ("string", "</s>")
    assert any(isinstance(o, Held) for o in outs)

    # visible stop string across tokens, starting inside a multi-byte character (split bytes)
    _, by_bytes = llama3()
    data = "ok 中文 done".encode("utf-8")
    ids = _ids_for(data, list(range(len(data))), by_bytes)
    dec = StopSequenceDecoder(tok, visible_stop_strings=["中文"])
    shown = "".join(o.text for o in dec.process_tokens(ids) if isinstance(o, (Text, StoppedWithText)))
    assert shown == "ok 中文"

    # a held prefix is released when the match fails
    dec = StopSequenceDecoder(tok, stop_strings=["STOP"])
    outs = dec.process_tokens(tok.encode("ST") + tok.encode("ART"))
    assert "".join(o.text for o in outs if isinstance(o, Text)) + dec.held == "START"
    assert dec.held == ""


def test_empty_stop_string_rejected():
    tok, _ = llama3()
    with pytest.raises(tokjit.InputError):
        StopSequenceDecoder(tok, stop_strings=[""])
