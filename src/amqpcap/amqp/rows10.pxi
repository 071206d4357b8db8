# AMQP 1.0 rows written from C (included by fast10.pyx): records/rows_1_0.py's ``append_rows``
# compiled.  Each row is the tuple rows_1_0.method_row / message_row builds (the row rule lives
# there only), handed to the compiled table buffer as its array of items (fastwriter's
# ``APPEND_ARRAY``: no per-column Python call); a table that is not a compiled table buffer
# gets the tuple itself.  What is compiled is the loop over the events and the write, and the
# messages row of a delivery whole in one transfer (``held_row``: rows_1_0.message_row's values
# made by the walker, held in links_1_0's state as a ``HeldRow`` until settled; the tests compare
# every such row with the reference's).

from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.object cimport PyObject

cdef extern from "Python.h":
    ctypedef struct PyTupleObject:
        PyObject *ob_item[1]

include "../records/raw.pxi"

from amqpcap.records.schema import COLUMNS, DIRS

# records/rows.py's and rows_1_0's, bound at the first row (bind_rows: rows_1_0 selects this
# module at its end, so it cannot be imported while this one is)
cdef object as_text = None
cdef object json_text = None
cdef object exchange_key = None
cdef dict MSG_AT = {c: i for i, c in enumerate(COLUMNS["messages"])}
cdef Py_ssize_t N_MSG = len(MSG_AT)
cdef Py_ssize_t C_CAPTURE = MSG_AT["capture"], C_STREAM = MSG_AT["tcp_stream"], C_VERSION = MSG_AT["version"]
cdef Py_ssize_t C_SETTLED = MSG_AT["settled"], C_SETTLE_TS = MSG_AT["settle_ts"]
cdef Py_ssize_t C_OUTCOME = MSG_AT["outcome"], C_CONDITION = MSG_AT["condition"]
# where held_row puts each value (the messages table's columns, by name)
cdef Py_ssize_t C_FRAME_NUMBER = MSG_AT['frame_number']
cdef Py_ssize_t C_TS = MSG_AT['ts']
cdef Py_ssize_t C_DIRECTION = MSG_AT['direction']
cdef Py_ssize_t C_CHANNEL = MSG_AT['channel']
cdef Py_ssize_t C_STREAM_OFFSET = MSG_AT['stream_offset']
cdef Py_ssize_t C_METHOD = MSG_AT['method']
cdef Py_ssize_t C_EXCHANGE = MSG_AT['exchange']
cdef Py_ssize_t C_ROUTING_KEY = MSG_AT['routing_key']
cdef Py_ssize_t C_CONTENT_TYPE = MSG_AT['content_type']
cdef Py_ssize_t C_CONTENT_ENCODING = MSG_AT['content_encoding']
cdef Py_ssize_t C_HEADERS = MSG_AT['headers']
cdef Py_ssize_t C_DELIVERY_MODE = MSG_AT['delivery_mode']
cdef Py_ssize_t C_PRIORITY = MSG_AT['priority']
cdef Py_ssize_t C_CORRELATION_ID = MSG_AT['correlation_id']
cdef Py_ssize_t C_REPLY_TO = MSG_AT['reply_to']
cdef Py_ssize_t C_EXPIRATION = MSG_AT['expiration']
cdef Py_ssize_t C_MESSAGE_ID = MSG_AT['message_id']
cdef Py_ssize_t C_MSG_TIMESTAMP = MSG_AT['msg_timestamp']
cdef Py_ssize_t C_USER_ID = MSG_AT['user_id']
cdef Py_ssize_t C_PROPERTIES = MSG_AT['properties']
cdef Py_ssize_t C_BODY_SIZE = MSG_AT['body_size']
cdef Py_ssize_t C_BODY_RECEIVED = MSG_AT['body_received']
cdef Py_ssize_t C_BODY_FRAMES = MSG_AT['body_frames']
cdef Py_ssize_t C_BODY_HASH = MSG_AT['body_hash']
cdef Py_ssize_t C_BODY = MSG_AT['body']
cdef Py_ssize_t C_COMPLETE = MSG_AT['complete']
cdef Py_ssize_t C_FIRST_FRAME_NUMBER = MSG_AT['first_frame_number']
cdef Py_ssize_t C_LAST_FRAME_NUMBER = MSG_AT['last_frame_number']
cdef Py_ssize_t C_LINK_NAME = MSG_AT['link_name']
cdef Py_ssize_t C_DELIVERY_ID = MSG_AT['delivery_id']
cdef Py_ssize_t C_ABORTED = MSG_AT['aborted']
cdef object I64_MAX = (1 << 63) - 1


cdef class HeldRow:
    """A delivery whole in one transfer, as its messages row without the capture, stream, version
    and settlement columns: links_1_0's state holds and settles it as it does a Delivery (the
    attributes it reads and sets), append_rows fills the rest."""

    cdef public object channel, delivery_id, settle_ts, outcome, condition
    cdef public bint settled
    cdef list row


cdef inline object text(object v):
    return v if v is None or type(v) is str else as_text(v)


cdef inline bint plain_int(object v):
    return isinstance(v, int) and not isinstance(v, bool)


