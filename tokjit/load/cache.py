"""On-disk cache of loaded tokenizer specs, keyed by the source file's SHA-256.

Parsing a 10-30 MB tokenizer.json or GGUF into arrays takes a second or more; reading the same
arrays back from an ``.npz`` takes milliseconds. The cache file is::

    b"TOKJITC1" | sha256(payload) (32 bytes) | payload (an uncompressed .npz, no pickles)

It is written atomically (temporary file + ``os.replace``) and verified by hash on every read: a
stale, truncated or tampered entry is ignored and rebuilt, never trusted. Location:
``$TOKJIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokjit``, else ``~/.cache/tokjit``; ``TOKJIT_CACHE_DIR=off``
disables it. An unwritable location (read-only home, sandbox) only means no caching.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tempfile

import numpy as np

from tokjit.compile import pack_bytes
from tokjit.spec import AddedToken, PackedBytes, TokenizerSpec

MAGIC = b"TOKJITC1"
FORMAT_VERSION = 1


def cache_dir() -> str | None:
    env = os.environ.get("TOKJIT_CACHE_DIR")
    if env is not None:
        return None if env.lower() in ("", "0", "off", "none") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tokjit")


_CODE_FINGERPRINT: str | None = None


def code_fingerprint() -> str:
    """Hash of every source whose output the cache stores (the loaders, the spec, the vocabulary
    compiler and the hash layout it uses): a spec cached by other code is never reused."""
    global _CODE_FINGERPRINT
    if _CODE_FINGERPRINT is None:
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        load_dir = os.path.join(package, "load")
        files = [os.path.join(package, name) for name in _FINGERPRINTED]
        files += sorted(os.path.join(load_dir, f) for f in os.listdir(load_dir) if f.endswith(".py"))
        digest = hashlib.sha256()
        for path in files:
            with open(path, "rb") as fh:
                digest.update(fh.read())
        _CODE_FINGERPRINT = digest.hexdigest()
    return _CODE_FINGERPRINT


# besides load/*.py (this file among them); paths relative to the package
_FINGERPRINTED = ("spec.py", "compile.py", os.path.join("kernels", "lookup.py"))


def cache_key(source_sha256: str, options: dict) -> str:
    from tokjit.version import __version__
    blob = json.dumps({"src": source_sha256, "opt": options, "v": __version__, "f": FORMAT_VERSION,
                       "code": code_fingerprint()}, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def _jsonable(obj):
    if isinstance(obj, bytes):
        return {"__bytes__": base64.b64encode(obj).decode("ascii")}
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _unjson(obj):
    if isinstance(obj, dict):
        if set(obj) == {"__bytes__"}:
            return base64.b64decode(obj["__bytes__"])
        return {k: _unjson(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unjson(v) for v in obj]
    return obj


def spec_to_bytes(spec: TokenizerSpec) -> bytes:
    arrays: dict[str, np.ndarray] = {}
    arrays["tok_blob"], arrays["tok_offsets"] = pack_bytes(spec.tokens)
    arrays["token_types"] = np.asarray(spec.token_types, np.int8)
    for name in ("scores", "merges", "model_mask"):
        value = getattr(spec, name)
        if value is not None:
            arrays[name] = np.asarray(value)
    source = dict(spec.source)
    strings = source.pop("token_strings", None)
    if strings is not None:
        arrays["str_blob"], arrays["str_offsets"] = pack_bytes(
            [s.encode("utf-8", "surrogatepass") for s in strings])
    header = {
        "model": spec.model, "normalizer": spec.normalizer, "pre_tokenizer": spec.pre_tokenizer,
        "post_processor": spec.post_processor, "decoder": spec.decoder,
        "added_tokens": [t.__dict__ for t in spec.added_tokens],
        "bos_id": spec.bos_id, "eos_id": spec.eos_id, "unk_id": spec.unk_id, "pad_id": spec.pad_id,
        "chat_template": spec.chat_template, "source": source,
    }
    arrays["header"] = np.frombuffer(json.dumps(_jsonable(header)).encode("utf-8"), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def spec_from_bytes(payload: bytes) -> TokenizerSpec:
    with np.load(io.BytesIO(payload), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = _unjson(json.loads(arrays["header"].tobytes().decode("utf-8")))
    source = header["source"]
    if "str_blob" in arrays:
        source["token_strings"] = PackedBytes(arrays["str_blob"], arrays["str_offsets"], strings=True)
    return TokenizerSpec(
        model=header["model"], tokens=PackedBytes(arrays["tok_blob"], arrays["tok_offsets"]),
        token_types=arrays["token_types"], scores=arrays.get("scores"), merges=arrays.get("merges"),
        model_mask=arrays.get("model_mask"), normalizer=header["normalizer"],
        pre_tokenizer=header["pre_tokenizer"], post_processor=header["post_processor"],
        decoder=header["decoder"], added_tokens=[AddedToken(**t) for t in header["added_tokens"]],
        bos_id=header["bos_id"], eos_id=header["eos_id"], unk_id=header["unk_id"], pad_id=header["pad_id"],
        chat_template=header["chat_template"], source=source,
    )


def read(key: str) -> TokenizerSpec | None:
    """The cached spec for ``key``, or ``None`` if absent or not intact."""
    directory = cache_dir()
    if directory is None:
        return None
    path = os.path.join(directory, key + ".tokjit")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if data[:8] != MAGIC or hashlib.sha256(data[40:]).digest() != data[8:40]:
        return None
    try:
        return spec_from_bytes(data[40:])
    except Exception:  # an intact file we cannot parse (older layout): rebuild
        return None


def write(key: str, spec: TokenizerSpec) -> bool:
    """Store ``spec`` atomically; returns False (silently) when the location is not writable."""
    directory = cache_dir()
    if directory is None:
        return False
    try:
        payload = spec_to_bytes(spec)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".tokjit")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, os.path.join(directory, key + ".tokjit"))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return True
    except (OSError, TypeError, ValueError):
        return False
