# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled packet loop of ``pipeline.Dissector`` (optional; see amqp/accel.py).

The common packet in C: a parsed TCP segment of a conversation already known, with no SYN,
FIN or RST, nothing cut by the snapshot length and a window that is open (and was open): its
counts, the acknowledgement, the payload into the stream, the events out.  Every other packet
(the first of a conversation, handshakes and ends, zero windows, truncation, link types not
supported, anything malformed) goes to ``Dissector._packet``, the reference, whole: what it
does with a packet is the reference's by construction.
"""

from libc.stdint cimport uint8_t

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
cdef object Packet = None  # link.Packet, bound by pipeline.use_compiled (no import cycle)


def bind(packet_class):
    global Packet
    Packet = packet_class


def run(dis, source, progress, parse):
    """``for record in source: dis._packet(*record, progress)``, the common packet in C; the
    number of the last packet."""
    cdef dict flows = dis.flows
    cdef long long nbytes = 0
    cdef int flags, d
    cdef tuple r, entry
    slow = dis._packet
    emit = dis._emit
    number = 0
    for number, ts, linktype, data, wirelen in source:
        try:
            parsed = parse(linktype, data)
        except Exception:  # an unsupported link type: the reference reports it
            parsed = None
        if type(parsed) is not Packet:
            dis.bytes += nbytes
            nbytes = 0
            slow(number, ts, linktype, data, wirelen, progress)
            continue
        r = <tuple>parsed
        flags = r[7]
        if flags & (SYN | FIN | RST) or r[10] or r[8] == 0:
            dis.bytes += nbytes
            nbytes = 0
            slow(number, ts, linktype, data, wirelen, progress)
            continue
        entry = flows.get((r[1], r[3], r[2], r[4]))
        if entry is None:
            dis.bytes += nbytes
            nbytes = 0
            slow(number, ts, linktype, data, wirelen, progress)
            continue
        conv = entry[0]
        if conv.zw_open is not None:
            dis.bytes += nbytes
            nbytes = 0
            slow(number, ts, linktype, data, wirelen, progress)
            continue
        d = entry[1]
        nbytes += wirelen
        conv.packets[d] += 1
        conv.last_ts = ts
        conv.last_packet = number
        if conv.closed or conv.ignored:
            continue
        streams = conv.streams
        if flags & ACK:
            streams[d ^ 1].ack(r[6], number, ts)
        payload = r[9]
        if payload:
            streams[d].segment(r[5], payload, 0, number, ts)
        dec = conv.decoder
        if dec.events:
            emit(conv, dec.pop_events())
        if dec.undecoded and not dec.is_amqp:
            dis._ignore(conv)
            continue
        if progress is not None and not number & 0x3FFF:
            dis.bytes += nbytes
            nbytes = 0
            dis.tick(number, progress)
    dis.bytes += nbytes
    return number
