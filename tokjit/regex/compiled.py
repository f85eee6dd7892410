"""A compiled split pattern with a Python entry point (:class:`CompiledRegex`) over the VM kernel.

The staged pre-tokenizers and tests call :meth:`CompiledRegex.find_spans`; the fused kernels read the
same :class:`~tokjit.regex.compiler.Program` arrays through :data:`~tokjit.kernels.structs.REGEX`.
"""
from __future__ import annotations

import codecs
import functools

import numpy as np

from tokjit.errors import InputError
from tokjit.kernels.regex_vm import ERR_BUDGET, ERR_OUT_FULL, ERR_STACK_FULL, find_matches
from tokjit.regex.compiler import compile_pattern
from tokjit.regex.unicode_tables import general_category_table


@functools.lru_cache(maxsize=None)
def _kernel_gc(unicode_table: str) -> np.ndarray:
    """The general-category table as the fused kernels take it (writable: one array type, so
    find_matches compiles once); one copy per table and process, shared by every CompiledRegex."""
    return np.require(general_category_table(unicode_table), np.uint8, ("C", "W"))


class RegexBudgetError(RuntimeError):
    """The matcher exceeded its step budget even with memoization (pathological pattern)."""


class CompiledRegex:
    """A pre-tokenization regex compiled for the numba VM.

    ``CompiledRegex(pattern, syntax="python", unicode_table="tokenizers")``; see
    :mod:`tokjit.regex.compiler` for the supported syntax, the ``syntax`` choices
    (anchor semantics of regex / Oniguruma / fancy-regex) and ``unicode_table`` (``"tokenizers"``
    = Unicode 16 as HF tokenizers and tiktoken see it, ``"regex"`` = the regex module's newer
    Unicode, ``"ucd"`` = this Python's unicodedata).
    Raises :class:`UnsupportedPatternError` for constructs the VM does not implement.
    """

    def __init__(self, pattern: str, *, syntax: str = "python", unicode_table: str = "tokenizers",
                 step_budget_per_byte: int = 256):
        self.pattern = pattern
        self.syntax = syntax
        self.unicode_table = unicode_table
        self.program = compile_pattern(pattern, syntax=syntax, unicode_table=unicode_table)
        self._step_budget_per_byte = step_budget_per_byte
        self._gc = _kernel_gc(unicode_table)

    def __repr__(self):
        return f"CompiledRegex({self.pattern!r}, syntax={self.syntax!r}, unicode_table={self.unicode_table!r})"

    def find_spans(self, buf, start: int = 0, end: int | None = None):
        """Byte spans ``(starts, ends)`` (int64 arrays) of all successive matches in UTF-8 ``buf``.

        ``buf`` is ``bytes``/``bytearray``/uint8 array holding valid UTF-8 (``str`` is encoded);
        ``[start, end)`` must lie on character boundaries and is treated as the whole subject.
        """
        if isinstance(buf, str):
            try:
                buf = buf.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InputError(f"text holds a lone surrogate at {e.start}: not valid UTF-8") from e
        # one array type for the kernel whatever the caller holds (a read-only buffer is copied), so
        # find_matches compiles once
        arr = np.require(np.frombuffer(buf, np.uint8) if not isinstance(buf, np.ndarray) else buf,
                         np.uint8, ("C", "W"))
        if end is None:
            end = arr.shape[0]
        if not 0 <= start <= end <= arr.shape[0]:
            raise InputError(f"span [{start}, {end}) outside a buffer of {arr.shape[0]} bytes")
        try:
            # the VM decodes UTF-8 without checks: a sequence cut at ``end`` would read past it
            codecs.utf_8_decode(memoryview(arr)[start:end], "strict", True)
        except UnicodeDecodeError as e:
            raise InputError(f"invalid UTF-8 at byte {start + e.start} of the span [{start}, {end}): "
                             f"{e.reason}") from e
        n = end - start
        prog = self.program
        out_cap = n // 2 + 16
        starts = np.empty(out_cap, np.int64)
        ends = np.empty(out_cap, np.int64)
        use_memo = 0
        stack = np.empty(4096, np.int64)
        while True:
            if use_memo:
                budget = (64 + 16 * prog.prog.shape[0]) * (n + 1) + 10_000_000
            else:
                budget = self._step_budget_per_byte * (n + 1) + 100_000
            params = np.array([use_memo, budget, prog.vm_word], np.int64)
            r = find_matches(arr, start, end, prog.prog, prog.rep_info, prog.cls_ascii,
                             prog.cls_mask, prog.cls_neg, prog.cls_roff, prog.cls_ranges, self._gc,
                             params, starts, ends, stack)
            if r >= 0:
                return starts[:r].copy(), ends[:r].copy()
            if r == ERR_OUT_FULL:
                out_cap = 2 * n + 16
                starts = np.empty(out_cap, np.int64)
                ends = np.empty(out_cap, np.int64)
            elif r == ERR_STACK_FULL:
                need = (prog.n_memo * (n + 1) + 63) // 64 + 64 if use_memo else 0
                stack = np.empty(max(2 * stack.shape[0], need + 4096), np.int64)
            elif r == ERR_BUDGET:
                if use_memo:
                    raise RegexBudgetError(
                        f"regex {self.pattern!r} exceeded its step budget on {n} bytes "
                        "even with memoization")
                use_memo = 1
            else:  # pragma: no cover
                raise RuntimeError(f"find_matches returned {r}")

    def find_all(self, text: str) -> list[str]:
        """Convenience: the matched substrings of ``text`` (like ``regex.findall`` without groups)."""
        b = text.encode("utf-8")
        s, e = self.find_spans(b)
        return [b[i:j].decode("utf-8") for i, j in zip(s.tolist(), e.tolist())]
