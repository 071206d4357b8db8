# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled row builders for the methods and messages tables (optional; see compiled.py).

``append_rows`` is rows.py's ``append_rows_reference`` in typed C: the rows of its
``method_row_reference`` and ``message_row_reference`` (same values, same types), built
directly instead of through a list, with C type checks in place of rows' ``as_text`` /
``as_int`` / ... converters and the event fields read from their slots.  rows.py stays the
reference and owns every decision that is not a type check: which column each argument and
property fills (``MethodPlan``, ``message_arg_plan``, ``fill_plan``: the 0-10 consumer tag
included), the JSON encoder (``to_json``), reply-code names, failing methods and 0-10 sequence
sets are its own functions, called from here.  Properties and plain
arguments the compiled decoder kept as the wire has them (fast09.WireFields) fill their
columns and JSON from the bytes (``stage_wire``), by the same ``Plan`` a dict of those names
in that order is written by.  An event of another class than Method / Content, or arguments
that are neither a dict nor such a mapping, go to the reference whole.

A row is staged as a C array of its values; ``append_rows`` hands that array to a compiled
table buffer (fastwriter's ``APPEND_ARRAY``: no tuple, only the values present written) and
makes a tuple for any other table.  ``Liveness`` is liveness.py's with the decoder's tally in C.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Check, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_CheckExact, PyDict_GetItem, PyDict_GetItemWithError, PyDict_Next
from cpython.long cimport PyLong_Check, PyLong_FromLongLong
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from libc.string cimport memset
from cpython.unicode cimport PyUnicode_Check, PyUnicode_CheckExact, PyUnicode_DecodeUTF8

import sys

cimport cython

from amqpcap.amqp import spec as _spec
from amqpcap.amqp.events import Content, Method

include "../slots.pxi"
include "../amqp/wirefields.pxi"
include "../amqp/rowsink.pxi"
include "raw.pxi"

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef extern from *:
    """
    static long long amqpcap_as_ll(PyObject *v, int *overflow) {
        return PyLong_AsLongLongAndOverflow(v, overflow);
    }
    """
    long long amqpcap_as_ll(object v, int *overflow) except? -1
    bint PyBool_Check(object o)

# compiled.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_STAMP = (<bytes>AMQPCAP_SOURCE_STAMP).decode("ascii")


# the slot of each field of a view (rowsink.pxi's METHOD_VIEW, CONTENT_VIEW), in its order;
# DIRECT: every one found (else the events are not laid out as expected: the reference's rows)
cdef enum:
    N_METHOD_VIEW = 13
    N_CONTENT_VIEW = 14
cdef Py_ssize_t METHOD_SLOTS[N_METHOD_VIEW]
cdef Py_ssize_t CONTENT_SLOTS[N_CONTENT_VIEW]
cdef Py_ssize_t C_METHOD = slot_offset(Content, "method")
cdef bint DIRECT = False


cdef int view_slots() except -1:
    global DIRECT
    cdef Py_ssize_t i
    if len(METHOD_VIEW) != N_METHOD_VIEW or len(CONTENT_VIEW) != N_CONTENT_VIEW:
        raise ImportError("rowsink.pxi's views changed: update fastrows.pyx")
    if (sizeof(MethodView) != N_METHOD_VIEW * sizeof(PyObject *)
            or sizeof(ContentView) != (N_CONTENT_VIEW + 1) * sizeof(PyObject *)):
        raise ImportError("rowsink.pxi: a view's fields are not references first, then the method")
    DIRECT = C_METHOD >= 0
    for i in range(N_METHOD_VIEW):
        METHOD_SLOTS[i] = slot_offset(Method, METHOD_VIEW[i])
        DIRECT = DIRECT and METHOD_SLOTS[i] >= 0
    for i in range(N_CONTENT_VIEW):
        CONTENT_SLOTS[i] = slot_offset(Content, CONTENT_VIEW[i])
        DIRECT = DIRECT and CONTENT_SLOTS[i] >= 0
    return 0


view_slots()


# JSON: rows.to_json's text (the C encoder of the json module, ensure_ascii=False, compact
# separators, bytes as {"$b64": ...} by rows.json_default) written straight into one buffer for
# the values decoded arguments and properties are made of: dicts with str keys, lists, str, int,
# float, bool, None, bytes.  Anything else (a subclass, a memoryview, a non-str key, deeper than
# MAX_DEPTH) makes the whole value go to rows' encoder instead: the text is the same either way.
# Why not the library: json + base64 take 5.7 / 11.0 us for a method's arguments / a message's
# properties, this 1.0 / 1.9 us (~2.6 s of a 200k-packet run); orjson writes NaN and Infinity as
# null where json writes NaN, which would change the tables.
include "jsonbuf.pxi"

cdef extern from *:
    """
    static int amqpcap_jvalue(amqpcap_jbuf *b, PyObject *o, int depth) {
        int r;
        if (depth > 64) return 1;
        if (PyUnicode_CheckExact(o)) return amqpcap_jstr(b, o);
        if (o == Py_None) return amqpcap_jput(b, "null", 4);
        if (o == Py_True) return amqpcap_jput(b, "true", 4);
        if (o == Py_False) return amqpcap_jput(b, "false", 5);
        if (PyLong_CheckExact(o)) {
            int overflow;
            long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
            if (overflow) return 1;
            if (v == -1 && PyErr_Occurred()) return -1;
            return amqpcap_jint(b, v);
        }
        if (PyFloat_CheckExact(o)) return amqpcap_jdouble(b, PyFloat_AS_DOUBLE(o));
        if (PyDict_CheckExact(o)) {
            PyObject *k, *v;
            Py_ssize_t pos = 0;
            int first = 1;
            if (amqpcap_jputc(b, '{') < 0) return -1;
            while (PyDict_Next(o, &pos, &k, &v)) {
                if (!PyUnicode_CheckExact(k)) return 1;
                if (!first && amqpcap_jputc(b, ',') < 0) return -1;
                first = 0;
                if ((r = amqpcap_jstr(b, k)) != 0) return r;
                if (amqpcap_jputc(b, ':') < 0) return -1;
                if ((r = amqpcap_jvalue(b, v, depth + 1)) != 0) return r;
            }
            return amqpcap_jputc(b, '}');
        }
        if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
            Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
            PyObject **items = PySequence_Fast_ITEMS(o);
            if (amqpcap_jputc(b, '[') < 0) return -1;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (i && amqpcap_jputc(b, ',') < 0) return -1;
                if ((r = amqpcap_jvalue(b, items[i], depth + 1)) != 0) return r;
            }
            return amqpcap_jputc(b, ']');
        }
        if (PyBytes_CheckExact(o))
            return amqpcap_jb64(b, (const unsigned char *)PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o));
        if (PyByteArray_CheckExact(o))
            return amqpcap_jb64(b, (const unsigned char *)PyByteArray_AS_STRING(o), PyByteArray_GET_SIZE(o));
        return 1;
    }
    /* '"key":' of each str in keys, one after the other, into a bytes object; ends[i] the end
       of the i-th.  None if a key is not written here (the field list then goes through a dict). */
    static PyObject *amqpcap_json_fragments(PyObject *keys, Py_ssize_t *ends) {
        amqpcap_jbuf b;
        b.p = b.small; b.n = 0; b.cap = sizeof b.small; b.wide = 0;
        int r = 0;
        Py_ssize_t n = PyTuple_GET_SIZE(keys);
        for (Py_ssize_t i = 0; i < n && r == 0; i++) {
            PyObject *k = PyTuple_GET_ITEM(keys, i);
            r = PyUnicode_CheckExact(k) ? amqpcap_jstr(&b, k) : 1;
            if (r == 0) r = amqpcap_jput(&b, ":", 1);
            ends[i] = b.n;
        }
        PyObject *out = r == 0 ? PyBytes_FromStringAndSize(b.p, b.n) : NULL;
        if (b.p != b.small) PyMem_Free(b.p);
        if (r == 1) Py_RETURN_NONE;
        return out;
    }
    /* The JSON text of o; None if it is not a value written here; NULL: error set. */
    static PyObject *amqpcap_json(PyObject *o) {
        amqpcap_jbuf b;
        b.p = b.small; b.n = 0; b.cap = sizeof b.small; b.wide = 0;
        int r = amqpcap_jvalue(&b, o, 0);
        PyObject *out = r == 0 ? amqpcap_jtext(&b) : NULL;
        if (b.p != b.small) PyMem_Free(b.p);
        if (r == 1) Py_RETURN_NONE;
        return out;
    }
    """
    int amqpcap_jvalue(amqpcap_jbuf *b, object o, int depth) except -1
    object amqpcap_json(object o)
    object amqpcap_json_fragments(tuple keys, Py_ssize_t *ends)


cdef object to_json(object o):
    """rows.to_json(o)."""
    if o is None:
        return None
    text = amqpcap_json(o)
    if text is None:
        return R.encode_json(o)  # (read at each use: rows makes its encoder at the first)
    return text


def json_text(o):
    """to_json as the compiled builders write it (for the tests: rows.to_json's text)."""
    if R is None:
        bind()
    return to_json(o)


# Converters of the fill plans, by code (the reference's functions, recognised by identity).
cdef enum:
    CALL = 0
    TO_S = 1
    TO_I = 2
    TO_B = 3
    TO_TAG = 4
    TO_SHORT = 5
    TO_MSG_TS = 6
    TO_TABLE_JSON = 7

# rows.py's parts, bound at the first row (not at import: rows.py imports this module to decide
# which builders run, and a module half imported cannot be judged).
cdef object R = None
cdef dict CODES
cdef object reply_code_info, failing
cdef long long I64_MAX = 0x7FFFFFFFFFFFFFFF


cdef inline object to_s(object v):
    if v is None or PyUnicode_Check(v):
        return v
    if PyBytes_Check(v):
        return PyUnicode_DecodeUTF8(PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v), "replace")
    if PyByteArray_Check(v):
        return PyUnicode_DecodeUTF8(PyByteArray_AS_STRING(v), PyByteArray_GET_SIZE(v), "replace")
    return str(v)


