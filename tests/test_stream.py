"""DecodeStream parity with HF ``tokenizers.decoders.DecodeStream``, step for step.

Id sequences: HF encodings of corpus texts (a deterministic sample: every 40th line, at most 60 per
corpus file, for every tokenizer -- the full corpus would take minutes of HF stepping), the same texts
re-spelled byte by byte (so CJK and emoji characters are split across tokens), random ids (weighted
towards special and byte tokens), and prompts cut in the middle of a character.
"""

from __future__ import annotations

import random

import pytest

import tokjit
from tokjit.serving import DecodeStream, DecodeStreamError

from conftest import corpus_lines

tokenizers = pytest.importorskip("tokenizers")
from tokenizers.decoders import DecodeStream as HFDecodeStream  # noqa: E402

FAMILIES = ["llama3", "gpt4o", "gemma3", "t5", "bert-minilm", "mistral-7b", "pegasus"]


@pytest.fixture(scope="module", params=FAMILIES)
def pair(request, shared):
    path = shared / "data" / "hf" / request.param / "tokenizer.json"
    tok = tokjit.load(path)
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.no_truncation()
    ref.no_padding()
    return request.param, tok, ref


def _run_ref(ref, ids, skip, prompt=None):
    stream = HFDecodeStream(ids=list(prompt), skip_special_tokens=skip) if prompt else \
        HFDecodeStream(skip_special_tokens=skip)
    out = []
    for i in ids:
        try:
            out.append(stream.step(ref, i))
        except Exception as exc:  # the reference's InvalidPrefix error ends the stream
            out.append(("error", type(exc).__name__))
            break
    return out


def _run_ours(tok, ids, skip, prompt=()):
    stream = tok.decode_stream(prompt_ids=prompt, skip_special_tokens=skip)
    out = []
    for i in ids:
        try:
            out.append(stream.step(i))
        except DecodeStreamError:
            out.append(("error", "Exception"))
            break
    return out


def _assert_same(tok, ref, ids, skip, prompt=()):
    want = _run_ref(ref, ids, skip, prompt)
    got = _run_ours(tok, ids, skip, prompt)
    # the reference's exception type name is not ours; only "raised at this step" must agree
    want = [("error", "Exception") if isinstance(w, tuple) else w for w in want]
    assert got == want, (ids, prompt, skip)


def _sample_texts():
    # code.txt entries are whole files: a prefix of each is plenty
    return [t[:1500] for t in corpus_lines(limit_per_file=60, step=40) if t]


def _byte_token_ids(tok, ref):
    """id of a token standing for each single byte (byte-level BPE or byte-fallback ``<0xXX>``)."""
    byte_ids = {}
    vocab = ref.get_vocab()
    mapping = _bytes_to_unicode()
    for b in range(256):
        for name in (f"<0x{b:02X}>", mapping[b]):
            if name in vocab:
                byte_ids[b] = vocab[name]
                break
    return byte_ids if len(byte_ids) == 256 else None


def _bytes_to_unicode():
    visible = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in visible:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def test_corpus_sequences(pair):
    name, tok, ref = pair
    texts = _sample_texts()
    for k, text in enumerate(texts):
        ids = ref.encode(text, add_special_tokens=(k % 3 == 0)).ids
        _assert_same(tok, ref, ids, skip=(k % 2 == 1))


def test_corpus_concatenation_equals_reference_decode(pair):
    name, tok, ref = pair
    for text in _sample_texts()[::3]:
        ids = ref.encode(text).ids
        stream = tok.decode_stream()
        parts = [stream.step(i) for i in ids]
        joined = "".join(p for p in parts if p is not None) + stream.flush()
        hf_parts = _run_ref(ref, ids, False)
        if any(isinstance(p, tuple) for p in hf_parts):
            continue  # the reference itself cannot stream this sequence
        assert joined == ref.decode(ids, skip_special_tokens=False), ids


