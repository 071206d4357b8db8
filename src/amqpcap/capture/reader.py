# cython: annotation_typing=False, boundscheck=False, wraparound=False
"""Capture files -> packet records (the first, I/O-doing stage).

``open_capture(path)`` recognises the file by its content, never by its name.
The input is opened once and read on from the bytes used to recognise it, so
``"-"`` (standard input), pipes, FIFOs and ``/dev/stdin`` work: a pipe's
packets are yielded as they arrive (reads return what the pipe holds).
Formats:

* classic pcap: microsecond (``a1b2c3d4``) and nanosecond (``a1b23c4d``) magic
  in both byte orders, plus Alexey Kuznetzov's "modified" pcap
  (``a1b2cd34``, 24-byte record headers);
* pcapng: any number of sections (each with its own byte order) and
  interfaces, per-interface link type, ``if_tsresol`` (powers of 10 *and* of 2)
  and ``if_tsoffset``; enhanced (EPB), simple (SPB) and obsolete packet blocks
  (PB).  Non-packet blocks we know (NRB, ISB, DSB, custom, Apple process info)
  are skipped silently; unknown block types are skipped and reported;
* gzip-compressed versions of either (``1f 8b`` magic; multi-member gzip is
  fine, a cut gzip stream yields everything that could be decompressed).

Errors and exit codes -- ``CaptureError.exit_code`` (the table: ``amqpcap.exitcodes``):

====  ================================================================
 2    not a capture: empty file, unknown magic, gzip that is corrupt or
      does not contain a capture, pcap/pcapng header cut short or invalid
      (``EXIT_NOT_A_CAPTURE``)
 3    the path cannot be read at all: missing, permission denied, is a
      directory, other OS error on open/first read (``EXIT_UNREADABLE``)
====  ================================================================

``str(CaptureError)`` is one line: ``"<path>: <reason>"``.

Problems *inside* a readable capture never raise.  They end up in
``source.anomalies`` as ``(number, ts_ns, kind, detail)`` where ``number`` is
the packet-record number the problem concerns (for a record that consumed a
number) or the number the next packet record would get (for a block or a cut
that did not), and ``ts_ns`` the timestamp of that record if known, else of
the last packet read (0 before the first).  Kinds:

``truncated-file``        the file (or gzip stream) ends inside a record or
                          block; everything before it was yielded, reading stops
``oversize-record``       a record/block claims more than ``MAX_RECORD`` bytes;
                          reading stops (the length cannot be trusted)
``corrupt-block``         pcapng block with a bad length / trailer / contents;
                          reading stops if the framing is broken, otherwise the
                          record is skipped (it still consumes a number)
``corrupt-file``          the gzip stream is corrupt; reading stops
``pcapng-unknown-block``  a block type we do not know; skipped
``pcapng-bad-interface``  a packet block names an interface that no IDB of the
                          section described; the packet is skipped (it still
                          consumes a number, as in Wireshark)
``skipped-record``        a non-packet record that Wireshark numbers as a frame
                          (systemd journal export block); consumes a number
``timestamp-out-of-range`` a packet's time (pcapng ticks and ``if_tsoffset``, a
                          scapy packet's ``time``) outside what an int64 of ns
                          holds (years 1677 to 2262): the packet is read with the
                          previous packet's time, as a simple packet block is (the
                          rows it makes are written with a null time: records/outofrange.py)

Packet numbering follows Wireshark's ``frame.number``: every EPB, SPB, PB (and
systemd journal block) counts, in file order, from 1, whether or not it is
yielded.

Timestamps are integer nanoseconds since the epoch.  Classic pcap ignores the
header's ``thiszone`` (as Wireshark does).  pcapng converts ticks with
``ts_ns = ticks * 10**9 // units_per_second + if_tsoffset * 10**9`` (floor,
which matches Wireshark for power-of-2 resolutions).  A simple packet block
has no timestamp: it gets the previous packet's timestamp (0 if first).

Implementation notes (why not scapy's raw readers): measured with
``bench/bench_reader.py`` (1M mixed packets, 2 shared cores),
``scapy.utils.RawPcapReader`` reads ~0.4 M packets/s and ``RawPcapNgReader``
~0.3 M packets/s, against ~2.4 M packets/s (pcap) and ~1.4 M packets/s
(pcapng) for the chunked ``struct.unpack_from`` loops below (scapy does two
or three ``read`` calls and builds a namedtuple per packet).  Beyond speed,
scapy 2.8's raw readers are wrong for our purposes in several ways:

* they silently truncate every packet to ``MTU`` = 65535 bytes (a loopback
  frame with a 64 KiB IP packet is 65549 bytes) -- see
  ``test_packets_larger_than_64k_are_not_truncated``;
* a file cut in the middle of a record ends iteration exactly like a clean
  end of file (pcap: the partial record is even returned as a short packet);
* ``RawPcapNgReader`` computes an SPB's captured length as
  ``min(wirelen, snaplen)`` so an IDB with snaplen 0 ("no limit", the common
  case) yields *empty* SPB packets
  (``test_pcapng_simple_packet_block_with_unlimited_snaplen_keeps_all_bytes``),
  skips unknown blocks without telling, ignores ``if_tsoffset``, keeps the
  previous section's interfaces after a new SHB and reads whatever block
  length the file claims (up to 4 GiB).

So both formats are parsed here, reading the file in ``CHUNK``-sized pieces
and finding the records in the chunk with ``struct.unpack_from`` (C byte loads
compiled); the only per-packet object is the record tuple, which locates the
packet's bytes in the chunk (the generators yield a chunk with its records:
``PacketSource.chunks``; ``batches`` and iteration slice each packet's bytes
out of it).  Memory is bounded by ``CHUNK + MAX_RECORD``.
"""

