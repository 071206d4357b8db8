# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled AMQP 1.0 value decoder and section reader (optional; see compiled.py).

``decode`` is types_1_0's ``decode`` in typed C: it reads the wire through a pointer
and makes the very same values.  The constructors it reads itself come from the generated
table (spec/v1_0.py ENCODINGS) by category, type and width: the zero-width constants, the
integers and booleans, binary, strings and symbols, lists, maps and described values; any
other constructor (floats, decimals, chars, uuids, arrays) is read by the reference's reader
for that constructor.  Whatever does not decode cleanly (a size past the end, nesting too deep,
a count the bytes cannot hold, ...) is handed whole to the reference, which raises its own
error: so this code only needs to say "decodes" or "does not", and every error message is the
reference's.

``read_sections`` is codec_1_0's ``Sections.read`` over the same C reads: a message's sections
by name and the spans of its body.

``walk_transfer`` is codec_1_0's decoder's ``_transfer`` with its common cases, a delivery whole
in one frame or assembled from several, walked here (this module's ``Decoder10`` has it)
straight to its messages row, its body digest perhaps handed on to the table buffer unfinished
(fast09's hashing thread); ``walk_frames`` its frame loop, and ``walk_feed`` the per-feed path
with the per-direction state in C (``Direction``) that fast09 shares (direction.pxi).

``append_rows`` is records/rows_1_0's ``append_rows_reference``: the rows rows_1_0 builds written
into the compiled table buffers as arrays of values (rows10.pxi); the arguments of a transfer,
disposition or flow the frame loop walks are written from its bytes as it is walked (json10.pxi).

``LinkState`` is links_1_0's ``ConnectionState`` (links10.pxi), the state this module's
``Decoder10`` holds: the walker looks a transfer's link up and hands it its delivery in C.
"""

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_Check
from cpython.list cimport PyList_Check
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcpy
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cimport cython

import sys

from amqpcap.amqp import types_1_0 as T
from amqpcap.amqp.spec import v1_0 as SPEC
from amqpcap.amqp.stream import DecodeError

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

SOURCE_STAMP = AMQPCAP_SOURCE_STAMP.decode("ascii")

# what a constructor octet is to this decoder (from the generated encodings, at import)
cdef enum Kind:
    K_PY = 0  # read by the reference's reader for it
    K_CONST  # a zero-width value: VALUES holds it
    K_LIST0
    K_U8
    K_S8
    K_BOOL
    K_U16
    K_S16
    K_U32
    K_S32
    K_U64
    K_S64
    K_BINARY
    K_TEXT
    K_LIST
    K_MAP

cdef unsigned char KIND[256]
cdef unsigned char WIDTH[256]
cdef list VALUES = [None] * 256
cdef list READERS = T.READERS
cdef int MAX_DEPTH = T.MAX_DEPTH
# (the names interned: the rows look fields up by the same objects)
cdef dict FIELDS = {code: tuple(sys.intern(f.name) for f in c.fields) for code, c in SPEC.COMPOSITES.items()}
cdef dict COMPOSITE_NAMES = {code: c.name for code, c in SPEC.COMPOSITES.items()}
cdef dict SECTIONS = dict(SPEC.SECTIONS)
# what a section's descriptor code says of its value (from the generated sections, at import):
# a body section of data, of an amqp-sequence or amqp-value, or none (read as a value)
cdef enum BodyKind:
    NOT_BODY = 0
    BODY_DATA
    BODY_VALUE
cdef unsigned char BODY_KIND[256]
cdef dict PERFORMATIVES = {code: FIELDS[code] for code in SPEC.METHOD_NAMES if code in FIELDS}
_described = T.described
map_key = T.map_key

_INTS = {
    (1, "ubyte"): K_U8, (1, "uint"): K_U8, (1, "ulong"): K_U8,
    (1, "byte"): K_S8, (1, "int"): K_S8, (1, "long"): K_S8, (1, "boolean"): K_BOOL,
    (2, "ushort"): K_U16, (2, "short"): K_S16,
    (4, "uint"): K_U32, (4, "int"): K_S32,
    (8, "ulong"): K_U64, (8, "long"): K_S64, (8, "timestamp"): K_S64,
}


def _kinds():
    for code, enc in SPEC.ENCODINGS.items():
        k = K_PY
        if enc.category == "fixed":
            if enc.width == 0:
                k = K_LIST0 if enc.name == "list0" else K_CONST
                VALUES[code] = T.VALUES[code]
            else:
                k = _INTS.get((enc.width, enc.type), K_PY)
        elif enc.category == "variable":
            k = K_BINARY if enc.type == "binary" else K_TEXT
        elif enc.category == "compound":
            k = K_MAP if enc.type == "map" else K_LIST
        KIND[code] = k
        WIDTH[code] = enc.width


def _body_kinds():
    for code, name in SPEC.SECTIONS.items():
        BODY_KIND[code] = (
            BODY_DATA if name == "data" else BODY_VALUE if name in ("amqp-sequence", "amqp-value") else NOT_BODY
        )


_kinds()
_body_kinds()


class Fallback(Exception):
    """Not decoded here: the reference decodes the value (and raises its error)."""


cdef object FALLBACK = Fallback()


cdef inline uint32_t be32(const unsigned char *b) noexcept:
    return (<uint32_t>b[0] << 24) | (<uint32_t>b[1] << 16) | (<uint32_t>b[2] << 8) | b[3]


cdef inline uint64_t be64(const unsigned char *b) noexcept:
    return (<uint64_t>be32(b) << 32) | be32(b + 4)


cdef object value(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int depth, object buf):
    """The value at ``pos`` (constructor included), ``pos`` moved past it; Fallback raised for
    what the reference must read.  ``buf``: the object whose bytes ``b`` are, which the
    reference's readers are given; None for a message read in place (``read_in_view``)."""
    cdef Py_ssize_t p = pos[0]
    cdef Py_ssize_t s, e, n
    cdef unsigned char code, k, w
    if p >= end:
        raise FALLBACK
    code = b[p]
    p += 1
    if code == 0:
        if depth >= MAX_DEPTH:
            raise FALLBACK
        pos[0] = p
        descriptor = value(b, pos, end, depth + 1, buf)
        v = value(b, pos, end, depth + 1, buf)
        if type(descriptor) is int and type(v) is list:
            fields = FIELDS.get(descriptor)
            if fields is not None:
                return fields_dict(<tuple>fields, <list>v, {"$type": COMPOSITE_NAMES[descriptor]})
        return _described(descriptor, v)
    k = KIND[code]
    w = WIDTH[code]
    if k == K_CONST:
        pos[0] = p
        return VALUES[code]
    if k == K_LIST0:
        pos[0] = p
        return []
    if k >= K_U8 and k <= K_S64:
        if p + w > end:
            raise FALLBACK
        pos[0] = p + w
        if k == K_U8:
            return b[p]
        if k == K_S8:
            return <int8_t>b[p]
        if k == K_BOOL:
            return b[p] != 0
        if k == K_U16:
            return (<uint16_t>b[p] << 8) | b[p + 1]
        if k == K_S16:
            return <int16_t>((<uint16_t>b[p] << 8) | b[p + 1])
        if k == K_U32:
            return be32(b + p)
        if k == K_S32:
            return <int32_t>be32(b + p)
        if k == K_U64:
            return be64(b + p)
        return <int64_t>be64(b + p)
    if k == K_BINARY or k == K_TEXT:
        if p + w > end:
            raise FALLBACK
        n = b[p] if w == 1 else be32(b + p)
        s = p + w
        e = s + n
        if e > end:
            raise FALLBACK
        pos[0] = e
        if k == K_BINARY:
            return PyBytes_FromStringAndSize(<const char *>b + s, n)
        return PyUnicode_DecodeUTF8(<const char *>b + s, n, "replace")
    if k == K_LIST or k == K_MAP:
        return compound(b, pos, p, end, depth, w, k == K_MAP, buf)
    if buf is None:
        return read_in_view(b, pos, p, end, depth, code)
    v, e = READERS[code](buf, p, end, depth)
    pos[0] = e
    return v


cdef object read_in_view(
    const unsigned char *b, Py_ssize_t *pos, Py_ssize_t p, Py_ssize_t end, int depth, unsigned char code
):
    """The reference's reader of ``code`` given the bytes up to ``end`` at ``b`` as a view, made
    for it (the offsets are the same: the view starts at ``b``) and released after it; its
    values are copies."""
    view = PyMemoryView_FromMemory(<char *>b, end, PyBUF_READ)
    try:
        v, e = READERS[code](view, p, end, depth)
    finally:
        view.release()
    pos[0] = e
    return v


cdef Py_ssize_t sized(
    const unsigned char *b, Py_ssize_t p, Py_ssize_t end, int w, Py_ssize_t *count, Py_ssize_t *e
) except -1:
    """The start of a list's or map's items at ``p`` (after its constructor); its count and end
    in ``count`` and ``e``."""
    cdef Py_ssize_t size
    if p + 2 * w > end:
        raise FALLBACK
    if w == 1:
        size, count[0] = b[p], b[p + 1]
    else:
        size, count[0] = be32(b + p), be32(b + p + 4)
    e[0] = p + w + size
    if size < w or e[0] > end:
        raise FALLBACK
    p += 2 * w
    if count[0] > e[0] - p:  # every item has a constructor octet at least
        raise FALLBACK
    return p


cdef object compound(
    const unsigned char *b, Py_ssize_t *pos, Py_ssize_t p, Py_ssize_t end, int depth, int w, bint is_map, object buf
):
    cdef Py_ssize_t count, e, i
    if depth >= MAX_DEPTH:
        raise FALLBACK
    p = sized(b, p, end, w, &count, &e)
    if is_map and count % 2:
        raise FALLBACK
    cdef list items = [None] * count
    pos[0] = p
    for i in range(count):
        items[i] = value(b, pos, e, depth + 1, buf)
    if pos[0] != e:
        raise FALLBACK
    if not is_map:
        return items
    cdef dict d = {}
    for i in range(0, count, 2):
        k = items[i]
        if PyList_Check(k) or PyDict_Check(k) or PyBytes_Check(k):  # (map_key's; any other as it is)
            k = map_key(k)
        d[k] = items[i + 1]
    return d


cdef dict fields_dict(tuple fields, list v, dict out):
    """types_1_0.fields_of: a composite's fields by name, added to ``out``."""
    cdef Py_ssize_t i, n = len(fields)
    for i in range(min(n, len(v))):
        x = v[i]
        if x is not None:
            out[fields[i]] = x
    if len(v) > n:
        out["$extra"] = v[n:]
    return out


def decode(buf, Py_ssize_t off, Py_ssize_t end, int depth=0):
    """types_1_0.decode: (value, offset after it)."""
    cdef Py_buffer view
    cdef Py_ssize_t pos = off
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if off < 0 or end > view.len:
            raise FALLBACK
        v = value(<const unsigned char *>view.buf, &pos, end, depth, buf)
        return v, pos
    except (Fallback, DecodeError):
        pass
    finally:
        PyBuffer_Release(&view)
    return T.decode(buf, off, end, depth)


include "json10.pxi"


# a section's name and the field names of a composite section (header, properties) by its
# descriptor code, read by index rather than looked up in a dict (three sections a message)
cdef list SECTION_NAME = [SECTIONS.get(code) for code in range(256)]
cdef list SECTION_FIELDS = [FIELDS.get(code) if code in SECTIONS else None for code in range(256)]


cdef struct Spans:
    # the body's spans walk_sections found: how many, and the first (the common body, one
    # section, held here with no tuple made; the spans list gets them all from the second on)
    Py_ssize_t n, s, e


cdef int add_span(list spans, Spans *one, Py_ssize_t s, Py_ssize_t e) except -1:
    """A body span: into ``one`` if given and it is the first, else appended to ``spans``."""
    if one == NULL:
        spans.append((s, e))
        return 0
    one.n += 1
    if one.n == 1:
        one.s, one.e = s, e
        return 0
    if one.n == 2:
        spans.append((one.s, one.e))
    spans.append((s, e))
    return 0


cdef object walk_sections(
    const unsigned char *b, Py_ssize_t n, dict sections, list spans, object buf, SectionJson *js=NULL,
    Spans *one=NULL,
):
    """The sections into ``sections``, the body's spans into ``spans`` (with ``one``, as
    ``add_span`` keeps them); the body's kind.  With ``js``, each section but the body's also
    written as JSON (json10.pxi), and only those the messages row reads besides (SECTION_READ)
    decoded."""
    cdef Py_ssize_t p = 0, s, e, pos
    cdef int code, w
    cdef unsigned char body
    kind = None
    while p < n:
        if p + 3 > n or b[p] != 0 or b[p + 1] != 0x53:
            raise FALLBACK  # (a descriptor other than a small code: the reference reads it)
        code = b[p + 2]
        p += 3
        name = SECTION_NAME[code]
        if name is None:
            raise FALLBACK
        body = BODY_KIND[code]
        if body == BODY_DATA:
            if p >= n or (b[p] != 0xA0 and b[p] != 0xB0):
                raise FALLBACK
            w = 1 if b[p] == 0xA0 else 4
            if p + 1 + w > n:
                raise FALLBACK
            s = p + 1 + w
            e = s + (b[p + 1] if w == 1 else be32(b + p + 1))
            if e > n:
                raise FALLBACK
        elif body == BODY_VALUE:
            s = pos = p
            value(b, &pos, n, 1, buf)
            e = pos
        else:
            if js != NULL:
                e = json_section(js, code, b, p, n)
                if not SECTION_READ[code]:
                    p = e
                    continue
            pos = p
            sections[name] = section_value(b, &pos, n, SECTION_FIELDS[code], buf)
            p = pos
            continue
        if kind is None:
            kind = name
        add_span(spans, one, s, e)
        p = e
    return kind


cdef object section_value(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t n, fields, object buf):
    """A section's value at ``pos`` (read_sections_reference's): a composite's (``fields``: its
    field names) list as the dict of its fields (header, properties: types_1_0.fields_of),
    its items read straight into the dict unless there are more than its fields."""
    cdef Py_ssize_t p = pos[0], count, e, i
    if fields is None or p >= n or KIND[b[p]] != K_LIST or 1 >= MAX_DEPTH:
        v = value(b, pos, n, 1, buf)
        if fields is not None and type(v) is list:
            return fields_dict(<tuple>fields, <list>v, {})
        return v
    p = sized(b, p + 1, n, WIDTH[b[p]], &count, &e)
    if count > len(<tuple>fields):  # (its extra values kept as a list: fields_dict's "$extra")
        return fields_dict(<tuple>fields, <list>value(b, pos, n, 1, buf), {})
    # compound's walk of the list (depth 1), each item into its field
    cdef dict out = {}
    for i in range(count):
        v = value(b, &p, e, 2, buf)
        if v is not None:
            out[(<tuple>fields)[i]] = v
    if p != e:
        raise FALLBACK
    pos[0] = e
    return out


def read_sections(buf, dict sections, list spans):
    """codec_1_0.read_sections_reference: the sections into ``sections``, the body's spans into
    ``spans``; the body's kind, or DecodeError(what, the body's kind so far)."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        return walk_sections(<const unsigned char *>view.buf, view.len, sections, spans, buf)
    except (Fallback, DecodeError):
        pass
    finally:
        PyBuffer_Release(&view)
    sections.clear()
    del spans[:]
    return read_sections_reference(buf, sections, spans)


cdef extern from "Python.h":
    # (CPython's: a dict with room for ``n`` items; an empty one for five or fewer)
    dict dict_presized "_PyDict_NewPresized" (Py_ssize_t n)


cdef object walk_performative(const unsigned char *b, Py_ssize_t p, Py_ssize_t end, object buf):
    """codec_1_0.read_performative_reference of a performative with a small descriptor code: its
    list's items read straight into the dict of its fields."""
    cdef Py_ssize_t count, e, i, pos
    cdef int code
    cdef unsigned char k
    cdef tuple fields
    if p + 3 > end or b[p] != 0 or b[p + 1] != 0x53:
        raise FALLBACK
    code = b[p + 2]
    f = PERFORMATIVES.get(code)
    p += 3
    if f is None or p >= end:
        raise FALLBACK
    fields = <tuple>f
    k = KIND[b[p]]
    if k == K_LIST0:
        return code, {}, p + 1
    if k != K_LIST:
        raise FALLBACK
    pos = sized(b, p + 1, end, WIDTH[b[p]], &count, &e)
    # sized for its fields at once: a transfer's six would grow an empty dict's table at the sixth
    cdef dict args = dict_presized(min(count, len(fields)))
    for i in range(count):
        v = value(b, &pos, e, 2, buf)
        if i < len(fields):
            if v is not None:
                args[fields[i]] = v
    if pos != e:
        raise FALLBACK
    return code, args, e


def read_performative(buf, Py_ssize_t body, Py_ssize_t end):
    """codec_1_0.read_performative_reference: (code, fields by name or None, offset after)."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if body >= 0 and end <= view.len:
            return walk_performative(<const unsigned char *>view.buf, body, end, buf)
    except (Fallback, DecodeError):
        pass
    finally:
        PyBuffer_Release(&view)
    return read_performative_reference(buf, body, end)


# --- the compiled walker: the transfers of the common deliveries -------------------------------
#
# ``Decoder10``, which decoder.py binds when this part is built, is the reference's class with
# ``walk_transfer`` for its ``_transfer``: the common transfers (a delivery picked up from its
# start, not aborted, its message within the memory bounds) walked here.  A delivery whole in
# one frame is read in place: its sections walked, its digest and first body bytes cut from the
# frame; a delivery over several transfers is assembled as the reference does (its
# ``Assembly``, the same bounds and accounting) and read so when its last transfer comes.  Either
# is held as its messages row (rows10.pxi's ``HeldRow``), with no Delivery.  Every other transfer
# (and every transfer of an assembly the walker did not begin or continue) goes to the
# reference's ``_transfer`` whole: the two share the assemblies, whichever adds to one.

from amqpcap.amqp import links_1_0 as L
from amqpcap.amqp.events_1_0 import Delivery, Performative, creation_time
from amqpcap.amqp import stream as _stream
from amqpcap.amqp.stream import TS_MS_MAX, StreamDecoder


# --- a Performative made and read in C ---------------------------------------------------------
#
# events_1_0.Performative is a slotted class (values_1_0.py): each of its fields is a slot at a
# fixed offset of the object, which the field's member descriptor gives.  The frame loop makes one per frame
# with its fields stored at those offsets (``new_performative``: what its generated __init__
# does, with no Python call), and the methods row reads them there (rows10.pxi ``methods_row``)
# rather than by name.  The layout is read from the class at import: the fields, their order
# (``__match_args__``) and their defaults are its __init__'s.

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.type cimport PyType_GenericAlloc

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member

cdef enum:
    PERF_ARGS = 9  # the fields new_performative is given, in the class's order
    MAX_PERF_FIELDS = 16

cdef Py_ssize_t perf_offset[MAX_PERF_FIELDS]
cdef Py_ssize_t n_perf_fields = 0
cdef list perf_defaults = []
cdef dict perf_slots = {}  # field name -> its offset
cdef Py_ssize_t args_at, name_at, packet_at, ts_at, offset_at, channel_at, link_at, source_at, target_at


cdef inline PyObject **slot_at(object o, Py_ssize_t offset) noexcept:
    return <PyObject **>(<char *><PyObject *>o + offset)


def _performative_layout():
    """The offsets of Performative's fields (its member descriptors') and their defaults."""
    global n_perf_fields, args_at, name_at, packet_at, ts_at, offset_at, channel_at, link_at, source_at, target_at
    names = Performative.__match_args__
    defaults = Performative.__init__.__defaults__ or ()
    required = len(names) - len(defaults)
    member_descriptor = type(Performative.__dict__[names[0]])
    if len(names) > MAX_PERF_FIELDS or Performative.__new__ is not object.__new__:
        raise TypeError("events_1_0.Performative is not the slotted class fast10 builds")
    for i, name in enumerate(names):
        descr = Performative.__dict__[name]
        if type(descr) is not member_descriptor or (i < PERF_ARGS) != (i < required):
            raise TypeError(f"events_1_0.Performative.{name} is not the slot fast10 builds")
        perf_offset[i] = (<PyMemberDescrObject *>descr).d_member.offset
        perf_slots[sys.intern(name)] = perf_offset[i]
        perf_defaults.append(defaults[i - required] if i >= required else None)
    n_perf_fields = len(names)
    args_at, name_at = perf_slots["args"], perf_slots["name"]
    packet_at, ts_at, offset_at = perf_slots["packet"], perf_slots["ts"], perf_slots["offset"]
    channel_at, link_at = perf_slots["channel"], perf_slots["link_name"]
    source_at, target_at = perf_slots["source"], perf_slots["target"]


_performative_layout()


cdef inline object perf_field(object perf, Py_ssize_t offset, str name):
    """The field at ``offset`` of a Performative (-1: the attribute ``name``)."""
    cdef PyObject *v = slot_at(perf, offset)[0] if offset >= 0 else NULL
    return <object>v if v != NULL else getattr(perf, name)


cdef inline void put(object o, Py_ssize_t i, object v) noexcept:
    Py_INCREF(v)
    slot_at(o, perf_offset[i])[0] = <PyObject *>v


cdef inline void replace_field(object perf, Py_ssize_t offset, object v) noexcept:
    """The field at ``offset`` of a Performative set to ``v`` (what it held let go)."""
    cdef PyObject **at = slot_at(perf, offset)
    cdef PyObject *old = at[0]
    Py_INCREF(v)
    at[0] = <PyObject *>v
    Py_XDECREF(old)


# links_1_0.Link is slotted too: a transfer's link's name, source and target read at their
# slots' offsets (a Python attribute read costs ~130 instructions; three a transfer)
cdef Py_ssize_t link_name_at = -1, link_source_at = -1, link_target_at = -1


def _link_layout():
    """The offsets of Link's name, source and target slots (its member descriptors')."""
    global link_name_at, link_source_at, link_target_at
    member_descriptor = type(Performative.__dict__["args"])
    at = {}
    for name in ("name", "source", "target"):
        descr = L.Link.__dict__.get(name)
        if type(descr) is not member_descriptor:
            raise TypeError(f"links_1_0.Link.{name} is not the slot fast10 reads")
        at[name] = (<PyMemberDescrObject *>descr).d_member.offset
    link_name_at, link_source_at, link_target_at = at["name"], at["source"], at["target"]


_link_layout()


cdef inline object link_field(object link, Py_ssize_t offset, str name):
    """The field at ``offset`` of a links_1_0.Link (any other object, or a slot not set: the
    attribute ``name``)."""
    cdef PyObject *v = slot_at(link, offset)[0] if type(link) is Link else NULL
    return <object>v if v != NULL else getattr(link, name)


cdef inline void name_link(object perf, link):
    """A Performative's link_name, source and target: the attached link's (links_1_0.Link)."""
    replace_field(perf, link_at, link_field(link, link_name_at, "name"))
    replace_field(perf, source_at, link_field(link, link_source_at, "source"))
    replace_field(perf, target_at, link_field(link, link_target_at, "target"))


cdef object new_performative(packet, ts, offset, channel, code, name, args, ftype, size):
    """Performative(packet, ts, offset, channel, code, name, args, ftype, size)."""
    cdef Py_ssize_t i
    perf = PyType_GenericAlloc(Performative, 0)  # (its slots empty, as object.__new__ leaves them)
    put(perf, 0, packet)
    put(perf, 1, ts)
    put(perf, 2, offset)
    put(perf, 3, channel)
    put(perf, 4, code)
    put(perf, 5, name)
    put(perf, 6, args)
    put(perf, 7, ftype)
    put(perf, 8, size)
    for i in range(PERF_ARGS, n_perf_fields):
        put(perf, i, perf_defaults[i])
    return perf

cdef object EMPTY_DIGEST  # codec_1_0's: the digest of a delivery without a payload
cdef object outcome_of = L.outcome_of
cdef object TS_LIMIT = TS_MS_MAX
cdef object C  # codec_1_0
cdef object Assembly  # codec_1_0.Assembly: a delivery being assembled
cdef Py_ssize_t MAX_MESSAGE, MAX_HELD_BYTES, MAX_ASSEMBLIES


cdef tuple sections_in_place(
    const unsigned char *b, Py_ssize_t n, object payload, Py_ssize_t keep, bint deferred, bint json=False
):
    """codec_1_0.body_sections of the message at ``b``: read here if it decodes cleanly, else by
    the reference's reader alone (the message is not walked by both).  ``payload``: the object
    of those bytes, or None (the reference's code then given a view of them: ``in_view``, made
    only for the messages it reads).  ``deferred``: a large
    one-section body's digest may be handed on unfinished (``digest_at``).  After them, with
    ``json``, the texts of its properties and headers columns written from the bytes as they
    are walked (json10.pxi), or None: the row writes them from the sections (then all decoded)."""
    cdef dict sections = {}
    cdef list spans = []
    cdef Py_ssize_t s, e, take
    cdef SectionJson js
    cdef Spans one
    one.n = 0
    texts = None
    if json and method_plans is None:
        bind_rows()  # (SECTION_READ)
    json_begin(&js)
    try:
        if json:
            try:
                kind = walk_sections(b, n, sections, spans, payload, &js, &one)
                texts = json_end(&js, kind)
            except Fallback:  # (not written here, or not decoded here: walked again to know)
                sections.clear()
                del spans[:]
                one.n = 0
        if texts is None:
            kind = walk_sections(b, n, sections, spans, payload, NULL, &one)
    except (Fallback, DecodeError):
        return *in_view(b, n, payload, C.body_sections, (keep, C.read_sections_reference)), None
    finally:
        json_free(&js)
    if one.n != 1:
        return (sections, kind, *in_view(b, n, payload, C.body_digest, (spans, keep)), None, texts)
    # body_digest's one-section body, its first bytes cut from the frame without a slice
    s, e = one.s, one.e
    take = min(e - s, keep)
    return (
        sections, kind, e - s, digest_at(b + s, e - s, deferred),
        PyBytes_FromStringAndSize(<const char *>b + s, take if take > 0 else 0), None, texts,
    )


cdef object in_view(const unsigned char *b, Py_ssize_t n, payload, fn, tuple args):
    """``fn(payload, *args)``; with no ``payload``, a view of the ``n`` bytes at ``b`` made for
    the call and released after it."""
    if payload is not None:
        return fn(payload, *args)
    view = PyMemoryView_FromMemory(<char *>b, n, PyBUF_READ)
    try:
        return fn(view, *args)
    finally:
        view.release()


# Body digests handed on unfinished: fast09's Sha256 (its hashing thread, digests.pxi), the one
# 0-9-1's walker feeds, when the dissect's messages table takes one (the decoder's
# ``deferred_digests``): a large body is copied into its ring and hashed on that thread while
# the walker goes on, a small one hashed at once (digests.pxi decides); the table buffer writes
# the hex digest when it makes the batch.  Without them (or fast09), hashlib's hex digest.
# fast09's ``digest_bytes`` (its DIGEST_BYTES capsule) takes the body's bytes where they are: no
# Python call, no memoryview per body.
ctypedef object (*digest_bytes_fn)(const uint8_t *p, Py_ssize_t n)
cdef digest_bytes_fn digest_bytes = NULL


cdef object digest_at(const unsigned char *b, Py_ssize_t n, bint deferred):
    """The SHA-256 of the ``n`` bytes at ``b``: its hex digest, or with ``deferred`` a
    fast09.Sha256 that its hashing thread may still be completing."""
    if deferred and digest_bytes != NULL:
        return digest_bytes(b, n)  # (the bytes are copied into the ring, or hashed now)
    view = PyMemoryView_FromMemory(<char *>b, n, PyBUF_READ)
    try:
        return C.sha256(view).hexdigest()
    finally:
        view.release()


def walk_message(self, payload):
    """codec_1_0.Decoder10._message: the message's sections walked in C, its digest perhaps
    handed on unfinished (``deferred_digests``)."""
    cdef Py_buffer view
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        return sections_in_place(
            <const unsigned char *>view.buf, view.len, payload, self.body_bytes, self.deferred_digests
        )[:6]
    finally:
        PyBuffer_Release(&view)


def walk_transfer(self, int direction, d, perf, buf, Py_ssize_t p, Py_ssize_t end):
    """codec_1_0.Decoder10._transfer: a common transfer read here, any other by the reference
    (and a transfer that is no Performative: its fields are read at the class's slots; and one
    of another class's direction state)."""
    if type(perf) is not Performative or type(d) is not Direction:
        C.Decoder10._transfer(self, direction, d, perf, buf, p, end)
        return
    cdef Walk w = walk_of(self, direction, <Direction>d)
    transfer(self, direction, <Direction>d, w, self.events, perf, buf, p, end, None, False)


@cython.final
cdef class Walk:
    """What the frame loop and a transfer read of the decoder, kept by each direction
    (``Direction.walk``) as fast09's Walk is: a Python attribute read from C costs ~150
    instructions, a dozen a packet.  Bound at the direction's first walk (``walk_of``), once
    decoder.py has set the codec's tally, frame_events and deferred_digests, to what does not
    change while the codec decodes: the objects themselves (the state, this direction's
    assemblies, the held_bytes and encrypted lists, read and written through them as the
    reference does) and the settings.  The events list is not kept: pop_events replaces it
    between feeds."""

    cdef int direction
    cdef object state  # LinkState, cast where used (as the decoder's ``state`` was)
    cdef dict assembling  # this direction's: (channel, handle) -> Assembly
    cdef list held_bytes, encrypted  # per direction, the decoder's own lists
    cdef object tally
    cdef Py_ssize_t body_bytes
    cdef bint frame_events, deferred_digests
    # the conversation's fastrows.RowSink (``row_sink``; None: rows go through the events) and
    # what append_rows is given of it: its conversation and tables
    cdef object sink, capture, stream, version, methods, messages
    cdef bint to_methods, to_messages  # that table is a compiled table buffer


cdef Walk walk_of(dec, int direction, Direction d):
    """``d``'s Walk, bound to ``dec`` at its first call."""
    cdef Walk w = <Walk>d.walk if type(d.walk) is Walk else None
    if w is None or w.direction != direction:
        w = Walk.__new__(Walk)
        w.direction = direction
        w.state = dec.state
        w.assembling = dec.assembling[direction]
        w.held_bytes = dec.held_bytes
        w.encrypted = dec.encrypted
        w.tally = dec.tally
        w.body_bytes = dec.body_bytes
        w.frame_events = dec.frame_events
        w.deferred_digests = dec.deferred_digests
        w.sink = dec.row_sink
        if w.sink is not None:
            if method_plans is None:
                bind_rows()
            w.capture, w.stream, w.version = w.sink.capture, w.sink.stream, w.sink.version
            w.methods, w.messages = w.sink.methods, w.sink.messages
            w.to_methods = append_array != NULL and append_array(w.methods, NULL, NULL)
            w.to_messages = append_array != NULL and append_array(w.messages, NULL, NULL)
        d.walk = w
    return w


# the fields a transfer's walk reads of its fields' dict, found in one pass (rows10.pxi
# ``find_fields``: a lookup each costs more on these few keys)
cdef enum:
    T_HANDLE, T_MORE, T_DELIVERY_ID, T_ABORTED, T_SETTLED, T_STATE, T_FIELDS
cdef int transfer(
    self, int direction, Direction d, Walk w, list events, perf, buf, Py_ssize_t p, Py_ssize_t end, text,
    bint walked,
) except -1:
    """A transfer (a Performative: its fields read and set at their slots); ``w``: ``d``'s Walk,
    ``events``: the decoder's; ``text``: its arguments' text if the frame loop wrote it, ``walked``:
    the frame loop walked it (its row may go straight to the sink: ``performative_out``)."""
    cdef dict a = perf_field(perf, args_at, "args")
    cdef Py_ssize_t size = end - p
    cdef PyObject *got[T_FIELDS]
    transfer_fields(a, got)
    ch = perf_field(perf, channel_at, "channel")
    handle = field_of(got, T_HANDLE)
    asm_map = w.assembling
    key = (ch, handle)
    asm = asm_map.get(key) if asm_map else None  # (no delivery being assembled: no lookup)
    more = field_of(got, T_MORE) is True
    did = field_of(got, T_DELIVERY_ID)
    settled = field_of(got, T_SETTLED) is True
    if (
        d.mid is not None
        or field_of(got, T_ABORTED) is True
        or not (did is None or is_delivery_id(did))
        or w.held_bytes[direction] + size > MAX_HELD_BYTES
        or (not ordinary_start(asm_map, size) if asm is None else not ordinary_next(asm, did, size))
    ):
        C.Decoder10._transfer(self, direction, d, perf, buf, p, end)
        return 0
    cdef LinkState st = <LinkState?>w.state
    link = st.link_of(direction, ch, handle)
    if link is not None:
        name_link(perf, link)
    if walked:
        performative_out(w, events, direction, perf, text)
    else:
        events.append((direction, perf))
    if asm is None and not more:
        # a whole delivery in one frame (the common case): read where it lies, not assembled
        dv = message_of(
            self, w, direction, perf, buf, p, size, perf_field(perf, offset_at, "offset"),
            perf_field(perf, packet_at, "packet"), 1, link, did, settled, field_of(got, T_STATE),
        )
        st.deliver(events, direction, dv, d.ts)
        return 0
    # a transfer of a delivery over several: codec_1_0's _transfer of it (its assembly)
    if asm is None:
        asm = asm_map[key] = Assembly(perf, link)
    asm.frames += 1
    asm.size += size
    if size:
        append_piece(asm.buf, buf, p, size)
        w.held_bytes[direction] += size
    first = asm.first
    if settled:
        asm.settled = True
    if more:
        return 0
    # its last transfer: codec_1_0's _deliver of the assembly, its message held as its row
    del asm_map[key]
    held = asm.buf
    w.held_bytes[direction] -= len(held)
    settled = asm.settled is True or settled
    dv = message_of(
        self, w, direction, perf, held, 0, len(held), asm.offset, first.packet, asm.frames, asm.link,
        first.args.get("delivery-id"), settled, field_of(got, T_STATE), asm.size,
    )
    st.deliver(events, direction, dv, d.ts)
    return 0


cdef inline bint ordinary_start(dict asm_map, Py_ssize_t size):
    """Whether a transfer that no delivery on its link awaits begins one the walker reads."""
    return len(asm_map) < MAX_ASSEMBLIES and size <= MAX_MESSAGE


cdef inline bint ordinary_next(asm, did, Py_ssize_t size):
    """Whether a transfer continues the delivery ``asm`` as the walker assembles it: the same
    delivery, its message held within the bounds (else codec_1_0's _transfer decides)."""
    first_id = asm.first.args.get("delivery-id")
    return (
        not asm.too_big
        and (did is None or did == first_id)
        and (first_id is None or is_delivery_id(first_id))
        and len(asm.buf) + size <= MAX_MESSAGE
    )


cdef int append_piece(bytearray held, buf, Py_ssize_t p, Py_ssize_t size) except -1:
    """The ``size`` bytes at ``p`` of ``buf`` appended to ``held`` (one copy), its allocation
    doubled when it must grow: ``held += piece`` grows a bytearray to the exact size each time
    a transfer's piece is larger than an eighth of it, copying all it held (a 200 kB message in
    64 kB transfers: 384 kB copied; doubled, 64 kB).  (A bytearray keeps its allocation when
    resized down to half of it or more: CPython's PyByteArray_Resize.)"""
    cdef Py_buffer view
    cdef Py_ssize_t n = len(held), total = n + size
    if total > allocated(held):
        PyByteArray_Resize(held, max(total, min(2 * total - 2, MAX_MESSAGE)))
    PyByteArray_Resize(held, total)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        memcpy(PyByteArray_AS_STRING(held) + n, <char *>view.buf + p, size)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc


cdef inline Py_ssize_t allocated(bytearray b) noexcept:
    """The bytes ``b``'s buffer holds room for (``bytearray.__alloc__``)."""
    return (<PyByteArrayObject *>b).ob_alloc


cdef HeldRow message_of(
    self, Walk w, int direction, perf, buf, Py_ssize_t p, Py_ssize_t size, offset, first_packet, frames,
    link, did, bint settled, state, Py_ssize_t received=-1,
):
    """codec_1_0.Decoder10._deliver of a complete delivery whose message is the ``size`` bytes at
    ``p`` in ``buf`` (``received``: its transfers' payload bytes, if not ``size``; ``state``: its
    last transfer's): its anomalies reported, its messages row held (rows_1_0.message_values; no
    Delivery)."""
    cdef Py_buffer view
    ch = perf_field(perf, channel_at, "channel")
    outcome = condition = None
    if state is not None:
        outcome, condition = outcome_of(state)
    complete = True
    if size:
        # the bytes read where they are (no view of them made unless the reference's code reads
        # them), the buffer held until they are read
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            sections, kind, body_size, digest, head, err, texts = sections_in_place(
                <const unsigned char *>view.buf + p, size, None, w.body_bytes, w.deferred_digests, True
            )
            if err is not None:
                complete = False
                self.report_anomaly(
                    direction, offset, "malformed-message", err, ch, size if received < 0 else received
                )
        finally:
            PyBuffer_Release(&view)
        created = creation_time_of(sections)
        if created is not None and not -TS_LIMIT < created < TS_LIMIT:
            self.report_unfit(direction, offset, ch, "creation-time", created, "messages.msg_timestamp")
            created = None
    else:
        sections, kind, body_size, digest, head, created, texts = {}, None, 0, EMPTY_DIGEST, b"", None, None
    return held_row(
        direction, perf, offset, first_packet, frames, link, did, sections, kind, body_size, digest,
        head, complete, settled, outcome, condition, created, texts,
    )


cdef inline object creation_time_of(dict sections):
    """events_1_0.creation_time."""
    props = sections.get("properties")
    if not PyDict_CheckExact(props):
        return creation_time(sections)
    value = (<dict>props).get("creation-time")
    return value if PyLong_Check(value) and not PyBool_Check(value) else None


# --- the compiled frame loop ---------------------------------------------------------------------
#
# codec_1_0.Decoder10._frames with its common frames walked here: the header read in C, the
# performative read straight from the buffer into its fields, a transfer walked by ``transfer``,
# a disposition and a flow by ``disposition`` and ``flow`` (the reference's ``_performative`` of
# them: the bulk of a transfer's company), any other performative handed to that
# ``_performative``.  The rest goes to the
# reference whole: a protocol header (``_header``), an empty frame, a performative that does not
# decode here and every frame when Frame events are wanted (``_frame``, per frame); a frame header
# that does not hold, an encrypted direction and a resynchronisation's late-proven frames
# (``_frames``, the rest of the buffer).

cdef object METHOD_NAMES = dict(SPEC.METHOD_NAMES)
cdef Py_ssize_t HARD_MAX_FRAME
cdef int TRANSFER_CODE, DISPOSITION_CODE, FLOW_CODE


def walk_frames(self, int direction, d, Py_ssize_t pos):
    """codec_1_0.Decoder10._frames: the offset after the last whole frame read."""
    cdef bint stop = False
    if type(d) is not Direction:  # not this class's state (a cast would read the wrong fields)
        return C.Decoder10._frames(self, direction, d, pos)
    pos = frames_loop(self, direction, <Direction>d, pos, &stop)
    if stop:
        return C.Decoder10._frames(self, direction, d, pos)
    return pos


cdef Py_ssize_t frames_loop(self, int direction, Direction d, Py_ssize_t pos, bint *stop) except -1:
    """The frames from ``pos`` walked: the offset after the last whole one, ``stop`` set where the
    reference's loop is to go on (a frame header that does not hold, a direction it walks)."""
    cdef Py_buffer view
    cdef const unsigned char *b
    cdef Py_ssize_t n, size, end, body, p
    cdef unsigned int doff, ftype, channel
    cdef int code
    cdef Py_ssize_t counted = 0
    cdef Walk w = walk_of(self, direction, d)
    cdef bint whole = w.frame_events  # every frame to the reference, for its Frame event
    cdef list events = None  # the decoder's, read once a frame needs it
    if w.encrypted[direction] or d.marks:
        stop[0] = True
        return pos
    buf = buffer_of(d)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        b = <const unsigned char *>view.buf
        n = view.len
        while pos + 8 <= n:
            if b[pos] == 0x41 and b[pos + 1] == 0x4D and b[pos + 2] == 0x51 and b[pos + 3] == 0x50:
                pos = self._header(direction, d, buf, pos)
                if w.encrypted[direction]:
                    return n
                continue
            size = be32(b + pos)
            doff = b[pos + 4]
            ftype = b[pos + 5]
            if size < 8 or doff < 2 or doff * 4 > size or ftype > 1 or size > HARD_MAX_FRAME:
                stop[0] = True  # the reference reports it
                return pos
            end = pos + size
            if end > n:
                return pos
            channel = (<unsigned int>b[pos + 6] << 8) | b[pos + 7]
            body = pos + doff * 4
            if whole or body == end:
                self._frame(direction, d, buf, pos, end, doff, ftype, channel)
                pos = end
                continue
            try:
                code, args, p = walk_performative(b, body, end, buf)
            except (Fallback, DecodeError):
                self._frame(direction, d, buf, pos, end, doff, ftype, channel)
                pos = end
                continue
            counted += 1
            perf = new_performative(
                d.packet, d.ts, d.base + pos, channel, code, METHOD_NAMES[code], args, ftype, size
            )
            if code == TRANSFER_CODE or code == DISPOSITION_CODE or code == FLOW_CODE:
                if events is None:
                    events = self.events
                text = args_text(b, body + 3, p, code)
                if code == TRANSFER_CODE:
                    transfer(self, direction, d, w, events, perf, buf, p, end, text, True)
                elif code == DISPOSITION_CODE:
                    disposition(w, events, direction, perf, text, args, channel, d.ts)
                else:
                    flow(w, events, direction, perf, text, args, channel)
            else:
                self._performative(direction, perf)
            pos = end
    finally:
        PyBuffer_Release(&view)
        if counted:
            tally_frames(self, w, direction, d, counted)
    return pos


cdef int disposition(Walk w, list events, int direction, perf, text, dict a, channel, ts) except -1:
    """codec_1_0.Decoder10._performative of a disposition: its event or row (``performative_out``),
    then the deliveries it settles (the state's, in C)."""
    performative_out(w, events, direction, perf, text)
    (<LinkState?>w.state).settle(events, direction, channel, a, ts)
    return 0


cdef int flow(Walk w, list events, int direction, perf, text, dict a, channel) except -1:
    """codec_1_0.Decoder10._performative of a flow: its event or row (``performative_out``), with
    its link's name and terminus addresses if it names an attached link."""
    handle = a.get("handle")
    if handle is not None:
        link = (<LinkState?>w.state).link_of(direction, channel, handle)
        if link is not None:
            name_link(perf, link)
    performative_out(w, events, direction, perf, text)
    return 0


def walk_feed(self, int direction, data, offset, packet, ts):
    """StreamDecoder.feed for the common case (direction.pxi)."""
    feed_one(self, direction, data, offset, packet, ts)


def walk_data(self, int direction, offset, data, packet, ts):
    """StreamDecoder.data: ``feed`` with the reassembler's argument order."""
    feed_one(self, direction, data, offset, packet, ts)


cdef inline Py_ssize_t frame_need(const unsigned char *b, Py_ssize_t held) noexcept:
    """-1: a frame begun in an earlier packet is completed from the whole of the next one, in
    the buffer the reference would hold.  (The reference's text of a performative that does
    not decode names offsets in that buffer: a frame walked where it lies in the packet would
    read the same but be reported at other offsets; and on the 1.0 bulk capture the bytes
    saved do not show.)"""
    return -1


cdef inline Py_ssize_t frame_lacks(const unsigned char *b, Py_ssize_t held) noexcept:
    """The bytes the frame whose first ``held`` bytes are at ``b`` lacks, from a header that
    holds (as the frame loop checks it); -1 if ``held`` has no such header."""
    cdef Py_ssize_t size
    if held < 8 or (b[0] == 0x41 and b[1] == 0x4D and b[2] == 0x51 and b[3] == 0x50):
        return -1
    size = be32(b)
    if size < 8 or b[4] < 2 or b[4] * 4 > size or b[5] > 1 or size > HARD_MAX_FRAME:
        return -1
    return size - held


cdef int parse(self, int direction, Direction d) except -1:
    """StreamDecoder._parse (final=False, in sync, no skip): the frame loop here, the reference's
    walk from the frame it stopped at; with a row sink, the rows of the events written."""
    cdef bint stop = False
    d.pos = frames_loop(self, direction, d, d.pos, &stop)
    if stop:
        self._parse(direction, d)
    else:
        keep_tail(d)
    if type(d.walk) is Walk and (<Walk>d.walk).sink is not None:
        rows_to_sink(<Walk>d.walk, self.events)
    return 0


cdef int rows_to_sink(Walk w, list events) except -1:
    """The rows of ``events`` (the decoder's list) written into the sink's tables, as
    CaptureOutput.events would write them (append_rows), and the other events left in the list
    in order: a packet's rows are written without its events' trip through the packet loop's
    Python (pop_events, CaptureOutput.events).  The list keeps its identity: the decoders share it."""
    if not events:
        return 0
    rest = rows_of(events, w.capture, w.stream, w.version, w.methods, w.messages, w.to_methods, w.to_messages)
    if len(rest) < len(events):
        events[:] = rest
    return 0


cdef int performative_out(Walk w, list events, int direction, perf, text) except -1:
    """A transfer, disposition or flow the frame loop walked (``text``: its arguments' JSON, or
    None): with a row sink, its methods row written there, the rows of the events before it
    first (the table's order is theirs); else its event (``walked``) appended to ``events``."""
    if w.sink is None:
        events.append((direction, walked(perf, text)))
        return 0
    if events:
        rows_to_sink(w, events)
    return write_methods_row(w.methods, w.to_methods, w.capture, w.stream, direction, perf, w.version, text)


cdef int tally_frames(self, Walk w, int direction, Direction d, Py_ssize_t n) except -1:
    """StreamDecoder._counted of ``n`` frames with no Frame events, at once."""
    tally = w.tally
    if tally is not None:
        tally(direction, d.ts, n)
    self.silent_frames += n
    return 0

include "direction.pxi"
include "rows10.pxi"
include "links10.pxi"


cdef tuple TRANSFER_READ = tuple(sys.intern(f) for f in ("handle", "more", "delivery-id", "aborted", "settled", "state"))
cdef FieldSet transfer_set


def _transfer_set():
    for field in TRANSFER_READ:
        field_slot(&transfer_set, field)


_transfer_set()


cdef int transfer_fields(dict a, PyObject **got) except -1:
    """``got``: a transfer's TRANSFER_READ fields of ``a`` (borrowed; NULL where absent)."""
    cdef Py_ssize_t e
    if PyDict_CheckExact(a):
        return find_fields(a, &transfer_set, got)
    for e in range(T_FIELDS):
        got[e] = PyDict_GetItemWithError(a, TRANSFER_READ[e])
    return 0


cdef inline object field_of(PyObject **got, int e):
    return <object>got[e] if got[e] != NULL else None


# --- what decoder.py binds as ``Decoder10`` when this part is built --------------------------
# (codec_1_0, the reference, is imported first: it selects this part at its end)
from amqpcap import compiled
from amqpcap.amqp import codec_1_0
from amqpcap.amqp.codec_1_0 import read_performative_reference, read_sections_reference

C = codec_1_0
Assembly = C.Assembly
EMPTY_DIGEST = C.EMPTY_DIGEST
_Direction = Direction
_walker = compiled.select("fast09")  # its digest_bytes, if it is in use and hashes with OpenSSL's
if _walker is not None and _walker.DIGEST_BYTES is not None:
    digest_bytes = <digest_bytes_fn>PyCapsule_GetPointer(
        _walker.DIGEST_BYTES, "amqpcap.amqp.fast09.digest_bytes"
    )
MAX_MESSAGE, MAX_HELD_BYTES, MAX_ASSEMBLIES = C.MAX_MESSAGE, C.MAX_HELD_BYTES, C.MAX_ASSEMBLIES
HARD_MAX_FRAME, TRANSFER_CODE, DISPOSITION_CODE = C.HARD_MAX_FRAME, C.TRANSFER, C.DISPOSITION
FLOW_CODE = next(code for code, name in SPEC.METHOD_NAMES.items() if name == "flow")


class Decoder10(codec_1_0.Decoder10):
    """The 1.0 decoder with the compiled per-feed path, frame loop and walk of a whole delivery in
    one transfer."""

    State = LinkState
    Direction = _Direction
    row_sink = None  # decoder.py's (codec_0_9.direct_output): rows written as they are walked
    feed = walk_feed
    data = walk_data
    _frames = walk_frames
    _transfer = walk_transfer
    _message = walk_message
