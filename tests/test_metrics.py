"""tokjit.serving.metrics: off by default, counts what happens when on, exports to Prometheus."""

from __future__ import annotations

import pytest

import tokjit
from tokjit.serving import StopSequenceDecoder, metrics


@pytest.fixture
def tok():
    return tokjit.get_encoding("o200k_base")


def test_off_by_default(tok):
    assert metrics.ACTIVE is None
    tok.encode("hello")  # no collector: nothing to count, nothing raised


def test_counts(tok):
    m = metrics.enable()
    try:
        ids = tok.encode("hello wörld")
        text = tok.decode(ids)
        stream = tok.decode_stream()
        emoji = "🎉".encode("utf-8")
        by_bytes = {bytes(b): i for i, b in enumerate(tok.spec.tokens)}
        byte_ids = [by_bytes[emoji[:1]], by_bytes[emoji[1:2]]]  # an incomplete character: held
        for i in byte_ids:
            stream.step(i)
        dec = StopSequenceDecoder(tok, stop_strings=["wör"])
        dec.process_tokens(tok.encode("hello wörld"))
        snap = m.snapshot()
    finally:
        metrics.disable()
    assert snap["encode_calls"] >= 2 and snap["encode_tokens"] >= 2 * len(ids)
    assert snap["encode_bytes"] >= len("hello wörld".encode("utf-8"))
    assert snap["decode_calls"] >= 1 and snap["decode_chars"] >= len(text)
    assert snap["stream_holds"] >= 1 and snap["stream_steps"] >= 2
    assert snap["stops"]["string"] == 1
    assert snap["encode_seconds"]["count"] == snap["encode_calls"]
    assert metrics.ACTIVE is None


def test_prometheus_export(tok):
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    m = metrics.Metrics()
    metrics.export_prometheus(registry, metrics=m)
    metrics.enable(m)
    try:
        tok.encode("a b c")
    finally:
        metrics.disable()
    text = prometheus_client.generate_latest(registry).decode()
    assert "tokjit_encode_calls_total 1.0" in text
    assert 'tokjit_encode_seconds_bucket{le="+Inf"} 1.0' in text
