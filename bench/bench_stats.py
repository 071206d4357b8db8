#!/usr/bin/env python3
"""Memory and time of the analysis on big tables: `amqpcap.load`, `stats` and `report`.

    python bench/bench_stats.py [--packets 1250000] [--report] [--python PY] [--redissect]
    python bench/bench_stats.py --gb 0.1,1,4 [--runs 3] [--python PY] [--write-doc] [--data DIR --keep]

Builds (in ``--data``, default a new directory under /tmp, deleted when done unless ``--keep``) a
capture of small-packet AMQP 0-9-1
traffic (each publish and each delivery in a packet of its own, acks and
confirms every 10 messages: about 2.2 packets a message) and dissects it
(default tables, no --frames; ``--redissect``: again, e.g. tables of an older
amqpcap).  Then, each in a fresh process so the peak memory is that step's alone,
it measures wall time, CPU seconds and peak memory of:

* ``load``:   amqpcap.load(OUT)
* ``load-an``: amqpcap.load(OUT, columns="analysis"), the columns the analysis reads
* ``load-co``: amqpcap.load(OUT, columns="compact"): the analysis columns, the pairing ids as
  integer codes (stats and report load that way, a section at a time)
* ``stats``:  amqpcap stats OUT --json (load + every computation + JSON)
* ``report``: amqpcap report OUT -o DIR (with --report; matplotlib figures)
* ``pair``:   stats over the tables of two shipped captures recorded years
  apart (dissect rabbitmq091_pika_full.pcap netamqp09_offline.pcap): the time
  span, not the data, used to decide the memory (an array per 1 s bucket)
* ``epoch``:  stats over a capture one of whose packets (a method's) is stamped 1970-01-01

``--gb 0.1,1,4``: the analysis against the dissection that fed it, on captures of about 0.1, 1
and 4 GB (3.2 M packets a GB; each size's capture and tables built in ``--data`` and, without
``--keep``, deleted once that size is measured: a 4 GB capture and its tables are about 4.3 GB of
disk).  Per size, ``--runs`` rounds of ``dissect`` (into a fresh directory), ``stats --json`` and
``report``, one after the other (the machine's load drifts: the steps of a round see about the
same), each step's median wall time, median CPU seconds (user + system: what a loaded machine
does not inflate) and each round's peak memory, and the ratio of the analysis' median to dissect's.
``--write-doc`` puts that table in docs/performance.md (this script's block).

Each step runs twice: once for its memory (:func:`peak_memory`: the process tree's PSS sampled
every 50 ms), then timed, alone (bench_dissect's ``run_measured``: wall time from start to exit,
CPU seconds and peak RSS from ``wait4``; dissect is bench_dissect's own command, so both scripts
time it alike).  The sampler is not run beside the timed run: reading smaps_rollup of
each process of the tree costs it 2.5-8 ms of CPU a sample (the more processes and mappings,
the more), on the 0.1 GB capture 0.4 s over dissect, 0.5 s over stats and 1.3 s over report
(9-23 % of the step's own CPU seconds), which a 2-core machine takes from the step it times.

``--python`` runs the steps with another interpreter (e.g. the main branch's
venv) for a before/after comparison on the same tables.  It measures; it does
not assert (not a timed test).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "src"))

import bench_dissect as B  # noqa: E402  (the 0-9-1 encoder and pcap writer)


def build_small(path: str, packets: int, seed: int = 11) -> None:
    """About ``packets`` packets: publishes and deliveries of 32-256 B bodies, one a packet."""
    random.seed(seed)
    out = B.PcapOut(path)
    n = 0
    port = 41000
    written = 0
    while written < packets:
        pub, con = B.Conn(out, port), B.Conn(out, port + 1)
        port += 2
        B.open_pair(pub, con)
        written += 20
        tag = 0
        for _ in range(20_000):  # messages per connection pair
            body = os.urandom(32) * random.choice((1, 2, 4, 8))
            rk = f"orders.{random.randint(0, 9)}"
            pub.send(0, B.publish(1, "amq.topic", rk, body, n))
            tag += 1
            con.send(1, B.deliver(1, tag, "amq.topic", rk, body, n))
            n += 1
            written += 2
            if tag % 10 == 0:
                pub.send(1, B.method(1, 60, 80, struct.pack(">QB", tag, 1)))
                con.send(0, B.method(1, 60, 80, struct.pack(">QB", tag, 1)))
                written += 2
            if written >= packets:
                break
        B.close_pair(pub, con)
    out.close()


def epoch_capture(src: str, dst: str, k: int = 20) -> None:
    """A copy of pcap ``src`` whose ``k``-th packet is stamped 0 (1970-01-01T00:00:00Z)."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    assert struct.unpack_from("<I", data, 0)[0] == 0xA1B2C3D4, "little-endian microsecond pcap expected"
    pos = 24
    for _ in range(k - 1):
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    struct.pack_into("<II", data, pos, 0, 0)
    with open(dst, "wb") as f:
        f.write(data)


