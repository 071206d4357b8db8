# capture/reader.py compiled (compiled.py's part "fastread"): the types of its record walks.
cimport cython
from libc.stdint cimport int64_t, uint32_t

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef bint COMPILED
cdef int64_t _NS


cdef uint32_t _u32(const unsigned char *b, Py_ssize_t p, bint big) noexcept


@cython.locals(blen=Py_ssize_t, end=Py_ssize_t, b="const unsigned char *", out=list, in_c=bint, sec=uint32_t, frac=uint32_t, caplen=uint32_t,
               wirelen=uint32_t, w=object)
cpdef tuple walk_pcap(bytes buf, Py_ssize_t pos, Py_ssize_t hl, bint big, int64_t mul, linktype, int64_t n)


@cython.locals(blen=Py_ssize_t, end=Py_ssize_t, b="const unsigned char *", out=list, in_c=bint, iface=tuple, btype=uint32_t, blk=uint32_t,
               iid=uint32_t, hi=uint32_t, lo=uint32_t, caplen=uint32_t, wirelen=uint32_t, w=object)
cpdef tuple walk_pcapng(bytes buf, Py_ssize_t pos, bint big, list ifaces, int64_t n)
