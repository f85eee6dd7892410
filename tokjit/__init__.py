"""tokjit: exact LLM tokenizers with numba kernels over flat numpy arrays.

Public API::

    tok = tokjit.load("tokenizer.json")          # or .model / .tiktoken / .gguf
    tok = tokjit.get_encoding("o200k_base")        # bundled, offline
    ids = tok.encode("hello world")
    text = tok.decode(ids)
"""

from .errors import (CacheError, InputError, ModelFileError, TokenizerFileNotFoundError, TokjitError,
                     UnknownEncodingError, UnsupportedComponentError)
from .load import detect_format, load
from .load.pretrained import from_pretrained
from .registry import get_encoding, list_encoding_names
from .spec import AddedToken, TokenizerSpec, TokenType
from .tokenizer import Tokenizer

__version__ = "0.1.0"

__all__ = [
    "load", "from_pretrained", "get_encoding", "list_encoding_names", "detect_format", "Tokenizer", "TokenizerSpec",
    "AddedToken", "TokenType", "TokjitError", "ModelFileError", "UnsupportedComponentError",
    "UnknownEncodingError", "InputError", "CacheError", "TokenizerFileNotFoundError",
]


def __getattr__(name):
    # optional subpackages load on first use (``tokjit.constrain.Regex``) to keep ``import tokjit`` light
    if name == "constrain":
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
