#!/usr/bin/env python3
"""End-to-end throughput and peak RSS: amqpcap dissect vs tshark, on two traffic shapes.

    python bench/bench_dissect.py [--shape bulk,small] [--mb 32] [--mss 16344] [--packets 1000000]
                                  [--runs 2] [--big] [--capture FILE] [--profile] [--frames]
                                  [--no-tshark] [--reference-writer]

Shapes (each built once, cached in bench/data/, not committed):

* ``bulk``: realistic AMQP 0-9-1 traffic of ``--mb`` MB: several connections, each a
  publisher with confirms and a consumer with acks; publishes carry basic properties and
  a headers table, bodies of 100 B to 16 KiB (some over frame-max, so split across body
  frames), several frames per TCP segment, segments of at most 16 KiB (loopback-like;
  ``--mss 1448``: what a real network's Ethernet segments carry, frames cut across them).
* ``rabbit``: the real RabbitMQ capture ``bench/record_bulk.py`` records (~35 MB, ~155k
  packets, 13 connections of pika / py-amqp / kombu clients).
* ``bulk10``: the same traffic in AMQP 1.0 (``bench/bulk_1_0.py``): SASL, a sender link whose
  transfers the broker settles by ranges, a receiver link (a TCP send per delivery, as the 0-9-1
  consumer's); 200 kB messages split over transfers at max-frame-size 65536.  tshark prints
  the 1.0 fields of TSHARK_FIELDS_1_0 for it.
* ``small``: about ``--packets`` packets of small-packet traffic (``bench_stats.build_small``:
  each publish and each delivery of a 32-256 B body in a packet of its own, confirms and
  acks every 10 messages), the shape on which per-packet and per-frame costs dominate.

Each tool runs in a process of its own (best of ``--runs``; the two tools' runs alternate, and
the ratio of each pair of runs is printed too: this VM's speed drifts within minutes), timed
from start to exit,
its peak RSS taken from the kernel (``wait4``); each tool's time on an empty capture of the
same header (its start, and amqpcap's empty tables) is printed beside, and the ratio of what
is beyond it: the part that grows with the capture.  amqpcap is ``amqpcap dissect`` (all
default tables; ``--frames`` adds the frames table), a new dataset every run; tshark is
``tshark -n -r CAPTURE -Y amqp -T fields`` with the 14 fields of TSHARK_FIELDS.

``--big`` adds the memory-flatness case: bulk captures of 100 MB and 1 GB (built by the
script, ~1.1 GB of disk), amqpcap run once on each, peak RSS side by side.
``--profile`` runs amqpcap in this process under cProfile instead (top 25 by own time).
``--reference-writer`` runs amqpcap with writer.py's reference table buffer and no Parquet
thread (the writer before the compiled one), to measure what the compiled writer changes.
Unless ``--no-doc``, the table of the captures measured against tshark replaces this script's
block of docs/performance.md (bench/perfdoc.py).  It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

FRAME_MAX = 131072
MSS = 16344


# -- a tiny 0-9-1 encoder (self-contained so the bench does not depend on tests/) -----------


def shortstr(s: str) -> bytes:
    b = s.encode()
    return bytes([len(b)]) + b


def longstr(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def table(d: dict) -> bytes:
    out = b""
    for k, v in d.items():
        out += shortstr(k)
        if isinstance(v, bool):
            out += b"t" + bytes([v])
        elif isinstance(v, int):
            out += b"l" + struct.pack(">q", v)
        else:
            out += b"S" + longstr(str(v).encode())
    return struct.pack(">I", len(out)) + out


def frame(ftype: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"


def method(channel: int, cid: int, mid: int, args: bytes) -> bytes:
    return frame(1, channel, struct.pack(">HH", cid, mid) + args)


def content(channel: int, body: bytes, props: bytes, flags: int) -> bytes:
    out = frame(2, channel, struct.pack(">HHQH", 60, 0, len(body), flags) + props)
    for i in range(0, len(body), FRAME_MAX - 8):
        out += frame(3, channel, body[i : i + FRAME_MAX - 8])
    return out


def publish(ch, exchange, rk, body, n):
    props = (
        shortstr("application/json")
        + shortstr("utf-8")
        + table({"x-trace": f"t-{n}", "x-seq": n, "x-retry": False})
        + bytes([2])
        + bytes([5])
        + shortstr(f"corr-{n}")
        + shortstr("reply.q")
        + shortstr(f"msg-{n}")
        + struct.pack(">Q", 1_700_000_000 + n)
        + shortstr("bench")
    )
    flags = 0x8000 | 0x4000 | 0x2000 | 0x1000 | 0x0800 | 0x0400 | 0x0200 | 0x0080 | 0x0040 | 0x0008
    return method(ch, 60, 40, struct.pack(">H", 0) + shortstr(exchange) + shortstr(rk) + b"\x00") + content(
        ch, body, props, flags
    )


def deliver(ch, tag, exchange, rk, body, n):
    props = shortstr("application/json") + bytes([2]) + shortstr(f"msg-{n}")
    return method(
        ch, 60, 60, shortstr("ctag-1") + struct.pack(">Q", tag) + b"\x00" + shortstr(exchange) + shortstr(rk)
    ) + content(ch, body, props, 0x8000 | 0x1000 | 0x0080)


def handshake():
    c = [
        b"AMQP\x00\x00\x09\x01",
        method(
            0,
            10,
            11,
            table({"product": "bench", "connection_name": "bench"})
            + shortstr("PLAIN")
            + longstr(b"\0guest\0guest")
            + shortstr("en_US"),
        ),
        method(0, 10, 31, struct.pack(">HIH", 2047, FRAME_MAX, 60)),
        method(0, 10, 40, shortstr("/") + shortstr("") + b"\x00"),
        method(1, 20, 10, shortstr("")),
    ]
    s = [
        method(
            0,
            10,
            10,
            b"\x00\x09"
            + table({"product": "RabbitMQ", "version": "3.x"})
            + longstr(b"PLAIN AMQPLAIN")
            + longstr(b"en_US"),
        ),
        method(0, 10, 30, struct.pack(">HIH", 2047, FRAME_MAX, 60)),
        method(0, 10, 41, shortstr("")),
        method(1, 20, 11, longstr(b"")),
    ]
    return c, s


# -- TCP/IP/Ethernet packets, written straight into a pcap ------------------------------------


def checksum_free_packet(src_port, dst_port, seq, ack, flags, payload, src_ip, dst_ip):
    tcp = struct.pack(
        ">HHIIBBHHH", src_port, dst_port, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0
    )
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src_ip, dst_ip)
    eth = b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00"
    return eth + ip + tcp + payload


class PcapOut:
    def __init__(self, path):
        self.f = open(path, "wb")
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        self.t = 1_700_000_000.0

    def packet(self, data):
        self.t += 0.00002
        sec = int(self.t)
        self.f.write(struct.pack("<IIII", sec, int((self.t - sec) * 1e6), len(data), len(data)))
        self.f.write(data)

    def close(self):
        self.f.close()


class Conn:
    def __init__(self, out, cport, ip_c=b"\x7f\x00\x00\x01", ip_s=b"\x7f\x00\x00\x01"):
        self.out, self.cport = out, cport
        self.ip_c, self.ip_s = ip_c, ip_s
        self.seq = [random.randrange(1 << 32), random.randrange(1 << 32)]
        o = self.out
        o.packet(checksum_free_packet(cport, 5672, self.seq[0], 0, 0x02, b"", ip_c, ip_s))
        o.packet(checksum_free_packet(5672, cport, self.seq[1], self.seq[0] + 1, 0x12, b"", ip_s, ip_c))
        self.seq[0] += 1
        self.seq[1] += 1
        o.packet(checksum_free_packet(cport, 5672, self.seq[0], self.seq[1], 0x10, b"", ip_c, ip_s))

    def send(self, d, data):
        for i in range(0, len(data), MSS):
            chunk = data[i : i + MSS]
            if d == 0:
                self.out.packet(
                    checksum_free_packet(
                        self.cport, 5672, self.seq[0], self.seq[1], 0x18, chunk, self.ip_c, self.ip_s
                    )
                )
            else:
                self.out.packet(
                    checksum_free_packet(
                        5672, self.cport, self.seq[1], self.seq[0], 0x18, chunk, self.ip_s, self.ip_c
                    )
                )
            self.seq[d] += len(chunk)


def batches(count: int = 400):
    """The bulk traffic's messages, batch by batch (every version's bulk capture): lists of 1 to
    8 (routing key, body), bodies of 64 B to 2 KiB, some of 8-64 KiB, a few of 200 kB."""
    for _batch in range(count):
        msgs = []
        for _ in range(random.randint(1, 8)):
            r = random.random()
            size = (
                random.choice([64, 128, 256, 512, 1024, 2048])
                if r < 0.95
                else random.choice([8192, 16384, 65536])
                if r < 0.995
                else 200000
            )
            msgs.append((f"orders.{random.randint(0, 9)}", os.urandom(64) * (size // 64)))
        yield msgs


def build_bulk(path: str, target_mb: float, seed: int, port: int, conversation) -> None:
    """A capture of ``target_mb`` MB: pairs of connections (a publisher, a consumer, from client
    port ``port`` on), each pair's traffic written by ``conversation(pub, con, n)``, which
    returns the number of the next message (``n``: its first)."""
    random.seed(seed)
    out = PcapOut(path)
    n = 0
    while os.path.getsize(path) < target_mb * 1e6 if os.path.exists(path) else True:
        pub, con = Conn(out, port), Conn(out, port + 1)
        port += 2
        n = conversation(pub, con, n)
        out.f.flush()
    out.close()


def open_pair(pub, con) -> None:
    """Both connections opened (channel 1 each), ``pub`` in confirm mode, ``con`` with a prefetch
    count of 50: how every bench's 0-9-1 publisher and consumer begin."""
    for conn in (pub, con):
        c, s = handshake()
        for a, b in zip(c, s + [b""]):
            conn.send(0, a)
            if b:
                conn.send(1, b)
    pub.send(0, method(1, 85, 10, b"\x00"))
    pub.send(1, method(1, 85, 11, b""))
    con.send(0, method(1, 60, 10, struct.pack(">IHB", 0, 50, 0)))
    con.send(1, method(1, 60, 11, b""))