cdef inline bint is_int(object v):
    return PyLong_Check(v) and not PyBool_Check(v)


cdef inline object convert(int code, object conv, object v):
    """conv(v) for a converter of rows.py (``code``: which one, CALL for any other)."""
    cdef int overflow = 0
    cdef long long x
    if code == TO_S:
        return to_s(v)
    if code == TO_B:
        return v if PyBool_Check(v) else None
    if code == TO_TABLE_JSON:
        return to_json(v)
    if code == CALL:
        return conv(v)
    # the integers: as_int, as_short (no bool), as_tag, as_timestamp_ns (any int)
    if not (PyLong_Check(v) if code == TO_TAG or code == TO_MSG_TS else is_int(v)):
        return None
    if code == TO_I:
        return v
    x = amqpcap_as_ll(v, &overflow)
    if code == TO_TAG:
        return v if overflow == 0 and x >= 0 else None
    if code == TO_SHORT:
        return v if overflow < 0 or (overflow == 0 and x < 32768) else None
    return PyLong_FromLongLong(x * 1_000_000_000) if overflow == 0 and 0 <= x < 9_000_000_000 else None


cdef enum:
    MAX_FILL = 32
    MAX_NAMES = 64  # longer argument / property lists: not written from the wire


cdef class Plan:
    """A reference fill plan ((column, value name, converter), ...) with converter codes, the
    method plan's flags, and the names of the field list it was made for, in order (a dict's
    keys; a WireFields' values then bits), with their JSON keys: a field list of the same
    names in the same order uses this plan, from a dict (``n`` fill entries) or from the wire
    (``at``: the fill entry of each name)."""

    cdef Py_ssize_t n
    cdef Py_ssize_t col[MAX_FILL]
    cdef int code[MAX_FILL]
    cdef tuple keys, convs
    cdef bint reply_code, failing
    cdef object direction, version  # the row's it was made for (rows' plans depend on them)
    cdef tuple names
    cdef object frags  # '"name":' of each name in one bytes object (None: not written here)
    cdef bint wide_keys  # a key of frags is not ASCII
    cdef bint wire  # a field list of these names may be written from its bytes (stage_wire)
    cdef Py_ssize_t ends[MAX_NAMES]
    cdef Py_ssize_t at[MAX_NAMES]

    def __init__(self, fill, tuple names, reply_code=False, failing=False, direction=None, version=None):
        cdef Py_ssize_t j
        fill = tuple(fill)
        if len(fill) > MAX_FILL:
            raise ValueError("fill plan too long")
        self.n = len(fill)
        self.keys = tuple(sys.intern(k) for _, k, _ in fill)  # the decoder's keys are interned too
        self.convs = tuple(c for _, _, c in fill)
        for j, (i, k, conv) in enumerate(fill):
            self.col[j] = i
            self.code[j] = CODES.get(conv, CALL)
        self.reply_code = reply_code
        self.failing = failing
        self.direction, self.version = direction, version
        self.names = names
        self.frags = amqpcap_json_fragments(names, self.ends) if len(names) <= MAX_NAMES else None
        self.wide_keys = self.frags is not None and not self.frags.isascii()
        # a reply code, a failing method: what the dict's path adds; a value in two columns
        self.wire = self.frags is not None and not (reply_code or failing) and len(set(self.keys)) == self.n
        for j in range(len(names) if self.frags is not None else 0):
            self.at[j] = self.keys.index(names[j]) if names[j] in self.keys else -1


