"""Component registries: HF-style ``{"type": ...}`` configs -> tokjit component objects.

Each pipeline stage (normalizer, pre-tokenizer, model, post-processor, decoder) has one
:class:`Registry`; family modules register their component types with ``@REGISTRY.register(name)``.
An unknown type is an :class:`~tokjit.errors.UnsupportedComponentError` naming it and the known
ones, never a guess.
"""

from __future__ import annotations

from typing import Any, Callable

from .errors import UnsupportedComponentError


class Registry:
    def __init__(self, stage: str):
        self.stage = stage
        self.builders: dict[str, Callable[..., Any]] = {}

    def register(self, name: str):
        def wrap(builder):
            self.builders[name] = builder
            return builder
        return wrap

    def lookup(self, kind) -> Callable[..., Any]:
        try:
            return self.builders[kind]
        except KeyError:
            raise UnsupportedComponentError(
                f"{self.stage} type {kind!r} is not supported (known: {sorted(self.builders)})") from None

    def build(self, config: dict | None):
        """The component for ``config`` (``None`` stays ``None``)."""
        if config is None:
            return None
        return self.lookup(config.get("type"))(config)