def amqpcap(python: str, *args: str) -> list[str]:
    if python == sys.executable:
        return [os.path.join(os.path.dirname(sys.executable), "amqpcap"), *args]
    return [python, "-m", "amqpcap.cli", *args]


# Runs one step in a process of its own and reports that process tree's peak memory: the largest
# ru_maxrss of one process, and the peak over time of the sum of the proportional set sizes (PSS:
# a page shared by n processes counts 1/n in each) of every process of the tree (a step that forks
# a second process counts both), sampled every 50 ms; the address space is capped so a step that
# wants tens of GB fails (MemoryError) instead of taking the machine.  Not timed: the sampling
# takes CPU from the step (peak_memory).
_WRAP = """
import os, resource, subprocess, sys, tempfile, time
cap = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

def tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out

def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    except (OSError, ValueError):
        return 0

errors = tempfile.TemporaryFile("w+")  # (a pipe not read while polling could fill)
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=errors, text=True)
peak = 0
while p.poll() is None:
    peak = max(peak, sum(pss(q) for q in tree(p.pid)))
    time.sleep(0.05)
errors.seek(0)
stderr = errors.read()
err = stderr.strip().splitlines()[-1][:100] if p.returncode and stderr.strip() else ""
print(max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, peak), p.returncode, err)
"""


# The commands run as after an install: with Python's bytecode cache (as bench_dissect's
# children).  PYTHONDONTWRITEBYTECODE (this project's CI machines set it) would otherwise have
# every run compile amqpcap's modules from source, which no installed amqpcap does.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def peak_memory(cmd: list[str], limit_mb: int) -> tuple[float, str, str]:
    """Run ``cmd`` under the sampler (``_WRAP``), capped at ``limit_mb``: (peak MB of its process
    tree, exit status, the last line of its errors)."""
    r = subprocess.run(
        [sys.executable, "-c", _WRAP, str(limit_mb), *cmd], capture_output=True, text=True, env=CHILD_ENV
    )
    rss, code, err = (r.stdout.strip().split(" ", 2) + ["", ""])[:3]
    return (int(rss) / 1024 if rss.isdigit() else float("nan")), code, err


def measure(name: str, cmd: list[str], limit_mb: int, out: str | None = None) -> tuple[float, float, float]:
    """Run ``cmd`` for its memory (:func:`peak_memory`), then, unless it failed, timed alone
    (bench_dissect.run_measured), the directory it writes (``out``, if any) removed in between.
    Print its wall time, CPU time, peak memory and exit status; return (wall seconds, MB, CPU
    seconds)."""
    mb, code, err = peak_memory(cmd, limit_mb)
    el = cpu = float("nan")
    if code == "0":
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
        el, cpu, rss, status, _ = B.run_measured(cmd)
        mb, code = max(mb, rss / 2**20), str(status)
    print(f"{name:8s} {el:8.2f} s  {cpu:8.2f} s CPU  {mb:9.1f} MB peak  exit {code}  {err}", flush=True)
    return el, mb, cpu


PACKETS_PER_GB = 3_200_000  # small-packet traffic: 3.2 M packets make a 1,002 MB capture


def capture(data: str, packets: int) -> str:
    """The small-packet capture of ``packets`` packets in ``data`` (built once)."""
    cap = os.path.join(data, f"small_{packets}.pcap")
    if not os.path.exists(cap):
        print(f"building {cap} ...", flush=True)
        build_small(cap + ".tmp", packets)
        os.replace(cap + ".tmp", cap)
        os.sync()  # the new capture's dirty pages written back now, not during the timed dissect
    return cap


