# A value staged as C data instead of a Python object: what the row builders (fastrows.pyx) hand
# the compiled table buffer (fastwriter.pyx, Columns.append_array) for a column whose value they
# read straight from the wire (properties, plain arguments: fast09.WireFields).  Included by
# both extensions: this layout is their contract.

cdef enum:
    RAW_NONE = 0  # the column's value is the PyObject * row's
    RAW_TEXT = 1  # UTF-8 text: p[:n]
    RAW_INT = 2   # an integer: i

ctypedef struct Raw:
    int kind
    const char *p
    Py_ssize_t n
    long long i

ctypedef int (*append_array_fn)(object columns, PyObject **values, const Raw *raw) except -1
# a row given as the columns it fills and their values (Columns.append_sparse)
ctypedef int (*append_sparse_fn)(object columns, const Py_ssize_t *cols, PyObject **values, Py_ssize_t k) except -1
