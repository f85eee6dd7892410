"""Untrusted files, text and templates: no code execution, no special-token injection, a cache
that cannot be tampered with into wrong answers, and loads that work without a writable disk."""

from __future__ import annotations

import builtins
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tokjit
from conftest import REPO_ROOT, shared_path
from tokjit.load import cache

# one file of every format and family
FILES = {
    "llama3 tokenizer.json": ("hf", "llama3", "tokenizer.json"),
    "gemma3 tokenizer.json": ("hf", "gemma3", "tokenizer.json"),
    "mistral tokenizer.json": ("hf", "mistral-7b", "tokenizer.json"),
    "t5 tokenizer.json": ("hf", "t5", "tokenizer.json"),
    "pegasus tokenizer.json": ("hf", "pegasus", "tokenizer.json"),
    "envit5 tokenizer.json": ("hf", "envit5", "tokenizer.json"),
    "bert tokenizer.json": ("hf", "bert-minilm", "tokenizer.json"),
    "bert vocab.txt": ("hf", "bert-minilm", "vocab.txt"),
    "t5 spiece.model": ("hf", "t5", "spiece.model"),
    "llama2 .model": ("spm", "llama2", "tokenizer.model"),
    "botchan unigram .model": ("spm", "sentencepiece-tests", "botchan_en_unigram_1000.model"),
    "gpt-2 gguf": ("gguf", "ggml-vocab-gpt-2.gguf"),
    "llama-spm gguf": ("gguf", "ggml-vocab-llama-spm.gguf"),
    "bert-bge gguf": ("gguf", "ggml-vocab-bert-bge.gguf"),
    "r50k .tiktoken": ("tiktoken", "r50k_base.tiktoken"),
}


def _load(parts, **kwargs):
    path = shared_path("data", *parts)
    if path.suffix == ".tiktoken":
        entry = json.loads(shared_path("data", "tiktoken", "encodings.json").read_text())["r50k_base"]
        kwargs.setdefault("pat_str", entry["pat_str"])
        kwargs.setdefault("special_tokens", entry["special_tokens"])
    return tokjit.load(path, **kwargs)


# ==================================================================================================
# No pickle, eval or exec while loading
# ==================================================================================================

def _guard(monkeypatch, calls: list):
    """Make pickle/eval/exec raise when called from anywhere but numba's own (trusted) cache of
    compiled kernels (which reads its index with pickle), Python's import machinery running
    tokjit's own modules, and the stdlib code generators (dataclasses, namedtuple)."""
    import collections
    import dataclasses
    trusted = (os.path.dirname(__import__("numba").__file__), "<frozen importlib", dataclasses.__file__,
               collections.__file__)

    def wrap(name, real):
        def guarded(*args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if not caller.startswith(trusted) or (name.startswith("pickle") and caller.startswith(trusted[1:])):
                calls.append(f"{name} from {caller}")
                raise AssertionError(f"{name} called while loading a tokenizer file (from {caller})")
            return real(*args, **kwargs)
        return guarded

    monkeypatch.setattr(pickle, "loads", wrap("pickle.loads", pickle.loads))
    monkeypatch.setattr(pickle, "load", wrap("pickle.load", pickle.load))
    monkeypatch.setattr(pickle, "Unpickler", wrap("pickle.Unpickler", pickle.Unpickler))
    monkeypatch.setattr(builtins, "eval", wrap("eval", builtins.eval))
    monkeypatch.setattr(builtins, "exec", wrap("exec", builtins.exec))


@pytest.mark.parametrize("name", list(FILES))
def test_loading_never_unpickles_or_executes(shared, name, monkeypatch, tmp_path):
    _load(FILES[name])  # kernels compiled/loaded before the guard goes up
    calls: list = []
    _guard(monkeypatch, calls)
    for cache_dir in ("off", str(tmp_path), str(tmp_path)):  # no cache, cache write, cache read
        monkeypatch.setenv("TOKJIT_CACHE_DIR", cache_dir)
        tok = _load(FILES[name])
        tok.decode(tok.encode("Hello <s> world", parse_special=True))
    assert not calls


def test_cache_entry_with_pickled_payload_is_never_unpickled(shared, monkeypatch, tmp_path):
    """A cache file whose hash is right but whose arrays are pickled objects (what an attacker with
    write access to the cache dir could plant) is refused and rebuilt, never unpickled."""
    monkeypatch.setenv("TOKJIT_CACHE_DIR", str(tmp_path))
    path = shared_path("data", "hf", "mistral-7b", "tokenizer.json")
    want = tokjit.load(path).encode("Hello world")
    [entry] = list(tmp_path.glob("*.tokjit"))
    ran = []

    class Zq9EvilMarker:
        def __reduce__(self):
            return (ran.append, ("executed",))

    import io
    buf = io.BytesIO()
    np.savez(buf, header=np.array([Zq9EvilMarker()], dtype=object), tok_blob=np.array([Zq9EvilMarker()], dtype=object))
    payload = buf.getvalue()
    import hashlib
    entry.write_bytes(cache.MAGIC + hashlib.sha256(payload).digest() + payload)
    assert tokjit.load(path).encode("Hello world") == want
    assert not ran
    data = entry.read_bytes()
    assert hashlib.sha256(data[40:]).digest() == data[8:40] and b"Zq9EvilMarker" not in data  # rebuilt


# ==================================================================================================
# Chat templates render in a sandbox
# ==================================================================================================

@pytest.fixture(scope="module")
def llama3(shared):
    return tokjit.load(shared_path("data", "hf", "llama3", "tokenizer.json"))


ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ''.__class__.__mro__ }}",
    "{{ messages.__class__.__init__.__globals__ }}",
    "{{ raise_exception.__globals__['os'].system('echo pwned') }}",
    "{{ namespace.__init__.__globals__ }}",
    "{% set ns = namespace(__class__=1) %}{{ ns }}",
    "{{ (messages|first).__class__.__base__.__subclasses__() }}",
    "{{ dict.__call__.__globals__ }}",
    "{{ messages.append({'role': 'x'}) }}",  # immutable sandbox: no mutating the caller's data
    "{{ strftime_now.__globals__.__builtins__.open('/etc/passwd').read() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
]


