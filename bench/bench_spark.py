#!/usr/bin/env python3
"""Spark job against one dissect process: one big capture and a set of 40, at 0.5, 1 and 4 GB.

    python bench/bench_spark.py [--sizes 0.5,1,4] [--kinds single,set] [--runs 2]
                                [--pairs 174] [--files 40] [--what spark,stats]
                                [--data DIR] [--keep] [--no-doc]

Builds in a new temp directory (``--data``: there instead; deleted afterwards unless
``--keep``) with bench_dissect's AMQP 0-9-1 generator: per size, one capture of ``--pairs``
publisher/consumer connection pairs (2 x pairs concurrent conversations, their packets
interleaved as on a busy link, 1448-byte segments) and a directory of ``--files`` captures of
the same total size (8 pairs each).  Each configuration runs in a fresh process, as a user
runs it: ``amqpcap dissect`` and ``amqpcap spark --master local[1]`` / ``local[2]`` (the JVM
and Python workers started inside the time); the runs alternate and the table gives medians
of the wall time, of each round's speed-ups and of the CPU seconds of every process of the
run (load on the machine inflates the first, hardly the last), and where a Spark run's wall
time went (its start, the tasks, the time workers sat idle, the end; the job's own timeline).
Each input is read once before its timed runs (the page cache warm for all three).  The
session's fixed start is measured apart (``spark`` on a one-packet capture).  Per-core
throughput: the input bytes over the Spark tasks' summed wall and CPU time, against one
dissect process's.  Then (``--what stats``) on
the dissect output of each input, ``amqpcap stats OUT --spark --json`` on ``local[2]`` against
the pandas ``amqpcap stats OUT --json``, alternating, and whether their JSON is the same.
All points, two runs each:
about 20 minutes on an idle 2-core machine.  Writes its table into docs/performance.md
between the ``bench:bench_spark`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_dissect as gen  # noqa: E402
import perfdoc  # noqa: E402


def build(path: str, target_bytes: int, pairs: int, seed: int, port0: int = 20000) -> None:
    """``pairs`` publisher/consumer pairs, round-robin, until the file holds ``target_bytes``."""
    random.seed(seed)
    old_mss, gen.MSS = gen.MSS, 1448
    out = gen.PcapOut(path + ".tmp")
    try:
        conns = []
        for i in range(pairs):
            ip_c = bytes([10, 1 + i // 250, i % 250, 2])
            pub, con = gen.Conn(out, port0 + 2 * i, ip_c), gen.Conn(out, port0 + 2 * i + 1, ip_c)
            gen.open_pair(pub, con)
            conns.append([pub, con, 0, 0])
        body = os.urandom(2048)
        while out.f.tell() < target_bytes:
            for c in conns:
                pub, con, n, tag = c
                msgs = [
                    (f"orders.{random.randint(0, 9)}", body[: random.choice([64, 128, 256, 512, 1024, 2048])])
                    for _ in range(random.randint(1, 4))
                ]
                pub.send(
                    0, b"".join(gen.publish(1, "amq.topic", rk, b, n + i) for i, (rk, b) in enumerate(msgs))
                )
                pub.send(1, gen.method(1, 60, 80, struct.pack(">QB", n + len(msgs), 1)))
                for i, (rk, b) in enumerate(msgs):
                    tag += 1
                    con.send(1, gen.deliver(1, tag, "amq.topic", rk, b, n + i))
                con.send(0, gen.method(1, 60, 80, struct.pack(">QB", tag, 1)))
                c[2], c[3] = n + len(msgs), tag
        for pub, con, _n, _t in conns:
            gen.close_pair(pub, con)
    finally:
        out.close()
        gen.MSS = old_mss
    os.replace(path + ".tmp", path)


def inputs(data: str, gb: float, pairs: int, files: int, kinds: list) -> list:
    """[(label, path)] of the inputs of ``gb`` GB (built in ``data`` unless there)."""
    size = int(gb * 1e9)
    out = []
    if "single" in kinds:
        single = os.path.join(data, f"spark_single_{gb:g}gb.pcap")
        if not os.path.exists(single):
            print(f"building {single} ...", flush=True)
            build(single, size, pairs, seed=7)
        out.append((f"one capture, {2 * pairs} conversations", single))
    if "set" in kinds:
        d = os.path.join(data, f"spark_set_{gb:g}gb")
        os.makedirs(d, exist_ok=True)
        print(f"building {d} ...", flush=True)
        for i in range(files):
            p = os.path.join(d, f"c{i:03d}.pcap")
            if not os.path.exists(p):
                build(p, size // files, 8, seed=100 + i)
        out.append((f"{files} captures", d))
    return out


def tree_cpu(pid: int) -> dict:
    """CPU seconds of ``pid`` ("driver") and its live descendants, the JVM ("jvm") and the
    Python worker daemon with its workers ("python"), each with the children it has reaped:
    /proc, as load does not distort it."""
    tick = os.sysconf("SC_CLK_TCK")
    kids: dict = {}
    stats: dict = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                head, st = f.read().rsplit(")", 1)
        except OSError:
            continue
        st = st.split()
        kids.setdefault(int(st[1]), []).append(int(d))
        # comm, and utime stime cutime cstime
        stats[int(d)] = (head.split("(", 1)[1], sum(int(x) for x in st[11:15]))
    total = {"driver": stats.get(pid, ("", 0))[1] / tick, "jvm": 0.0, "python": 0.0}
    todo = list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        comm, cpu = stats.get(p, ("", 0))
        total["jvm" if comm == "java" else "python"] += cpu / tick
        todo += kids.get(p, [])
    return total


def timed(cmd: list) -> tuple[float, float]:
    """(wall, CPU seconds) of ``cmd``, a fresh process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _pid, status, ru = os.wait4(p.pid, 0)
    took = time.perf_counter() - t0
    err = p.stderr.read()
    p.stderr.close()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    return took, ru.ru_utime + ru.ru_stime


