# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled walks over pcap records and pcapng packet blocks (optional; see compiled.py).

``pcap_records`` is reader.py's ``_walk_pcap`` in C: it cuts every record lying wholly in the
buffer and stops at the first one that does not (or whose header does not), leaving refills,
truncation and anomalies to the reader.  ``pcapng_records`` is ``_walk_pcapng``: the same for
well-formed enhanced packet blocks of a known interface; every other block (section,
interface, statistics, simple packets, anything damaged) stops it, and the reader's block
readers take that block.
"""

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from cpython.bytes cimport PyBytes_FromStringAndSize

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

# compiled.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_STAMP = (<bytes>AMQPCAP_SOURCE_STAMP).decode("ascii")

cdef int64_t NS = 1_000_000_000


cdef inline uint32_t rd32(const uint8_t *p, bint big) noexcept nogil:
    if big:
        return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]
    return (<uint32_t>p[3] << 24) | (<uint32_t>p[2] << 16) | (<uint32_t>p[1] << 8) | p[0]


def pcap_records(bytes buf, Py_ssize_t pos, Py_ssize_t hl, bint big, int64_t mul, linktype, int64_t n):
    """``(records, pos, n)``: the records wholly in ``buf`` from ``pos`` as the reader yields them,
    ``(number, ts, linktype, data, wirelen)``, numbered from ``n + 1``; where the walk stopped and
    the last number.  ``hl``: the record header length; ``big``: big-endian headers; ``mul``:
    nanoseconds per fraction unit (timestamps fit 64 bits: seconds and fraction are 32-bit)."""
    cdef const uint8_t *b = buf
    cdef Py_ssize_t blen = len(buf), end
    cdef uint32_t caplen
    cdef int64_t ts
    out = []
    while pos + hl <= blen:
        caplen = rd32(b + pos + 8, big)
        end = pos + hl + caplen
        if end > blen:
            break
        n += 1
        ts = <int64_t>rd32(b + pos, big) * NS + <int64_t>rd32(b + pos + 4, big) * mul
        out.append(
            (
                n,
                ts,
                linktype,
                PyBytes_FromStringAndSize(<const char *>(b + pos + hl), caplen),
                rd32(b + pos + 12, big),
            )
        )
        pos = end
    return out, pos, n


cdef extern from *:
    """
    /* t * num // den + off in 128 bits; 0 if the result does not fit 64 (the reader computes it). */
    static int amqpcap_scale(uint64_t t, int64_t num, int64_t den, int64_t off, int64_t *out) {
        __int128 v;
        if (num <= 0 || den <= 0) return 0;
        v = (__int128)t * num;
        v = v / den + off;
        if (v > (__int128)INT64_MAX || v < (__int128)INT64_MIN) return 0;
        *out = (int64_t)v;
        return 1;
    }
    """
    bint amqpcap_scale(uint64_t t, int64_t num, int64_t den, int64_t off, int64_t *out)



def pcapng_records(bytes buf, Py_ssize_t pos, bint big, list ifaces, int64_t n):
    """``(records, pos, n)``: the enhanced packet blocks wholly in ``buf`` from ``pos`` that
    ``_walk_pcapng`` takes (well-formed, known interface with a link type), as it yields them,
    numbered from ``n + 1``; where the walk stopped (at any other block) and the last number.
    ``ifaces``: the reader's ``(linktype, num, den, off, snaplen)`` per interface of the section;
    timestamps that would not fit 64 bits are left to the reader too."""
    cdef const uint8_t *b = buf
    cdef Py_ssize_t blen = len(buf), end, nifaces = len(ifaces)
    cdef uint32_t blk, iid, caplen
    cdef int64_t ts, num, den, off
    cdef tuple iface
    out = []
    while pos + 32 <= blen:
        if rd32(b + pos, big) != 6:
            break
        blk = rd32(b + pos + 4, big)
        caplen = rd32(b + pos + 20, big)
        end = pos + blk
        if blk & 3 or blk < 32 or caplen > blk - 32 or end > blen or rd32(b + end - 4, big) != blk:
            break
        iid = rd32(b + pos + 8, big)
        if iid >= nifaces:
            break
        iface = <tuple>ifaces[iid]
        if iface[0] is None:
            break
        try:
            num, den, off = iface[1], iface[2], iface[3]
        except OverflowError:
            break
        if not amqpcap_scale((<uint64_t>rd32(b + pos + 12, big) << 32) | rd32(b + pos + 16, big), num, den,
                             off, &ts):
            break
        n += 1
        out.append(
            (
                n,
                ts,
                iface[0],
                PyBytes_FromStringAndSize(<const char *>(b + pos + 28), caplen),
                rd32(b + pos + 24, big),
            )
        )
        pos = end
    return out, pos, n
