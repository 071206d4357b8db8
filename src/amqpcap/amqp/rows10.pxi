# AMQP 1.0 rows written from C (included by fast10.pyx): records/rows_1_0.py's ``append_rows``
# compiled.  The rows are filled by rows_1_0's tables (the row rule lives there only): the
# methods row of a Performative (read at its slots' offsets: fast10's layout) by ``METHOD_SOURCES``
# and ``METHOD_PLANS``, the messages row of a delivery by ``MESSAGE_PLAN`` (``values_row``:
# rows_1_0.message_values in C), with C twins of their converters ``unsigned_or_null`` /
# ``bool_or_null`` / ``delivery_mode_of`` / ``disposition_range`` / rows' ``as_int`` /
# ``as_text`` / links_1_0's ``role_name``
# (and its ``outcome_of`` of no state or a plain outcome) and their other converters called; the
# sources that are no field (``has_content``, ``synchronous``) need no Python call.  A row is
# made as the columns it fills and their values (a ``Row``: no list, no tuple, none of the
# columns it leaves null), handed so to the compiled table buffer (fastwriter's
# ``APPEND_SPARSE``); a table that is not a compiled table buffer gets a tuple.  The walker
# makes the values of a delivery whole in one transfer with no Delivery, links_1_0's state
# holds them as a ``HeldRow`` until the delivery is settled, and ``append_rows`` adds the
# settlement columns (rows_1_0.settled_row's) and writes them (a delivery over several transfers
# the walker assembles is held the same way); a Delivery (one the reference made) is written the
# same way (``delivery_values``: rows_1_0.message_row in C).
# A transfer, disposition or flow the frame loop walked has its arguments column written from its
# bytes (json10.pxi ``args_text``), not its fields' JSON: with a row sink its methods row is
# written as it is walked (``write_methods_row``: no event made), else its event is a
# ``WalkedPerformative`` holding that text.

from cpython.bool cimport PyBool_Check
from cpython.dict cimport PyDict_CheckExact, PyDict_Copy, PyDict_DelItem, PyDict_GetItem, PyDict_GetItemWithError
from cpython.dict cimport PyDict_Next
from cpython.unicode cimport PyUnicode_CheckExact
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_Check
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.object cimport PyObject

include "../records/raw.pxi"

cdef append_array_fn append_array = NULL  # fastwriter's, if it is built (bind_rows)
cdef append_sparse_fn append_sparse = NULL
# records/rows_1_0's, bound at the first row (bind_rows: rows_1_0 selects this module at its end,
# so it cannot be imported while this one is)
cdef object exchange_key = None
cdef dict exchange_keys = None  # rows_1_0.EXCHANGE_KEYS: exchange_key's cache, looked up in C
cdef object as_text = None
cdef object json_text = None


# A row as the columns it fills (each at most once: bind_rows checks the tables) and their
# values, references held; None is left out (a null, as every column the row does not name).
cdef enum:
    MAX_ROW = 64  # columns a row fills (the methods table has 57)

cdef struct Row:
    Py_ssize_t n
    Py_ssize_t col[MAX_ROW]
    PyObject *val[MAX_ROW]


cdef inline void row_value(Row *r, Py_ssize_t col, object v) noexcept:
    """Column ``col``'s value ``v`` (None: left null).  No bound checked here: bind_rows checks
    that no row names more than MAX_ROW columns (``distinct``)."""
    if v is None:
        return
    Py_INCREF(v)
    r.col[r.n] = col
    r.val[r.n] = <PyObject *>v
    r.n += 1


cdef inline void cut_row(Row *r, Py_ssize_t n) noexcept:
    """The values from the ``n``-th on let go."""
    while r.n > n:
        r.n -= 1
        Py_XDECREF(r.val[r.n])


cdef int write_row(object table, bint compiled, Row *r, Py_ssize_t width) except -1:
    """``r`` appended to ``table``: a compiled table buffer's columns, else a tuple of ``width``."""
    cdef Py_ssize_t j
    if compiled:
        return append_sparse(table, r.col, r.val, r.n)
    row = [None] * width
    for j in range(r.n):
        row[r.col[j]] = <object>r.val[j]
    table.append(tuple(row))
    return 0


