"""The capture splitter's loops (spark/entries.py) give what the reader gives, run as Python and
compiled: every record's start, lengths and time, and every packet's tuple as the reader yields it."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from fixtures.compiled import CAPTURES, built_or_skip

from amqpcap.capture.reader import open_capture
from amqpcap.spark import entries, ranges

# a microsecond capture and a nanosecond one (both little-endian; and each made big-endian below)
SOME = [c for c in CAPTURES if c.endswith(("rabbitmq091_pika_full.pcap", "rabbitmq091_pika_throughput.pcap"))]


@pytest.fixture(
    params=[(p, big) for p in SOME for big in (False, True)],
    ids=lambda pb: pb[0].rsplit("/", 1)[-1] + ("-big" if pb[1] else ""),
)
def path(request, tmp_path):
    """A shipped capture, as it is or with its headers rewritten big-endian."""
    path, big = request.param
    if not big:
        return path
    with open(path, "rb") as f:
        data = f.read()
    out = bytearray(struct.pack(">IHHiIII", *struct.unpack("<IHHiIII", data[:24])))
    pos = 24
    while pos < len(data):
        head = struct.unpack_from("<IIII", data, pos)
        out += struct.pack(">IIII", *head) + data[pos + 16 : pos + 16 + head[2]]
        pos += 16 + head[2]
    big_path = tmp_path / "big.pcap"
    big_path.write_bytes(out)
    return str(big_path)


def the_loops(which: str):
    if which == "python":
        return entries.pcap_records, entries.packets
    fast = built_or_skip("fastranges")
    return fast.pcap_records, fast.packets


def reader_packets(path: str) -> list:
    with open_capture(path) as src:
        return [p for batch in src.batches() for p in batch]


def split(path: str) -> tuple[memoryview, ranges.Layout]:
    with open(path, "rb") as f:
        data = f.read()
    return memoryview(data), ranges.layout(ranges_file(data))


class ranges_file:
    """An in-memory capture, read as ranges reads a file."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_at(self, n: int, offset: int):
        return self.data[offset : offset + n]

    def size(self) -> int:
        return len(self.data)


@pytest.mark.parametrize("which", ["python", "compiled"])
def test_pcap_records_are_the_readers_records(which, path):
    pcap_records, _ = the_loops(which)
    data, lay = split(path)
    assert lay.pcap and lay.big == path.endswith("big.pcap")
    want, pos, keys = [], 0, ranges.Keys()
    for _n, ts, lt, payload, wire in reader_packets(path):
        want.append((pos, len(payload), wire, ts, keys.of(lt, payload)))
        pos += lay.hl + len(payload)
    buf = data[lay.first :]
    room = len(buf) // lay.hl + 1
    cols = [np.zeros(room, t) for t in (np.int64, np.uint32, np.uint32, np.int64, np.uint64)]
    n, stop = pcap_records(buf, len(buf), lay.hl, lay.big, lay.mul, lay.linktype, *cols)
    assert stop == pos == len(buf) and n == len(want)
    got = list(zip(*(c[:n].tolist() for c in cols)))
    # every IPv4/TCP packet keyed as link.parse_packet keys it; the rest (0) left to it
    assert [g[:4] for g in got] == [w[:4] for w in want]
    assert all(g[4] == w[4] or (g[4] == 0 and w[4] == ranges.MISC) for g, w in zip(got, want))
    assert sum(g[4] != 0 for g in got) > n // 2
    # a buffer cut inside the third record: the walk stops at its start; an end before the
    # second record's start: only the first
    cut = buf[: want[2][0] + lay.hl + 1]
    assert pcap_records(cut, len(cut), lay.hl, lay.big, lay.mul, lay.linktype, *cols) == (2, want[2][0])
    assert pcap_records(buf, want[1][0], lay.hl, lay.big, lay.mul, lay.linktype, *cols) == (1, want[1][0])


@pytest.mark.parametrize("which", ["python", "compiled"])
def test_packets_are_the_readers_packets(which, path):
    _, packets = the_loops(which)
    data, _ = split(path)
    # the index entries of the whole capture, in capture order (what a bucket reads)
    _, index = ranges.index_range(ranges_file(bytes(data)), 0, 0, 0, len(data), len(data))
    r = ranges.read_index(ranges_file(index), np.arange(ranges.SLOTS))
    assert r["ord"].tolist() == list(range(len(r)))
    want = reader_packets(path)
    got = packets(data, r["ord"], r["ts"], r["lt"], r["off"], r["cap"], r["wire"], 0, 0)
    assert got == want
    # Python ints, as the reader's (not numpy scalars)
    assert all(type(v) is int for n, ts, lt, _, wire in got for v in (n, ts, lt, wire))
    # numbered past 2**32 (a later range's base): no wrap at 32 bits
    far = packets(
        data, r["ord"][:3], r["ts"][:3], r["lt"][:3], r["off"][:3], r["cap"][:3], r["wire"][:3], 0, 1 << 32
    )
    assert [p[0] for p in far] == [(1 << 32) + 1, (1 << 32) + 2, (1 << 32) + 3]
    # from a span of the capture starting at its offset lo, numbered from base + 1
    lo = int(r["off"][3])
    got = packets(
        data[lo:], r["ord"][3:], r["ts"][3:], r["lt"][3:], r["off"][3:], r["cap"][3:], r["wire"][3:], lo, 10
    )
    assert got == [(n + 10, *rest) for n, *rest in want[3:]]
    with pytest.raises(ValueError, match="outside the capture"):
        packets(
            data[lo:],
            r["ord"][2:],
            r["ts"][2:],
            r["lt"][2:],
            r["off"][2:],
            r["cap"][2:],
            r["wire"][2:],
            lo,
            0,
        )
