"""Imports the tokenizer.json model loaders of every family so they register themselves."""

import importlib

for _name in ("hf_unigram", "hf_wordpiece"):
    try:
        importlib.import_module(f"{__package__}.{_name}")
    except ModuleNotFoundError as exc:  # a family not present in this build
        if exc.name != f"{__package__}.{_name}":
            raise