cdef HeldRow held_row(
    int direction, perf, link, delivery_id, dict sections, kind, body_size, digest, head,
    bint complete, bint settled, outcome, condition, created,
):
    """rows_1_0.message_row's values of the Delivery codec_1_0 would make of this transfer."""
    cdef HeldRow h = HeldRow.__new__(HeldRow)
    cdef list row = [None] * N_MSG
    if exchange_key is None:
        bind_rows()
    props = sections.get("properties")
    if not isinstance(props, dict):
        props = {}
    to = text(props.get("to"))
    if to is None and link is not None:
        to = link.target if direction == 0 else (link.source or link.target)
    row[C_EXCHANGE], row[C_ROUTING_KEY] = exchange_key(to)
    row[C_FRAME_NUMBER] = row[C_FIRST_FRAME_NUMBER] = row[C_LAST_FRAME_NUMBER] = perf.packet
    row[C_TS] = perf.ts
    row[C_DIRECTION] = DIRS[direction]
    row[C_CHANNEL] = perf.channel
    row[C_STREAM_OFFSET] = perf.offset
    row[C_METHOD] = "transfer"
    row[C_CONTENT_TYPE] = text(props.get("content-type"))
    row[C_CONTENT_ENCODING] = text(props.get("content-encoding"))
    app = sections.get("application-properties")
    if app is not None:
        row[C_HEADERS] = json_text(app)
        sections = {k: v for k, v in sections.items() if k != "application-properties"}
    hdr = sections.get("header")
    if isinstance(hdr, dict):
        pr = hdr.get("priority")
        ttl = hdr.get("ttl")
        row[C_DELIVERY_MODE] = 2 if hdr.get("durable") is True else 1
        row[C_PRIORITY] = pr if plain_int(pr) else None
        row[C_EXPIRATION] = str(ttl) if plain_int(ttl) else None
    row[C_CORRELATION_ID] = text(props.get("correlation-id"))
    row[C_REPLY_TO] = text(props.get("reply-to"))
    row[C_MESSAGE_ID] = text(props.get("message-id"))
    if created is not None:  # (in the column's range: the walker nulls any other)
        row[C_MSG_TIMESTAMP] = created * 1_000_000
    row[C_USER_ID] = text(props.get("user-id"))
    if kind is not None:
        sections["body-section"] = kind
    row[C_PROPERTIES] = json_text(sections)
    row[C_BODY_SIZE] = row[C_BODY_RECEIVED] = body_size
    row[C_BODY_FRAMES] = 1
    row[C_BODY_HASH] = digest
    row[C_BODY] = head
    row[C_COMPLETE] = complete
    row[C_LINK_NAME] = link.name if link is not None else None
    row[C_DELIVERY_ID] = delivery_id if plain_int(delivery_id) and 0 <= delivery_id <= I64_MAX else None
    row[C_ABORTED] = False
    h.row = row
    h.channel = perf.channel
    h.delivery_id = delivery_id
    h.settled = settled
    h.outcome = outcome
    h.condition = condition
    return h


cdef tuple settled_row(HeldRow h, capture, stream, version):
    cdef list row = h.row
    row[C_CAPTURE] = capture
    row[C_STREAM] = stream
    row[C_VERSION] = version
    row[C_SETTLED] = h.settled
    row[C_SETTLE_TS] = h.settle_ts
    row[C_OUTCOME] = h.outcome
    row[C_CONDITION] = h.condition
    return tuple(row)


cdef append_array_fn append_array = NULL  # fastwriter's, if it is built (bind_rows)
cdef object method_row = None  # records/rows_1_0's
cdef object message_row = None


cdef int bind_rows() except -1:
    global method_row, message_row, append_array, as_text, json_text, exchange_key
    from amqpcap.records import rows, rows_1_0

    as_text, json_text, exchange_key = rows.as_text, rows.connection_json, rows_1_0.exchange_key

    try:
        from amqpcap.records import fastwriter

        append_array = <append_array_fn>PyCapsule_GetPointer(
            fastwriter.APPEND_ARRAY, "amqpcap.records.fastwriter.append_array_raw"
        )
    except (ImportError, AttributeError, ValueError):  # not built, or another build: tuples
        append_array = NULL
    message_row = rows_1_0.message_row
    method_row = rows_1_0.method_row
    return 0


cdef inline int write(object table, bint compiled, tuple row) except -1:
    if compiled:
        append_array(table, <PyObject **>&(<PyTupleObject *>row).ob_item[0], NULL)
    else:
        table.append(row)
    return 0


def append_rows(list events, capture, stream, version, methods, messages):
    """records/rows_1_0.append_rows_reference, compiled: the rows of the 1.0 events among
    ``events`` written in order, the other events returned in order."""
    cdef list rest = []
    cdef tuple pair
    if method_row is None:
        bind_rows()
    cdef bint to_methods = append_array != NULL and append_array(methods, NULL, NULL)
    cdef bint to_messages = append_array != NULL and append_array(messages, NULL, NULL)
    for pair in events:
        d, e = pair
        t = type(e)
        if t is Performative:
            write(methods, to_methods, method_row(capture, stream, d, e, version))
        elif t is HeldRow:
            write(messages, to_messages, settled_row(<HeldRow>e, capture, stream, version))
        elif t is Delivery:
            write(messages, to_messages, message_row(capture, stream, d, e, version))
        else:
            rest.append(pair)
    return rest
