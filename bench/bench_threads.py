#!/usr/bin/env python3
"""How the two threads of a dissect share the work: the Parquet thread's batches and the waits.

    python bench/bench_threads.py [--runs 3] [--batches] [--switch-interval S] CAPTURE ...

For each run (a process of its own, set up as the amqpcap command sets up its process): the
dissect's wall time and process CPU time; the Parquet thread's batches (how many, their wall
time and their own CPU time, ``time.thread_time``); and how long the main thread waited for
them (a batch still in flight when QUEUED were, and the waits at close).  A batch whose wall
time is well above its CPU time waited for the GIL (what ``pipeline.SWITCH_INTERVAL`` is
set for).  ``--batches`` lists every batch (start ms, wall ms,
CPU ms, rows); ``--switch-interval`` sets the interval the hot loop uses instead of
``pipeline.SWITCH_INTERVAL``, to sweep it.  It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# One run, timed inside; writer.Job is wrapped to time each batch and each wait for one.
_CHILD = """
import sys, time
from amqpcap import cli
cli.lean("dissect")
from amqpcap import pipeline
from amqpcap.records import writer

interval, listing = float(sys.argv[3]), sys.argv[4] == "1"
if interval > 0:
    pipeline.SWITCH_INTERVAL = interval
batches, waited = [], [0.0]
start = time.perf_counter()
run, exception = writer.Job.run, writer.Job.exception

def timed_run(job):
    rows = sum(b.num_rows for b in job.batch)  # a row group's batches
    t, c = time.perf_counter(), time.thread_time()
    run(job)
    batches.append((t - start, time.perf_counter() - t, time.thread_time() - c, rows))

def timed_exception(job):
    t = time.perf_counter()
    try:
        return exception(job)
    finally:
        waited[0] += time.perf_counter() - t

writer.Job.run, writer.Job.exception = timed_run, timed_exception
cpu = time.process_time()
pipeline.dissect([sys.argv[1]], sys.argv[2], force=True)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
ms = lambda s: f"{s * 1e3:.0f} ms"
print(f"dissect {ms(wall)} (process CPU {ms(cpu)}); main thread waited {ms(waited[0])}; "
      f"{len(batches)} batches: wall {ms(sum(b[1] for b in batches))}, "
      f"CPU {ms(sum(b[2] for b in batches))}")
if listing:
    for at, w, c, rows in batches:
        print(f"    at {at * 1e3:7.1f} ms  wall {w * 1e3:6.1f} ms  CPU {c * 1e3:6.1f} ms  {rows} rows")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batches", action="store_true", help="list every batch of the first run")
    ap.add_argument("--switch-interval", type=float, default=0.0, help="seconds (default: pipeline's)")
    a = ap.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed amqpcap has its bytecode
    out = os.path.join(HERE, "data", "threads-out")
    for capture in a.captures:
        print(capture)
        for i in range(a.runs):
            listing = "1" if a.batches and i == 0 else "0"
            args = [sys.executable, "-c", _CHILD, capture, out, str(a.switch_interval), listing]
            r = subprocess.run(args, env=env, capture_output=True, text=True)
            if r.returncode:
                sys.stderr.write(r.stderr)
                return r.returncode
            sys.stdout.write("  " + r.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
