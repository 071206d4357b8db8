# Field lists as the compiled decoder keeps them (fast09.WireFields: a content header's
# properties, a method's plain arguments): where each value lies in the frame's bytes, not a
# dict of Python objects, so that the compiled row builder (records/fastrows.pyx) writes the
# columns and the JSON straight from the bytes.  Included by both extensions: this layout is
# their contract (fast09 hands the struct over through a capsule, WIRE_FIELDS; no build-time
# dependency between them), and so are the readers of a field's value from its bytes below
# (``field_of``; the integer and string readers fields_0_9.pxi's table readers use too).

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp

# Field type codes of a decoding plan (one byte per field).
cdef enum:
    P_OCTET = 1
    P_SHORT = 2
    P_LONG = 3
    P_LONGLONG = 4
    P_SHORTSTR = 5
    P_TABLE = 6
    P_LONGSTR = 7
    P_BIT = 8

cdef extern from *:
    """
    #ifndef AMQPCAP_WIREFIELDS
    #define AMQPCAP_WIREFIELDS
    enum { AMQPCAP_WIRE_MAX = 16 };  /* more values than this: a dict, as before */
    typedef struct {
        const unsigned char *data;   /* the values' bytes (a bytes object the owner keeps) */
        Py_ssize_t n;                /* values, in wire order */
        const unsigned char *codes;  /* the type of each (P_* codes) */
        PyObject *names;             /* tuple of their n names (interned str) */
        PyObject *bits;              /* tuple: the bit properties set (a bit's flag is its value, True) */
        Py_ssize_t start[AMQPCAP_WIRE_MAX], size[AMQPCAP_WIRE_MAX];  /* text: without its length */
        PyObject *obj[AMQPCAP_WIRE_MAX];  /* the value of a table / long string (owned), else NULL */
    } amqpcap_wire;
    #endif
    """
    enum: AMQPCAP_WIRE_MAX
    ctypedef struct amqpcap_wire:
        const unsigned char *data
        Py_ssize_t n
        const unsigned char *codes
        PyObject *names
        PyObject *bits
        Py_ssize_t start[16]  # 16: AMQPCAP_WIRE_MAX (the C definition above is the layout)
        Py_ssize_t size[16]
        PyObject *obj[16]

ctypedef const amqpcap_wire *(*wire_of_fn)(object o)


cdef inline uint16_t rd16(const uint8_t *p) noexcept nogil:
    return (<uint16_t>p[0] << 8) | p[1]


cdef inline uint32_t rd32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline uint64_t rd64(const uint8_t *p) noexcept nogil:
    return (<uint64_t>rd32(p) << 32) | rd32(p + 4)


cdef inline unsigned long long span_uint(const unsigned char *p, Py_ssize_t n) noexcept:
    """An octet, short, long or longlong field's value: unsigned, big-endian."""
    cdef unsigned long long x = 0
    cdef Py_ssize_t k
    for k in range(n):
        x = (x << 8) | p[k]
    return x


# The strings a connection sends again and again (exchange, routing key, consumer tag,
# content type, table keys): the last ASCII str seen in each of TEXT_SLOTS slots, chosen by
# length and three bytes, is handed out again when the same bytes come (no decode, no new
# object; a str is immutable, so which object it is does not show).
cdef enum:
    TEXT_SLOTS = 1024
    TEXT_MAX = 64
cdef PyObject *TEXT_CACHE[TEXT_SLOTS]

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)


cdef object text(const uint8_t *p, Py_ssize_t n):
    """A short string's text (invalid UTF-8 replaced)."""
    cdef size_t h
    cdef PyObject *c
    if n == 0 or n > TEXT_MAX:
        return PyUnicode_DecodeUTF8(<const char *>p, n, "replace")
    h = (<size_t>n * 40503u + p[0] * 131u + p[n >> 1] * 7u + p[n - 1]) & (TEXT_SLOTS - 1)
    c = TEXT_CACHE[h]
    if c != NULL and PyUnicode_GET_LENGTH(<object>c) == n and memcmp(PyUnicode_DATA(<object>c), p, n) == 0:
        return <object>c  # ASCII: its characters are the bytes
    s = PyUnicode_DecodeUTF8(<const char *>p, n, "replace")
    if PyUnicode_IS_ASCII(s):
        Py_INCREF(s)
        Py_XDECREF(c)
        TEXT_CACHE[h] = <PyObject *>s
    return s


cdef object longstr(const uint8_t *p, Py_ssize_t n):
    """fields_0_9.longstr_value's value: text if it is printable UTF-8 (or empty), else bytes."""
    try:
        s = PyUnicode_DecodeUTF8(<const char *>p, n, "strict")
    except UnicodeDecodeError:
        return PyBytes_FromStringAndSize(<const char *>p, n)
    if n == 0 or s.isprintable():
        return s
    return PyBytes_FromStringAndSize(<const char *>p, n)


cdef inline Py_ssize_t fixed_width(uint8_t code) noexcept:
    """The bytes of a field of the fixed-size type ``code``."""
    if code == P_OCTET:
        return 1
    if code == P_SHORT:
        return 2
    if code == P_LONG:
        return 4
    return 8


cdef inline object field_value(uint8_t code, const uint8_t *p, Py_ssize_t n):
    """The value of a field of type ``code`` whose bytes (text: without its length) are p[:n]."""
    if code == P_SHORTSTR:
        return text(p, n)
    if code == P_LONGSTR:
        return longstr(p, n)
    return span_uint(p, n)


cdef inline object field_of(const amqpcap_wire *w, Py_ssize_t i):
    """The value of ``w``'s field ``i``, as the reference's dict holds it."""
    if w.obj[i] != NULL:
        return <object>w.obj[i]
    return field_value(w.codes[i], w.data + w.start[i], w.size[i])
