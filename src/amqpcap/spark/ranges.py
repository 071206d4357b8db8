"""One big capture across many tasks: byte ranges indexed in parallel, conversations regrouped.

1. The driver cuts an uncompressed capture into byte ranges (its size only: it reads no record).
2. A task per range (``index_range``) finds the first record that starts in its range -- pcap:
   the first offset from which ``CHAIN`` plausible record headers follow one another; pcapng:
   blocks carry their length at both ends, so the first 4-aligned offset where ``CHAIN`` blocks
   chain up -- and walks every record that starts in it, to the first one that starts past it
   (the next range's first, which the driver checks).  Per packet it keeps where the bytes are,
   their lengths, time, link type and its conversation key (the unordered address/port pair,
   hashed to 64 bits); it writes that index, grouped by ``slot`` (key modulo SLOTS), into the
   job's scratch directory, and returns a summary: packets, boundaries, bytes per slot and the
   first packet of each key.
3. The driver (``plan_buckets``) gives slots to buckets, heaviest first into the lightest, and
   ranks the keys' first packets: the ``tcp_stream`` each conversation gets in a whole-file run.
   Its work is O(ranges + conversations).
4. A task per bucket (``BucketSource``) reads its slots' index of every range and the bytes of
   its packets, in file order, and hands them to the ordinary ``Dissector``.

Anything the reader would report as a capture anomaly (a cut record, a corrupt or unknown
block, an unsupported link type), or a pcapng section or interface block after the first
packet, makes the capture "unsplittable": it is dissected whole by one task instead, so its
rows stay those of one process.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from array import array
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter

import numpy as np

from amqpcap.capture import link
from amqpcap.capture.link import Packet
from amqpcap.capture.reader import MAX_RECORD
from amqpcap.spark import entries, storage
from amqpcap.spark.entries import compiled_packets, compiled_records

SLOTS = 512
CHAIN = 16  # headers that must chain up to take an offset as a record boundary
BLOCK = 8 << 20  # bytes read at once
SCAN = 1 << 20  # how far past a range's start its first record may be (beyond: unsplittable)
MISC = 0  # key of packets that are not (parseable) TCP
_NS = 1_000_000_000
_PCAP = {  # magic as stored: (byte order, ns per fraction unit, record header length)
    b"\xa1\xb2\xc3\xd4": (">", 1000, 16),
    b"\xd4\xc3\xb2\xa1": ("<", 1000, 16),
    b"\xa1\xb2\x3c\x4d": (">", 1, 16),
    b"\x4d\x3c\xb2\xa1": ("<", 1, 16),
    b"\xa1\xb2\xcd\x34": (">", 1000, 24),
    b"\x34\xcd\xb2\xa1": ("<", 1000, 24),
}
_PCAPNG = b"\x0a\x0d\x0d\x0a"
_SHB, _IDB, _PB, _SPB, _EPB = 0x0A0D0D0A, 1, 2, 3, 6
_HARMLESS = frozenset({4, 5, 10, 0x00000BAD, 0x40000BAD})  # NRB, ISB, secrets, custom
_BOUNDARY_TYPES = frozenset({_PB, _SPB, _EPB}) | _HARMLESS

#: One packet of the index: its number within the range, lengths, link type, where its
#: captured bytes are in the file, and its timestamp (ns).
RECORD = np.dtype(
    [
        ("ord", "<u4"),
        ("cap", "<u4"),
        ("wire", "<u4"),
        ("lt", "<u2"),
        ("pad", "<u2"),
        ("off", "<u8"),
        ("ts", "<i8"),
    ]
)


class Unsplittable(Exception):
    """What the reader reports as an anomaly, or what a range cannot resolve alone."""


class Mapped:
    """A local capture mapped into memory, read as ``storage.open_input``'s files are
    (``read_at``, ``size``) but without a copy: ``read_at`` gives a view of the page cache."""

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            self._size = os.fstat(fd).st_size
            self.map = mmap.mmap(fd, self._size, access=mmap.ACCESS_READ) if self._size else None
        finally:
            os.close(fd)
        self.view = memoryview(self.map) if self.map is not None else memoryview(b"")

    def size(self) -> int:
        return self._size

    def read_at(self, nbytes: int, offset: int):
        return self.view[offset : offset + nbytes]

    def close(self) -> None:
        try:
            self.view.release()
            if self.map is not None:
                self.map.close()
        except BufferError:  # a view still held (an exception's frames): unmapped when freed
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Kept:
    """The last capture a process mapped, kept mapped: the next task on the same capture in
    the same Python worker (index, then bucket tasks) finds its pages mapped already."""

    key: tuple | None = None
    mapped: Mapped | None = None


@contextlib.contextmanager
def open_capture_bytes(loc: storage.Location):
    """The capture at ``loc`` for random access: mapped if local (the mapping kept for the next
    task on it, while the file is unchanged), else the store's file."""
    if not loc.local:
        with storage.open_input(loc) as f:
            yield f
        return
    st = os.stat(loc.path)
    key = (loc.path, st.st_ino, st.st_size, st.st_mtime_ns)
    if _Kept.key != key:
        if _Kept.mapped is not None:
            _Kept.mapped.close()
        _Kept.key, _Kept.mapped = None, None
        _Kept.mapped, _Kept.key = Mapped(loc.path), key
    yield _Kept.mapped


