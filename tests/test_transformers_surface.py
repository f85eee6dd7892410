"""The transformers-shaped surface (``tok(...)``, special tokens, vocabulary helpers, ``from_pretrained``)
against ``transformers.AutoTokenizer`` on every HF folder in the shared data.

The reference is transformers itself, with one correction: transformers 5 rebuilds the pipeline of some
classes from its own code instead of the folder's tokenizer.json (``GPT2Tokenizer`` splits o200k text
with GPT-2's regex, ``LlamaTokenizer`` / ``PegasusTokenizer`` rebuild the Metaspace step), so its ids
there differ from HF ``tokenizers`` running the file -- which is the reference tokjit matches for a
tokenizer.json. The reference object therefore runs transformers' own Python (templates, truncation,
padding, masks, offsets, special tokens, decode) over ``tokenizers.Tokenizer.from_file`` of the folder.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tokjit
from tokjit.compat.transformers import MissingDependencyError
from tokjit.errors import InputError, TokenizerFileNotFoundError, UnsupportedComponentError

from conftest import SHARED, corpus_files, corpus_lines

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HF_DIR = SHARED / "data" / "hf"
FOLDERS = sorted(p.name for p in HF_DIR.iterdir() if (p / "tokenizer.json").is_file()) if HF_DIR.is_dir() else []


def _texts() -> tuple[list[str], list[str]]:
    corpus = corpus_files()
    picked = corpus["edge_cases"][:60] + corpus["english"][:20:2]
    for name in ("chinese", "russian", "hindi", "emoji", "vietnamese", "korean"):
        picked += [line for line in corpus[name][:40] if line][:3]
    # special-token spellings of every family in running text, and an empty string
    picked += ["<s> special </s> [CLS] x [SEP] <|endoftext|> <|begin_of_text|> <bos><pad>", ""]
    pairs = picked[len(picked) // 2:] + picked[: len(picked) - len(picked) // 2]
    return picked, pairs


TEXTS, PAIRS = _texts() if HF_DIR.is_dir() else ([], [])

_CACHE: dict = {}


def _reference(folder):
    try:
        ref = transformers.AutoTokenizer.from_pretrained(str(folder))
    except (TypeError, ValueError, OSError):
        # envit5 names T5Tokenizer, whose transformers 5 constructor cannot take a BPE file
        ref = transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))
    backend = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    backend.no_padding()
    backend.no_truncation()
    # as transformers does at load: the config's special tokens become special added tokens
    listed = {str(t) for t in backend.get_added_tokens_decoder().values()}
    backend.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False)
                                for t in ref.all_special_tokens if t not in listed and
                                backend.token_to_id(t) is not None])
    ref._tokenizer = backend
    if getattr(ref, "_should_update_post_processor", False):
        ref.update_post_processor()
    return ref


def pair_for(name):
    if name not in _CACHE:
        folder = HF_DIR / name
        _CACHE[name] = (tokjit.from_pretrained(folder), _reference(folder))
    return _CACHE[name]


@pytest.fixture(params=FOLDERS)
def pair(request, shared):
    return pair_for(request.param)


def _plain(enc) -> dict:
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in dict(enc).items()}


def _call_both(tok, ref, *args, **kwargs):
    """(tokjit result, transformers result), or the exception class name of each that raised."""
    out = []
    for fn in (tok, ref):
        try:
            out.append(_plain(fn(*args, **kwargs)))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - tokenizers panics (BaseException) on bad strides
            out.append(("raised", exc))
    return out


# ------------------------------------------------------------------------------------------------
# special tokens, limits, vocabulary
# ------------------------------------------------------------------------------------------------

ATTRIBUTES = ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token",
              "bos_token_id", "eos_token_id", "unk_token_id", "pad_token_id", "sep_token_id", "cls_token_id",
              "mask_token_id", "all_special_tokens", "all_special_ids", "model_max_length", "padding_side",
              "truncation_side", "model_input_names"]


def test_special_tokens_and_limits(pair):
    tok, ref = pair
    for attr in ATTRIBUTES:
        assert getattr(tok, attr) == getattr(ref, attr), attr


def test_load_of_folder_and_file_get_config_special_tokens(pair, shared):
    tok, ref = pair
    folder = shared / "data" / "hf" / os.path.basename(os.path.dirname(tok.spec.source["path"]))
    for loaded in (tokjit.load(folder), tokjit.load(folder / "tokenizer.json")):
        assert (loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id) == \
            (ref.bos_token_id, ref.eos_token_id, ref.pad_token_id)


def test_padding_and_truncation_of_tokenizer_json_on_every_load(tmp_path, shared, monkeypatch):
    """transformers takes the pad token and the padding and truncation sides from tokenizer.json's
    ``padding`` / ``truncation`` when the config names none. tokjit keeps them in the parsed spec, so
    a load from its cache (the second) need not parse the file again; a spec cached before they were
    kept (the third: entries removed) reads them from the file."""
    import json

    from tokjit.api import attach_tokenizer_config

    monkeypatch.setenv("TOKJIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "bert-left"
    folder.mkdir()
    doc = json.loads((shared / "data" / "hf" / "bert-minilm" / "tokenizer.json").read_text(encoding="utf-8"))
    doc["padding"] = {"strategy": "BatchLongest", "direction": "Left", "pad_to_multiple_of": None,
                      "pad_id": 100, "pad_type_id": 0, "pad_token": "[UNK]"}
    doc["truncation"] = {"direction": "Left", "max_length": 128, "strategy": "LongestFirst", "stride": 0}
    (folder / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizerFast",
                                                              "model_max_length": 512}), encoding="utf-8")
    ref = transformers.AutoTokenizer.from_pretrained(str(folder))
    expected = (ref.pad_token, ref.padding_side, ref.truncation_side)
    assert expected[1:] == ("left", "left")
    loads = [tokjit.load(folder / "tokenizer.json") for _ in range(2)]
    old = tokjit.load(folder / "tokenizer.json")
    del old.spec.source["padding"], old.spec.source["truncation"]
    attach_tokenizer_config(old, folder / "tokenizer.json")
    for tok in loads + [old]:
        assert (tok.pad_token, tok.padding_side, tok.truncation_side) == expected


def test_vocabulary(pair):
    tok, ref = pair
    assert len(tok) == len(ref)
    mine, theirs = tok.get_vocab(), ref.get_vocab()
    assert len(mine) == len(theirs)
    rng = np.random.default_rng(16)
    sample = [list(theirs)[i] for i in rng.choice(len(theirs), 2000, replace=False)]
    assert {s: mine.get(s) for s in sample} == {s: theirs[s] for s in sample}
    ids = sorted(theirs[s] for s in sample)
    assert tok.convert_ids_to_tokens(ids) == ref.convert_ids_to_tokens(ids)
    assert tok.convert_ids_to_tokens(ids[0]) == ref.convert_ids_to_tokens(ids[0])
    strings = sample[:200] + ["definitely-not-a-token-\u2603\u2603"]
    assert tok.convert_tokens_to_ids(strings) == ref.convert_tokens_to_ids(strings)
    assert tok.convert_tokens_to_ids(strings[0]) == ref.convert_tokens_to_ids(strings[0])
    specials = ref.all_special_ids + ids[:50]
    assert tok.convert_ids_to_tokens(specials, skip_special_tokens=True) == \
        ref.convert_ids_to_tokens(specials, skip_special_tokens=True)


def test_tokenize(pair):
    tok, ref = pair
    # Unigram names unknown pieces by their normalized text: corpus lines bring plenty of those
    for text in TEXTS + [t[:300] for t in corpus_lines(limit_per_file=15, step=97)]:
        assert tok.tokenize(text) == ref.tokenize(text), text
    assert tok.tokenize(TEXTS[10], TEXTS[20], add_special_tokens=True) == \
        ref.tokenize(TEXTS[10], TEXTS[20], add_special_tokens=True)


def test_batch_decode(pair):
    tok, ref = pair
    ids = ref(TEXTS)["input_ids"]
    for skip in (False, True):
        assert tok.batch_decode(ids, skip_special_tokens=skip) == ref.batch_decode(ids, skip_special_tokens=skip)


# ------------------------------------------------------------------------------------------------
# __call__
# ------------------------------------------------------------------------------------------------

CALLS = [
    {},
    {"add_special_tokens": False},
    {"return_offsets_mapping": True},
    {"return_token_type_ids": True, "return_special_tokens_mask": True},
    {"return_attention_mask": False, "return_length": True},
    {"padding": True},
    {"padding": "longest", "padding_side": "left", "return_offsets_mapping": True},
    {"padding": "max_length", "max_length": 48, "pad_to_multiple_of": 16},
    {"padding": True, "pad_to_multiple_of": 8, "return_token_type_ids": True},
    {"truncation": True, "max_length": 9},
    {"max_length": 5},
    {"truncation": "longest_first", "max_length": 11, "return_offsets_mapping": True},
    {"truncation": "only_first", "max_length": 40},
    {"truncation": "only_second", "max_length": 40},
    {"truncation": True, "max_length": 1},
    {"truncation": True, "max_length": 12, "stride": 3},
    {"truncation": True},
    {"padding": "max_length", "truncation": True, "max_length": 24, "padding_side": "left"},
    {"padding": "max_length"},
]


def _hf_shifts_offsets(tok, text: str) -> bool:
    """The known offsets difference of tests/test_offsets.py: when the normalizer deletes characters
    at the very start of a text (a control character, a collapsed whitespace run), HF shifts the
    spans after it; tokjit reports the true spans."""
    head = text[:2]
    return tok.normalizer is not None and len(tok._normalize_text(head)) < len(head)


def _without_shifted_offsets(result, rows):
    if isinstance(result, tuple) or "offset_mapping" not in result or not rows:
        return result
    out = dict(result)
    offsets = out["offset_mapping"]
    out["offset_mapping"] = [o for i, o in enumerate(offsets) if i not in rows] \
        if offsets and isinstance(offsets[0], list) else "shifted"
    return out


@pytest.mark.parametrize("kwargs", CALLS, ids=[str(c) for c in CALLS])
def test_call_batches_and_pairs(pair, kwargs):
    tok, ref = pair
    for args in ((TEXTS,), (TEXTS, PAIRS), (TEXTS[12],), (TEXTS[12], PAIRS[3]), ([TEXTS[0]],)):
        mine, theirs = _call_both(tok, ref, *args, **kwargs)
        if isinstance(theirs, tuple):
            assert isinstance(mine, tuple), (args[0][:1], kwargs, theirs[1])
            assert isinstance(mine[1], InputError), mine[1]
            continue
        shifted = set()
        if kwargs.get("return_offsets_mapping"):
            columns = [[a] if isinstance(a, str) else a for a in args]
            shifted = {i for col in columns for i, t in enumerate(col) if _hf_shifts_offsets(tok, t)}
        mine, theirs = _without_shifted_offsets(mine, shifted), _without_shifted_offsets(theirs, shifted)
        assert mine == theirs, (kwargs, len(args))


OVERFLOW_CALLS = [
    {"truncation": True, "max_length": 8, "stride": 2},
    {"truncation": True, "max_length": 10, "stride": 3, "padding": True, "return_offsets_mapping": True},
    {"truncation": True, "max_length": 6},
    {"truncation": True, "max_length": 1},
    {"max_length": 7, "stride": 1, "return_special_tokens_mask": True},
    {"truncation": True, "max_length": 30, "stride": 29},
    {"truncation": True, "max_length": 9, "stride": 8},
]


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("kwargs", OVERFLOW_CALLS, ids=[str(c) for c in OVERFLOW_CALLS])
def test_overflowing_tokens(pair, kwargs, side):
    tok, ref = pair
    tok.truncation_side = ref.truncation_side = side
    try:
        for args in ((TEXTS,), (TEXTS[40],), ([TEXTS[12]],)):
            mine, theirs = _call_both(tok, ref, *args, return_overflowing_tokens=True, **kwargs)
            if isinstance(theirs, tuple):
                assert isinstance(mine, tuple) and isinstance(mine[1], InputError), (kwargs, theirs[1])
                continue
            if kwargs.get("return_offsets_mapping"):
                texts = args[0] if isinstance(args[0], list) else [args[0]]
                shifted = {i for i, t in enumerate(texts) if _hf_shifts_offsets(tok, t)}
                rows = {i for i, src in enumerate(theirs["overflow_to_sample_mapping"]) if src in shifted}
                mine, theirs = _without_shifted_offsets(mine, rows), _without_shifted_offsets(theirs, rows)
            assert mine == theirs, kwargs
    finally:
        tok.truncation_side = ref.truncation_side = "right"
    with pytest.raises(UnsupportedComponentError):
        tok(TEXTS[:2], PAIRS[:2], truncation=True, max_length=5, return_overflowing_tokens=True)


@pytest.mark.parametrize("kwargs", [{"padding": True}, {"padding": True, "truncation": True, "max_length": 10,
                                                         "return_offsets_mapping": True},
                                    {"truncation": True, "max_length": 6}])
def test_return_tensors_np(pair, kwargs):
    tok, ref = pair
    texts, pairs = TEXTS[:20], PAIRS[:20]
    if kwargs.get("padding") and ref.pad_token is None:
        with pytest.raises(InputError):
            tok(texts, pairs, return_tensors="np", **kwargs)
        return
    for args in ((texts, pairs), (texts[3],)):
        if kwargs.get("return_offsets_mapping") and any(_hf_shifts_offsets(tok, t) for a in args
                                                         for t in ([a] if isinstance(a, str) else a)):
            args = ([t for t in args[0] if not _hf_shifts_offsets(tok, t)][:8],)
        theirs = ref(*args, return_tensors="np", **kwargs)
        mine = tok(*args, return_tensors="np", **kwargs)
        assert list(mine) == list(theirs)
        for key in theirs:
            assert mine[key].shape == theirs[key].shape, key
            assert mine[key].dtype == theirs[key].dtype, key
            if theirs[key].dtype == object:  # rows of different lengths: an array per row
                assert [r.tolist() for r in mine[key]] == [r.tolist() for r in theirs[key]], key
            else:
                assert np.array_equal(mine[key], theirs[key]), key


def test_return_tensors_pt():
    name = FOLDERS[0] if FOLDERS else pytest.skip("no HF folders")
    tok, ref = pair_for(name)
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError):
            tok(["a b", "c"], padding=True, return_tensors="pt")
        return
    mine = tok(TEXTS[:8], padding=True, return_tensors="pt")
    theirs = ref(TEXTS[:8], padding=True, return_tensors="pt")
    for key in theirs:
        assert mine[key].tolist() == theirs[key].tolist()


def test_encode_with_offsets_adds_special_tokens(pair):
    tok, ref = pair
    for text in TEXTS[:40]:
        if _hf_shifts_offsets(tok, text):
            continue
        enc = ref(text, return_offsets_mapping=True)
        ids, offsets = tok.encode_with_offsets(text, parse_special=True, add_special_tokens=True)
        if tok.spec.post_processor is not None and not (tok.hf_config and tok.hf_config.rebuilds_template):
            assert (ids, offsets) == (enc["input_ids"], enc["offset_mapping"]), text


def test_bad_inputs_are_typed_errors(pair):
    tok, _ = pair
    for bad in ([["pre", "tokenized"]], 3, None):
        with pytest.raises(InputError):
            tok(bad)
    with pytest.raises(InputError):
        tok(["a", "b"], ["only one pair"])
    with pytest.raises(InputError):
        tok("a", padding="sideways")
    with pytest.raises(InputError):
        tok("a", padding_side="middle")
    with pytest.raises(InputError):
        tok.padding_side = "up"
    with pytest.raises(InputError):
        tok("a", truncation="middle", max_length=3)
    with pytest.raises(InputError):
        tok(["a", "a b c d e f"], return_tensors="tf")


# ------------------------------------------------------------------------------------------------
# from_pretrained: folders, chat templates, hub ids from the local cache, constrain's stop token
# ------------------------------------------------------------------------------------------------

def _fake_cache(tmp_path, name, org="someorg", repo="somemodel", commit="0123abcd" * 5):
    repo_dir = tmp_path / "hub" / f"models--{org}--{repo}"
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(commit)
    for f in (HF_DIR / name).iterdir():
        os.symlink(f, snapshot / f.name)  # the hub cache itself links snapshots to blobs
    return f"{org}/{repo}", snapshot


@pytest.mark.parametrize("env", ["HF_HUB_CACHE", "HF_HOME", "cache_dir"])
def test_hub_id_from_local_cache(tmp_path, monkeypatch, shared, env):
    name = "mistral-7b" if "mistral-7b" in FOLDERS else FOLDERS[0]
    repo_id, snapshot = _fake_cache(tmp_path, name)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    kwargs = {}
    if env == "HF_HUB_CACHE":
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    elif env == "HF_HOME":
        monkeypatch.setenv("HF_HOME", str(tmp_path))
    else:
        kwargs["cache_dir"] = tmp_path / "hub"
    tok = tokjit.from_pretrained(repo_id, **kwargs)
    ref = transformers.AutoTokenizer.from_pretrained(str(snapshot))
    assert os.path.dirname(tok.spec.source["path"]) == str(snapshot)
    for attr in ATTRIBUTES:
        assert getattr(tok, attr) == getattr(ref, attr), attr


def test_hub_id_missing_names_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "nowhere"))
    with pytest.raises(TokenizerFileNotFoundError) as info:
        tokjit.from_pretrained("nobody/no-such-model")
    assert str(tmp_path / "nowhere" / "models--nobody--no-such-model") in str(info.value)
    with pytest.raises(TokenizerFileNotFoundError):
        tokjit.from_pretrained(tmp_path / "not-a-folder")


def test_empty_folder_is_a_clear_error(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(TokenizerFileNotFoundError) as info:
        tokjit.from_pretrained(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_chat_template_jinja_beside_the_tokenizer(tmp_path, shared):
    jinja2 = pytest.importorskip("jinja2")  # noqa: F841
    name = "llama3"
    if name not in FOLDERS:
        pytest.skip("llama3 folder missing")
    for f in (HF_DIR / name).iterdir():
        os.symlink(f, tmp_path / f.name)
    template = "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{{ eos_token }}{% endfor %}"
    (tmp_path / "chat_template.jinja").write_text(template)
    tok = tokjit.from_pretrained(tmp_path)
    ref = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    messages = [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hello"}]
    # transformers prefers chat_template.jinja over the config's template
    assert tok.apply_chat_template(messages) == ref.apply_chat_template(messages, tokenize=False)
    assert tok.apply_chat_template(messages).endswith("[assistant]hello<|end_of_text|>")


@pytest.mark.parametrize("name", ["mistral-7b", "llama3", "gemma3"])
def test_constrain_stops_on_the_config_eos(name, shared):
    if name not in FOLDERS:
        pytest.skip(f"{name} folder missing")
    tok, ref = pair_for(name)
    assert ref.eos_token_id is not None
    assert tok.eos_token_id == ref.eos_token_id
    assert tok.bos_token_id == ref.bos_token_id
    assert tok("hi")["input_ids"] == ref("hi")["input_ids"]
    from tokjit.constrain import Regex
    constraint = Regex(tok, "ab")
    assert constraint.eos_ids.tolist() == [ref.eos_token_id]


def test_equal_to_unpatched_auto_tokenizer_where_it_runs_the_file(pair, shared):
    """Where AutoTokenizer's own backend gives the file's ids, tokjit equals AutoTokenizer as loaded,
    with no backend swap; elsewhere the ids it differs on are its rebuilt pipeline's, not tokjit's."""
    tok, patched = pair
    folder = HF_DIR / os.path.basename(os.path.dirname(tok.spec.source["path"]))
    try:
        plain = transformers.AutoTokenizer.from_pretrained(str(folder))
    except (TypeError, ValueError, OSError):
        plain = transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))
    file_backend = patched._tokenizer
    same_backend = all(plain(t, add_special_tokens=False)["input_ids"] ==
                       file_backend.encode(t, add_special_tokens=False).ids for t in TEXTS)
    if not same_backend:
        assert any(tok(t, add_special_tokens=False)["input_ids"] != plain(t, add_special_tokens=False)["input_ids"]
                   for t in TEXTS)
        assert all(tok(t, add_special_tokens=False)["input_ids"] ==
                   file_backend.encode(t, add_special_tokens=False).ids for t in TEXTS)
        return
    for kwargs in ({}, {"padding": True}, {"truncation": True, "max_length": 10},
                   {"return_offsets_mapping": True}):
        if kwargs.get("padding") and plain.pad_token is None:
            continue
        for args in ((TEXTS,), (TEXTS, PAIRS)):
            mine, theirs = _call_both(tok, plain, *args, **kwargs)
            if kwargs.get("return_offsets_mapping"):
                shifted = {i for col in args for i, t in enumerate(col) if _hf_shifts_offsets(tok, t)}
                mine, theirs = _without_shifted_offsets(mine, shifted), _without_shifted_offsets(theirs, shifted)
            assert mine == theirs, kwargs
    for attr in ATTRIBUTES:
        assert getattr(tok, attr) == getattr(plain, attr), attr


def test_pickled_from_pretrained_keeps_config_special_tokens(shared):
    import pickle
    name = "envit5" if "envit5" in FOLDERS else FOLDERS[0]
    tok, ref = pair_for(name)
    text = "a </s> b <extra_id_3> <pad> c"
    again = pickle.loads(pickle.dumps(tok))
    assert again(text)["input_ids"] == tok(text)["input_ids"] == ref(text)["input_ids"]
    # tokjit.load keeps the file's own reference (HF tokenizers), which does not know them
    plain = tokenizers.Tokenizer.from_file(str(HF_DIR / name / "tokenizer.json"))
    assert tokjit.load(HF_DIR / name).encode(text, parse_special=True) == \
        plain.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("processor", ["ByteLevel", "RobertaProcessing"])
@pytest.mark.parametrize("add_prefix_space", [False, True])
def test_trim_offsets_of_byte_level_post_processors(tmp_path, shared, processor, add_prefix_space):
    """GPT-2 / RoBERTa exports trim the spaces (``Ġ``) off token spans; the shared byte-level files
    do not, so the llama3 file is re-exported with such a post-processor."""
    import json
    if "llama3" not in FOLDERS:
        pytest.skip("llama3 folder missing")
    doc = json.loads((HF_DIR / "llama3" / "tokenizer.json").read_text(encoding="utf-8"))
    doc["post_processor"] = {"type": processor, "trim_offsets": True, "add_prefix_space": add_prefix_space,
                             "use_regex": True}
    if processor == "RobertaProcessing":
        doc["post_processor"].update(sep=["<|end_of_text|>", 128001], cls=["<|begin_of_text|>", 128000])
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = tokjit.load(path)
    texts = TEXTS + [t[:300] for t in corpus_lines(limit_per_file=4, step=211)]
    for text in texts:
        for add in (False, True):
            enc = ref.encode(text, add_special_tokens=add)
            assert tok.encode_with_offsets(text, parse_special=True, add_special_tokens=add) == \
                (enc.ids, [tuple(o) for o in enc.offsets]), (text, add)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
    assert tok(texts[:30], return_offsets_mapping=True)["offset_mapping"] == \
        fast(texts[:30], return_offsets_mapping=True)["offset_mapping"]
    kwargs = {"return_token_type_ids": True, "return_special_tokens_mask": True, "return_offsets_mapping": True}
    assert dict(tok(texts[:30], texts[30:60], **kwargs)) == dict(fast(texts[:30], texts[30:60], **kwargs))


def test_bert_processing_pairs(tmp_path, shared):
    import json
    if "llama3" not in FOLDERS:
        pytest.skip("llama3 folder missing")
    doc = json.loads((HF_DIR / "llama3" / "tokenizer.json").read_text(encoding="utf-8"))
    doc["post_processor"] = {"type": "BertProcessing", "sep": ["<|end_of_text|>", 128001],
                             "cls": ["<|begin_of_text|>", 128000]}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    tok = tokjit.load(path)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
    kwargs = {"return_token_type_ids": True, "return_special_tokens_mask": True}
    for args in ((TEXTS[:30],), (TEXTS[:30], PAIRS[:30])):
        assert dict(tok(*args, **kwargs)) == dict(fast(*args, **kwargs))


@pytest.mark.parametrize("add_eos", [False, True])
def test_sentencepiece_folder_templates(tmp_path, shared, add_eos):
    """A folder with only tokenizer.model: ids are sentencepiece's (the .model reference), so rows
    are compared where transformers' own rebuilt pipeline gives the same plain ids; the BOS/EOS
    template from add_bos_token / add_eos_token, pairs, truncation and padding must then agree."""
    import json
    model = shared / "data" / "spm" / "llama2" / "tokenizer.model"
    if not model.is_file():
        pytest.skip("spm/llama2 missing")
    os.symlink(model, tmp_path / "tokenizer.model")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": add_eos,
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>", "legacy": True}))
    pytest.importorskip("sentencepiece")
    tok = tokjit.from_pretrained(tmp_path)
    ref = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    for attr in ATTRIBUTES:
        assert getattr(tok, attr) == getattr(ref, attr), attr
    same = [i for i, (a, b) in enumerate(zip(TEXTS, PAIRS))
            if tok(a, add_special_tokens=False)["input_ids"] == ref(a, add_special_tokens=False)["input_ids"]
            and tok(b, add_special_tokens=False)["input_ids"] == ref(b, add_special_tokens=False)["input_ids"]]
    assert len(same) > len(TEXTS) // 2
    texts, pairs = [TEXTS[i] for i in same], [PAIRS[i] for i in same]
    for kwargs in ({}, {"padding": True}, {"truncation": True, "max_length": 9, "padding": "max_length"},
                   {"truncation": "only_second", "max_length": 12}):
        for args in ((texts,), (texts, pairs)):
            mine, theirs = _call_both(tok, ref, *args, **kwargs)
            if isinstance(theirs, tuple):
                assert isinstance(mine, tuple) and isinstance(mine[1], InputError), theirs[1]
            else:
                assert mine == theirs, kwargs
