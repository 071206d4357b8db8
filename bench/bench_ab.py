#!/usr/bin/env python3
"""A/B of two builds of amqpcap on the same captures: this checkout against another revision.

    python bench/bench_ab.py [--base REV] [--runs 5] [CAPTURE ...]

``bench_dissect.py``'s best-of-N moves by up to 12% within an hour on a shared machine, more
than most single optimisations: comparing two of its runs compares the machine as much as the
code.  This alternates the two builds run by run (A, B, A, B, ...), so that both see the same
drift, and reports each one's minimum and median.

The base (default ``HEAD``: what the working tree changes) is checked out in a worktree under
the system's temporary directory and its extensions built in place (``setup.py build_ext
--inplace``; kept between calls, rebuilt when the revision changes).  Each run is a process
of its own: ``dissect()`` timed inside it (imports excluded, shown apart), set up as the amqpcap
command sets up its process (``cli.lean``).  Captures default to bench/data's real RabbitMQ
captures and 200k small packets, if they are there (``bench_dissect.py`` builds and records
them).  It measures; it asserts nothing (not a timed test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data")
DEFAULT = ("rabbit_bulk_35mb.pcap", "rabbit_small_35mb.pcap", "small_200000.pcap")

# One run: the import and dissect times (ms) of the amqpcap found first on sys.path.
_CHILD = """
import sys, time
t0 = time.perf_counter()
from amqpcap import cli
cli.lean("dissect")
from amqpcap.pipeline import dissect
t1 = time.perf_counter()
dissect([sys.argv[1]], sys.argv[2], force=True)
t2 = time.perf_counter()
print(f"{(t1 - t0) * 1e3:.1f} {(t2 - t1) * 1e3:.1f}")
"""


def worktree(rev: str) -> str:
    """The ``src`` directory of a built checkout of ``rev``."""
    sha = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = os.path.join(tempfile.gettempdir(), "amqpcap-bench-ab")
    stamp = os.path.join(path, ".built")
    if os.path.exists(stamp) and open(stamp).read() == sha:
        return os.path.join(path, "src")
    subprocess.run(["git", "-C", ROOT, "worktree", "prune"], check=True)
    if os.path.isdir(path):
        subprocess.run(["git", "-C", path, "checkout", "-q", "--detach", sha], check=True)
    else:
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", path, sha], check=True)
    print(f"building {rev} ({sha[:10]}) in {path} ...", flush=True)
    build = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    subprocess.run(build, cwd=path, check=True, capture_output=True)
    with open(stamp, "w") as f:
        f.write(sha)
    return os.path.join(path, "src")


def run(src: str, capture: str, out: str) -> tuple[float, float]:
    # Bytecode cached as after an install (an environment that forbids writing it would have
    # every run compile the modules)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = src
    r = subprocess.run([sys.executable, "-c", _CHILD, capture, out], env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"amqpcap from {src} failed on {capture}:\n{r.stderr}")
    imports, seconds = map(float, r.stdout.split()[-2:])
    return imports, seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captures", nargs="*", help="captures (default: bench/data's, if there)")
    ap.add_argument("--base", default="HEAD", help="the revision to compare with (default HEAD)")
    ap.add_argument("--runs", type=int, default=5, help="runs of each build (alternating)")
    a = ap.parse_args()
    captures = a.captures or [os.path.join(DATA, c) for c in DEFAULT if os.path.exists(os.path.join(DATA, c))]
    if not captures:
        raise SystemExit("no captures: name some, or build bench/data's with bench_dissect.py")
    builds = {a.base: worktree(a.base), "this checkout": os.path.join(ROOT, "src")}
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        for capture in captures:
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in builds}
            for _ in range(a.runs):
                for name, src in builds.items():
                    times[name].append(run(src, capture, os.path.join(tmp, "out")))
            print(f"{os.path.basename(capture)} ({a.runs} runs each, alternating):")
            base_min = min(t for _, t in times[a.base])
            for name, ts in times.items():
                dissect = [t for _, t in ts]
                change = (min(dissect) / base_min - 1) * 100
                median = statistics.median(dissect)
                print(
                    f"  {name:14s} dissect min {min(dissect):7.0f} ms  median {median:7.0f} ms"
                    f"  ({change:+.1f}% min)  imports {min(i for i, _ in ts):5.0f} ms"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
