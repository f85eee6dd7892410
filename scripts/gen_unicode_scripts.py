#!/usr/bin/env python3
"""Build ``tokjit/data/unicode_scripts.npz``: the Script of every code point as HF's UnicodeScripts
pre-tokenizer sees it.

HF ``tokenizers`` does not read the Unicode Character Database at run time: its
``pre_tokenizers/unicode_scripts/scripts.rs`` holds a table generated from Unicode 9.0's
Scripts.txt (the script set ends with Adlam, Bhaiksuki, Marchen, Newa, Osage and Tangut), and a code
point the table does not list (assigned after 9.0, or unassigned) is ``Any``, the value HF also
gives the space. Newer data would split differently wherever a character was assigned since, so this
script reads the ranges out of that file (the facts only: first and last code point and the script
name of each line) and stores them run-length encoded:

  ``starts`` int32  first code point of each run (the first is 0)
  ``scripts`` uint8  the run's script, an index into ``names``
  ``names`` str      script names; index 0 is ``Any``

Usage: ``python scripts/gen_unicode_scripts.py path/to/tokenizers/src/pre_tokenizers/unicode_scripts/scripts.rs``
"""
from __future__ import annotations

import os
import re
import sys

import numpy as np

LINE = re.compile(r"^\s*0x([0-9A-Fa-f]+)(?:\.\.=0x([0-9A-Fa-f]+))? => Script::([A-Za-z]+),\s*$")
N = 0x110000


def main(path: str) -> None:
    names = ["Any"]
    table = np.zeros(N, np.uint8)
    n_lines = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            first = int(m.group(1), 16)
            last = int(m.group(2), 16) if m.group(2) else first
            if m.group(3) not in names:
                names.append(m.group(3))
            table[first:last + 1] = names.index(m.group(3))
            n_lines += 1
    assert n_lines > 1500 and len(names) < 256, (n_lines, len(names))
    change = np.flatnonzero(np.diff(table)) + 1
    starts = np.concatenate(([0], change)).astype(np.int32)
    out = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tokjit", "data",
                       "unicode_scripts.npz")
    np.savez_compressed(out, starts=starts, scripts=table[starts], names=np.asarray(names))
    print(f"{out}: {n_lines} ranges, {len(starts)} runs, {len(names) - 1} scripts")


if __name__ == "__main__":
    main(sys.argv[1])