@pytest.mark.parametrize("template", ESCAPES)
def test_chat_template_cannot_reach_python_internals(llama3, template):
    jinja2 = pytest.importorskip("jinja2")
    messages = [{"role": "user", "content": "hi"}]
    try:
        out = llama3.apply_chat_template(messages, chat_template=template)
    except (jinja2.exceptions.SecurityError, jinja2.exceptions.UndefinedError, jinja2.exceptions.TemplateError):
        return
    # rendering an unsafe attribute may yield an empty Undefined, but never the object itself
    for leak in ("<class", "<built-in", "<function", "<module", "root:", "uid=", "'__builtins__'"):
        assert leak not in out, (template, out[:200])
    assert messages == [{"role": "user", "content": "hi"}]


def test_mro_access_is_a_security_error(llama3):
    jinja2 = pytest.importorskip("jinja2")
    with pytest.raises(jinja2.exceptions.SecurityError):
        llama3.apply_chat_template([{"role": "user", "content": "hi"}],
                                   chat_template="{{ ''.__class__.__mro__ }}")


def test_template_from_a_gguf_file_is_sandboxed_too(shared, tmp_path):
    """A chat template read from a (hostile) GGUF renders in the same sandbox."""
    jinja2 = pytest.importorskip("jinja2")
    from test_corrupted_files import gguf_write, small_gguf, T_STR
    kvs = small_gguf("ggml-vocab-gpt-2.gguf", 600)
    kvs.append(("tokenizer.chat_template", T_STR, b"{{ ''.__class__.__mro__[1].__subclasses__() }}"))
    path = tmp_path / "evil.gguf"
    path.write_bytes(gguf_write(kvs))
    tok = tokjit.load(path)
    with pytest.raises(jinja2.exceptions.SecurityError):
        tok.apply_chat_template([{"role": "user", "content": "hi"}])


# ==================================================================================================
# parse_special: special-token text from users stays text unless asked
# ==================================================================================================