def close_pair(pub, con) -> None:
    """Both connections closed by the client (200 bye), the server's close-ok each."""
    for conn in (pub, con):
        conn.send(0, method(0, 10, 50, struct.pack(">H", 200) + shortstr("bye") + struct.pack(">HH", 0, 0)))
        conn.send(1, method(0, 10, 51, b""))


def conversation_0_9_1(pub, con, n: int) -> int:
    """A publisher with confirms and a consumer with acks, over ``batches()``."""
    open_pair(pub, con)
    tag = 0
    for msgs in batches():
        pub.send(0, b"".join(publish(1, "amq.topic", rk, body, n + i) for i, (rk, body) in enumerate(msgs)))
        pub.send(1, method(1, 60, 80, struct.pack(">QB", n + len(msgs), 1)))
        for i, (rk, body) in enumerate(msgs):
            tag += 1
            con.send(1, deliver(1, tag, "amq.topic", rk, body, n + i))
        con.send(0, method(1, 60, 80, struct.pack(">QB", tag, 1)))
        n += len(msgs)
    close_pair(pub, con)
    return n


def build(path: str, target_mb: float, seed: int = 7) -> None:
    build_bulk(path, target_mb, seed, 40000, conversation_0_9_1)


TSHARK_FIELDS = [
    "frame.number",
    "tcp.stream",
    "amqp.type",
    "amqp.channel",
    "amqp.method.class",
    "amqp.method.method",
    "amqp.method.arguments.exchange",
    "amqp.method.arguments.routing_key",
    "amqp.method.arguments.queue",
    "amqp.method.arguments.delivery_tag",
    "amqp.method.arguments.reply_code",
    "amqp.header.body-size",
    "amqp.header.class",
    "amqp.method.arguments.consumer_tag",
]