@cython.final
@cython.no_gc  # (plain values only: no cycle runs through one; one a delivery, made and freed)
@cython.freelist(16)  # (one a delivery: its memory reused rather than allocated and freed)
cdef class HeldRow:
    """A delivery the walker read (whole in one transfer, or assembled from several), held by
    links_1_0's state until it is settled (the attributes it reads and sets, as it does a
    Delivery's): rows_1_0.message_values of it (``values_row``), which ``append_rows`` completes
    as rows_1_0.settled_row does."""

    cdef public object channel, delivery_id, settle_ts, outcome, condition
    cdef public bint settled
    cdef Row row

    def __dealloc__(self):
        cut_row(&self.row, 0)


cdef class WalkedPerformative:
    """A transfer, disposition or flow the frame loop walked (its event), with its methods row's
    arguments text written from its bytes (json10.pxi ``args_text``: no dict's JSON made for
    it).  The row reads every other column from the Performative; its fields stay the ones
    walked (nothing adds to a decoded performative's fields), so the text holds."""

    cdef readonly object perf
    cdef object text


cdef object walked(perf, text):
    """The event of a performative the frame loop walked: with its arguments text (json10.pxi
    ``args_text``) a WalkedPerformative, or the Performative where the text is not written
    (None)."""
    cdef WalkedPerformative w
    if text is None:
        return perf
    w = WalkedPerformative.__new__(WalkedPerformative)
    w.perf, w.text = perf, text
    return w


# The fields a row reads of a dict (a performative's fields, a message's sections, a section's
# fields), found in one pass over the dict's keys (``find_fields``) rather than a lookup each: the
# dicts hold a few keys, most of the fields looked for are absent, and the lookup of an absent
# key costs more than a step over every key.
cdef enum:
    MAX_FIELDS = 16

cdef struct FieldSet:
    Py_ssize_t n
    PyObject *field[MAX_FIELDS]  # interned text, each once (held by the plans)


cdef extern from "Python.h":
    int PyUnicode_CHECK_INTERNED(object o)


cdef Py_ssize_t field_slot(FieldSet *s, str field) except -1:
    """The place of ``field`` (interned) in ``s``, added if it is not there yet."""
    cdef Py_ssize_t e
    for e in range(s.n):
        if s.field[e] == <PyObject *>field:
            return e
    if s.n == MAX_FIELDS:
        raise ValueError(f"amqpcap: more than {MAX_FIELDS} fields read of one map")
    s.field[s.n] = <PyObject *>field
    s.n += 1
    return s.n - 1


cdef int find_fields(dict d, const FieldSet *s, PyObject **got) except -1:
    """``got[e]``: the value of ``s``'s field e in ``d`` (borrowed; NULL where absent), the value
    ``d.get`` finds of a dict as such: an interned text key is a field only if it is the very
    object (the fields are interned too), any other key is compared with each field."""
    cdef Py_ssize_t pos = 0, e
    cdef PyObject *k
    cdef PyObject *v
    for e in range(s.n):
        got[e] = NULL
    if s.n == 0:
        return 0
    while PyDict_Next(d, &pos, &k, &v):
        if PyUnicode_CheckExact(<object>k) and PyUnicode_CHECK_INTERNED(<object>k):
            for e in range(s.n):
                if k == s.field[e]:
                    got[e] = v
                    break
        else:
            for e in range(s.n):
                if <object>k == <object>s.field[e]:
                    got[e] = v
                    break
    return 0


# the methods row's sources and typed columns (rows_1_0's tables, read at bind_rows)
cdef enum:
    MAX_ATTRS = 32
    CONV_CALL = 0  # the reference's converter, called
    CONV_INT = 1   # rows_1_0.unsigned_or_null: a non-negative int64 (not a bool), else null
    CONV_BOOL = 2  # rows_1_0.bool_or_null: a bool, else null
    CONV_ANY_INT = 3  # rows.as_int: an int (not a bool), else null
    CONV_TEXT = 4  # rows.as_text: a str as it is, anything else by the reference
    CONV_MODE = 5  # rows_1_0.delivery_mode_of: a header section's 0-9-1 delivery mode
    CONV_RANGE = 6  # rows_1_0.disposition_range: a disposition's first..last (of every field)
    CONV_ROLE = 7  # links_1_0.role_name: ROLES of a bool, else null
    CONV_OUTCOME = 8  # links_1_0.outcome_of: a plain outcome read here, any other state by it
    CONV_JSON = 9  # rows.connection_json of every field: a walked performative's text if it has one
    # where a methods row's source that is no field of a Performative comes from
    BY_NAME = -1  # the attribute, read by name
    BY_CONTENT = -2  # has_content: the performative's name is events_1_0.CONTENT
    BY_CLASS = -3  # a plain class attribute (no descriptor): its value, read once

