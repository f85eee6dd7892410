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


def _normal_form_tokenizer():
    """The NFC tokenizer of the comparison (``_engines.build_qwen_nfc``), warmed."""
    import tokjit

    from ._engines import build_qwen_nfc

    try:
        path = build_qwen_nfc()
    except FileNotFoundError as exc:
        raise NotImplementedError(f"shared data not found: {exc}") from exc
    tok = tokjit.load(str(path))
    warm(tok)
    return tok


class EncodeNormalForm:
    """A tokenizer whose normalizer is NFC (Qwen-style: Llama 3's vocabulary and merges, Qwen 2's split
    pattern) on about 128 KB of lines as a batch, 1 and 2 threads. The Arabic lines include marks out
    of canonical order (4% of the bytes), which a batch puts in NFC in place before its kernels."""

    params = (["arabic", "japanese"], [1, 2])
    param_names = ["corpus", "threads"]
    timeout = 120

    def setup(self, corpus, threads):
        self.tok = _normal_form_tokenizer()
        self.lines = lines(corpus, 128_000)

    def time_encode_batch_numpy(self, corpus, threads):
        self.tok.encode_batch_numpy(self.lines, num_threads=threads)


class EncodeNormalFormPerLine:
    """The same lines, one ``encode_to_numpy`` call each: the built-in call runs the form's quick check
    and the kernel; a line that fails it is normalized in Python first."""

    params = [["arabic", "japanese"]]
    param_names = ["corpus"]
    timeout = 120

    def setup(self, corpus):
        self.tok = _normal_form_tokenizer()
        self.lines = lines(corpus, 128_000)

    def time_encode_per_line(self, corpus):
        encode = self.tok.encode_to_numpy
        for line in self.lines:
            encode(line)


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


class SplitScanner:
    """The pre-tokenizer stage alone: a recognized split pattern's scanner (``split_known``) over
    ~100 KB, with its 64-byte block path for plain ASCII (``block``) and piece by piece only
    (``per-piece``), so the stage's share of an encode stays visible."""

    params = (["o200k", "cl100k"], ["english", "code", "chinese", "russian"], ["block", "per-piece"])
    param_names = ["pattern", "corpus", "path"]
    timeout = 120

    def setup(self, pattern, corpus, path):
        import numpy as np

        from tokjit.kernels import split_known as sk
        from tokjit.regex.compiled import CompiledRegex
        from tokjit.regex.known import _CL100K_HF, KNOWN, recognize

        source = _CL100K_HF if pattern == "cl100k" else next(p for p in KNOWN if p.startswith("[^"))
        shape, flags, max_digits, roles = recognize(CompiledRegex(source, syntax="onig").program)
        if path == "per-piece":
            flags &= ~sk.BLOCK_ASCII
        data = bytearray(text(corpus, 100_000).encode("utf-8"))
        self.n_bytes = len(data)
        buf = np.frombuffer(data, np.uint8)
        out_s, out_e = np.empty(self.n_bytes + 80, np.int64), np.empty(self.n_bytes + 80, np.int64)
        roles = np.require(roles, np.uint8, ("C", "W"))
        self.args = (np.int64(shape), np.int64(flags), np.int64(max_digits), roles, buf, np.int64(0),
                     np.int64(self.n_bytes), out_s, out_e, np.int64(1))
        self.scan = sk.split_known
        self.scan(*self.args)

    def time_split(self, pattern, corpus, path):
        self.scan(*self.args)
