"""Hostile-input benchmark: many mutants of the shipped real captures plus synthetic worst
cases.  Prints mutants tried, methods recovered after hostile length fields vs the undamaged
capture, and peak traced memory (the 0-8 .. 0-10 and AMQP 1.0 captures); then crafted values
(64-bit sizes and tags, every 1.0 number at its extremes, timestamps past what a column holds)
through every entry point (dissect compiled and pure, show in each format, stats, report, the
API, the scapy layer, and one spark run over them all), counting runs that end in an internal
error and, for the packet times no column holds, rows whose time is not null; then a capture in which
every packet is a new connection sending only a protocol header, with the peak RSS and time of
dissect, show and stats on it.  With --write the table goes to docs/performance.md.

    python bench/bench_hostile.py                 # 500 mutants + synthetic cases
    python bench/bench_hostile.py --mutants 50 --no-million --connections 100000
"""

from __future__ import annotations

import argparse
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_hostile_numbers as HN  # noqa: E402
import test_mutations as T  # noqa: E402
from fixtures import amqp09 as A  # noqa: E402
from fixtures import hostile as H  # noqa: E402
from fixtures import mutate  # noqa: E402
from fixtures import pcapgen as P  # noqa: E402

CAPTURES_10 = ["rabbitmq10_proton_outcomes.pcap", "rabbitmq10_rhea_rpc.pcap"]  # AMQP 1.0 mutants too