def spark_child(master: str, inp: str, out: str) -> None:
    """A user's run as ``amqpcap spark`` runs it (the session started in a thread while the
    driver indexes ranges and dissects small captures, the job, the JVM ended as the process
    leaves: ``session.let_go``) in this process; prints its summary as JSON, with the CPU seconds
    of this process and the JVM and Python workers it started, and leaves as the command does."""
    t0 = time.time()
    from amqpcap.cli import leave
    from amqpcap.spark import run, session
    from amqpcap.spark.starting import Starting

    up: list = []

    def open_session():  # session.start's, with the time it is up
        spark = session.build(master, app="bench_spark", quiet=True)
        up.append(time.time())
        return spark, True

    starting = Starting(open_session)
    s = run(starting, [inp], out, force=True)
    ran = time.time()
    starting.give_up(lambda _spark, _ours: None)  # (a JVM still launching ended; one up left up)
    cpu = tree_cpu(os.getpid())  # (the JVM's CPU, before it ends unreaped)
    session.let_go()
    ended = time.time()
    print(
        json.dumps(
            {
                "tasks": s.tasks,
                "task_seconds": s.task_seconds,
                "task_cpu": s.task_cpu,
                "driver_units": s.driver_units,
                "driver_seconds": s.driver_seconds,
                "driver_cpu": s.driver_cpu,
                "bytes": s.bytes,
                "cpu": sum(cpu.values()),
                "cpu_by": cpu,
                "session": up[0] - t0 if up else 0.0,
                "job": s.seconds,
                "phases": phases(s.spans, t0, up[0] if up else None, ran, ended),
            }
        )
    )
    leave(0)


