# Direct rows: the compiled decoder (fast09.pyx) hands the row builder (records/fastrows.pyx) the
# fields of a method or a content it decoded, and the builder writes the row into the table's
# column buffers at once: no Method or Content event is made for it, nor kept in a list until
# the packet's events are drained.  The fields are the events' own, as borrowed references; a
# view of an event (fastrows reads its slots) or of the decoder's locals (fast09) is the same
# to the builder.  Included by both extensions: this layout is their contract (the builder's
# entry points reach the decoder through a capsule, ``fastrows.RowSink.entry``; no build-time
# dependency between them).

from cpython.object cimport PyObject

# Each view's object fields come first and in the order of the names below (fastrows reads an
# event's slots into a view as into an array of references, in that order).
METHOD_VIEW = (
    "packet", "ts", "offset", "channel", "class_id", "method_id", "name", "args", "synchronous",
    "has_content", "frame_size", "command_id", "answers_command_id",
)
CONTENT_VIEW = (
    "packet", "ts", "offset", "channel", "properties", "body_size", "body_received", "body_frames",
    "body_hash", "body", "complete", "first_packet", "exchange", "routing_key",
)

ctypedef struct MethodView:  # events.Method's fields
    PyObject *packet
    PyObject *ts
    PyObject *offset
    PyObject *channel
    PyObject *class_id
    PyObject *method_id
    PyObject *name
    PyObject *args
    PyObject *synchronous
    PyObject *has_content
    PyObject *frame_size
    PyObject *command_id
    PyObject *answers_command_id

ctypedef struct ContentView:  # the events.Content fields a messages row reads
    PyObject *packet
    PyObject *ts
    PyObject *offset
    PyObject *channel
    PyObject *properties
    PyObject *body_size
    PyObject *body_received
    PyObject *body_frames
    PyObject *body_hash
    PyObject *body
    PyObject *complete
    PyObject *first_packet
    PyObject *exchange
    PyObject *routing_key
    const MethodView *method  # its method's

# The row of a method / a content written into the sink's tables (``direction``: 0 client to
# server, 1 back): 0; 1 if the builder leaves it to the event (nothing written: the decoder
# then makes the event as it would have); -1 with an exception set.
ctypedef int (*sink_method_fn)(object sink, int direction, const MethodView *m) except -1
ctypedef int (*sink_content_fn)(object sink, int direction, const ContentView *c) except -1

ctypedef struct SinkEntry:
    sink_method_fn method
    sink_content_fn content
