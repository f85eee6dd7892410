"""Generate ``tokjit/data/grapheme_break.npz``: the Unicode properties extended grapheme cluster
segmentation (UAX #29) needs, taken from the ``regex`` module.

HF's ``Precompiled`` normalizer works per grapheme cluster (Rust ``unicode-segmentation``), so tokjit
segments text the same way inside a numba kernel. Each code point gets one uint8:
bits 0-3 Grapheme_Cluster_Break (see ``GCB_VALUES``), bit 4 Extended_Pictographic, bits 5-6
Indic_Conjunct_Break (0 None, 1 Consonant, 2 Extend, 3 Linker). Stored run-length encoded.

Run: ``python scripts/gen_grapheme_table.py``.
"""

from __future__ import annotations

import os

import numpy as np
import regex

GCB_VALUES = ("Other", "CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator", "Prepend",
              "SpacingMark", "L", "V", "T", "LV", "LVT")
INCB_VALUES = ("None", "Consonant", "Extend", "Linker")
MAX_CP = 0x10FFFF


def _mark(table: np.ndarray, pattern: str, value: int, text: str, codepoints: np.ndarray) -> None:
    for m in regex.finditer(pattern + "+", text):
        table[codepoints[m.start():m.end()]] |= value


def build() -> np.ndarray:
    codepoints = np.array([c for c in range(MAX_CP + 1) if not 0xD800 <= c <= 0xDFFF], np.int64)
    text = "".join(map(chr, codepoints.tolist()))
    table = np.zeros(MAX_CP + 1, np.uint8)
    for i, name in enumerate(GCB_VALUES):
        if i:
            _mark(table, r"\p{Grapheme_Cluster_Break=%s}" % name, i, text, codepoints)
    # surrogates are GCB=Control; they never occur in UTF-8 input but keep the table complete
    table[0xD800:0xE000] = GCB_VALUES.index("Control")
    _mark(table, r"\p{Extended_Pictographic}", 16, text, codepoints)
    for i, name in enumerate(INCB_VALUES):
        if i:
            _mark(table, r"\p{Indic_Conjunct_Break=%s}" % name, i << 5, text, codepoints)
    return table


def main() -> None:
    table = build()
    change = np.flatnonzero(np.diff(table)) + 1
    starts = np.concatenate([[0], change]).astype(np.int32)
    values = table[starts]
    out = os.path.join(os.path.dirname(__file__), "..", "tokjit", "data", "grapheme_break.npz")
    np.savez_compressed(out, starts=starts, values=values,
                        regex_version=np.array(regex.__version__))
    print(f"wrote {out}: {len(starts)} runs (regex {regex.__version__})")


if __name__ == "__main__":
    main()
