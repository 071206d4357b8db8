# flows.py compiled (compiled.py's part "fastflows"): Conversation a C class, the packet loop typed.
cimport cython
from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP
from amqpcap.tcp.fastreassembly cimport Stream

cdef bint COMPILED
cdef int SYN, FIN, RST, ACK, PROGRESS_EVERY


cdef inline tuple as_tuple(object packet):
    """A link.Packet as the tuple it is (unpacked by index, not through an iterator)."""
    return <tuple>packet


# A stream's per-packet methods called in C when it is the compiled reassembler's (a method call
# through Python costs a lookup, a call and its arguments converted), else through Python (the
# reference's Stream, with AMQPCAP_PURE=fastreassembly).
cdef inline int stream_ack(object s, unsigned long long ack, packet, ts) except -1:
    if type(s) is Stream:
        (<Stream>s).ack(ack, packet, ts)
    else:
        s.ack(ack, packet, ts)
    return 0


cdef inline int stream_segment(object s, unsigned long long seq, payload, Py_ssize_t missing, packet, ts) except -1:
    if type(s) is Stream:
        (<Stream>s).segment(seq, payload, missing, packet, ts)
    else:
        s.segment(seq, payload, missing, packet, ts)
    return 0


@cython.final
cdef class Conversation:
    cdef public object stream, client, server, dir_source, decoder, live, row
    cdef public object first_packet, first_ts, last_ts, last_packet, syn_ts
    cdef public object rst_by, rst_frame, closed_by, close_frame, zw_open, zero_windows
    cdef public int ip_version
    cdef public tuple streams
    cdef public list packets, fin
    cdef public bint rst, closed, ignored
    cdef public Py_ssize_t anomalies

    cpdef ignore(self)


@cython.final
cdef class Flows:
    cdef public object conversations, output, parse
    cdef public dict table
    cdef public long long bytes
    cdef public double shown

    cpdef run(self, source, progress)

    @cython.locals(now=double)
    cdef record(self, number, ts, linktype, buf, start, caplen, wirelen, progress)

    @cython.locals(fields=tuple, flags=int, win=int, missing=Py_ssize_t, d=int, conv=Conversation, entry=tuple,
                   streams=tuple)
    cpdef packet(self, number, ts, r)

    cdef end(self, Conversation conv, int d, int flags, end_seq, number, ts)

    cdef zero_window(self, Conversation conv, int d, int win, int flags, number, ts)
