# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled ``reassembly.Stream`` (optional; see compiled.py).

The same object with its fields in C, and the two calls made for almost every packet typed:
``segment`` for the next bytes in order (whole, nothing held out of order) and ``ack``.
Everything else -- out-of-order segments, overlaps, bytes cut by the snapshot length, holes,
FIN, the end -- is the reference's own code (reassembly.py's methods, run on these fields), so
gaps and their accounting are the reference's by construction.
"""

cimport cython

cdef extern from *:
    """
    #ifndef AMQPCAP_SOURCE_STAMP
    #define AMQPCAP_SOURCE_STAMP ""
    #endif
    """
    const char *AMQPCAP_SOURCE_STAMP

# compiled.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_STAMP = (<bytes>AMQPCAP_SOURCE_STAMP).decode("ascii")

cdef unsigned long long MASK = 0xFFFFFFFF
cdef unsigned long long HALF = 1 << 31
# The reference's methods, run on this class's fields (taken at the end of this module: see there)
cdef object reference_segment, reference_syn, reference_fin, reference_close
cdef object reference_deliver, reference_hole, reference_drain, reference_force


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

    # the reference's own code for the rest, run on the fields above
    def syn(self, seq):
        reference_syn(self, seq)

    def fin(self, seq, rst=False):
        reference_fin(self, seq, rst)

    def close(self, packet, ts):
        reference_close(self, packet, ts)

    def deliver(self, payload, missing, packet, ts):
        reference_deliver(self, payload, missing, packet, ts)

    def hole(self, size, packet, ts):
        reference_hole(self, size, packet, ts)

    def drain(self, packet, ts):
        reference_drain(self, packet, ts)

    def force(self, upto, packet, ts):
        reference_force(self, upto, packet, ts)


# The reference is imported last: reassembly.py imports this module at its own end to choose
# it, when its Stream is defined and this module's Stream is not yet needed; imported first
# (compiled.describe), this module is complete but for these names when reassembly.py asks
# for it.
from amqpcap.tcp.reassembly import Stream as Reference

reference_segment, reference_syn, reference_fin = Reference.segment, Reference.syn, Reference.fin
reference_close, reference_deliver, reference_hole = Reference.close, Reference.deliver, Reference.hole
reference_drain, reference_force = Reference.drain, Reference.force
