"""Surfaces shaped like other libraries' APIs, layered on :class:`~tokjit.Tokenizer`."""
