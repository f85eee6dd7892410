"""Every component type a loader can emit is one tokjit can build.

The registries (``tokjit.pipeline.registry``) list each type explicitly; these tests resolve every entry,
check that every ``{"type": ...}`` literal in the loaders' source names a registered type (a GGUF loader
once emitted a decoder type nothing registered), and load every tokenizer file in the shared data to check
each stage's type, Sequence children included, against its own stage's registry.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import tokjit
from tokjit.errors import UnsupportedComponentError
from tokjit.pipeline.registry import STAGES
from conftest import SHARED

LOAD_DIR = pathlib.Path(tokjit.__file__).parent / "load"
_CHILDREN = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers", "post_processor": "processors",
             "decoder": "decoders"}


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_registered_type_resolves(stage):
    registry = STAGES[stage]
    for name in registry.names():
        assert callable(registry.lookup(name)), (stage, name)


def test_unknown_type_is_a_typed_error():
    with pytest.raises(UnsupportedComponentError, match="Frobnicate"):
        STAGES["decoder"].build({"type": "Frobnicate"})


def _emitted_type_literals():
    """(file, line, type) for each dict literal ``{"type": "<Name>", ...}`` in tokjit/load/*.py."""
    found = []
    for path in sorted(LOAD_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value == "type" and \
                            isinstance(value, ast.Constant) and isinstance(value.value, str):
                        found.append((path.name, node.lineno, value.value))
    return found


def test_loader_type_literals_are_registered():
    literals = _emitted_type_literals()
    assert len(literals) > 20, "the scan found too few component literals to be looking at the loaders"
    known = set().union(*(set(r.names()) for r in STAGES.values()))
    missing = [lit for lit in literals if lit[2] not in known]
    assert not missing, f"loaders emit component types no registry lists: {missing}"


def _files():
    if not SHARED.is_dir():
        return []
    out = []
    for pattern in ("data/hf/*/tokenizer.json", "data/**/*.model", "data/gguf/*.gguf", "data/hf/*/vocab.txt"):
        out += sorted(SHARED.glob(pattern))
    return out


def _stage_types(stage: str, config, out: list):
    if config is None:
        return
    out.append((stage, config.get("type")))
    for child in config.get(_CHILDREN.get(stage, ""), None) or []:
        _stage_types(stage, child, out)


def test_shared_files_found():
    assert len(_files()) >= 20, f"expected the shared tokenizer files under {SHARED}"


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(SHARED)))
def test_file_components_build(path):
    tok = tokjit.load(path)
    spec = tok.spec
    types: list = []
    for stage in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        _stage_types(stage, getattr(spec, stage), types)
    types.append(("model", spec.model.get("type")))
    for stage, kind in types:
        assert kind in STAGES[stage], (stage, kind)
    assert tok.decode(tok.encode("Hello, world")) is not None
