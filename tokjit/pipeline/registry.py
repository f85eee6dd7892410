"""Every component type tokjit builds, by pipeline stage, in one table.

A loader turns a file into a :class:`~tokjit.spec.TokenizerSpec` whose stages are HF-style
``{"type": ...}`` configs; :func:`build_normalizer` & co. turn those into component objects. The tables
name each type's class as ``"module:attribute"`` and import it on first use, so this module depends on
nothing it lists (no import cycles, nothing registered as a side effect of an import) and a tokenizer only
imports the families it uses. An unknown type is an :class:`~tokjit.errors.UnsupportedComponentError`
naming it and the known ones, never a guess; ``tests/test_component_registry.py`` builds every entry and
checks that every type a loader can emit is here.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from tokjit.errors import UnsupportedComponentError

_PIPELINE = "tokjit.pipeline"
_MODELS = "tokjit.models"


class Registry:
    """One stage's table: type name -> ``"module:attribute"`` of the class built from its config."""

    def __init__(self, stage: str, entries: dict[str, str]):
        self.stage = stage
        self.entries = dict(entries)
        self._resolved: dict[str, Callable[..., Any]] = {}

    def __contains__(self, kind) -> bool:
        return kind in self.entries

    def names(self) -> list[str]:
        return sorted(self.entries)

    def lookup(self, kind) -> Callable[..., Any]:
        builder = self._resolved.get(kind)
        if builder is not None:
            return builder
        target = self.entries.get(kind) if isinstance(kind, str) else None
        if target is None:
            raise UnsupportedComponentError(
                f"{self.stage} type {kind!r} is not supported (known: {self.names()})")
        module, attribute = target.split(":")
        builder = self._resolved[kind] = getattr(importlib.import_module(module), attribute)
        return builder

    def build(self, config: dict | None):
        """The component for ``config`` (``None`` stays ``None``)."""
        if config is None:
            return None
        return self.lookup(config.get("type"))(config)


NORMALIZERS = Registry("normalizer", {
    **{form: f"{_PIPELINE}.normalizers:UnicodeForm" for form in ("NFC", "NFD", "NFKC", "NFKD")},
    "Lowercase": f"{_PIPELINE}.normalizers:Lowercase",
    "Replace": f"{_PIPELINE}.normalizers:Replace",
    "Prepend": f"{_PIPELINE}.normalizers:Prepend",
    "Strip": f"{_PIPELINE}.normalizers:Strip",
    "StripAccents": f"{_PIPELINE}.normalizers:StripAccents",
    "Sequence": f"{_PIPELINE}.normalizers:Sequence",
    "Precompiled": f"{_PIPELINE}.charsmap:Precompiled",
    "SentencePieceNormalizer": f"{_PIPELINE}.sentencepiece_normalizer:SentencePieceNormalizer",
    "BertNormalizer": f"{_MODELS}.wordpiece:BertNormalizer",
    "Nmt": f"{_PIPELINE}.normalizers:Nmt",
})

PRE_TOKENIZERS = Registry("pre-tokenizer", {
    "Split": f"{_PIPELINE}.pre_tokenizers:Split",
    "ByteLevel": f"{_PIPELINE}.pre_tokenizers:ByteLevel",
    "Sequence": f"{_PIPELINE}.pre_tokenizers:Sequence",
    "Metaspace": f"{_PIPELINE}.pre_tokenizers:Metaspace",
    "Digits": f"{_PIPELINE}.pre_tokenizers:Digits",
    "Punctuation": f"{_PIPELINE}.pre_tokenizers:Punctuation",
    "CharDelimiterSplit": f"{_PIPELINE}.pre_tokenizers:CharDelimiterSplit",
    "UnicodeScripts": f"{_PIPELINE}.pre_tokenizers:UnicodeScripts",
    "FixedLength": f"{_PIPELINE}.pre_tokenizers:FixedLength",
    "BertPreTokenizer": f"{_MODELS}.wordpiece:BertPreTokenizer",
    "WhitespaceSplit": f"{_MODELS}.wordpiece:WhitespaceSplit",
    "Whitespace": f"{_MODELS}.wordpiece:Whitespace",
    # llama.cpp's pre-tokenizers, emitted by the GGUF loader
    "LlamaCppRegexSplit": f"{_PIPELINE}.llamacpp:LlamaCppRegexSplit",
    "LlamaCppWpm": f"{_PIPELINE}.llamacpp:LlamaCppWpm",
    "LlamaCppWhitespaceSegments": f"{_PIPELINE}.llamacpp:LlamaCppWhitespaceSegments",
})

MODELS = Registry("model", {
    "BPE": f"{_MODELS}.bpe:BPEModel",
    "Unigram": f"{_MODELS}.unigram:UnigramModel",
    "WordPiece": f"{_MODELS}.wordpiece:WordPieceModel",
    "WordLevel": f"{_MODELS}.wordlevel:WordLevelModel",
    "LlamaCppRwkv": f"{_PIPELINE}.llamacpp:LlamaCppRwkv",
})

POST_PROCESSORS = Registry("post-processor", {
    "TemplateProcessing": f"{_PIPELINE}.post_processors:TemplateProcessing",
    "BertProcessing": f"{_PIPELINE}.post_processors:BertProcessing",
    "RobertaProcessing": f"{_PIPELINE}.post_processors:BertProcessing",
    "ByteLevel": f"{_PIPELINE}.post_processors:Passthrough",
    "Sequence": f"{_PIPELINE}.post_processors:Sequence",
})

DECODERS = Registry("decoder", {
    "ByteLevel": f"{_PIPELINE}.decoders:ByteLevel",
    "Sequence": f"{_PIPELINE}.decoders:Sequence",
    "Replace": f"{_PIPELINE}.decoders:Replace",
    "ByteFallback": f"{_PIPELINE}.decoders:ByteFallback",
    "Fuse": f"{_PIPELINE}.decoders:Fuse",
    "Strip": f"{_PIPELINE}.decoders:Strip",
    "Metaspace": f"{_PIPELINE}.decoders:Metaspace",
    "BPEDecoder": f"{_PIPELINE}.decoders:BPEDecoder",
    "SentencePieceDecoder": f"{_PIPELINE}.decoders:SentencePieceDecoder",
    "WordPiece": f"{_MODELS}.wordpiece:WordPieceDecoder",
    "CTC": f"{_MODELS}.wordpiece:CTCDecoder",
})

STAGES = {"normalizer": NORMALIZERS, "pre_tokenizer": PRE_TOKENIZERS, "model": MODELS,
          "post_processor": POST_PROCESSORS, "decoder": DECODERS}

build_normalizer = NORMALIZERS.build
build_pre_tokenizer = PRE_TOKENIZERS.build
build_post_processor = POST_PROCESSORS.build
build_decoder = DECODERS.build


def build_model(spec):
    """The model for ``spec`` (its ``spec.model["type"]``); models are built from the whole spec."""
    return MODELS.lookup(spec.model.get("type"))(spec)
