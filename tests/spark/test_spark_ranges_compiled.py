"""The capture splitter's compiled twins (spark/fastranges.pyx) against the Python references:
the same index bytes, summaries and bucket packets, on pcap and pcapng captures."""

from __future__ import annotations

import os

import numpy as np
import pytest
from fixtures import pcapgen
from fixtures.compiled import CAPTURES, built_or_skip

from amqpcap.capture.reader import open_capture
from amqpcap.spark import ranges, storage


@pytest.fixture
def both():
    """Runs ``fn()`` with the references, then the compiled twins: the two results."""
    built_or_skip("fastranges")
    before = ranges.compiled_in_use()

    def run(fn):
        got = []
        for on in (False, True):
            ranges.use_compiled(on)
            got.append(fn())
        return got

    yield run
    ranges.use_compiled(before)


def _split(path, parts: int, scratch) -> tuple:
    """Index ``path`` in ``parts`` ranges, read it back in two buckets: (summaries, index bytes,
    every bucket's packets)."""
    size = os.path.getsize(path)
    edges = [size * k // parts for k in range(parts + 1)]
    sums, blobs, locs = [], [], []
    for k in range(parts):
        with ranges.open_capture_bytes(storage.locate(path)) as f:
            s, blob = ranges.index_range(f, 0, k, edges[k], edges[k + 1], size)
        loc = storage.locate(str(scratch / f"r{k}.idx"))
        storage.write_bytes(loc, blob)
        sums.append(s)
        blobs.append(blob)
        locs.append(loc)
    buckets, bases, _firsts, _ranks = ranges.plan_buckets(sums, 2)
    packets = [
        [
            p
            for batch in ranges.BucketSource(
                storage.locate(path), list(zip(locs, bases.tolist())), b
            ).batches()
            for p in batch
        ]
        for b in buckets
    ]
    return sums, blobs, packets


def _mixed_links(tmp_path) -> str:
    """Ethernet IPv4/TCP, an ARP frame, an IPv6 segment and a cut IPv4 header in one pcap: the
    compiled walk keys the first, leaves the rest to the link parser."""
    pkts = list(open_capture(CAPTURES[0]))[:40]
    eth = pkts[5][3]
    arp = eth[:12] + b"\x08\x06" + bytes(28)
    v6 = (
        eth[:12] + b"\x86\xdd" + bytes.fromhex("6000000000140640") + bytes(15) + b"\x01" + bytes(15) + b"\x02"
    )
    v6 += bytes.fromhex("d43116280000000100000000500220000000000000")[:20]
    cut = eth[:30]
    rows = [(ts, lt, d, wl) for _n, ts, lt, d, wl in pkts]
    rows[7:7] = [(rows[7][0], 1, arp, len(arp)), (rows[7][0], 1, v6, len(v6)), (rows[7][0], 1, cut, len(eth))]
    path = tmp_path / "mixed.pcap"
    path.write_bytes(pcapgen.pcap_bytes(rows))
    return str(path)


def test_compiled_index_and_buckets_equal_the_references_on_shipped_captures(both, tmp_path):
    for i, path in enumerate(CAPTURES[:6] + [_mixed_links(tmp_path)]):
        ref, fast = both(lambda i=i, path=path: _split(path, 3, tmp_path / f"{i}-{ranges.compiled_in_use()}"))
        assert ref[1] == fast[1], path  # the index files, byte for byte
        for a, b in zip(ref[0], fast[0]):
            assert (a.start, a.stop, a.packets) == (b.start, b.stop, b.packets)
            assert np.array_equal(a.slot_bytes, b.slot_bytes) and np.array_equal(a.keys, b.keys)
            assert np.array_equal(a.firsts, b.firsts)
        assert ref[2] == fast[2], path
        assert sorted(p for b in fast[2] for p in b) == list(open_capture(path)), path
        assert all(type(p[3]) is bytes for b in fast[2] for p in b)


def test_a_capture_rewritten_in_place_is_mapped_afresh_for_the_next_task(tmp_path):
    # a Python worker keeps its last mapping for the next task on the same capture: one that
    # changed since must not be read through the old mapping
    path = tmp_path / "c.pcap"
    first, second = CAPTURES[0], CAPTURES[1]
    path.write_bytes(open(first, "rb").read())
    loc = storage.locate(str(path))
    with ranges.open_capture_bytes(loc) as f:
        assert f.size() == os.path.getsize(first)
        kept = f
    with ranges.open_capture_bytes(loc) as f:
        assert f is kept  # unchanged: the same mapping
    os.remove(path)
    path.write_bytes(open(second, "rb").read())
    with ranges.open_capture_bytes(loc) as f:
        assert f is not kept and f.size() == os.path.getsize(second)
        assert bytes(f.read_at(64, 0)) == open(second, "rb").read(64)