TSHARK_FIELDS_1_0 = [
    "frame.number",
    "tcp.stream",
    "amqp.type",
    "amqp.channel",
    "amqp.performative",
    "amqp.performative.arguments.handle",
    "amqp.performative.arguments.deliveryId",
    "amqp.performative.arguments.more",
    "amqp.performative.arguments.settled",
    "amqp.performative.arguments.first",
    "amqp.performative.arguments.last",
    "amqp.performative.arguments.linkCredit",
    "amqp.performative.arguments.name",
    "amqp.error.condition",
]


# The children run as after an install: with Python's bytecode cache.  An environment that sets
# PYTHONDONTWRITEBYTECODE (this project's CI machines do) would otherwise have every run compile
# amqpcap's modules from source (~50 ms), which no installed amqpcap does.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_measured(cmd: list[str]) -> tuple[float, float, int, int, bytes]:
    """Run ``cmd``: (wall seconds, CPU seconds, peak RSS in bytes, exit status, stdout).  The CPU
    seconds (user and system, every thread) move less than the wall time on a loaded machine."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=CHILD_ENV)
        _, status, ru = os.wait4(p.pid, 0)
        el = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return el, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, p.returncode, out.read()


# The child that runs amqpcap: dissect() as the CLI calls it, in a process set up and ended as
# the amqpcap command sets up (no numpy) and ends (cli.leave) its own, its summary back as JSON.
_CHILD = """
import json, os, sys
if sys.argv[4] == "1":
    os.environ["AMQPCAP_PURE"] = "fastwriter"  # the reference table buffer, chosen at import
