"""Drop-in surfaces shaped like other tokenizer libraries, over tokjit's tokenizers.

``tokjit.tiktoken`` answers the calls tiktoken users write (``get_encoding``, ``encoding_for_model``,
``Encoding.encode(allowed_special=...)``); ``tokjit.sentencepiece`` answers those of
``sentencepiece.SentencePieceProcessor``; :class:`~tokjit.compat.transformers.TransformersMixin` gives
:class:`~tokjit.Tokenizer` the calls of a transformers tokenizer (``tok(texts, padding=True)``). Each
returns the reference library's ids and raises where it raises.
"""
