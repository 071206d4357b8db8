# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled column buffers for the Parquet writer (optional; see compiled.py).

``Columns`` is the row-to-columns half of writer.py's ``TableBufferReference``: instead of
keeping the row tuples and converting them with ``pa.array`` at flush, each value goes straight
into a typed C buffer of its column (values, validity, offsets) as the row arrives, and
``take()`` wraps the buffers in Arrow arrays (``pa.Array.from_buffers``).  No ``pa.array``
call on the common path: it costs a conversion per value at flush, and its first call imports
pandas (pyarrow's pandas shim: ~0.2 s and ~56 MB per process).

Native: int8/16/32/64, timestamps, bool, string, binary, and structs / lists of those (methods
``id_ranges``).  A table of records/schema.py is given by name (``Columns("methods", ...)``) and
its columns built from the schema's ``Type``s: pyarrow is imported when the first batch is taken
(``arrow()``).  A value that is not of the column's exact native type (an int subclass, bytes
in a string column, an int out of the column's range, ...) is converted by ``pa.array([value],
type)``, the reference conversion: the same coercions and the same exceptions as the
reference, for that value.  A row whose conversion raises leaves nothing behind (every column
is cut back to the rows before it).  A column of any other Arrow type keeps Python values and
is converted by ``pa.array`` at ``take()``.

Why not pyarrow's own builders: 20,000 rows of a real dissect into a record batch take 0.38 /
0.45 us a row here (methods / messages) against 0.95 / 0.97 us through ``pa.array`` per column
of the row tuples (the reference), which also imports pandas (~0.2 s, ~56 MB a process).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_CheckExact, PyDict_GetItem
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_CheckExact
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_DATA, PyUnicode_GET_LENGTH
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uintptr_t
from libc.string cimport memcpy, memset

cimport cython

from amqpcap.records import schema as declared
from amqpcap.records.schema import Type

include "raw.pxi"
include "../deferred.pxi"

from amqpcap.stamp cimport AMQPCAP_SOURCE_STAMP

cdef extern from "Python.h":
    ctypedef struct PyTupleObject:
        PyObject *ob_item[1]
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    long long PyLong_AsLongLongAndOverflow(object v, int *overflow) except? -1

# compiled.py compares this with the sources it finds next to the module (stale-build guard)
SOURCE_STAMP = (<bytes>AMQPCAP_SOURCE_STAMP).decode("ascii")

cdef Py_ssize_t OFFSET_MAX = 2147483647  # int32 offsets of string / binary / list arrays
MAX_BYTES = 256 << 20  # bytes of one string / binary column that make a batch full


# pyarrow, imported once a batch is taken or a value needs the reference conversion (``arrow()``).
cdef object pa = None


cdef object arrow():
    global pa
    if pa is None:
        import pyarrow

        pa = pyarrow
    return pa


# --- the reference conversion, for the values the native paths do not take -------------------


def _value(arr):
    """The Python value of a one-element array, as the native paths take it (timestamps and
    other temporal types as their integer storage)."""
    arrow()
    t = arr.type
    if pa.types.is_temporal(t) and t.bit_width == 64:
        arr = arr.view(pa.int64())
    elif pa.types.is_temporal(t) and t.bit_width == 32:
        arr = arr.view(pa.int32())
    return arr[0].as_py()


def _convert(value, type):
    """``value`` converted to ``type`` (a pyarrow type) by the reference (``pa.array``: its
    coercions, its errors)."""
    return _value(arrow().array([value], type=type))


# --- growable byte buffers ---------------------------------------------------------------------


cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    PyObject *Py_True
    PyObject *Py_False


cdef extern from *:
    """
    /* An exact int of at most three 30-bit digits whose value fits 63 bits (counts, offsets,
       channels, tags, ns timestamps): its value without the general conversion; 0 for any
       other.  CPython 3.11's layout (ob_size: sign and digit count), read only where it is
       that layout. */
    static int amqpcap_small_int(PyObject *v, long long *out) {
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
        Py_ssize_t size = Py_SIZE(v), n = size < 0 ? -size : size;
        const digit *d = ((PyLongObject *)v)->ob_digit;
        unsigned long long x;
        if (n <= 1) {
            *out = (long long)size * (long long)d[0];
            return 1;
        }
        if (n == 2 || (n == 3 && d[2] < 8)) {  /* below 2**63 */
            x = (unsigned long long)d[0] | ((unsigned long long)d[1] << PyLong_SHIFT);
            if (n == 3)
                x |= (unsigned long long)d[2] << (2 * PyLong_SHIFT);
            *out = size < 0 ? -(long long)x : (long long)x;
            return 1;
        }
    #endif
        return 0;
    }

    /* n flags stored one byte each, every byte 0 or 1 (validity, bool values), eight at a time:
       how many are 1, and their Arrow bitmap (LSB first: bit i of byte i / 8 is flag i). */
    static Py_ssize_t amqpcap_count_flags(const unsigned char *f, Py_ssize_t n) {
        Py_ssize_t i = 0, set = 0;
        unsigned long long w;
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, f + i, 8);
            set += (Py_ssize_t)((w * 0x0101010101010101ULL) >> 56);  /* the sum of its bytes */
        }
        for (; i < n; i++)
            set += f[i];
        return set;
    }

    static void amqpcap_pack_flags(const unsigned char *f, Py_ssize_t n, unsigned char *out) {
        Py_ssize_t i = 0, k;
        unsigned long long w;
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, f + i, 8);
            out[i >> 3] = (unsigned char)((w * 0x0102040810204080ULL) >> 56);  /* byte j's bit to bit j */
        }
        if (i < n) {
            out[i >> 3] = 0;
            for (k = i; k < n; k++)
                out[k >> 3] |= (unsigned char)(f[k] << (k & 7));
        }
    }
    """
    bint amqpcap_small_int(PyObject *v, long long *out)
    Py_ssize_t amqpcap_count_flags(const uint8_t *f, Py_ssize_t n) noexcept
    void amqpcap_pack_flags(const uint8_t *f, Py_ssize_t n, uint8_t *out) noexcept


