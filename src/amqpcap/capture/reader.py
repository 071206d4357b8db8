"""Capture files -> packet records (the first, I/O-doing stage).

``open_capture(path)`` recognises the file by its content, never by its name:

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

Errors and exit codes -- ``CaptureError.exit_code``:

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
and cutting records out of the chunk with ``struct.unpack_from``; the only
per-packet objects are the yielded tuple and the ``bytes`` slice of the data.
Memory is bounded by ``CHUNK + MAX_RECORD``.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Iterator

__all__ = [
    "CaptureError",
    "PacketSource",
    "open_capture",
    "EXIT_NOT_A_CAPTURE",
    "EXIT_UNREADABLE",
    "MAX_RECORD",
]

EXIT_NOT_A_CAPTURE = 2
EXIT_UNREADABLE = 3

#: Largest record / block we are prepared to buffer (bytes).
MAX_RECORD = 256 * 1024 * 1024
#: Read size; every refill copies at most one partial record.
CHUNK = 1 << 20
_PEEK = 1 << 16

_NS = 1_000_000_000

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
_KNOWN_SKIP = frozenset({
    _NRB, _ISB,
    7,            # IRIG timestamp (obsolete)
    8,            # ARINC 429 (obsolete)
    10,           # decryption secrets
    0x00000BAD,   # custom block, copiable
    0x40000BAD,   # custom block, do not copy
    0x80000001,   # Apple process information
})

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
    """gzip decompressor with ``read(n)`` that never loses data.

    ``gzip.GzipFile.read`` raises on a cut or corrupt stream and drops what it
    had decompressed in that call; here the member header and trailer are
    parsed by hand around a raw-deflate ``zlib`` decompressor, so every byte
    that can be decompressed is returned and the problem is recorded in
    ``error`` (``cut`` tells a cut stream from a corrupt one).  Handles
    concatenated members and zero padding after them.
    """

    __slots__ = ("_f", "_in", "_d", "_crc", "_size", "_state", "_members", "_eof_in",
                 "_done", "error", "cut")

    def __init__(self, f) -> None:
        self._f = f
        self._in = b""       # compressed bytes read but not given to zlib
        self._d = None
        self._crc = 0
        self._size = 0
        self._state = 0      # 0 member header, 1 deflate data, 2 trailer
        self._members = 0
        self._eof_in = False
        self._done = False
        self.error: str | None = None
        self.cut = False

    def _fill(self, need: int) -> bool:
        while len(self._in) < need:
            if self._eof_in:
                return False
            data = self._f.read(CHUNK)
            if not data:
                self._eof_in = True
                return False
            self._in += data
        return True

    def _stop(self, error: str | None, cut: bool = False) -> None:
        self.error = error
        self.cut = cut
        self._done = True

    def _header_len(self) -> int:
        """Length of the member header at the start of ``_in``; 0 = need more."""
        b = self._in
        if len(b) < 10:
            return 0
        if b[0] != 0x1F or b[1] != 0x8B:
            raise ValueError("trailing garbage after the gzip stream" if self._members
                             else "bad gzip header")
        if b[2] != 8:
            raise ValueError(f"unknown gzip compression method {b[2]}")
        flg = b[3]
        p = 10
        if flg & 4:
            if len(b) < p + 2:
                return 0
            p += 2 + (b[p] | (b[p + 1] << 8))
        for bit in (8, 16):
            if flg & bit:
                i = b.find(b"\0", p)
                if i < 0:
                    if len(b) > _PEEK:
                        raise ValueError("gzip header name/comment too long")
                    return 0
                p = i + 1
        if flg & 2:
            p += 2
        return p if len(b) >= p else 0

    def read(self, n: int) -> bytes:
        parts = []
        need = n
        while need > 0 and not self._done:
            st = self._state
            if st == 1:
                d = self._d
                if d.unconsumed_tail:
                    data = d.unconsumed_tail
                elif self._in:
                    data = self._in
                    self._in = b""
                else:
                    data = b"" if self._eof_in else self._f.read(CHUNK)
                    if not data:
                        self._eof_in = True
                try:
                    out = d.decompress(data, need)
                except zlib.error as e:
                    self._stop(f"corrupt gzip data ({e})")
                    break
                if out:
                    self._crc = zlib.crc32(out, self._crc)
                    self._size += len(out)
                    parts.append(out)
                    need -= len(out)
                if d.eof:
                    self._in = d.unused_data
                    self._state = 2
                elif not data and not out:
                    self._stop("gzip stream cut short", cut=True)
            elif st == 2:
                if not self._fill(8):
                    self._stop("gzip stream cut short", cut=True)
                    break
                crc, isize = struct.unpack_from("<II", self._in)
                self._in = self._in[8:]
                if crc != self._crc or isize != self._size & 0xFFFFFFFF:
                    self._stop("corrupt gzip data (CRC32/length check failed)")
                    break
                self._members += 1
                self._state = 0
            else:
                if not self._in and not self._fill(1):
                    self._done = True  # clean end between members
                    break
                if self._in[0] == 0:
                    self._in = self._in.lstrip(b"\0")
                    continue
                try:
                    hl = self._header_len()
                except ValueError as e:
                    self._stop(str(e))
                    break
                if not hl:
                    if not self._fill(len(self._in) + 1):
                        self._stop("gzip stream cut short", cut=True)
                    continue
                self._in = self._in[hl:]
                self._d = zlib.decompressobj(-15)
                self._crc = 0
                self._size = 0
                self._state = 1
        return b"".join(parts)

    def close(self) -> None:
        self._f.close()


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

    Each iteration re-reads the file from the start and resets
    ``anomalies`` (in place), so a source can be iterated more than once.
    """

    def __init__(self, path: str, fmt: str, gz: bool, linktypes: list[int],
                 snaplen: int | None, pcap_hdr: tuple | None) -> None:
        self.path = path
        self.format = fmt + ("+gzip" if gz else "")
        self.linktypes = linktypes
        self.snaplen = snaplen
        self.anomalies: list[tuple[int, int, str, str]] = []
        self._gz = gz
        self._pcap_hdr = pcap_hdr
        self._gens: list = []

    def __repr__(self) -> str:
        return (f"PacketSource({self.path!r}, format={self.format!r}, "
                f"linktypes={self.linktypes!r})")

    def __enter__(self) -> "PacketSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the files of iterations still in progress."""
        gens, self._gens = self._gens, []
        for g in gens:
            g.close()

    def _open(self):
        try:
            f = open(self.path, "rb")
        except OSError as e:  # vanished between open_capture and iteration
            raise _unreadable(self.path, e) from None
        return _GzipStream(f) if self._gz else f

    def __iter__(self) -> Iterator[tuple[int, int, int, bytes, int]]:
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
        unpack = struct.Struct(endian + "IIII").unpack_from
        stream = self._open()
        read = stream.read
        n = 0
        ts = 0
        try:
            buf = read(CHUNK)
            pos = 24
            blen = len(buf)
            anomalies = self.anomalies
            while True:
                if pos + hl > blen:
                    buf = buf[pos:] + read(CHUNK)
                    pos = 0
                    blen = len(buf)
                    if blen < hl:
                        self._finish(stream, n + 1, ts, blen, "a record header")
                        return
                sec, frac, caplen, wirelen = unpack(buf, pos)
                end = pos + hl + caplen
                if end > blen:
                    if caplen > MAX_RECORD:
                        anomalies.append((n + 1, sec * _NS + frac * mul, "oversize-record",
                                          f"record claims {caplen} captured bytes "
                                          f"(limit {MAX_RECORD}); stopped reading"))
                        return
                    rest = buf[pos:]
                    buf = rest + read(max(CHUNK, hl + caplen - len(rest)))
                    pos = 0
                    blen = len(buf)
                    end = hl + caplen
                    if end > blen:
                        self._finish(stream, n + 1, sec * _NS + frac * mul, blen,
                                     f"a {hl + caplen}-byte record")
                        return
                n += 1
                ts = sec * _NS + frac * mul
                yield (n, ts, linktype, buf[pos + hl:end], wirelen)
                pos = end
        finally:
            stream.close()

    # -- pcapng --------------------------------------------------------------

    def _iter_pcapng(self):
        stream = self._open()
        read = stream.read
        anomalies = self.anomalies
        linktypes = self.linktypes
        n = 0
        last_ts = 0
        ifaces: list = []
        u2 = struct.Struct("<II").unpack_from  # until the first SHB sets the order
        u7 = struct.Struct("<7I").unpack_from
        u1 = u5 = None
        try:
            buf = read(CHUNK)
            pos = 0
            blen = len(buf)
            while True:
                # fast path: a well-formed EPB wholly in the buffer, known interface
                if pos + 32 <= blen:
                    btype, blk, iid, hi, lo, caplen, wirelen = u7(buf, pos)
                    if btype == 6 and caplen <= blk - 32 and not blk & 3:
                        end = pos + blk
                        if end <= blen and iid < len(ifaces) and u1(buf, end - 4)[0] == blk:
                            lt, num, den, off, _snap = ifaces[iid]
                            if lt is not None:
                                n += 1
                                if den == 1:
                                    last_ts = (((hi << 32) | lo) * num) + off
                                else:
                                    last_ts = (((hi << 32) | lo) * num) // den + off
                                yield (n, last_ts, lt, buf[pos + 28:pos + 28 + caplen], wirelen)
                                pos = end
                                continue
                # general path: every block type, refills, checks and anomalies
                if pos + 12 > blen:
                    buf = buf[pos:] + read(CHUNK)
                    pos = 0
                    blen = len(buf)
                    if blen < 12:
                        self._finish(stream, n + 1, last_ts, blen, "a block header")
                        return
                btype, blk = u2(buf, pos)
                if btype == _SHB_TYPE:  # palindrome: reads the same in both byte orders
                    bom = buf[pos + 8:pos + 12]
                    if bom == _BOM_LE:
                        e = "<"
                    elif bom == _BOM_BE:
                        e = ">"
                    else:
                        anomalies.append((n + 1, last_ts, "corrupt-block",
                                          f"section header with bad byte-order magic "
                                          f"{_fmt_magic(bom)}; stopped reading"))
                        return
                    u2 = struct.Struct(e + "II").unpack_from
                    u1 = struct.Struct(e + "I").unpack_from
                    u5 = struct.Struct(e + "5I").unpack_from
                    u7 = struct.Struct(e + "7I").unpack_from
                    uidb = struct.Struct(e + "HxxI").unpack_from
                    upb = struct.Struct(e + "HH4I").unpack_from
                    uopt = struct.Struct(e + "HH").unpack_from
                    uq = struct.Struct(e + "q").unpack_from
                    uh = struct.Struct(e + "H").unpack_from
                    ifaces = []
                    btype, blk = u2(buf, pos)
                if blk < 12 or blk & 3:
                    anomalies.append((n + 1, last_ts, "corrupt-block",
                                      f"block type 0x{btype:08x} has invalid length {blk}; "
                                      "stopped reading"))
                    return
                end = pos + blk
                if end > blen:
                    if blk > MAX_RECORD:
                        anomalies.append((n + 1, last_ts, "oversize-record",
                                          f"block type 0x{btype:08x} claims {blk} bytes "
                                          f"(limit {MAX_RECORD}); stopped reading"))
                        return
                    rest = buf[pos:]
                    buf = rest + read(max(CHUNK, blk - len(rest)))
                    pos = 0
                    blen = len(buf)
                    end = blk
                    if end > blen:
                        self._finish(stream, n + 1, last_ts, blen,
                                     f"a {blk}-byte block (type 0x{btype:08x})")
                        return
                if u1(buf, end - 4)[0] != blk:
                    anomalies.append((n + 1, last_ts, "corrupt-block",
                                      f"block type 0x{btype:08x}: trailing length "
                                      f"{u1(buf, end - 4)[0]} != {blk}; stopped reading"))
                    return

                if btype == _EPB:
                    n += 1
                    if blk < 32:
                        anomalies.append((n, last_ts, "corrupt-block",
                                          f"enhanced packet block of {blk} bytes"))
                        pos = end
                        continue
                    iid, hi, lo, caplen, wirelen = u5(buf, pos + 8)
                    if caplen > blk - 32:
                        anomalies.append((n, last_ts, "corrupt-block",
                                          f"enhanced packet block: captured length {caplen} "
                                          f"exceeds block length {blk}"))
                        pos = end
                        continue
                    if iid >= len(ifaces) or ifaces[iid][0] is None:
                        anomalies.append((n, last_ts, "pcapng-bad-interface",
                                          f"packet names interface {iid}; the section "
                                          f"describes {len(ifaces)}"))
                        pos = end
                        continue
                    lt, num, den, off, _snap = ifaces[iid]
                    if den == 1:
                        last_ts = (((hi << 32) | lo) * num) + off
                    else:
                        last_ts = (((hi << 32) | lo) * num) // den + off
                    yield (n, last_ts, lt, buf[pos + 28:pos + 28 + caplen], wirelen)
                    pos = end
                    continue

                if btype == _SPB:
                    n += 1
                    if blk < 16:
                        anomalies.append((n, last_ts, "corrupt-block",
                                          f"simple packet block of {blk} bytes"))
                    elif not ifaces or ifaces[0][0] is None:
                        anomalies.append((n, last_ts, "pcapng-bad-interface",
                                          "simple packet block without a valid interface 0"))
                    else:
                        wirelen = u1(buf, pos + 8)[0]
                        caplen = blk - 16
                        if wirelen < caplen:
                            caplen = wirelen
                        snap = ifaces[0][4]
                        if snap and snap < caplen:
                            caplen = snap
                        yield (n, last_ts, ifaces[0][0], buf[pos + 12:pos + 12 + caplen],
                               wirelen)
                    pos = end
                    continue

                if btype == _IDB:
                    if blk < 20:
                        anomalies.append((n + 1, last_ts, "corrupt-block",
                                          f"interface description block of {blk} bytes"))
                        # keep numbering interfaces so later indices stay right
                        ifaces.append((None, 1, 1, 0, 0))
                        pos = end
                        continue
                    lt, snap = uidb(buf, pos + 8)
                    num, den, off = 1000, 1, 0  # default: microseconds
                    p = pos + 16
                    oend = end - 4
                    while p + 4 <= oend:
                        code, olen = uopt(buf, p)
                        if code == 0:
                            break
                        v = p + 4
                        if v + olen > oend:
                            anomalies.append((n + 1, last_ts, "corrupt-block",
                                              f"interface {len(ifaces)}: option {code} "
                                              "runs past the block"))
                            break
                        if code == 9 and olen == 1:
                            r = buf[v]
                            if r & 0x80:
                                num, den = _NS, 1 << (r & 0x7F)
                            else:
                                k = r & 0x7F
                                if k <= 9:
                                    num, den = 10 ** (9 - k), 1
                                else:
                                    num, den = 1, 10 ** (k - 9)
                        elif code == 14 and olen == 8:
                            off = uq(buf, v)[0] * _NS
                        p = v + olen + (-olen & 3)
                    ifaces.append((lt, num, den, off, snap))
                    if lt not in linktypes:
                        linktypes.append(lt)
                    pos = end
                    continue

                if btype == _PB:
                    n += 1
                    if blk < 32:
                        anomalies.append((n, last_ts, "corrupt-block",
                                          f"packet block of {blk} bytes"))
                        pos = end
                        continue
                    iid, _drops, hi, lo, caplen, wirelen = upb(buf, pos + 8)
                    if caplen > blk - 32:
                        anomalies.append((n, last_ts, "corrupt-block",
                                          f"packet block: captured length {caplen} "
                                          f"exceeds block length {blk}"))
                    elif iid >= len(ifaces) or ifaces[iid][0] is None:
                        anomalies.append((n, last_ts, "pcapng-bad-interface",
                                          f"packet names interface {iid}; the section "
                                          f"describes {len(ifaces)}"))
                    else:
                        lt, num, den, off = ifaces[iid][:4]
                        last_ts = (((hi << 32) | lo) * num) // den + off
                        yield (n, last_ts, lt, buf[pos + 28:pos + 28 + caplen], wirelen)
                    pos = end
                    continue

                if btype == _SHB_TYPE:
                    if blk < 28:
                        anomalies.append((n + 1, last_ts, "corrupt-block",
                                          f"section header block of {blk} bytes; "
                                          "stopped reading"))
                        return
                    major = uh(buf, pos + 12)[0]
                    if major != 1:
                        anomalies.append((n + 1, last_ts, "corrupt-block",
                                          f"section header version {major}; stopped reading"))
                        return
                elif btype == _JOURNAL:
                    n += 1
                    anomalies.append((n, last_ts, "skipped-record",
                                      "systemd journal export block (not a packet)"))
                elif btype not in _KNOWN_SKIP:
                    anomalies.append((n + 1, last_ts, "pcapng-unknown-block",
                                      f"skipped unknown block type 0x{btype:08x} "
                                      f"({blk} bytes)"))
                pos = end
        finally:
            stream.close()


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
        if head[pos:pos + 4] == _PCAPNG_SHB:
            e = ">" if head[pos + 8:pos + 12] == _BOM_BE else "<"
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


