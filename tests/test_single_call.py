"""``encode()`` of one text runs the family's single-text kernel on the calling thread's buffers.

SentencePiece-BPE, WordPiece and Unigram (.model and tokenizer.json) each copy the text into
per-thread buffers that start at 1024 bytes and are rebuilt larger when a text, the charsmap's output
or the ids do not fit. Every text here is compared with the reference library, in this order: texts
across the first capacity, one the charsmap expands about elevenfold (U+FDFA is 3 bytes in, 33 out
under NFKC), then short texts right after the long ones (the buffers are reused: nothing of an
earlier text may reach a later one's ids), and the same texts as one batch.

``encode_to_numpy`` makes the same kernel call and returns a new int32 array: the same texts (and
Llama 3's byte-level BPE) against the reference, with the post-processor too, texts the byte-level
kernel hands to the staged pipeline (FALLBACK) and a Qwen-style tokenizer's Unicode normal-form check.
"""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest

import tokjit
from conftest import shared_path
from tokjit.fused.driver import BIG_LIST, FusedPath
from tokjit.kernels import call_object
from tokjit.kernels import fused as fused_kernel
from tokjit.serving import metrics

FAMILIES = {
    "llama2 .model (SentencePiece-BPE)": (("spm", "llama2", "tokenizer.model"), "sentencepiece"),
    "gemma3 tokenizer.json (SentencePiece-BPE)": (("hf", "gemma3", "tokenizer.json"), "tokenizers"),
    "bert-minilm tokenizer.json (WordPiece)": (("hf", "bert-minilm", "tokenizer.json"), "tokenizers"),
    "t5 spiece.model (Unigram)": (("hf", "t5", "spiece.model"), "sentencepiece"),
    "t5 tokenizer.json (Unigram)": (("hf", "t5", "tokenizer.json"), "tokenizers"),
}

_SENTENCE = "Tokenizers split text into pieces. "  # 35 bytes
TEXTS = [_SENTENCE * k for k in (1, 29, 30, 31, 60, 200)] + [
    "\ufdfa" * 400 + " and a tail",
    "日本語のテキストを分割する。" * 120,
    "Hi",
    "",
    "  two  spaces, tabs\tand\nnew lines  ",
    "ünïcödé ﬃ café ½ Ⅻ ｆｕｌｌｗｉｄｔｈ",
    "<s> [CLS] <unk> looks special",
]


def _reference(kind: str, path: str):
    """(ids of a text, parse_special that gives the reference's ids); with ``add_special_tokens`` the
    ids HF's post-processor frames, or sentencepiece's with the model's BOS when it has one (what
    tokjit's ``.model`` loader adds)."""
    if kind == "sentencepiece":
        spm = pytest.importorskip("sentencepiece")
        model = spm.SentencePieceProcessor(model_file=path)
        has_bos = model.bos_id() >= 0
        # sentencepiece never parses control pieces in text
        return (lambda text, add_special_tokens=False:
                model.encode(text, add_bos=add_special_tokens and has_bos)), False
    hf = pytest.importorskip("tokenizers")
    tok = hf.Tokenizer.from_file(path)
    tok.no_padding()
    tok.no_truncation()
    # HF matches added tokens
    return (lambda text, add_special_tokens=False:
            tok.encode(text, add_special_tokens=add_special_tokens).ids), True


@pytest.mark.parametrize("family", list(FAMILIES))
def test_single_calls_match_reference(shared, family):
    parts, kind = FAMILIES[family]
    path = str(shared_path("data", *parts))
    ref, parse_special = _reference(kind, path)
    tok = tokjit.load(path)
    # the family has its own single-text kernel under the one driver
    assert isinstance(tok._fused, FusedPath) and tok._fused.text_kernel is not None
    for text in TEXTS + TEXTS[::-1]:
        assert tok.encode(text, parse_special=parse_special) == ref(text), text[:60]
    batch = tok.encode_batch(TEXTS, parse_special=parse_special)
    assert batch == [ref(text) for text in TEXTS]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_long_outputs_match_reference(shared, family):
    """Outputs of BIG_LIST ids or more become lists through the tokenizer's table of shared ints (grown
    when a larger id appears): one text, a batch, and again after the table exists."""
    parts, kind = FAMILIES[family]
    path = str(shared_path("data", *parts))
    ref, parse_special = _reference(kind, path)
    tok = tokjit.load(path)
    long_text = " ".join(TEXTS[:9]) * 40
    for text in (_SENTENCE * 12000, long_text):
        expected = ref(text)
        assert len(expected) >= BIG_LIST
        got = tok.encode(text, parse_special=parse_special)
        assert got == expected and all(type(t) is int for t in got[:100])
        assert tok.encode_batch(["Hi", text], parse_special=parse_special) == [ref("Hi"), expected]