cdef struct Buf:
    char *data
    Py_ssize_t size
    Py_ssize_t cap


cdef inline int reserve(Buf *b, Py_ssize_t more) except -1:
    """Room for ``more`` bytes after ``size``."""
    cdef Py_ssize_t cap
    cdef void *p
    if b.size + more <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    while cap < b.size + more:
        cap *= 2
    p = PyMem_Realloc(b.data, cap)
    if p == NULL:
        raise MemoryError()
    b.data = <char *>p
    b.cap = cap
    return 0


cdef inline int push_flag(Buf *b, Py_ssize_t at, uint8_t flag) except -1:
    """Byte ``at`` of ``b`` set to ``flag`` (validity, bool values: one byte per value)."""
    if at >= b.cap:
        b.size = at
        reserve(b, 1)
    b.data[at] = <char>flag
    b.size = at + 1
    return 0


cdef inline int push_zeros(Buf *b, Py_ssize_t at, Py_ssize_t k) except -1:
    """Bytes ``at`` .. ``at + k`` of ``b`` set to 0 (``k`` nulls' validity or values at once)."""
    b.size = at
    reserve(b, k)
    memset(b.data + at, 0, k)
    b.size = at + k
    return 0


cdef inline void release(Buf *b) noexcept:
    PyMem_Free(b.data)
    b.data = NULL
    b.size = b.cap = 0


cdef object as_buffer(const char *data, Py_ssize_t size):
    """A copy of ``size`` bytes as an Arrow buffer."""
    return arrow().py_buffer(PyBytes_FromStringAndSize(data, size))


# Blocks of column memory Arrow has let go of (its batch written), kept for the batches that
# follow: a column's next batch needs a block of the same capacity, and fresh memory of that
# size is mapped and faulted in page by page again (~16k page faults on 200k small packets,
# ~1.5% of the run).  POOL_BLOCKS blocks of at most POOL_BLOCK_MAX bytes; larger ones are freed.
# Guarded by the GIL: Owned is freed with it held (pyarrow takes it to release a buffer's base).
cdef enum:
    POOL_BLOCKS = 128
    POOL_BLOCK_MAX = 1 << 22
cdef char *pool_data[POOL_BLOCKS]
cdef Py_ssize_t pool_cap[POOL_BLOCKS]
cdef Py_ssize_t pool_n = 0


cdef char *new_block(Py_ssize_t cap) noexcept:
    """A block of ``cap`` bytes: a pooled one if there is one (NULL: out of memory)."""
    global pool_n
    cdef Py_ssize_t i
    cdef char *p
    for i in range(pool_n - 1, -1, -1):
        if pool_cap[i] == cap:
            p = pool_data[i]
            pool_n -= 1
            pool_data[i], pool_cap[i] = pool_data[pool_n], pool_cap[pool_n]
            return p
    return <char *>PyMem_Malloc(cap)


cdef void free_block(char *p, Py_ssize_t cap) noexcept:
    global pool_n
    if p != NULL and cap <= POOL_BLOCK_MAX and pool_n < POOL_BLOCKS:
        pool_data[pool_n], pool_cap[pool_n] = p, cap
        pool_n += 1
    else:
        PyMem_Free(p)


def pooled_blocks() -> int:
    """Blocks waiting in the pool."""
    return pool_n


def release_pool() -> None:
    """Free the pooled blocks (DatasetWriter.close: nothing is kept once a dataset is written)."""
    global pool_n
    while pool_n:
        pool_n -= 1
        PyMem_Free(pool_data[pool_n])


@cython.final
cdef class Owned:
    """The memory of a column buffer handed to Arrow (``pa.foreign_buffer``'s base): back to the
    pool (or freed) with the Arrow buffer, once the batch is written."""

    cdef char *data
    cdef Py_ssize_t cap

    def __dealloc__(self):
        free_block(self.data, self.cap)


cdef object hand_over(Buf *b):
    """The ``b.size`` bytes of ``b`` as an Arrow buffer that owns them (no copy); ``b`` starts
    again empty, in another block of its capacity (the next batch is about as large)."""
    cdef Owned owner
    cdef char *fresh
    if b.data == NULL:
        return as_buffer(NULL, 0)
    fresh = new_block(b.cap)
    if fresh == NULL:
        raise MemoryError()
    owner = Owned.__new__(Owned)
    try:
        out = arrow().foreign_buffer(<uintptr_t>b.data, b.size, base=owner)
    except BaseException:
        free_block(fresh, b.cap)
        raise
    owner.data, owner.cap = b.data, b.cap  # owned from here on
    b.data = fresh
    b.size = 0
    return out


cdef object bitmap(const uint8_t *flags, Py_ssize_t n):
    """Arrow bitmap (LSB first) of ``n`` flags stored one byte each, each 0 or 1."""
    b = PyBytes_FromStringAndSize(NULL, (n + 7) >> 3)
    amqpcap_pack_flags(flags, n, <uint8_t *>PyBytes_AS_STRING(b))
    return arrow().py_buffer(b)