def phases(spans: list, t0: float, up: float | None, ran: float, ended: float) -> dict:
    """Where a run's wall time went, from the job's own timeline (``SparkSummary.spans``): the
    session's start (the driver at work meanwhile), the time to its first task (its workers
    starting, the driver's last unit, the plan),
    the tasks from the first start to the last end, of which the time a Python worker sat
    between two tasks (summed over workers, over the cores), what follows the last task
    (results, commit, scratch removal) and the session's end (its JVM ended, ``session.let_go``)."""
    tasks = [(w, st, wall) for w, st, wall, _cpu in spans if w != "driver"]
    if up is None or not tasks:
        return {
            "start": ran - t0,
            "first task": 0.0,
            "tasks": 0.0,
            "idle": 0.0,
            "after": 0.0,
            "stop": ended - ran,
        }
    first = min(st for _w, st, _ in tasks)
    last = max(st + wall for _w, st, wall in tasks)
    idle = 0.0
    for w in {w for w, _st, _wall in tasks}:
        mine = sorted((st, wall) for x, st, wall in tasks if x == w)
        idle += sum(b[0] - (a[0] + a[1]) for a, b in zip(mine, mine[1:]))
    cores = len({w for w, _st, _wall in tasks})
    return {
        "start": up - t0,
        "first task": max(first - up, 0.0),
        "tasks": last - first,
        "idle": idle / cores,
        "after": ran - last,
        "stop": ended - ran,
    }


def stats_child(master: str, out: str) -> None:
    """``amqpcap stats OUT --spark --json`` as the command runs it, in this process; prints the
    report, the CPU seconds of this process, its JVM and Python workers, and whether a session
    was used, as JSON."""
    from types import SimpleNamespace

    from amqpcap.spark import cli as spark_cli
    from amqpcap.spark.stats_tasks import output_bytes

    got, cpu = {}, {}

    def stop(spark, ours):  # (the JVM's CPU, before it ends unreaped)
        cpu.update(tree_cpu(os.getpid()))
        spark.stop()

    a = SimpleNamespace(path=out, json=True, master=master, conf=[], verbose=False, remote=None)
    spark_cli.stats_report(a, output_bytes(out), lambda result, _table: got.setdefault("stats", result), stop)
    session = bool(cpu)
    cpu = cpu or tree_cpu(os.getpid())
    print(json.dumps({"cpu": sum(cpu.values()), "cpu_by": cpu, "session": session, **got}, default=str))


def stats_run(master: str, out: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    cmd = [sys.executable, __file__, "--stats-child", master, out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"stats --spark {master} {out} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return took, json.loads(p.stdout.strip().splitlines()[-1])


def measure_stats(out: str, runs: int) -> dict:
    """``stats OUT --json`` (pandas, one process) against ``stats OUT --spark --json`` on
    ``local[2]``, alternating: medians of wall and CPU seconds, and whether the JSON is the same."""
    amqpcap = os.path.join(os.path.dirname(sys.executable), "amqpcap")
    wall: dict = {"pandas": [], "spark": []}
    cpu: dict = {"pandas": [], "spark": []}
    same = True
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.Popen([amqpcap, "stats", out, "--json"], stdout=subprocess.PIPE, text=True)
        want = p.stdout.read()
        _pid, status, ru = os.wait4(p.pid, 0)
        p.stdout.close()
        wall["pandas"].append(time.perf_counter() - t0)
        cpu["pandas"].append(ru.ru_utime + ru.ru_stime)
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"amqpcap stats {out} failed")
        took, s = stats_run("local[2]", out)
        wall["spark"].append(took)
        cpu["spark"].append(s["cpu"])
        same = same and json.loads(want) == s["stats"]
    med = statistics.median
    tables = sum(os.path.getsize(os.path.join(r, f)) for r, _d, fs in os.walk(out) for f in fs)
    return {
        "tables": tables,
        "wall": {k: med(v) for k, v in wall.items()},
        "cpu": {k: med(v) for k, v in cpu.items()},
        "same": same,
    }


def spark_run(master: str, inp: str, out: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, __file__, "--child", master, inp, out], capture_output=True, text=True
    )
    took = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"spark {master} {inp} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return took, json.loads(p.stdout.strip().splitlines()[-1])


MODES = ("dissect", "local[1]", "local[2]")
#: spark_child's phases of a run's wall time, and the Python process's own start and exit
PHASES = ("start", "first task", "tasks", "idle", "after", "stop", "process")


def read_through(caps: list) -> None:
    """Read every input once, untimed: the first timed run of a round (dissect) would otherwise
    be the one that pays for reading the input from disk into the page cache."""
    for c in caps:
        with open(c, "rb") as f:
            while f.read(1 << 24):
                pass


