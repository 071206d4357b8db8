# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled packet loop of ``pipeline.Dissector`` (optional; see compiled.py).

The common packet in C: a parsed TCP segment of a conversation already known, with no SYN,
FIN or RST, nothing cut by the snapshot length and a window that is open (and was open): its
counts, the acknowledgement, the payload into the stream, the events out.  Every other packet
(the first of a conversation, handshakes and ends, zero windows, truncation, anything not TCP
or malformed) goes to ``Dissector.handle_parsed``, the reference, with the parse already done; a
link type not supported to ``Dissector.unsupported_link``.  What is done with a packet is the
reference's by construction.
"""

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

# compiled.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_STAMP = (<bytes>AMQPCAP_SOURCE_STAMP).decode("ascii")

# TCP flags (capture/link.py's)
cdef int SYN = 0x02, FIN = 0x01, RST = 0x04, ACK = 0x10
include "slots.pxi"

from amqpcap.capture import link
from amqpcap import conversation
from amqpcap.records import rows  # its append_rows, as compiled.py chose the row builder

# held in C globals: read for every packet
cdef object Packet = link.Packet, UnsupportedLinkType = link.UnsupportedLinkType
cdef object Conversation = conversation.Conversation

# Where a Conversation keeps what the common packet reads and writes (slots.pxi); DIRECT
# False: the class is not laid out so, and its attributes are used
cdef Py_ssize_t ZW_OPEN = slot_offset(Conversation, "zw_open", True)
cdef Py_ssize_t PACKETS = slot_offset(Conversation, "packets", True)
cdef Py_ssize_t LAST_TS = slot_offset(Conversation, "last_ts", True)
cdef Py_ssize_t LAST_PACKET = slot_offset(Conversation, "last_packet", True)
cdef Py_ssize_t CLOSED = slot_offset(Conversation, "closed", True)
cdef Py_ssize_t IGNORED = slot_offset(Conversation, "ignored", True)
cdef Py_ssize_t STREAMS = slot_offset(Conversation, "streams", True)
cdef Py_ssize_t DECODER = slot_offset(Conversation, "decoder", True)
cdef Py_ssize_t STREAM = slot_offset(Conversation, "stream", True)
cdef bint DIRECT = min(ZW_OPEN, PACKETS, LAST_TS, LAST_PACKET, CLOSED, IGNORED, STREAMS, DECODER, STREAM) >= 0


cdef inline object cget(conv, bint direct, Py_ssize_t off, str name):
    """conv.<name>: from its slot (``direct``) unless unset (getattr: the same AttributeError)."""
    cdef PyObject *v
    if direct:
        v = amqpcap_slot(conv, off)
        if v is not NULL:
            return <object>v
    return getattr(conv, name)


cdef inline int cset(conv, bint direct, Py_ssize_t off, str name, value) except -1:
    """conv.<name> = value."""
    if direct:
        amqpcap_put(conv, off, value)
    else:
        setattr(conv, name, value)
    return 0


cdef class Loop:
    """What every packet of one run reads: the dissector's flow table, capture name and the two
    tables the common rows go to, and rows.append_rows (read once, not per packet)."""
    cdef object dis, append_rows, capture, methods, messages, progress, parse
    cdef dict flows
    cdef long long nbytes  # added to dis.bytes before anything reads it (the progress line)

    def __cinit__(self, dis, progress, parse):
        self.dis, self.progress, self.parse = dis, progress, parse
        self.flows = dis.flows
        self.append_rows = rows.append_rows
        self.capture, self.methods, self.messages = dis.capture, dis.t_methods, dis.t_messages
        self.nbytes = 0


def run(dis, source, progress, parse):
    """``for record in source: dis.handle_record(*record, progress)``, the common TCP segment in C;
    the number of the last packet.  A source with ``batches()`` (the reader's lists of
    records) is taken a list at a time: its generator resumes once a chunk, not a packet."""
    cdef Loop loop = Loop(dis, progress, parse)
    cdef object number = 0
    cdef list batch
    batches = getattr(source, "batches", None)
    if batches is None:
        for record in source:
            number = packet(loop, record)
    else:
        for batch in batches():
            for record in batch:
                number = packet(loop, record)
    dis.bytes += loop.nbytes
    return number


cdef object packet(Loop loop, record):
    """One record ``(number, ts, linktype, data, wirelen)``: its number."""
    number, ts, linktype, data, wirelen = record
    loop.nbytes += wirelen
    dis = loop.dis
    try:
        parsed = loop.parse(linktype, data)
    except UnsupportedLinkType:
        dis.unsupported_link(number, ts, linktype)
    else:
        if not common(loop, parsed, number, ts):
            dis.handle_parsed(number, ts, parsed)
    if loop.progress is not None and not number & 0x3FFF:
        dis.bytes += loop.nbytes
        loop.nbytes = 0
        dis.tick(number, loop.progress)
    return number


cdef bint common(Loop loop, parsed, number, ts) except -1:
    """Dissector.handle_parsed for a TCP segment of a known conversation with no SYN, FIN or RST,
    nothing cut and the window open (and not closing a zero-window period); False, having done
    nothing, for any other packet."""
    cdef tuple r, entry
    cdef int flags, d
    cdef bint direct
    if type(parsed) is not Packet:
        return False
    r = <tuple>parsed
    flags = r[7]
    if flags & (SYN | FIN | RST) or r[10] or r[8] == 0:
        return False
    found = loop.flows.get((r[1], r[3], r[2], r[4]))
    if found is None:
        return False
    entry = <tuple>found
    conv = entry[0]
    direct = DIRECT and type(conv) is Conversation
    if cget(conv, direct, ZW_OPEN, "zw_open") is not None:
        return False
    d = entry[1]
    cget(conv, direct, PACKETS, "packets")[d] += 1
    cset(conv, direct, LAST_TS, "last_ts", ts)
    cset(conv, direct, LAST_PACKET, "last_packet", number)
    if cget(conv, direct, CLOSED, "closed") or cget(conv, direct, IGNORED, "ignored"):
        return True
    streams = cget(conv, direct, STREAMS, "streams")
    if flags & ACK:
        streams[d ^ 1].ack(r[6], number, ts)
    payload = r[9]
    if payload:
        streams[d].segment(r[5], payload, 0, number, ts)
    dec = cget(conv, direct, DECODER, "decoder")
    if dec.events:  # Dissector._emit
        rest = loop.append_rows(
            dec.pop_events(), loop.capture, cget(conv, direct, STREAM, "stream"), dec.version, loop.methods,
            loop.messages
        )
        if rest:
            loop.dis.emit_rest(conv, rest)
    if dec.undecoded and not dec.is_amqp:
        loop.dis.ignore_conversation(conv)
    return True
