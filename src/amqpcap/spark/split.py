"""One big capture across many tasks, split by TCP conversation.

1. ``index()`` (driver) walks the record headers of an uncompressed pcap or
   pcapng file once and keeps, per packet, where its bytes are (offset, captured
   length), its wire length, timestamp and link type, and the conversation it
   belongs to (the unordered address/port pair from ``link.parse_packet``).
   pcapng section and interface state (byte order, link type, ``if_tsresol``,
   ``if_tsoffset``) is resolved here, so the tasks need none of it.
2. ``buckets()`` gives each conversation to a bucket, largest first, always
   to the bucket with the fewest bytes so far (hashing 8 connections into 8
   buckets filled only 5 in a prototype).  Packets that are not TCP or cannot
   be parsed all go to one bucket, so the capture-level anomaly rows are those
   of a single-process run.
3. Each bucket task seek-reads its packets in file order (``BucketSource``,
   the same tuples ``open_capture`` yields) and runs the normal ``Dissector``.
   Its ``tcp_stream`` numbers are local; ``Dissector.stream_starts`` tells the
   driver the first packet of each, and ``global_streams()`` renumbers them to
   Wireshark's order (first packet of the conversation in the whole file).

Anything the reader would report as a capture anomaly (a cut or corrupt record,
an unknown block, an unsupported link type) makes ``index()`` return ``None``:
such a capture is dissected whole by one task, so its rows stay identical.
The driver holds about 40 bytes per packet of the capture being indexed.
"""

from __future__ import annotations

import heapq
import struct
from array import array
from dataclasses import dataclass

import numpy as np

from amqpcap.capture import link
from amqpcap.capture.reader import MAX_RECORD

CHUNK = 1 << 20
_NS = 1_000_000_000
_PCAP = {  # magic as stored: (byte order, ns per fraction unit, record header length)
    b"\xa1\xb2\xc3\xd4": (">", 1000, 16),
    b"\xd4\xc3\xb2\xa1": ("<", 1000, 16),
    b"\xa1\xb2\x3c\x4d": (">", 1, 16),
    b"\x4d\x3c\xb2\xa1": ("<", 1, 16),
    b"\xa1\xb2\xcd\x34": (">", 1000, 24),
    b"\x34\xcd\xb2\xa1": ("<", 1000, 24),
}
_SHB = 0x0A0D0D0A
_IDB, _PB, _SPB, _EPB = 1, 2, 3, 6
_HARMLESS = frozenset({4, 5, 10, 0x00000BAD, 0x40000BAD})  # NRB, ISB, secrets, custom: no packet, no anomaly
MISC = -1  # flow id of packets that are not (parseable) TCP


class _Unsplittable(Exception):
    """Something the reader reports as an anomaly: dissect this capture in one task."""


@dataclass
class Index:
    path: str
    linktypes: list  # link types, indexed by ``lt``
    number: np.ndarray  # int64, Wireshark frame.number
    offset: np.ndarray  # int64, file offset of the captured bytes
    caplen: np.ndarray  # int64
    wirelen: np.ndarray  # int64
    ts: np.ndarray  # int64 ns
    lt: np.ndarray  # uint8, index into linktypes
    flow: np.ndarray  # int32 conversation id, MISC for the rest
    nflows: int


@dataclass
class Bucket:
    """The packets of one split task (a slice of an Index, in file order)."""

    name: str  # the capture column
    path: str
    part: int  # bucket number within the capture
    parts: int
    linktypes: list
    number: np.ndarray
    offset: np.ndarray
    caplen: np.ndarray
    wirelen: np.ndarray
    ts: np.ndarray
    lt: np.ndarray

    @property
    def size(self) -> int:
        return int(self.caplen.sum())


class BucketSource:
    """Packet source over a bucket: ``(number, ts_ns, linktype, data, wirelen)`` in file order."""

    anomalies = ()  # a split capture has none (index() refuses those that would)

    def __init__(self, bucket: Bucket) -> None:
        self.b = bucket

    def __iter__(self):
        b = self.b
        lts = b.linktypes
        with open(b.path, "rb", buffering=CHUNK) as f:
            seek, read = f.seek, f.read
            for n, off, cl, wl, ts, li in zip(
                b.number.tolist(),
                b.offset.tolist(),
                b.caplen.tolist(),
                b.wirelen.tolist(),
                b.ts.tolist(),
                b.lt.tolist(),
            ):
                seek(off)  # within the read buffer: no system call
                data = read(cl)
                if len(data) != cl:
                    raise OSError(f"{b.path}: changed while being dissected (short read at {off})")
                yield (n, ts, lts[li], data, wl)