from __future__ import annotations

import itertools
import os
import stat
import struct
import sys
import zlib
from collections.abc import Iterator

from amqpcap import compiled
from amqpcap.exitcodes import Exit

# True in this module built by Cython as compiled.py's part "fastread" (with capture/fastread.pxd's
# types), which is imported under the part's name (no import of Cython's shadow module: it loads typing)
COMPILED = __name__ == compiled.PARTS["fastread"].module

__all__ = [
    "CaptureError",
    "PacketSource",
    "open_capture",
    "EXIT_NOT_A_CAPTURE",
    "EXIT_UNREADABLE",
    "MAX_RECORD",
]

EXIT_NOT_A_CAPTURE = Exit.NOT_A_CAPTURE
EXIT_UNREADABLE = Exit.UNREADABLE

#: Largest record / block we are prepared to buffer (bytes).
MAX_RECORD = 256 * 1024 * 1024
#: Read size; every refill copies at most one partial record.  64 KiB: a chunk and the partial
#: record before it stay under glibc's mmap threshold (128 KiB), so their memory is reused from
#: the heap rather than mapped and faulted in afresh every time, and a chunk's records are
#: decoded while it is in cache.  Reading a 35 MB capture's records: 35 ms at 1 MiB, 17 ms at
#: 64 KiB (21 ms on a capture of 64 KiB loopback segments, 40 at 1 MiB).
CHUNK = 1 << 16
_PEEK = 1 << 16

_NS = 1_000_000_000
#: the times a packet can have: what the tables' timestamp[ns] columns (int64) hold
TS_MIN, TS_MAX = -(1 << 63), (1 << 63) - 1


def ts_fits(ts) -> bool:
    return type(ts) is int and TS_MIN <= ts <= TS_MAX


_PCAP_MAGICS = {
    # magic bytes as stored: (endian, ns multiplier for the fraction, record header length, name)
    b"\xa1\xb2\xc3\xd4": (">", 1000, 16),
    b"\xd4\xc3\xb2\xa1": ("<", 1000, 16),
    b"\xa1\xb2\x3c\x4d": (">", 1, 16),
    b"\x4d\x3c\xb2\xa1": ("<", 1, 16),
    b"\xa1\xb2\xcd\x34": (">", 1000, 24),  # Kuznetzov modified pcap
    b"\x34\xcd\xb2\xa1": ("<", 1000, 24),
}
_PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
_SHB_TYPE = 0x0A0D0D0A
_BOM_BE = b"\x1a\x2b\x3c\x4d"
_BOM_LE = b"\x4d\x3c\x2b\x1a"

# pcapng block types
_IDB, _PB, _SPB, _NRB, _ISB, _EPB = 1, 2, 3, 4, 5, 6
_JOURNAL = 9
_KNOWN_SKIP = frozenset(
    {
        _NRB,
        _ISB,
        7,  # IRIG timestamp (obsolete)
        8,  # ARINC 429 (obsolete)
        10,  # decryption secrets
        0x00000BAD,  # custom block, copiable
        0x40000BAD,  # custom block, do not copy
        0x80000001,  # Apple process information
    }
)

_OTHER_MAGICS = (
    (b"snoop\0\0\0", "a Solaris snoop capture"),
    (b"XCP\0", "a NetXray/Sniffer capture"),
    (b"\x7fELF", "an ELF executable"),
    (b"PK\x03\x04", "a zip archive"),
    (b"BZh", "a bzip2 file (decompress it first)"),
    (b"\xfd7zXZ\0", "an xz file (decompress it first)"),
    (b"\x28\xb5\x2f\xfd", "a zstd file (decompress it first)"),
)


class CaptureError(Exception):
    """The path is not a readable capture.

    ``exit_code`` is 2 (not a capture) or 3 (path unreadable); ``path`` and
    ``reason`` hold the two halves of the one-line message.
    """

    def __init__(self, path: str, reason: str, exit_code: int) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.exit_code = exit_code


