"""Hostile-input benchmark: many mutants of the shipped real captures
plus synthetic worst cases.  Prints mutants tried, methods recovered after
hostile length fields vs the undamaged capture, and peak traced memory.

    python bench/bench_hostile.py                 # 500 mutants + synthetic cases
    python bench/bench_hostile.py --mutants 50 --no-million
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_mutations as T  # noqa: E402
from fixtures import amqp09 as A  # noqa: E402
from fixtures import mutate  # noqa: E402
from fixtures import pcapgen as P  # noqa: E402


def mutant(i, rng):
    kinds = ["flip", "drop", "dup", "reorder", "cut", "size", "table"]
    kind = kinds[i % len(kinds)]
    caps = T.FRAMED_09 if kind in ("size", "table") else T.CAPTURES
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mutants", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-million", action="store_true")
    a = ap.parse_args()
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


if __name__ == "__main__":
    main()
