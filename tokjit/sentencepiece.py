"""``from tokjit.sentencepiece import SentencePieceProcessor``: sentencepiece's processor, computed by
tokjit (see :mod:`tokjit.compat.sentencepiece`)."""

from tokjit.compat.sentencepiece import PieceIdOutOfRangeError, SentencePieceProcessor

__all__ = ["SentencePieceProcessor", "PieceIdOutOfRangeError"]