cdef Py_ssize_t n_method = 0, n_attrs = 0
cdef Py_ssize_t own_col[4]  # capture, stream, direction, version (rows.OWN's order)
cdef Py_ssize_t attr_col[MAX_ATTRS]
cdef Py_ssize_t attr_slot[MAX_ATTRS]  # the source's offset in a Performative (fast10), or BY_...
cdef tuple attr_names = ()
cdef list attr_const = []  # BY_CLASS sources' values
cdef str content_name = None  # events_1_0.CONTENT
cdef dict role_names = None  # links_1_0.ROLES
cdef tuple NO_STATE = (None, None)
cdef str TRANSACTIONAL = sys.intern("transactional-state")
cdef str TYPE_KEY = sys.intern("$type")
cdef str ERROR_KEY = sys.intern("error")
cdef tuple dir_names = ()


cdef class FieldPlan:
    """One entry of rows_1_0.METHOD_PLANS: the column (and a second one for a pair), the field
    (None: every field) and its place in its MethodPlan's fields, the converter and its code, the
    absent field's value."""

    cdef Py_ssize_t col, col2, slot
    cdef object field, conv, default
    cdef int code


cdef class MethodPlan:
    """rows_1_0.METHOD_PLANS' entries of one performative (FieldPlans) and the fields they read."""

    cdef tuple entries
    cdef FieldSet fields


cdef dict method_plans = None  # performative name -> MethodPlan
cdef MethodPlan every_plan = None


cdef long long I64_MAX = 0x7FFFFFFFFFFFFFFF


cdef object converted(FieldPlan f, object v):
    cdef int overflow = 0
    cdef long long x
    if f.code == CONV_CALL or f.code == CONV_JSON:
        return f.conv(v)
    if f.code == CONV_BOOL:
        return v if PyBool_Check(v) else None
    if f.code == CONV_TEXT:
        return v if type(v) is str else f.conv(v)
    if f.code == CONV_MODE:
        return delivery_mode(v)
    if f.code == CONV_ROLE:
        return role_names[v] if v is True or v is False else None
    if f.code == CONV_OUTCOME:
        return outcome_pair(v)
    if not PyLong_Check(v) or PyBool_Check(v):
        return None
    if f.code == CONV_ANY_INT:
        return v
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    return v if overflow == 0 and 0 <= x <= I64_MAX else None


cdef int methods_row(Row *row, capture, stream, int direction, e, version, arguments=None) except -1:
    """rows_1_0.method_row's values, into ``row``.  ``e`` is a Performative: its fields are read
    at their offsets (fast10's layout), its other sources (properties, class attributes) by name;
    ``arguments``, the JSON of its fields if the frame loop wrote it (WalkedPerformative), else
    None."""
    cdef Py_ssize_t i
    cdef FieldPlan f
    cdef MethodPlan plan
    cdef PyObject *got[MAX_FIELDS]  # the plan's fields of ``a`` (find_fields), borrowed
    cdef dict a = perf_field(e, args_at, "args")
    cdef bint exact = PyDict_CheckExact(a)
    row_value(row, own_col[0], capture)
    row_value(row, own_col[1], stream)
    row_value(row, own_col[2], dir_names[direction])
    row_value(row, own_col[3], version)
    name = perf_field(e, name_at, "name")
    for i in range(n_attrs):
        if attr_slot[i] >= 0:
            row_value(row, attr_col[i], perf_field(e, attr_slot[i], <str>attr_names[i]))
        elif attr_slot[i] == BY_CONTENT:
            row_value(row, attr_col[i], name == content_name)
        elif attr_slot[i] == BY_CLASS:
            row_value(row, attr_col[i], attr_const[i])
        else:
            row_value(row, attr_col[i], getattr(e, <str>attr_names[i]))
    found = method_plans.get(name)
    plan = every_plan if found is None else <MethodPlan>found
    if exact:
        find_fields(a, &plan.fields, got)
    for f in plan.entries:
        if f.field is None:
            if f.code == CONV_JSON and arguments is not None:
                v = arguments
            else:
                v = id_range(a) if f.code == CONV_RANGE else f.conv(a)
        else:
            if exact:
                v = <object>got[f.slot] if got[f.slot] != NULL else None
            else:
                v = a.get(f.field)
            v = f.default if v is None else converted(f, v)  # (the decoder leaves null fields out)
        if f.col2 < 0:
            row_value(row, f.col, v)
        else:
            v, v2 = v
            row_value(row, f.col, v)
            row_value(row, f.col2, v2)
    return 0


