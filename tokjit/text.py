"""Text in: ``str`` -> the UTF-8 bytes the kernels read."""

from __future__ import annotations

import functools

import numpy as np

from tokjit.errors import TextTypeError


def text_to_utf8(text: str) -> np.ndarray:
    """UTF-8 bytes of ``text``; lone surrogates (not encodable) become U+FFFD, as tiktoken does."""
    if not isinstance(text, str):
        raise TextTypeError(f"expected str, got {type(text).__name__}")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    # writable, so every kernel is compiled for one array type
    return np.frombuffer(bytearray(data), np.uint8)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(printable, map(chr, chars)))


@functools.lru_cache(maxsize=None)
def byte_level_values() -> dict[str, int]:
    """The inverse of :func:`bytes_to_unicode`: printable character -> the byte it stands for."""
    return {ch: b for b, ch in bytes_to_unicode().items()}
