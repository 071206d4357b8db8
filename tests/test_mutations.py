"""Mutation tests over the shipped real captures.

Each mutant is one real capture with one mutation from ``fixtures/mutate.py``
(flipped payload bytes, dropped / duplicated / reordered packets, hostile AMQP
frame sizes, hostile field-table / long-string lengths, file cut at a random
offset).  For every mutant:

* ``dissect`` does not raise;
* peak traced memory (tracemalloc) stays under ``BUDGET`` (see below);
* damage to AMQP bytes is reported: a hostile length yields an ``amqp``
  anomaly, a dropped data packet yields a ``gap`` anomaly, a cut file a
  ``capture``/``truncated-*`` anomaly;
* every method completed by a packet strictly before the first damaged packet
  is decoded identically (same stream, direction, offset, method, arguments,
  packet number);
* duplicated packets (= retransmissions) change nothing but packet numbers;
* after a hostile length field, methods on the *other* (connection, direction)
  pairs are all still decoded and at least ``MIN_RECOVERY`` of the later
  methods of the damaged direction are recovered.

Mutants are bounded by ``AMQPCAP_MUTANTS`` (seeds per mutation kind, default
3, so CI stays well under 60 s).  Long run::

    AMQPCAP_MUTANTS=200 python -m pytest tests/test_mutations.py -q -x
    python bench/bench_hostile.py --mutants 500      # summary figures

Memory budget: the undamaged captures peak at 1-28 MB traced (the 646 kB
pika_full capture is the largest, ~28 MB).  ``BUDGET`` = 128 MB is ~4.5x the
worst undamaged run: a decoder that allocated a buffer sized by a hostile
length field (>= 2 GiB) or kept buffering a 4 GiB frame would blow through
it, while normal variance cannot.
"""

from __future__ import annotations

import os
import random
import tempfile
import tracemalloc
from functools import cache
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fixtures import mutate

from amqpcap.pipeline import dissect

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = [
    "rabbitmq091_pyamqp_basic.pcap",
    "rabbitmq08_amqplib.pcap",
    "rabbitmq091_pika_full.pcap",
    "qpid010_basic.pcap",
]
FRAMED_09 = CAPTURES[:3]  # 0-8 / 0-9-1 frame layout (size / table mutations)
N = int(os.environ.get("AMQPCAP_MUTANTS", "3"))
BUDGET = 128 * 1024 * 1024
MIN_RECOVERY = 0.5
KEY = ["tcp_stream", "direction", "stream_offset", "channel", "method", "arguments"]

SIZES = {"ffff_fff0": 0xFFFFFFF0, "2pow31": 2**31, "frame_max_plus_1": None}
TABLE_LENS = {"2pow31": 2**31, "ffff_ffff": 0xFFFFFFFF, "plus_1k": None}