cdef int write_methods_row(object table, bint compiled, capture, stream, int direction, e, version, text) except -1:
    """The methods row of the Performative ``e`` (``text``: its arguments' JSON, or None) appended
    to ``table`` (``compiled``: a compiled table buffer), as append_rows writes it."""
    cdef Row row
    row.n = 0
    try:
        methods_row(&row, capture, stream, direction, e, version, text)
        write_row(table, compiled, &row, n_method)
    finally:
        cut_row(&row, 0)
    return 0


cdef MethodPlan method_plan(tuple entries, dict codes):
    cdef FieldPlan f
    cdef MethodPlan plan = MethodPlan.__new__(MethodPlan)
    out = []
    for at, field, conv, default in entries:
        f = FieldPlan.__new__(FieldPlan)
        f.col, f.col2 = (at, -1) if type(at) is int else at
        f.field = None if field is None else sys.intern(field)
        f.slot = -1 if field is None else field_slot(&plan.fields, f.field)
        f.conv, f.default = conv, default
        f.code = codes.get(conv, CONV_CALL)
        out.append(f)
    plan.entries = tuple(out)
    return plan


# the messages row: its width, the columns message_values fills from its arguments, the
# settlement columns (rows_1_0.SETTLED_COLUMNS' order), and MESSAGE_PLAN (read at bind_rows)
cdef Py_ssize_t n_message = 0
cdef Py_ssize_t mc_frame, mc_ts, mc_direction, mc_channel, mc_offset, mc_method, mc_exchange
cdef Py_ssize_t mc_key, mc_msg_ts, mc_properties, mc_body_size, mc_body_received, mc_body_frames
cdef Py_ssize_t mc_body_hash, mc_body, mc_complete, mc_first, mc_last, mc_link, mc_delivery_id
cdef Py_ssize_t mc_aborted
cdef Py_ssize_t settle_col[7]
cdef tuple message_plan = ()
# the sections MESSAGE_PLAN reads (each once a row: values_row), the properties section first,
# as a FieldSet (``section_set``: in the same order), and the fields it reads of each (with the
# properties section's ``to``, at TO_SLOT)
cdef enum:
    MAX_SECTIONS = 16
cdef tuple plan_sections = ()
cdef FieldSet section_set
cdef FieldSet section_fields[MAX_SECTIONS]
cdef Py_ssize_t TO_SLOT = 0
cdef object TS_MS_LIMIT = None
cdef str APP_SECTION = sys.intern("application-properties")
cdef str BODY_SECTION = sys.intern("body-section")
cdef str PROPERTIES_SECTION = sys.intern("properties")
cdef str TO_FIELD = sys.intern("to")
cdef str TRANSFER = sys.intern("transfer")


cdef class SectionPlan:
    """One entry of rows_1_0.MESSAGE_PLAN: the column, the section (and its place in
    ``plan_sections``), the field (None: the whole section) and its place in the section's
    ``section_fields``, the converter and its code; ``from_text``: the whole
    application-properties' JSON, a text values_row may be given."""

    cdef Py_ssize_t col, at, slot
    cdef object section, field, conv
    cdef int code
    cdef bint from_text


cdef object field_other(PyObject *section, field):
    """rows_1_0.message_values' value of a section's field (None: absent) of a section found
    that is not a dict as such (a subclass of one, or no map)."""
    v = <object>section
    return v.get(field) if isinstance(v, dict) else None


cdef object exchange_pair(address):
    """rows_1_0.exchange_key: a text address's pair found in its cache (``exchange_keys``) here,
    a dict lookup rather than a call (~400 instructions a messages row)."""
    cdef PyObject *p
    if type(address) is str:
        p = PyDict_GetItemWithError(exchange_keys, address)
        if p != NULL:
            return <object>p
    return exchange_key(address)


