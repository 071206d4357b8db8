# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled ``reassembly.Stream`` (optional; see amqp/accel.py).

The same object with its fields in C, and the two calls made for almost every packet typed:
``segment`` for the next bytes in order (whole, nothing held out of order) and ``ack``.
Everything else -- out-of-order segments, overlaps, bytes cut by the snapshot length, holes,
FIN, the end -- is the reference's own code (reassembly.py's methods, run on these fields), so
gaps and their accounting are the reference's by construction.
"""

cimport cython

from amqpcap.tcp import reassembly as _reference

cdef extern from *:
    """
    #ifndef AMQPCAP_SOURCE_SHA256
    #define AMQPCAP_SOURCE_SHA256 ""
    #endif
    """
    const char *AMQPCAP_SOURCE_SHA256

# accel.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_SHA256 = (<bytes>AMQPCAP_SOURCE_SHA256).decode("ascii")

cdef unsigned long long MASK = 0xFFFFFFFF
cdef unsigned long long HALF = 1 << 31
cdef object reference_segment = _reference.Stream.segment
cdef object reference_force = _reference.Stream._force


@cython.final
cdef class Stream:
    cdef public int direction
    cdef public object sink
    cdef public bint started
    cdef public long long next_seq, next_off, ooo_bytes, acked_off, delivered, gaps, gap_bytes
    cdef public dict ooo
    cdef public list ooo_heap
    cdef public object fin_off

    def __init__(self, int direction, sink):
        self.direction = direction
        self.sink = sink
        self.started = False
        self.next_seq = 0
        self.next_off = 0
        self.ooo = {}
        self.ooo_heap = []
        self.ooo_bytes = 0
        self.acked_off = -1
        self.delivered = 0
        self.gaps = 0
        self.gap_bytes = 0
        self.fin_off = None

    def segment(self, unsigned long long seq, payload, Py_ssize_t missing, packet, ts):
        """reassembly.Stream.segment; in C for the next bytes in order."""
        cdef Py_ssize_t n = len(payload)
        if self.started and n and not missing and not self.ooo and seq == self.next_seq:
            self.sink.data(self.direction, self.next_off, payload, packet, ts)
            self.delivered += n
            self.next_off += n
            self.next_seq = (self.next_seq + n) & MASK
            return
        reference_segment(self, seq, payload, missing, packet, ts)

    def ack(self, unsigned long long ack, packet, ts):
        """reassembly.Stream.ack."""
        cdef unsigned long long d
        cdef long long off
        if not self.started:
            return
        d = (ack - <unsigned long long>self.next_seq) & MASK
        if d >= HALF or d == 0:
            return
        off = self.next_off + <long long>d
        if off > self.acked_off:
            self.acked_off = off
            if self.ooo and self.ooo_heap[0] <= off:
                reference_force(self, off, packet, ts)

    # the reference's own code for the rest (plain functions of the fields above)
    syn = _reference.Stream.syn
    fin = _reference.Stream.fin
    close = _reference.Stream.close
    _deliver = _reference.Stream._deliver
    _hole = _reference.Stream._hole
    _drain = _reference.Stream._drain
    _force = _reference.Stream._force