def _control_tokens(tok, limit=64):
    """(content, id) of the tokens that must never come from user text by default."""
    # the unknown token is excluded: unknown characters in plain text legitimately produce its id
    unk = tok.spec.unk_id
    out = {t.content: t.id for t in tok.spec.added_tokens if t.special and t.content and t.id != unk}
    types = np.asarray(tok.spec.token_types)
    for tid in np.flatnonzero(types == tokjit.TokenType.CONTROL).tolist():
        content = tok.id_to_token(tid)
        if content and tid != unk:
            out.setdefault(content, tid)
    items = sorted(out.items(), key=lambda kv: kv[1])
    return items[:limit // 2] + items[-limit // 2:] if len(items) > limit else items


@pytest.mark.parametrize("name", list(FILES) + ["o200k bundled"])
def test_special_text_is_plain_text_by_default(shared, name):
    tok = tokjit.get_encoding("o200k_base") if name == "o200k bundled" else _load(FILES[name])
    controls = _control_tokens(tok)
    if not controls:
        pytest.skip(f"{name} has no special tokens besides <unk>")
    injected = [f"user says {content} and {content}{content}end" for content, _ in controls]
    plain_text_ids = set(tok.encode("user says  and end"))
    for text, (content, tid) in zip(injected, controls):
        ids = tok.encode(text)
        assert ids == tok.encode(text, parse_special=False)
        mask = tok.spec.model_mask
        if mask is not None and tid < len(mask) and mask[tid]:
            # the model's own vocabulary has this piece (t5/pegasus Unigram keep "<pad>" as a piece):
            # the reference produces it from plain text too; test_default_matches_hf_... checks that
            continue
        assert tid not in ids or tid in plain_text_ids, f"{content!r} became a control token without parse_special"
        assert tid not in tok.encode_batch([text], num_threads=1)[0]
        flat, _ = tok.encode_batch_numpy([text], num_threads=1)
        assert tid not in flat.tolist()
    asked = sum(tid in tok.encode(text, parse_special=True) for text, (_, tid) in zip(injected, controls))
    # with parse_special=True the text does become the control token (BERT-style lowercasing
    # normalizers aside, every family matches every special token spelled exactly)
    assert asked >= len(controls) * 0.9, f"only {asked} of {len(controls)} matched with parse_special=True"


def test_default_matches_hf_encode_special_tokens(shared):
    """HF's own "special text is text" mode (``encode_special_tokens=True``) gives the same ids."""
    tokenizers = pytest.importorskip("tokenizers")
    for folder in ("llama3", "gemma3", "mistral-7b", "t5", "pegasus", "bert-minilm"):
        path = shared_path("data", "hf", folder, "tokenizer.json")
        ref = tokenizers.Tokenizer.from_file(str(path))
        ref.no_truncation()
        ref.no_padding()
        ref.encode_special_tokens = True
        tok = tokjit.load(path)
        texts = [f"a {c} b {c}{c}" for c, _ in _control_tokens(tok, limit=24)]
        for text in texts:
            assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids, (folder, text)


def test_default_matches_tiktoken_encode_ordinary(shared):
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken.load  # built from the shared rank file: no network
    entry = json.loads(shared_path("data", "tiktoken", "encodings.json").read_text())["cl100k_base"]
    ranks = tiktoken.load.load_tiktoken_bpe(str(shared_path("data", "tiktoken", "cl100k_base.tiktoken")))
    ref = tiktoken.Encoding("cl100k", pat_str=entry["pat_str"], mergeable_ranks=ranks,
                            special_tokens=entry["special_tokens"])
    tok = tokjit.get_encoding("cl100k_base")
    for special in entry["special_tokens"]:
        text = f"x{special} {special}y"
        assert tok.encode(text) == ref.encode_ordinary(text)
        assert tok.encode(text, parse_special=True) == ref.encode(text, allowed_special="all")


def test_sentencepiece_never_matches_control_text_by_default(shared):
    spm = pytest.importorskip("sentencepiece")
    path = shared_path("data", "spm", "llama2", "tokenizer.model")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    tok = tokjit.load(path)
    for text in ("<s>hello</s>", " <unk> <s> </s> ", "<s><s></s>"):
        assert tok.encode(text) == sp.encode(text)


# ==================================================================================================
# On-disk cache: atomic, hash-verified, optional
# ==================================================================================================

PROBE = ["Hello world", "naïve café 日本語 😀", "  spaces\n\ttabs <s>"]


def _cached_entries(directory: Path):
    return sorted(p for p in directory.glob("*.tokjit"))


@pytest.mark.parametrize("parts", [("hf", "mistral-7b", "tokenizer.json"), ("spm", "llama2", "tokenizer.model"),
                                   ("gguf", "ggml-vocab-gpt-2.gguf")])
def test_tampered_cache_is_rebuilt(shared, monkeypatch, tmp_path, parts):
    monkeypatch.setenv("TOKJIT_CACHE_DIR", str(tmp_path))
    want = [_load(parts).encode(t) for t in PROBE]
    [entry] = _cached_entries(tmp_path)
    pristine = entry.read_bytes()
    tampers = {
        "flip payload byte": lambda d: d[:len(d) // 2] + bytes([d[len(d) // 2] ^ 1]) + d[len(d) // 2 + 1:],
        "truncate": lambda d: d[:len(d) // 3],
        "wrong magic": lambda d: b"TOKJITC0" + d[8:],
        "empty": lambda d: b"",
        "hash of other payload": lambda d: d[:8] + bytes(32) + d[40:],
    }
    for label, tamper in tampers.items():
        entry.write_bytes(tamper(pristine))
        assert [_load(parts).encode(t) for t in PROBE] == want, label
        assert entry.read_bytes() == pristine, f"{label}: entry not rebuilt"


def test_cache_write_is_atomic(shared, monkeypatch, tmp_path):
    """A write interrupted before the rename leaves neither a partial entry nor a temp file."""
    monkeypatch.setenv("TOKJIT_CACHE_DIR", str(tmp_path))
    path = shared_path("data", "hf", "mistral-7b", "tokenizer.json")

    def crash(*args, **kwargs):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(os, "replace", crash)
    tok = tokjit.load(path)  # still loads: caching is best effort
    assert not list(tmp_path.iterdir())
    monkeypatch.undo()
    monkeypatch.setenv("TOKJIT_CACHE_DIR", str(tmp_path))
    assert tokjit.load(path).encode(PROBE[1]) == tok.encode(PROBE[1])
    entries = _cached_entries(tmp_path)
    assert len(entries) == 1 and not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    data = entries[0].read_bytes()
    import hashlib
    assert data[:8] == cache.MAGIC and hashlib.sha256(data[40:]).digest() == data[8:40]


@pytest.mark.parametrize("how", ["read-only dir", "path through a file", "missing parent on read-only dir"])
def test_unwritable_cache_dir_still_loads(shared, monkeypatch, tmp_path, how):
    ro = tmp_path / "ro"
    ro.mkdir()
    if how == "read-only dir":
        target = ro
    elif how == "path through a file":
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "cache"
    else:
        target = ro / "sub" / "dir"
    os.chmod(ro, 0o555)
    try:
        if how == "read-only dir" and os.geteuid() == 0:
            # root ignores permission bits: make the directory unwritable the way a read-only mount is
            real_mkstemp = cache.tempfile.mkstemp

            def refuse(*args, dir=None, **kwargs):
                if dir is not None and Path(dir) == ro:
                    raise PermissionError(30, "Read-only file system", str(dir))
                return real_mkstemp(*args, dir=dir, **kwargs)
            monkeypatch.setattr(cache.tempfile, "mkstemp", refuse)
        monkeypatch.setenv("TOKJIT_CACHE_DIR", str(target))
        tok = tokjit.load(shared_path("data", "hf", "mistral-7b", "tokenizer.json"))
        ref = pytest.importorskip("tokenizers").Tokenizer.from_file(
            str(shared_path("data", "hf", "mistral-7b", "tokenizer.json")))
        for text in PROBE:
            assert tok.encode(text, parse_special=True) == ref.encode(text, add_special_tokens=False).ids
        if how != "path through a file":
            assert not _cached_entries(ro)
    finally:
        os.chmod(ro, 0o755)


def test_read_only_package_and_home(shared, tmp_path):
    """tokjit imported from a read-only copy of the package, by a user who can write nowhere except
    a temp dir: loads and encodes correctly (numba's kernel cache and tokjit's spec cache are both
    best effort)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the check as an unprivileged user")
    import pwd
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user")
    pkg_root = tmp_path / "site"
    shutil.copytree(REPO_ROOT / "tokjit", pkg_root / "tokjit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    for root, dirs, files in os.walk(tmp_path):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    data = shared_path("data", "hf", "mistral-7b", "tokenizer.json")
    script = (
        "import sys, tokjit; "
        "assert tokjit.__file__.startswith(sys.argv[1]), tokjit.__file__; "
        f"tok = tokjit.load({str(data)!r}); "
        "print(tok.encode('Hello world <s>', parse_special=True))"
    )
    scratch = Path("/tmp") / f"tokjit-ro-{os.getpid()}"
    scratch.mkdir(exist_ok=True)
    os.chmod(scratch, 0o777)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "nohome"), "PYTHONPATH": str(pkg_root),
           "TMPDIR": str(scratch), "NUMBA_CACHE_DIR": "", "PYTHONDONTWRITEBYTECODE": "1"}
    env = {k: v for k, v in env.items() if v}

    def demote():
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)

    try:
        proc = subprocess.run([sys.executable, "-c", script, str(pkg_root)], capture_output=True, text=True,
                              env=env, preexec_fn=demote, timeout=900, cwd="/")
    except PermissionError:
        shutil.rmtree(scratch, ignore_errors=True)
        pytest.skip(f"the interpreter {sys.executable} is not executable by 'nobody' here")
    shutil.rmtree(scratch, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = pytest.importorskip("tokenizers").Tokenizer.from_file(str(data))
    assert proc.stdout.strip() == str(ref.encode("Hello world <s>", add_special_tokens=False).ids)