cdef int values_row(
    Row *row, int direction, packet, ts, channel, offset, first_packet, frames, link_name, address,
    delivery_id, dict sections, kind, body_size, digest, head, complete, aborted, created,
    tuple texts=None,
) except -1:
    """rows_1_0.message_values, into ``row``.  ``texts``: the properties column's text and the
    application-properties' (the headers column's: its plan entry ``from_text``), written from
    the sections' bytes (json10.pxi), or None: both written from ``sections``."""
    cdef SectionPlan f
    cdef dict others
    cdef PyObject *found[MAX_SECTIONS]  # plan_sections' sections (NULL: absent), borrowed
    cdef PyObject *got[MAX_SECTIONS][MAX_FIELDS]  # the fields read of them (find_fields), borrowed
    cdef PyObject *sec
    cdef Py_ssize_t i
    if PyDict_CheckExact(sections):
        find_fields(sections, &section_set, found)
    else:
        for i in range(section_set.n):
            found[i] = PyDict_GetItemWithError(sections, <object>section_set.field[i])
    for i in range(section_set.n):
        sec = found[i]
        if sec != NULL and PyDict_CheckExact(<object>sec):
            find_fields(<dict>sec, &section_fields[i], got[i])
    for f in message_plan:
        if f.from_text and texts is not None:
            row_value(row, f.col, texts[1])
            continue
        sec = found[f.at]
        if sec == NULL:
            continue
        if f.field is None:
            v = <object>sec
        elif PyDict_CheckExact(<object>sec):
            v = <object>got[f.at][f.slot] if got[f.at][f.slot] != NULL else None
        else:
            v = field_other(sec, f.field)
        if v is not None:
            if f.code == CONV_TEXT:
                row_value(row, f.col, v if type(v) is str else f.conv(v))
            elif f.code == CONV_ANY_INT:
                row_value(row, f.col, v if PyLong_Check(v) and not PyBool_Check(v) else None)
            elif f.code == CONV_MODE:
                row_value(row, f.col, delivery_mode(v))
            else:
                row_value(row, f.col, f.conv(v))
    sec = found[0]  # (the properties section: plan_sections' first)
    if sec == NULL:
        to = None
    elif PyDict_CheckExact(<object>sec):
        to = <object>got[0][TO_SLOT] if got[0][TO_SLOT] != NULL else None
    else:
        to = field_other(sec, TO_FIELD)
    if to is not None and type(to) is not str:
        to = as_text(to)
    exchange, key = exchange_pair(address if to is None else to)
    row_value(row, mc_exchange, exchange)
    row_value(row, mc_key, key)
    row_value(row, mc_frame, packet)
    row_value(row, mc_last, packet)
    row_value(row, mc_first, first_packet)
    row_value(row, mc_ts, ts)
    row_value(row, mc_direction, dir_names[direction])
    row_value(row, mc_channel, channel)
    row_value(row, mc_offset, offset)
    row_value(row, mc_method, TRANSFER)
    if created is not None and -TS_MS_LIMIT < created < TS_MS_LIMIT:
        row_value(row, mc_msg_ts, created * 1_000_000)
    if texts is not None:
        row_value(row, mc_properties, texts[0])
    else:
        # rows_1_0.other_sections: the sections but the application-properties, and the body's kind
        others = PyDict_Copy(sections)
        if PyDict_GetItem(others, APP_SECTION) != NULL:
            PyDict_DelItem(others, APP_SECTION)
        if kind is not None:
            others[BODY_SECTION] = kind
        row_value(row, mc_properties, json_text(others))
    row_value(row, mc_body_size, body_size)
    row_value(row, mc_body_received, body_size)
    row_value(row, mc_body_frames, frames)
    row_value(row, mc_body_hash, digest)
    row_value(row, mc_body, head)
    row_value(row, mc_complete, complete)
    row_value(row, mc_link, link_name)
    row_value(row, mc_delivery_id, int64_or_none(delivery_id))
    row_value(row, mc_aborted, aborted)
    return 0


cdef object outcome_pair(state):
    """links_1_0.outcome_of: no state, and a state of a plain outcome (a dict of a str ``$type``
    other than a transaction's, with no error), read here, any other by it."""
    if state is None:
        return NO_STATE
    if PyDict_CheckExact(state):
        name = (<dict>state).get(TYPE_KEY)
        if type(name) is str and name != TRANSACTIONAL and (<dict>state).get(ERROR_KEY) is None:
            return name, None
    return outcome_of(state)