def splittable_format(head: bytes) -> bool:
    """True if a capture starting with ``head`` is one the ranges can index (not gzip)."""
    return head[:4] in _PCAP or head[:4] == _PCAPNG


@dataclass
class RangeSummary:
    """What a range task tells the driver (the index itself is in the scratch directory)."""

    capture: int  # index of the capture in the job
    part: int
    start: int = 0  # offset of the first record that starts in the range
    stop: int = 0  # offset of the first record that starts past it (or the end of the file)
    packets: int = 0
    error: str | None = None  # why the capture cannot be split
    slot_bytes: np.ndarray = field(default_factory=lambda: np.zeros(SLOTS, np.int64))
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    firsts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # ord of the key's first


# -- the capture's header ---------------------------------------------------------------------------


@dataclass
class Layout:
    """How records are framed: pcap (byte order, fraction unit, header length, link type,
    snap length) or pcapng (byte order and the interfaces described before the first packet)."""

    pcap: bool
    big: bool
    first: int  # offset of the first record / packet block
    mul: int = 1000
    hl: int = 16
    linktype: int = 0
    snaplen: int = 0
    ifaces: list = field(default_factory=list)  # pcapng: (linktype, num, den, offset ns, snaplen)


def layout(f) -> Layout:
    head = bytes(f.read_at(1 << 16, 0))
    if head[:4] in _PCAP:
        endian, mul, hl = _PCAP[head[:4]]
        if len(head) < 24:
            raise Unsplittable("cut file header")
        snaplen, network = struct.unpack_from(endian + "II", head, 16)
        lt = network & 0xFFFF
        if not link.is_supported(lt):
            raise Unsplittable(f"unsupported link type {lt}")
        return Layout(True, endian == ">", 24, mul, hl, lt, snaplen)
    if head[:4] == _PCAPNG:
        return _pcapng_layout(f, head)
    raise Unsplittable("not a pcap or pcapng file")


