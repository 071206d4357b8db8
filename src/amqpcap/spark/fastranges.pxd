# spark/entries.py compiled (compiled.py's part "fastranges"): the types of its loops.
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef bint COMPILED


cdef inline bytes _bytes_at(const uint8_t[::1] data, Py_ssize_t at, Py_ssize_t n):
    return PyBytes_FromStringAndSize(<const char *>&data[at], n)


@cython.locals(blen=Py_ssize_t, pos=Py_ssize_t, n=Py_ssize_t, q=Py_ssize_t, caplen=uint32_t, nxt=Py_ssize_t)
cpdef tuple record_starts(const uint8_t[::1] buf, Py_ssize_t end, Py_ssize_t hl, bint big, int64_t[::1] starts)


@cython.locals(out=list, dlen=Py_ssize_t, i=Py_ssize_t, off=uint64_t, at=int64_t, cap=uint32_t)
cpdef list packets(const uint8_t[::1] data, const uint32_t[:] ords, const int64_t[:] ts, const uint16_t[:] lts,
                   const uint64_t[:] offs, const uint32_t[:] caps, const uint32_t[:] wires, int64_t lo, int64_t base)