cdef object delivery_mode(header):
    """rows_1_0.delivery_mode_of (a header section that is a dict as such read without a call)."""
    if PyDict_CheckExact(header):
        return 2 if (<dict>header).get("durable") is True else 1
    if not isinstance(header, dict):
        return None
    return 2 if header.get("durable") is True else 1


cdef object id_range(dict a):
    """rows_1_0.disposition_range."""
    first = int64_or_none(a.get("first"))
    last = int64_or_none(a.get("last", first))
    return [{"lower": first, "upper": last}] if first is not None and last is not None else None


cdef object int64_or_none(v):
    """rows_1_0.unsigned_or_null."""
    cdef int overflow = 0
    cdef long long x
    if not PyLong_Check(v) or PyBool_Check(v):
        return None
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    return v if overflow == 0 and 0 <= x <= I64_MAX else None


cdef HeldRow held_row(
    int direction, perf, offset, first_packet, frames, link, delivery_id, dict sections, kind,
    body_size, digest, head, bint complete, bint settled, outcome, condition, created, tuple texts=None,
):
    """What links_1_0's state holds of the Delivery codec_1_0 would make of the delivery that
    the transfer ``perf`` ends (begun at ``offset`` in packet ``first_packet``, ``frames``
    transfers; ``texts``: values_row's)."""
    cdef HeldRow h = HeldRow.__new__(HeldRow)
    if method_plans is None:
        bind_rows()
    name = address = None
    if link is not None:
        # sent to its target; received from its source (the queue a consumer reads)
        name = link_field(link, link_name_at, "name")
        target = link_field(link, link_target_at, "target")
        address = target if direction == 0 else (link_field(link, link_source_at, "source") or target)
    packet = perf_field(perf, packet_at, "packet")
    channel = perf_field(perf, channel_at, "channel")
    values_row(
        &h.row, direction, packet, perf_field(perf, ts_at, "ts"), channel, offset, first_packet, frames,
        name, address, delivery_id, sections, kind, body_size, digest, head, complete, False, created, texts,
    )
    h.channel = channel
    h.delivery_id = delivery_id
    h.settled = settled
    h.outcome = outcome
    h.condition = condition
    return h


cdef int settled(Row *row, capture, stream, version, settled, settle_ts, outcome, condition) except -1:
    """rows_1_0.settled_row, into ``row``."""
    row_value(row, settle_col[0], capture)
    row_value(row, settle_col[1], stream)
    row_value(row, settle_col[2], version)
    row_value(row, settle_col[3], settled)
    row_value(row, settle_col[4], settle_ts)
    row_value(row, settle_col[5], outcome)
    row_value(row, settle_col[6], condition)
    return 0


cdef int delivery_values(Row *row, int direction, dv, capture, stream, version) except -1:
    """rows_1_0.message_row of a Delivery (a delivery the reference's assembly made), into ``row``."""
    sections = dv.sections
    values_row(
        row, direction, dv.packet, dv.ts, dv.channel, dv.offset, dv.first_packet, dv.frames, dv.link_name,
        dv.address, dv.delivery_id, sections, dv.body_kind, dv.body_size, dv.body_hash, dv.body,
        dv.complete, dv.aborted, creation_time(sections),
    )
    return settled(row, capture, stream, version, dv.settled, dv.settle_ts, dv.outcome, dv.condition)