def mutant(i, rng):
    kinds = ["flip", "drop", "dup", "reorder", "cut", "size", "table"]
    kind = kinds[i % len(kinds)]
    caps = T.FRAMED_09 if kind in ("size", "table") else T.CAPTURES + CAPTURES_10
    cap = caps[(i // len(kinds)) % len(caps)]
    pc, otabs, _ = T.original(cap)
    if kind == "size":
        name = rng.choice(list(T.SIZES))
        blob, dmg = mutate.hostile_frame_size(pc, rng, T._size_value(name, pc, otabs))
        kind = f"size:{name}"
    elif kind == "table":
        name = rng.choice(list(T.TABLE_LENS))
        blob, dmg = mutate.hostile_table_length(pc, rng, T.TABLE_LENS[name] or 1024)
        kind = f"table:{name}"
    else:
        blob, dmg = mutate.MUTATIONS[kind](pc, rng)
    return kind, cap, pc, otabs, blob, dmg


def synthetic(million: bool):
    cli = [A.protocol_header("0-9-1")]
    srv = [
        A.method_frame(
            0,
            "connection.start",
            version_major=0,
            version_minor=9,
            server_properties={"product": "x"},
            mechanisms=b"PLAIN",
            locales=b"en_US",
        )
    ]
    junk = bytes(range(256)) * 4096  # 1 MiB
    cases = {}
    # a frame claiming 4 GiB, followed by 4 MiB of bytes and then valid frames
    s = cli + [
        struct.pack(">BHI", 1, 0, 0xFFFFFFFF),
        junk * 4,
        A.method_frame(1, "basic.publish", exchange="e", routing_key="r"),
    ]
    cases["frame claiming 4 GiB"] = P.tcp_conversation(client_chunks=s, server_chunks=srv, mss=60000)
    # a field table claiming 2 GiB inside a start-ok
    payload = struct.pack(">HH", 10, 11) + struct.pack(">I", 2**31) + b"\x00" * 64
    s = cli + [A.frame(1, 0, payload), A.method_frame(1, "basic.publish", exchange="e", routing_key="r")]
    cases["field table claiming 2 GiB"] = P.tcp_conversation(client_chunks=s, server_chunks=srv)
    # no protocol header on 5672: the mid-stream framing scan runs over what is held
    # (256 KiB a direction) before the bytes go to the codec's resync
    rnd = random.Random(11)
    junk4 = rnd.randbytes(4 << 20)
    cases["4 MiB of junk, no header, on 5672"] = P.tcp_conversation(
        client_chunks=[junk4[i : i + 1448] for i in range(0, len(junk4), 1448)], acks=False
    )
    # the scan's worst case: a strictly valid 0-10 header every 12 bytes, none chaining on
    lure = struct.pack(">BBHBBHI", 0x0F, 0, 13, 0, 0, 0, 0)
    cases["0-10 header lures every 12 bytes, no header, on 5672"] = P.tcp_conversation(
        client_chunks=[lure * 120] * 2000, acks=False
    )
    # a 0-10 header claiming 64 KiB, then its bytes one per packet: every packet is held
    # (and marked with its packet number) while the candidate waits for its proof
    claim = struct.pack(">BBHBBHI", 0x0F, 1, 0xFFFF, 0, 1, 1, 0) + bytes(40000)
    cases["0-10 header claiming 64 KiB, one byte a packet, no header"] = P.tcp_conversation(
        client_chunks=[claim[i : i + 1] for i in range(len(claim))], server=("10.0.0.2", 5672), acks=False
    )
    if million:
        hb = A.heartbeat() * 8192  # 64 KiB of 8-byte frames
        s = cli + [hb] * 123  # ~1,007,616 heartbeat frames
        cases["1M tiny frames"] = P.tcp_conversation(
            client_chunks=s, server_chunks=srv, mss=65000, acks=False
        )
    out = {}
    for name, segs in cases.items():
        blob = P.pcap_bytes(P.to_packets(segs, 1))
        t = time.time()
        tabs, peak = T.run(blob, "syn")
        an = tabs["anomalies"]
        out[name] = (peak, time.time() - t, len(blob), len(tabs["methods"]), sorted(set(an.kind)))
    return out


def many_connections(n: int, path: str, step_ns: int = 100_000) -> None:
    """A pcap of ``n`` packets, each a new TCP connection to 5672 sending only a 0-9-1 protocol
    header (written with struct: a million in a few seconds)."""
    payload = b"AMQP\x00\x00\x09\x01"
    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
    dst, total, start = bytes([10, 255, 255, 254]), 20 + 20 + len(payload), P.START_NS
    rec, ip, tcp = struct.Struct("<IIII"), struct.Struct("!BBHHHBBH4s4s"), struct.Struct("!HHIIBBHHH")
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        out = []
        for i in range(n):
            ts = start + i * step_ns
            src = struct.pack("!I", (10 << 24) | ((i >> 14) + 1))
            frame = (
                eth
                + ip.pack(0x45, 0, total, i & 0xFFFF, 0, 64, 6, 0, src, dst)
                + tcp.pack(1024 + (i & 0x3FFF), 5672, 1000, 0, 5 << 4, 0x18, 65535, 0, 0)
                + payload
            )
            out.append(rec.pack(ts // 10**9, ts % 10**9 // 1000, len(frame), len(frame)) + frame)
            if len(out) == 65536:
                f.write(b"".join(out))
                out = []
        f.write(b"".join(out))


def measured(args, env=None):
    """(exit code, peak RSS MB, seconds, stderr) of an amqpcap command run as a child."""
    e = dict(os.environ, **(env or {}))
    t = time.monotonic()
    p = subprocess.Popen(
        H.AMQPCAP + [str(a) for a in args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=e
    )
    err = p.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(p.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024, time.monotonic() - t, err


def connections_case(n: int, d: str) -> list:
    path = os.path.join(d, f"conn{n}.pcap")
    many_connections(n, path)
    rows = []
    for cmd, args, env in (
        ("dissect", ["dissect", path, "-o", os.path.join(d, f"o{n}"), "--force"], None),
        ("show", ["show", path], None),
        ("stats", ["stats", path], {"XDG_CACHE_HOME": os.path.join(d, "cache")}),
    ):
        code, rss, secs, err = measured(args, env)
        rows.append((f"{n:,} connections, header only", cmd, code, rss, secs, "internal error" in err))
    return rows


def crafted_captures() -> dict:
    """name -> capture bytes: the values no column holds, and packet times no timestamp holds."""
    cli, srv = H.conversation_09()
    pk = P.to_packets(P.tcp_conversation(client_chunks=cli, server_chunks=srv), 1)
    out = {}
    for v in ("0-8", "0-9", "0-9-1"):
        out[f"{v} body size 2^64-1"] = H.capture(*H.conversation_09(v, body_size=H.U64))
    out["0-9-1 timestamp property 2^64-1"] = H.capture(*H.conversation_09(timestamp=H.U64))
    acks = (("c2s", "basic.ack", {"delivery_tag": H.U64}),)
    out["0-9-1 delivery-tag 2^64-1"] = H.capture(*H.conversation_09(methods=acks))
    out["0-10 content-length 2^64-1"] = H.capture(*H.conversation_010(content_length=H.U64, ttl=H.U64))
    out["0-10 timestamp -2^63"] = H.capture(*H.conversation_010(timestamp=-(2**63)))
    out["pcapng EPB high word 0xFFFFFFFF"] = H.pcapng_ticks(pk, {5: 0xFFFFFFFF_00000000})
    out["pcapng if_tsoffset +2^63-1"] = H.pcapng_ticks(pk, {}, tsoffset=2**63 - 1)
    out["pcapng if_tsoffset -2^63"] = H.pcapng_ticks(pk, {}, tsoffset=-(2**63))
    out["pcap seconds/fraction 0xFFFFFFFF"] = H.pcap_times(pk, {5: (0xFFFFFFFF, 0xFFFFFFFF)})
    for label, value in (("2^64-1", 2**64 - 1), ("2^63", 2**63), ("0", 0)):
        cli10, srv10 = HN.conversation_10(lambda v=value: v)
        out[f"1.0 every number {label}"] = P.pcap_bytes(
            P.to_packets(P.tcp_conversation(client_chunks=cli10, server_chunks=srv10), 1)
        )
    return out


LATE = ("pcapng EPB high word 0xFFFFFFFF", "pcapng if_tsoffset +2^63-1", "pcapng if_tsoffset -2^63")


ENTRY_POINTS = (
    ("dissect", lambda c, d: ["dissect", c, "-o", os.path.join(d, "o"), "--force"], None),
    (
        "dissect pure",
        lambda c, d: ["dissect", c, "-o", os.path.join(d, "p"), "--force"],
        {"AMQPCAP_PURE": "1"},
    ),
    ("show", lambda c, d: ["show", c], None),
    ("show --json", lambda c, d: ["show", c, "--json"], None),
    ("show --csv", lambda c, d: ["show", c, "--csv"], None),
    ("show --absolute", lambda c, d: ["show", c, "--absolute"], None),
    ("show --json --absolute", lambda c, d: ["show", c, "--json", "--absolute"], None),
    ("show --frames --json pure", lambda c, d: ["show", c, "--frames", "--json"], {"AMQPCAP_PURE": "1"}),
    ("stats", lambda c, d: ["stats", c], "cache"),
    ("stats --json", lambda c, d: ["stats", c, "--json"], "cache"),
    ("report", lambda c, d: ["report", c, "-o", os.path.join(d, "r"), "--force"], "cache"),
)


def timed_late_rows(out: str) -> int:
    """Rows of a dissect or spark output whose packet's own time no column holds (a
    timestamp-out-of-range anomaly names it) and whose time is not null (it should be)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    late = ds.dataset(os.path.join(out, "anomalies")).to_table()
    late = late.filter(pc.equal(late["kind"], "timestamp-out-of-range"))
    wrong = 0
    for table in ("methods", "messages", "anomalies", "connections"):
        t = ds.dataset(os.path.join(out, table)).to_table()
        for cap in set(late.column("capture").to_pylist()):
            frames = late.filter(pc.equal(late["capture"], cap)).column("frame_number").combine_chunks()
            mine = pc.and_(pc.equal(t["capture"], cap), pc.is_in(t["frame_number"], value_set=frames))
            wrong += pc.sum(pc.and_(mine, pc.is_valid(t["ts"]))).as_py() or 0
    return wrong


def crafted_case(d: str) -> tuple[int, list, int]:
    """Runs of every crafted capture through every entry point (the API and the scapy layer in
    this process, then one spark run over them all); the failures; timed rows of late packets."""
    from scapy.utils import rdpcap

    import amqpcap
    import amqpcap.scapy  # noqa: F401  (binds the AMQP layers)

    os.environ["XDG_CACHE_HOME"] = os.path.join(d, "cache")  # amqpcap.load's cache
    runs, bad, timed = 0, [], 0
    caps = os.path.join(d, "crafted")
    os.makedirs(caps, exist_ok=True)
    for name, blob in crafted_captures().items():
        cap = os.path.join(caps, re.sub(r"\W+", "_", name) + (".pcapng" if "pcapng" in name else ".pcap"))
        with open(cap, "wb") as f:
            f.write(blob)
        for entry, argv, env in ENTRY_POINTS:
            env = {"XDG_CACHE_HOME": os.path.join(d, "cache")} if env == "cache" else env
            code, _, _, err = measured(argv(cap, d), env)
            runs += 1
            if code not in (0,) or "internal error" in err or "Traceback" in err:
                bad.append((name, entry, code, err.strip()[-200:]))
            if entry.startswith("dissect") and name in LATE and code == 0:
                timed += timed_late_rows(os.path.join(d, "o" if entry == "dissect" else "p"))
        runs += 1
        try:
            amqpcap.load(cap)
        except Exception as e:  # noqa: BLE001
            bad.append((name, "API load", None, repr(e)[:200]))
        try:
            pkts = rdpcap(cap)
        except Exception:  # noqa: BLE001  (scapy's own reader: not an entry point of ours)
            continue
        runs += 2
        try:
            amqpcap.dissect_packets(pkts)
        except Exception as e:  # noqa: BLE001
            bad.append((name, "API dissect_packets", None, repr(e)[:200]))
        try:
            for p in pkts:
                p.show(dump=True)
        except Exception as e:  # noqa: BLE001
            bad.append((name, "scapy layer show", None, repr(e)[:200]))
    out = os.path.join(d, "spark")
    code, _, _, err = measured(["spark", caps, "-o", out, "--master", "local[2]", "--force"])
    runs += 1
    if code != 0 or "internal error" in err or "Traceback" in err:
        bad.append(("every crafted capture", "spark", code, err.strip()[-200:]))
    else:
        timed += timed_late_rows(out)
    return runs, bad, timed


def write_block(lines: list[str]) -> None:
    path = ROOT / "docs" / "performance.md"
    text = path.read_text() if path.exists() else "# Performance\n\nFigures written by the bench scripts.\n"
    block = "<!-- bench:bench_hostile -->\n" + "\n".join(lines) + "\n<!-- /bench:bench_hostile -->"
    if "<!-- bench:bench_hostile -->" in text:
        text = re.sub(
            r"<!-- bench:bench_hostile -->.*?<!-- /bench:bench_hostile -->", lambda _: block, text, flags=re.S
        )
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mutants", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-million", action="store_true")
    ap.add_argument("--connections", type=int, default=1_000_000, help="0: no many-connections case")
    ap.add_argument("--no-crafted", action="store_true")
    ap.add_argument("--write", action="store_true", help="write the table to docs/performance.md")
    a = ap.parse_args()
    table = [
        "| case | entry point | exit | peak RSS MB | seconds | internal error |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as d:
        if not a.no_crafted:
            t0 = time.monotonic()
            runs, bad, timed = crafted_case(d)
            secs = time.monotonic() - t0
            print(
                f"crafted values: {runs} runs through every entry point in {secs:.0f} s; failures: "
                f"{len(bad)}; rows of out-of-range packets with a time: {timed}"
            )
            for b in bad[:20]:
                print("  FAIL", *b)
            table.append(
                f"| {len(crafted_captures())} crafted captures | {runs} runs, all entry points | "
                f"{len(bad)} failed | | {secs:.0f} | {len(bad)} |"
            )
            table.append(f"| late packet times | rows with a time (should be null) | {timed} | | | |")
        if a.connections:
            for case, cmd, code, rss, secs, internal in connections_case(a.connections, d):
                print(f"{case}: {cmd} exit {code}, peak RSS {rss:.0f} MB, {secs:.1f} s")
                table.append(
                    f"| {case} | {cmd} | {code} | {rss:.0f} | {secs:.1f} | {'yes' if internal else 'no'} |"
                )
    rng = random.Random(a.seed)
    tried, errors, worst = 0, [], (0, None)
    rec = defaultdict(lambda: [0, 0, 0, 0])  # kind -> later_orig, later_recovered, other_missing, n
    no_anom = defaultdict(int)
    t0 = time.time()
    for i in range(a.mutants):
        kind, cap, pc, otabs, blob, dmg = mutant(i, rng)
        tried += 1
        try:
            tabs, peak = T.run(blob, "m")
        except Exception as e:  # noqa: BLE001
            errors.append((kind, cap, dmg.detail, repr(e)[:200]))
            continue
        if peak > worst[0]:
            worst = (peak, f"{kind} {cap} {dmg.detail}")
        try:
            T.check_common(otabs, tabs, peak, dmg)
        except AssertionError as e:
            errors.append((kind, cap, dmg.detail, "prefix/budget: " + str(e)[:200]))
        if kind.startswith(("size", "table")):
            if not (tabs["anomalies"].layer == "amqp").any():
                no_anom[kind] += 1
            frac, missing, n = T.recovery(otabs, tabs, dmg, pc)
            r = rec[kind]
            r[0] += n
            r[1] += round(frac * n)
            r[2] += len(missing)
            r[3] += 1
    print(f"mutants tried: {tried} in {time.time() - t0:.0f}s; failures: {len(errors)}")
    table.append(
        f"| {tried} mutants (7 families) | API dissect | | | {time.time() - t0:.0f} | {len(errors)} failed |"
    )
    for e in errors[:20]:
        print("  FAIL", *e)
    print("recovery after hostile length fields (later methods, same connection+direction):")
    tot_o = tot_r = 0
    for k in sorted(rec):
        o, r, miss, n = rec[k]
        tot_o += o
        tot_r += r
        print(
            f"  {k:24s} mutants={n:4d} recovered {r}/{o} = {r / max(o, 1):.1%}; "
            f"other-direction methods lost: {miss}; without amqp anomaly: {no_anom[k]}"
        )
    print(f"  TOTAL recovered {tot_r}/{tot_o} = {tot_r / max(tot_o, 1):.1%}")
    print(f"worst mutant peak traced memory: {worst[0] / 1e6:.1f} MB ({worst[1]})")
    for name, (peak, dt, size, nm, kinds) in synthetic(not a.no_million).items():
        print(
            f"synthetic {name}: {size / 1e6:.1f} MB capture, peak {peak / 1e6:.1f} MB, "
            f"{dt:.1f}s, methods={nm}, anomalies={kinds}"
        )
    if a.write:
        write_block(table)


if __name__ == "__main__":
    main()
