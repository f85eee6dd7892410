"""Build ``tokjit/data/llamacpp_unicode.npz``: the Unicode 15.1 facts llama.cpp's tokenizers use.

llama.cpp classifies code points with tables generated from UCD 15.1 (see notes/llamacpp.md): a
category flag per code point (number / letter / separator / mark / punctuation / symbol / control,
or undefined), the White_Space set, a simple lowercase map (first code point of ``str.lower``) and
the first code point of each canonical decomposition (used by its WordPiece accent stripping).
Python's own ``unicodedata`` is older (14.0) and the ``regex`` module newer, so this script reads
the ``unicodedata2==15.1.0`` backport: ``pip install --target /tmp/ud2lib unicodedata2==15.1.0``,
then ``PYTHONPATH=/tmp/ud2lib python scripts/gen_llamacpp_unicode.py``.
"""
from __future__ import annotations

import os

import numpy as np
import unicodedata2 as ucd

assert ucd.unidata_version == "15.1.0", ucd.unidata_version

# category codes shared with tokjit/llamacpp_pretokenizer.py
UNDEF, NUMBER, LETTER, SEPARATOR, MARK, PUNCT, SYMBOL, CONTROL = range(8)
WHITESPACE_BIT = 0x80
_MAJOR = {"N": NUMBER, "L": LETTER, "Z": SEPARATOR, "M": MARK, "P": PUNCT, "S": SYMBOL, "C": CONTROL}
WHITE_SPACE = [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
               0x202F, 0x205F, 0x3000]

N = 0x110000
flags = np.zeros(N, np.uint8)
for cp in range(N):
    cat = ucd.category(chr(cp))
    flags[cp] = UNDEF if cat == "Cn" else _MAJOR[cat[0]]
flags[WHITE_SPACE] |= WHITESPACE_BIT

lower_from, lower_to, nfd_from, nfd_to = [], [], [], []
for cp in range(N):
    if 0xD800 <= cp < 0xE000:
        continue
    ch = chr(cp)
    low = ord(ch.lower()[0])
    if low != cp:
        lower_from.append(cp)
        lower_to.append(low)
    d = ucd.normalize("NFD", ch)
    if d != ch:
        nfd_from.append(cp)
        nfd_to.append(ord(d[0]))

change = np.flatnonzero(np.diff(flags.astype(np.int16)) != 0) + 1
starts = np.concatenate([[0], change]).astype(np.int32)
out = os.path.join(os.path.dirname(__file__), "..", "tokjit", "data", "llamacpp_unicode.npz")
np.savez_compressed(out, flag_starts=starts, flag_values=flags[starts],
                    lower_from=np.asarray(lower_from, np.int32), lower_to=np.asarray(lower_to, np.int32),
                    nfd_from=np.asarray(nfd_from, np.int32), nfd_to=np.asarray(nfd_to, np.int32))
print(out, len(starts), "runs", len(lower_from), "lowercase", len(nfd_from), "nfd")