class _GzipStream:
    """gzip decompressor whose ``read(n)`` never loses data.

    ``gzip.GzipFile.read`` raises on a cut or corrupt stream and drops what it
    had decompressed in that call.  Here zlib parses each member's header and
    trailer (``wbits=47``: gzip header, CRC32 and length checked); every byte
    that can be decompressed is returned and the problem is recorded in
    ``error`` (``cut`` tells a cut stream from a corrupt one).  Concatenated
    members and zero padding after them are fine.  ``read(n)`` returns between
    1 and ``n`` bytes, ``b""`` only at the end (a pipe is decompressed as its
    bytes arrive).
    """

    __slots__ = ("_read", "_in", "_d", "_done", "error", "cut")

    def __init__(self, read, head: bytes = b"") -> None:
        self._read = read  # raw read: 1..n bytes, b"" at the end
        self._in = head  # compressed bytes not yet given to zlib (between members)
        self._d = None  # the current member's decompressor
        self._done = False
        self.error: str | None = None
        self.cut = False

    def _stop(self, error: str | None, cut: bool = False) -> bytes:
        self.error = error
        self.cut = cut
        self._done = True
        return b""

    def read(self, n: int) -> bytes:
        while not self._done:
            d = self._d
            if d is None:  # between members: skip zero padding, expect another member or the end
                data = self._in.lstrip(b"\0")
                if len(data) < 2:
                    more = self._read(CHUNK)
                    if not more:
                        if data:
                            return self._stop("gzip stream cut short", cut=True)
                        self._done = True  # clean end
                        return b""
                    self._in = data + more
                    continue
                if data[:2] != b"\x1f\x8b":
                    return self._stop("trailing garbage after the gzip stream")
                d = self._d = zlib.decompressobj(47)
                self._in = b""
            else:
                data = d.unconsumed_tail or self._read(CHUNK)
                if not data:  # input ended inside the member: what zlib still holds, then the cut
                    try:
                        out = d.flush()
                    except zlib.error:
                        out = b""
                    if d.eof:
                        self._in = d.unused_data
                        self._d = None
                    if out:
                        return out
                    if d.eof:
                        continue
                    return self._stop("gzip stream cut short", cut=True)
            before = d.copy()
            try:
                out = d.decompress(data, n)
            except zlib.error as e:
                # zlib drops the output of the failing call: replay it a byte at a time
                out = _salvage(before, data, n)
                self._stop(f"corrupt gzip data ({e})")
                return out
            if d.eof:
                self._in = d.unused_data
                self._d = None
            if out:
                return out
        return b""

    def close(self) -> None:
        pass


def _salvage(d, data: bytes, n: int) -> bytes:
    """What ``d`` inflates from ``data`` before the error (at most about ``n`` bytes)."""
    out = []
    size = 0
    for i in range(len(data)):
        try:
            piece = d.decompress(data[i : i + 1])
        except zlib.error:
            break
        out.append(piece)
        size += len(piece)
        if size >= n:
            break
    return b"".join(out)


def _fmt_magic(b: bytes) -> str:
    return b[:8].hex(" ")


