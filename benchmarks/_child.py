"""A library's batch APIs on one thread, run in a child process, for a library whose thread count is
fixed per process.

fastokens' batch calls take no thread count: its pool size comes from ``FASTOKENS_BPE_THREADS`` (its
own pool) and ``RAYON_NUM_THREADS`` (rayon's), read once per process. So one process cannot time
both its one-thread and its all-core batch; the one-thread modes run in a child started with both
set to 1. The child times each call itself (wall and CPU time of the call alone), so moving the
texts and ids between the processes is never timed, and sends the ids back for the id check.

    python -m benchmarks._child <library> <tokenizer>     (the protocol of :class:`ChildModes`)
"""

from __future__ import annotations

import atexit
import gc
import os
import pickle
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# what each library reads to run one thread (set before it is imported)
ONE_THREAD_ENV = {"fastokens": {"FASTOKENS_BPE_THREADS": "1", "RAYON_NUM_THREADS": "1"}}


@dataclass
class SelfTimed:
    """A call's result with the wall and CPU seconds the call itself took (measured where it ran)."""

    value: object
    wall: float
    cpu: float


class ChildModes:
    """Batch modes (``"batch"``, ``"flat"``) of ``library`` for tokenizer ``name``, one thread each, in a
    child process started on first use and stopped at exit. ``call(mode)`` is the mode's batch call:
    texts -> :class:`SelfTimed`."""

    def __init__(self, library: str, name: str):
        self.library, self.name = library, name
        self._proc = None

    def _child(self) -> subprocess.Popen:
        if self._proc is None:
            env = dict(os.environ, **ONE_THREAD_ENV[self.library])
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
            self._proc = subprocess.Popen([sys.executable, "-m", "benchmarks._child", self.library, self.name],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=ROOT)
            atexit.register(self.close)
            self._receive()  # the child says it loaded the tokenizer (or why it could not)
        return self._proc

    def _receive(self):
        status, payload = pickle.load(self._proc.stdout)
        if status != "ok":
            raise RuntimeError(f"{self.library} child process: {payload}")
        return payload

    def call(self, mode: str):
        def run(texts: list[str]) -> SelfTimed:
            proc = self._child()
            pickle.dump((mode, texts), proc.stdin)
            proc.stdin.flush()
            return SelfTimed(*self._receive())
        return run

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
            self._proc = None


def _serve(library: str, name: str) -> None:
    from benchmarks._engines import ALL_THREADS, load_engine

    # the protocol keeps the process's stdout; anything a library prints goes to stderr
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)

    def send(message):
        pickle.dump(message, out)
        out.flush()

    try:
        engine = load_engine(name, library)
    except Exception as exc:  # noqa: BLE001 - the parent reports it
        send(("error", f"{type(exc).__name__}: {exc}"))
        return
    # the environment pins the library to one thread: its all-core entries run on one
    calls = {"batch": engine.batch[ALL_THREADS], "flat": engine.flat[ALL_THREADS]}
    send(("ok", None))
    seen: dict[str, list[str]] = {}
    while True:
        try:
            mode, texts = pickle.load(sys.stdin.buffer)
        except EOFError:
            return
        try:
            if mode in seen:
                # Untimed, the mode's previous texts first: the parent ran other libraries (and this
                # library's own all-core modes) since this process last ran, and a library timed in
                # the parent runs its modes back to back on tables its previous mode left in the CPU
                # caches. Text already encoded teaches the library's piece caches nothing new.
                # (Without it, fastokens' one-thread flat batch read o200k Japanese ~40% slower.)
                calls[mode](seen[mode])
            seen[mode] = texts
            gc.collect(1)  # as the parent does before each timed call
            cpu0, wall0 = time.process_time(), time.perf_counter()
            value = calls[mode](texts)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            send(("ok", (value, wall, cpu)))
        except Exception as exc:  # noqa: BLE001
            send(("error", f"{type(exc).__name__}: {exc}"))


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
