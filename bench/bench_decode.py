#!/usr/bin/env python3
"""The AMQP decode stage alone: the decoders fed the reassembled bytes directly.

    python bench/bench_decode.py CAPTURE [--runs 3] [--profile]

``dissect`` spends its time reading the capture, reassembling TCP, decoding AMQP, building
rows and writing Parquet; this bench isolates the decoding.  It dissects CAPTURE once while
recording every call the TCP reassembler makes into each conversation's ``ConnectionDecoder``
(``data``, ``gap``, ``finish``), then replays those calls into fresh decoders, draining the
events after each call as the pipeline does, and times the replay only (best of ``--runs``).
It prints which decoder implementation ran (``amqpcap.compiled``: the compiled core or
pure Python; ``AMQPCAP_PURE=1`` selects pure Python).  ``--profile``: one replay under
cProfile, top 25 by own time.  It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

from amqpcap import compiled, pipeline  # noqa: E402
from amqpcap.amqp.decoder import ConnectionDecoder  # noqa: E402


def record(capture: str) -> list:
    """[(decoder kwargs, [(call, args), ...]), ...]: each conversation's decoder calls."""
    convs: list = []
    orig_init = ConnectionDecoder.__init__

    def init(self, **kw):
        orig_init(self, **kw)
        self.bench_calls = []
        convs.append((kw, self.bench_calls))

    def wrap(name):
        orig = getattr(ConnectionDecoder, name)

        def f(self, *args):
            self.bench_calls.append((name, args))
            return orig(self, *args)

        return f

    patched = {n: getattr(ConnectionDecoder, n) for n in ("__init__", "data", "gap", "finish")}
    ConnectionDecoder.__init__ = init
    for n in ("data", "gap", "finish"):
        setattr(ConnectionDecoder, n, wrap(n))
    try:
        with tempfile.TemporaryDirectory() as out:
            pipeline.dissect([capture], os.path.join(out, "t"))
    finally:
        for n, f in patched.items():
            setattr(ConnectionDecoder, n, f)
    return convs


def replay(convs: list) -> int:
    events = 0
    for kw, calls in convs:
        dec = ConnectionDecoder(**kw)
        for name, args in calls:
            getattr(dec, name)(*args)
            if dec.events:
                events += len(dec.pop_events())
    return events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    convs = record(a.capture)
    ncalls = sum(len(c) for _, c in convs)
    print(f"compiled parts: {compiled.describe()}")
    print(f"{a.capture}: {len(convs)} conversations, {ncalls} decoder calls")
    if a.profile:
        import cProfile
        import pstats

        cProfile.runctx("replay(convs)", globals(), {"convs": convs, "replay": replay}, "/tmp/decode.prof")
        pstats.Stats("/tmp/decode.prof").sort_stats("tottime").print_stats(25)
        return
    best = None
    for _ in range(a.runs):
        t = time.perf_counter()
        n = replay(convs)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    print(f"decode stage: {n} events, best of {a.runs}: {best:.3f} s")


if __name__ == "__main__":
    main()
