# AMQP 1.0 rows written from C (included by fast10.pyx): records/rows_1_0.py's ``append_rows``
# compiled.  Each row is the tuple rows_1_0.method_row / message_row builds (the row rule lives
# there only), handed to the compiled table buffer as its array of items (fastwriter's
# ``APPEND_ARRAY``: no per-column Python call); a table that is not a compiled table buffer
# gets the tuple itself.  What is compiled is the loop over the events and the write, and the
# messages row of a delivery whole in one transfer: the walker makes its values
# (rows_1_0.message_values, ``held_row``) with no Delivery, links_1_0's state holds them as a
# ``HeldRow`` until the delivery is settled, and rows_1_0.settled_row makes them its row.

from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.object cimport PyObject

cdef extern from "Python.h":
    ctypedef struct PyTupleObject:
        PyObject *ob_item[1]

include "../records/raw.pxi"

cdef append_array_fn append_array = NULL  # fastwriter's, if it is built (bind_rows)
# records/rows_1_0's, bound at the first row (bind_rows: rows_1_0 selects this module at its end,
# so it cannot be imported while this one is)
cdef object method_row = None
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
    global method_row, message_row, message_values, settled_row, append_array
    from amqpcap.records import rows_1_0

    try:
        from amqpcap.records import fastwriter

        append_array = <append_array_fn>PyCapsule_GetPointer(
            fastwriter.APPEND_ARRAY, "amqpcap.records.fastwriter.append_array_raw"
        )
    except (ImportError, AttributeError, ValueError):  # not built, or another build: tuples
        append_array = NULL
    message_row = rows_1_0.message_row
    method_row = rows_1_0.method_row
    message_values, settled_row = rows_1_0.message_values, rows_1_0.settled_row
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
    cdef HeldRow h
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
