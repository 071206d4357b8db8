# spark/entries.py compiled (compiled.py's part "fastranges"): the types of its loops.
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef bint COMPILED
cdef uint64_t M64, MIX_K1, MIX_K2, GOLDEN


cdef inline bytes _bytes_at(const uint8_t[::1] data, Py_ssize_t at, Py_ssize_t n):
    return PyBytes_FromStringAndSize(<const char *>&data[at], n)


@cython.locals(top=uint32_t)
cdef uint32_t _u32(const uint8_t[::1] b, Py_ssize_t p, bint big) noexcept


cdef uint64_t mix(uint64_t x) noexcept


@cython.locals(lo=uint64_t, hi=uint64_t, k=uint64_t)
cdef uint64_t pair_key(uint64_t e1, uint64_t e2) noexcept


@cython.locals(hlen=Py_ssize_t, et=Py_ssize_t, ip=Py_ssize_t, ihl=Py_ssize_t, t=Py_ssize_t, src=uint64_t, dst=uint64_t)
cdef uint64_t ipv4_key(const uint8_t[::1] b, Py_ssize_t p, Py_ssize_t cap, int lt) noexcept


@cython.locals(blen=Py_ssize_t, pos=Py_ssize_t, n=Py_ssize_t, caplen=uint32_t, nxt=Py_ssize_t, sec=int64_t, frac=int64_t)
cpdef tuple pcap_records(const uint8_t[::1] buf, Py_ssize_t end, Py_ssize_t hl, bint big, int64_t mul, int lt,
                         int64_t[::1] starts, uint32_t[:] caps, uint32_t[:] wires, int64_t[:] ts, uint64_t[::1] keys)


@cython.locals(out=list, dlen=Py_ssize_t, i=Py_ssize_t, off=uint64_t, at=int64_t, cap=uint32_t)
cpdef list packets(const uint8_t[::1] data, const uint32_t[:] ords, const int64_t[:] ts, const uint16_t[:] lts,
                   const uint64_t[:] offs, const uint32_t[:] caps, const uint32_t[:] wires, int64_t lo, int64_t base)
