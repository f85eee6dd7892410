"""Pre-tokenization: an exact regex engine (compiler + numba VM) for tokenizer split patterns."""
from tokjit.pretokenize.regex_compiler import UnsupportedPatternError, compile_pattern
from tokjit.pretokenize.regex_kernel import CompiledRegex, RegexBudgetError, find_matches

__all__ = ["CompiledRegex", "RegexBudgetError", "UnsupportedPatternError", "compile_pattern",
           "find_matches"]