def measure(inp: str, runs: int, scratch: str, what: list) -> dict:
    amqpcap = os.path.join(os.path.dirname(sys.executable), "amqpcap")
    caps = [inp] if os.path.isfile(inp) else [os.path.join(inp, f) for f in sorted(os.listdir(inp))]
    size = sum(os.path.getsize(c) for c in caps)
    read_through(caps)
    tmp = tempfile.mkdtemp(prefix="bench_spark_", dir=scratch)
    wall: dict = {m: [] for m in MODES}
    cpu: dict = {m: [] for m in MODES}
    task: dict = {"wall": [], "cpu": [], "session": [], "tasks": 0}
    parts: dict = {m: {"driver": [], "jvm": [], "python": [], "tasks": [], "ahead": []} for m in MODES[1:]}
    phase: dict = {m: {k: [] for k in PHASES} for m in MODES[1:]}
    got: dict = {"size": size, "files": len(caps)}
    try:
        if "stats" in what:
            timed([amqpcap, "dissect", *caps, "-o", os.path.join(tmp, "t"), "--force", "-q"])
            got["stats"] = measure_stats(os.path.join(tmp, "t"), runs)
            shutil.rmtree(os.path.join(tmp, "t"))
        for _ in range(runs if "spark" in what else 0):  # alternating: each sees the same load
            w, c = timed([amqpcap, "dissect", *caps, "-o", os.path.join(tmp, "d"), "--force", "-q"])
            wall["dissect"].append(w)
            cpu["dissect"].append(c)
            for m in MODES[1:]:
                took, s = spark_run(m, inp, os.path.join(tmp, "s"))
                wall[m].append(took)
                cpu[m].append(s["cpu"])
                for k, v in s["cpu_by"].items():
                    parts[m][k].append(v)
                parts[m]["tasks"].append(s["task_cpu"])
                parts[m]["ahead"].append(s["driver_cpu"])
                inside = sum(v for k, v in s["phases"].items() if k != "idle")
                for k, v in {**s["phases"], "process": took - inside}.items():
                    phase[m][k].append(v)
                if m == "local[2]":  # the driver's units are task work too (the same functions)
                    task["wall"].append(s["task_seconds"] + s["driver_seconds"])
                    task["cpu"].append(s["task_cpu"] + s["driver_cpu"])
                    task["session"].append(s["session"])
                    task["tasks"] = s["tasks"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if "spark" not in what:
        return got
    med = statistics.median
    return {
        **got,
        "wall": {k: med(v) for k, v in wall.items()},
        "cpu": {k: med(v) for k, v in cpu.items()},
        "parts": {m: {k: med(v) for k, v in p.items()} for m, p in parts.items()},
        "phases": {m: {k: med(v) for k, v in p.items()} for m, p in phase.items()},
        # each round's ratios (its runs saw the same load), their median
        "ratios": {m: med(a / b for a, b in zip(wall[m], wall["local[2]"])) for m in ("dissect", "local[1]")},
        "task_wall": med(task["wall"]),
        "task_cpu": med(task["cpu"]),
        "session": med(task["session"]),
        "tasks": task["tasks"],
    }


def fixed_start(scratch: str, runs: int) -> tuple:
    """(wall, CPU) of ``spark`` on the smallest shipped capture: the session's start and stop,
    the driver dissecting the capture meanwhile (no Spark job, no Python worker); the wall time
    of a first run before those (it records the JVM's class archive if this pyspark and Java
    have none yet); the CPU seconds of the driver, the JVM and the Python workers."""
    cap = os.path.join(ROOT, "captures", "rabbitmq08_rejected.pcap")
    tmp = tempfile.mkdtemp(prefix="bench_spark_", dir=scratch)
    try:
        first, _ = spark_run("local[2]", cap, os.path.join(tmp, "o"))
        got = [spark_run("local[2]", cap, os.path.join(tmp, "o")) for _ in range(runs)]
        med = statistics.median
        parts = {k: med(s["cpu_by"][k] for _, s in got) for k in ("driver", "jvm", "python")}
        return med(w for w, _ in got), med(s["cpu"] for _, s in got), first, parts
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def speed_row(label: str, r: dict) -> str:
    """The row of the first table: ``amqpcap spark`` against ``dissect`` on one input."""
    m, c = r["wall"], r["cpu"]
    mb = r["size"] / 1e6
    return (
        f"| {label} | {mb:,.0f} | {m['dissect']:.1f} | {m['local[1]']:.1f} | {m['local[2]']:.1f} "
        f"| {r['ratios']['dissect']:.2f}x | {r['ratios']['local[1]']:.2f}x "
        f"| {c['dissect']:.1f} / {c['local[1]']:.1f} / {c['local[2]']:.1f} "
        f"| {mb / r['task_wall']:.1f}, {mb / r['task_cpu']:.1f} "
        f"| {mb / m['dissect']:.1f}, {mb / c['dissect']:.1f} |"
    )


def stats_row(label: str, r: dict) -> str:
    """The row of the stats table: ``stats --spark`` against ``stats`` on one input's tables."""
    s = r["stats"]
    w, c = s["wall"], s["cpu"]
    return (
        f"| {label} | {r['size'] / 1e6:,.0f} | {s['tables'] / 1e6:,.0f} "
        f"| {w['pandas']:.1f} | {w['spark']:.1f} "
        f"| {w['pandas'] / w['spark']:.2f}x | {c['pandas']:.1f} / {c['spark']:.1f} "
        f"| {'yes' if s['same'] else 'NO'} |"
    )


def table(rows: list, start: tuple, load: tuple, runs: int, argv: list) -> str:
    out = [
        f"Spark local mode against one process on this machine ({os.cpu_count()} cores; "
        f"load average {load[0]:.1f} / {load[1]:.1f} before / after), medians of {runs} alternating "
        "runs, each a fresh process (JVM and Python workers started inside the time). "
        "Fixed start of a Spark run (session up and down; its one tiny capture is dissected by the "
        f"driver while the session starts, so no Spark job runs): {start[0]:.1f} s, "
        f"{start[1]:.1f} CPU s (the first run after pyspark or Java changed records the JVM's "
        f"class archive: {start[2]:.1f} s); of its CPU s, the driver {start[3]['driver']:.1f}, the JVM "
        f"{start[3]['jvm']:.1f}, the Python workers {start[3]['python']:.1f}. "
        "CPU s: every process of the run (JVM, driver, Python workers), "
        "which other jobs on the machine do not inflate.",
    ]
    speed = [(label, r) for label, r in rows if "wall" in r]
    if speed:
        out += [
            "",
            "`amqpcap spark` against `amqpcap dissect`: the walls' medians, and the median of each "
            "round's ratio (a round's runs follow each other, so they see about the same load). Per "
            "task: the input over the Spark tasks' summed wall time, and over their CPU time, against "
            "dissect's MB per wall and CPU second.",
            "",
            "| input | MB | dissect s | local[1] s | local[2] s | local[2] vs dissect | local[2] vs local[1] "
            "| CPU s dissect / local[1] / local[2] | task MB/s (wall, CPU) | dissect MB/s (wall, CPU) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        out += [speed_row(label, r) for label, r in speed]
        out += [
            "",
            "Where a Spark run's CPU seconds go (medians): the driver process, and of it the task work "
            "it did itself while the session started (ranges indexed, small captures dissected), the "
            "JVM, the Python worker daemon with its workers, and of those the tasks' own CPU (their "
            "`Dissector`, reading and Parquet writing); Python beyond the tasks is the workers' start "
            "and pyspark's hand-off. Task CPU per GB counts the driver's units with the tasks.",
            "",
            "| input | MB | mode | driver | of which units | JVM | Python workers | of which tasks "
            "| task CPU s per GB | dissect CPU s per GB |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for label, r in speed:
            gb = r["size"] / 1e9
            for m, p in r["parts"].items():
                out.append(
                    f"| {label} | {r['size'] / 1e6:,.0f} | {m} | {p['driver']:.1f} | {p['ahead']:.1f} "
                    f"| {p['jvm']:.1f} | {p['python']:.1f} | {p['tasks']:.1f} "
                    f"| {(p['tasks'] + p['ahead']) / gb:.1f} "
                    f"| {r['cpu']['dissect'] / gb:.1f} |"
                )
    if speed:
        out += [
            "",
            "Where a Spark run's wall time goes (medians, s, from the job's own timeline): the session's "
            "start (the driver dissecting meanwhile), from the session up to the first Spark task (its "
            "Python workers starting while the driver goes on, then the driver's last unit, the index "
            "stage and the plan), the tasks from the first start to the last end, and of that the time a "
            "Python worker sat between two of its tasks (per core), what follows the last task "
            "(results, commit, scratch removal), the session's end (the JVM ended as the process leaves, "
            "as `amqpcap spark` ends it), and the process's own start "
            "and exit.",
            "",
            "| input | MB | mode | wall | session start | to first task | tasks | of which idle "
            "| after last task | stop | process |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for label, r in speed:
            for m, p in r["phases"].items():
                out.append(
                    f"| {label} | {r['size'] / 1e6:,.0f} | {m} | {r['wall'][m]:.1f} "
                    + " ".join(f"| {p[k]:.2f}" for k in PHASES)
                    + " |"
                )
    if any("stats" in r for _label, r in rows):
        out += [
            "",
            "`amqpcap stats OUT --spark --json` (`local[2]`) against `amqpcap stats OUT --json` (pandas, one "
            "process) on the dissect output of each input: MB of captures and of tables, wall and CPU "
            "seconds, and whether the two JSON reports are the same.",
            "",
            "| input | MB | tables MB | stats s | stats --spark s | stats --spark vs stats "
            "| CPU s stats / stats --spark | same JSON |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        out += [stats_row(label, r) for label, r in rows if "stats" in r]
    out += ["", "Command: `python bench/bench_spark.py" + "".join(" " + a for a in argv) + "`"]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0.5,1,4", help="GB, comma-separated")
    ap.add_argument("--kinds", default="single,set", help="single (one capture), set (--files captures)")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=174, help="connection pairs in the single capture")
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument(
        "--what", default="spark,stats", help="spark (spark vs dissect), stats (stats --spark vs stats)"
    )
    ap.add_argument("--data", help="where the inputs are built (default: a new temp directory)")
    ap.add_argument("--keep", action="store_true", help="keep the inputs")
    ap.add_argument("--no-doc", action="store_true", help="print the table only")
    ap.add_argument("--child", nargs=3, metavar=("MASTER", "INPUT", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--stats-child", nargs=2, metavar=("MASTER", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        spark_child(*a.child)
        return 0
    if a.stats_child:
        stats_child(*a.stats_child)
        return 0
    data = a.data or tempfile.mkdtemp(prefix="bench_spark_data_")
    os.makedirs(data, exist_ok=True)
    kinds = a.kinds.split(",")
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    rows = []
    try:
        start = fixed_start(data, max(1, min(a.runs, 3)))
        print(
            f"fixed start: {start[0]:.1f} s, {start[1]:.1f} CPU s {start[3]} (first run {start[2]:.1f} s)",
            flush=True,
        )
        for gb in [float(x) for x in a.sizes.split(",")]:
            made = inputs(data, gb, a.pairs, a.files, kinds)
            for label, inp in made:
                rows.append((label, measure(inp, a.runs, data, a.what.split(","))))
                if "wall" in rows[-1][1]:
                    print(speed_row(*rows[-1]), rows[-1][1]["phases"], flush=True)
                if "stats" in rows[-1][1]:
                    print(stats_row(*rows[-1]), flush=True)
                if not a.no_doc:  # every point as it is measured: a later failure keeps them
                    perfdoc.write_block(
                        "bench_spark",
                        table(rows, start, (load0[0], os.getloadavg()[0]), a.runs, sys.argv[1:]),
                    )
            if not a.keep:
                for _label, inp in made:
                    shutil.rmtree(inp) if os.path.isdir(inp) else os.remove(inp)
    finally:
        if not a.keep and not a.data:
            shutil.rmtree(data, ignore_errors=True)
    text = table(rows, start, (load0[0], os.getloadavg()[0]), a.runs, sys.argv[1:])
    print(text)
    print(f"bench took {time.perf_counter() - t0:,.0f} s", flush=True)
    if not a.no_doc:
        perfdoc.write_block("bench_spark", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
