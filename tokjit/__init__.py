"""tokjit: exact LLM tokenizers with numba kernels over flat numpy arrays.

Public API::

    tok = tokjit.load("tokenizer.json")          # or .model / .tiktoken / .gguf
    tok = tokjit.get_encoding("o200k_base")        # bundled, offline
    ids = tok.encode("hello world")
    text = tok.decode(ids)
"""

from tokjit._cache_guard import drop_stale_kernels as _drop_stale_kernels

_drop_stale_kernels()  # before any kernel is loaded from numba's cache

from tokjit.errors import (CacheError, InputError, ModelFileError, TextTypeError, TokenIdTypeError,
                     TokenizerFileNotFoundError, TokjitError, UnknownEncodingError, UnsupportedComponentError)
from tokjit.api import from_pretrained, get_encoding, list_encoding_names, load
from tokjit.compat.models import encoding_for_model, encoding_name_for_model
from tokjit.kernels import compile_notice as _compile_notice
from tokjit.load import detect_format
from tokjit.spec import AddedToken, TokenizerSpec, TokenType
from tokjit.tokenizer import Tokenizer
from tokjit.version import __version__

_compile_notice.install()

__all__ = [
    "__version__", "load", "from_pretrained", "get_encoding", "list_encoding_names", "encoding_for_model",
    "encoding_name_for_model", "detect_format", "Tokenizer", "TokenizerSpec",
    "AddedToken", "TokenType", "TokjitError", "ModelFileError", "UnsupportedComponentError",
    "UnknownEncodingError", "InputError", "TextTypeError", "TokenIdTypeError", "CacheError",
    "TokenizerFileNotFoundError",
]


def __getattr__(name):
    # optional subpackages load on first use (``tokjit.constrain.Regex``) to keep ``import tokjit`` light
    if name in ("constrain", "tiktoken", "sentencepiece"):
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