def test_characters_split_across_tokens(pair):
    name, tok, ref = pair
    byte_ids = _byte_token_ids(tok, ref)
    if byte_ids is None:
        pytest.skip(f"{name} has no token for every single byte")
    rng = random.Random(5)
    texts = [t for t in _sample_texts() if any(ord(c) > 0x7F for c in t)][:150]
    texts += ["中文字符🎉👩‍👩‍👧 é\u0301", "\U0001F600\U0001F601 x", "日本語のテキスト", "한국어 텍스트"]
    for text in texts:
        data = text.encode("utf-8")
        ids = []
        pos = 0
        while pos < len(data):
            # mix whole tokens with runs of single-byte tokens that cut characters
            if rng.random() < 0.5:
                n = rng.randint(1, 4)
                ids.extend(byte_ids[b] for b in data[pos:pos + n])
                pos += n
            else:
                while pos < len(data) and (data[pos] & 0xC0) == 0x80:
                    ids.append(byte_ids[data[pos]])
                    pos += 1
                end = min(len(data), pos + rng.randint(1, 12))
                while end < len(data) and (data[end] & 0xC0) == 0x80:
                    end += 1
                ids.extend(ref.encode(data[pos:end].decode("utf-8")).ids)
                pos = end
        _assert_same(tok, ref, ids, skip=False)
        _assert_same(tok, ref, ids, skip=True)


def test_random_ids(pair):
    name, tok, ref = pair
    rng = random.Random(11)
    n = ref.get_vocab_size(with_added_tokens=True)
    special = [t.id for t in tok.spec.added_tokens] or [0]
    byte_ids = list((_byte_token_ids(tok, ref) or {}).values()) or [0]
    for trial in range(300):
        ids = []
        for _ in range(rng.randint(1, 24)):
            r = rng.random()
            if r < 0.15:
                ids.append(rng.choice(special))
            elif r < 0.5:
                ids.append(rng.choice(byte_ids))
            else:
                ids.append(rng.randrange(min(n, tok.vocab_size)))
        _assert_same(tok, ref, ids, skip=bool(trial % 2))


def test_prompt_ids(pair):
    name, tok, ref = pair
    byte_ids = _byte_token_ids(tok, ref)
    for text in ["Hello world, how are you?", "中文字符 and more 文字", "emoji 🎉 end"]:
        ids = ref.encode(text).ids
        for cut in range(0, len(ids)):
            _assert_same(tok, ref, ids[cut:], skip=False, prompt=ids[:cut])
        if byte_ids:
            data = text.encode("utf-8")
            split = [byte_ids[b] for b in data]
            for cut in range(1, len(split), 2):  # prompts ending inside a character
                _assert_same(tok, ref, split[cut:], skip=False, prompt=split[:cut])


def test_list_step_and_flush(shared):
    path = shared / "data" / "hf" / "llama3" / "tokenizer.json"
    tok = tokjit.load(path)
    ref = tokenizers.Tokenizer.from_file(str(path))
    ids = ref.encode("naïve 中文 🎉").ids
    hs = HFDecodeStream()
    assert tok.decode_stream().step(ids) == hs.step(ref, ids)
    # an incomplete character at the end of generation comes out as U+FFFD on flush
    emoji = "🎉".encode("utf-8")
    vocab = ref.get_vocab()
    mapping = _bytes_to_unicode()
    partial = [vocab[mapping[b]] for b in emoji[:2]]
    stream = tok.decode_stream()
    assert [stream.step(i) for i in partial] == [None, None]
    assert stream.flush() == ref.decode(partial)
    assert stream.flush() == ""


@pytest.mark.parametrize("name", ["gpt4o", "bert-minilm"])
def test_window_stays_bounded(shared, name):
    """O(1) amortized: the window never holds more than the last two chunks."""
    tok = tokjit.load(shared / "data" / "hf" / name / "tokenizer.json")
    ids = tok.encode(" ".join(t[:500] for t in corpus_lines(limit_per_file=5)))
    stream = DecodeStream(tok)
    longest = 0
    for i in ids:
        stream.step(i)
        longest = max(longest, stream.window_size)
    assert longest <= 16


def test_bad_id_rejected(shared):
    tok = tokjit.load(shared / "data" / "hf" / "gpt4o" / "tokenizer.json")
    with pytest.raises(tokjit.InputError):
        tok.decode_stream().step(tok.vocab_size + 5)


def test_sequence_incremental_text(pair):
    """Sequence: the text returned by append_token adds up to the reference decode of the generated
    part, after a prompt given as text; ``text()`` is the reference decode of everything."""
    from tokjit.serving import Sequence
    name, tok, ref = pair
    for text in _sample_texts()[::25]:
        ids = ref.encode(text).ids
        if len(ids) < 2:
            continue
        cut = len(ids) // 3
        seq = Sequence(tok, ids[:cut])
        got = "".join(seq.append_token(i) for i in ids[cut:])
        full = ref.decode(ids, skip_special_tokens=False)
        head = ref.decode(ids[:cut], skip_special_tokens=False)
        if full.startswith(head) and not head.endswith("\ufffd") and not full.endswith("\ufffd"):
            assert got == full[len(head):], (name, text[:80])
        assert seq.text() == full
