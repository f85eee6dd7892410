"""Optional tokenizer metrics for production: call counts, tokens, bytes, latency histograms, stream
holds and stop detections.

Off by default. Instrumented code reads the module attribute :data:`ACTIVE` and does nothing else when
it is ``None``, so disabled metrics cost one global lookup per call::

    from tokjit.serving import metrics
    m = metrics.enable()              # start collecting (process-wide)
    ...
    m.snapshot()                      # plain dict of every counter and histogram
    metrics.export_prometheus()       # expose through prometheus_client, if installed
    metrics.disable()
"""

from __future__ import annotations

import bisect
import threading
import time

import numpy as np

ACTIVE: "Metrics | None" = None
# 1 while ACTIVE is set: read by the tokenizers' built-in encode calls, which then leave every call to
# the instrumented Python function (tokjit.kernels.call_object)
GATE = np.zeros(1, np.int64)

# seconds; a tokenizer call ranges from a microsecond (one token) to seconds (a book)
LATENCY_BUCKETS = (1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
                   2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144)

now = time.perf_counter


class Histogram:
    """Cumulative-bucket histogram in the Prometheus sense (``le`` upper bounds, then +Inf)."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds):
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        out, total = [], 0
        for bound, c in zip(self.bounds + (float("inf"),), self.counts):
            total += c
            out.append((bound, total))
        return out

    def as_dict(self) -> dict:
        return {"buckets": self.cumulative(), "sum": self.sum, "count": self.count}


COUNTERS = {
    "encode_calls": "Encode calls",
    "encode_tokens": "Tokens produced by encode",
    "encode_bytes": "UTF-8 bytes of text encoded",
    "decode_calls": "Decode calls",
    "decode_tokens": "Token ids decoded",
    "decode_chars": "Characters produced by decode",
    "stream_steps": "DecodeStream steps",
    "stream_holds": "DecodeStream steps that emitted nothing (incomplete UTF-8 or no new text)",
    "stop_held": "StopSequenceDecoder steps that held text back (possible start of a stop string)",
}
STOP_KINDS = ("token", "visible_token", "string", "visible_string")


class Metrics:
    """One set of counters and histograms; thread-safe (a lock per update)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.counters = dict.fromkeys(COUNTERS, 0)
            self.stops = dict.fromkeys(STOP_KINDS, 0)
            self.encode_seconds = Histogram(LATENCY_BUCKETS)
            self.decode_seconds = Histogram(LATENCY_BUCKETS)
            self.encode_tokens_per_call = Histogram(TOKEN_BUCKETS)

    def on_encode(self, n_bytes: int, n_tokens: int, seconds: float) -> None:
        with self._lock:
            c = self.counters
            c["encode_calls"] += 1
            c["encode_tokens"] += n_tokens
            c["encode_bytes"] += n_bytes
            self.encode_seconds.observe(seconds)
            self.encode_tokens_per_call.observe(n_tokens)

    def on_decode(self, n_tokens: int, n_chars: int, seconds: float) -> None:
        with self._lock:
            c = self.counters
            c["decode_calls"] += 1
            c["decode_tokens"] += n_tokens
            c["decode_chars"] += n_chars
            self.decode_seconds.observe(seconds)

    def on_stream_step(self, held: bool) -> None:
        with self._lock:
            self.counters["stream_steps"] += 1
            if held:
                self.counters["stream_holds"] += 1

    def on_stop_held(self) -> None:
        with self._lock:
            self.counters["stop_held"] += 1

    def on_stop(self, kind: str) -> None:
        with self._lock:
            self.stops[kind] += 1

    def snapshot(self) -> dict:
        with self._lock:
            return {
                **self.counters,
                "stops": dict(self.stops),
                "encode_seconds": self.encode_seconds.as_dict(),
                "decode_seconds": self.decode_seconds.as_dict(),
                "encode_tokens_per_call": self.encode_tokens_per_call.as_dict(),
            }


def enable(metrics: Metrics | None = None) -> Metrics:
    """Start collecting into ``metrics`` (a new :class:`Metrics` if omitted); returns it."""
    global ACTIVE
    ACTIVE = metrics if metrics is not None else Metrics()
    GATE[0] = 1
    return ACTIVE


def disable() -> None:
    global ACTIVE
    ACTIVE = None
    GATE[0] = 0


def get() -> Metrics | None:
    return ACTIVE


def export_prometheus(registry=None, metrics: Metrics | None = None, prefix: str = "tokjit"):
    """Register a collector with ``prometheus_client`` (default: its global ``REGISTRY``).

    The collector reads ``metrics`` -- or whatever :data:`ACTIVE` is at scrape time -- so it can be
    registered once at start-up. Returns the collector (pass it to ``registry.unregister``).
    """
    try:
        from prometheus_client.core import (REGISTRY, CounterMetricFamily,
                                            HistogramMetricFamily)
    except ImportError as exc:
        raise ImportError("export_prometheus needs prometheus_client: pip install prometheus-client "
                          "(or pip install tokjit[metrics])") from exc

    class TokjitCollector:
        def collect(self):
            m = metrics if metrics is not None else ACTIVE
            if m is None:
                return
            snap = m.snapshot()
            for name, doc in COUNTERS.items():
                fam = CounterMetricFamily(f"{prefix}_{name}", doc)
                fam.add_metric([], snap[name])
                yield fam
            fam = CounterMetricFamily(f"{prefix}_stops", "Generations stopped, by stop kind", labels=["kind"])
            for kind, value in snap["stops"].items():
                fam.add_metric([kind], value)
            yield fam
            for name, doc in (("encode_seconds", "Encode latency"), ("decode_seconds", "Decode latency"),
                              ("encode_tokens_per_call", "Tokens per encode call")):
                h = snap[name]
                fam = HistogramMetricFamily(f"{prefix}_{name}", doc)
                fam.add_metric([], [(_le(b), c) for b, c in h["buckets"]], sum_value=h["sum"])
                yield fam

    collector = TokjitCollector()
    (registry if registry is not None else REGISTRY).register(collector)
    return collector


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


__all__ = ["ACTIVE", "Metrics", "Histogram", "enable", "disable", "get", "export_prometheus", "now"]
