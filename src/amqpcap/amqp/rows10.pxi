# AMQP 1.0 rows written from C (included by fast10.pyx): records/rows_1_0.py's ``append_rows``
# compiled.  Each performative's methods row and each delivery's messages row is staged in a list
# of the table's width and handed to the compiled table buffer as an array of values
# (fastwriter's ``APPEND_ARRAY``: no row tuple, no per-column Python call); a table that is
# not a compiled table buffer gets the row as a tuple.  The values are rows_1_0's, in its
# order: rows_1_0.py is the reference, and tests/amqp10 compares the tables of both.

from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.object cimport PyObject

cdef extern from "Python.h":
    ctypedef struct PyListObject:
        PyObject **ob_item

include "../records/raw.pxi"

cdef append_array_fn append_array = NULL  # fastwriter's, if it is built (bind_rows)
cdef object R10 = None  # records/rows_1_0
cdef object connection_json, as_text_ref, exchange_key, ROLE
cdef tuple DIRECTIONS
cdef Py_ssize_t N_METHOD, N_MESSAGE, I64_MAX = 0x7FFFFFFFFFFFFFFF
cdef Py_ssize_t M_ARGUMENTS, M_HANDLE, M_LINK, M_SOURCE, M_TARGET, M_ROLE, M_DELIVERY_ID
cdef Py_ssize_t M_SETTLED, M_MORE, M_OUTCOME, M_CONDITION, M_REPLY_TEXT, M_ID_RANGES, M_CREDIT
cdef Py_ssize_t M_DELIVERY_COUNT, M_CODE, M_DRAIN, M_AVAILABLE
cdef Py_ssize_t MSG_AT[64]  # messages column of each of rows_1_0._MSG_FILLED's values
cdef Py_ssize_t N_FILLED


cdef int bind_rows() except -1:
    global R10, connection_json, as_text_ref, exchange_key, ROLE, DIRECTIONS, N_METHOD, N_MESSAGE
    global M_ARGUMENTS, M_HANDLE, M_LINK, M_SOURCE, M_TARGET, M_ROLE, M_DELIVERY_ID, M_SETTLED
    global M_MORE, M_OUTCOME, M_CONDITION, M_REPLY_TEXT, M_ID_RANGES, M_CREDIT, M_DELIVERY_COUNT
    global M_CODE, M_DRAIN, M_AVAILABLE, N_FILLED, append_array
    from amqpcap.records import rows, rows_1_0

    (M_ARGUMENTS, M_HANDLE, M_LINK, M_SOURCE, M_TARGET, M_ROLE, M_DELIVERY_ID, M_SETTLED, M_MORE,
     M_OUTCOME, M_CONDITION, M_REPLY_TEXT, M_ID_RANGES, M_CREDIT, M_DELIVERY_COUNT, M_CODE, M_DRAIN,
     M_AVAILABLE) = [rows_1_0._METHOD_INDEX[c] for c in rows_1_0._M_NAMES]
    N_METHOD = len(rows_1_0._METHOD_INDEX)
    N_MESSAGE = len(rows_1_0._MESSAGE_INDEX)
    filled = rows_1_0._MSG_FILLED
    if len(filled) > 64 or rows_1_0._M_HEAD != 14:
        raise ImportError("records/rows_1_0.py changed: update amqp/rows10.pxi")
    N_FILLED = len(filled)
    for i, c in enumerate(filled):
        MSG_AT[i] = rows_1_0._MESSAGE_INDEX[c]
    connection_json, as_text_ref = rows.connection_json, rows.as_text
    exchange_key, ROLE, DIRECTIONS = rows_1_0.exchange_key, rows_1_0._ROLE, tuple(rows_1_0.DIRS)
    try:
        from amqpcap.records import fastwriter

        append_array = <append_array_fn>PyCapsule_GetPointer(
            fastwriter.APPEND_ARRAY, "amqpcap.records.fastwriter.append_array_raw"
        )
    except (ImportError, AttributeError, ValueError):  # not built, or another build: tuples
        append_array = NULL
    R10 = rows_1_0
    return 0


cdef inline object int_col(v):
    """rows_1_0._i"""
    if type(v) is int or (isinstance(v, int) and not isinstance(v, bool)):
        if 0 <= v <= I64_MAX:
            return v
    return None


cdef inline object bool_col(v):
    """rows_1_0._b"""
    return v if v is True or v is False else None


cdef inline object text(v):
    """rows.as_text"""
    if v is None or type(v) is str:
        return v
    return as_text_ref(v)


cdef inline void put(list row, Py_ssize_t i, object v):
    row[i] = v


cdef int write(object table, bint compiled, list row) except -1:
    if compiled:
        append_array(table, (<PyListObject *>row).ob_item, NULL)
    else:
        table.append(tuple(row))
    return 0