class PacketSource:
    """An opened capture.  Iterate it for ``(number, ts_ns, linktype, data, wirelen)``.

    Attributes: ``path``, ``format`` (``"pcap"``, ``"pcapng"``, with
    ``"+gzip"`` appended when compressed), ``linktypes`` (distinct link types
    of the file, in order of appearance: complete for pcap; for pcapng the
    interfaces described before the first packet, extended while iterating),
    ``snaplen`` (pcap header snaplen; ``None`` for pcapng), ``anomalies``
    (see the module docstring).

    The first iteration continues the stream ``open_capture`` peeked into (a
    pipe is read once, as its bytes arrive); later iterations of a regular
    file read it again from the start.  Each iteration resets ``anomalies``
    (in place).
    """

    def __init__(
        self,
        path: str,
        fmt: str,
        gz: bool,
        linktypes: list[int],
        snaplen: int | None,
        pcap_hdr: tuple | None,
        first=None,
    ) -> None:
        self.path = path
        self.format = fmt + ("+gzip" if gz else "")
        self.linktypes = linktypes
        self.snaplen = snaplen
        self.anomalies: list[tuple[int, int, str, str]] = []
        self._gz = gz
        self._pcap_hdr = pcap_hdr
        self._gens: list = []
        # (file, stream, head): the opened input and the bytes already read from ``stream``
        self._first = first
        self._regular = first is None or _is_regular(first[0])

    def __repr__(self) -> str:
        return f"PacketSource({self.path!r}, format={self.format!r}, linktypes={self.linktypes!r})"

    def __enter__(self) -> PacketSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the files of iterations still in progress (and the unread input)."""
        gens, self._gens = self._gens, []
        for g in gens:
            g.close()
        first, self._first = self._first, None
        if first is not None:
            first[0].close()

    def _begin(self):
        """``(file, stream, head)`` for a new iteration."""
        first, self._first = self._first, None
        if first is not None:
            return first
        if not self._regular:
            raise CaptureError(self.path, "a pipe can be read only once", EXIT_UNREADABLE)
        try:
            f = open(self.path, "rb", buffering=0)
        except OSError as e:  # vanished between open_capture and iteration
            raise _unreadable(self.path, e) from None
        return f, (_GzipStream(f.read) if self._gz else f), b""

    def __iter__(self) -> Iterator[tuple[int, int, int, bytes, int]]:
        return itertools.chain.from_iterable(self.batches())

    def batches(self) -> Iterator[list[tuple[int, int, int, bytes, int]]]:
        """The records in lists, in order: a chunk's records at once (``chunks``), each with its
        bytes.  What ``__iter__`` yields one by one."""
        return _with_bytes(self.chunks())

    def chunks(self) -> Iterator[tuple[bytes, list[tuple[int, int, int, int, int, int]]]]:
        """``(buf, records)`` in order: the records located in ``buf``, the read buffer, as
        ``(number, ts_ns, linktype, start, caplen, wirelen)``, the packet's bytes the ``caplen``
        at ``buf[start]`` (not copied out of it).  The walk's lists as they are (a chunk's records at once), a
        packet the walk leaves to the reader (a simple or obsolete packet block, a timestamp past
        64 bits) in a list of its own.  What the packet loop takes (flows.py), so that the
        generator resumes once a chunk rather than once a packet and a packet's payload is the
        one copy made of its bytes (``link.parse_located``)."""
        self.anomalies.clear()
        if self._pcap_hdr is not None:
            g = self._iter_pcap()
        else:
            g = self._iter_pcapng()
        self._gens = [x for x in self._gens if x.gi_frame is not None]
        self._gens.append(g)
        return g

    # -- helpers -----------------------------------------------------------

    def _finish(self, stream, number: int, ts: int, partial: int, what: str) -> None:
        """Report how the byte stream ended (``partial`` bytes left over)."""
        gz_error = getattr(stream, "error", None)
        if partial:
            detail = f"file ends {partial} bytes into {what}"
            if gz_error:
                detail += f" ({gz_error})"
            self.anomalies.append((number, ts, "truncated-file", detail))
        elif gz_error:
            kind = "truncated-file" if stream.cut else "corrupt-file"
            self.anomalies.append((number, ts, kind, gz_error))

    # -- classic pcap --------------------------------------------------------

    def _iter_pcap(self):
        endian, mul, hl, linktype = self._pcap_hdr
        walk, big = _pcap_records, endian == ">"
        unpack = _PCAP_HEAD[big]
        f, stream, buf = self._begin()
        fill = _refill(f, stream)
        n = 0
        ts = 0
        try:
            buf = fill(buf, 0, 24)
            pos = 24
            blen = len(buf)
            anomalies = self.anomalies
            while True:
                # every record wholly in the buffer, all at once
                records, pos, n = walk(buf, pos, hl, big, mul, linktype, n)
                if records:
                    ts = records[-1][1]
                    yield buf, records
                # the record the buffer cuts (the walk takes it once it is read): refills,
                # truncation, anomalies
                if pos + hl > blen:
                    buf = fill(buf, pos, hl)
                    pos = 0
                    blen = len(buf)
                    if blen < hl:
                        self._finish(stream, n + 1, ts, blen, "a record header")
                        return
                    continue
                sec, frac, caplen, wirelen = unpack(buf, pos)
                if caplen > MAX_RECORD:
                    anomalies.append(
                        (
                            n + 1,
                            sec * _NS + frac * mul,
                            "oversize-record",
                            f"record claims {caplen} captured bytes (limit {MAX_RECORD}); stopped reading",
                        )
                    )
                    return
                buf = fill(buf, pos, hl + caplen)
                pos = 0
                blen = len(buf)
                if hl + caplen > blen:
                    self._finish(stream, n + 1, sec * _NS + frac * mul, blen, f"a {hl + caplen}-byte record")
                    return
        finally:
            f.close()

    # -- pcapng --------------------------------------------------------------

    def _iter_pcapng(self):
        f, stream, buf = self._begin()
        fill = _refill(f, stream)
        st = _Pcapng(self.anomalies, self.linktypes)
        walk = _pcapng_records
        try:
            pos = 0
            blen = len(buf)
            while True:
                # the well-formed enhanced packet blocks wholly in the buffer, all at once
                records, pos, st.n = walk(buf, pos, st.big, st.ifaces, st.n)
                if records:
                    st.last_ts = records[-1][1]
                    yield buf, records
                # every other block, and the one the buffer cuts (read, then walked if it can be):
                # refills, checks and anomalies
                if pos + 12 > blen:
                    buf = fill(buf, pos, 12)
                    pos = 0
                    blen = len(buf)
                    if blen < 12:
                        self._finish(stream, st.n + 1, st.last_ts, blen, "a block header")
                        return
                    continue
                btype, blk = st.u2(buf, pos)
                if btype == _SHB_TYPE:  # palindrome: reads the same in both byte orders
                    if not st.section(buf[pos + 8 : pos + 12]):
                        return
                    btype, blk = st.u2(buf, pos)
                if blk < 12 or blk & 3:
                    st.anomaly(
                        st.n + 1,
                        "corrupt-block",
                        f"block type 0x{btype:08x} has invalid length {blk}; stopped reading",
                    )
                    return
                if pos + blk > blen:
                    if blk > MAX_RECORD:
                        st.anomaly(
                            st.n + 1,
                            "oversize-record",
                            f"block type 0x{btype:08x} claims {blk} bytes "
                            f"(limit {MAX_RECORD}); stopped reading",
                        )
                        return
                    buf = fill(buf, pos, blk)
                    pos = 0
                    blen = len(buf)
                    if blk > blen:
                        self._finish(
                            stream, st.n + 1, st.last_ts, blen, f"a {blk}-byte block (type 0x{btype:08x})"
                        )
                        return
                    continue  # the walk takes it if it is a packet it takes
                trailing = st.u1(buf, pos + blk - 4)[0]
                if trailing != blk:
                    st.anomaly(
                        st.n + 1,
                        "corrupt-block",
                        f"block type 0x{btype:08x}: trailing length {trailing} != {blk}; stopped reading",
                    )
                    return
                got = _PCAPNG_BLOCKS.get(btype, _other_block)(st, buf, pos, blk, btype)
                if got is _STOP:
                    return
                if got:
                    yield buf, got
                pos += blk
        finally:
            f.close()


def _with_bytes(chunks):
    """The records of ``chunks`` (``PacketSource.chunks``) in lists, as ``(number, ts_ns,
    linktype, data, wirelen)``, ``data`` each packet's bytes."""
    for buf, records in chunks:
        yield [(n, ts, lt, buf[at : at + caplen], wirelen) for n, ts, lt, at, caplen, wirelen in records]


