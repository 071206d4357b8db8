# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled packet loop of ``pipeline.Dissector`` (optional; see amqp/accel.py).

The common packet in C: a parsed TCP segment of a conversation already known, with no SYN,
FIN or RST, nothing cut by the snapshot length and a window that is open (and was open): its
counts, the acknowledgement, the payload into the stream, the events out.  Every other packet
(the first of a conversation, handshakes and ends, zero windows, truncation, anything not TCP
or malformed) goes to ``Dissector._parsed``, the reference, with the parse already done; a
link type not supported to ``Dissector._unsupported_link``.  What is done with a packet is the
reference's by construction.
"""

cdef extern from *:
    """
    #ifndef AMQPCAP_SOURCE_SHA256
    #define AMQPCAP_SOURCE_SHA256 ""
    #endif
    """
    const char *AMQPCAP_SOURCE_SHA256

# accel.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_SHA256 = (<bytes>AMQPCAP_SOURCE_SHA256).decode("ascii")

# TCP flags (capture/link.py's)
cdef int SYN = 0x02, FIN = 0x01, RST = 0x04, ACK = 0x10
# link.Packet and link.UnsupportedLinkType, bound by pipeline.use_compiled (no import cycle)
cdef object Packet = None, UnsupportedLinkType = None


def bind(packet_class, unsupported):
    global Packet, UnsupportedLinkType
    Packet, UnsupportedLinkType = packet_class, unsupported


def run(dis, source, progress, parse):
    """``for record in source: dis._packet(*record, progress)``, the common TCP segment in C;
    the number of the last packet.  A source with ``batches()`` (the reader's lists of
    records) is taken a list at a time: its generator resumes once a chunk, not a packet."""
    cdef dict flows = dis.flows
    cdef long long nbytes = 0  # added to dis.bytes before anything reads it (the progress line)
    cdef object number = 0
    cdef list batch
    batches = getattr(source, "batches", None)
    if batches is None:
        for record in source:
            number = packet(dis, flows, record, progress, parse, &nbytes)
    else:
        for batch in batches():
            for record in batch:
                number = packet(dis, flows, record, progress, parse, &nbytes)
    dis.bytes += nbytes
    return number


cdef object packet(dis, dict flows, record, progress, parse, long long *nbytes):
    """One record ``(number, ts, linktype, data, wirelen)``: its number."""
    number, ts, linktype, data, wirelen = record
    nbytes[0] += wirelen
    try:
        parsed = parse(linktype, data)
    except UnsupportedLinkType:
        dis._unsupported_link(number, ts, linktype)
    else:
        if not common(dis, flows, parsed, number, ts):
            dis._parsed(number, ts, parsed)
    if progress is not None and not number & 0x3FFF:
        dis.bytes += nbytes[0]
        nbytes[0] = 0
        dis.tick(number, progress)
    return number


cdef bint common(dis, dict flows, parsed, number, ts) except -1:
    """Dissector._parsed for a TCP segment of a known conversation with no SYN, FIN or RST,
    nothing cut and the window open (and not closing a zero-window period); False, having done
    nothing, for any other packet."""
    cdef tuple r, entry
    cdef int flags, d
    if type(parsed) is not Packet:
        return False
    r = <tuple>parsed
    flags = r[7]
    if flags & (SYN | FIN | RST) or r[10] or r[8] == 0:
        return False
    found = flows.get((r[1], r[3], r[2], r[4]))
    if found is None:
        return False
    entry = <tuple>found
    conv = entry[0]
    if conv.zw_open is not None:
        return False
    d = entry[1]
    conv.packets[d] += 1
    conv.last_ts = ts
    conv.last_packet = number
    if conv.closed or conv.ignored:
        return True
    streams = conv.streams
    if flags & ACK:
        streams[d ^ 1].ack(r[6], number, ts)
    payload = r[9]
    if payload:
        streams[d].segment(r[5], payload, 0, number, ts)
    dec = conv.decoder
    if dec.events:
        dis._emit(conv, dec.pop_events())
    if dec.undecoded and not dec.is_amqp:
        dis._ignore(conv)
    return True
