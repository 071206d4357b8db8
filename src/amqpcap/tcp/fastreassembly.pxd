# tcp/reassembly.py compiled (compiled.py's part "fastreassembly"): the types of its stream.
cimport cython
from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef long long MASK, HALF


@cython.final
cdef class Stream:
    cdef public int direction
    cdef public object sink
    cdef public bint started
    cdef public long long next_seq, next_off, ooo_bytes, acked_off, delivered, gaps, gap_bytes
    cdef public dict ooo
    cdef public list ooo_heap
    cdef public object fin_off

    cpdef syn(self, unsigned long long seq)

    @cython.locals(total=Py_ssize_t, d="long long", off="long long", cut=Py_ssize_t, full=bint)
    cpdef segment(self, unsigned long long seq, payload, Py_ssize_t missing, packet, ts)

    @cython.locals(d="long long", off="long long")
    cpdef ack(self, unsigned long long ack, packet, ts)

    @cython.locals(d="long long", off="long long")
    cpdef fin(self, unsigned long long seq, bint rst=*)

    cpdef close(self, packet, ts)

    @cython.locals(n=Py_ssize_t)
    cpdef deliver(self, payload, Py_ssize_t missing, packet, ts)

    cpdef hole(self, long long size, packet, ts)

    @cython.locals(ooo=dict, heap=list, off="long long", end="long long", cut="long long", missing=Py_ssize_t)
    cpdef drain(self, packet, ts)

    @cython.locals(off="long long")
    cpdef force(self, upto, packet, ts)