_PCAP_HEAD = {big: struct.Struct(">IIII" if big else "<IIII").unpack_from for big in (False, True)}


def _u32(b: bytes, p: int, big: bool) -> int:
    """The 32-bit field at ``p`` (the compiled walks' read: C byte loads)."""
    if big:
        return (b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]
    return (b[p + 3] << 24) | (b[p + 2] << 16) | (b[p + 1] << 8) | b[p]


def walk_pcap(buf: bytes, pos: int, hl: int, big: bool, mul: int, linktype, n: int) -> tuple[list, int, int]:
    """``(records, pos, n)``: the records wholly in ``buf`` from ``pos`` (``hl``: the record
    header's length; ``mul``: ns per fraction unit), numbered from ``n + 1``, located in ``buf``
    (``PacketSource.chunks``); where the walk stopped and the last number."""
    head = _PCAP_HEAD[big]
    blen = len(buf)
    b = buf  # (compiled: a pointer to its bytes, read in C)
    out = []
    in_c = COMPILED  # (a local: a global is looked up at every use, a record's in pure Python)
    while pos + hl <= blen:
        if in_c:
            sec, frac, caplen = _u32(b, pos, big), _u32(b, pos + 4, big), _u32(b, pos + 8, big)
            wirelen = _u32(b, pos + 12, big)
        else:  # (struct: one call for the four, where Python reads byte by byte)
            sec, frac, caplen, wirelen = head(buf, pos)
        end = pos + hl + caplen
        if end > blen:
            break
        n += 1
        w = wirelen  # (the one int of both lengths when they are equal, as they mostly are)
        out.append((n, sec * _NS + frac * mul, linktype, pos + hl, w if caplen == wirelen else caplen, w))
        pos = end
    return out, pos, n


# -- pcapng blocks -------------------------------------------------------------


class _Pcapng:
    """Where a pcapng walk is: the section's byte order (its unpackers: ``big``, ``u1`` ...) and
    interfaces (link type, timestamp numerator / denominator / offset in ns, snap length), the
    last record's number and timestamp, and the reader's anomaly and link-type lists.  The
    block readers (``_PCAPNG_BLOCKS``) take it with the block's bytes."""

    __slots__ = (
        "anomalies", "linktypes", "n", "last_ts", "ifaces", "big",
        "u1", "u2", "u5", "uidb", "upb", "uopt", "uq", "uh",
    )  # fmt: skip

    def __init__(self, anomalies: list, linktypes: list) -> None:
        self.anomalies, self.linktypes = anomalies, linktypes
        self.n = 0
        self.last_ts = 0
        self.order("<")  # until the first section header says otherwise

    def order(self, e: str) -> None:
        """A new section, in byte order ``e`` ("<" or ">"): no interfaces yet."""
        self.big = e == ">"
        self.u1, self.u2, self.u5, self.uidb, self.upb, self.uopt, self.uq, self.uh = (
            struct.Struct(e + fmt).unpack_from for fmt in ("I", "II", "5I", "HxxI", "H2x4I", "HH", "q", "H")
        )
        self.ifaces = []

    def section(self, bom: bytes) -> bool:
        """A section header's byte-order magic ``bom``; False (an anomaly) if it is neither."""
        if bom not in (_BOM_LE, _BOM_BE):
            self.anomaly(
                self.n + 1,
                "corrupt-block",
                f"section header with bad byte-order magic {_fmt_magic(bom)}; stopped reading",
            )
            return False
        self.order("<" if bom == _BOM_LE else ">")
        return True

    def anomaly(self, number: int, kind: str, detail: str) -> None:
        self.anomalies.append((number, self.last_ts, kind, detail))

    def interface(self, iid: int) -> tuple | None:
        """Interface ``iid`` of the section, or None (an anomaly for packet ``n``)."""
        if iid < len(self.ifaces) and self.ifaces[iid][0] is not None:
            return self.ifaces[iid]
        self.anomaly(
            self.n,
            "pcapng-bad-interface",
            f"packet names interface {iid}; the section describes {len(self.ifaces)}",
        )
        return None


