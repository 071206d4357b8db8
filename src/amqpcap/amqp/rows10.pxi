# AMQP 1.0 rows written from C (included by fast10.pyx): records/rows_1_0.py's ``append_rows``
# compiled.  Each row is the tuple rows_1_0.method_row / message_row builds (the row rule lives
# there only), handed to the compiled table buffer as its array of items (fastwriter's
# ``APPEND_ARRAY``: no per-column Python call); a table that is not a compiled table buffer
# gets the tuple itself.  What is compiled is the loop over the events and the write.

from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.object cimport PyObject

cdef extern from "Python.h":
    ctypedef struct PyTupleObject:
        PyObject *ob_item[1]

include "../records/raw.pxi"

cdef append_array_fn append_array = NULL  # fastwriter's, if it is built (bind_rows)
cdef object method_row = None  # records/rows_1_0's
cdef object message_row = None


cdef int bind_rows() except -1:
    global method_row, message_row, append_array
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
        elif t is Delivery:
            write(messages, to_messages, message_row(capture, stream, d, e, version))
        else:
            rest.append(pair)
    return rest
