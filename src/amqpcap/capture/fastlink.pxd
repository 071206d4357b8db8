# capture/link.py compiled (compiled.py's part "fastlink"): the types of its packet parser.
cimport cython
from libc.stdint cimport uint16_t, uint32_t

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef bint COMPILED

cdef extern from *:
    """
    /* A tuple subclass without instance dict (a namedtuple: Packet) holding the items of the
       tuple values, made by its own allocator: no call through tuple.__new__. */
    static PyObject *amqpcap_tuple_as(PyObject *cls, PyObject *values) {
        Py_ssize_t i, n = PyTuple_GET_SIZE(values);
        PyObject *r = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, n);
        if (r != NULL) {
            for (i = 0; i < n; i++) {
                PyObject *v = PyTuple_GET_ITEM(values, i);
                Py_INCREF(v);
                PyTuple_SET_ITEM(r, i, v);
            }
        }
        return r;
    }
    """
    object _tuple_as "amqpcap_tuple_as" (object cls, tuple values)
cdef list _ADDRS, _PORTS


cdef uint16_t _rd16(const unsigned char *b, Py_ssize_t p) noexcept
cdef uint32_t _rd32(const unsigned char *b, Py_ssize_t p) noexcept


@cython.locals(h=size_t, c=bytes, cb="const unsigned char *", i=Py_ssize_t)
cdef object _address(const unsigned char *b, Py_ssize_t a, Py_ssize_t alen)


@cython.locals(k=long)
cdef object _u16(uint16_t v)


@cython.locals(values=tuple)
cdef object _packet_at(int version, const unsigned char *b, Py_ssize_t a, Py_ssize_t alen, Py_ssize_t t, Py_ssize_t p,
                       Py_ssize_t end)


@cython.locals(n=Py_ssize_t, b="const unsigned char *", et=int, off=Py_ssize_t, v=int, af=int, vihl=int, total=Py_ssize_t,
               frag=int, proto=int, of=int, end=Py_ssize_t, p=Py_ssize_t, vf=int, plen=Py_ssize_t, nh=int)
cpdef parse_packet_reference(int linktype, data)
