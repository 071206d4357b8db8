# The stream core's per-direction state and per-feed path in C, which both compiled decoders
# (fast09, fast10) include: stream.Direction with its fields in C, StreamDecoder.feed for the
# common case (in-order data, in sync, nothing to skip) and stream.keep_tail.
#
# The module that includes it provides, before the include:
#   cdef Py_ssize_t frame_need(const unsigned char *b, Py_ssize_t held): the bytes a frame whose
#       first ``held`` bytes are at ``b`` lacks, from its header, for that frame to be completed
#       from the bytes that finish it and the rest of the packet walked where it lies; <= 0 for
#       it to be completed from the whole next packet, as the reference does (``held`` does not
#       hold its header, or the walker keeps the reference's buffer);
#   cdef Py_ssize_t frame_lacks(const unsigned char *b, Py_ssize_t held): with ``frame_need``
#       <= 0, the bytes that frame lacks if its header holds (the packets that do not complete
#       it then wait, uncopied, for the one that does: ``Direction.waiting``); -1 otherwise;
#   cdef int parse(dec, int direction, Direction d) except -1: the whole frames from ``d.pos``
#       decoded (to the reference where the walker does not go on), the tail kept (``keep_tail``).
# and imports ``stream as _stream`` and ``StreamDecoder``.

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING
from libc.string cimport memcpy

cdef Py_ssize_t COMPACT_LIMIT = _stream.COMPACT_AT


@cython.final
cdef class Direction:
    """stream.Direction with its fields in C: the per-feed path reads and writes a dozen of
    them per packet.  The codec makes these while its compiled walker is in use (its
    ``Direction``); the reference code sees the same attributes and methods."""

    cdef public object packet, ts, marks, mid
    cdef public Py_ssize_t pos, base, resync_from, skip, scan_from
    cdef public bint resync
    cdef object walk  # the walker's own per-direction state, if it keeps one (not the reference's)
    # ``buf`` is ``held`` followed by the packets ``waiting``: those of a frame begun in ``held``
    # that do not complete it, kept as they came (not appended one by one, each append growing
    # the buffer to its exact size: a copy of all it held) until the packet that completes the
    # frame, when the buffer is grown once and each byte copied once (``join_waiting``)
    cdef object held
    cdef list waiting
    cdef Py_ssize_t waiting_size

    # the reference's own methods (plain functions of the attributes above); one made per
    # direction of a connection, so its Python __init__ costs nothing that shows
    def __init__(self):
        _stream.Direction.__init__(self)

    @property
    def buf(self):
        """stream.Direction.buf: the packets waiting joined to it first."""
        return buffer_of(self)

    @buf.setter
    def buf(self, value):
        if self.waiting_size:
            self.waiting = None
            self.waiting_size = 0
        self.held = value

    reset = _stream.Direction.reset
    packet_of = _stream.Direction.packet_of


cdef inline object buffer_of(Direction d):
    """``d.buf`` read in C: ``held``, the packets waiting joined to it first."""
    if d.waiting_size:
        join_waiting(d, None)
    return d.held


cdef int join_waiting(Direction d, bytes data) except -1:
    """The packets waiting (and ``data``) appended to ``held``: it grows once, each byte copied
    once."""
    cdef bytearray held = <bytearray>d.held
    cdef Py_ssize_t n = len(held), k
    cdef Py_ssize_t extra = d.waiting_size + (len(data) if data is not None else 0)
    PyByteArray_Resize(held, n + extra)
    cdef char *o = PyByteArray_AS_STRING(held)
    for piece in d.waiting:
        k = len(<bytes>piece)
        memcpy(o + n, PyBytes_AS_STRING(piece), k)
        n += k
    if data is not None:
        memcpy(o + n, PyBytes_AS_STRING(data), len(data))
    d.waiting = None
    d.waiting_size = 0
    return 0


