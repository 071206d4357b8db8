# amqp/framing_0_9.py compiled (compiled.py's part "fastframing"): frame_end in C, for fast09.
cimport cython
from libc.stdint cimport uint32_t

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef bint COMPILED


@cython.locals(top=uint32_t, size=uint32_t, end=Py_ssize_t)
cdef Py_ssize_t frame_end(const unsigned char *b, Py_ssize_t pos, Py_ssize_t n, object types, Py_ssize_t limit) except -2
