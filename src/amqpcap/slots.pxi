from cpython.object cimport PyObject

# The slots of a __slots__ class (the events: values.py) read and written at
# their offsets: what attribute access does through the member descriptor, without the type
# lookup and the call (~150 instructions an access).  Included (Cython `include`) by the
# compiled modules that hold such objects' fields in C; a module finds the offsets once, from
# the class's member descriptors, and takes the generic path if a class is not laid out so.

cdef extern from *:
    """
    #include "structmember.h"
    /* The offset of the object slot ``descr`` describes: -1 if it is not one (or, with
       ``writable``, if it is read-only). */
    static inline Py_ssize_t amqpcap_slot_offset(PyObject *descr, int writable) {
        if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) return -1;
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != T_OBJECT_EX || (writable && (m->flags & READONLY))) return -1;
        return m->offset;
    }
    /* The value in a slot (borrowed), NULL if it was never set. */
    static inline PyObject *amqpcap_slot(PyObject *obj, Py_ssize_t off) {
        return *(PyObject **)((char *)obj + off);
    }
    /* A slot set to ``v`` (the previous value released). */
    static inline void amqpcap_put(PyObject *obj, Py_ssize_t off, PyObject *v) {
        PyObject **slot = (PyObject **)((char *)obj + off);
        Py_INCREF(v);
        Py_XSETREF(*slot, v);
    }
    """
    Py_ssize_t amqpcap_slot_offset(PyObject *descr, int writable)
    PyObject *amqpcap_slot(object obj, Py_ssize_t off)
    void amqpcap_put(object obj, Py_ssize_t off, object v)


cdef inline Py_ssize_t slot_offset(cls, str name, bint writable=False):
    """The offset of ``cls``'s own slot ``name``: -1 if it has none (or only a read-only one,
    with ``writable``)."""
    descr = cls.__dict__.get(name)
    return amqpcap_slot_offset(<PyObject *>descr, writable)