from amqpcap import cli
cli.lean("dissect")
from amqpcap.pipeline import dissect
from amqpcap.records import writer
if sys.argv[4] == "1":
    writer.BACKGROUND = False
s = dissect([sys.argv[1]], sys.argv[2], frames=sys.argv[3] == "1", force=True)
print(json.dumps({"packets": s.packets, "frames": s.frames, "rows": s.rows}))
cli.leave(0)
"""


class Runs:
    """Each tool's runs on one capture, alternating (amqpcap, tshark, amqpcap, ...): this shared
    VM's speed drifts by up to a fifth within minutes, and all of one tool's runs before the
    other's would compare the minutes as much as the tools.  Best of the runs for each, and the
    ratio of each pair of runs (tshark's time over amqpcap's, the pair run back to back)."""

    def __init__(self, cap: str, runs: int, frames: bool, reference_writer: bool, tshark: bool) -> None:
        self.amqpcap: list[float] = []
        self.tshark: list[float] = []
        self.amqpcap_cpu: list[float] = []
        self.tshark_cpu: list[float] = []
        self.rss = self.tshark_rss = self.lines = 0
        self.summary: dict = {}
        tmp = tempfile.mkdtemp(prefix="bench-dissect-")
        try:
            for run in range(runs):
                # a new dataset every run, the last one removed between runs: replacing an old
                # one (--force: ~3 ms of removal) is not part of dissecting, and tshark writes nothing
                shutil.rmtree(os.path.join(tmp, f"out{run - 1}"), ignore_errors=True)
                out = os.path.join(tmp, f"out{run}")
                el, cpu, r, self.summary = amqpcap_once(cap, out, frames, reference_writer)
                self.amqpcap.append(el)
                self.amqpcap_cpu.append(cpu)
                self.rss = max(self.rss, r)
                if tshark:
                    el, cpu, r, self.lines = tshark_once(cap)
                    self.tshark.append(el)
                    self.tshark_cpu.append(cpu)
                    self.tshark_rss = max(self.tshark_rss, r)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def ratios(self) -> list[float]:
        """tshark's time over amqpcap's, run by run (sorted)."""
        return sorted(t / a for a, t in zip(self.amqpcap, self.tshark))


def amqpcap_command(cap: str, out: str, frames: bool = False, reference_writer: bool = False) -> list[str]:
    """The command of one amqpcap run dissecting ``cap`` into ``out`` (``_CHILD``)."""
    return [sys.executable, "-c", _CHILD, cap, out, "1" if frames else "0", "1" if reference_writer else "0"]


def amqpcap_once(
    cap: str, out: str, frames: bool, reference_writer: bool = False
) -> tuple[float, float, int, dict]:
    """One amqpcap run writing ``out``: (seconds, CPU seconds, peak RSS bytes, its summary)."""
    el, cpu, r, code, text = run_measured(amqpcap_command(cap, out, frames, reference_writer))
    if code:
        raise SystemExit(f"amqpcap failed (exit {code}) on {cap}")
    return el, cpu, r, json.loads(text)


def bench_amqpcap(cap: str, runs: int, frames: bool, reference_writer: bool = False) -> tuple:
    """amqpcap alone: (best seconds, peak RSS bytes, summary)."""
    r = Runs(cap, runs, frames, reference_writer, tshark=False)
    return min(r.amqpcap), r.rss, r.summary


def tshark_once(cap: str) -> tuple[float, float, int, int]:
    """One tshark run: (seconds, CPU seconds, peak RSS bytes, lines printed: packets with AMQP)."""
    fields = TSHARK_FIELDS_1_0 if os.path.basename(cap).startswith("bulk10_") else TSHARK_FIELDS
    cmd = ["tshark", "-n", "-r", cap, "-Y", "amqp", "-T", "fields"] + sum((["-e", f] for f in fields), [])
    el, cpu, r, _code, out = run_measured(cmd)
    return el, cpu, r, out.count(b"\n")


def cached(name: str, make) -> str:
    os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
    cap = os.path.join(HERE, "data", name)
    if not os.path.exists(cap):
        print(f"building {cap} ...", flush=True)
        make(cap + ".tmp")
        os.replace(cap + ".tmp", cap)
    return cap


def bulk_capture(mb: float, mss: int = MSS) -> str:
    if mss == MSS:
        return cached(f"bench_{mb:g}mb.pcap", lambda p: build(p, mb))

    def make(path: str) -> None:
        global MSS
        default, MSS = MSS, mss  # Conn.send cuts at the module's MSS
        try:
            build(path, mb)
        finally:
            MSS = default

    return cached(f"bench_{mb:g}mb_mss{mss}.pcap", make)


def bulk10_capture(mb: float) -> str:
    from bulk_1_0 import conversation

    return cached(f"bulk10_{mb:g}mb_deliveries.pcap", lambda p: build_bulk(p, mb, 11, 50000, conversation))


def small_capture(packets: int) -> str:
    from bench_stats import build_small  # (bench_stats imports this module: imported when needed)

    return cached(f"small_{packets}.pcap", lambda p: build_small(p, packets))


def recorded_capture() -> str:
    """The real RabbitMQ capture of bench/record_bulk.py (recorded once: it needs root, tcpdump
    and a local broker, so it is recorded by that script, not built here)."""
    cap = os.path.join(HERE, "data", "rabbit_bulk_35mb.pcap")
    if not os.path.exists(cap):
        raise SystemExit(f"{cap} is missing: record it with `python bench/record_bulk.py` (as root)")
    return cap


def profile(cap: str, frames: bool) -> None:
    import cProfile
    import pstats

    from amqpcap.pipeline import dissect

    tmp = tempfile.mkdtemp(prefix="bench-dissect-")
    try:
        prof = cProfile.Profile()
        prof.enable()
        dissect([cap], os.path.join(tmp, "out"), frames=frames, force=True)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(label: str, cap: str, a) -> str | None:
    """Print one capture's figures; return its row of the performance.md table (None without tshark)."""
    size = os.path.getsize(cap)
    tshark = not a.no_tshark and shutil.which("tshark") is not None
    r = Runs(cap, a.runs, a.frames, a.reference_writer, tshark)
    el, s, cpu = min(r.amqpcap), r.summary, min(r.amqpcap_cpu)
    print(f"[{label}] {cap} ({size / 1e6:.1f} MB, {s['packets']:,} packets, {s['frames']:,} AMQP frames)")
    print(
        f"  amqpcap: {el:7.2f} s  {size / 1e6 / el:7.1f} MB/s  {s['packets'] / el:9,.0f} packets/s  "
        f"peak RSS {r.rss / 1e6:6.0f} MB  CPU {cpu:.2f} s  rows {s['rows']}",
        flush=True,
    )
    if not tshark:
        print("  tshark:  not run")
        return None
    tel, tcpu = min(r.tshark), min(r.tshark_cpu)
    print(
        f"  tshark:  {tel:7.2f} s  {size / 1e6 / tel:7.1f} MB/s  {s['packets'] / tel:9,.0f} packets/s  "
        f"peak RSS {r.tshark_rss / 1e6:6.0f} MB  CPU {tcpu:.2f} s  ({r.lines:,} packets with AMQP)"
    )
    pairs = r.ratios()
    print(
        f"  ratio:   amqpcap is {tel / el:.2f}x tshark's speed (best against best); run by run "
        f"{pairs[0]:.2f}-{pairs[-1]:.2f}x, median {pairs[len(pairs) // 2]:.2f}x; "
        f"CPU seconds {tcpu / cpu:.2f}x",
        flush=True,
    )
    e_el, e_tel, e_cpu, e_tcpu = fixed_costs(cap, a.runs)
    print(
        f"  fixed:   an empty capture takes amqpcap {e_el:.2f} s ({e_cpu:.2f} s CPU), tshark {e_tel:.2f} s "
        f"({e_tcpu:.2f} s CPU); beyond it, {el - e_el:.2f} s against {tel - e_tel:.2f} s "
        f"({(tel - e_tel) / max(el - e_el, 1e-9):.2f}x), CPU {cpu - e_cpu:.2f} s against "
        f"{tcpu - e_tcpu:.2f} s ({(tcpu - e_tcpu) / max(cpu - e_cpu, 1e-9):.2f}x)",
        flush=True,
    )
    return (
        f"| {label}: {os.path.basename(cap)}, {size / 1e6:.0f} MB, {s['packets']:,} packets "
        f"| {el:.2f} s ({cpu:.2f} s CPU), {r.rss / 1e6:.0f} MB "
        f"| {tel:.2f} s ({tcpu:.2f} s CPU), {r.tshark_rss / 1e6:.0f} MB "
        f"| **{tel / el:.1f}x** (median pair {pairs[len(pairs) // 2]:.1f}x; CPU {tcpu / cpu:.1f}x) |"
    )


