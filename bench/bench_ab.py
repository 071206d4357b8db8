#!/usr/bin/env python3
"""A/B of two builds of amqpcap on the same captures: this checkout against another revision.

    python bench/bench_ab.py [--base REV] [--runs 5] [CAPTURE ...]

``bench_dissect.py``'s best-of-N moves by up to 12% within an hour on a shared machine, more
than most single optimisations: comparing two of its runs compares the machine as much as the
code.  This alternates the two builds run by run (A, B, A, B, ...), so that both see the same
drift, and reports each one's minimum and median, of the time and of the CPU (all threads; on
a loaded machine the CPU moves less than the time).

The base (default ``HEAD``: what the working tree changes) is exported (``git archive``) into a
directory of the system's temporary directory named by its commit, and its extensions built in
place (``setup.py build_ext --inplace``, with this Python's Cython); a build is made in a
directory of its own and renamed into place when done, so runs of any checkout sharing a base
share its build and never see one half made; the newest three base builds are kept, older ones
removed.  Both sides must run every compiled part, built
from their sources: a part that is not (no Cython, a failed or stale build) stops the bench
with the reason, rather than timing pure Python.  Each run is a process
of its own: ``dissect()`` timed inside it (imports excluded, shown apart), set up as the amqpcap
command sets up its process (``cli.lean``).  Captures default to bench/data's real RabbitMQ
captures and 200k small packets, if they are there (``bench_dissect.py`` builds and records
them).  It measures; it asserts nothing (not a timed test).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data")
DEFAULT = ("rabbit_bulk_35mb.pcap", "rabbit_small_35mb.pcap", "small_200000.pcap")
# A base build's directory (a finished one: a build in progress has a suffix), and how many
# of them are kept: each is a built checkout, and every new base commit makes one.
BUILD_NAME = re.compile(r"amqpcap-bench-ab-[0-9a-f]{16}")
KEEP_BUILDS = 3

# One run: the import and dissect times (ms) of the amqpcap found first on sys.path.
_CHILD = """
import sys, time
t0 = time.perf_counter()
from amqpcap import cli
cli.lean("dissect")
from amqpcap.pipeline import dissect
t1, c1 = time.perf_counter(), time.process_time()
dissect([sys.argv[1]], sys.argv[2], force=True)
t2, c2 = time.perf_counter(), time.process_time()
print(f"{(t1 - t0) * 1e3:.1f} {(t2 - t1) * 1e3:.1f} {(c2 - c1) * 1e3:.1f}")
"""


# Which compiled parts of the amqpcap found first on sys.path do not run, and why.
_NOT_COMPILED = """
from amqpcap import compiled
for name in compiled.PARTS:
    module, why = compiled.current_build(name)
    if module is None:
        print(f"{name}: {why}")
"""


def check_compiled(src: str, what: str) -> None:
    """Stop unless every compiled part of the amqpcap in ``src`` is built from its sources."""
    r = subprocess.run(
        [sys.executable, "-c", _NOT_COMPILED],
        env=dict(os.environ, PYTHONPATH=src),
        capture_output=True,
        text=True,
    )
    if r.returncode or r.stdout.strip():
        raise SystemExit(f"{what} ({src}) does not run compiled:\n{r.stdout}{r.stderr}")


def base_build(rev: str) -> str:
    """The ``src`` directory of a built copy of ``rev``, in a directory named by its commit."""
    sha = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--verify", rev + "^{commit}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    path = os.path.join(tempfile.gettempdir(), f"amqpcap-bench-ab-{sha[:16]}")
    if not os.path.isdir(path):
        try:
            import Cython  # noqa: F401 (setup.py builds nothing without it, silently for this bench)
        except ImportError:
            raise SystemExit(
                f"{sys.executable} has no Cython to build {rev} with: pip install Cython"
            ) from None
        tmp = tempfile.mkdtemp(prefix=f"amqpcap-bench-ab-{sha[:16]}.")
        try:
            archive = subprocess.run(
                ["git", "-C", ROOT, "archive", sha], capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            print(f"building {rev} ({sha[:10]}) in {path} ...", flush=True)
            build = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
            r = subprocess.run(build, cwd=tmp, capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(f"building {rev} failed:\n{r.stderr}")
            check_compiled(os.path.join(tmp, "src"), f"the build of {rev}")
            try:
                os.rename(tmp, path)
            except OSError:  # another run built it meanwhile: use that one
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        prune_builds(keep=KEEP_BUILDS)
    return os.path.join(path, "src")


def prune_builds(keep: int) -> None:
    """Remove all but the ``keep`` newest base builds (each is a whole built checkout)."""
    root = tempfile.gettempdir()
    names = [n for n in os.listdir(root) if BUILD_NAME.fullmatch(n)]
    paths = sorted((os.path.join(root, n) for n in names), key=os.path.getmtime, reverse=True)
    for old in paths[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def run(src: str, capture: str, out: str) -> tuple[float, float, float]:
    """(imports, dissect, dissect's CPU of all the process's threads) in ms, of one run."""
    # Bytecode cached as after an install (an environment that forbids writing it would have
    # every run compile the modules)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = src
    r = subprocess.run([sys.executable, "-c", _CHILD, capture, out], env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"amqpcap from {src} failed on {capture}:\n{r.stderr}")
    imports, seconds, cpu = map(float, r.stdout.split()[-3:])
    return imports, seconds, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captures", nargs="*", help="captures (default: bench/data's, if there)")
    ap.add_argument("--base", default="HEAD", help="the revision to compare with (default HEAD)")
    ap.add_argument("--runs", type=int, default=5, help="runs of each build (alternating)")
    a = ap.parse_args()
    captures = a.captures or [os.path.join(DATA, c) for c in DEFAULT if os.path.exists(os.path.join(DATA, c))]
    if not captures:
        raise SystemExit("no captures: name some, or build bench/data's with bench_dissect.py")
    builds = {a.base: base_build(a.base), "this checkout": os.path.join(ROOT, "src")}
    for name, src in builds.items():
        check_compiled(src, name)
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        for capture in captures:
            times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in builds}
            for _ in range(a.runs):
                for name, src in builds.items():
                    times[name].append(run(src, capture, os.path.join(tmp, "out")))
            print(f"{os.path.basename(capture)} ({a.runs} runs each, alternating):")
            base = statistics.median(c for _, _, c in times[a.base])
            for name, ts in times.items():
                dissect, cpu = [t for _, t, _ in ts], [c for _, _, c in ts]
                median, cpu_median = statistics.median(dissect), statistics.median(cpu)
                change = (cpu_median / base - 1) * 100
                print(
                    f"  {name:14s} dissect min {min(dissect):7.0f} ms  median {median:7.0f} ms"
                    f"  CPU min {min(cpu):7.0f} ms  median {cpu_median:7.0f} ms ({change:+.1f}%)"
                    f"  imports {min(i for i, _, _ in ts):5.0f} ms"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
