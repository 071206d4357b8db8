from cpython.object cimport PyObject, PyTypeObject

# A value handed to a table buffer before it is computed (a body digest the hashing thread is
# still working on): its type, the length of its text, and the function that writes that text,
# waiting for it if need be, without the GIL (in the thread that encodes the batch).  fast09 exports one for its Sha256 (``DEFERRED_DIGEST``, a capsule
# named "amqpcap.deferred_text"); fastwriter's text columns take such values and write them
# when the batch is made.  Included by both extensions: this layout is their contract.

cdef extern from *:
    """
    typedef struct {
        PyTypeObject *type;
        Py_ssize_t size;
        void (*fill)(PyObject *value, char *out);
    } amqpcap_deferred_text;
    """
    ctypedef struct amqpcap_deferred_text:
        PyTypeObject *type
        Py_ssize_t size
        void (*fill)(PyObject *value, char *out) noexcept nogil