def write_doc(rows: list, big: list, a) -> None:
    """Rewrite this script's block of docs/performance.md with the rows just measured."""
    import perfdoc

    from amqpcap.compiled import describe

    lines = [
        "## Dissect against tshark",
        "",
        "`amqpcap dissect` (default tables) against `tshark -n -r CAPTURE -Y amqp -T fields` with",
        f"{len(TSHARK_FIELDS)} AMQP fields ({len(TSHARK_FIELDS_1_0)} AMQP 1.0 fields on bulk10), each tool",
        "in a process of its own, wall time from start to exit, CPU seconds (user and system, all",
        f"threads) and peak RSS; best of {a.runs} runs, the two tools' runs alternating (the ratio's",
        "median is over the pairs of runs made back to back).",
        "",
        "Command: `python bench/bench_dissect.py " + " ".join(sys.argv[1:]) + "`",
        "",
        "Machine: " + perfdoc.machine() + ".",
        "",
        *perfdoc.versions(describe()),
        "",
        "| capture | amqpcap | tshark | amqpcap vs tshark |",
        "| --- | --- | --- | --- |",
        *rows,
    ]
    if big:
        lines += ["", "Peak RSS on large bulk captures (amqpcap alone, one run):", "", *big]
    perfdoc.write_block("bench_dissect", "\n".join(lines))