_STOP = object()  # what a block reader returns where reading stops
_EPB_HEAD = {big: struct.Struct(">7I" if big else "<7I").unpack_from for big in (False, True)}
_TRAILER = {big: struct.Struct(">I" if big else "<I").unpack_from for big in (False, True)}


def walk_pcapng(buf: bytes, pos: int, big: bool, ifaces: list, n: int) -> tuple[list, int, int]:
    """``(records, pos, n)``: the enhanced packet blocks wholly in ``buf`` from ``pos``
    (well-formed, of an interface with a link type), numbered from ``n + 1``, located in ``buf``
    (``PacketSource.chunks``); where the walk stopped (at any other block) and the last number."""
    head, trailer = _EPB_HEAD[big], _TRAILER[big]
    blen = len(buf)
    b = buf  # (as walk_pcap)
    out = []
    in_c = COMPILED  # (as walk_pcap)
    while pos + 32 <= blen:
        if in_c:  # (as walk_pcap)
            btype, blk, iid = _u32(b, pos, big), _u32(b, pos + 4, big), _u32(b, pos + 8, big)
            hi, lo = _u32(b, pos + 12, big), _u32(b, pos + 16, big)
            caplen, wirelen = _u32(b, pos + 20, big), _u32(b, pos + 24, big)
        else:
            btype, blk, iid, hi, lo, caplen, wirelen = head(buf, pos)
        end = pos + blk
        if (
            btype != _EPB
            or blk & 3
            or blk < 32
            or caplen > blk - 32
            or end > blen
            or (_u32(b, end - 4, big) if in_c else trailer(buf, end - 4)[0]) != blk
        ):
            break
        if iid >= len(ifaces) or ifaces[iid][0] is None:
            break
        iface = ifaces[iid]
        ts = _timestamp(iface, hi, lo)
        if not TS_MIN <= ts <= TS_MAX:
            break  # the block reader reports it
        n += 1
        w = wirelen  # (the one int of both lengths when they are equal, as they mostly are)
        out.append((n, ts, iface[0], pos + 28, w if caplen == wirelen else caplen, w))
        pos = end
    return out, pos, n


def _timestamp(iface: tuple, hi: int, lo: int) -> int:
    """ns since the epoch of a packet's 64-bit timestamp on interface ``iface``."""
    _, num, den, off, _ = iface
    if den == 1:
        return ((hi << 32) | lo) * num + off
    return ((hi << 32) | lo) * num // den + off


def _packet_block(st: _Pcapng, buf, pos: int, blk: int, name: str, unpack):
    """An enhanced packet block, or the obsolete packet block (``name``): ``unpack`` reads its
    interface, timestamp (high, low), captured and wire lengths after the block header."""
    st.n += 1
    if blk < 32:
        st.anomaly(st.n, "corrupt-block", f"{name} of {blk} bytes")
        return None
    iid, hi, lo, caplen, wirelen = unpack(buf, pos + 8)
    if caplen > blk - 32:
        st.anomaly(st.n, "corrupt-block", f"{name}: captured length {caplen} exceeds block length {blk}")
        return None
    iface = st.interface(iid)
    if iface is None:
        return None
    ts = _timestamp(iface, hi, lo)
    if TS_MIN <= ts <= TS_MAX:
        st.last_ts = ts
    else:
        st.anomaly(
            st.n,
            "timestamp-out-of-range",
            f"{name}: {(hi << 32) | lo} ticks on interface {iid} are {ts} ns, outside what a "
            "timestamp holds; read with the previous packet's time",
        )
    return [(st.n, st.last_ts, iface[0], pos + 28, caplen, wirelen)]


def _enhanced_packet(st: _Pcapng, buf, pos: int, blk: int, btype: int):
    return _packet_block(st, buf, pos, blk, "enhanced packet block", st.u5)


def _packet(st: _Pcapng, buf, pos: int, blk: int, btype: int):
    """The obsolete packet block: a 16-bit interface and a drop count where the enhanced packet
    block has a 32-bit interface (``upb`` skips the count)."""
    return _packet_block(st, buf, pos, blk, "packet block", st.upb)


def _simple_packet(st: _Pcapng, buf, pos: int, blk: int, btype: int):
    """Interface 0, no timestamp (the last one stands), the captured length from the block's."""
    st.n += 1
    if blk < 16:
        st.anomaly(st.n, "corrupt-block", f"simple packet block of {blk} bytes")
        return None
    if not st.ifaces or st.ifaces[0][0] is None:
        st.anomaly(st.n, "pcapng-bad-interface", "simple packet block without a valid interface 0")
        return None
    wirelen = st.u1(buf, pos + 8)[0]
    caplen = min(blk - 16, wirelen)
    snap = st.ifaces[0][4]
    if snap and snap < caplen:
        caplen = snap
    return [(st.n, st.last_ts, st.ifaces[0][0], pos + 12, caplen, wirelen)]