cdef int stage_method(list row, capture, stream, int direction, p, version) except -1:
    """rows_1_0.method_row into ``row``."""
    cdef dict a = p.args
    cdef Py_ssize_t i
    name = p.name
    row[0] = capture
    row[1] = stream
    row[2] = p.packet
    row[3] = p.ts
    row[4] = DIRECTIONS[direction]
    row[5] = p.channel
    row[6] = p.offset
    row[7] = name
    row[8] = p.frame_type
    row[9] = p.code
    row[10] = version
    row[11] = False
    row[12] = name == "transfer"
    row[13] = p.frame_size
    for i in range(14, N_METHOD):
        put(row, i, None)
    put(row, M_ARGUMENTS, connection_json(a))
    put(row, M_HANDLE, int_col(a.get("handle")))
    put(row, M_LINK, p.link_name)
    put(row, M_SOURCE, p.source)
    put(row, M_TARGET, p.target)
    if name == "transfer":
        put(row, M_DELIVERY_ID, int_col(a.get("delivery-id")))
        put(row, M_SETTLED, bool_col(a.get("settled")))
        put(row, M_MORE, bool_col(a.get("more", False)))
        if "state" in a:
            outcome, condition = outcome_of(a["state"])
            put(row, M_OUTCOME, outcome)
            put(row, M_CONDITION, condition)
    elif name == "disposition":
        first = int_col(a.get("first"))
        last = int_col(a.get("last", first))
        put(row, M_ROLE, ROLE.get(a.get("role")))
        put(row, M_DELIVERY_ID, first)
        put(row, M_SETTLED, bool_col(a.get("settled", False)))
        if first is not None and last is not None:
            put(row, M_ID_RANGES, [{"lower": first, "upper": last}])
        outcome, condition = outcome_of(a.get("state"))
        put(row, M_OUTCOME, outcome)
        put(row, M_CONDITION, condition)
    else:  # the rarer performatives: the reference's row, in place
        built = R10.method_row(capture, stream, direction, p, version)
        for i in range(N_METHOD):
            put(row, i, built[i])
    return 0


cdef int stage_message(list row, capture, stream, int direction, dv, version) except -1:
    """rows_1_0.message_row into ``row``."""
    cdef dict sec = dv.sections
    cdef Py_ssize_t i, k = 0
    props = sec.get("properties")
    if type(props) is not dict and not isinstance(props, dict):
        props = {}
    to = text(props.get("to"))
    exchange, key = exchange_key(to if to is not None else dv.address)
    others = {k_: val for k_, val in sec.items() if k_ != "application-properties"}
    if dv.body_kind is not None:
        others["body-section"] = dv.body_kind
    app = sec.get("application-properties")
    mode = priority = expiration = None
    hdr = sec.get("header")
    if isinstance(hdr, dict):
        pr = hdr.get("priority")
        ttl = hdr.get("ttl")
        mode = 2 if hdr.get("durable") is True else 1
        priority = pr if isinstance(pr, int) and not isinstance(pr, bool) else None
        expiration = str(ttl) if isinstance(ttl, int) and not isinstance(ttl, bool) else None
    created = props.get("creation-time")  # (events_1_0.creation_time, the dict at hand)
    if (type(created) is int or (isinstance(created, int) and not isinstance(created, bool))) and (
        -TS_LIMIT < created < TS_LIMIT
    ):
        created = created * 1_000_000
    else:
        created = None
    for i in range(N_MESSAGE):
        put(row, i, None)
    values = (
        capture, stream, dv.packet, dv.ts, DIRECTIONS[direction], dv.channel, dv.offset, "transfer",
        version, exchange, key, text(props.get("content-type")), text(props.get("content-encoding")),
        connection_json(app) if app is not None else None, mode, priority,
        text(props.get("correlation-id")), text(props.get("reply-to")), expiration,
        text(props.get("message-id")), created, text(props.get("user-id")), connection_json(others),
        dv.body_size, dv.body_size, dv.frames, dv.body_hash, dv.body, dv.complete, dv.first_packet,
        dv.packet, dv.link_name, int_col(dv.delivery_id), dv.settled, dv.settle_ts, dv.outcome,
        dv.condition, dv.aborted, None,
    )
    for k in range(N_FILLED):
        put(row, MSG_AT[k], values[k])
    return 0


def append_rows(list events, capture, stream, version, methods, messages):
    """records/rows_1_0.append_rows_reference, compiled: the rows of the 1.0 events among
    ``events`` written in order, the other events returned in order."""
    cdef list rest = []
    cdef tuple pair
    cdef int direction
    if R10 is None:
        bind_rows()
    cdef bint to_methods = append_array != NULL and append_array(methods, NULL, NULL)
    cdef bint to_messages = append_array != NULL and append_array(messages, NULL, NULL)
    cdef list mrow = None
    cdef list grow = None
    for pair in events:
        d, e = pair
        t = type(e)
        if t is Performative:
            if mrow is None:
                mrow = [None] * N_METHOD
            direction = d
            stage_method(mrow, capture, stream, direction, e, version)
            write(methods, to_methods, mrow)
        elif t is Delivery:
            if grow is None:
                grow = [None] * N_MESSAGE
            direction = d
            stage_message(grow, capture, stream, direction, e, version)
            write(messages, to_messages, grow)
        else:
            rest.append(pair)
    return rest