def _pcapng_layout(f, head: bytes) -> Layout:
    bom = head[8:12]
    if bom not in (b"\x4d\x3c\x2b\x1a", b"\x1a\x2b\x3c\x4d"):
        raise Unsplittable("bad byte-order magic")
    e = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
    out = Layout(False, e == ">", 0)
    pos, size = 0, f.size()
    while pos + 12 <= size:
        btype, blk = struct.unpack(e + "II", f.read_at(8, pos))
        if btype in (_EPB, _PB, _SPB):
            out.first = pos
            return out
        if blk < 12 or blk & 3 or blk > MAX_RECORD:
            raise Unsplittable("bad block length")
        buf = f.read_at(blk, pos)
        if len(buf) < blk or struct.unpack_from(e + "I", buf, blk - 4)[0] != blk:
            raise Unsplittable("cut or corrupt block")
        if btype == _SHB:
            if pos:
                raise Unsplittable("several sections")
            if blk < 28 or struct.unpack_from(e + "H", buf, 12)[0] != 1:
                raise Unsplittable("bad section header")
        elif btype == _IDB:
            if blk < 20:
                raise Unsplittable("short interface block")
            out.ifaces.append(_idb(buf, blk, e))
        elif btype not in _HARMLESS:
            raise Unsplittable(f"block type 0x{btype:08x}")
        pos += blk
    out.first = pos
    return out


def _idb(buf: bytes, end: int, e: str):
    """(link type, ts numerator, denominator, offset ns, snaplen) as the reader computes them."""
    lt, snap = struct.unpack_from(e + "HxxI", buf, 8)
    if not link.is_supported(lt):
        raise Unsplittable(f"unsupported link type {lt}")
    num, den, off = 1000, 1, 0
    p, oend = 16, end - 4
    while p + 4 <= oend:
        code, olen = struct.unpack_from(e + "HH", buf, p)
        if code == 0:
            break
        v = p + 4
        if v + olen > oend:
            raise Unsplittable("interface option runs past its block")
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


# -- record boundaries ------------------------------------------------------------------------------


def _pcap_plausible(lay: Layout, buf: bytes, p: int, limit: int, prev: int) -> tuple[int, int]:
    """``(offset of the next record, seconds)`` after a plausible pcap record header at ``p``
    (its time within a day of ``prev``, the previous header's, unless -1); offset -1 if
    implausible, -2 if ``buf`` ends before the header does."""
    if p + lay.hl > len(buf):
        return -2, prev
    sec, frac, cap, wire = struct.unpack_from(">IIII" if lay.big else "<IIII", buf, p)
    if cap > limit or cap > wire or frac >= (1_000_000 if lay.mul == 1000 else _NS):
        return -1, prev
    if prev >= 0 and abs(sec - prev) > 86400:
        return -1, prev
    return p + lay.hl + cap, sec


def _pcapng_plausible(lay: Layout, buf: bytes, p: int, limit: int, prev: int) -> tuple[int, int]:
    if p + 12 > len(buf):
        return -2, prev
    e = ">" if lay.big else "<"
    btype, blk = struct.unpack_from(e + "II", buf, p)
    if btype not in _BOUNDARY_TYPES or blk < 12 or blk & 3 or blk > limit:
        return -1, prev
    if p + blk > len(buf):
        return -2, prev
    if struct.unpack_from(e + "I", buf, p + blk - 4)[0] != blk:
        return -1, prev
    return p + blk, prev


def find_boundary(f, lay: Layout, start: int, size: int) -> int:
    """The first offset at or after ``start`` from which CHAIN records chain up (or reach the
    end of the file exactly)."""
    limit = (max(lay.snaplen, 1 << 18) if lay.snaplen else MAX_RECORD) if lay.pcap else MAX_RECORD
    step = 1 if lay.pcap else 4
    first = start + (-start % step)
    window = f.read_at(min(SCAN + (1 << 20), size - first), first)
    for p in range(0, min(SCAN, len(window)), step):
        got = _chains(lay, window, p, CHAIN, limit, size - first)
        if got is True:
            return first + p
        if got is not False:  # the window ends first: the chain read on from ``p``
            more = f.read_at(min(SCAN + limit, size - first - p), first + p)
            if _chains(lay, more, 0, CHAIN, limit, size - first - p) is True:
                return first + p
    raise Unsplittable("no record boundary found")


