# AMQP 1.0 rows written from C (included by fast10.pyx): records/rows_1_0.py's ``append_rows``
# compiled.  Each row is the tuple rows_1_0.method_row / message_row builds (the row rule lives
# there only), handed to the compiled table buffer as its array of items (fastwriter's
# ``APPEND_ARRAY``: no per-column Python call); a table that is not a compiled table buffer
# gets the tuple itself.  What is compiled is the loop over the events and the write, the
# methods row (built here by rows_1_0's tables: ``METHOD_SOURCES`` and ``METHOD_PLANS``, with C
# type checks for its ``_i`` / ``_b`` / rows' ``as_int``, its other converters called), and the
# messages row of a delivery whole in one transfer: the walker makes its values
# (rows_1_0.message_values, ``held_row``) with no Delivery, links_1_0's state holds them as a
# ``HeldRow`` until the delivery is settled, and rows_1_0.settled_row makes them its row.

from cpython.bool cimport PyBool_Check
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_Check
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.object cimport PyObject

cdef extern from "Python.h":
    ctypedef struct PyTupleObject:
        PyObject *ob_item[1]
    ctypedef struct PyListObject:
        PyObject **ob_item

include "../records/raw.pxi"

cdef append_array_fn append_array = NULL  # fastwriter's, if it is built (bind_rows)
# records/rows_1_0's, bound at the first row (bind_rows: rows_1_0 selects this module at its end,
# so it cannot be imported while this one is)
cdef object message_row = None
cdef object message_values = None
cdef object settled_row = None


cdef class HeldRow:
    """A delivery whole in one transfer, held by links_1_0's state until it is settled (the
    attributes it reads and sets, as it does a Delivery's): rows_1_0.message_values of it, which
    rows_1_0.settled_row makes its messages row of."""

    cdef public object channel, delivery_id, settle_ts, outcome, condition
    cdef public bint settled
    cdef list values


# the methods row's sources and typed columns (rows_1_0's tables, read at bind_rows)
cdef enum:
    MAX_ATTRS = 32
    CONV_CALL = 0  # the reference's converter, called
    CONV_INT = 1   # rows_1_0._i: a non-negative int64 (not a bool), else null
    CONV_BOOL = 2  # rows_1_0._b: a bool, else null
    CONV_ANY_INT = 3  # rows.as_int: an int (not a bool), else null

cdef Py_ssize_t n_method = 0, n_attrs = 0
cdef Py_ssize_t own_col[4]  # capture, stream, direction, version (rows.OWN's order)
cdef Py_ssize_t attr_col[MAX_ATTRS]
cdef tuple attr_names = ()
cdef tuple dir_names = ()
cdef dict method_plans = None  # performative name -> (FieldPlan, ...)
cdef tuple every_plan = ()


cdef class FieldPlan:
    """One entry of rows_1_0.METHOD_PLANS: the column (and a second one for a pair), the field
    (None: every field), the converter and its code, the absent field's value."""

    cdef Py_ssize_t col, col2
    cdef object field, conv, default
    cdef int code


cdef long long I64_MAX = 0x7FFFFFFFFFFFFFFF


cdef object converted(FieldPlan f, object v):
    cdef int overflow = 0
    cdef long long x
    if f.code == CONV_CALL:
        return f.conv(v)
    if f.code == CONV_BOOL:
        return v if PyBool_Check(v) else None
    if not PyLong_Check(v) or PyBool_Check(v):
        return None
    if f.code == CONV_ANY_INT:
        return v
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    return v if overflow == 0 and 0 <= x <= I64_MAX else None


cdef list methods_row(capture, stream, int direction, e, version):
    """rows_1_0.method_row's values, as a list."""
    cdef list row = [None] * n_method
    cdef Py_ssize_t i
    cdef FieldPlan f
    cdef dict a = e.args
    row[own_col[0]] = capture
    row[own_col[1]] = stream
    row[own_col[2]] = dir_names[direction]
    row[own_col[3]] = version
    for i in range(n_attrs):
        row[attr_col[i]] = getattr(e, <str>attr_names[i])
    plan = method_plans.get(e.name)
    for f in <tuple>(every_plan if plan is None else plan):
        if f.field is None:
            v = f.conv(a)
        else:
            v = a.get(f.field)
            v = f.default if v is None else converted(f, v)  # (the decoder leaves null fields out)
        if f.col2 < 0:
            row[f.col] = v
        else:
            row[f.col], row[f.col2] = v
    return row