def against_dissect(a, data: str) -> list[dict]:
    """``--gb``: per size, rounds of dissect, stats and report; the medians and the ratios (with
    ``--write-doc``, the table of the sizes measured so far written after each)."""
    rows = []
    for gb in [float(x) for x in a.gb.split(",")]:
        cap = capture(data, round(gb * PACKETS_PER_GB))
        out, mb = cap[: -len(".pcap")] + ".out", os.path.getsize(cap) / 1e6
        tmp = tempfile.mkdtemp(prefix="bench-stats-", dir=data)
        load = [os.getloadavg()[0]]
        try:
            got: dict = {"dissect": [], "stats": [], "report": []}
            for i in range(a.runs):
                # the first round's dissect writes the tables the analysis reads when there are none
                # yet (a 4 GB capture is not dissected once more untimed)
                fresh = out if i == 0 and not os.path.isdir(out) else os.path.join(tmp, f"d{i}")
                reports = os.path.join(tmp, f"r{i}")
                steps = {
                    # (this venv's dissect, as bench_dissect runs it: an older tree in --python may
                    # lack the compiled parts)
                    "dissect": (B.amqpcap_command(cap, fresh), fresh),
                    "stats": (amqpcap(a.python, "stats", out, "--json"), None),
                    "report": (amqpcap(a.python, "report", out, "-o", reports), reports),
                }
                for name, (cmd, written) in steps.items():
                    got[name].append(measure(f"{gb:g}GB {name}", cmd, a.limit_mb, written))
                if fresh != out:
                    shutil.rmtree(fresh, ignore_errors=True)
                load.append(os.getloadavg()[0])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            if not a.keep:  # (a 4 GB capture and its tables: GBs of /tmp)
                shutil.rmtree(out, ignore_errors=True)
                os.remove(cap)
        row = {"gb": gb, "mb": mb}
        row.update(packets=round(gb * PACKETS_PER_GB), load=statistics.median(load))
        for name, runs in got.items():
            row[name] = (
                statistics.median(t for t, _, _ in runs),
                max(m for _, m, _ in runs),
                statistics.median(c for _, _, c in runs),
                [m for _, m, _ in runs],
            )
        for name in ("stats", "report"):
            row[f"{name}_ratio"] = row[name][0] / row["dissect"][0]
        print(
            f"{gb:g} GB (load {row['load']:.1f}): dissect {row['dissect'][0]:.1f} s "
            f"({row['dissect'][2]:.1f} s CPU); stats {row['stats'][0]:.1f} s (x{row['stats_ratio']:.2f}, "
            f"{row['stats'][2]:.1f} s CPU), {_peaks(row['stats'][3])} MB; report {row['report'][0]:.1f} s "
            f"(x{row['report_ratio']:.2f}, {row['report'][2]:.1f} s CPU), {_peaks(row['report'][3])} MB",
            flush=True,
        )
        rows.append(row)
        if a.write_doc:
            write_doc(rows, a)
    return rows


def _peaks(mbs: list) -> str:
    """Each run's peak RSS, in run order: ``812 / 806 / 815``."""
    return " / ".join(f"{m:.0f}" for m in mbs)


