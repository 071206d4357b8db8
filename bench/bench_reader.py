"""Throughput of stage 1: open_capture (+ parse_packet), in packets/s.

    python bench/bench_reader.py                      # builds a 1M-packet pcap in /tmp
    python bench/bench_reader.py --format pcapng --packets 500000
    python bench/bench_reader.py --format pcap.gz
    python bench/bench_reader.py some.pcapng          # measure an existing file
    python bench/bench_reader.py --scapy              # also time scapy's raw readers

The synthetic capture mixes AMQP-like traffic: pure ACKs, small method frames
and full-size body segments, IPv4 and IPv6, over Ethernet (pcap) or Ethernet +
Linux SLL interfaces (pcapng).
"""

from __future__ import annotations

import argparse
import gzip
import os
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from amqpcap.capture.link import Packet, parse_packet  # noqa: E402
from amqpcap.capture.reader import open_capture  # noqa: E402


def templates():
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import CookedLinux, Ether
    from scapy.packet import Raw

    out = []
    for size in (0, 0, 21, 60, 300, 1448, 1448, 1448):
        for ip in (IP(src="10.0.0.1", dst="10.0.0.2"), IPv6(src="2001:db8::1", dst="2001:db8::2")):
            seg = ip / TCP(
                sport=40000,
                dport=5672,
                flags="PA" if size else "A",
                seq=1,
                ack=1,
                options=[("NOP", None), ("NOP", None), ("Timestamp", (1, 2))],
            )
            if size:
                seg = seg / Raw(b"\xce" * size)
            out.append((1, bytes(Ether() / seg)))
            out.append((113, bytes(CookedLinux(proto=0x0800 if ip.version == 4 else 0x86DD) / seg)))
    return out


def build(path: str, fmt: str, n: int) -> None:
    tpl = templates()
    t0 = 1_700_000_000_000_000_000
    with open(path, "wb") as raw:
        f = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) if fmt.endswith(".gz") else raw
        if fmt.startswith("pcapng"):
            shb = struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1) + struct.pack("<I", 28)
            idbs = b""
            for lt in (1, 113):
                opt = struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0)
                body = struct.pack("<HHI", lt, 0, 0) + opt
                idbs += struct.pack("<II", 1, len(body) + 12) + body + struct.pack("<I", len(body) + 12)
            f.write(shb + idbs)
            recs = []
            for lt, data in tpl:
                iface = 0 if lt == 1 else 1
                pad = b"\0" * (-len(data) % 4)
                blen = 32 + len(data) + len(pad)
                recs.append((iface, data, pad, blen))
            buf = []
            for i in range(n):
                iface, data, pad, blen = recs[i % len(recs)]
                ts = t0 + i * 1000
                buf.append(
                    struct.pack("<7I", 6, blen, iface, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
                    + data
                    + pad
                    + struct.pack("<I", blen)
                )
                if len(buf) >= 10000:
                    f.write(b"".join(buf))
                    buf = []
            f.write(b"".join(buf))
        else:
            eth = [d for lt, d in tpl if lt == 1]
            f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
            buf = []
            for i in range(n):
                data = eth[i % len(eth)]
                ts = t0 + i * 1000
                buf.append(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), len(data)) + data)
                if len(buf) >= 10000:
                    f.write(b"".join(buf))
                    buf = []
            f.write(b"".join(buf))
        if f is not raw:
            f.close()


def bench_read(path: str) -> tuple[int, float]:
    t = time.perf_counter()
    n = 0
    for n, _ts, _lt, _d, _w in open_capture(path):  # noqa: B007 (the last number is the count)
        pass
    return n, time.perf_counter() - t


def bench_parse(path: str) -> tuple[int, float, int]:
    t = time.perf_counter()
    n = 0
    nbytes = 0
    pp = parse_packet
    for n, _ts, lt, data, _w in open_capture(path):  # noqa: B007 (the last number is the count)
        r = pp(lt, data)
        if r.__class__ is Packet:
            nbytes += len(r.payload)
    return n, time.perf_counter() - t, nbytes


def bench_scapy(path: str) -> tuple[int, float]:
    import logging

    from scapy.utils import RawPcapNgReader, RawPcapReader  # noqa: F401

    logging.getLogger("scapy").setLevel(logging.ERROR)
    from scapy.utils import RawPcapReader as R

    t = time.perf_counter()
    n = 0
    with R(path) as rd:  # the metaclass picks the pcap or pcapng reader
        for _pkt in rd:
            n += 1
    return n, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", nargs="?")
    ap.add_argument("--format", default="pcap", choices=["pcap", "pcapng", "pcap.gz", "pcapng.gz"])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scapy", action="store_true", help="also time scapy's raw readers")
    args = ap.parse_args()
    path = args.path
    if path is None:
        path = f"/tmp/amqpcap-bench-{args.packets}.{args.format}"
        if not os.path.exists(path):
            t = time.perf_counter()
            build(path, args.format, args.packets)
            print(f"built {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.perf_counter() - t:.1f}s")
    best_r = best_p = None
    for _ in range(args.repeat):
        n, dt = bench_read(path)
        best_r = dt if best_r is None else min(best_r, dt)
        n, dt, nbytes = bench_parse(path)
        best_p = dt if best_p is None else min(best_p, dt)
    size = os.path.getsize(path)
    print(f"{path}: {n} packets, {size / 1e6:.0f} MB on disk")
    print(
        f"  open_capture               : {n / best_r / 1e6:6.2f} M packets/s ({size / best_r / 1e6:.0f} MB/s)"
    )
    print(
        f"  open_capture + parse_packet: {n / best_p / 1e6:6.2f} M packets/s "
        f"({nbytes / 1e6:.0f} MB of TCP payload)"
    )
    if args.scapy:
        n2, dt = bench_scapy(path)
        print(f"  scapy RawPcap(Ng)Reader    : {n2 / dt / 1e6:6.2f} M packets/s")


if __name__ == "__main__":
    main()