class _Builder:
    """Accumulates the per-packet index columns and the conversation ids."""

    def __init__(self) -> None:
        self.offset, self.caplen, self.wirelen, self.ts = array("q"), array("q"), array("q"), array("q")
        self.lt, self.flow = array("B"), array("i")
        self.linktypes: list = []
        self.flows: dict = {}

    def lt_index(self, linktype: int) -> int:
        if not link.is_supported(linktype):
            raise _Unsplittable(f"unsupported link type {linktype}")
        if linktype not in self.linktypes:
            if len(self.linktypes) == 255:
                raise _Unsplittable("too many link types")
            self.linktypes.append(linktype)
        return self.linktypes.index(linktype)

    def packet(self, off: int, data: bytes, wirelen: int, ts: int, li: int) -> None:
        r = link.parse_packet(self.linktypes[li], data)
        if r is None or type(r) is str:
            fid = MISC
        else:
            a, b = (r[1], r[3]), (r[2], r[4])
            key = (a, b) if a <= b else (b, a)
            fid = self.flows.get(key)
            if fid is None:
                fid = self.flows[key] = len(self.flows)
        self.offset.append(off)
        self.caplen.append(len(data))
        self.wirelen.append(wirelen)
        self.ts.append(ts)
        self.lt.append(li)
        self.flow.append(fid)

    def finish(self, path: str) -> Index:
        n = len(self.offset)

        def col(a, dt):
            return np.frombuffer(a, dtype=dt).copy() if n else np.zeros(0, dt)

        return Index(
            path,
            self.linktypes,
            np.arange(1, n + 1, dtype=np.int64),
            col(self.offset, np.int64),
            col(self.caplen, np.int64),
            col(self.wirelen, np.int64),
            col(self.ts, np.int64),
            col(self.lt, np.uint8),
            col(self.flow, np.int32),
            len(self.flows),
        )


def _index_pcap(f, head: bytes, out: _Builder) -> None:
    endian, mul, hl = _PCAP[head[:4]]
    li = out.lt_index(struct.unpack_from(endian + "I", head, 20)[0] & 0xFFFF)
    unpack = struct.Struct(endian + "IIII").unpack_from
    f.seek(24)
    base, buf, pos = 24, f.read(CHUNK), 0
    while True:
        if pos + hl > len(buf):
            base, buf, pos = base + pos, buf[pos:] + f.read(CHUNK), 0
            if not buf:
                return
            if len(buf) < hl:
                raise _Unsplittable("cut record header")
        sec, frac, caplen, wirelen = unpack(buf, pos)
        end = pos + hl + caplen
        if end > len(buf):
            if caplen > MAX_RECORD:
                raise _Unsplittable("oversize record")
            base, buf, pos = base + pos, buf[pos:] + f.read(max(CHUNK, hl + caplen)), 0
            end = hl + caplen
            if end > len(buf):
                raise _Unsplittable("cut record")
        out.packet(base + pos + hl, buf[pos + hl : end], wirelen, sec * _NS + frac * mul, li)
        pos = end


def _idb(buf: bytes, pos: int, end: int, e: str):
    """(link type, ts numerator, denominator, offset ns, snaplen) as the reader computes them."""
    lt, snap = struct.unpack_from(e + "HxxI", buf, pos + 8)
    num, den, off = 1000, 1, 0
    p, oend = pos + 16, end - 4
    while p + 4 <= oend:
        code, olen = struct.unpack_from(e + "HH", buf, p)
        if code == 0:
            break
        v = p + 4
        if v + olen > oend:
            raise _Unsplittable("interface option runs past its block")
        if code == 9 and olen == 1:
            r = buf[v]
            if r & 0x80:
                num, den = _NS, 1 << (r & 0x7F)
            elif (r & 0x7F) <= 9:
                num, den = 10 ** (9 - (r & 0x7F)), 1
            else:
                num, den = 1, 10 ** ((r & 0x7F) - 9)
        elif code == 14 and olen == 8:
            off = struct.unpack_from(e + "q", buf, v)[0] * _NS
        p = v + olen + (-olen & 3)
    return lt, num, den, off, snap