def _interface(st: _Pcapng, buf, pos: int, blk: int, btype: int):
    """An interface of the section: its link type, snap length and timestamp options."""
    if blk < 20:
        st.anomaly(st.n + 1, "corrupt-block", f"interface description block of {blk} bytes")
        st.ifaces.append((None, 1, 1, 0, 0))  # keep numbering interfaces so later indices stay right
        return None
    lt, snap = st.uidb(buf, pos + 8)
    num, den, off = 1000, 1, 0  # default: microseconds
    p = pos + 16
    oend = pos + blk - 4
    while p + 4 <= oend:
        code, olen = st.uopt(buf, p)
        if code == 0:
            break
        v = p + 4
        if v + olen > oend:
            st.anomaly(
                st.n + 1, "corrupt-block", f"interface {len(st.ifaces)}: option {code} runs past the block"
            )
            break
        if code == 9 and olen == 1:  # if_tsresol
            r = buf[v]
            if r & 0x80:
                num, den = _NS, 1 << (r & 0x7F)
            else:
                k = r & 0x7F
                if k <= 9:
                    num, den = 10 ** (9 - k), 1
                else:
                    num, den = 1, 10 ** (k - 9)
        elif code == 14 and olen == 8:  # if_tsoffset, seconds
            off = st.uq(buf, v)[0] * _NS
        p = v + olen + (-olen & 3)
    st.ifaces.append((lt, num, den, off, snap))
    if lt not in st.linktypes:
        st.linktypes.append(lt)
    return None


def _section_header(st: _Pcapng, buf, pos: int, blk: int, btype: int):
    """The byte order is already read (``_Pcapng.section``); a short block or another major
    version stops the walk."""
    if blk < 28:
        st.anomaly(st.n + 1, "corrupt-block", f"section header block of {blk} bytes; stopped reading")
        return _STOP
    major = st.uh(buf, pos + 12)[0]
    if major != 1:
        st.anomaly(st.n + 1, "corrupt-block", f"section header version {major}; stopped reading")
        return _STOP
    return None


def _journal(st: _Pcapng, buf, pos: int, blk: int, btype: int):
    st.n += 1
    st.anomaly(st.n, "skipped-record", "systemd journal export block (not a packet)")
    return None


def _other_block(st: _Pcapng, buf, pos: int, blk: int, btype: int):
    if btype not in _KNOWN_SKIP:
        st.anomaly(
            st.n + 1, "pcapng-unknown-block", f"skipped unknown block type 0x{btype:08x} ({blk} bytes)"
        )
    return None


# Block type -> reader(state, buf, pos, blk, btype): the records it yields, None, or _STOP.
# The walk has checked the block's lengths (at least 12, a multiple of 4, the trailing copy).
_PCAPNG_BLOCKS = {
    _EPB: _enhanced_packet,
    _PB: _packet,
    _SPB: _simple_packet,
    _IDB: _interface,
    _SHB_TYPE: _section_header,
    _JOURNAL: _journal,
}


def _unreadable(path: str, e: OSError) -> CaptureError:
    if isinstance(e, FileNotFoundError):
        reason = "no such file"
    elif isinstance(e, IsADirectoryError):
        reason = "is a directory, not a capture file"
    elif isinstance(e, PermissionError):
        reason = "permission denied"
    else:
        reason = f"cannot read ({e.strerror or e})"
    return CaptureError(path, reason, EXIT_UNREADABLE)


def _prescan_pcapng(head: bytes) -> list[int]:
    """Link types of the IDBs that precede the first packet in ``head``."""
    lts: list[int] = []
    pos = 0
    e = "<"
    while pos + 12 <= len(head):
        if head[pos : pos + 4] == _PCAPNG_SHB:
            e = ">" if head[pos + 8 : pos + 12] == _BOM_BE else "<"
        btype, blk = struct.unpack_from(e + "II", head, pos)
        if blk < 12 or blk & 3 or pos + blk > len(head):
            break
        if btype in (_EPB, _SPB, _PB):
            break
        if btype == _IDB and blk >= 20:
            lt = struct.unpack_from(e + "H", head, pos + 8)[0]
            if lt not in lts:
                lts.append(lt)
        pos += blk
    return lts


def _fill(read, rest: bytes, need: int) -> bytes:
    """``rest`` and what follows it in the stream: at least ``need`` bytes unless the stream ends.

    One read normally suffices (a file read returns ``CHUNK`` bytes); a pipe returns what
    has arrived, so this waits for more only when a record really needs it.
    """
    parts = [rest]
    have = len(rest)
    while have < need:
        data = read(max(CHUNK, need - have))
        if not data:
            break
        parts.append(data)
        have += len(data)
    return b"".join(parts) if len(parts) > 1 else rest


def _refill(f, stream):
    """``fill(buf, pos, need)``: the stream's bytes from ``buf[pos]`` on (the end of ``buf`` is
    where the stream is), at least ``need`` of them unless it ends.  A file that seeks reads
    them again from ``pos``: one read, where joining the rest of ``buf`` to the next read copies
    every chunk once more (reading the 42 MB bulk bench capture: 16 -> 11 ms of CPU).  A pipe
    or a gzip stream joins them (``_fill``)."""
    read = stream.read
    if stream is not f or not f.seekable():

        def join(buf: bytes, pos: int, need: int) -> bytes:
            return _fill(read, buf[pos:], need)

        return join

    def reread(buf: bytes, pos: int, need: int) -> bytes:
        rest = len(buf) - pos
        if rest >= need:
            return buf[pos:] if pos else buf
        if rest:
            f.seek(-rest, os.SEEK_CUR)
        data = read(max(CHUNK, need))
        return data if len(data) >= need else _fill(read, data, need)

    return reread


