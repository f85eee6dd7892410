"""Fused paths: a whole tokenizer pipeline in one numba kernel call per text or batch chunk.

:func:`fused_path_for` picks the family path a tokenizer's components allow (judged by component
type, never by model name), or ``None``: the staged pipeline in :mod:`tokjit.tokenizer` then runs
stage by stage. Every path gives the staged pipeline's ids.
"""

from __future__ import annotations

from tokjit.fused.bpe import bpe_fused_path_for
from tokjit.fused.spm import spm_fused_path_for
from tokjit.fused.unigram import hf_unigram_fused_path_for, unigram_fused_path_for
from tokjit.fused.wordpiece import wordpiece_fused_path_for

# tried in order; the first that accepts the tokenizer wins
_FAMILIES = (spm_fused_path_for, unigram_fused_path_for, hf_unigram_fused_path_for, wordpiece_fused_path_for,
             bpe_fused_path_for)


def fused_path_for(tok):
    """The fused path for ``tok``, or ``None`` when its pipeline has no fused kernel."""
    if tok.normalizer is None and not (tok._match_all_norm.empty and tok._match_plain_norm.empty):
        # added tokens in two passes without a normalizer (Tokenizer: their matches may overlap): the
        # kernels take the second pass only after a normalizer
        return None
    for family in _FAMILIES:
        path = family(tok)
        if path is not None:
            return path
    return None