cdef int bind_rows() except -1:
    global exchange_key, exchange_keys, as_text, json_text, append_array, append_sparse, message_plan
    global TS_MS_LIMIT
    global n_method, n_attrs, attr_names, dir_names, method_plans, every_plan, n_message, plan_sections
    global attr_const, content_name, role_names
    global mc_frame, mc_ts, mc_direction, mc_channel, mc_offset, mc_method, mc_exchange, mc_key
    global mc_msg_ts, mc_properties, mc_body_size, mc_body_received, mc_body_frames, mc_body_hash
    global mc_body, mc_complete, mc_first, mc_last, mc_link, mc_delivery_id, mc_aborted
    global TO_SLOT
    from amqpcap.amqp import events_1_0
    from amqpcap.records import rows, rows_1_0

    try:
        from amqpcap.records import fastwriter

        append_array = <append_array_fn>PyCapsule_GetPointer(
            fastwriter.APPEND_ARRAY, "amqpcap.records.fastwriter.append_array_raw"
        )
        append_sparse = <append_sparse_fn>PyCapsule_GetPointer(
            fastwriter.APPEND_SPARSE, "amqpcap.records.fastwriter.append_sparse"
        )
    except (ImportError, AttributeError, ValueError):  # not built, or another build: tuples
        append_array = NULL
        append_sparse = NULL
    columns = {c: i for i, c in enumerate(rows.COLUMNS["methods"])}
    n_method = len(columns)
    own = {src: columns[col] for col, src in rows_1_0.METHOD_SOURCES if src in rows.OWN}
    for i, src in enumerate(rows.OWN):
        own_col[i] = own[src]
    attrs = [(columns[col], src) for col, src in rows_1_0.METHOD_SOURCES if src not in rows.OWN]
    if len(attrs) > MAX_ATTRS:
        raise ValueError("too many methods row sources")
    n_attrs = len(attrs)
    attr_const = [None] * n_attrs
    for i, (c, src) in enumerate(attrs):
        attr_col[i] = c
        attr_slot[i] = source_kind(src, events_1_0.Performative.__dict__.get(src), i)
    attr_names = tuple(sys.intern(src) for _c, src in attrs)
    content_name, role_names = sys.intern(events_1_0.CONTENT), dict(L.ROLES)
    dir_names = tuple(rows.DIRS)
    codes = {rows_1_0.unsigned_or_null: CONV_INT, rows_1_0.bool_or_null: CONV_BOOL, rows.as_int: CONV_ANY_INT, rows.as_text: CONV_TEXT}
    codes.update({rows_1_0.delivery_mode_of: CONV_MODE, rows_1_0.disposition_range: CONV_RANGE})
    codes.update({L.role_name: CONV_ROLE, L.outcome_of: CONV_OUTCOME, rows.connection_json: CONV_JSON})
    plans = {name: method_plan(p, codes) for name, p in rows_1_0.METHOD_PLANS.items()}
    every_plan = method_plan(rows_1_0.EVERY_PLAN, codes)
    plan_sections = tuple(dict.fromkeys([PROPERTIES_SECTION] + [sys.intern(e[1]) for e in rows_1_0.MESSAGE_PLAN]))
    if len(plan_sections) > MAX_SECTIONS:
        raise ValueError("too many sections in the messages row's plan")
    section_set.n = 0
    for i, name in enumerate(plan_sections):
        field_slot(&section_set, name)
        section_fields[i].n = 0
    # the JSON columns by the row builders' compiled encoder (rows.to_json's text): on the bench's
    # 1.0 values the json module's C encoder takes 4x its time (sections 16.0 / 4.4 ms,
    # application-properties 6.3 / 1.2 ms, performative arguments 26.3 / 6.3 ms)
    exchange_key, as_text, json_text = rows_1_0.exchange_key, rows.as_text, rows.connection_json
    exchange_keys = rows_1_0.EXCHANGE_KEYS
    message_plan = section_plans(rows_1_0.MESSAGE_PLAN, codes)
    TO_SLOT = field_slot(&section_fields[0], TO_FIELD)
    # what values_row (and message_of's creation time) read of the sections, given their texts
    read = {PROPERTIES_SECTION}
    for entry in message_plan:
        if not (<SectionPlan>entry).from_text:
            read.add((<SectionPlan>entry).section)
    for code, name in SPEC.SECTIONS.items():
        SECTION_READ[code] = name in read
    mcols = {c: i for i, c in enumerate(rows.COLUMNS["messages"])}
    n_message = len(mcols)
    (
        mc_frame, mc_ts, mc_direction, mc_channel, mc_offset, mc_method, mc_exchange, mc_key,
        mc_msg_ts, mc_properties, mc_body_size, mc_body_received, mc_body_frames, mc_body_hash,
        mc_body, mc_complete, mc_first, mc_last, mc_link, mc_delivery_id, mc_aborted,
    ) = [
        mcols[c]
        for c in (
            "frame_number", "ts", "direction", "channel", "stream_offset", "method", "exchange",
            "routing_key", "msg_timestamp", "properties", "body_size", "body_received",
            "body_frames", "body_hash", "body", "complete", "first_frame_number",
            "last_frame_number", "link_name", "delivery_id", "aborted",
        )
    ]
    for i, col in enumerate(rows_1_0.SETTLED_COLUMNS):
        settle_col[i] = mcols[col]
    # a Row names a column at most once: the columns each row fills
    own_attrs = [own_col[i] for i in range(4)] + [attr_col[i] for i in range(n_attrs)]
    for plan in [every_plan, *plans.values()]:
        distinct(own_attrs + [c for f in (<MethodPlan>plan).entries for c in ((<FieldPlan>f).col, (<FieldPlan>f).col2) if c >= 0])
    distinct(
        [(<SectionPlan>f).col for f in message_plan] + [settle_col[i] for i in range(7)] + [
            mc_frame, mc_ts, mc_direction, mc_channel, mc_offset, mc_method, mc_exchange, mc_key,
            mc_msg_ts, mc_properties, mc_body_size, mc_body_received, mc_body_frames, mc_body_hash,
            mc_body, mc_complete, mc_first, mc_last, mc_link, mc_delivery_id, mc_aborted,
        ]
    )
    TS_MS_LIMIT = TS_LIMIT
    method_plans = plans  # bound (not before: tables refused leave the rows unbound)
    return 0