def _is_regular(f) -> bool:
    try:
        return stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (OSError, ValueError):
        return False


#: The path that means standard input, wherever a capture is accepted.
STDIN = "-"


def open_capture(path) -> PacketSource:
    """Open ``path`` (str or path-like; ``"-"`` is standard input) as a capture.

    The input is opened once: the format is recognised from its first bytes
    and iteration continues from there, so pipes, FIFOs and ``/dev/stdin``
    work, packets being yielded as they arrive.  Raises ``CaptureError``
    (exit code 2 or 3) when it is not a readable capture.
    """
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    try:
        if path == STDIN:
            f = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)
        else:
            f = open(path, "rb", buffering=0)
    except (OSError, ValueError, AttributeError) as e:
        if not isinstance(e, OSError):  # sys.stdin closed, None or replaced
            e = OSError(0, "standard input is not available")
        raise _unreadable(path, e) from None
    try:
        return _recognise(path, f)
    except BaseException:
        f.close()
        raise


def _recognise(path: str, f) -> PacketSource:
    try:
        if path == STDIN and f.isatty():
            raise CaptureError(
                "standard input",
                "is a terminal, not a capture (pipe one in: tcpdump -w - | amqpcap show -)",
                EXIT_NOT_A_CAPTURE,
            )
        # Enough for the pcap header (24 bytes) or the pcapng section header (28);
        # a file gives _PEEK bytes at once, a pipe what has arrived.
        raw = _fill(f.read, b"", 28) if path == STDIN or not _is_regular(f) else f.read(_PEEK)
        raw = raw or b""
    except IsADirectoryError as e:
        raise _unreadable(path, e) from None
    except OSError as e:
        raise _unreadable(path, e) from None
    if not raw:
        raise CaptureError(path, "empty file, not a capture", EXIT_NOT_A_CAPTURE)
    gz = raw[:2] == b"\x1f\x8b"
    stream = f
    head = raw
    if gz:
        stream = _GzipStream(f.read, raw)
        head = _fill(stream.read, b"", 28)
        if not head:
            why = stream.error or "decompresses to nothing"
            raise CaptureError(path, f"gzip file is not a capture ({why})", EXIT_NOT_A_CAPTURE)
    first = (f, stream, head)

    magic = head[:4]
    what = "gzip-compressed file" if gz else "file"
    if magic in _PCAP_MAGICS:
        endian, mul, hl = _PCAP_MAGICS[magic]
        if len(head) < 24:
            raise CaptureError(
                path, f"pcap file header cut short ({len(head)} of 24 bytes)", EXIT_NOT_A_CAPTURE
            )
        snaplen, network = struct.unpack_from(endian + "II", head, 16)
        linktype = network & 0xFFFF  # upper bits: FCS length flags
        return PacketSource(path, "pcap", gz, [linktype], snaplen, (endian, mul, hl, linktype), first)
    if magic == _PCAPNG_SHB:
        if len(head) < 28:
            raise CaptureError(
                path, f"pcapng section header cut short ({len(head)} bytes)", EXIT_NOT_A_CAPTURE
            )
        bom = head[8:12]
        if bom not in (_BOM_LE, _BOM_BE):
            raise CaptureError(
                path,
                f"pcapng section header has bad byte-order magic ({_fmt_magic(bom)})",
                EXIT_NOT_A_CAPTURE,
            )
        e = "<" if bom == _BOM_LE else ">"
        major = struct.unpack_from(e + "H", head, 12)[0]
        if major != 1:
            raise CaptureError(path, f"unsupported pcapng version {major}", EXIT_NOT_A_CAPTURE)
        return PacketSource(path, "pcapng", gz, _prescan_pcapng(head), None, None, first)
    for m, name in _OTHER_MAGICS:
        if head.startswith(m):
            raise CaptureError(path, f"{what} is {name}, not a pcap/pcapng capture", EXIT_NOT_A_CAPTURE)
    raise CaptureError(
        path, f"{what} is not a pcap/pcapng capture (starts with {_fmt_magic(head)})", EXIT_NOT_A_CAPTURE
    )


# The walks over pcap records and pcapng packet blocks, chosen once at import: the ones above,
# or the same compiled (compiled.py's part "fastread": this module built by Cython with the
# types of capture/fastread.pxd).  The compiled module chooses nothing: it is what is chosen.
SOURCE_STAMP, _fast = compiled.twin("fastread", AMQPCAP_SOURCE_STAMP if COMPILED else None)  # noqa: F821 (stamp.pxd)
_pcap_records = _fast.walk_pcap if _fast is not None else walk_pcap
_pcapng_records = _fast.walk_pcapng if _fast is not None else walk_pcapng


def compiled_in_use() -> bool:
    """True if pcap records are walked by the compiled walker."""
    return _fast is not None