# --- deferred values: text written when the batch is encoded -----------------------------------


# The deferred values text columns take (``defer_text``): none until one is handed over.
cdef amqpcap_deferred_text deferred
deferred.type = NULL


def defer_text(capsule):
    """Text columns take values of the type ``capsule`` (an "amqpcap.deferred_text") describes
    from now on: room for their text is kept in the row and the text written when the batch is
    made (``take``), or where it is encoded (``take_later``).  fast09.DEFERRED_DIGEST: body
    digests the hashing thread is still on."""
    global deferred
    deferred = (<amqpcap_deferred_text *>PyCapsule_GetPointer(capsule, "amqpcap.deferred_text"))[0]


def defers_text() -> bool:
    """True once ``defer_text`` was given a capsule."""
    return deferred.type != NULL


cdef struct Later:
    PyObject *value  # a reference held until its text is written
    Py_ssize_t at  # where in the data buffer


cdef struct Fill:
    PyObject *value  # a deferred value (a reference held until its text is written)
    char *out  # where its text goes: in a batch's data


@cython.final
cdef class DeferredText:
    """The deferred values of a batch ``Columns.take_later`` made: ``write()`` writes their text
    into the batch, the GIL let go meanwhile, in the thread that encodes the batch (a body digest
    is waited for, or hashed, there: not in the thread that fills the columns).  Nothing may read
    the batch's text columns before."""

    cdef Buf fills  # Fill entries
    cdef void (*fill)(PyObject *value, char *out) noexcept nogil
    cdef list buffers  # the Arrow buffers the text goes into (alive until it is written)

    def __cinit__(self):
        self.fill = deferred.fill
        self.buffers = []

    def __dealloc__(self):
        self.let_go()
        release(&self.fills)

    cdef int take_over(self, Later *l, Py_ssize_t n, char *data, object buffer) except -1:
        """The ``n`` deferred values of ``l`` (their references with them), whose text goes at
        ``data`` + their offset, in ``buffer``."""
        cdef Fill *f
        cdef Py_ssize_t i
        reserve(&self.fills, n * sizeof(Fill))
        f = <Fill *>(self.fills.data + self.fills.size)
        for i in range(n):
            f[i].value, f[i].out = l[i].value, data + l[i].at
        self.fills.size += n * sizeof(Fill)
        self.buffers.append(buffer)
        return 0

    @property
    def pending(self) -> int:
        """Values whose text is not written yet."""
        return self.fills.size // <Py_ssize_t>sizeof(Fill)

    def write(self):
        """Every value's text written into its batch; the values let go."""
        cdef Fill *f = <Fill *>self.fills.data
        cdef Py_ssize_t i, n = self.fills.size // <Py_ssize_t>sizeof(Fill)
        with nogil:
            for i in range(n):
                self.fill(f[i].value, f[i].out)
        self.let_go()
        self.buffers = []

    cdef void let_go(self) noexcept:
        cdef Fill *f = <Fill *>self.fills.data
        cdef Py_ssize_t k = self.fills.size // <Py_ssize_t>sizeof(Fill)
        self.fills.size = 0
        while k:
            k -= 1
            Py_XDECREF(f[k].value)


# --- columns -----------------------------------------------------------------------------------


cdef enum:
    K_OTHER = 0
    K_INT = 1
    K_BYTES = 3


cdef class Col:
    """One column's values of the pending rows: ``length`` values, validity one byte each."""

    cdef readonly object type  # a schema.Type, or a pyarrow type
    cdef object atype  # the pyarrow type (arrow_type())
    cdef int kind  # K_INT, K_BYTES: a final class Columns.append calls directly
    cdef Py_ssize_t length
    cdef Buf valid

    def __dealloc__(self):
        release(&self.valid)

    cdef object arrow_type(self):
        """The column's pyarrow type (pyarrow imported)."""
        if self.atype is None:
            arrow()
            self.atype = self.type.arrow() if isinstance(self.type, Type) else self.type
        return self.atype

    cdef int append(self, object v) except -1:
        if v is None:
            return self.append_null()
        if self.put(v):
            return 0
        v = _convert(v, self.arrow_type())  # raises as the reference does
        if v is None:
            return self.append_null()
        if not self.put(v):
            raise TypeError(f"amqpcap: {type(v).__name__} value not taken by the {self.type} column")
        return 0

    cdef int put(self, object v) except -1:
        """Append non-null ``v`` if it is of the native type: 1, else 0 (nothing appended)."""
        raise NotImplementedError

    cdef int append_null(self) except -1:
        return self.fill(self.length + 1)

    cdef int fill(self, Py_ssize_t n) except -1:
        """Nulls up to ``n`` values: the rows that left this column out.  A row writes only its
        values (``Columns.append_array``); a column's nulls are written when its next value, or
        ``take``, needs the rows before it (most columns of a row are null).  A column class
        defines this or ``append_null``, each the other's default."""
        while self.length < n:
            self.append_null()
        return 0

    cdef void truncate(self, Py_ssize_t n) noexcept:
        """Back to the first ``n`` values (the rows before a row that failed); n <= length."""
        self.length = n
        self.valid.size = n

    cdef tuple validity(self):
        """(validity bitmap or None, null count) of the pending values."""
        cdef const uint8_t *v = <const uint8_t *>self.valid.data
        cdef Py_ssize_t nulls = self.length - amqpcap_count_flags(v, self.length)
        return (bitmap(v, self.length) if nulls else None), nulls

    cdef object take(self, DeferredText later):
        """The pending values as an Arrow array; the column is empty afterwards.  ``later``:
        the deferred values' text is left to it (None: written now)."""
        raise NotImplementedError