# Plans by what they were made for: (method name, names, direction, version) -> Plan for a
# method's arguments (rows.MethodPlan) and for the arguments of a content's method
# (rows.message_arg_plan); names -> Plan for properties (rows.fill_plan).  The plan used last
# for a method name (per direction) / for a property list of n names: most rows of a capture
# repeat the names of the row before them, and comparing the names costs less than building
# and hashing the key.  Names come from the wire: at most PLANS_MAX plans of each kind.
cdef dict method_plans = {}
cdef dict message_arg_plans = {}
cdef dict property_plans = {}
cdef tuple last_method_plan = ({}, {})
cdef tuple last_message_arg_plan = ({}, {})
cdef list last_property_plan = [None] * 32
cdef Py_ssize_t PLANS_MAX = 4096


cdef inline bint made_for(Plan plan, direction, version):
    """``plan`` serves a row of ``direction`` and ``version`` (small ints and the conversation's
    version string: mostly identities)."""
    return (plan.direction is direction or plan.direction == direction) and (
        plan.version is version or plan.version == version
    )


cdef inline bint same_name(object a, object b):
    """Two names alike: exact str (interned on both sides: mostly an identity)."""
    return a is b or (PyUnicode_CheckExact(a) and PyUnicode_CheckExact(b) and a == b)


cdef bint same_names(tuple names, d, const amqpcap_wire *w):
    """``names`` are the keys of the dict ``d`` in order or (``w`` not NULL) the values then
    the bits of ``w``."""
    cdef PyObject *k
    cdef PyObject *v
    cdef Py_ssize_t pos = 0, i = 0, nv
    if w != NULL:
        nv = w.n
        if PyTuple_GET_SIZE(names) != nv + PyTuple_GET_SIZE(<tuple>w.bits):
            return False
        for i in range(PyTuple_GET_SIZE(names)):
            k = PyTuple_GET_ITEM(<tuple>w.names, i) if i < nv else PyTuple_GET_ITEM(<tuple>w.bits, i - nv)
            if not same_name(<object>PyTuple_GET_ITEM(names, i), <object>k):
                return False
        return True
    if len(<dict>d) != len(names):
        return False
    while PyDict_Next(<dict>d, &pos, &k, &v):
        if not same_name(<object>PyTuple_GET_ITEM(names, i), <object>k):
            return False
        i += 1
    return True


cdef inline dict last_plans(tuple by_direction, direction):
    return <dict>by_direction[1 if direction is 1 else 0]


cdef inline tuple names_of(d, const amqpcap_wire *w):
    if w == NULL:
        return tuple(d)
    if PyTuple_GET_SIZE(<tuple>w.bits):
        return <tuple>w.names + <tuple>w.bits
    return <tuple>w.names


cdef Plan method_plan(bint message_args, name, a, const amqpcap_wire *w, direction, version):
    """The plan of a method's arguments (the dict ``a``, or ``w`` as the wire has them), made on
    first use: rows.MethodPlan's, or (``message_args``) rows.message_arg_plan's."""
    cdef Plan plan
    cdef dict last = last_plans(last_message_arg_plan if message_args else last_method_plan, direction)
    cdef dict made = message_arg_plans if message_args else method_plans
    found = PyDict_GetItem(last, name) if PyUnicode_CheckExact(name) else NULL
    if found is not NULL and made_for(<Plan>found, direction, version) and same_names((<Plan>found).names, a, w):
        return <Plan>found
    key = (name, names_of(a, w), direction, version)
    found = PyDict_GetItem(made, key)
    if found is not NULL:
        plan = <Plan>found
    elif message_args:
        plan = Plan(R.message_arg_plan(*key), key[1], False, False, direction, version)
    else:
        rp = R.MethodPlan(*key)
        plan = Plan(rp.fill, key[1], rp.code, rp.failing, direction, version)
    if found is NULL and len(made) < PLANS_MAX:
        made[key] = plan
    if PyUnicode_CheckExact(name) and len(last) < PLANS_MAX and same_names(plan.names, a, w):
        last[name] = plan
    return plan