def open_capture(path) -> PacketSource:
    """Open ``path`` (str or path-like) as a capture; see the module docstring.

    Raises ``CaptureError`` (exit code 2 or 3) when it is not a readable
    capture.  Does not keep the file open: each iteration opens it again.
    """
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise _unreadable(path, e) from None
    try:
        try:
            head = f.read(_PEEK)
        except OSError as e:
            raise _unreadable(path, e) from None
        if not head:
            raise CaptureError(path, "empty file, not a capture", EXIT_NOT_A_CAPTURE)
        gz = head[:2] == b"\x1f\x8b"
        if gz:
            f.seek(0)
            g = _GzipStream(f)
            head = g.read(_PEEK)
            if not head:
                why = g.error or "decompresses to nothing"
                raise CaptureError(path, f"gzip file is not a capture ({why})",
                                   EXIT_NOT_A_CAPTURE)
    finally:
        f.close()

    magic = head[:4]
    what = "gzip-compressed file" if gz else "file"
    if magic in _PCAP_MAGICS:
        endian, mul, hl = _PCAP_MAGICS[magic]
        if len(head) < 24:
            raise CaptureError(path, f"pcap file header cut short ({len(head)} of 24 bytes)",
                               EXIT_NOT_A_CAPTURE)
        snaplen, network = struct.unpack_from(endian + "II", head, 16)
        linktype = network & 0xFFFF  # upper bits: FCS length flags
        return PacketSource(path, "pcap", gz, [linktype], snaplen,
                            (endian, mul, hl, linktype))
    if magic == _PCAPNG_SHB:
        if len(head) < 28:
            raise CaptureError(path, f"pcapng section header cut short ({len(head)} bytes)",
                               EXIT_NOT_A_CAPTURE)
        bom = head[8:12]
        if bom not in (_BOM_LE, _BOM_BE):
            raise CaptureError(path, f"pcapng section header has bad byte-order magic "
                               f"({_fmt_magic(bom)})", EXIT_NOT_A_CAPTURE)
        e = "<" if bom == _BOM_LE else ">"
        major = struct.unpack_from(e + "H", head, 12)[0]
        if major != 1:
            raise CaptureError(path, f"unsupported pcapng version {major}",
                               EXIT_NOT_A_CAPTURE)
        return PacketSource(path, "pcapng", gz, _prescan_pcapng(head), None, None)
    for m, name in _OTHER_MAGICS:
        if head.startswith(m):
            raise CaptureError(path, f"{what} is {name}, not a pcap/pcapng capture",
                               EXIT_NOT_A_CAPTURE)
    raise CaptureError(path, f"{what} is not a pcap/pcapng capture (starts with "
                       f"{_fmt_magic(head)})", EXIT_NOT_A_CAPTURE)
