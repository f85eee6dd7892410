"""benchmarks/compare.py stays runnable and honest: a tiny --quick cell end to end, a library whose
ids differ is marked and never counted as best, and a missing peer is reported rather than fatal.
The ids every check compares against are tiktoken's own (the o200k_base reference)."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks import _engines, compare

pytest.importorskip("tiktoken")


@pytest.fixture(scope="module")
def o200k_engines(shared):
    engines = _engines.load_engines("o200k_base", ["tokjit", "tiktoken"])
    assert all(isinstance(e, _engines.Engine) for e in engines.values()), engines
    return engines


def test_quick_cell_end_to_end(shared, tmp_path, capsys):
    out_json = tmp_path / "out.json"
    code = compare.main(["--quick", "--tokenizers", "o200k_base", "--corpora", "english",
                         "--libraries", "tokjit", "tiktoken", "--bytes", "4000", "--repeats", "1",
                         "--json", str(out_json)])
    printed = capsys.readouterr().out
    assert code == 0
    report = json.loads(out_json.read_text())
    (cell,) = report["cells"]
    assert cell["tokenizer"] == "o200k_base" and cell["corpus"] == "english"
    libs = cell["libraries"]
    assert libs["tiktoken"]["role"] == "reference"
    # every tokjit API (per-call loop returning lists and numpy arrays, batch on 1 and all threads,
    # flat) returned tiktoken's ids; tiktoken's encode_to_numpy is timed beside its list call
    assert set(libs["tokjit"]["modes"]) == set(compare.all_modes())
    assert {"loop", "loop/np"} <= set(libs["tiktoken"]["modes"])
    assert libs["tiktoken"]["modes"]["loop/np"]["exact"]
    assert cell["ratios"]["loop/np"]["other_library"] == "tiktoken"
    for label, m in libs["tokjit"]["modes"].items():
        assert m["exact"] and m["differing_lines"] == 0, label
        assert m["mb_s"] > 0 and m["mb_s_cpu"] > 0
    assert cell["ratios"]["best"]["other_library"] == "tiktoken"
    # latency of the list-returning and of the array-returning single-text call
    assert set(report["latency"]["o200k_base"]) == set(compare.SINGLE_CALLS)
    for mode in compare.SINGLE_CALLS:
        lat = report["latency"]["o200k_base"][mode]["libraries"]
        for size in _engines.LATENCY_SIZES:
            assert lat["tokjit"][size]["exact"] and lat["tokjit"][size]["us"] > 0
            assert lat["tiktoken"][size]["exact"]
    assert "o200k_base x english" in printed and "where tokjit is behind" in printed


def test_differing_library_is_marked_and_never_best(o200k_engines):
    ref = o200k_engines["tiktoken"]
    # fastest possible and wrong: would win every mode if its ids were not checked
    wrong = _engines.Engine("wrong", "peer", encode=lambda t: [],
                            batch={1: lambda ts: [[] for _ in ts]})
    engines = {"tokjit": o200k_engines["tokjit"], "tiktoken": ref, "wrong": wrong,
               "absent": "not installed (No module named 'absent')"}
    results = compare.measure_cell(engines, compare.cell_parts(engines, "english", 3000, 2))
    assert results["absent"] == {"status": "not installed (No module named 'absent')"}
    wrong_loop = results["wrong"]["modes"]["loop"]
    assert not wrong_loop["exact"] and wrong_loop["differing_lines"] > 0 and wrong_loop["mb_s"] > 0
    assert all(m["exact"] for m in results["tiktoken"]["modes"].values())
    rat = compare.ratios(results)
    assert all(r["other_library"] != "wrong" for r in rat.values())
    assert "!(" in compare.fmt_cell(wrong_loop)


def test_latency_ids_checked(o200k_engines):
    import numpy as np

    wrong = _engines.Engine("wrong", "peer", encode=lambda t: [0], encode_np=lambda t: np.zeros(1, np.int32))
    engines = {"tiktoken": o200k_engines["tiktoken"], "wrong": wrong}
    for mode in compare.SINGLE_CALLS:
        lat = compare.measure_latency(engines, repeats=1, pool_size=20, mode=mode)
        assert all(v["exact"] for v in lat["tiktoken"].values())
        assert not any(v["exact"] for v in lat["wrong"].values())


def test_missing_peer_is_reported(shared, monkeypatch):
    monkeypatch.setitem(sys.modules, "gigatoken", None)   # import gigatoken -> ImportError
    monkeypatch.setitem(sys.modules, "fastokens", None)
    engines = _engines.load_engines("llama2-spm", ["tokjit", "sentencepiece", "gigatoken", "fastokens"])
    assert isinstance(engines["tokjit"], _engines.Engine)
    assert engines["gigatoken"].startswith("not installed")
    # fastokens has no .model loader whether installed or not
    assert "no .model loader" in engines["fastokens"]


def test_head_to_head_checks_ids(shared, capsys):
    from benchmarks import head_to_head
    code = head_to_head.main(["--parts", "2", "--bytes", "3000"])
    printed = capsys.readouterr().out
    assert code == 0, printed  # every library's ids were tiktoken's (a difference returns 1)
    assert "o200k_base x english" in printed and "tokjit" in printed and "!(" not in printed