cdef inline void store_int(char *at, int width, long long x) noexcept:
    """``x`` stored at ``at`` as a signed integer of ``width`` bytes (8, 4, 2 or 1; x fits)."""
    if width == 8:
        (<int64_t *>at)[0] = <int64_t>x
    elif width == 4:
        (<int32_t *>at)[0] = <int32_t>x
    elif width == 2:
        (<int16_t *>at)[0] = <int16_t>x
    else:
        (<int8_t *>at)[0] = <int8_t>x


@cython.final
cdef class IntCol(Col):
    """Integers of ``width`` bytes (int8 .. int64, and 64-bit timestamps as their storage), or
    (``boolean``) True / False one byte each, packed into a bitmap at take()."""

    cdef int width
    cdef bint boolean
    cdef long long lo, hi
    cdef Buf values

    def __init__(self, type, int width, bint boolean=False):
        self.type = type
        self.kind = K_INT
        self.width = width
        self.boolean = boolean
        self.hi = (1LL << (8 * width - 1)) - 1 if width < 8 else 9223372036854775807LL
        self.lo = -self.hi - 1

    def __dealloc__(self):
        release(&self.values)

    cdef int put(self, object v) except -1:
        cdef int overflow = 0
        cdef long long x
        if self.boolean:
            return (v is True or v is False) and self.put_ll(v is True)
        if not PyLong_CheckExact(v):
            return 0
        if not amqpcap_small_int(<PyObject *>v, &x):
            x = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow:
                return 0
        return self.put_ll(x)

    cdef int put_ll(self, long long x) except -1:
        """``put`` of an int of value x."""
        if x < self.lo or x > self.hi:
            return 0  # the reference's error (or, for all we know, its conversion)
        reserve(&self.values, self.width)
        store_int(self.values.data + self.length * self.width, self.width, x)
        self.values.size += self.width
        push_flag(&self.valid, self.length, 1)
        self.length += 1
        return 1

    cdef int fill(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t k = n - self.length
        if k > 0:
            push_zeros(&self.values, self.length * self.width, k * self.width)
            push_zeros(&self.valid, self.length, k)
            self.length = n
        return 0

    cdef void truncate(self, Py_ssize_t n) noexcept:
        Col.truncate(self, n)
        self.values.size = n * self.width

    cdef object take(self, DeferredText later):
        vbuf, nulls = self.validity()
        if self.boolean:
            values = bitmap(<const uint8_t *>self.values.data, self.length)
        else:
            values = hand_over(&self.values)
        arr = pa.Array.from_buffers(self.arrow_type(), self.length, [vbuf, values], nulls)
        self.truncate(0)
        return arr


cdef inline int first_offset(Buf *offsets) except -1:
    """An empty offsets buffer (string, binary, list): its first offset, 0."""
    offsets.size = 0
    reserve(offsets, 4)
    (<int32_t *>offsets.data)[0] = 0
    offsets.size = 4
    return 0


cdef inline int end_value(Col c, Buf *offsets, Py_ssize_t end, uint8_t ok) except -1:
    """The value ``c`` was given ends at ``end`` of its data (string, binary, list)."""
    reserve(offsets, 4)
    (<int32_t *>(offsets.data + offsets.size))[0] = <int32_t>end
    offsets.size += 4
    push_flag(&c.valid, c.length, ok)
    c.length += 1
    return 0


cdef extern from "dlfcn.h" nogil:
    void *dlopen(const char *filename, int flag)


def open_libraries(paths, int flags) -> None:
    """Each file of ``paths`` (bytes) opened by the dynamic loader with ``flags``, the GIL let go
    meanwhile: pyarrow's libraries loaded beside the packet loop (records/arrow_libraries.py)
    without importing ctypes for it (~1.4 ms of Python with the GIL held, in that thread).  The
    handles are never closed (the import uses the files); a file that does not open is left to
    the import, which says why."""
    cdef const char *name
    for path in paths:
        name = path
        with nogil:
            dlopen(name, flags)


@cython.final
cdef class BytesCol(Col):
    """string (``text``: str values, UTF-8) or binary (bytes values): int32 offsets + data.
    A text column also takes a deferred value (``defer_text``): its text is written at ``take``."""

    cdef bint text
    cdef Buf offsets  # length + 1 int32
    cdef Buf data
    cdef Buf later  # Later entries, in data order

    def __init__(self, type, bint text):
        self.type = type
        self.kind = K_BYTES
        self.text = text
        first_offset(&self.offsets)

    def __dealloc__(self):
        self.forget(0)
        release(&self.offsets)
        release(&self.data)
        release(&self.later)

    cdef void forget(self, Py_ssize_t at) noexcept:
        """The deferred values from data offset ``at`` on dropped (their rows are cut)."""
        cdef Later *l = <Later *>self.later.data
        cdef Py_ssize_t k = self.later.size // <Py_ssize_t>sizeof(Later)
        while k and l[k - 1].at >= at:
            k -= 1
            Py_XDECREF(l[k].value)
        self.later.size = k * sizeof(Later)

    cdef int put_later(self, object v) except -1:
        """Room for deferred value ``v``'s text; written by ``take``."""
        cdef Later *l
        reserve(&self.later, sizeof(Later))
        l = <Later *>(self.later.data + self.later.size)
        l.at = self.data.size
        self.add(NULL, deferred.size, 1)  # the bytes are written at take
        l.value = <PyObject *>v
        Py_INCREF(v)
        self.later.size += sizeof(Later)
        return 0

    cdef int add(self, const char *p, Py_ssize_t size, uint8_t ok) except -1:
        if self.data.size + size > OFFSET_MAX:
            raise arrow().ArrowCapacityError(f"amqpcap: more than 2 GiB in one batch of the {self.type} column")
        if size:
            reserve(&self.data, size)
            if p != NULL:
                memcpy(self.data.data + self.data.size, p, size)
            self.data.size += size
        return end_value(self, &self.offsets, self.data.size, ok)

    cdef int put(self, object v) except -1:
        cdef Py_ssize_t size
        cdef const char *p
        if self.text:
            if not PyUnicode_CheckExact(v):
                if Py_TYPE(v) == deferred.type and deferred.type != NULL:
                    self.put_later(v)
                    return 1
                return 0
            if PyUnicode_IS_COMPACT_ASCII(v):  # most values: the characters are the UTF-8 bytes
                p = <const char *>PyUnicode_DATA(v)
                size = PyUnicode_GET_LENGTH(v)
            else:
                p = PyUnicode_AsUTF8AndSize(v, &size)  # UnicodeEncodeError (surrogates) like the reference
        else:
            if not PyBytes_CheckExact(v):
                return 0
            p = PyBytes_AS_STRING(v)
            size = PyBytes_GET_SIZE(v)
        self.add(p, size, 1)
        return 1

    cdef int fill(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t k = n - self.length, i
        cdef int32_t end
        cdef int32_t *o
        if k > 0:
            end = (<int32_t *>self.offsets.data)[self.length]
            reserve(&self.offsets, 4 * k)
            o = <int32_t *>(self.offsets.data + self.offsets.size)
            for i in range(k):
                o[i] = end
            self.offsets.size += 4 * k
            push_zeros(&self.valid, self.length, k)
            self.length = n
        return 0

    cdef void truncate(self, Py_ssize_t n) noexcept:
        Col.truncate(self, n)
        self.offsets.size = (n + 1) * 4
        self.data.size = (<int32_t *>self.offsets.data)[n]
        if self.later.size:
            self.forget(self.data.size)

    cdef object take(self, DeferredText later):
        cdef Later *l = <Later *>self.later.data
        cdef Py_ssize_t i, n = self.later.size // <Py_ssize_t>sizeof(Later)
        cdef char *data = self.data.data  # handed over as it is (hand_over)
        if later is None:
            for i in range(n):  # the deferred values' text, now
                deferred.fill(l[i].value, data + l[i].at)
            self.forget(0)
        vbuf, nulls = self.validity()
        values = hand_over(&self.data)
        if later is not None and n:
            later.take_over(l, n, data, values)  # with their references
            self.later.size = 0
        arr = pa.Array.from_buffers(
            self.arrow_type(), self.length, [vbuf, hand_over(&self.offsets), values], nulls
        )
        first_offset(&self.offsets)  # fresh memory: the first offset again
        self.truncate(0)
        return arr


cdef class StructCol(Col):
    """A struct of native columns; values are dicts (by field name) or tuples (in field order)."""

    cdef list children
    cdef list names
    cdef Py_ssize_t n

    def __init__(self, type, list names, list children):
        self.type = type
        self.children = children
        self.names = names
        self.n = len(children)

    cdef int put(self, object v) except -1:
        cdef Py_ssize_t i
        cdef PyObject *item
        if PyDict_CheckExact(v):
            for i in range(self.n):
                item = PyDict_GetItem(v, self.names[i])
                (<Col>self.children[i]).append(<object>item if item != NULL else None)
        elif PyTuple_CheckExact(v) and PyTuple_GET_SIZE(v) == self.n:
            for i in range(self.n):
                (<Col>self.children[i]).append(<object>PyTuple_GET_ITEM(v, i))
        else:
            return 0
        push_flag(&self.valid, self.length, 1)
        self.length += 1
        return 1

    cdef int append_null(self) except -1:
        cdef Py_ssize_t i
        for i in range(self.n):
            (<Col>self.children[i]).append_null()
        push_flag(&self.valid, self.length, 0)
        self.length += 1
        return 0

    cdef void truncate(self, Py_ssize_t n) noexcept:
        cdef Py_ssize_t i
        Col.truncate(self, n)
        for i in range(self.n):
            (<Col>self.children[i]).truncate(n)

    cdef object take(self, DeferredText later):
        vbuf, nulls = self.validity()
        children = [(<Col>c).take(later) for c in self.children]
        arr = pa.Array.from_buffers(self.arrow_type(), self.length, [vbuf], nulls, children=children)
        self.truncate(0)
        return arr


cdef class ListCol(Col):
    """A list of a native column; values are lists."""

    cdef Col child
    cdef Buf offsets  # length + 1 int32

    def __init__(self, type, Col child):
        self.type = type
        self.child = child
        first_offset(&self.offsets)

    def __dealloc__(self):
        release(&self.offsets)

    cdef int end(self, uint8_t ok) except -1:
        if self.child.length > OFFSET_MAX:
            raise arrow().ArrowCapacityError(f"amqpcap: more than 2**31 items in one batch of {self.type}")
        return end_value(self, &self.offsets, self.child.length, ok)

    cdef int put(self, object v) except -1:
        cdef Py_ssize_t i
        if not PyList_CheckExact(v):
            return 0
        for i in range(PyList_GET_SIZE(v)):
            self.child.append(<object>PyList_GET_ITEM(v, i))
        self.end(1)
        return 1

    cdef int append_null(self) except -1:
        return self.end(0)

    cdef void truncate(self, Py_ssize_t n) noexcept:
        Col.truncate(self, n)
        self.offsets.size = (n + 1) * 4
        self.child.truncate((<int32_t *>self.offsets.data)[n])

    cdef object take(self, DeferredText later):
        vbuf, nulls = self.validity()
        offsets = hand_over(&self.offsets)
        first_offset(&self.offsets)  # fresh memory: the first offset again
        arr = pa.Array.from_buffers(
            self.arrow_type(), self.length, [vbuf, offsets], nulls, children=[self.child.take(later)]
        )
        self.truncate(0)
        return arr


cdef class PyCol(Col):
    """Any other Arrow type: the values themselves, converted by ``pa.array`` at take()."""

    cdef list values

    def __init__(self, type):
        self.type = type
        self.values = []

    cdef int append(self, object v) except -1:
        self.values.append(v)
        self.length += 1
        return 0

    cdef int append_null(self) except -1:
        return self.append(None)

    cdef void truncate(self, Py_ssize_t n) noexcept:
        del self.values[n:]
        self.length = n

    cdef object take(self, DeferredText later):
        arr = arrow().array(self.values, type=self.arrow_type())
        self.values = []
        self.length = 0
        return arr


cdef tuple describe(type):
    """(kind, width, fields) of ``type`` as schema.Type has them: a schema.Type's own, or a
    pyarrow type's (kind None: not one the native columns take)."""
    if isinstance(type, Type):
        return type.kind, type.width, type.fields
    arrow()
    if pa.types.is_integer(type) and pa.types.is_signed_integer(type):
        return "int", type.bit_width // 8, ()
    if pa.types.is_timestamp(type):
        return "timestamp", 8, ()
    for kind, test in (("bool", pa.types.is_boolean), ("string", pa.types.is_string), ("binary", pa.types.is_binary)):
        if test(type):
            return kind, 0, ()
    if pa.types.is_struct(type):
        return "struct", 0, tuple([(f.name, f.type) for f in type])
    if pa.types.is_list(type):
        return "list", 0, ((type.value_field.name, type.value_type),)
    return None, 0, ()


cpdef Col column(type):
    """The column buffer for ``type``: a schema.Type or a pyarrow type."""
    kind, width, fields = describe(type)
    if kind == "int" or kind == "timestamp":
        return IntCol(type, width)
    if kind == "bool":
        return IntCol(type, 1, True)
    if kind == "string" or kind == "binary":
        return BytesCol(type, kind == "string")
    if kind == "struct":
        return StructCol(type, [n for n, _ in fields], [column(t) for _, t in fields])
    if kind == "list":
        return ListCol(type, column(fields[0][1]))
    return PyCol(type)


def native(type) -> bool:
    """True if columns of ``type`` are built natively (no ``pa.array`` at take())."""
    return not isinstance(column(type), PyCol)


# --- a row's common values, without a call ------------------------------------------------------


cdef inline bint put_int_now(IntCol c, PyObject *v) noexcept:
    """``c.put(v)`` of True / False (a bool column) or of an exact int that fits 63 bits and the
    column (an integer one), when both its buffers have room (most values of either):
    whether it was put (else ``put`` takes it)."""
    cdef long long x
    if c.boolean:
        if v == Py_True:
            x = 1
        elif v == Py_False:
            x = 0
        else:
            return False
    elif not PyLong_CheckExact(<object>v) or not amqpcap_small_int(v, &x):
        return False
    if x < c.lo or x > c.hi or c.values.size + c.width > c.values.cap or c.length >= c.valid.cap:
        return False
    store_int(c.values.data + c.length * c.width, c.width, x)
    c.values.size += c.width
    c.valid.data[c.length] = 1
    c.length += 1
    c.valid.size = c.length
    return True


cdef inline bint put_bytes_now(BytesCol c, PyObject *v) noexcept:
    """``c.put(v)`` of an ASCII str (a string column) or bytes (a binary one) when the column's
    buffers have room for it (most text values): whether it was put (else ``put`` takes it)."""
    cdef const char *p
    cdef Py_ssize_t size
    if c.text:
        if not PyUnicode_CheckExact(<object>v) or not PyUnicode_IS_COMPACT_ASCII(<object>v):
            return False
        p = <const char *>PyUnicode_DATA(<object>v)
        size = PyUnicode_GET_LENGTH(<object>v)
    else:
        if not PyBytes_CheckExact(<object>v):
            return False
        p = PyBytes_AS_STRING(<object>v)
        size = PyBytes_GET_SIZE(<object>v)
    if (c.data.size + size > c.data.cap or c.data.size + size > OFFSET_MAX
            or c.offsets.size + 4 > c.offsets.cap or c.length >= c.valid.cap):
        return False
    memcpy(c.data.data + c.data.size, p, size)
    c.data.size += size
    (<int32_t *>(c.offsets.data + c.offsets.size))[0] = <int32_t>c.data.size
    c.offsets.size += 4
    c.valid.data[c.length] = 1
    c.length += 1
    c.valid.size = c.length
    return True


# --- a table -----------------------------------------------------------------------------------


cdef class Columns:
    """The pending rows of one table (schema ``schema``), column by column.

    ``schema``: a table of records/schema.py by name (pyarrow imported only at ``take()``), or
    a pyarrow.Schema.  ``append(row)`` takes a row tuple in schema column order; when ``capacity`` rows are
    pending, or a string / binary column holds ``max_bytes`` (large bodies: memory stays
    bounded, and a batch stays far from the 2 GiB its int32 offsets can address), it calls
    ``self.flush()`` (the writer's, a subclass).  ``take()`` returns the pending rows as a
    record batch and starts a new one."""

    cdef object table  # the records/schema.py table's name, or None
    cdef object arrow_schema  # the pyarrow.Schema (``schema``)
    cdef list cols
    cdef list names
    cdef Py_ssize_t ncols
    cdef Py_ssize_t n
    cdef readonly Py_ssize_t capacity
    cdef readonly Py_ssize_t max_bytes
    cdef PyObject **col  # self.cols' items (borrowed: the list keeps them)

    def __init__(self, schema, Py_ssize_t capacity, Py_ssize_t max_bytes=MAX_BYTES):
        cdef Py_ssize_t i
        if isinstance(schema, str):
            self.table = schema
            fields = [(name, type) for name, type, _ in declared.TABLES[schema]]
        else:
            self.arrow_schema = schema
            fields = [(f.name, f.type) for f in schema]
        self.cols = [column(type) for _, type in fields]
        self.col = <PyObject **>PyMem_Malloc(max(1, len(self.cols)) * sizeof(PyObject *))
        if self.col == NULL:
            raise MemoryError()
        for i in range(len(self.cols)):
            self.col[i] = PyList_GET_ITEM(self.cols, i)
        self.max_bytes = max_bytes
        self.names = [name for name, _ in fields]
        self.ncols = len(self.cols)
        self.capacity = capacity
        self.n = 0

    def __dealloc__(self):
        PyMem_Free(self.col)

    @property
    def schema(self):
        """The table's pyarrow.Schema (pyarrow imported)."""
        if self.arrow_schema is None:
            self.arrow_schema = declared.SCHEMAS[self.table]
        return self.arrow_schema

    @property
    def pending(self) -> int:
        """Rows appended since the last ``take()``."""
        return self.n

    cdef tuple normal_row(self, object row):
        """A row that is not an exact tuple of the right size, as the reference reads it."""
        if isinstance(row, tuple):
            if len(row) == self.ncols:
                return tuple(row)
            raise arrow().ArrowInvalid("Tuple size must be equal to number of struct fields")
        if isinstance(row, dict):
            return tuple([row.get(name) for name in self.names])
        arr = arrow().array([row], type=pa.struct(list(self.schema)))  # the reference's error, if any
        return tuple([_value(c) for c in arr.flatten()])

    def append(self, row):
        """Append ``row``: a tuple in schema column order."""
        if not PyTuple_CheckExact(row) or PyTuple_GET_SIZE(row) != self.ncols:
            row = self.normal_row(row)
        self.append_array(<PyObject **>&(<PyTupleObject *>row).ob_item[0])

    cdef int append_array(self, PyObject **values, const Raw *raw=NULL) except -1:
        """Append the row of ``values`` (``ncols`` of them, schema column order; NULL is null):
        ``append`` for a tuple, and what the row builders call without making one
        (``APPEND_ARRAY``).  ``raw`` (if not NULL, ``ncols`` of them): a column whose raw value
        is not RAW_NONE takes that instead (text into a string column, an integer into an
        integer one).  Only the values are written (nulls: ``Col.fill``); a value a column
        refuses leaves nothing of the row behind."""
        return self.append_values(NULL, values, self.ncols, raw)

    cdef int append_sparse(self, const Py_ssize_t *cols, PyObject **values, Py_ssize_t k) except -1:
        """Append the row whose column ``cols[j]`` is ``values[j]`` (``k`` of them, in any order,
        a column at most once; NULL or None is null), every other column null: ``append_array``
        without stepping through the columns a row leaves null (most of a wide table's), for the
        row builders that know which they fill (``APPEND_SPARSE``)."""
        return self.append_values(cols, values, k, NULL)

    cdef int append_values(
        self, const Py_ssize_t *cols, PyObject **values, Py_ssize_t k, const Raw *raw
    ) except -1:
        """``append_array`` (``cols`` NULL: value j is column j's) and ``append_sparse`` (value j
        is column ``cols[j]``'s): one loop, its column writer (``put_at``) inlined here only."""
        cdef Py_ssize_t j, i, n = self.n
        cdef PyObject *p
        cdef bint full = False  # a string / binary column reached max_bytes with this row
        try:
            for j in range(k):
                i = j
                if cols != NULL:
                    i = cols[j]
                    if i < 0 or i >= self.ncols or (<Col>self.col[i]).length > n:
                        raise ValueError(f"amqpcap: column {i} given twice, or not one of the {self.ncols}")
                elif raw != NULL and raw[i].kind != RAW_NONE:
                    full = self.append_raw(i, &raw[i], n) or full
                    continue
                p = values[j]
                if p != NULL and p != <PyObject *>None:
                    full = put_at(self, i, p, n) or full
        except BaseException:
            self.cut(n)
            raise
        return self.row_done(n, full)

    cdef void cut(self, Py_ssize_t n) noexcept:
        """Every column back to the first ``n`` rows (a row that failed leaves nothing)."""
        cdef Py_ssize_t i
        cdef Col col
        for i in range(self.ncols):
            col = <Col>self.col[i]
            if col.length >= n:  # shorter: a column this row and the ones before left null
                col.truncate(n)

    cdef int row_done(self, Py_ssize_t n, bint full) except -1:
        """Row ``n`` written: a batch taken if it is full (``capacity`` rows, or ``full``)."""
        self.n = n + 1
        if self.n >= self.capacity or full:
            self.flush()
        return 0

    cdef bint append_raw(self, Py_ssize_t i, const Raw *r, Py_ssize_t n) except -1:
        """Column i's value of row n from ``r``; whether the column reached max_bytes."""
        cdef PyObject *c = self.col[i]
        if r.kind == RAW_TEXT and (<Col>c).kind == K_BYTES and (<BytesCol>c).text:
            if (<Col>c).length != n:
                (<BytesCol>c).fill(n)
            (<BytesCol>c).add(r.p, r.n, 1)
            return (<BytesCol>c).data.size >= self.max_bytes
        if r.kind == RAW_INT and (<Col>c).kind == K_INT and not (<IntCol>c).boolean:
            if (<Col>c).length != n:
                (<IntCol>c).fill(n)
            if (<IntCol>c).put_ll(r.i):
                return False
        raise TypeError(f"amqpcap: raw value of kind {r.kind} refused by the {(<Col>c).type} column")

    def flush(self):
        """Called when ``capacity`` rows are pending (the writer's flush: a subclass)."""

    def take(self):
        """The pending rows as a ``pa.RecordBatch`` of the schema; none are pending afterwards."""
        return self.take_batch(None)

    def take_later(self):
        """``take()``, the text of its deferred values left to be written: (the batch, the
        DeferredText that writes it before anything reads the batch; None if it has none)."""
        later = DeferredText.__new__(DeferredText)
        batch = self.take_batch(later)
        return batch, (later if later.pending else None)

    cdef object take_batch(self, DeferredText later):
        arrow()  # the columns' take use it (pa)
        for c in self.cols:
            (<Col>c).fill(self.n)
        arrays = [(<Col>c).take(later) for c in self.cols]
        self.n = 0
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


cdef inline bint put_at(Columns self, Py_ssize_t i, PyObject *p, Py_ssize_t n) except -1:
    """Column i's value of row n of ``self``: ``p``, not null; whether the column reached
    max_bytes."""
    cdef PyObject *c = self.col[i]
    # the common columns without a virtual call (Col.append: the same, for any column),
    # their common values without any call while the buffers have room (put_int_now,
    # put_bytes_now); nulls filled in only where the column is behind (Col.fill)
    if (<Col>c).kind == K_INT:
        if (<Col>c).length != n:
            (<IntCol>c).fill(n)
        if not put_int_now(<IntCol>c, p) and not (<IntCol>c).put(<object>p):
            (<Col>c).append(<object>p)
        return False
    if (<Col>c).kind == K_BYTES:
        if (<Col>c).length != n:
            (<BytesCol>c).fill(n)
        if not put_bytes_now(<BytesCol>c, p) and not (<BytesCol>c).put(<object>p):
            (<Col>c).append(<object>p)
        return (<BytesCol>c).data.size >= self.max_bytes
    (<Col>c).fill(n)
    (<Col>c).append(<object>p)
    return False


# --- time columns as Parquet stores them (records/times.py) ------------------------------------


def split_ns(data, Py_ssize_t count):
    """The first ``count`` int64 ns of ``data`` (a buffer) as (microseconds, floored: int64 bytes;
    the 0 .. 999 ns past them: int16 bytes): ``times.split_ns``, in C."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef Py_ssize_t i
    cdef int64_t x, q, r
    cdef const int64_t *v
    cdef int64_t *u
    cdef int16_t *n
    if count < 0 or count * 8 > view.shape[0]:
        raise ValueError(f"{count} int64 values do not fit a buffer of {view.shape[0]} bytes")
    us = PyBytes_FromStringAndSize(NULL, count * 8)
    rest = PyBytes_FromStringAndSize(NULL, count * 2)
    if not count:
        return us, rest
    v = <const int64_t *>&view[0]
    u = <int64_t *>PyBytes_AS_STRING(us)
    n = <int16_t *>PyBytes_AS_STRING(rest)
    for i in range(count):
        x = v[i]
        q = x / 1000  # C division truncates: floored below for negative times (before 1970)
        r = x - q * 1000
        if r < 0:
            r += 1000
            q -= 1
        u[i] = q
        n[i] = <int16_t>r
    return us, rest


# --- for the row builders (records/fastrows.pyx) ------------------------------------------------


cdef int append_array_of(object columns, PyObject **values, const Raw *raw) except -1:
    """``columns.append_array(values, raw)``: 1; 0 (nothing done) if ``columns`` is not a
    Columns.  ``values`` NULL: only whether it is one."""
    if not isinstance(columns, Columns):
        return 0
    if values != NULL:
        (<Columns>columns).append_array(values, raw)
    return 1


cdef int append_sparse_of(object columns, const Py_ssize_t *cols, PyObject **values, Py_ssize_t k) except -1:
    """``columns.append_sparse(cols, values, k)`` of a Columns (``append_array_of`` says which
    tables are one)."""
    return (<Columns>columns).append_sparse(cols, values, k)


# C functions for the row builders (fastrows, fast10) without a build-time dependency between the
# extensions (capsules, not a cimport): they use them when they find this module, else make tuples.
APPEND_ARRAY = PyCapsule_New(<void *>append_array_of, "amqpcap.records.fastwriter.append_array_raw", NULL)
APPEND_SPARSE = PyCapsule_New(<void *>append_sparse_of, "amqpcap.records.fastwriter.append_sparse", NULL)
