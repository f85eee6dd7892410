"""Post-processors: add BOS/EOS / ``[CLS] ... [SEP]`` around encoded ids (``add_special_tokens=True``)."""

from __future__ import annotations



from tokjit.pipeline.registry import build_post_processor
from tokjit.errors import ModelFileError



class TemplateProcessing:
    """HF ``TemplateProcessing`` for single sequences: ``single`` lists special tokens and ``$A``."""

    def __init__(self, config: dict):
        specials = config.get("special_tokens", {})
        self.prefix: list[int] = []
        self.suffix: list[int] = []
        seen_sequence = False
        for item in config.get("single", []):
            if "Sequence" in item:
                seen_sequence = True
                continue
            name = item["SpecialToken"]["id"]
            try:
                ids = specials[name]["ids"]
            except KeyError:
                raise ModelFileError(f"post_processor names special token {name!r} without ids",
                                     where="post_processor.special_tokens") from None
            (self.suffix if seen_sequence else self.prefix).extend(ids)

    def __call__(self, ids: list[int]) -> list[int]:
        return self.prefix + ids + self.suffix

    @property
    def added_count(self) -> int:
        return len(self.prefix) + len(self.suffix)


class BertProcessing:
    """HF ``BertProcessing`` / ``RobertaProcessing``: ``cls`` + ids + ``sep`` (given as [token, id])."""

    def __init__(self, config: dict):
        self.prefix = [int(config["cls"][1])]
        self.suffix = [int(config["sep"][1])]

    def __call__(self, ids: list[int]) -> list[int]:
        return self.prefix + ids + self.suffix


class Passthrough:
    """``ByteLevel`` as a post-processor only trims offsets; ids are unchanged."""

    def __init__(self, config: dict):
        self.prefix, self.suffix = [], []

    def __call__(self, ids: list[int]) -> list[int]:
        return ids


class Sequence:
    def __init__(self, config: dict):
        self.steps = [build_post_processor(c) for c in config["processors"]]

    def __call__(self, ids: list[int]) -> list[int]:
        for step in self.steps:
            ids = step(ids)
        return ids


