# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled frame walker for AMQP 0-8 / 0-9 / 0-9-1 (optional; see compiled.py).

``frames`` is ``Decoder09._frames`` in typed C: it walks the whole frames of a direction
buffer through a pointer, decodes method arguments, content-header properties and field
tables with C reads, and assembles contents, building the very same events as the Python
code.  The Python code in codec_0_9.py and stream.py stays the reference: whatever is not a
well-formed frame of the common path (a bad frame end, an unknown method, arguments that do
not decode exactly, a header out of place, a mid-stream version still open, ...) is handed to
the reference method for that frame, which reports it.  So the C decoders only need to say
"decodes" or "does not": every error message, dialect and anomaly is the reference's.

Typed on purpose: the untyped Cython build of the Python modules gained nothing (generic
attribute lookups); the gain here comes from C reads of the wire and from not building a
Python frame per frame, method, header and body.
"""

from cpython.buffer cimport PyBUF_READ
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from cpython.ref cimport Py_INCREF, Py_XDECREF

import collections.abc
import os
import sys

cimport cython

from amqpcap.amqp.events import Content, Frame, Heartbeat, Method
from amqpcap.amqp.facts import SECRET_ARGS
from amqpcap.amqp import stream as _stream
from amqpcap.amqp.stream import StreamDecoder

from amqpcap.amqp.fastframing cimport frame_end
from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

# Events are slotted value classes (values.py): their __init__ is Python bytecode, a quarter of a
# microsecond per event.  The walker builds them as that __init__ would, storing each field in
# its slot directly (the offsets come from the class's member descriptors at import).
include "../slots.pxi"
include "wirefields.pxi"
include "fields_0_9.pxi"
include "spec/readers_0_9.pxi"
include "rowsink.pxi"

cdef class WireFields  # below: what properties() returns, and a method's plain arguments

cdef extern from *:
    """
    static PyObject *amqpcap_alloc(PyObject *cls) {
        PyTypeObject *tp = (PyTypeObject *)cls;
        return tp->tp_alloc(tp, 0);
    }
    """
    object amqpcap_alloc(object cls)


cdef class Slots:
    """Where a slotted value class keeps its fields, in their order (``__match_args__``; direct:
    False if the class is not laid out as expected; it is then called)."""

    cdef object cls
    cdef Py_ssize_t off[24]
    cdef int n
    cdef bint direct

    def __init__(self, cls):
        self.cls = cls
        names = cls.__match_args__
        self.n = len(names)
        self.direct = self.n <= 24 and "__post_init__" not in cls.__dict__
        for i, name in enumerate(names[:24]):
            self.off[i] = slot_offset(cls, name, True)
            if self.off[i] < 0:
                self.direct = False


cdef Slots FRAME = Slots(Frame)
cdef Slots METHOD = Slots(Method)
cdef Slots CONTENT = Slots(Content)
cdef Slots HEARTBEAT = Slots(Heartbeat)


cdef object build(Slots s, tuple values):
    """s.cls(*values), every field given."""
    cdef Py_ssize_t i
    if not s.direct or len(values) != s.n:
        return s.cls(*values)
    obj = amqpcap_alloc(s.cls)
    for i in range(s.n):
        amqpcap_put(obj, s.off[i], values[i])
    return obj


# compiled.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_STAMP = (<bytes>AMQPCAP_SOURCE_STAMP).decode("ascii")


cdef uint64_t I64_MAX = 0x7FFFFFFFFFFFFFFF  # stream.I64_MAX
# the field types a method's arguments may have to be kept as the wire has them (MethodInfo.wire)
cdef frozenset PLAIN = frozenset((P_OCTET, P_SHORT, P_LONG, P_LONGLONG, P_SHORTSTR, P_BIT))


cdef extern from "Python.h":
    dict _PyDict_NewPresized(Py_ssize_t minused)


cdef inline dict new_dict(Py_ssize_t n):
    """An empty dict with room for ``n`` items (argument and property lists of more than five
    would otherwise be resized once or twice as they are decoded)."""
    return _PyDict_NewPresized(n) if n > 5 else {}


# --- argument and property lists (read by spec/readers_0_9.pxi and fields_0_9.pxi) ------------


cdef object plan_of(fields):
    """(codes, names, reader) of a field list: its type codes, its names and the index of its
    generated reader (-1: none, the generic one reads it); None if a type is not one the C
    decoder knows (the reference then decodes, or refuses, it)."""
    codes = bytearray()
    for _, t in fields:
        c = TYPE_CODES.get(t)
        if c is None:
            return None
        codes.append(c)
    # names interned: the row builders look them up with interned keys (an identity hit)
    return bytes(codes), tuple(sys.intern(n) for n, _ in fields), LAYOUTS.get(tuple(codes), -1)


cdef inline Py_ssize_t plan_fields(plan, const uint8_t *b, Py_ssize_t off, Py_ssize_t end, bint rabbit,
                                   dict a, amqpcap_wire *w=NULL) except -2:
    """The fields of ``plan`` (plan_of's) read by its generated reader, or the generic one."""
    cdef Py_ssize_t k = plan[2]
    if k >= 0:
        return FIELD_READERS[k](b, off, end, rabbit, <tuple>plan[1], a, w)
    return read_fields(<bytes>plan[0], <tuple>plan[1], b, off, end, rabbit, a, w)


# Plans by the identity of the spec object (generated tables live as long as the process); the
# entry keeps the object so that its id cannot be reused.
cdef dict METHOD_PLANS = {}
cdef dict PROPERTY_PLANS = {}
cdef int MAX_PROPERTY_PLANS = 4096  # codec_0_9: random flag words from corrupt data


cdef object method_plan(spec):
    entry = METHOD_PLANS.get(id(spec))
    if entry is None or entry[0] is not spec:
        entry = METHOD_PLANS[id(spec)] = (spec, plan_of(spec.fields))
    return entry[1]


cdef object property_plan(props, tuple words):
    """(codes, names, reader, bit names) of the properties the flag words say are present, or
    None if a flag is set beyond the defined properties."""
    per = PROPERTY_PLANS.get(id(props))
    if per is None or per[0] is not props:
        per = PROPERTY_PLANS[id(props)] = (props, {})
    plans = per[1]
    plan = plans.get(words)
    if plan is not None:
        return plan
    present = []
    cdef Py_ssize_t idx = 0, nprops = len(props)
    cdef int bit
    for flags in words:
        for bit in range(15, 0, -1):
            if flags & (1 << bit):
                if idx >= nprops:
                    return None
                present.append(props[idx])
            idx += 1
    # A bit property is its flag alone: no value follows it.
    fields = plan_of(tuple((n, t) for n, t in present if t != "bit"))
    if fields is None:
        return None
    plan = fields + (tuple(sys.intern(n) for n, t in present if t == "bit"),)
    if len(plans) < MAX_PROPERTY_PLANS:
        plans[words] = plan
    return plan


cdef object properties(Walk w, props, const uint8_t *b, Py_ssize_t off, Py_ssize_t end, bint rabbit):
    """codec_0_9.decode_properties, or None if they do not decode.  The walk remembers the plan
    of the last single flag word it saw (most headers of a connection have the same flags)."""
    cdef uint16_t flags
    cdef int nwords = 0
    if off + 2 <= end and props is w.last_props and rd16(b + off) == w.last_flags:  # one word, as before
        plan = w.last_property_plan
        off += 2
    else:
        words = []
        while True:
            if off + 2 > end:
                return None
            flags = rd16(b + off)
            off += 2
            words.append(flags)
            nwords += 1
            if not flags & 1:
                break
            if nwords > 8:
                return None
        plan = property_plan(props, tuple(words))
        if plan is None:
            return None
        if nwords == 1:
            w.last_props, w.last_flags, w.last_property_plan = props, flags, plan
    cdef Py_ssize_t nvalues = len(plan[1])
    if 0 < nvalues <= AMQPCAP_WIRE_MAX:  # the common case: spans, no dict (see WireFields)
        return wire_fields(plan, plan[3], b, off, end, rabbit)
    out = new_dict(nvalues + len(plan[3]))
    off = plan_fields(plan, b, off, end, rabbit, out)
    if off != end:  # also -1: does not decode
        return None
    for n in plan[3]:
        out[n] = True
    return out


cdef object wire_fields(plan, tuple bits, const uint8_t *b, Py_ssize_t off, Py_ssize_t end, bint rabbit):
    """The WireFields of the fields of ``plan`` (plan_of's) at b[off:end] (``bits``: the bit
    properties set, after them), or None if they do not decode to exactly ``end``."""
    cdef WireFields wf = WireFields.__new__(WireFields)
    cdef bytes codes = plan[0]
    cdef tuple names = plan[1]
    wf.data = PyBytes_FromStringAndSize(<const char *>b + off, end - off)
    wf.w.data = <const uint8_t *>PyBytes_AS_STRING(wf.data)
    if plan_fields(plan, wf.w.data, 0, end - off, rabbit, None, &wf.w) != end - off:
        return None
    wf.codes, wf.names, wf.bits = codes, names, bits
    wf.w.codes = <const uint8_t *>PyBytes_AS_STRING(codes)
    wf.w.names = <PyObject *>names
    wf.w.bits = <PyObject *>bits
    wf.w.n = len(names)
    return wf


@cython.final
cdef class WireFields:
    """A field list as the wire has it, a read-only mapping (name -> value) equal to the dict
    the reference decodes: a content header's properties (codec_0_9.decode_properties) or a
    method's arguments (the plain ones: no table, no long string; ``MethodInfo.wire``).  It
    keeps the values' bytes and where each lies (``amqpcap_wire``), and makes the dict only
    when it is read as a mapping: the compiled row builder writes a row's columns and JSON
    from the bytes (WIRE_FIELDS), which is most of what a dissection does with them.  Bit
    properties (set: True) come after the values, as in the dict; a method's bit arguments
    are values (True or False) in their places."""

    cdef amqpcap_wire w
    cdef bytes data, codes
    cdef tuple names, bits
    cdef dict decoded

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(AMQPCAP_WIRE_MAX):  # (a decoding that failed half way leaves some)
            Py_XDECREF(self.w.obj[i])

    cdef dict as_dict(self):
        cdef Py_ssize_t i
        if self.decoded is None:
            out = new_dict(self.w.n + len(self.bits))
            for i in range(self.w.n):
                out[self.names[i]] = field_of(&self.w, i)
            for n in self.bits:
                out[n] = True
            self.decoded = out
        return self.decoded

    @property
    def materialized(self):
        """Whether the dict was made (it is, once the properties are read as a mapping)."""
        return self.decoded is not None

    def __getitem__(self, key):
        return self.as_dict()[key]

    def __iter__(self):
        return iter(self.as_dict())

    def __len__(self):
        return self.w.n + len(self.bits)

    def __contains__(self, key):
        return key in self.as_dict()

    def get(self, key, default=None):
        return self.as_dict().get(key, default)

    def keys(self):
        return self.as_dict().keys()

    def values(self):
        return self.as_dict().values()

    def items(self):
        return self.as_dict().items()

    def copy(self):
        """A dict of the properties."""
        return dict(self.as_dict())

    def __eq__(self, other):
        if isinstance(other, WireFields):
            other = (<WireFields>other).as_dict()
        return self.as_dict() == other

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def __repr__(self):
        return repr(self.as_dict())

    def __reduce__(self):
        return (dict, (self.as_dict(),))


collections.abc.Mapping.register(WireFields)


cdef const amqpcap_wire *wire_of(object o):
    """The spans of ``o`` if it is a WireFields, else NULL."""
    if type(o) is WireFields:
        return &(<WireFields>o).w
    return NULL


WIRE_FIELDS = PyCapsule_New(<void *>wire_of, "amqpcap.amqp.fast09.wire_fields", NULL)


# --- the frame walker (Decoder09._frames and the frame methods it calls) ---------------------


@cython.final
cdef class Walk:
    """What a call of ``frames`` reads of the decoder and the direction.  Attribute lookups
    from C cost as much as the decoding, so each direction keeps its Walk (``Direction.walk``):
    what is fixed once the codec exists (the learner, its handlers, the tally, the pending
    contents, ...) is read on the first call only; per call ``begin`` reads the events list and
    the direction's position, and ``refresh`` the version's tables, which a call into the
    reference may narrow (``_use_version``) or tune.  ``dec`` is held only during a call (no
    cycle through the direction)."""

    cdef object dec, frame_types, learner, tally
    cdef Direction d
    # typed: Cython then calls the dict / list C API instead of looking the methods up
    cdef list events
    cdef dict pending, methods, properties, handlers
    cdef tuple names
    cdef object packet, ts, base
    cdef int direction
    cdef Py_ssize_t frame_max, body_bytes
    cdef bint rabbit, one_version, midstream, frame_events, defer_digests
    cdef object generation  # the decoder's when the tables were read (None: never)
    # what the tables say of a (class, method) (MethodInfo, by key & 63) and of the last single
    # property flag word: read from the tables once, not per frame; cleared with them
    cdef list method_infos
    cdef object last_props, last_property_plan
    cdef int last_flags
    # the decoder's row sink (rowsink.pxi; None, entry NULL: every method and content an event)
    cdef object sink
    cdef const SinkEntry *entry

    cdef bind(self, dec, int direction):
        """The decoder's attributes that do not change once it decodes."""
        self.direction = direction
        self.pending = dec.pending[direction]
        self.names = dec.type_names
        self.learner = dec.learner
        self.handlers = dec.learner.handlers
        self.body_bytes = dec.body_bytes
        self.tally = dec.tally
        self.frame_events = dec.frame_events
        self.defer_digests = dec.deferred_digests
        self.sink = dec.row_sink
        self.entry = NULL
        if self.sink is not None:
            self.entry = <const SinkEntry *>PyCapsule_GetPointer(self.sink.entry, "amqpcap.records.fastrows.sink")

    cdef begin(self, dec, Direction d):
        self.dec = dec
        self.d = d
        self.events = dec.events
        self.packet = d.packet
        self.ts = d.ts
        self.base = d.base
        self.midstream = d.mid is not None
        if dec.generation is not self.generation:  # small ints: an identity while it is the same
            self.refresh()

    cdef counted(self, Py_ssize_t n):
        """StreamDecoder._counted for the ``n`` frames of this call, all at one time."""
        if n:
            if self.tally is not None:
                self.tally(self.direction, self.ts, n)
            if not self.frame_events:
                self.dec.silent_frames += n

    cdef refresh(self):
        dec = self.dec
        self.method_infos = [None] * 64
        self.last_props = None
        self.last_flags = -1
        self.generation = dec.generation
        self.frame_types = dec.frame_types
        self.frame_max = dec.frame_max
        self.methods = dec.methods
        self.properties = dec.properties
        self.rabbit = dec.rabbit
        self.one_version = len(dec.candidates) == 1


# --- body digests: Sha256, the hashing thread, DEFERRED_DIGEST ------------------------------

include "digests.pxi"


# --- the per-direction state and the per-feed path (StreamDecoder.feed and keep_tail) ----------

include "direction.pxi"


@cython.final
cdef class Pending:
    """stream.Pending with its fields in C (the walker reads and writes them directly, and
    builds it without a Python ``__init__``); the reference code sees the same attributes.
    The codec makes these while the compiled walker is in use (``Decoder09.Pending``)."""

    cdef object _method
    cdef public object key, channel, offset, first_packet, header_packet, props, size
    cdef public object received, frames, hash, head, encoding, unknown, damaged, absorbed, why
    # A method whose row was written directly (direct_method) has no event: ``lazy``, and its
    # fields here (its packet, offset and channel are the content's first_packet, offset and
    # channel).  Its Method is made from them if anything asks for it (``method``: the content's
    # event, the reference's anomaly texts).
    cdef bint lazy
    cdef object m_ts, m_class_id, m_method_id, m_name, m_args, m_synchronous, m_size

    def __init__(self, method, key, channel, offset, packet):
        _stream.Pending.__init__(self, method, key, channel, offset, packet)

    @staticmethod
    def digest():
        return new_digest()

    @property
    def method(self):
        return method_of(self)

    @method.setter
    def method(self, value):
        self._method = value
        self.lazy = False


cdef object method_of(Pending p):
    """The Method event of ``p``'s content, made from its fields the first time it is asked for if
    its row was written directly."""
    if p.lazy:
        p._method = build(
            METHOD,
            (p.first_packet, p.m_ts, p.offset, p.channel, p.m_class_id, p.m_method_id, p.m_name, p.m_args,
             p.m_synchronous, True, p.m_size, None, None),
        )
        p.lazy = False
    return p._method


cdef inline bint has_method(Pending p):
    return p.lazy or p._method is not None


cdef inline object method_class_id(Pending p):
    return p.m_class_id if p.lazy else p._method.class_id


# A new content's state as the reference's __init__ leaves it (the walker copies it from here:
# no Python call per content).
cdef Pending FRESH = Pending(None, 0, 0, 0, 0)


cdef inline Pending init_pending(Pending p, method, key, channel, offset, packet):
    cdef Pending f = FRESH
    p._method, p.lazy = method, False
    p.key, p.channel, p.offset, p.first_packet = key, channel, offset, packet
    p.header_packet, p.props, p.size = f.header_packet, f.props, f.size
    p.received, p.frames, p.head, p.encoding = f.received, f.frames, f.head, f.encoding
    p.unknown, p.damaged, p.absorbed, p.why = f.unknown, f.damaged, f.absorbed, f.why
    p.hash = new_digest()
    return p


cdef inline object digest_of(h, bint deferred):
    """A finished content's body_hash: its hex digest, or (``deferred``) the Sha256 itself while
    the hashing thread still has pieces of it."""
    if type(h) is Sha256:
        if deferred and (<Sha256>h).pending:
            return h
        return (<Sha256>h).hexdigest()
    return h.hexdigest()


cdef end_content(Walk w, Pending p, bint complete):
    """StreamDecoder.end_content for a content with a method and no reason to report, with
    Decoder09._content_view inlined; its row written directly if its method's was and nothing
    waits in the events list."""
    w.pending.pop(p.key, None)
    size = p.size
    props = p.props or {}
    body_size = size if size > 0 else 0
    digest = digest_of(p.hash, w.defer_digests)
    if p.lazy and not w.events and direct_content(w, p, props, body_size, digest, complete):
        return
    m = method_of(p)
    values = (w.packet, w.ts, p.offset, p.channel, m, m.class_id, props, body_size, p.received, p.frames,
              digest, p.head, complete, p.first_packet, p.header_packet, p.encoding, None, None)
    w.events.append((w.direction, build(CONTENT, values)))


cdef bint direct_content(Walk w, Pending p, props, body_size, digest, bint complete) except -1:
    """The messages row of ``p``'s content written by the sink, no Content event made: True; False
    if the sink leaves it to the event (nothing written)."""
    cdef MethodView mv
    cdef ContentView cv
    cdef object done = complete
    mv.packet, mv.ts = <PyObject *>p.first_packet, <PyObject *>p.m_ts
    mv.offset, mv.channel = <PyObject *>p.offset, <PyObject *>p.channel
    mv.class_id, mv.method_id = <PyObject *>p.m_class_id, <PyObject *>p.m_method_id
    mv.name, mv.args = <PyObject *>p.m_name, <PyObject *>p.m_args
    mv.synchronous, mv.has_content = <PyObject *>p.m_synchronous, <PyObject *>True
    mv.frame_size, mv.command_id, mv.answers_command_id = <PyObject *>p.m_size, <PyObject *>None, <PyObject *>None
    cv.packet, cv.ts = <PyObject *>w.packet, <PyObject *>w.ts
    cv.offset, cv.channel, cv.method = <PyObject *>p.offset, <PyObject *>p.channel, &mv
    cv.properties, cv.body_size = <PyObject *>props, <PyObject *>body_size
    cv.body_received, cv.body_frames = <PyObject *>p.received, <PyObject *>p.frames
    cv.body_hash, cv.body, cv.complete = <PyObject *>digest, <PyObject *>p.head, <PyObject *>done
    cv.first_packet = <PyObject *>p.first_packet
    cv.exchange, cv.routing_key = <PyObject *>None, <PyObject *>None
    return not w.entry.content(w.sink, w.direction, &cv)


@cython.final
cdef class MethodInfo:
    """What the version's tables say of one (class, method), for the walker: the spec (None:
    unknown), its dialect, its decoding plan (None: the reference decodes it), and the spec
    fields and facts each method event needs."""

    cdef int key
    cdef object spec, dialect, plan, name, content, synchronous, learn
    cdef bint secret
    # its arguments kept as the wire has them (WireFields): plain fields only (no table, no long
    # string), and nothing but the row builder reads them (no dialect, no secret to redact, no
    # connection fact to learn, no body in them)
    cdef bint wire


cdef MethodInfo method_info(Walk w, int cid, int mid):
    cdef int key = (cid << 16) | mid
    cdef MethodInfo info = <MethodInfo>w.method_infos[key & 63]
    if info is not None and info.key == key:
        return info
    info = MethodInfo.__new__(MethodInfo)
    info.key = key
    found = w.methods.get((cid, mid))
    if found is not None:
        info.spec, info.dialect = found
        info.plan = method_plan(info.spec)
        info.name = info.spec.name
        info.content = info.spec.content
        info.synchronous = info.spec.synchronous
        info.secret = info.name in SECRET_ARGS
        info.learn = w.handlers.get(info.name)
        info.wire = (
            info.plan is not None
            and 0 < len(info.plan[1]) <= AMQPCAP_WIRE_MAX
            and all(c in PLAIN for c in info.plan[0])
            and not info.dialect
            and not info.secret
            and info.learn is None
            and info.name != "message.transfer"
        )
    w.method_infos[key & 63] = info
    return info


cdef method_frame(Walk w, int channel, buf, const uint8_t *b, Py_ssize_t start, Py_ssize_t end, offset,
                  Py_ssize_t size):
    """Decoder09.decode_method_frame on the common path; anything else goes to the reference."""
    dec = w.dec
    cdef int direction = w.direction
    if size < 4 or not w.one_version:
        dec.decode_method_frame(direction, w.d, channel, buf, start, end, offset, size)
        w.refresh()
        return
    cdef int cid = rd16(b + start), mid = rd16(b + start + 2)
    cdef MethodInfo info = method_info(w, cid, mid)
    if info.spec is None:
        dec.decode_method_frame(direction, w.d, channel, buf, start, end, offset, size)
        w.refresh()
        return
    plan = info.plan
    if info.wire:
        args = wire_fields(plan, (), b, start + 4, end, w.rabbit)
        if args is None:  # an anomaly: the reference reports it
            dec.decode_method_frame(direction, w.d, channel, buf, start, end, offset, size)
            w.refresh()
            return
    else:
        args = new_dict(len(plan[1]) if plan is not None else 0)
        if plan is None or plan_fields(plan, b, start + 4, end, w.rabbit, args) != end:
            # a dialect, or an anomaly: the reference decides
            dec.decode_method_frame(direction, w.d, channel, buf, start, end, offset, size)
            w.refresh()  # a dialect's connection.tune-ok may have changed the frame-max
            return
    if info.dialect:
        args["$dialect"] = info.dialect
    name = info.name
    content = info.content
    if w.entry != NULL and info.wire and not w.midstream and not w.events:
        # nothing before it waits in the events list: its row now, and no event
        if direct_method(w, channel, offset, cid, mid, args, info, size):
            return
    m = build(
        METHOD, (w.packet, w.ts, offset, channel, cid, mid, name, args, info.synchronous, content, size, None, None)
    )
    if w.midstream:
        ms = w.d.mid
        # StreamDecoder.fresh_channel does nothing once the held anomaly is out and the channel known
        if ms.held is not None or channel not in ms.fresh:
            dec.fresh_channel(direction, w.d, channel)
    # StreamDecoder._method: secrets out, then the event, then what it tells of the connection
    if info.secret:
        w.learner.redact(name, args)
    w.events.append((direction, m))
    learn = info.learn
    if learn is not None:
        learn(direction, m)
        if name == "connection.tune-ok" and (fm := w.learner.v.get("frame_max")):
            dec.tuned(fm)
            w.frame_max = dec.frame_max
    pend = w.pending
    p = pend.get(channel)
    if p is not None:
        dec.end_content(direction, p, False, f"{p.method.name} content interrupted by {name}")
    if content:
        # StreamDecoder._start_content (the entry was just ended if there was one)
        pend[channel] = init_pending(Pending.__new__(Pending), m, channel, channel, offset, w.packet)
    elif name == "message.transfer" and "body" in args:
        dec.inline_transfer(direction, m, buf, start + 4, end)


cdef bint direct_method(Walk w, int channel, offset, int cid, int mid, args, MethodInfo info,
                        Py_ssize_t size) except -1:
    """method_frame's end for a method of plain arguments (``info.wire``: no dialect, secret or
    learned fact) whose row the sink writes, no Method event made: True; False if the sink
    leaves it to the event (nothing written, nothing done)."""
    cdef MethodView v
    cdef object ch = channel, class_id = cid, method_id = mid, frame_size = size  # the views hold objects
    v.packet, v.ts, v.offset, v.channel = <PyObject *>w.packet, <PyObject *>w.ts, <PyObject *>offset, <PyObject *>ch
    v.class_id, v.method_id = <PyObject *>class_id, <PyObject *>method_id
    v.name, v.args = <PyObject *>info.name, <PyObject *>args
    v.synchronous, v.has_content = <PyObject *>info.synchronous, <PyObject *>info.content
    v.frame_size, v.command_id, v.answers_command_id = <PyObject *>frame_size, <PyObject *>None, <PyObject *>None
    if w.entry.method(w.sink, w.direction, &v):
        return False
    pend = w.pending
    found = pend.get(channel)
    if found is not None:
        w.dec.end_content(w.direction, found, False, f"{found.method.name} content interrupted by {info.name}")
    if info.content:
        p = init_pending(Pending.__new__(Pending), None, ch, ch, offset, w.packet)
        p.lazy = True
        p.m_ts, p.m_class_id, p.m_method_id, p.m_name = w.ts, class_id, method_id, info.name
        p.m_args, p.m_synchronous, p.m_size = args, info.synchronous, frame_size
        pend[channel] = p
    return True


cdef header_frame(Walk w, int channel, buf, const uint8_t *b, Py_ssize_t start, Py_ssize_t end, offset):
    """Decoder09.decode_header_frame on the common path; anything else goes to the reference."""
    found = w.pending.get(channel)
    if type(found) is not Pending:  # no content in assembly on this channel
        w.dec.decode_header_frame(w.direction, w.d, channel, buf, start, end, offset)
        return
    cdef Pending p = <Pending>found
    if p.props is not None or end - start < 14 or not has_method(p):
        w.dec.decode_header_frame(w.direction, w.d, channel, buf, start, end, offset)
        return
    cdef int cid = rd16(b + start)
    if cid != method_class_id(p):
        w.dec.decode_header_frame(w.direction, w.d, channel, buf, start, end, offset)
        return
    props = properties(w, w.properties.get(cid, ()), b, start + 12, end, w.rabbit)
    if props is None:
        w.dec.decode_header_frame(w.direction, w.d, channel, buf, start, end, offset)
        return
    cdef uint64_t body_size = rd64(b + start + 4)
    if body_size > <uint64_t>I64_MAX:  # does not fit messages.body_size: the reference reports it
        w.dec.decode_header_frame(w.direction, w.d, channel, buf, start, end, offset)
        return
    p.props = props
    p.size = body_size
    p.header_packet = w.packet
    if body_size == 0:
        end_content(w, p, True)


cdef body_frame(Walk w, int channel, buf, const uint8_t *b, Py_ssize_t start, Py_ssize_t end, offset):
    """Decoder09.decode_body_frame and StreamDecoder._body on the common path."""
    found = w.pending.get(channel)
    if type(found) is not Pending:
        w.dec.decode_body_frame(w.direction, w.d, channel, buf, start, end, offset)
        return
    cdef Pending p = <Pending>found
    if p.props is None or not has_method(p):
        w.dec.decode_body_frame(w.direction, w.d, channel, buf, start, end, offset)
        return
    cdef Py_ssize_t n = end - start, take
    p.frames += 1
    if n:
        if type(p.hash) is Sha256:  # the frame's bytes as they are
            if w.defer_digests:
                (<Sha256>p.hash).feed_queued(b + start, n)
            else:
                (<Sha256>p.hash).feed(b + start, n)
        elif n > 1024:  # a view of the frame, not a copy (a small copy costs less than a view)
            p.hash.update(PyMemoryView_FromMemory(<char *>(b + start), n, PyBUF_READ))
        else:
            p.hash.update(PyBytes_FromStringAndSize(<const char *>(b + start), n))
        head = p.head
        take = w.body_bytes - len(head)
        if take > 0:
            p.head = head + PyBytes_FromStringAndSize(<const char *>(b + start), n if n < take else take)
        p.received += n
    received = p.received
    size = p.size
    if received >= size:
        if received > size:
            w.dec.report_anomaly(
                w.direction,
                offset,
                "body-overrun",
                f"{received} body bytes for a declared size of {size}",
                channel,
            )
        end_content(w, p, received == size)


def frames(dec, int direction, d, Py_ssize_t pos):
    """Decoder09._frames: decode the whole frames of ``d.buf`` from ``pos``; where it stopped."""
    if type(d) is not Direction:  # not this class's state (a cast would read the wrong fields)
        return dec.frames_reference(direction, d, pos)
    return walk(dec, direction, <Direction>d, pos)


cdef Py_ssize_t walk(dec, int direction, Direction d, Py_ssize_t pos) except? -2:
    buf = buffer_of(d)
    cdef Py_ssize_t n = len(buf)
    if n - pos < 7:
        return pos
    # bytes (most walks: a packet's payload) read in place; a bytearray through a typed view,
    # so that it cannot be resized under the walk
    cdef const uint8_t[::1] view
    cdef const uint8_t *b
    if type(buf) is bytes:
        b = <const uint8_t *>PyBytes_AS_STRING(buf)
    else:
        view = buf
        b = &view[0]
    cdef Walk w = d.walk
    if w is None or w.direction != direction:
        w = d.walk = Walk.__new__(Walk)
        w.bind(dec, direction)
    w.begin(dec, d)
    try:
        return frames_of(w, dec, direction, d, buf, b, n, pos)
    finally:
        w.dec = None  # no cycle decoder -> direction -> walk -> decoder
        w.d = None
        w.events = None


cdef inline Py_ssize_t frames_of(
    Walk w, dec, int direction, Direction d, buf, const uint8_t *b, Py_ssize_t n, Py_ssize_t pos
) except? -2:
    cdef uint8_t ftype
    cdef uint16_t channel
    cdef uint32_t size
    cdef Py_ssize_t end, start
    cdef Py_ssize_t nframes = 0
    while n - pos >= 7:
        end = frame_end(b, pos, n, w.frame_types, w.frame_max)
        if end <= 0:
            if end < 0:  # NOT_ALL_THERE
                break
            w.counted(nframes)
            dec.bad_frame(direction, d, pos)
            return pos + 1
        ftype = b[pos]
        channel = rd16(b + pos + 1)
        size = end - pos - 7
        offset = w.base + pos
        nframes += 1
        if w.frame_events:
            w.events.append(
                (direction, build(FRAME, (w.packet, w.ts, offset, channel, ftype, w.names[ftype], size, size + 8)))
            )
        start = pos + 7
        if ftype == 1:
            method_frame(w, channel, buf, b, start, end, offset, size)
        elif ftype == 3:
            body_frame(w, channel, buf, b, start, end, offset)
        elif ftype == 2:
            header_frame(w, channel, buf, b, start, end, offset)
        elif ftype == 8:
            w.events.append((direction, build(HEARTBEAT, (w.packet, w.ts, offset, channel))))
        # 4-7 (0-8 out-of-band and trace frames) are recorded as Frame events only.
        pos = end + 1
    w.counted(nframes)
    return pos


# --- the stream core's per-feed path: what direction.pxi asks of its includer --------------


def feed(dec, int direction, data, offset, packet, ts):
    """StreamDecoder.feed for the common case (direction.pxi)."""
    feed_one(dec, direction, data, offset, packet, ts)


def data(dec, int direction, offset, data, packet, ts):
    """StreamDecoder.data: ``feed`` with the reassembler's argument order."""
    feed_one(dec, direction, data, offset, packet, ts)


cdef inline Py_ssize_t frame_need(const unsigned char *b, Py_ssize_t held) noexcept:
    """The bytes the frame whose first ``held`` bytes are at ``b`` lacks, from its header; -1 if
    they do not hold a whole header."""
    if held < 7:
        return -1
    return <Py_ssize_t>rd32(<const uint8_t *>b + 3) + 8 - held


cdef inline Py_ssize_t frame_lacks(const unsigned char *b, Py_ssize_t held) noexcept:
    """Never asked: ``frame_need`` always gives a frame's lack from its header (direction.pxi)."""
    return -1


cdef int parse(dec, int direction, Direction d) except -1:
    """StreamDecoder._parse (final=False) with no skip pending."""
    cdef Py_ssize_t pos = d.pos
    while not d.skip:
        if d.resync:
            pos = dec.find_boundary(direction, d, pos, False)
            if pos < 0:
                break
        pos = walk(dec, direction, d, pos)
        if not d.resync:
            d.pos = pos
            break
    keep_tail(d)
    return 0


# --- what decoder.py binds as ``Decoder09`` when this part is built --------------------------
from amqpcap.amqp.codec_0_9 import Decoder09Py

_walk_frames, _feed, _data, _Direction, _Pending = frames, feed, data, Direction, Pending


class Decoder09(Decoder09Py):
    """The 0-8 / 0-9 / 0-9-1 decoder with the compiled walker: its frame loop, its per-feed path
    of the stream core, and the per-direction state and contents in assembly with their fields
    in C; the reference's methods for everything else."""

    _frames = _walk_frames
    feed = _feed
    data = _data
    Direction = _Direction
    Pending = _Pending
    # what codec_0_9.direct_output hands over: none until it does (every event made)
    row_sink = None
    deferred_digests = False
