#!/usr/bin/env python3
"""End-to-end throughput: amqpcap dissect vs tshark on the same 0-9-1 capture.

    python bench/bench_dissect.py [--mb 32] [--capture FILE] [--profile]

Builds (once, cached in bench/data/) a capture of realistic AMQP 0-9-1
traffic: several connections, each a publisher with confirms and a consumer
with acks; publishes carry basic properties and a headers table, bodies of
100 B to 16 KiB (some over frame-max, so split across body frames), several
frames per TCP segment, segments of at most 16 KiB (loopback-like).
Then times `amqpcap dissect` (all default tables written; `--frames` adds the
frames table) and
`tshark -r CAPTURE -Y amqp -T fields` with a dozen AMQP fields, and prints
both throughputs and their ratio.
"""
from __future__ import annotations

import argparse
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
        out += frame(3, channel, body[i:i + FRAME_MAX - 8])
    return out


def publish(ch, exchange, rk, body, n):
    props = (shortstr("application/json") + shortstr("utf-8")
             + table({"x-trace": f"t-{n}", "x-seq": n, "x-retry": False})
             + bytes([2]) + bytes([5]) + shortstr(f"corr-{n}") + shortstr("reply.q")
             + shortstr(f"msg-{n}") + struct.pack(">Q", 1_700_000_000 + n) + shortstr("bench"))
    flags = 0x8000 | 0x4000 | 0x2000 | 0x1000 | 0x0800 | 0x0400 | 0x0200 | 0x0080 | 0x0040 | 0x0008
    return method(ch, 60, 40, struct.pack(">H", 0) + shortstr(exchange) + shortstr(rk) + b"\x00") + \
        content(ch, body, props, flags)


def deliver(ch, tag, exchange, rk, body, n):
    props = shortstr("application/json") + bytes([2]) + shortstr(f"msg-{n}")
    return method(ch, 60, 60, shortstr("ctag-1") + struct.pack(">Q", tag) + b"\x00" + shortstr(exchange)
                  + shortstr(rk)) + content(ch, body, props, 0x8000 | 0x1000 | 0x0080)


def handshake():
    c = [b"AMQP\x00\x00\x09\x01",
         method(0, 10, 11, table({"product": "bench", "connection_name": "bench"}) + shortstr("PLAIN")
                + longstr(b"\0guest\0guest") + shortstr("en_US")),
         method(0, 10, 31, struct.pack(">HIH", 2047, FRAME_MAX, 60)),
         method(0, 10, 40, shortstr("/") + shortstr("") + b"\x00"),
         method(1, 20, 10, shortstr(""))]
    s = [method(0, 10, 10, b"\x00\x09" + table({"product": "RabbitMQ", "version": "3.x"})
                + longstr(b"PLAIN AMQPLAIN") + longstr(b"en_US")),
         method(0, 10, 30, struct.pack(">HIH", 2047, FRAME_MAX, 60)),
         method(0, 10, 41, shortstr("")),
         method(1, 20, 11, longstr(b""))]
    return c, s


# -- TCP/IP/Ethernet packets, written straight into a pcap ------------------------------------

def checksum_free_packet(src_port, dst_port, seq, ack, flags, payload, src_ip, dst_ip):
    tcp = struct.pack(">HHIIBBHHH", src_port, dst_port, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags,
                      65535, 0, 0)
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
            chunk = data[i:i + MSS]
            if d == 0:
                self.out.packet(checksum_free_packet(self.cport, 5672, self.seq[0], self.seq[1], 0x18, chunk,
                                                     self.ip_c, self.ip_s))
            else:
                self.out.packet(checksum_free_packet(5672, self.cport, self.seq[1], self.seq[0], 0x18, chunk,
                                                     self.ip_s, self.ip_c))
            self.seq[d] += len(chunk)


