# The readers of the 0-8 / 0-9 / 0-9-1 field types in typed C, written once for the compiled
# decoder: fields_0_9.py's field values and tables and the steps of a field list the generated
# method readers (spec/readers_0_9.pxi, by tools/gen_spec.py) and the generic one
# (``read_fields``) are made of.  A reader says "decodes" or "does not" (-1, BAD: no exception):
# the reference then decodes the frame and reports what is wrong.  Included after wirefields.pxi
# (amqpcap_wire, the P_* codes, the integer and string readers) by fast09.pyx.

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

cdef int MAX_DEPTH = 64  # fields_0_9.MAX_DEPTH
# stream.TS_SECONDS_MAX: a longlong at or past it (a delivery-tag, a timestamp property) goes to
# the reference, which reports what its column cannot hold
cdef uint64_t TS_SECONDS_MAX = 9_000_000_000

# Returned by the value readers for "does not decode" (no Python exception set).
cdef object BAD = object()


# --- field tables (fields_0_9.decode_table_at / _decode_value) ----------------------------------


cdef object fixed_value(uint8_t t, const uint8_t *p, bint rabbit):
    """The value of a table entry of type ``t`` whose bytes are at p (VALUE_WIDTH of them)."""
    cdef uint32_t n32
    cdef uint64_t u64
    cdef double dv
    cdef float fv
    if t == 0x49:  # I int32
        return <int32_t>rd32(p)
    if t == 0x54 or (t == 0x6C and not rabbit):  # T timestamp; l: uint64 (0-9-1 spec text)
        return rd64(p)
    if t == 0x4C or t == 0x6C:  # L int64; l: int64 (RabbitMQ/Qpid)
        return <int64_t>rd64(p)
    if t == 0x64:  # d double
        u64 = rd64(p)
        memcpy(&dv, &u64, 8)
        return dv
    if t == 0x66:  # f float
        n32 = rd32(p)
        memcpy(&fv, &n32, 4)
        return <double>fv
    if t == 0x62:  # b int8
        return <int8_t>p[0]
    if t == 0x42:  # B uint8
        return p[0]
    if t == 0x55 or t == 0x73:  # U int16; s: int16 (brokers)
        return <int16_t>rd16(p)
    if t == 0x75:  # u uint16
        return rd16(p)
    if t == 0x69:  # i uint32
        return rd32(p)
    if t == 0x74:  # t boolean
        return p[0] != 0
    if t == 0x44:  # D decimal: scale octet + int32
        v = <int32_t>rd32(p + 1)
        return {"$decimal": f"{v}e-{p[0]}" if p[0] else str(v)}
    return None  # V void


cdef inline int value_width(uint8_t t, bint rabbit) noexcept:
    """The bytes of a table entry of type ``t`` that has a fixed width, else -1."""
    if t == 0x49 or t == 0x66 or t == 0x69:
        return 4
    if t == 0x54 or t == 0x64 or t == 0x4C or t == 0x6C:
        return 8
    if t == 0x62 or t == 0x42 or t == 0x74:
        return 1
    if t == 0x55 or t == 0x75 or (t == 0x73 and rabbit):
        return 2
    if t == 0x44:
        return 5
    if t == 0x56:
        return 0
    return -1


cdef object value(const uint8_t *b, Py_ssize_t *po, Py_ssize_t end, int depth, bint rabbit):
    """One field value at po[0] (advanced past it), or BAD if it does not decode within end."""
    cdef Py_ssize_t off = po[0], n
    cdef uint8_t t
    if off >= end:
        return BAD
    t = b[off]
    off += 1
    n = value_width(t, rabbit)
    if n >= 0:
        if off + n > end:
            return BAD
        po[0] = off + n
        return fixed_value(t, b + off, rabbit)
    if t == 0x53 or t == 0x78:  # S long string, x byte array
        if off + 4 > end:
            return BAD
        n = rd32(b + off)
        off += 4
        if off + n > end:
            return BAD
        po[0] = off + n
        if t == 0x53:
            return text(b + off, n)
        return PyBytes_FromStringAndSize(<const char *>(b + off), n)
    if t == 0x73:  # s: a short string (spec text)
        if off + 1 > end or off + 1 + b[off] > end:
            return BAD
        po[0] = off + 1 + b[off]
        return text(b + off + 1, b[off])
    po[0] = off
    if t == 0x46:  # F table
        return table(b, po, end, depth + 1, rabbit)
    if t == 0x41:  # A array
        return array(b, po, end, depth + 1, rabbit)
    return BAD


cdef Py_ssize_t sized(const uint8_t *b, Py_ssize_t *po, Py_ssize_t end, int depth) noexcept:
    """fields_0_9.sized_end: the end of a table's or array's entries (po[0] moved past its size),
    or -1."""
    cdef Py_ssize_t off = po[0]
    cdef uint32_t n
    if depth > MAX_DEPTH or off + 4 > end:
        return -1
    n = rd32(b + off)
    if off + 4 + <Py_ssize_t>n > end:
        return -1
    po[0] = off + 4
    return off + 4 + n