def test_borrow_reads_the_same_fields_as_attribute_access():
    """Entry kernels compiled without reference counting read structures with ``structs.borrow``, which
    finds the payload through numba's MemInfo layout: it must give the very arrays (same memory) and
    scalars that ``struct.field`` gives, and survive the structure being reused many times."""
    import numpy as np
    from numba import njit

    from tokjit.kernels import structs

    trie_fields = (np.array([True, False]), np.arange(3), np.arange(3) + 5, np.arange(4, dtype=np.uint8),
                   np.arange(5) * 2, np.arange(6) - 1)
    trie = structs._new_trie(trie_fields)

    @njit(_nrt=False)
    def borrowed(t):
        a = structs.borrow(t, "child_count")
        b = structs.borrow(t, "node_token")
        a[0] += 1  # writes go to the structure's own array
        return a[2] + b[5] + structs.borrow(t, "edge_byte")[3]

    for _ in range(1000):
        assert borrowed(trie) == 7 + 4 + 3
    assert trie_fields[2][0] == 5 + 1000  # child_count, the 3rd field, is arange(3) + 5
    vocab = tokjit.get_encoding("o200k_base")._fused.pipes[0]

    @njit
    def same_memory(pipe):
        v = pipe.vocab
        return (structs.borrow(v, "pair_slots").ctypes.data == v.pair_slots.ctypes.data
                and structs.borrow(v, "max_len") == v.max_len)

    assert same_memory(vocab)


# encode_to_numpy: every fused family (byte-level BPE's file here, the others above), each text against
# the reference library
NUMPY_FAMILIES = {**FAMILIES,
                  "llama3 tokenizer.json (byte-level BPE)": (("hf", "llama3", "tokenizer.json"), "tokenizers")}


def _spy_recover(monkeypatch, path) -> list[int]:
    """The negative codes ``path``'s single-text kernel returns from now on (its ``_recover`` calls)."""
    codes: list[int] = []
    recover = path._recover

    def spy(code, st, data, parse_special):
        codes.append(code)
        return recover(code, st, data, parse_special)

    monkeypatch.setattr(path, "_recover", spy)
    return codes


def _check_arrays(tok, results):
    """Each array is int32, its own memory (not the thread's ``out``), and still holds its ids after
    every later call reused the thread's buffers."""
    out = tok._fused._local.st.out
    for arr, ids in results:
        assert type(arr) is np.ndarray and arr.dtype == np.int32 and arr.ndim == 1
        assert not np.shares_memory(arr, out)
        assert arr.tolist() == ids


