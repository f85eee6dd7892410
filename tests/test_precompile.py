"""``tokjit precompile`` leaves numba's cache holding every kernel a family uses: a fresh process then
encodes, batches, offsets, decodes and streams with every family without compiling anything (counted
with numba's own compile events). The tiny tokenizers it compiles with are checked against HF
``tokenizers`` / ``sentencepiece`` too, so the warm-up exercises the real paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tokjit import precompile as pre
from tokjit.api import load_bytes

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")

CHECK = r"""
import json, sys
from numba.core import event
compiled = []
class Count(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", Count())
from tokjit.precompile import FAMILIES, _exercise
for family in FAMILIES:
    _exercise(family)
print(json.dumps(compiled))
"""


def test_fresh_process_after_precompile_compiles_nothing():
    env = dict(os.environ, TOKJIT_QUIET_COMPILE="1")
    done = subprocess.run([sys.executable, "-m", "tokjit", "precompile"], env=env, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    for family in pre.FAMILIES:
        assert family in done.stdout
    check = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout.strip().splitlines()[-1]) == []


TEXTS = ["hello world, hello!", "  héllo\tworld 123 东京", "world hello  he", "", "x" * 300]


@pytest.mark.parametrize("family", [f for f in pre.FAMILIES if "(.model)" not in f])
def test_tiny_json_tokenizers_equal_hf(tmp_path, family):
    data = pre.FAMILIES[family]()
    path = tmp_path / "tokenizer.json"
    path.write_bytes(data)
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = load_bytes(data, use_cache=False)
    for text in TEXTS:
        assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids, text


@pytest.mark.parametrize("family", [f for f in pre.FAMILIES if "(.model)" in f])
def test_tiny_models_equal_sentencepiece(tmp_path, family):
    data = pre.FAMILIES[family]()
    ref = spm.SentencePieceProcessor(model_proto=data)
    tok = load_bytes(data, use_cache=False)
    for text in TEXTS:
        assert tok.encode(text) == ref.encode(text), text