def _chains(lay: Layout, buf: bytes, q: int, need: int, limit: int, left: int):
    """True if ``need`` records chain up from ``q`` (or reach ``left``, the end of the file,
    exactly); False if not; -2 if ``buf`` ends first."""
    plausible = _pcap_plausible if lay.pcap else _pcapng_plausible
    prev = -1
    for _ in range(need):
        if q >= left:
            return q == left
        q, prev = plausible(lay, buf, q, limit, prev)
        if q < 0:
            return -2 if q == -2 else False
    return True


# -- indexing a range -------------------------------------------------------------------------------


#: Link types whose IPv4/TCP conversation key is read from fixed offsets: (link header length,
#: offset of the ethertype).  Other link types, and any packet the fast path does not fit, go
#: through ``link.parse_packet``; both give the same key for the same address/port pair.
_FAST_LINKS = {1: (14, 12), 113: (16, 14)}


def _mix_array(x: np.ndarray) -> np.ndarray:
    """entries.mix, whole-array."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(entries.MIX_K1)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(entries.MIX_K2)
    return x ^ (x >> np.uint64(31))


def _endpoint(addr: bytes, port: int) -> int:
    a = int.from_bytes(addr, "big")
    if len(addr) > 4:
        a = (a ^ (a >> 64)) & entries.M64
    return ((a << 16) | port) & entries.M64


def _pair_key(e1, e2):
    """The key of an unordered endpoint pair (ints or uint64 arrays); never MISC."""
    if isinstance(e1, int):
        return entries.pair_key(e1, e2)
    lo, hi = np.minimum(e1, e2), np.maximum(e1, e2)
    k = _mix_array(lo * np.uint64(entries.GOLDEN) + hi)
    k[k == 0] = 1
    return k


class Keys:
    """Conversation keys: the unordered address/port pair hashed to 64 bits (the same in every
    task: no per-process hash seed); MISC for packets that are not TCP."""

    def __init__(self) -> None:
        self.seen: dict = {}
        self.parse = link.parse_packet

    def of(self, lt: int, data: bytes) -> int:
        r = self.parse(lt, data)
        if type(r) is not Packet:
            return MISC
        k = (r[1], r[3], r[2], r[4])
        got = self.seen.get(k)
        if got is None:
            got = self.seen[k] = _pair_key(_endpoint(r[1], r[3]), _endpoint(r[2], r[4]))
        return got

    def of_block(self, buf: bytes, a: np.ndarray) -> np.ndarray:
        """Keys of the RECORD array ``a`` (offsets relative to ``buf``): IPv4/TCP on a link of
        _FAST_LINKS from fixed offsets, the rest one by one."""
        n = len(a)
        offsets, caps = a["off"].astype(np.int64), a["cap"].astype(np.int64)
        out = np.zeros(n, np.uint64)
        lts = int(a["lt"][0]) if n and (a["lt"] == a["lt"][0]).all() else None
        fast = np.zeros(n, bool)
        if lts in _FAST_LINKS:
            hlen, et = _FAST_LINKS[lts]
            b = np.frombuffer(buf, np.uint8)
            ok = caps >= hlen + 20 + 4
            o = np.where(ok, offsets, 0)
            ip = o + hlen
            etype = (b[o + et].astype(np.uint16) << 8) | b[o + et + 1]
            vihl = b[ip]
            ihl = (vihl & 15).astype(np.int64) * 4
            ok &= (etype == 0x0800) & ((vihl >> 4) == 4) & (ihl >= 20) & (b[ip + 9] == 6)
            ok &= caps >= hlen + ihl + 4
            tcp = np.where(ok, ip + ihl, 0)

            def be(at, width):
                v = np.zeros(n, np.uint64)
                for i in range(width):
                    v = (v << np.uint64(8)) | b[at + i].astype(np.uint64)
                return v

            src, dst = be(np.where(ok, ip + 12, 0), 4), be(np.where(ok, ip + 16, 0), 4)
            sport, dport = be(tcp, 2), be(tcp + 2, 2)
            keys = _pair_key((src << np.uint64(16)) | sport, (dst << np.uint64(16)) | dport)
            out[ok] = keys[ok]
            fast = ok
        for i in np.flatnonzero(~fast).tolist():
            o = int(offsets[i])
            out[i] = self.of(int(a["lt"][i]), bytes(buf[o : o + int(caps[i])]))
        return out


def room(records: int) -> tuple:
    """The compiled walk's output columns for up to ``records`` records: allocated once a range
    and reused block after block (fresh ones would fault their pages in again for every block)."""
    return np.empty(records, RECORD), np.empty(records, np.int64), np.empty(records, np.uint64)


def _pcap_block(buf: bytes, end: int, lay: Layout, space: tuple | None = None) -> tuple:
    """``(entries, pos, keys)``: the index entries (RECORD, ``off`` relative to ``buf``, ``ord``
    unset) of the pcap records wholly in ``buf`` that start before ``end``; where the walk
    stopped; with the compiled walk their conversation keys, 0 where not computed (else None).
    ``space``: :func:`room` to write into (the entries and keys returned are copies)."""
    hl, big = lay.hl, lay.big
    if compiled_records is not None:  # the walk in C (spark/entries.py)
        if space is None or len(space[0]) < len(buf) // hl + 1:
            space = room(len(buf) // hl + 1)
        a, s, k = space
        n, p = compiled_records(buf, end, hl, big, lay.mul, lay.linktype, s, a["cap"], a["wire"], a["ts"], k)
        a, s, k = a[:n].copy(), s[:n], k[:n].copy()
    else:
        cap_at = struct.Struct(">I" if big else "<I").unpack_from
        starts = array("q")
        app = starts.append
        p, blen = 0, len(buf)
        while p < end and p + hl <= blen:
            nxt = p + hl + cap_at(buf, p + 8)[0]
            if nxt > blen:
                break
            app(p)
            p = nxt
        s = np.frombuffer(starts, np.int64) if starts else np.zeros(0, np.int64)
        k = None
        b = np.frombuffer(buf, np.uint8)
        head = b[s[:, None] + np.arange(16)].copy().view(">u4" if big else "<u4")
        a = np.zeros(len(s), RECORD)
        a["cap"], a["wire"] = head[:, 2], head[:, 3]
        a["ts"] = head[:, 0].astype(np.int64) * _NS + head[:, 1].astype(np.int64) * lay.mul
    a["ord"], a["pad"] = 0, 0
    a["lt"] = lay.linktype
    a["off"] = s + hl
    return a, p, k


def _pcap_walk(f, lay: Layout, pos: int, end: int, size: int, sink) -> int:
    """Walk the pcap records starting in [pos, end); ``sink(block, base, packets, keys)`` per
    block read (``packets``: a RECORD array with block-relative offsets, ord unset; keys as
    _pcap_block gives them); the offset of the first record that starts at or past ``end``."""
    hl, big = lay.hl, lay.big
    space = room(BLOCK // hl + 1) if compiled_records is not None else None
    while pos < end:
        buf = f.read_at(min(BLOCK, size - pos), pos)
        a, used, k = _pcap_block(buf, end - pos, lay, space)
        if not len(a):
            if len(buf) < hl:
                if len(buf):
                    raise Unsplittable("file ends inside a record header")
                return pos
            cap = struct.unpack_from(">I" if big else "<I", buf, 8)[0]
            if cap > MAX_RECORD:
                raise Unsplittable("oversize record")
            buf = f.read_at(hl + cap, pos)
            a, used, k = _pcap_block(buf, end - pos, lay, space)
            if not len(a):
                raise Unsplittable("file ends inside a record")
        if (a["cap"] > MAX_RECORD).any():
            raise Unsplittable("oversize record")
        sink(buf, pos, a, k)
        pos += used
    return pos


def _pcapng_walk(f, lay: Layout, pos: int, end: int, size: int, sink) -> int:
    """As _pcap_walk for pcapng packet blocks (Python: one block at a time)."""
    e = ">" if lay.big else "<"
    ifaces = lay.ifaces
    last_ts = 0 if pos == lay.first else None  # a simple packet block takes the last one's time
    while pos < end:
        buf = f.read_at(min(BLOCK, size - pos), pos)
        p, recs, offs = 0, [], []
        while pos + p < end:
            if p + 12 > len(buf):
                if pos + p != size and pos + len(buf) == size:
                    raise Unsplittable("file ends inside a block header")
                break  # the end of the file, or read on
            btype, blk = struct.unpack_from(e + "II", buf, p)
            if blk < 12 or blk & 3 or blk > MAX_RECORD:
                raise Unsplittable("bad block length")
            if p + blk > len(buf):
                if pos + p + blk > size:
                    raise Unsplittable("file ends inside a block")
                if p == 0:
                    buf = f.read_at(blk, pos)
                    continue
                break
            if struct.unpack_from(e + "I", buf, p + blk - 4)[0] != blk:
                raise Unsplittable("bad block trailer")
            if btype in (_EPB, _PB):
                if blk < 32:
                    raise Unsplittable("short packet block")
                if btype == _EPB:
                    iid, hi, lo, cap, wire = struct.unpack_from(e + "5I", buf, p + 8)
                else:
                    iid, _drops, hi, lo, cap, wire = struct.unpack_from(e + "HH4I", buf, p + 8)
                if cap > blk - 32 or iid >= len(ifaces):
                    raise Unsplittable("bad packet block")
                lt, num, den, off, _snap = ifaces[iid]
                t = (hi << 32) | lo
                last_ts = t * num + off if den == 1 else t * num // den + off
                recs.append((0, last_ts, lt, buf[p + 28 : p + 28 + cap], wire))
                offs.append(pos + p + 28)
            elif btype == _SPB:
                if last_ts is None:
                    raise Unsplittable("simple packet block before any timestamp in its range")
                if blk < 16 or not ifaces:
                    raise Unsplittable("bad simple packet block")
                wire = struct.unpack_from(e + "I", buf, p + 8)[0]
                cap = min(blk - 16, wire)
                snap = ifaces[0][4]
                if snap and snap < cap:
                    cap = snap
                recs.append((0, last_ts, ifaces[0][0], buf[p + 12 : p + 12 + cap], wire))
                offs.append(pos + p + 12)
            elif btype not in _HARMLESS:
                raise Unsplittable(f"block type 0x{btype:08x} after the first packet")
            p += blk
        if recs:
            a = np.empty(len(recs), RECORD)
            a["cap"] = np.fromiter(map(len, map(itemgetter(3), recs)), np.int64, len(recs))
            a["wire"] = np.fromiter(map(itemgetter(4), recs), np.uint32, len(recs))
            a["ts"] = np.fromiter(map(itemgetter(1), recs), np.int64, len(recs))
            a["lt"] = np.fromiter(map(itemgetter(2), recs), np.uint16, len(recs))
            a["off"] = np.asarray(offs, np.int64) - pos
            sink(buf, pos, a)
        if p == 0:
            return pos
        pos += p
    return pos


def index_range(f, capture: int, part: int, start: int, end: int, size: int) -> tuple[RangeSummary, bytes]:
    """Index the records that start in ``[start, end)`` of the opened capture ``f``.

    Returns the summary and the index (``encode_index``); raises Unsplittable."""
    lay = layout(f)
    pos = lay.first if start <= lay.first else find_boundary(f, lay, start, size)
    keys = Keys()
    cols: list = []

    def sink(buf, base, a, k=None):
        if k is None:
            k = keys.of_block(buf, a)
        else:
            for i in np.flatnonzero(k == 0).tolist():  # the compiled walk's packets it did not key
                o = int(a["off"][i])
                k[i] = keys.of(int(a["lt"][i]), bytes(buf[o : o + int(a["cap"][i])]))
        a["off"] += base
        cols.append((a, k))

    walk = _pcap_walk if lay.pcap else _pcapng_walk
    try:
        stop = walk(f, lay, pos, end, size, sink) if pos < end else pos
    except OverflowError:  # a timestamp beyond int64 ns: the reader reports it
        raise Unsplittable("timestamp out of range") from None
    s = RangeSummary(capture, part, start=pos, stop=stop)
    if cols:
        recs = np.concatenate([a for a, _ in cols])
        k = np.concatenate([k for _, k in cols])
    else:
        recs, k = np.zeros(0, RECORD), np.zeros(0, np.uint64)
    recs["ord"] = np.arange(len(recs), dtype=np.uint32)
    s.packets = len(recs)
    slot = (k & np.uint64(SLOTS - 1)).astype(np.uint16)  # SLOTS: a power of two; uint16: a radix sort
    s.slot_bytes = np.bincount(slot, weights=recs["cap"], minlength=SLOTS).astype(np.int64)
    tcp = k != MISC
    s.keys, first = np.unique(k[tcp], return_index=True)
    s.firsts = np.flatnonzero(tcp)[first].astype(np.int64)
    order = np.argsort(slot, kind="stable")
    return s, encode_index(recs[order], np.bincount(slot, minlength=SLOTS))


def encode_index(recs: np.ndarray, per_slot: np.ndarray) -> bytes:
    """``[SLOTS + 1 int64 slot starts][records grouped by slot]``."""
    starts = np.concatenate(([0], np.cumsum(per_slot))).astype("<i8")
    return starts.tobytes() + recs.tobytes()


def read_index(f, slots: np.ndarray) -> np.ndarray:
    """The records of ``slots`` from an index file, in range order."""
    head = np.frombuffer(f.read_at(8 * (SLOTS + 1), 0), "<i8")
    base = 8 * (SLOTS + 1)
    parts, run = [], None
    for s in np.sort(slots).tolist():
        a, b = int(head[s]), int(head[s + 1])
        if a == b:
            continue
        if run and run[1] == a:
            run[1] = b
        else:
            run = [a, b]
            parts.append(run)
    if not parts:
        return np.zeros(0, RECORD)
    got = np.concatenate(
        [
            np.frombuffer(f.read_at((b - a) * RECORD.itemsize, base + a * RECORD.itemsize), RECORD)
            for a, b in parts
        ]
    )
    return got[np.argsort(got["ord"], kind="stable")]


# -- the driver's plan ------------------------------------------------------------------------------


def check(summaries: list, size: int) -> str | None:
    """Why a capture's ranges do not tile it (None: they do)."""
    for s in summaries:
        if s.error:
            return s.error
    for a, b in zip(summaries, summaries[1:]):
        if a.stop != b.start:
            return f"range boundaries disagree at {a.stop} / {b.start}"
    return None


