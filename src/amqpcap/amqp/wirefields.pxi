# Field lists as the compiled decoder keeps them (fast09.WireFields: a content header's
# properties, a method's plain arguments): where each value lies in the frame's bytes, not a
# dict of Python objects, so that the compiled row builder (records/fastrows.pyx) writes the
# columns and the JSON straight from the bytes.  Included by both extensions: this layout is
# their contract (fast09 hands the struct over through a capsule, WIRE_FIELDS; no build-time
# dependency between them).

# Field type codes of a decoding plan (one byte per field).
cdef enum:
    P_OCTET = 1
    P_SHORT = 2
    P_LONG = 3
    P_LONGLONG = 4
    P_SHORTSTR = 5
    P_TABLE = 6
    P_LONGSTR = 7
    P_BIT = 8

cdef extern from *:
    """
    #ifndef AMQPCAP_WIREFIELDS
    #define AMQPCAP_WIREFIELDS
    enum { AMQPCAP_WIRE_MAX = 16 };  /* more values than this: a dict, as before */
    typedef struct {
        const unsigned char *data;   /* the values' bytes (a bytes object the owner keeps) */
        Py_ssize_t n;                /* values, in wire order */
        const unsigned char *codes;  /* the type of each (P_* codes) */
        PyObject *names;             /* tuple of their n names (interned str) */
        PyObject *bits;              /* tuple: the bit properties set (a bit's flag is its value, True) */
        Py_ssize_t start[AMQPCAP_WIRE_MAX], size[AMQPCAP_WIRE_MAX];  /* text: without its length */
        PyObject *obj[AMQPCAP_WIRE_MAX];  /* the value of a table / long string (owned), else NULL */
    } amqpcap_wire;
    #endif
    """
    enum: AMQPCAP_WIRE_MAX
    ctypedef struct amqpcap_wire:
        const unsigned char *data
        Py_ssize_t n
        const unsigned char *codes
        PyObject *names
        PyObject *bits
        Py_ssize_t start[16]  # 16: AMQPCAP_WIRE_MAX (the C definition above is the layout)
        Py_ssize_t size[16]
        PyObject *obj[16]

ctypedef const amqpcap_wire *(*wire_of_fn)(object o)