_FIXED: dict[bytes, tuple[float, float, float, float]] = {}


def fixed_costs(cap: str, runs: int) -> tuple[float, float, float, float]:
    """What each tool takes on a capture of ``cap``'s file header and no packet (the start, and
    for amqpcap its empty tables): the part of a run that does not grow with the capture, as
    (amqpcap s, tshark s, amqpcap CPU s, tshark CPU s).  A
    classic pcap's own header; an Ethernet pcap header for any other format."""
    with open(cap, "rb") as f:
        head = f.read(24)
    if head[:4] not in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d"):
        head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    if head not in _FIXED:
        tmp = tempfile.mkdtemp(prefix="bench-dissect-")
        try:
            empty = os.path.join(tmp, "empty.pcap")
            with open(empty, "wb") as f:
                f.write(head)
            r = Runs(empty, runs, False, False, tshark=True)
            _FIXED[head] = (min(r.amqpcap), min(r.tshark), min(r.amqpcap_cpu), min(r.tshark_cpu))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return _FIXED[head]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument(
        "--shape",
        default="bulk,small",
        help="comma-separated: bulk, bulk10 (AMQP 1.0), small, rabbit (the real RabbitMQ capture of "
        "bench/record_bulk.py)",
    )
    ap.add_argument("--mb", type=float, default=32, help="size of the bulk capture (MB)")
    ap.add_argument("--mss", type=int, default=MSS, help="largest TCP segment of the bulk capture")
    ap.add_argument("--packets", type=int, default=1_000_000, help="packets of the small-packet capture")
    ap.add_argument("--big", action="store_true", help="also peak RSS on 100 MB and 1 GB bulk captures")
    ap.add_argument("--capture", help="bench this capture instead of the built ones")
    ap.add_argument("--profile", action="store_true", help="cProfile amqpcap's run, top 25 functions")
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md's block")
    ap.add_argument("--frames", action="store_true", help="also write the frames table")
    ap.add_argument("--runs", type=int, default=2, help="best of N runs for each tool")
    ap.add_argument(
        "--reference-writer",
        action="store_true",
        help="amqpcap with the reference table buffer and no Parquet thread (records/writer.py)",
    )
    a = ap.parse_args()
    if a.capture:
        caps = [("capture", a.capture)]
    else:
        shapes = a.shape.split(",")
        caps = ([("bulk", bulk_capture(a.mb, a.mss))] if "bulk" in shapes else []) + (
            [("small", small_capture(a.packets))] if "small" in shapes else []
        )
        if "bulk10" in shapes:
            caps.append(("bulk10", bulk10_capture(a.mb)))
        if "rabbit" in shapes:
            caps.append(("rabbit", recorded_capture()))
    rows, big = [], []
    for label, cap in caps:
        if a.profile:
            print(f"[{label}] {cap}")
            profile(cap, a.frames)
        else:
            rows.append(report(label, cap, a))
    if a.big:
        for mb in (100, 1000):
            cap = bulk_capture(mb)
            el, rss, s = bench_amqpcap(cap, 1, a.frames, a.reference_writer)
            print(
                f"[bulk {mb} MB] amqpcap: {el:7.2f} s  {os.path.getsize(cap) / 1e6 / el:7.1f} MB/s  "
                f"peak RSS {rss / 1e6:6.0f} MB",
                flush=True,
            )
            big.append(f"- {mb} MB: {el:.2f} s, peak RSS {rss / 1e6:.0f} MB")
    rows = [r for r in rows if r]
    if rows and not a.no_doc:
        write_doc(rows, big, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
