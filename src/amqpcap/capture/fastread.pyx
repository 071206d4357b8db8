# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled walk over classic pcap records (optional; see amqp/accel.py).

``pcap_records`` is the inner loop of ``PacketSource._iter_pcap`` (reader.py) in C: it cuts
every record lying wholly in the buffer, as the reader would, and stops at the first one that
does not (or whose header does not), leaving refills, truncation and anomalies to the reader.
"""

from libc.stdint cimport int64_t, uint8_t, uint32_t
from cpython.bytes cimport PyBytes_FromStringAndSize

cdef extern from *:
    """
    #ifndef AMQPCAP_SOURCE_SHA256
    #define AMQPCAP_SOURCE_SHA256 ""
    #endif
    """
    const char *AMQPCAP_SOURCE_SHA256

# accel.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_SHA256 = (<bytes>AMQPCAP_SOURCE_SHA256).decode("ascii")

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
