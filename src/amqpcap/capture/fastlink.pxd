# capture/link.py compiled (compiled.py's part "fastlink"): the types of its packet parser.
cimport cython
from libc.stdint cimport uint16_t, uint32_t

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef bint COMPILED

cdef extern from *:
    """
    /* A Packet (a namedtuple: a tuple subclass without instance dict) made by its own
       allocator and filled in place: no call through tuple.__new__, no tuple made first. */
    static PyObject *amqpcap_packet(PyObject *cls, PyObject *v0, PyObject *v1, PyObject *v2,
                                    PyObject *v3, PyObject *v4, PyObject *v5, PyObject *v6,
                                    PyObject *v7, PyObject *v8, PyObject *v9, PyObject *v10) {
        PyObject *items[11] = {v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10};
        PyObject *r = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 11);
        Py_ssize_t i;
        if (r != NULL) {
            for (i = 0; i < 11; i++) {
                Py_INCREF(items[i]);
                PyTuple_SET_ITEM(r, i, items[i]);
            }
        }
        return r;
    }
    """
    object _new_packet "amqpcap_packet" (object cls, object, object, object, object, object, object, object,
                                         object, object, object, object)
cdef list _ADDRS, _PORTS


cdef inline const unsigned char *_bytes_from(object buf, Py_ssize_t start) except NULL:
    """A pointer to the bytes of ``buf`` (bytes or bytearray, as a packet's bytes may be) from
    ``start`` on: a located packet's, read in place."""
    cdef const unsigned char *b = buf
    return b + start


cdef uint16_t _rd16(const unsigned char *b, Py_ssize_t p) noexcept
@cython.locals(top=uint32_t)
cdef uint32_t _rd32(const unsigned char *b, Py_ssize_t p) noexcept


@cython.locals(h=size_t, c=bytes, cb="const unsigned char *", i=Py_ssize_t)
cdef object _address(const unsigned char *b, Py_ssize_t a, Py_ssize_t alen)


@cython.locals(k=long)
cdef object _u16(uint16_t v)


cdef object _packet_at(int version, const unsigned char *b, Py_ssize_t a, Py_ssize_t alen, Py_ssize_t t, Py_ssize_t p,
                       Py_ssize_t end)


cdef object _bytes_of(object buf, Py_ssize_t start, Py_ssize_t stop)


cdef tuple _ethertype(const unsigned char *b, Py_ssize_t n, Py_ssize_t off, int et)


cpdef parse_packet_reference(int linktype, data)


@cython.locals(stop=Py_ssize_t, b="const unsigned char *", et=int, off=Py_ssize_t, v=int, af=int, vihl=int, total=Py_ssize_t,
               frag=int, proto=int, of=int, end=Py_ssize_t, p=Py_ssize_t, vf=int, plen=Py_ssize_t, nh=int)
cpdef parse_located_reference(int linktype, buf, Py_ssize_t start, Py_ssize_t n)
