# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled ``link.parse_packet`` for the common packet (optional; see compiled.py).

The fast path of link.py in C: Ethernet (untagged), Linux SLL / SLL2, and raw IP link
headers, then an IPv4 header without options (not fragmented, lengths consistent) or an IPv6
header without extension headers, then TCP, all inside the captured bytes.  Every other packet
(VLAN tags, BSD loopback, options, fragments, TSO lengths, truncation, anything malformed) goes
to ``link.parse_packet_reference``, which gives the answer: the result is the reference's by
construction, a ``link.Packet`` built as the reference builds it.
"""

from libc.stdint cimport uint8_t, uint16_t, uint32_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.long cimport PyLong_AsLong, PyLong_FromLong
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.string cimport memcmp

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef extern from *:
    """
    /* A Packet (a NamedTuple: a tuple subclass, no instance dict) of n items, all NULL until
       set (the tuple's traversal and deallocation skip NULL): filled in place, no tuple made
       first to be copied. */
    static PyObject *amqpcap_tuple_of(PyObject *cls, Py_ssize_t n) {
        PyTypeObject *tp = (PyTypeObject *)cls;
        return tp->tp_alloc(tp, n);
    }
    """
    object amqpcap_tuple_of(object cls, Py_ssize_t n)

# compiled.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_STAMP = (<bytes>AMQPCAP_SOURCE_STAMP).decode("ascii")

# link.Packet and link.parse_packet_reference, imported at the first packet: link imports this
# module at its end to choose it, so importing link here, at import, would be circular
cdef object PACKET = None
cdef object REFERENCE = None


cdef int import_link() except -1:
    global PACKET, REFERENCE
    from amqpcap.capture import link

    PACKET, REFERENCE = link.Packet, link.parse_packet_reference
    return 0


cdef inline uint16_t rd16(const uint8_t *p) noexcept nogil:
    return (p[0] << 8) | p[1]


cdef inline uint32_t rd32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


# The addresses of the last ADDR_SLOTS hosts, each handed out again for the same bytes: the
# dissector looks every packet's conversation up by (src, dst, sport, dport), and an address
# object seen before has its hash computed and compares by identity (a fresh one is hashed
# and compared byte by byte, ~1k instructions a packet).  Equal bytes either way.
cdef enum:
    ADDR_SLOTS = 256
cdef PyObject *ADDR_CACHE[ADDR_SLOTS]


cdef object address(const uint8_t *a, Py_ssize_t alen):
    cdef size_t h = (a[alen - 1] * 31u + a[alen - 2] * 7u + a[alen - 3] + <size_t>alen) & (ADDR_SLOTS - 1)
    cdef PyObject *c = ADDR_CACHE[h]
    if c != NULL and PyBytes_GET_SIZE(<object>c) == alen and memcmp(PyBytes_AS_STRING(<object>c), a, alen) == 0:
        return <object>c
    v = PyBytes_FromStringAndSize(<const char *>a, alen)
    Py_INCREF(v)
    Py_XDECREF(c)
    ADDR_CACHE[h] = <PyObject *>v
    return v


# Likewise the ports and windows (16-bit: a packet's three ints that repeat), from a table of
# the last PORT_SLOTS values: no int object made and freed for them a packet.
cdef enum:
    PORT_SLOTS = 512
cdef PyObject *PORT_CACHE[PORT_SLOTS]


cdef object u16(uint16_t v):
    cdef PyObject *c = PORT_CACHE[v & (PORT_SLOTS - 1)]
    if c != NULL and PyLong_AsLong(<object>c) == v:
        return <object>c
    o = PyLong_FromLong(v)
    Py_INCREF(o)
    Py_XDECREF(c)
    PORT_CACHE[v & (PORT_SLOTS - 1)] = <PyObject *>o
    return o


cdef inline void put(object r, Py_ssize_t i, object v):
    """Item ``i`` of the new Packet ``r``: ``v`` (SET_ITEM takes the reference it is given)."""
    Py_INCREF(v)
    PyTuple_SET_ITEM(r, i, v)


cdef object packet(int version, const uint8_t *b, Py_ssize_t src, Py_ssize_t alen, Py_ssize_t t,
                   Py_ssize_t p, Py_ssize_t end):
    """The Packet of a TCP header at ``t`` whose payload is b[p:end] (all captured)."""
    r = amqpcap_tuple_of(PACKET, 11)
    put(r, 0, version)
    put(r, 1, address(b + src, alen))
    put(r, 2, address(b + src + alen, alen))
    put(r, 3, u16(rd16(b + t)))
    put(r, 4, u16(rd16(b + t + 2)))
    put(r, 5, rd32(b + t + 4))
    put(r, 6, rd32(b + t + 8))
    put(r, 7, rd16(b + t + 12) & 0x1FF)
    put(r, 8, u16(rd16(b + t + 14)))
    put(r, 9, PyBytes_FromStringAndSize(<const char *>(b + p), end - p))
    put(r, 10, 0)
    return r


def parse_packet(int linktype, data):
    """link.parse_packet: the same result for every input."""
    if REFERENCE is None:
        import_link()
    if type(data) is not bytes:
        return REFERENCE(linktype, data)
    cdef const uint8_t *b = data
    cdef Py_ssize_t n = len(data), off, t, p, end
    cdef int et, of
    if linktype == 1:
        if n < 14:
            return REFERENCE(linktype, data)
        et = rd16(b + 12)
        off = 14
    elif linktype == 113:
        if n < 16:
            return REFERENCE(linktype, data)
        et = rd16(b + 14)
        off = 16
    elif linktype == 276:
        if n < 20:
            return REFERENCE(linktype, data)
        et = rd16(b)
        off = 20
    elif linktype == 101 or linktype == 228 or linktype == 229:
        if n < 1:
            return REFERENCE(linktype, data)
        if b[0] >> 4 == 4 and linktype != 229:
            et = 0x0800
        elif b[0] >> 4 == 6 and linktype != 228:
            et = 0x86DD
        else:
            return REFERENCE(linktype, data)
        off = 0
    else:
        return REFERENCE(linktype, data)
    if et == 0x0800:
        if n >= off + 40 and b[off] == 0x45 and b[off + 9] == 6 and not rd16(b + off + 6) & 0x3FFF:
            end = off + rd16(b + off + 2)
            t = off + 20
            of = rd16(b + t + 12)
            p = t + ((of >> 10) & 0x3C)
            if end - off >= 40 and of >= 0x5000 and end <= n and p <= end:
                return packet(4, b, off + 12, 4, t, p, end)
    elif et == 0x86DD:
        if n >= off + 60 and b[off] >> 4 == 6 and b[off + 6] == 6:
            end = off + 40 + rd16(b + off + 4)
            t = off + 40
            of = rd16(b + t + 12)
            p = t + ((of >> 10) & 0x3C)
            if end - t >= 20 and of >= 0x5000 and end <= n and p <= end:
                return packet(6, b, off + 8, 16, t, p, end)
    return REFERENCE(linktype, data)