cdef object table(const uint8_t *b, Py_ssize_t *po, Py_ssize_t end, int depth, bint rabbit):
    cdef Py_ssize_t tend = sized(b, po, end, depth)
    cdef Py_ssize_t off = po[0]
    cdef uint8_t kl
    if tend < 0:
        return BAD
    out = {}
    while off < tend:
        kl = b[off]
        if off + 1 + kl > tend:
            return BAD
        key = text(b + off + 1, kl)
        off += 1 + kl
        v = value(b, &off, tend, depth, rabbit)
        if v is BAD:
            return BAD
        out[key] = v
    po[0] = tend
    return out


cdef object array(const uint8_t *b, Py_ssize_t *po, Py_ssize_t end, int depth, bint rabbit):
    cdef Py_ssize_t aend = sized(b, po, end, depth)
    cdef Py_ssize_t off = po[0]
    if aend < 0:
        return BAD
    out = []
    while off < aend:
        v = value(b, &off, aend, depth, rabbit)
        if v is BAD:
            return BAD
        out.append(v)
    po[0] = aend
    return out


# --- the steps of a field list (fields_0_9.read_plan; spec/readers_0_9.pxi) ------------------
# A field's value goes to ``a[names[i]]``; with ``w`` (not NULL), where it lies goes to the
# spans of ``w`` instead (relative to ``b``; a table or long string decoded into ``w.obj``, a
# bit too: their decoding is their check), no dict (fast09.WireFields).  Each step returns the
# offset after the field, or -1 if it does not decode.

ctypedef Py_ssize_t (*fields_fn)(
    const uint8_t *b, Py_ssize_t off, Py_ssize_t end, bint rabbit, tuple names, dict a, amqpcap_wire *w
) except -2


cdef inline int put_obj(Py_ssize_t i, object v, tuple names, dict a, amqpcap_wire *w) except -1:
    if w != NULL:
        Py_INCREF(v)
        w.obj[i] = <PyObject *>v
    else:
        a[names[i]] = v
    return 0


cdef inline Py_ssize_t fixed_field(uint8_t code, Py_ssize_t n, const uint8_t *b, Py_ssize_t off,
                                   Py_ssize_t i, tuple names, dict a, amqpcap_wire *w) except -2:
    """An octet, short, long or longlong of ``n`` bytes at ``off`` (within the frame: the caller
    checked a run of them at once)."""
    if code == P_LONGLONG and rd64(b + off) >= TS_SECONDS_MAX:
        return -1  # may not fit its column: the reference reports it
    if w != NULL:
        w.start[i] = off
        w.size[i] = n
    else:
        a[names[i]] = span_uint(b + off, n)
    return off + n


cdef inline Py_ssize_t shortstr_field(const uint8_t *b, Py_ssize_t off, Py_ssize_t end,
                                      Py_ssize_t i, tuple names, dict a, amqpcap_wire *w) except -2:
    if off >= end or off + 1 + b[off] > end:
        return -1
    if w != NULL:
        w.start[i] = off + 1
        w.size[i] = b[off]
    else:
        a[names[i]] = text(b + off + 1, b[off])
    return off + 1 + b[off]


cdef inline Py_ssize_t longstr_field(const uint8_t *b, Py_ssize_t off, Py_ssize_t end,
                                     Py_ssize_t i, tuple names, dict a, amqpcap_wire *w) except -2:
    cdef Py_ssize_t n
    if off + 4 > end:
        return -1
    n = rd32(b + off)
    if off + 4 + n > end:
        return -1
    if w != NULL:
        w.start[i] = off + 4
        w.size[i] = n
    put_obj(i, longstr(b + off + 4, n), names, a, w)
    return off + 4 + n


cdef inline Py_ssize_t table_field(const uint8_t *b, Py_ssize_t off, Py_ssize_t end, bint rabbit,
                                   Py_ssize_t i, tuple names, dict a, amqpcap_wire *w) except -2:
    v = table(b, &off, end, 0, rabbit)
    if v is BAD:
        return -1
    put_obj(i, v, names, a, w)
    return off


cdef Py_ssize_t read_fields(bytes codes, tuple names, const uint8_t *b, Py_ssize_t off, Py_ssize_t end,
                            bint rabbit, dict a, amqpcap_wire *w=NULL) except -2:
    """The fields of types ``codes`` (P_*) named ``names``, read as the generated readers read
    theirs (a list that has none: a content header's properties, a dialect's arguments); the end
    offset, or -1 if they do not decode."""
    cdef Py_ssize_t i, nf = len(codes)
    cdef const uint8_t *c = codes
    cdef int bit = 0
    cdef uint8_t bits = 0
    for i in range(nf):
        if c[i] == P_BIT:
            if bit == 0:
                if off >= end:
                    return -1
                bits = b[off]
                off += 1
            put_obj(i, (bits & (1 << bit)) != 0, names, a, w)
            bit = (bit + 1) & 7
            continue
        bit = 0
        if c[i] == P_SHORTSTR:
            off = shortstr_field(b, off, end, i, names, a, w)
        elif c[i] == P_TABLE:
            off = table_field(b, off, end, rabbit, i, names, a, w)
        elif c[i] == P_LONGSTR:
            off = longstr_field(b, off, end, i, names, a, w)
        elif off + fixed_width(c[i]) > end:
            return -1
        else:
            off = fixed_field(c[i], fixed_width(c[i]), b, off, i, names, a, w)
        if off < 0:
            return -1
    return off