def build(path: str, target_mb: float, seed: int = 7) -> None:
    random.seed(seed)
    out = PcapOut(path)
    n = 0
    port = 40000
    while os.path.getsize(path) < target_mb * 1e6 if os.path.exists(path) else True:
        pub, con = Conn(out, port), Conn(out, port + 1)
        port += 2
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
        tag = 0
        for batch in range(400):
            msgs = []
            for _ in range(random.randint(1, 8)):
                r = random.random()
                size = random.choice([64, 128, 256, 512, 1024, 2048]) if r < 0.95 else \
                    random.choice([8192, 16384, 65536]) if r < 0.995 else 200000
                msgs.append((f"orders.{random.randint(0, 9)}", os.urandom(64) * (size // 64)))
            pub.send(0, b"".join(publish(1, "amq.topic", rk, body, n + i) for i, (rk, body) in enumerate(msgs)))
            pub.send(1, method(1, 60, 80, struct.pack(">QB", n + len(msgs), 1)))
            for i, (rk, body) in enumerate(msgs):
                tag += 1
                con.send(1, deliver(1, tag, "amq.topic", rk, body, n + i))
            con.send(0, method(1, 60, 80, struct.pack(">QB", tag, 1)))
            n += len(msgs)
            out.f.flush()
        for conn in (pub, con):
            conn.send(0, method(0, 10, 50, struct.pack(">H", 200) + shortstr("bye") + struct.pack(">HH", 0, 0)))
            conn.send(1, method(0, 10, 51, b""))
        out.f.flush()
    out.close()


TSHARK_FIELDS = ["frame.number", "tcp.stream", "amqp.type", "amqp.channel", "amqp.method.class",
                 "amqp.method.method", "amqp.method.arguments.exchange", "amqp.method.arguments.routing_key",
                 "amqp.method.arguments.queue", "amqp.method.arguments.delivery_tag",
                 "amqp.method.arguments.reply_code", "amqp.header.body-size"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=32)
    ap.add_argument("--capture")
    ap.add_argument("--profile", action="store_true", help="cProfile amqpcap's run, top 25 functions")
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--frames", action="store_true", help="also write the frames table")
    ap.add_argument("--runs", type=int, default=2, help="best of N runs for each tool")
    a = ap.parse_args()
    cap = a.capture
    if not cap:
        os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
        cap = os.path.join(HERE, "data", f"bench_{a.mb:g}mb.pcap")
        if not os.path.exists(cap):
            print(f"building {cap} ...", flush=True)
            build(cap + ".tmp", a.mb)
            os.rename(cap + ".tmp", cap)
    size = os.path.getsize(cap)
    from amqpcap.pipeline import dissect

    tmp = tempfile.mkdtemp()
    el = float("inf")
    try:
        for _ in range(a.runs):
            t0 = time.perf_counter()
            if a.profile:
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.enable()
            s = dissect([cap], os.path.join(tmp, "out"), frames=a.frames, force=True)
            el = min(el, time.perf_counter() - t0)
            if a.profile:
                prof.disable()
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
                break
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    frames = s.frames
    print(f"capture: {cap} ({size / 1e6:.1f} MB, {s.packets:,} packets, {frames:,} AMQP frames)")
    print(f"amqpcap: {el:.2f} s  {size / 1e6 / el:.1f} MB/s  {frames / el:,.0f} frames/s  rows {s.rows}")
    if a.no_tshark or not shutil.which("tshark"):
        print("tshark: not run")
        return 0
    cmd = ["tshark", "-n", "-r", cap, "-Y", "amqp", "-T", "fields"] + sum((["-e", f] for f in TSHARK_FIELDS), [])
    tel = float("inf")
    for _ in range(a.runs):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        tel = min(tel, time.perf_counter() - t0)
    lines = r.stdout.count(b"\n")
    print(f"tshark:  {tel:.2f} s  {size / 1e6 / tel:.1f} MB/s  ({lines:,} packets with AMQP)")
    print(f"ratio:   amqpcap is {tel / el:.2f}x tshark's speed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