cdef int feed_one(dec, int direction, data, offset, packet, ts) except -1:
    """StreamDecoder.feed for the common case: in-order data, in sync; anything else (the first
    data, a gap, an overlap, a resync, a skip or late-proven frames in progress, another class's
    state) goes to the reference."""
    found = dec.dirs[direction]
    if type(found) is not Direction:  # not this class's state (a cast would read the wrong fields)
        StreamDecoder.feed(dec, direction, data, offset, packet, ts)
        return 0
    cdef Direction d = <Direction>found
    buf = d.held
    if (
        not data or d.base < 0 or d.resync or d.skip or d.marks
        or offset != d.base + len(buf) + d.waiting_size
    ):
        StreamDecoder.feed(dec, direction, data, offset, packet, ts)
        return 0
    d.packet = packet
    d.ts = ts
    cdef Py_ssize_t pos = d.pos, need, n
    if pos == len(buf):
        d.base += pos
        d.held = data if type(data) is bytes else bytes(data)
        d.pos = 0
    elif type(buf) is bytearray and type(data) is bytes:
        # A frame begun in an earlier packet: only the bytes that complete it go into its
        # buffer, and the rest of the packet is walked in place (appended whole, every packet of
        # a stream cut at other places than its frames' ends was copied, and its tail moved
        # again).  Two feeds of one packet, as the reference may be fed any split.
        n = len(buf) - pos
        need = frame_need(<const unsigned char *>PyByteArray_AS_STRING(buf) + pos, n)
        if need <= 0:
            need = frame_lacks(<const unsigned char *>PyByteArray_AS_STRING(buf) + pos, n)
            n = len(buf) + d.waiting_size + len(data)
            if need > d.waiting_size + len(data) and pos <= COMPACT_LIMIT and pos * 2 <= n:
                # the frame is not complete with this packet either: the reference's parse would
                # find no frame and keep its buffer whole (keep_tail), so the packet waits
                if d.waiting is None:
                    d.waiting = []
                d.waiting.append(data)
                d.waiting_size += len(data)
                return 0
            if d.waiting_size:
                join_waiting(d, <bytes>data)
            else:
                buf += data
        elif need >= len(data):
            buf += data
        else:
            append_prefix(<bytearray>buf, <bytes>data, need)
            parse(dec, direction, d)
            if len(d.held) or d.resync or d.skip or d.marks:  # not walked as a frame: the reference's way
                feed_one(dec, direction, data[need:], offset + need, packet, ts)
                return 0
            d.held = data
            d.pos = need
            d.base = offset
    else:
        if d.waiting_size:
            join_waiting(d, None)
        if type(buf) is not bytearray:
            buf = d.held = bytearray(buf)
        buf += data
    parse(dec, direction, d)
    if d.marks and not d.resync:
        d.marks = []
        d.packet, d.ts = packet, ts
    return 0


cdef inline int append_prefix(bytearray buf, bytes data, Py_ssize_t n) except -1:
    """``buf += data[:n]`` without the slice."""
    cdef Py_ssize_t old = len(buf)
    PyByteArray_Resize(buf, old + n)
    memcpy(PyByteArray_AS_STRING(buf) + old, PyBytes_AS_STRING(data), n)
    return 0


cdef int keep_tail(Direction d) except -1:
    """stream.keep_tail: only the unparsed tail of ``d``'s buffer kept after a parse (never a big
    buffer sliced per frame, never more than one frame kept, or, resynchronising, what may
    still start one)."""
    buf = buffer_of(d)
    cdef Py_ssize_t pos = d.pos, n = len(buf)
    if pos >= n:
        d.base += n
        d.held = b""
        d.pos = 0
    elif type(buf) is bytes:  # the tail copied once (a slice, then a bytearray of it: twice)
        d.base += pos
        d.held = PyByteArray_FromStringAndSize(PyBytes_AS_STRING(buf) + pos, n - pos)
        d.pos = 0
    elif type(buf) is not bytearray:
        d.base += pos
        d.held = bytearray(buf[pos:])
        d.pos = 0
    elif pos > COMPACT_LIMIT or pos * 2 > n or (d.resync and pos):
        d.base += pos
        del buf[:pos]
        d.pos = 0
    return 0
