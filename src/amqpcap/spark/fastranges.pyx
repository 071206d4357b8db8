# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the per-packet loops of spark/ranges.py (optional; see compiled.py).

``pcap_index`` is ``_pcap_block`` in C: the pcap records of a block, as index entries, and
their conversation keys.
``conversation_keys`` is ``_Keys.of_block``'s fixed-offset path: the conversation key of every
IPv4/TCP packet on an Ethernet or Linux cooked link, the rest left to ``link.parse_packet``.
``bucket_batch`` is ``BucketSource._batch``: a bucket's index entries to the packet tuples the
reader yields, their bytes sliced from the capture.
"""

from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from cpython.bytes cimport PyBytes_FromStringAndSize

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

# compiled.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_STAMP = (<bytes>AMQPCAP_SOURCE_STAMP).decode("ascii")

cdef int64_t NS = 1_000_000_000

# ranges.RECORD, field by field (little-endian, as x86 and arm64 store it)
cdef packed struct Entry:
    uint32_t ord
    uint32_t cap
    uint32_t wire
    uint16_t lt
    uint16_t pad
    uint64_t off
    int64_t ts


cdef inline uint32_t rd32(const uint8_t *p, bint big) noexcept nogil:
    if big:
        return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]
    return (<uint32_t>p[3] << 24) | (<uint32_t>p[2] << 16) | (<uint32_t>p[1] << 8) | p[0]


cdef inline uint64_t be(const uint8_t *p, int width) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(width):
        v = (v << 8) | p[i]
    return v


cdef inline uint64_t mix(uint64_t x) noexcept nogil:
    x ^= x >> 30
    x *= 0xBF58476D1CE4E5B9ULL
    x ^= x >> 27
    x *= 0x94D049BB133111EBULL
    return x ^ (x >> 31)


cdef inline uint64_t pair_key(uint64_t e1, uint64_t e2) noexcept nogil:
    cdef uint64_t lo = e1 if e1 < e2 else e2
    cdef uint64_t hi = e2 if e1 < e2 else e1
    cdef uint64_t k = mix(lo * 0x9E3779B97F4A7C15ULL + hi)
    return k if k else 1


def pcap_index(const uint8_t[::1] buf, Py_ssize_t end, Py_ssize_t hl, bint big, int64_t mul,
               int linktype, uint8_t[::1] out, uint64_t[::1] keys):
    """``(n, pos, slow)``: the index entries of the pcap records wholly in ``buf`` that start
    before ``end`` written to ``out`` (room for ``len(buf) // hl + 1`` entries; ``off``: the
    data's offset in ``buf``; ``ord`` unset), their conversation keys to ``keys`` (as
    ``conversation_keys``: one walk, while the record is in cache); where the walk stopped; the
    positions of the entries left to ``link.parse_packet``."""
    cdef Py_ssize_t blen = buf.shape[0], pos = 0, nxt
    cdef Py_ssize_t room = min(out.shape[0] // sizeof(Entry), keys.shape[0])
    cdef Py_ssize_t n = 0, nslow = 0
    cdef Entry *e = <Entry *>&out[0] if room else NULL
    cdef uint64_t *k = &keys[0] if room else NULL
    cdef const uint8_t *b = &buf[0] if blen else NULL
    cdef uint32_t caplen
    slow = []
    while pos < end and pos + hl <= blen and n < room:
        caplen = rd32(b + pos + 8, big)
        nxt = pos + hl + caplen
        if nxt > blen:
            break
        e[n].ord = 0
        e[n].cap = caplen
        e[n].wire = rd32(b + pos + 12, big)
        e[n].lt = <uint16_t>linktype
        e[n].pad = 0
        e[n].off = <uint64_t>(pos + hl)
        e[n].ts = <int64_t>rd32(b + pos, big) * NS + <int64_t>rd32(b + pos + 4, big) * mul
        k[n] = 0
        if not entry_key(b + pos + hl, caplen, <uint16_t>linktype, &k[n]):
            slow.append(n)
        n += 1
        pos = nxt
    return n, pos, slow


cdef inline int entry_key(const uint8_t *p, uint32_t cap, uint16_t lt, uint64_t *key) noexcept nogil:
    """The key of an IPv4/TCP packet on an Ethernet (1) or Linux cooked (113) link starting at
    ``p``; 0 if the packet is not one (``link.parse_packet`` keys it)."""
    cdef Py_ssize_t hlen, et, ihl
    cdef const uint8_t *ip
    cdef const uint8_t *tcp
    if lt == 1:
        hlen, et = 14, 12
    elif lt == 113:
        hlen, et = 16, 14
    else:
        return 0
    if cap < hlen + 24:
        return 0
    ip = p + hlen
    ihl = (ip[0] & 15) * 4
    if (
        ((<uint32_t>p[et] << 8) | p[et + 1]) != 0x0800
        or (ip[0] >> 4) != 4
        or ihl < 20
        or ip[9] != 6
        or cap < hlen + ihl + 4
    ):
        return 0
    tcp = ip + ihl
    key[0] = pair_key((be(ip + 12, 4) << 16) | be(tcp, 2), (be(ip + 16, 4) << 16) | be(tcp + 2, 2))
    return 1


def conversation_keys(const uint8_t[::1] buf, const uint8_t[::1] recs, uint64_t[::1] keys):
    """The key of every index entry in ``recs`` (offsets relative to ``buf``) that is IPv4/TCP on
    an Ethernet (1) or Linux cooked (113) link, into ``keys``; the positions of the others (a
    list: ``link.parse_packet`` keys them)."""
    cdef Py_ssize_t n = recs.shape[0] // sizeof(Entry), i
    cdef const Entry *e = <const Entry *>&recs[0] if n else NULL
    cdef const uint8_t *b = &buf[0] if buf.shape[0] else NULL
    slow = []
    for i in range(n):
        if not entry_key(b + e[i].off, e[i].cap, e[i].lt, &keys[i]):
            slow.append(i)
    return slow


def bucket_batch(const uint8_t[::1] data, const uint8_t[::1] recs, int64_t lo, int64_t base):
    """The packets of the index entries ``recs`` as the reader yields them, ``(number, ts,
    linktype, data, wirelen)``: number ``ord + base + 1``, data from ``data`` (which starts at
    the capture's offset ``lo``)."""
    cdef Py_ssize_t n = recs.shape[0] // sizeof(Entry), i
    cdef const Entry *e = <const Entry *>&recs[0] if n else NULL
    cdef const uint8_t *b = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t dlen = data.shape[0]
    cdef int64_t at
    out = []
    for i in range(n):
        at = <int64_t>e[i].off - lo
        if at < 0 or at + e[i].cap > dlen:
            raise ValueError("index entry outside the capture's bytes")
        out.append(
            (
                <int64_t>e[i].ord + base + 1,
                e[i].ts,
                e[i].lt,
                PyBytes_FromStringAndSize(<const char *>(b + at), e[i].cap),
                e[i].wire,
            )
        )
    return out
