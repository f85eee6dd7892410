"""Exceptions raised by tokjit.

Every error tokjit raises on purpose derives from :class:`TokjitError` and also from the builtin
exception a caller would already catch for that situation (``ValueError`` for bad files and bad
input, ``KeyError`` for unknown names, ``NotImplementedError`` for valid but unsupported features).
"""

from __future__ import annotations


class TokjitError(Exception):
    """Base class of every error tokjit raises deliberately."""


class ModelFileError(TokjitError, ValueError):
    """A tokenizer file is malformed, truncated or inconsistent.

    ``path`` names the file and ``where`` the key, field or byte position at fault.
    """

    def __init__(self, message: str, *, path: object = None, where: object = None):
        self.path = None if path is None else str(path)
        self.where = where
        parts = [message]
        if where is not None:
            parts.append(f"at {where}")
        if path is not None:
            parts.append(f"in {path}")
        super().__init__(" ".join(parts))


class TokenizerFileNotFoundError(TokjitError, FileNotFoundError):
    """The tokenizer file (or directory) does not exist."""


class UnsupportedComponentError(TokjitError, NotImplementedError):
    """A tokenizer uses a component type or option tokjit does not implement.

    Raised instead of guessing, so a tokenizer is never silently tokenized differently from its
    reference implementation.
    """


class UnknownEncodingError(TokjitError, KeyError):
    """An encoding or token name that is not known."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class InputError(TokjitError, ValueError):
    """Input text or ids that cannot be processed (for example an id outside the vocabulary)."""


class TextTypeError(InputError, TypeError):
    """A text argument that is not ``str`` (or a batch given as one ``str``)."""


class TokenIdTypeError(InputError, TypeError):
    """A token id that is not an integer (a float, a string, a numpy bool...).

    Python ints, bools and numpy integers are ids, as in HF ``tokenizers`` and tiktoken, which
    raise ``TypeError`` for anything else; catching either ``InputError`` or ``TypeError`` works.
    """


class CacheError(TokjitError, OSError):
    """The on-disk compiled-vocab cache could not be read or written."""


class KernelError(TokjitError, RuntimeError):
    """A kernel raised where none is expected to: with ``NUMBA_BOUNDSCHECK=1``, an index out of bounds.
    A bug in tokjit; the text that triggered it reproduces it."""