@pytest.mark.parametrize("family", list(NUMPY_FAMILIES))
def test_encode_to_numpy_matches_reference(shared, monkeypatch, family):
    """``encode_to_numpy`` makes ``encode``'s kernel call and returns a new int32 array: texts across
    the first 1024-byte buffers (GROW), short ones after them, with and without the post-processor."""
    parts, kind = NUMPY_FAMILIES[family]
    path = str(shared_path("data", *parts))
    ref, parse_special = _reference(kind, path)
    tok = tokjit.load(path)
    assert "encode_to_numpy" in vars(tok)  # the fused path's own function, not the staged pipeline
    codes = _spy_recover(monkeypatch, tok._fused)
    results = []
    for text in TEXTS + TEXTS[::-1]:
        arr = tok.encode_to_numpy(text, parse_special=parse_special)
        assert arr.tolist() == ref(text), text[:60]
        results.append((arr, arr.tolist()))
    assert fused_kernel.GROW in codes
    for text in TEXTS[:1] + TEXTS[-4:]:
        arr = tok.encode_to_numpy(text, parse_special=parse_special, add_special_tokens=True)
        assert arr.tolist() == ref(text, add_special_tokens=True), text[:60]
        results.append((arr, arr.tolist()))
    _check_arrays(tok, results)
    # writing into a returned array changes nothing the tokenizer keeps
    arr = tok.encode_to_numpy(TEXTS[0], parse_special=parse_special)
    arr[:] = -1
    assert tok.encode_to_numpy(TEXTS[0], parse_special=parse_special).tolist() == ref(TEXTS[0])
    # with metrics on, the general route runs and counts the call
    m = metrics.enable()
    try:
        assert tok.encode_to_numpy("Hi", parse_special=parse_special).tolist() == ref("Hi")
        assert m.snapshot()["encode_calls"] == 1
    finally:
        metrics.disable()


# a letter run pushes one backtracking frame per letter on the regex VM (no known-shape splitter
# recognizes this pattern): past the VM's frame stack the kernel answers FALLBACK
_VM_SPLIT = r"(?:\p{L}\p{M}*)+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+"