cdef tuple field_plans(tuple entries, dict codes):
    cdef FieldPlan f
    out = []
    for at, field, conv, default in entries:
        f = FieldPlan.__new__(FieldPlan)
        f.col, f.col2 = (at, -1) if type(at) is int else at
        f.field = None if field is None else sys.intern(field)
        f.conv, f.default = conv, default
        f.code = codes.get(conv, CONV_CALL)
        out.append(f)
    return tuple(out)


cdef HeldRow held_row(
    int direction, perf, link, delivery_id, dict sections, kind, body_size, digest, head,
    bint complete, bint settled, outcome, condition, created,
):
    """What links_1_0's state holds of the Delivery codec_1_0 would make of this transfer."""
    cdef HeldRow h = HeldRow.__new__(HeldRow)
    if message_values is None:
        bind_rows()
    name = address = None
    if link is not None:
        # sent to its target; received from its source (the queue a consumer reads)
        name, address = link.name, link.target if direction == 0 else (link.source or link.target)
    h.values = message_values(
        direction, perf.packet, perf.ts, perf.channel, perf.offset, perf.packet, 1, name, address,
        delivery_id, sections, kind, body_size, digest, head, complete, False, created,
    )
    h.channel = perf.channel
    h.delivery_id = delivery_id
    h.settled = settled
    h.outcome = outcome
    h.condition = condition
    return h


cdef int bind_rows() except -1:
    global message_row, message_values, settled_row, append_array
    global n_method, n_attrs, attr_names, dir_names, method_plans, every_plan
    from amqpcap.records import rows, rows_1_0

    try:
        from amqpcap.records import fastwriter

        append_array = <append_array_fn>PyCapsule_GetPointer(
            fastwriter.APPEND_ARRAY, "amqpcap.records.fastwriter.append_array_raw"
        )
    except (ImportError, AttributeError, ValueError):  # not built, or another build: tuples
        append_array = NULL
    message_row = rows_1_0.message_row
    columns = {c: i for i, c in enumerate(rows.COLUMNS["methods"])}
    n_method = len(columns)
    own = {src: columns[col] for col, src in rows_1_0.METHOD_SOURCES if src in rows.OWN}
    for i, src in enumerate(rows.OWN):
        own_col[i] = own[src]
    attrs = [(columns[col], src) for col, src in rows_1_0.METHOD_SOURCES if src not in rows.OWN]
    if len(attrs) > MAX_ATTRS:
        raise ValueError("too many methods row sources")
    n_attrs = len(attrs)
    for i, (c, _src) in enumerate(attrs):
        attr_col[i] = c
    attr_names = tuple(sys.intern(src) for _c, src in attrs)
    dir_names = tuple(rows.DIRS)
    codes = {rows_1_0._i: CONV_INT, rows_1_0._b: CONV_BOOL, rows.as_int: CONV_ANY_INT}
    method_plans = {name: field_plans(p, codes) for name, p in rows_1_0.METHOD_PLANS.items()}
    every_plan = field_plans(rows_1_0.EVERY_PLAN, codes)
    message_values, settled_row = rows_1_0.message_values, rows_1_0.settled_row
    return 0


cdef inline int write(object table, bint compiled, tuple row) except -1:
    if compiled:
        append_array(table, <PyObject **>&(<PyTupleObject *>row).ob_item[0], NULL)
    else:
        table.append(row)
    return 0


cdef inline int write_list(object table, bint compiled, list row) except -1:
    if compiled:
        append_array(table, (<PyListObject *>row).ob_item, NULL)
    else:
        table.append(tuple(row))
    return 0


def append_rows(list events, capture, stream, version, methods, messages):
    """records/rows_1_0.append_rows_reference, compiled: the rows of the 1.0 events among
    ``events`` written in order, the other events returned in order."""
    cdef list rest = []
    cdef tuple pair
    cdef HeldRow h
    if method_plans is None:
        bind_rows()
    cdef bint to_methods = append_array != NULL and append_array(methods, NULL, NULL)
    cdef bint to_messages = append_array != NULL and append_array(messages, NULL, NULL)
    for pair in events:
        d, e = pair
        t = type(e)
        if t is Performative:
            write_list(methods, to_methods, methods_row(capture, stream, d, e, version))
        elif t is HeldRow:
            h = <HeldRow>e
            write(
                messages, to_messages,
                settled_row(h.values, capture, stream, version, h.settled, h.settle_ts, h.outcome, h.condition),
            )
        elif t is Delivery:
            write(messages, to_messages, message_row(capture, stream, d, e, version))
        else:
            rest.append(pair)
    return rest