def run(blob_or_path, tag="x"):
    """Dissect; return (tables dict of DataFrames, peak bytes)."""
    with tempfile.TemporaryDirectory() as d:
        if isinstance(blob_or_path, bytes):
            src = os.path.join(d, f"{tag}.pcap")
            with open(src, "wb") as f:
                f.write(blob_or_path)
        else:
            src = str(blob_or_path)
        out = os.path.join(d, "out")
        tracemalloc.start()
        try:
            dissect([src], out, force=True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        tabs = {
            t: pq.read_table(os.path.join(out, t)).to_pandas()
            for t in ("connections", "methods", "anomalies")
        }
    return tabs, peak


@cache
def original(name):
    pc = mutate.Pcap.load(ROOT / "captures" / name)
    tabs, peak = run(pc.dump(), "orig")
    return pc, tabs, peak


def flow_of(conns, flow):
    """(tcp_stream, direction) of a (src, dst) endpoint pair."""
    import ipaddress

    (sip, sp), (dip, dp) = flow
    s, d = str(ipaddress.ip_address(sip)), str(ipaddress.ip_address(dip))
    for r in conns.itertuples():
        if (r.client_ip, r.client_port, r.server_ip, r.server_port) == (s, sp, d, dp):
            return r.tcp_stream, "c2s"
        if (r.client_ip, r.client_port, r.server_ip, r.server_port) == (d, dp, s, sp):
            return r.tcp_stream, "s2c"
    return None


def rows(df, cols=KEY):
    return sorted(map(tuple, df[cols].astype(str).values.tolist()))


def check_common(orig_tabs, tabs, peak, dmg):
    assert peak < BUDGET, f"peak {peak / 1e6:.1f} MB >= budget ({dmg.detail})"
    first = min(dmg.packets)  # 0-based; packets 1..first are intact
    om, mm = orig_tabs["methods"], tabs["methods"]
    before = om[om.frame_number <= first]
    got = mm[mm.frame_number <= first]
    assert rows(before, KEY + ["frame_number"]) == rows(got, KEY + ["frame_number"]), dmg.detail


def recovery(orig_tabs, tabs, dmg, pc):
    """(fraction of later methods recovered in the damaged direction, other-flows ok)."""
    om, mm = orig_tabs["methods"], tabs["methods"]
    sd = flow_of(orig_tabs["connections"], dmg.flow)
    assert sd is not None
    same_o = om[(om.tcp_stream == sd[0]) & (om.direction == sd[1])]
    same_m = mm[(mm.tcp_stream == sd[0]) & (mm.direction == sd[1])]
    later = same_o[same_o.frame_number > dmg.packets[0] + 1]
    got = set(rows(same_m))
    frac = (sum(r in got for r in rows(later)) / len(later)) if len(later) else 1.0
    other_o = om[~((om.tcp_stream == sd[0]) & (om.direction == sd[1]))]
    other_m = set(rows(mm))
    missing_other = [r for r in rows(other_o) if r not in other_m]
    return frac, missing_other, len(later)


def cases(kinds, captures):
    return [(k, c, s) for k in kinds for s in range(N) for c in [captures[s % len(captures)]]]


@pytest.mark.parametrize("kind,capture,seed", cases(["flip", "drop", "dup", "reorder", "cut"], CAPTURES))
def test_packet_mutation(kind, capture, seed):
    pc, otabs, _ = original(capture)
    rng = random.Random(f"{kind}-{capture}-{seed}")
    blob, dmg = mutate.MUTATIONS[kind](pc, rng)
    tabs, peak = run(blob, kind)
    check_common(otabs, tabs, peak, dmg)
    an = tabs["anomalies"]
    if kind == "drop":
        sd = flow_of(otabs["connections"], dmg.flow)
        gaps = an[(an.kind == "gap") & (an.tcp_stream == sd[0]) & (an.direction == sd[1])]
        assert len(gaps) >= 1, f"no gap anomaly for {dmg.detail}"
    if kind == "dup":
        assert rows(otabs["methods"]) == rows(tabs["methods"]), dmg.detail
        assert len(an) == len(otabs["anomalies"]), dmg.detail
    if kind == "cut" and dmg.packets[0] < len(pc.recs) and len(blob) < len(pc.dump()):
        assert (an.layer == "capture").any() or (an.kind == "truncated-file").any(), dmg.detail


def _size_value(name, pc, otabs):
    v = SIZES[name]
    if v is None:
        fm = otabs["connections"].frame_max.dropna()
        v = int(fm.max() if len(fm) and fm.max() > 0 else 131072) + 1
    return v


RECOVERY_LOG = []


@pytest.mark.parametrize("name", list(SIZES))
@pytest.mark.parametrize("capture,seed", [(c, s) for s in range(N) for c in [FRAMED_09[s % 3]]])
def test_hostile_frame_size(name, capture, seed):
    pc, otabs, _ = original(capture)
    rng = random.Random(f"size-{name}-{capture}-{seed}")
    blob, dmg = mutate.hostile_frame_size(pc, rng, _size_value(name, pc, otabs))
    tabs, peak = run(blob, "size")
    check_common(otabs, tabs, peak, dmg)
    an = tabs["anomalies"]
    assert (an.layer == "amqp").any(), f"no amqp anomaly: {dmg.detail}"
    frac, missing_other, n = recovery(otabs, tabs, dmg, pc)
    RECOVERY_LOG.append(("size", name, capture, frac, n))
    assert not missing_other, f"{dmg.detail}: other flows lost {missing_other[:3]}"
    assert frac >= MIN_RECOVERY, f"{dmg.detail}: recovered {frac:.0%} of {n} later methods"


@pytest.mark.parametrize("name", list(TABLE_LENS))
@pytest.mark.parametrize("capture,seed", [(c, s) for s in range(N) for c in [FRAMED_09[s % 3]]])
def test_hostile_table_length(name, capture, seed):
    pc, otabs, _ = original(capture)
    rng = random.Random(f"table-{name}-{capture}-{seed}")
    v = TABLE_LENS[name]
    if v is None:
        v = 1024  # longer than the frame (start / start-ok are < 1 kB)
    blob, dmg = mutate.hostile_table_length(pc, rng, v)
    tabs, peak = run(blob, "table")
    check_common(otabs, tabs, peak, dmg)
    an = tabs["anomalies"]
    assert (an.layer == "amqp").any(), f"no amqp anomaly: {dmg.detail}"
    frac, missing_other, n = recovery(otabs, tabs, dmg, pc)
    RECOVERY_LOG.append(("table", name, capture, frac, n))
    assert frac >= MIN_RECOVERY, f"{dmg.detail}: recovered {frac:.0%} of {n} later methods"


def test_flip_is_deterministic():
    pc, _, _ = original(CAPTURES[0])
    a = mutate.flip_bytes(pc, random.Random(7))[0]
    b = mutate.flip_bytes(pc, random.Random(7))[0]
    assert a == b and mutate.Pcap.parse(a).dump() == a