cdef Plan property_plan(p, const amqpcap_wire *w):
    """The plan of a content's properties (the dict ``p``, or ``w`` as the wire has them), made
    on first use from rows.fill_plan."""
    cdef Plan plan
    cdef Py_ssize_t slot = (w.n + PyTuple_GET_SIZE(<tuple>w.bits) if w != NULL else len(<dict>p)) & 31
    found = last_property_plan[slot]
    if found is not None and same_names((<Plan>found).names, p, w):
        return <Plan>found
    names = names_of(p, w)
    found = property_plans.get(names)
    if found is None:
        found = Plan(R.fill_plan(R.MESSAGE_PROPERTIES, R.MSG, set(names)), names)
        # a redelivered property: the redelivered column may take it (stage_message_args)
        (<Plan>found).wire = (<Plan>found).wire and K_REDELIVERED not in names
        if len(property_plans) < PLANS_MAX:
            property_plans[names] = found
    plan = <Plan>found
    if same_names(plan.names, p, w):
        last_property_plan[slot] = plan
    return plan


# A row is staged in a C array of its values (NULL: null), then made a tuple, or handed to the
# compiled table buffer as it is (fastwriter.APPEND_ARRAY: no tuple, nulls not written one by one).
cdef enum:
    MAX_COLS = 64


# Staging straight into a compiled table buffer: values a row builder writes as C data
# (raw.pxi) beside the row's objects, and the text they point into.
ctypedef struct Direct:
    Raw raw[MAX_COLS]
    bint used  # a raw value is staged (cleared with the row)
    amqpcap_jbuf *json  # a message's properties JSON (the properties and headers columns' text)


cdef inline void put(PyObject **row, Py_ssize_t i, object v):
    """row[i] = v (None: null)."""
    cdef PyObject *old = row[i]
    if v is None:
        row[i] = NULL
    else:
        Py_INCREF(v)
        row[i] = <PyObject *>v
    Py_XDECREF(old)