def plan_buckets(summaries: list, parts: int):
    """Slots to buckets (heaviest slot first, into the lightest bucket), the base packet number
    of every range and the ``tcp_stream`` of every key's first packet.

    Returns ``(buckets, bases, firsts, ranks)``: ``buckets`` a list of slot arrays (empty ones
    dropped); ``firsts`` the first packet number of every key, ascending; ``ranks`` its rank."""
    load = np.sum([s.slot_bytes for s in summaries], axis=0)
    counts = np.zeros(parts)
    owner = np.zeros(SLOTS, np.int64)
    for slot in np.argsort(-load, kind="stable"):
        if load[slot] == 0:
            continue
        b = int(np.argmin(counts))
        owner[slot] = b
        counts[b] += load[slot]
    buckets = [np.flatnonzero((owner == b) & (load > 0)) for b in range(parts)]
    buckets = [b for b in buckets if len(b)]
    bases = np.concatenate(([0], np.cumsum([s.packets for s in summaries])[:-1])).astype(np.int64)
    keys = np.concatenate([s.keys for s in summaries] or [np.zeros(0, np.uint64)])
    firsts = np.concatenate(
        [s.firsts + base + 1 for s, base in zip(summaries, bases)] or [np.zeros(0, np.int64)]
    )
    order = np.lexsort((firsts, keys))
    keys, firsts = keys[order], firsts[order]
    lead = np.ones(len(keys), bool)
    lead[1:] = keys[1:] != keys[:-1]
    firsts = np.sort(firsts[lead])
    return buckets, bases, firsts, np.arange(len(firsts), dtype=np.int64)