def _index_pcapng(f, out: _Builder) -> None:
    f.seek(0)
    base, buf, pos = 0, f.read(CHUNK), 0
    e = "<"
    ifaces: list = []  # per interface of the current section: (lt index, num, den, offset ns, snaplen)
    last_ts = 0
    while True:
        if pos + 12 > len(buf):
            base, buf, pos = base + pos, buf[pos:] + f.read(CHUNK), 0
            if not buf:
                return
            if len(buf) < 12:
                raise _Unsplittable("cut block header")
        if struct.unpack_from("<I", buf, pos)[0] == _SHB:
            bom = buf[pos + 8 : pos + 12]
            if bom not in (b"\x4d\x3c\x2b\x1a", b"\x1a\x2b\x3c\x4d"):
                raise _Unsplittable("bad byte-order magic")
            e = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
            ifaces = []
        btype, blk = struct.unpack_from(e + "II", buf, pos)
        if blk < 12 or blk & 3 or blk > MAX_RECORD:
            raise _Unsplittable("bad block length")
        if pos + blk > len(buf):
            base, buf, pos = base + pos, buf[pos:] + f.read(max(CHUNK, blk)), 0
            if blk > len(buf):
                raise _Unsplittable("cut block")
        end = pos + blk
        if struct.unpack_from(e + "I", buf, end - 4)[0] != blk:
            raise _Unsplittable("bad block trailer")
        if btype in (_EPB, _PB):
            if blk < 32:
                raise _Unsplittable("short packet block")
            if btype == _EPB:
                iid, hi, lo, caplen, wirelen = struct.unpack_from(e + "5I", buf, pos + 8)
            else:
                iid, _drops, hi, lo, caplen, wirelen = struct.unpack_from(e + "HH4I", buf, pos + 8)
            if caplen > blk - 32 or iid >= len(ifaces):
                raise _Unsplittable("bad packet block")
            li, num, den, off, _snap = ifaces[iid]
            last_ts = ((hi << 32) | lo) * num + off if den == 1 else ((hi << 32) | lo) * num // den + off
            out.packet(base + pos + 28, buf[pos + 28 : pos + 28 + caplen], wirelen, last_ts, li)
        elif btype == _SPB:
            if blk < 16 or not ifaces:
                raise _Unsplittable("bad simple packet block")
            wirelen = struct.unpack_from(e + "I", buf, pos + 8)[0]
            caplen = min(blk - 16, wirelen)
            snap = ifaces[0][4]
            if snap and snap < caplen:
                caplen = snap
            out.packet(base + pos + 12, buf[pos + 12 : pos + 12 + caplen], wirelen, last_ts, ifaces[0][0])
        elif btype == _IDB:
            if blk < 20:
                raise _Unsplittable("short interface block")
            lt, num, den, off, snap = _idb(buf, pos, end, e)
            ifaces.append((out.lt_index(lt), num, den, off, snap))
        elif btype == _SHB:
            if blk < 28 or struct.unpack_from(e + "H", buf, pos + 12)[0] != 1:
                raise _Unsplittable("bad section header")
        elif btype not in _HARMLESS:
            raise _Unsplittable(f"block type 0x{btype:08x}")
        pos = end


def index(path: str) -> Index | None:
    """Index an uncompressed capture; ``None`` when it must be dissected whole (see module doc)."""
    out = _Builder()
    try:
        with open(path, "rb") as f:
            head = f.read(28)
            if head[:4] in _PCAP and len(head) >= 24:
                _index_pcap(f, head, out)
            elif head[:4] == b"\x0a\x0d\x0d\x0a":
                _index_pcapng(f, out)
            else:
                return None
    except (_Unsplittable, OSError, struct.error):
        return None
    return out.finish(path)


def buckets(ix: Index, name: str, parts: int) -> list[Bucket]:
    """Split ``ix`` into at most ``parts`` buckets balanced by captured bytes (largest conversation
    first, into the emptiest bucket); non-TCP packets form one more pseudo-conversation."""
    ids = ix.flow.astype(np.int64) + 1  # MISC -> 0
    nbytes = np.bincount(ids, weights=ix.caplen, minlength=ix.nflows + 1)
    present = [int(i) for i in np.flatnonzero(np.bincount(ids, minlength=ix.nflows + 1))]
    order = sorted(present, key=lambda i: (-nbytes[i], i))
    parts = max(1, min(parts, len(order)))
    heap = [(0.0, b) for b in range(parts)]
    where = np.zeros(ix.nflows + 1, dtype=np.int32)
    for i in order:
        load, b = heapq.heappop(heap)
        where[i] = b
        heapq.heappush(heap, (load + nbytes[i], b))
    per_packet = where[ids]
    out = []
    for b in range(parts):
        sel = np.flatnonzero(per_packet == b)
        out.append(
            Bucket(
                name,
                ix.path,
                b,
                parts,
                ix.linktypes,
                ix.number[sel],
                ix.offset[sel],
                ix.caplen[sel],
                ix.wirelen[sel],
                ix.ts[sel],
                ix.lt[sel],
            )
        )
    return out


def global_streams(starts: list) -> list:
    """``starts[b]``: first packet number of each local tcp_stream of bucket ``b`` (ascending).

    Returns per bucket an int array mapping local -> global stream number, the rank of the
    conversation's first packet in the whole capture (Wireshark's ``tcp.stream`` order)."""
    firsts = np.concatenate([np.asarray(s, dtype=np.int64) for s in starts] or [np.zeros(0, np.int64)])
    rank = np.empty(len(firsts), dtype=np.int32)
    rank[np.argsort(firsts, kind="stable")] = np.arange(len(firsts), dtype=np.int32)
    out, at = [], 0
    for s in starts:
        out.append(rank[at : at + len(s)])
        at += len(s)
    return out