cdef void clear(PyObject **row, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        Py_XDECREF(row[i])
        row[i] = NULL


cdef tuple as_tuple(PyObject **row, Py_ssize_t n):
    cdef Py_ssize_t i
    cdef tuple t = PyTuple_New(n)
    for i in range(n):
        v = <object>row[i] if row[i] != NULL else None
        Py_INCREF(v)
        PyTuple_SET_ITEM(t, i, v)
    return t


cdef append_array_fn append_array = NULL  # fastwriter's, if it is built (bind)
cdef wire_of_fn wire_of = NULL  # fast09's, if it is built (bind): the spans of WireFields


cdef Py_ssize_t N_METHOD, M_REPLY_NAME_COL, M_FAILING_COL, M_ARGUMENTS_COL
cdef Py_ssize_t N_MESSAGE, MSG_PROPERTIES_COL, MSG_EXCHANGE_COL, MSG_ROUTING_KEY_COL, MSG_REDELIVERED_COL
cdef tuple DIRS


# Where the values of a row that no plan writes come from: rows.METHOD_SOURCES /
# MESSAGE_SOURCES, read at bind into (column, source) pairs; a source is a field of the event's
# view (its index in rowsink.pxi's METHOD_VIEW / CONTENT_VIEW; a content's method's, past
# MAX_COLS) or one of the builder's arguments (negative: OWN's order).
cdef struct Placement:
    Py_ssize_t n
    Py_ssize_t col[MAX_COLS]
    Py_ssize_t src[MAX_COLS]

cdef Placement M_PLACEMENT, MSG_PLACEMENT


cdef int placement(Placement *pl, tuple sources, list columns, tuple view, tuple own) except -1:
    index = {name: i for i, name in enumerate(columns)}
    pl.n = 0
    for col, src in sources:
        if src in own:
            pl.src[pl.n] = -1 - own.index(src)
        elif src in view:
            pl.src[pl.n] = view.index(src)
        elif view is CONTENT_VIEW and src.startswith("method.") and src[7:] in METHOD_VIEW:
            pl.src[pl.n] = MAX_COLS + METHOD_VIEW.index(src[7:])
        else:
            raise ImportError(f"records/rows.py: fastrows.pyx does not read the source {src!r} of {col!r}")
        pl.col[pl.n] = index[col]
        pl.n += 1
    return 0


cdef int place(PyObject **row, const Placement *pl, PyObject **view, PyObject **method, capture, stream,
               direction, version) except -1:
    """The sourced values of a row into ``row``, by ``pl``, from the event's ``view`` (and, for a
    content, its ``method``'s) and the builder's arguments."""
    cdef Py_ssize_t k, s
    for k in range(pl.n):
        s = pl.src[k]
        if s >= MAX_COLS:
            v = <object>method[s - MAX_COLS]
        elif s >= 0:
            v = <object>view[s]
        elif s == -1:
            v = capture
        elif s == -2:
            v = stream
        elif s == -3:
            v = direction_name(direction)
        else:
            v = version
        put(row, pl.col[k], v)
    return 0


cdef int bind() except -1:
    global R, CODES, reply_code_info, failing, DIRS
    global N_METHOD, M_REPLY_NAME_COL, M_FAILING_COL, M_ARGUMENTS_COL, N_MESSAGE, MSG_PROPERTIES_COL
    global MSG_EXCHANGE_COL, MSG_ROUTING_KEY_COL, MSG_REDELIVERED_COL
    from amqpcap.records import rows

    CODES = {
        rows.as_text: TO_S,
        rows.as_int: TO_I,
        rows.as_bool: TO_B,
        rows.as_tag: TO_TAG,
        rows.as_short: TO_SHORT,
        rows.as_timestamp_ns: TO_MSG_TS,
        rows.as_table_json: TO_TABLE_JSON,
    }
    reply_code_info = _spec.reply_code_info
    failing = rows.failing_method
    DIRS = tuple(rows.DIRS)
    N_METHOD = len(rows.METHOD_COLUMNS)
    M_REPLY_NAME_COL, M_FAILING_COL = rows.M_REPLY_NAME, rows.M_FAILING
    M_ARGUMENTS_COL = rows.M_ARGUMENTS
    N_MESSAGE = len(rows.COLUMNS["messages"])
    MSG_PROPERTIES_COL = rows.MSG_PROPERTIES
    MSG_EXCHANGE_COL, MSG_ROUTING_KEY_COL = rows.MSG_EXCHANGE, rows.MSG_ROUTING_KEY
    MSG_REDELIVERED_COL = rows.MSG_REDELIVERED
    if N_METHOD > MAX_COLS or N_MESSAGE > MAX_COLS:
        raise ImportError("records/schema.py: more columns than fastrows.pyx stages (MAX_COLS)")
    global append_array
    try:
        from amqpcap.records import fastwriter

        append_array = <append_array_fn>PyCapsule_GetPointer(
            fastwriter.APPEND_ARRAY, "amqpcap.records.fastwriter.append_array_raw"
        )
    except (ImportError, AttributeError, ValueError):  # not built, or another build: tuples
        append_array = NULL
    global wire_of
    try:
        from amqpcap.amqp import fast09

        wire_of = <wire_of_fn>PyCapsule_GetPointer(fast09.WIRE_FIELDS, "amqpcap.amqp.fast09.wire_fields")
    except (ImportError, AttributeError, ValueError):  # properties are then dicts (or mappings)
        wire_of = NULL
    if len(rows.METHOD_SOURCES) > MAX_COLS or len(rows.MESSAGE_SOURCES) > MAX_COLS or len(rows.OWN) != 4:
        raise ImportError("records/rows.py: its sources are not what fastrows.pyx places")
    placement(&M_PLACEMENT, rows.METHOD_SOURCES, list(rows.METHOD_COLUMNS), METHOD_VIEW, rows.OWN)
    placement(&MSG_PLACEMENT, rows.MESSAGE_SOURCES, list(rows.COLUMNS["messages"]), CONTENT_VIEW, rows.OWN)
    R = rows
    return 0


cdef inline object direction_name(object direction):
    if direction is 0:
        return DIRS[0]
    if direction is 1:
        return DIRS[1]
    return R.DIRS[direction]


def append_rows(list events, capture, stream, version, methods, messages):
    """rows.append_rows_reference, compiled: no Python frame per event, and no row tuple for a
    compiled table buffer (the staged values go straight into its columns)."""
    cdef list rest = []
    cdef tuple pair
    cdef PyObject *row[MAX_COLS]
    cdef Direct direct
    cdef amqpcap_jbuf json
    cdef Direct *to_methods = NULL
    cdef Direct *to_messages = NULL
    if R is None:
        bind()
    memset(row, 0, sizeof(row))
    memset(&direct, 0, sizeof(direct))
    amqpcap_jinit(&json)
    direct.json = &json
    if append_array != NULL and append_array(methods, NULL, NULL):
        to_methods = &direct
    if append_array != NULL and append_array(messages, NULL, NULL):
        to_messages = &direct
    try:
        for pair in events:
            d, e = pair
            t = type(e)
            if t is Method:
                emit(False, N_METHOD, methods, to_methods, row, capture, stream, d, e, version)
            elif t is Content:
                emit(True, N_MESSAGE, messages, to_messages, row, capture, stream, d, e, version)
            else:
                rest.append(pair)
    finally:
        amqpcap_jfree(&json)
    return rest


cdef inline bint read_slots(obj, const Py_ssize_t *slots, Py_ssize_t n, PyObject **out) noexcept:
    """out[i]: ``obj``'s slot ``slots[i]`` (borrowed); False if one is unset."""
    cdef Py_ssize_t i
    for i in range(n):
        out[i] = amqpcap_slot(obj, slots[i])
        if out[i] == NULL:
            return False
    return True


cdef bint method_view(m, MethodView *v):
    """``v``: the fields of ``m``, a Method laid out as slots (borrowed from them); False for
    anything else (another class, or a field unset: the reference builds that row, and raises
    what it raises)."""
    return DIRECT and type(m) is Method and read_slots(m, METHOD_SLOTS, N_METHOD_VIEW, <PyObject **>v)


cdef bint content_view(c, ContentView *v, MethodView *mv):
    """``v``: the fields of ``c``, a Content laid out as slots, its method's in ``mv``; False
    as method_view."""
    if not DIRECT or type(c) is not Content:
        return False
    cdef PyObject *method = amqpcap_slot(c, C_METHOD)
    if method == NULL or not method_view(<object>method, mv):
        return False
    v.method = mv
    return read_slots(c, CONTENT_SLOTS, N_CONTENT_VIEW, <PyObject **>v)


cdef int stage_event(PyObject **row, Direct *direct, bint message, capture, stream, direction, e,
                     version) except -1:
    """The row of the event ``e`` (a content's: ``message``) staged: 0; 1 if the reference is to
    build it."""
    cdef MethodView mv
    cdef ContentView cv
    if message:
        if not content_view(e, &cv, &mv):
            return 1
        return stage_message_row(row, direct, capture, stream, direction, &cv, version)
    if not method_view(e, &mv):
        return 1
    return stage_method_row(row, direct, capture, stream, direction, &mv, version)


cdef inline void clear_staged(PyObject **row, Py_ssize_t n, Direct *direct) noexcept:
    """The staged row cleared, and its raw values if it had any."""
    cdef Py_ssize_t i
    clear(row, n)
    if direct != NULL and direct.used:
        for i in range(n):
            direct.raw[i].kind = RAW_NONE
        direct.used = False


cdef int emit(bint message, Py_ssize_t n, table, Direct *direct, PyObject **row,
              capture, stream, direction, e, version) except -1:
    """The row of ``e`` appended to ``table``: its staged values straight into a compiled
    table buffer (``direct`` not NULL), else as a tuple; the reference's row
    (rows.message_row_reference or method_row_reference) if it is to build it."""
    try:
        if stage_event(row, direct, message, capture, stream, direction, e, version):
            reference = R.message_row_reference if message else R.method_row_reference
            table.append(reference(capture, stream, direction, e, version))
        elif direct != NULL:
            append_array(table, row, direct.raw if direct.used else NULL)
        else:
            table.append(as_tuple(row, n))
    finally:
        clear_staged(row, n, direct)
    return 0


# --- direct rows: a method's or a content's row with no event made (rowsink.pxi) ----------------


@cython.final
cdef class RowSink:
    """One conversation's methods and messages tables, where the compiled decoder has the rows
    of what it decodes written as it decodes them (``ConnectionDecoder.row_sink``): the
    row ``append_rows`` would write from the event, with no event made.  ``version`` is the
    conversation's, set once it is known (the decoder does so as it settles it).  Both tables
    must be compiled table buffers (a ValueError otherwise)."""

    cdef readonly object capture, stream, methods, messages  # (the 1.0 walker's, fast10.Walk)
    cdef public object version
    cdef Direct direct
    cdef amqpcap_jbuf json
    cdef PyObject *row[MAX_COLS]

    def __cinit__(self, capture, stream, methods, messages):
        memset(self.row, 0, sizeof(self.row))
        memset(&self.direct, 0, sizeof(self.direct))
        amqpcap_jinit(&self.json)
        self.direct.json = &self.json
        if R is None:
            bind()
        # (append_rows' test of a compiled table buffer)
        compiled = append_array != NULL and append_array(methods, NULL, NULL) and append_array(messages, NULL, NULL)
        if not compiled:
            raise ValueError("direct rows need compiled table buffers")
        self.capture, self.stream, self.methods, self.messages = capture, stream, methods, messages
        self.version = None

    def __dealloc__(self):
        clear(self.row, MAX_COLS)
        amqpcap_jfree(&self.json)

    @property
    def entry(self):
        """The decoder's way in: a capsule of rowsink.pxi's SinkEntry."""
        return SINK


cdef int sink_row(RowSink s, bint message, int direction, const MethodView *m, const ContentView *c) except -1:
    cdef Py_ssize_t n = N_MESSAGE if message else N_METHOD
    cdef int declined
    d = direction  # 0 or 1: the cached ints, as the events' pairs hold them (direction_name)
    try:
        if message:
            declined = stage_message_row(s.row, &s.direct, s.capture, s.stream, d, c, s.version)
        else:
            declined = stage_method_row(s.row, &s.direct, s.capture, s.stream, d, m, s.version)
        if not declined:
            append_array(s.messages if message else s.methods, s.row, s.direct.raw if s.direct.used else NULL)
    finally:
        clear_staged(s.row, n, &s.direct)
    return declined


cdef int sink_method(object s, int direction, const MethodView *m) except -1:
    return sink_row(<RowSink>s, False, direction, m, NULL)


cdef int sink_content(object s, int direction, const ContentView *c) except -1:
    return sink_row(<RowSink>s, True, direction, NULL, c)


cdef SinkEntry SINK_ENTRY
SINK_ENTRY.method = sink_method
SINK_ENTRY.content = sink_content
SINK = PyCapsule_New(&SINK_ENTRY, "amqpcap.records.fastrows.sink", NULL)


cdef int stage_method_row(PyObject **row, Direct *direct, capture, stream, direction, const MethodView *m,
                          version) except -1:
    """The methods row of the method ``m`` into ``row`` (all NULL on entry): 0; 1 (nothing staged)
    if the reference is to build it (arguments that are neither a dict nor WireFields)."""
    cdef Plan plan
    cdef Py_ssize_t j
    cdef const amqpcap_wire *wire = NULL
    a = <object>m.args
    name = <object>m.name
    if not PyDict_CheckExact(a):
        wire = wire_of(a) if wire_of != NULL else NULL
        if wire == NULL:
            return 1
    place(row, &M_PLACEMENT, <PyObject **>m, NULL, capture, stream, direction, version)
    if wire != NULL:  # the argument columns and JSON from the bytes, if the plan and values allow
        plan = method_plan(False, name, a, wire, direction, version)
        if direct != NULL and plan.wire and not stage_wire(row, direct, wire, plan, M_ARGUMENTS_COL):
            return 0
        a = a.copy()
    plan = method_plan(False, name, a, NULL, direction, version)
    for j in range(plan.n):
        put(row, plan.col[j], convert(plan.code[j], plan.convs[j], a[plan.keys[j]]))
    if plan.reply_code:
        code = a.get("reply-code", a.get("error-code"))
        info = reply_code_info(version, code) if PyLong_Check(code) else None
        put(row, M_REPLY_NAME_COL, info[0] if info else None)
    if plan.failing:
        put(row, M_FAILING_COL, failing(version, a))
    put(row, M_ARGUMENTS_COL, to_json(a))
    return 0


cdef inline object dget(dict d, str key, object default):
    cdef PyObject *v = PyDict_GetItemWithError(d, key)
    return default if v is NULL else <object>v


cdef inline Py_ssize_t wire_index(const amqpcap_wire *w, str key) noexcept:
    """The place of the field named ``key`` (interned, as the decoder's names are) in ``w``, -1
    if it has none."""
    cdef Py_ssize_t i
    cdef PyObject *k = <PyObject *>key
    for i in range(w.n):
        if PyTuple_GET_ITEM(<tuple>w.names, i) == k:
            return i
    return -1


cdef int put_text_field(PyObject **row, Direct *d, Py_ssize_t col, const amqpcap_wire *w,
                        Py_ssize_t i) except -1:
    """Column ``col`` of the row: to_s of ``w``'s field ``i`` (-1: none, null).  ASCII text goes
    to a compiled table buffer as it lies in the bytes (a raw value), not as a str."""
    cdef const unsigned char *p
    if i < 0:
        return 0
    if d != NULL and w.obj[i] == NULL and w.codes[i] == P_SHORTSTR:
        p = w.data + w.start[i]
        if ascii(p, w.size[i]):
            d.raw[col].kind, d.raw[col].p, d.raw[col].n = RAW_TEXT, <const char *>p, w.size[i]
            d.used = True
            return 0
    put(row, col, to_s(field_of(w, i)))
    return 0


# looked up in every message row, interned as the decoder's names are (fast09)
cdef str K_REDELIVERED = sys.intern("redelivered")


cdef int stage_message_args(PyObject **row, Direct *direct, const ContentView *c, a, const amqpcap_wire *aw,
                            p, direction, version) except -1:
    """The columns of rows.MESSAGE_ARGS by rows' rule (message_row_reference): from the arguments
    of the content's method (the dict ``a``, or ``aw`` as the wire has them: ASCII text staged
    raw) by rows.message_arg_plan, the content's own exchange and routing key before them, and
    the redelivered property of ``p`` (a dict, or None) for a missing redelivered argument."""
    cdef Plan plan = method_plan(True, <object>c.method.name, a, aw, direction, version)
    cdef Py_ssize_t j, col
    exchange, routing_key = <object>c.exchange, <object>c.routing_key
    for j in range(plan.n):
        col = plan.col[j]
        if (col == MSG_EXCHANGE_COL and exchange is not None) or (col == MSG_ROUTING_KEY_COL and routing_key is not None):
            continue  # the content's own, below
        if aw == NULL:
            put(row, col, convert(plan.code[j], plan.convs[j], a[plan.keys[j]]))
        elif plan.code[j] == TO_S:
            put_text_field(row, direct, col, aw, wire_index(aw, plan.keys[j]))
        else:
            put(row, col, convert(plan.code[j], plan.convs[j], field_of(aw, wire_index(aw, plan.keys[j]))))
    if exchange is not None:
        put(row, MSG_EXCHANGE_COL, to_s(exchange))
    if routing_key is not None:
        put(row, MSG_ROUTING_KEY_COL, to_s(routing_key))
    given = wire_index(aw, K_REDELIVERED) >= 0 if aw != NULL else K_REDELIVERED in <dict>a
    if not given and p is not None:
        redelivered = dget(<dict>p, K_REDELIVERED, None)
        put(row, MSG_REDELIVERED_COL, redelivered if PyBool_Check(redelivered) else None)
    return 0


cdef int stage_message_row(PyObject **row, Direct *direct, capture, stream, direction, const ContentView *c,
                           version) except -1:
    """The messages row of the content ``c`` into ``row`` (all NULL on entry): 0; 1 if the
    reference is to build it (what was staged by then is cleared by the caller, as always)."""
    cdef Plan fill
    cdef Py_ssize_t j
    cdef const amqpcap_wire *wire = NULL
    cdef const amqpcap_wire *awire = NULL
    cdef const MethodView *method = c.method
    p = <object>c.properties
    wire = wire_of(p) if wire_of != NULL else NULL
    if wire != NULL:  # as the wire has them: the columns from the bytes if they can be
        fill = property_plan(p, wire)
        if direct == NULL or not fill.wire or stage_wire(row, direct, wire, fill, MSG_PROPERTIES_COL):
            wire = NULL
            p = p.copy()
    if wire == NULL and not PyDict_CheckExact(p):
        return 1
    a = <object>method.args
    if not PyDict_CheckExact(a):
        awire = wire_of(a) if wire_of != NULL else NULL  # the method's arguments as the wire has them
        if awire == NULL:
            return 1
    place(row, &MSG_PLACEMENT, <PyObject **>c, <PyObject **>method, capture, stream, direction, version)
    # (a wire plan with a redelivered property is not used: stage_wire)
    stage_message_args(row, direct, c, a, awire, p if wire == NULL else None, direction, version)
    if wire != NULL:  # the properties are staged (stage_wire)
        return 0
    fill = property_plan(p, NULL)
    put(row, MSG_PROPERTIES_COL, to_json(p))
    for j in range(fill.n):
        put(row, fill.col[j], convert(fill.code[j], fill.convs[j], p[fill.keys[j]]))
    return 0


# --- field lists from the wire (fast09.WireFields) -------------------------------------------


cdef inline bint ascii(const unsigned char *p, Py_ssize_t n) noexcept:
    cdef Py_ssize_t k
    for k in range(n):
        if p[k] & 0x80:
            return False
    return True


cdef int stage_wire(PyObject **row, Direct *d, const amqpcap_wire *w, Plan plan, Py_ssize_t json_col) except -1:
    """The columns ``plan`` fills and the JSON text of a row's fields (a message's properties,
    a method's arguments: into column ``json_col``), from the bytes: 0; 1 (nothing staged) if a
    value is not written here (the dict's path then writes them).  What
    the bytes hold as they are goes to the table buffer as raw values (ASCII text, integers);
    the rest as objects, converted as the reference converts them."""
    cdef amqpcap_jbuf *jb = d.json
    cdef Raw *raw = d.raw
    cdef const char *f = <const char *>PyBytes_AS_STRING(plan.frags)
    cdef const unsigned char *p
    cdef Py_ssize_t i, j, k, col, size, start = 0, v0
    cdef Py_ssize_t tcol[4]
    cdef Py_ssize_t tat[4]
    cdef Py_ssize_t nt = 0
    cdef unsigned long long x
    cdef int r = 0, code
    cdef Py_ssize_t nv = w.n, nb = PyTuple_GET_SIZE(<tuple>w.bits)
    jb.n = 0
    jb.wide = plan.wide_keys
    amqpcap_jput(jb, "{", 1)
    for i in range(nv + nb):
        if i:
            amqpcap_jput(jb, ",", 1)
        amqpcap_jput(jb, f + start, plan.ends[i] - start)
        start = plan.ends[i]
        j = plan.at[i]  # its fill entry (-1: JSON only)
        col = code = -1
        if j >= 0:
            col, code = plan.col[j], plan.code[j]
        if i >= nv:  # a bit set
            amqpcap_jput(jb, "true", 4)
            if col >= 0:
                put(row, col, convert(code, plan.convs[j], True))
            continue
        p = w.data + w.start[i]
        size = w.size[i]
        if w.obj[i] != NULL:  # a table, a long string
            v0 = jb.n
            r = amqpcap_jvalue(jb, <object>w.obj[i], 1)
            if r:
                break
            if col >= 0:
                if code == TO_TABLE_JSON and nt < 4:  # its text is the one just written
                    tcol[nt], tat[nt] = col, v0
                    raw[col].n = jb.n - v0
                    nt += 1
                else:
                    put(row, col, convert(code, plan.convs[j], <object>w.obj[i]))
        elif w.codes[i] == P_SHORTSTR:
            if ascii(p, size):  # the text's characters are its bytes
                amqpcap_jquoted(jb, <const char *>p, size)
                if col >= 0:
                    if code == TO_S:
                        raw[col].kind, raw[col].p, raw[col].n = RAW_TEXT, <const char *>p, size
                    else:
                        put(row, col, convert(code, plan.convs[j], PyUnicode_DecodeUTF8(<const char *>p, size, "replace")))
            else:  # the decoder's text (invalid UTF-8 replaced), as the dict would hold it
                s = PyUnicode_DecodeUTF8(<const char *>p, size, "replace")
                r = amqpcap_jstr(jb, s)
                if r:
                    break
                if col >= 0:
                    put(row, col, convert(code, plan.convs[j], s))
        else:  # octet, short, long, longlong
            x = span_uint(p, size)
            if x > 9223372036854775807ULL:
                r = 1
                break
            amqpcap_jint(jb, <long long>x)
            if col >= 0:
                if code == TO_SHORT:
                    if x < 32768:
                        raw[col].kind, raw[col].i = RAW_INT, <long long>x
                elif code == TO_MSG_TS:
                    if x < 9_000_000_000ULL:
                        raw[col].kind, raw[col].i = RAW_INT, <long long>x * 1_000_000_000
                else:
                    put(row, col, convert(code, plan.convs[j], PyLong_FromLongLong(<long long>x)))
    if r == 0:
        amqpcap_jput(jb, "}", 1)
    if r:  # nothing of it stays
        for k in range(nv + nb):
            col = plan.col[plan.at[k]] if plan.at[k] >= 0 else -1
            if col >= 0:
                put(row, col, None)
                raw[col].kind = RAW_NONE
        return 1
    # the JSON is complete (no more moves of its buffer): the texts that point into it
    for k in range(nt):
        raw[tcol[k]].kind, raw[tcol[k]].p = RAW_TEXT, jb.p + tat[k]
    i = json_col
    raw[i].kind, raw[i].p, raw[i].n = RAW_TEXT, jb.p, jb.n
    d.used = True
    return 0


# --- liveness (records/liveness.py) -----------------------------------------------------------


@cython.final
cdef class Liveness:
    """liveness.LivenessReference with ``frames_seen`` in C: the decoder calls it once a packet
    (a Python frame there cost ~4% of a dissection).  The same attributes, and the reference's
    other methods."""

    cdef public list frames, heartbeats, last, gap, gap_start

    def __init__(self):
        _reference_liveness().__init__(self)

    def frames_seen(self, d, ts, n=1):
        """LivenessReference.frames_seen."""
        cdef Py_ssize_t i
        if d is not 0 and d is not 1:  # any other index: the reference's own (errors included)
            return _reference_liveness().frames_seen(self, d, ts, n)
        i = 1 if d is 1 else 0
        self.frames[i] = self.frames[i] + n
        last = self.last[i]
        if last is not None:
            gap = ts - last
            if gap > self.gap[i]:
                self.gap[i] = gap
                self.gap_start[i] = last
        if n > 1 and self.gap[i] < 0:  # the second frame at the same instant: a silence of 0
            self.gap[i] = 0
            self.gap_start[i] = ts
        self.last[i] = ts

    def heartbeat(self, d):
        return _reference_liveness().heartbeat(self, d)

    def columns(self):
        return _reference_liveness().columns(self)


cdef object _reference_liveness():
    from amqpcap.records.liveness import LivenessReference  # late: liveness imports rows, rows this

    return LivenessReference
