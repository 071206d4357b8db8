"""The capture splitter's loops (spark/entries.py) give what the reader gives, run as Python and
compiled: every record's start, and every packet's tuple as the reader yields it."""

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
        return entries.record_starts, entries.packets
    fast = built_or_skip("fastranges")
    return fast.record_starts, fast.packets


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
def test_record_starts_are_where_the_readers_records_are(which, path):
    record_starts, _ = the_loops(which)
    data, lay = split(path)
    assert lay.pcap and lay.big == path.endswith("big.pcap")
    want, pos = [], 0
    for _n, _ts, _lt, payload, _wire in reader_packets(path):
        want.append(pos)
        pos += lay.hl + len(payload)
    buf = data[lay.first :]
    starts = np.zeros(len(buf) // lay.hl + 1, np.int64)
    n, stop = record_starts(buf, len(buf), lay.hl, lay.big, starts)
    assert starts[:n].tolist() == want and stop == pos == len(buf)
    # a buffer cut inside the third record: the walk stops at its start; an end before the
    # second record's start: only the first
    cut = buf[: want[2] + lay.hl + 1]
    n, stop = record_starts(cut, len(cut), lay.hl, lay.big, starts)
    assert (n, stop) == (2, want[2])
    n, stop = record_starts(buf, want[1], lay.hl, lay.big, starts)
    assert (n, stop) == (1, want[1])


@pytest.mark.parametrize("which", ["python", "compiled"])
def test_packets_are_the_readers_packets(which, path):
    _, packets = the_loops(which)
    data, lay = split(path)
    got_entries = []
    ranges._pcap_walk(
        ranges_file(bytes(data)),
        lay,
        lay.first,
        len(data),
        len(data),
        lambda b, base, a: got_entries.append((a, base)),
    )
    r = np.concatenate([a for a, _ in got_entries])
    r["off"] += np.concatenate([np.full(len(a), base, np.uint64) for a, base in got_entries])
    r["ord"] = np.arange(len(r), dtype=np.uint32)
    want = reader_packets(path)
    assert packets(data, r["ord"], r["ts"], r["lt"], r["off"], r["cap"], r["wire"], 0, 0) == want
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
