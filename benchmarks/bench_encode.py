"""asv: encode and decode throughput per tokenizer family (JIT warmed in ``setup``)."""

from __future__ import annotations

from ._common import FAMILY_NAMES, lines, load, text, warm

SHORT = "The quick brown fox jumps over the lazy dog."


class Encode:
    """One document of about 64 KB (per-byte cost) and one short sentence (per-call cost)."""

    params = (FAMILY_NAMES, ["english", "code", "chinese", "russian"])
    param_names = ["family", "corpus"]
    timeout = 120

    def setup(self, family, corpus):
        self.tok = load(family)
        warm(self.tok)
        self.text = text(corpus, 64_000)
        self.n_bytes = len(self.text.encode("utf-8"))

    def time_encode(self, family, corpus):
        self.tok.encode(self.text)


class EncodeShort:
    params = [FAMILY_NAMES]
    param_names = ["family"]

    def setup(self, family):
        self.tok = load(family)
        warm(self.tok)

    def time_encode_short(self, family):
        self.tok.encode(SHORT)

    def time_encode_batch_short(self, family):
        self.tok.encode_batch([SHORT] * 64, num_threads=1)


class EncodeBatch:
    """About 256 KB of lines per call, 1 and 2 threads (the GIL released inside kernels)."""

    params = (FAMILY_NAMES, [1, 2])
    param_names = ["family", "threads"]
    timeout = 120

    def setup(self, family, threads):
        self.tok = load(family)
        warm(self.tok)
        self.lines = lines("english", 128_000) + lines("code", 128_000)

    def time_encode_batch(self, family, threads):
        self.tok.encode_batch(self.lines, num_threads=threads)

    def time_encode_batch_numpy(self, family, threads):
        self.tok.encode_batch_numpy(self.lines, num_threads=threads)


class Decode:
    params = [FAMILY_NAMES]
    param_names = ["family"]

    def setup(self, family):
        self.tok = load(family)
        warm(self.tok)
        self.ids = self.tok.encode(text("english", 64_000))
        self.short = self.ids[:16]
        self.batch = [self.ids[i:i + 64] for i in range(0, min(len(self.ids), 64 * 64), 64)]

    def time_decode(self, family):
        self.tok.decode(self.ids)

    def time_decode_short(self, family):
        self.tok.decode(self.short)

    def time_decode_batch(self, family):
        self.tok.decode_batch(self.batch, num_threads=1)