# -- a bucket's packets -----------------------------------------------------------------------------

PROVISIONAL = 1 << 30  # tcp_stream of a conversation the plan did not foresee (renumbered after)


class StreamNumbers:
    """``Dissector.stream_of``: the whole capture's ``tcp_stream`` of a conversation by its first
    packet; one the plan did not foresee (a port reused after a close) gets a provisional number."""

    def __init__(self, firsts: np.ndarray, ranks: np.ndarray) -> None:
        self.known = dict(zip(firsts.tolist(), ranks.tolist()))
        self.used: list = []  # (first packet, number given)

    def __call__(self, number: int) -> int:
        got = self.known.get(number)
        if got is None:
            got = PROVISIONAL + len(self.used)
        self.used.append((number, got))
        return got


class BucketSource:
    """The packets of one bucket's slots, in file order: ``batches()`` of
    ``(number, ts_ns, linktype, data, wirelen)`` as the reader yields them."""

    anomalies = ()  # a split capture has none (the ranges refuse what would make one)

    def __init__(self, capture: storage.Location, ranges: list, slots: np.ndarray) -> None:
        self.capture, self.ranges, self.slots = capture, ranges, slots  # ranges: [(index Location, base)]

    def batches(self):
        local = self.capture.local
        with open_capture_bytes(self.capture) as f:
            for loc, base in self.ranges:
                with storage.open_input(loc) as fi:
                    recs = read_index(fi, self.slots)
                if len(recs):
                    yield from self._records((f.map or b"") if local else f, recs, int(base), local)

    @staticmethod
    def _records(data, recs: np.ndarray, base: int, local: bool):
        step = 2048  # packets per batch: their bytes are freed and reused while they are in cache
        for i in range(0, len(recs), step):
            r = recs[i : i + step]
            if local:
                yield _batch(data, r, 0, base)
            else:
                lo = int(r["off"][0])
                yield _batch(data.read_at(int(r["off"][-1] + r["cap"][-1]) - lo, lo), r, lo, base)


def _batch(data, r: np.ndarray, lo: int, base: int) -> list:
    """Index entries ``r`` as the reader's packet tuples, their bytes from ``data`` (which holds
    the capture from offset ``lo``); a loop in C (spark/entries.py) if built."""
    if compiled_packets is not None:
        return compiled_packets(data, r["ord"], r["ts"], r["lt"], r["off"], r["cap"], r["wire"], lo, base)
    numbers = (r["ord"].astype(np.int64) + (base + 1)).tolist()
    off = r["off"].astype(np.int64) - lo
    ends = off + r["cap"]
    chunks = map(data.__getitem__, map(slice, off.tolist(), ends.tolist()))
    lt = r["lt"]
    lts = repeat(int(lt[0])) if (lt == lt[0]).all() else lt.tolist()
    return list(zip(numbers, r["ts"].tolist(), lts, chunks, r["wire"].tolist()))


def compiled_in_use() -> bool:
    """True if the record walk and the packets of a bucket are the compiled loops."""
    return compiled_packets is not None
