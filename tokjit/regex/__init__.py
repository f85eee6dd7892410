"""The split-pattern regex engine: compiler (pattern -> program) and its Python entry point.

The VM that runs a program is the kernel :func:`tokjit.kernels.regex_vm.find_matches`.
"""
from tokjit.regex.compiled import CompiledRegex, RegexBudgetError
from tokjit.regex.compiler import UnsupportedPatternError, compile_pattern

__all__ = ["CompiledRegex", "RegexBudgetError", "UnsupportedPatternError", "compile_pattern"]