def _variant(tmp_path, *, normalizer=None, split=None):
    """GPT-4o's tokenizer.json with a normalizer, or another split regex, and a non-special added token
    beside the special ones; ids of added tokens as HF assigns them."""
    hf = pytest.importorskip("tokenizers")
    data = json.loads(shared_path("data", "hf", "gpt4o", "tokenizer.json").read_text(encoding="utf-8"))
    if normalizer is not None:
        data["normalizer"] = normalizer
    if split is not None:
        for pre in data["pre_tokenizer"]["pretokenizers"]:
            if pre["type"] == "Split":
                pre["pattern"] = {"Regex": split}
    data["added_tokens"] = data["added_tokens"] + [
        {"id": 0, "content": "cafe", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": False}]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = hf.Tokenizer.from_file(str(path))
    for added in data["added_tokens"]:
        added["id"] = ref.token_to_id(added["content"])
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = hf.Tokenizer.from_file(str(path))
    return tokjit.load(str(path)), (lambda text, add_special_tokens=False:
                                    ref.encode(text, add_special_tokens=add_special_tokens).ids)


def test_encode_to_numpy_fallback_matches_reference(shared, tmp_path, monkeypatch):
    """Texts the byte-level kernel hands to the staged pipeline (FALLBACK), after growing its buffers
    and with them already grown: HF's ids, as new int32 arrays."""
    tok, ref = _variant(tmp_path, split=_VM_SPLIT)
    assert "encode_to_numpy" in vars(tok)
    codes = _spy_recover(monkeypatch, tok._fused)
    texts = ["a" * 3000, "cafe " + "é" * 2000 + " 12345", "ab" * 700 + " x", "Hi"]
    results = []
    for text in texts:
        codes.clear()
        arr = tok.encode_to_numpy(text, parse_special=True)
        assert arr.tolist() == ref(text), text[:60]
        results.append((arr, arr.tolist()))
        if text != "Hi":
            assert codes[-1] == fused_kernel.FALLBACK, (text[:20], codes)
    arr = tok.encode_to_numpy(texts[0], parse_special=True, add_special_tokens=True)
    assert arr.tolist() == ref(texts[0], add_special_tokens=True)
    results.append((arr, arr.tolist()))
    _check_arrays(tok, results)


def test_encode_to_numpy_normal_form_matches_reference(shared, tmp_path):
    """A Qwen-style tokenizer (NFC, then byte-level BPE): text already in NFC runs the kernel, other
    text the staged pipeline, which normalizes it; both give HF's ids as new int32 arrays."""
    tok, ref = _variant(tmp_path, normalizer={"type": "NFC"})
    assert tok._fused.form == "NFC"
    state = getattr(tok.encode_to_numpy, "__self__", None)
    # the built-in call (tokjit.fused.call_object), where the interpreter allows one, takes ASCII str
    # only; every other text goes to the Python function's normal-form check
    assert state is None or state[call_object.CALL_ASCII_ONLY] == 1
    texts = ["cafe\u0301 au lait", "e\u0301<|endoftext|>e\u0301", "\u1100\u1161\u11a8 ﬁ ½",
             unicodedata.normalize("NFD", "Ünïcödé çà et là " * 100), "Hi", "déjà vu " * 300]
    assert any(not unicodedata.is_normalized("NFC", t) for t in texts)
    results = []
    for text in texts + texts[::-1]:
        # HF always splits special-token text out; parse_special=False encodes it as text
        for parse_special in (True, False) if "<|" not in text else (True,):
            arr = tok.encode_to_numpy(text, parse_special=parse_special)
            assert arr.tolist() == ref(text), text[:60]
            results.append((arr, arr.tolist()))
        arr = tok.encode_to_numpy(text, parse_special=True, add_special_tokens=True)
        assert arr.tolist() == ref(text, add_special_tokens=True), text[:60]
        results.append((arr, arr.tolist()))
    _check_arrays(tok, results)


def test_normal_form_quick_check_in_the_builtin(shared, tmp_path, monkeypatch):
    """With a normal form, the built-in call runs the form's quick check on a str's own code points
    (one, two or four bytes each): text it passes reaches the kernel without the Python function's
    check, the rest (marks out of order, decomposed letters, lone surrogates) goes to the Python
    function, which normalizes it; HF's ids either way, as lists and arrays."""
    import tokjit.fused.driver as driver

    tok, ref = _variant(tmp_path, normalizer={"type": "NFC"})
    if getattr(tok.encode, "__self__", None) is None:
        pytest.skip("this interpreter gets no built-in call")
    # the first call arms the built-in, the first str that is not ASCII its quick check
    tok.encode("Hi"), tok.encode_to_numpy("Hi"), tok.encode("\xe9"), tok.encode_to_numpy("\xe9")
    checked = []
    monkeypatch.setattr(driver, "is_normalized", lambda form, text: checked.append(text) or
                        unicodedata.is_normalized(form, text))
    passes = ["déjà vu", "\u65e5\u672c\u8a9e\u306e\u6587", "\u0643\u064e\u0651\u062a\u064e\u0628",
              "emoji \U0001f600 ok", "\u05e9\u05b8\u05c1 x", "Å ligne"]
    declined = ["\u0643\u0651\u064e\u062a", "cafe\u0301", "e\u0301 \u4e2d", "\u1100\u1161", "a\ud800b",
                "\U0001f600\u0651\u064e", "\u00e9\u0316\u0301"]
    for text in passes + declined:
        expected = ref(text.replace("\ud800", "\ufffd"))  # tokjit's rule for a lone surrogate (HF takes none)
        for call in (tok.encode, lambda t: tok.encode_to_numpy(t).tolist()):
            checked.clear()
            assert call(text) == expected, text
            assert (checked == []) == (text in passes), (text, checked)


def test_session_address_reaches_the_thread_session():
    """A single-text kernel gets its thread's session as an address (``structs.addresses``); rebuilt
    by ``struct_at`` it must be that session, in an uncounted kernel and in a counting one, whose
    reference it must give back (the session's count is unchanged after many calls)."""
    from numba import njit
    from tokjit.kernels.structs import BPE_SESSION, addresses, borrow, struct_at

    tok = tokjit.get_encoding("o200k_base")
    tok.encode("warm up")
    st = tok._fused._thread()
    session = st.sessions[0]
    assert st.session_addrs == addresses(st.sessions)

    @njit(_nrt=False)
    def borrowed_text_len(address):
        return borrow(borrow(struct_at(address, BPE_SESSION), "spans"), "text").shape[0]

    @njit
    def counted_text_len(address):
        return struct_at(address, BPE_SESSION).spans.text.shape[0]

    before = session._meminfo.refcount
    for _ in range(100):
        assert borrowed_text_len(st.session_addrs[0]) == st.text.shape[0]
        assert counted_text_len(st.session_addrs[0]) == st.text.shape[0]
    assert session._meminfo.refcount == before
