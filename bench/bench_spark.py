#!/usr/bin/env python3
"""Spark job speed-up: local[1] against local[2] on many files and on one big capture.

    python bench/bench_spark.py [--set-mb 200] [--files 20] [--single-mb 205] [--runs 1]

Builds (once, cached in bench/data/; not committed) with bench_dissect's
generator: a set of ``--files`` captures totalling ``--set-mb`` MB, and one
capture of ``--single-mb`` MB (many publisher/consumer conversations, split by
conversation at the default 64 MiB split size).  Each configuration runs in a
fresh process (its own JVM, so the master takes effect); the time measured is
``amqpcap.spark.run`` alone, after a warm-up run on the bundled captures (SparkSession
start and warm-up reported apart: ``session start``).  The
single-process ``dissect`` of the same input is printed for reference.
Targets (2 cores): >= 1.7x for the set, >= 1.5x for the single capture, set when a task
kept one core busy; a compiled dissect already has the second core at work in every task
(its Parquet and hashing threads), so the set's speed-up stays near 1x.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
sys.path.insert(0, HERE)


def _build(path: str, mb: float, seed: int) -> None:
    from bench_dissect import build

    if not os.path.exists(path):
        build(path + ".tmp", mb, seed=seed)
        os.rename(path + ".tmp", path)


def inputs(set_mb: float, files: int, single_mb: float):
    d = os.path.join(DATA, f"spark_set_{files}x{set_mb / files:g}mb")
    os.makedirs(d, exist_ok=True)
    print(f"building/reusing {files} captures in {d} and one {single_mb:g} MB capture ...", flush=True)
    for i in range(files):
        _build(os.path.join(d, f"c{i:03d}.pcap"), set_mb / files, seed=100 + i)
    single = os.path.join(DATA, f"spark_single_{single_mb:g}mb.pcap")
    _build(single, single_mb, seed=7)
    return d, single


def child(master: str, inp: str, out: str) -> dict:
    from amqpcap.spark import run, session

    t0 = time.perf_counter()
    spark = session.build(master, app="bench_spark", quiet=True)
    # warm-up: Python workers started, modules imported, JVM code paths compiled (seconds, once)
    run(spark, [os.path.join(os.path.dirname(HERE), "captures")], out, force=True)
    t1 = time.perf_counter()
    s = run(spark, [inp], out, force=True)
    t2 = time.perf_counter()
    spark.stop()
    return {
        "session_s": t1 - t0,
        "run_s": t2 - t1,
        "tasks": s.tasks,
        "split": s.split,
        "bytes": s.bytes,
        "rows": s.rows,
        "packets": s.packets,
    }


def measure(master: str, inp: str, runs: int) -> dict:
    best = None
    for _ in range(runs):
        out = tempfile.mkdtemp(prefix="bench_spark_")
        try:
            p = subprocess.run(
                [sys.executable, __file__, "--child", master, inp, os.path.join(out, "o")],
                capture_output=True,
                text=True,
                check=True,
            )
        finally:
            shutil.rmtree(out, ignore_errors=True)
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["load"] = os.getloadavg()[0]  # other processes on the machine skew the speed-up
        if best is None or r["run_s"] < best["run_s"]:
            best = r
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set-mb", type=float, default=200, help="about: the generator overshoots each file")
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--single-mb", type=float, default=205)
    ap.add_argument("--runs", type=int, default=1, help="best of N runs per configuration")
    ap.add_argument("--child", nargs=3, metavar=("MASTER", "INPUT", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(*a.child)))
        return 0
    set_dir, single = inputs(a.set_mb, a.files, a.single_mb)
    from amqpcap.pipeline import dissect

    for label, inp in (("many files", set_dir), ("single capture", single)):
        caps = sorted(os.path.join(inp, f) for f in os.listdir(inp)) if os.path.isdir(inp) else [inp]
        size = sum(os.path.getsize(c) for c in caps)
        out = tempfile.mkdtemp(prefix="bench_dissect_")
        t0 = time.perf_counter()
        dissect(caps, os.path.join(out, "o"))
        ref = time.perf_counter() - t0
        shutil.rmtree(out, ignore_errors=True)
        r1 = measure("local[1]", inp, a.runs)
        r2 = measure("local[2]", inp, a.runs)
        print(
            f"{label}: {len(caps)} file(s), {size / 1e6:,.1f} MB, {r2['tasks']} tasks"
            + (f" (split into {sum(r2['split'].values())} buckets)" if r2["split"] else "")
        )
        print(f"  dissect (one process)  {ref:7.2f} s  {size / 1e6 / ref:6.1f} MB/s")
        for m, r in (("local[1]", r1), ("local[2]", r2)):
            print(
                f"  spark {m}         {r['run_s']:7.2f} s  {size / 1e6 / r['run_s']:6.1f} MB/s"
                f"   (session start {r['session_s']:.1f} s; load average after the run {r['load']:.1f})"
            )
        print(f"  speed-up local[2] / local[1]: {r1['run_s'] / r2['run_s']:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