def write_doc(rows: list[dict], a) -> None:
    """This script's block of docs/performance.md: the table of :func:`against_dissect`."""
    import perfdoc

    lines = [
        "## Analysis against the dissection that fed it",
        "",
        f"Command: `python bench/bench_stats.py --gb {a.gb} --runs {a.runs}`: small-packet AMQP 0-9-1",
        "traffic (each publish and delivery in a packet of its own, confirms and acks every 10",
        f"messages); per step the median wall time of {a.runs} rounds (dissect, stats, report one after",
        "the other), the median CPU seconds (user + system), and each round's peak memory of the",
        "step's process tree (the larger of one process' peak RSS and the peak sum of the PSS of",
        "every process of the tree: stats forks a second one), taken in a run of its own (the PSS",
        "sampler would take CPU from the timed run); dissect timed as bench_dissect times it; the ratio is",
        "the analysis' median wall time over dissect's.  On a loaded machine the wall times stretch",
        "(the CPU seconds and peak RSS much less): the load column is the 1-minute load average",
        "during that size's rounds.",
        "",
        f"Machine: {perfdoc.machine()}.",
        "",
        "| capture | load | dissect | `stats --json` | `report` |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        d, st, rp = r["dissect"], r["stats"], r["report"]
        lines.append(
            f"| {r['mb']:,.0f} MB ({r['packets'] / 1e6:.2g} M packets) | {r['load']:.1f} "
            f"| {d[0]:.1f} s ({d[2]:.1f} s CPU), {d[1]:.0f} MB "
            f"| {st[0]:.1f} s (x{r['stats_ratio']:.2f}; {st[2]:.1f} s CPU), {_peaks(st[3])} MB "
            f"| {rp[0]:.1f} s (x{r['report_ratio']:.2f}; {rp[2]:.1f} s CPU), {_peaks(rp[3])} MB |"
        )
    perfdoc.write_block("bench_stats", "\n".join(lines) + "\n")
    print(f"wrote {perfdoc.DOC}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1_250_000)
    ap.add_argument("--report", action="store_true", help="also time `amqpcap report`")
    ap.add_argument("--python", default=sys.executable, help="interpreter to run the steps with")
    ap.add_argument("--only", help="comma-separated steps (load,load-an,load-co,stats,report,pair,epoch)")
    ap.add_argument("--limit-mb", type=int, default=8192, help="address-space cap of each step (MB)")
    ap.add_argument("--redissect", action="store_true", help="dissect again (tables of an older amqpcap)")
    ap.add_argument("--gb", help="capture sizes in GB (e.g. 0.1,1,4): the analysis against dissect")
    ap.add_argument("--runs", type=int, default=3, help="rounds per size with --gb (medians)")
    ap.add_argument("--write-doc", action="store_true", help="with --gb: rewrite this script's docs block")
    ap.add_argument("--data", help="where the captures and their tables are built (default: a new /tmp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the captures and tables (reused by a next run)")
    a = ap.parse_args()
    data = a.data or tempfile.mkdtemp(prefix="bench-stats-data-")
    os.makedirs(data, exist_ok=True)
    try:
        if a.gb:
            against_dissect(a, data)
            return 0
        return one_size(a, data)
    finally:
        if not a.keep and not a.data:  # a --data directory is the user's: only its files go
            shutil.rmtree(data, ignore_errors=True)


def one_size(a, data: str) -> int:
    """Without ``--gb``: load, stats, report and the odd-time cases on one capture's tables."""
    cap = capture(data, a.packets)
    out = os.path.join(data, f"small_{a.packets}.out")
    if a.redissect or not os.path.isdir(out):
        print(f"dissecting into {out} ...", flush=True)
        subprocess.run(amqpcap(sys.executable, "dissect", cap, "-o", out, "-q", "--force"), check=True)
    tmp = tempfile.mkdtemp(prefix="bench-stats-")
    try:
        pair = os.path.join(tmp, "pair")
        caps = os.path.join(ROOT, "captures")
        subprocess.run(
            amqpcap(
                sys.executable,
                "dissect",
                os.path.join(caps, "rabbitmq091_pika_full.pcap"),
                os.path.join(caps, "netamqp09_offline.pcap"),
                "-o",
                pair,
                "-q",
            ),
            check=True,
        )
        ep_cap = os.path.join(tmp, "epoch.pcap")
        epoch_capture(os.path.join(caps, "rabbitmq091_pika_full.pcap"), ep_cap)
        epoch = os.path.join(tmp, "epoch")
        subprocess.run(amqpcap(sys.executable, "dissect", ep_cap, "-o", epoch, "-q"), check=True)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
        report_dir = os.path.join(tmp, "report")
        print(
            f"{a.packets:,} packets, {os.path.getsize(cap) / 1e6:,.0f} MB capture, "
            f"{size / 1e6:,.1f} MB of tables; python {a.python}"
        )
        steps = {
            "load": [a.python, "-c", f"import amqpcap; t = amqpcap.load({out!r}); print(len(t.methods))"],
            "load-an": [a.python, "-c", f"import amqpcap; t = amqpcap.load({out!r}, columns='analysis')"],
            "load-co": [a.python, "-c", f"import amqpcap; t = amqpcap.load({out!r}, columns='compact')"],
            "stats": amqpcap(a.python, "stats", out, "--json"),
            "report": amqpcap(a.python, "report", out, "-o", report_dir),
            "pair": amqpcap(a.python, "stats", pair, "--json"),
            "epoch": amqpcap(a.python, "stats", epoch, "--json"),
        }
        only = set(a.only.split(",")) if a.only else set(steps) - ({"report"} if not a.report else set())
        for name, cmd in steps.items():
            if name in only:
                measure(name, cmd, a.limit_mb, report_dir if name == "report" else None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