cdef int distinct(list cols) except -1:
    """``cols``, the columns one row fills, are each named once and fit a Row."""
    if len(set(cols)) != len(cols) or len(cols) > MAX_ROW:
        raise ValueError(f"amqpcap: a row's columns named twice, or more than {MAX_ROW}: {sorted(cols)}")
    return 0


cdef Py_ssize_t source_kind(str src, object attr, Py_ssize_t i) except -100:
    """Where the methods row's source ``src`` (the class's attribute ``attr``) is read: a slot's
    offset, or BY_CONTENT (has_content), BY_CLASS (its value in ``attr_const[i]``), BY_NAME."""
    if src in perf_slots:
        return perf_slots[src]
    if src == "has_content":
        return BY_CONTENT
    if attr is not None and not hasattr(type(attr), "__get__"):
        attr_const[i] = attr
        return BY_CLASS
    return BY_NAME


cdef tuple section_plans(tuple entries, dict codes):
    cdef SectionPlan f
    out = []
    for col, section, field, conv in entries:
        f = SectionPlan.__new__(SectionPlan)
        f.col = col
        f.section = sys.intern(section)
        f.at = plan_sections.index(f.section)
        f.field = None if field is None else sys.intern(field)
        f.slot = -1 if field is None else field_slot(&section_fields[f.at], f.field)
        f.conv = conv
        f.code = codes.get(conv, CONV_CALL)
        f.from_text = f.section == APP_SECTION and f.field is None and conv is json_text
        out.append(f)
    return tuple(out)


def append_rows(list events, capture, stream, version, methods, messages):
    """records/rows_1_0.append_rows_reference, compiled: the rows of the 1.0 events among
    ``events`` written in order, the other events returned in order."""
    if method_plans is None:
        bind_rows()
    cdef bint to_methods = append_array != NULL and append_array(methods, NULL, NULL)
    cdef bint to_messages = append_array != NULL and append_array(messages, NULL, NULL)
    return rows_of(events, capture, stream, version, methods, messages, to_methods, to_messages)


cdef list rows_of(
    list events, capture, stream, version, methods, messages, bint to_methods, bint to_messages
):
    """append_rows' loop (``to_methods``, ``to_messages``: the table is a compiled table buffer)."""
    cdef list rest = []
    cdef tuple pair
    cdef HeldRow h
    cdef WalkedPerformative w
    cdef Row row
    cdef Py_ssize_t base
    row.n = 0
    try:
        for pair in events:
            d, e = pair
            t = type(e)
            if t is Performative:
                methods_row(&row, capture, stream, d, e, version)
                write_row(methods, to_methods, &row, n_method)
                cut_row(&row, 0)
            elif t is WalkedPerformative:
                w = <WalkedPerformative>e
                methods_row(&row, capture, stream, d, w.perf, version, w.text)
                write_row(methods, to_methods, &row, n_method)
                cut_row(&row, 0)
            elif t is HeldRow:
                # its own values, then where it was seen and how it was settled, let go once written
                h = <HeldRow>e
                base = h.row.n
                try:
                    settled(&h.row, capture, stream, version, h.settled, h.settle_ts, h.outcome, h.condition)
                    write_row(messages, to_messages, &h.row, n_message)
                finally:
                    cut_row(&h.row, base)
            elif t is Delivery:
                delivery_values(&row, d, e, capture, stream, version)
                write_row(messages, to_messages, &row, n_message)
                cut_row(&row, 0)
            else:
                rest.append(pair)
    finally:
        cut_row(&row, 0)
    return rest
