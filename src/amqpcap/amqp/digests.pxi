# Body digests of the compiled walker (included by fast09.pyx).
#
# A small body's SHA-256 through hashlib costs ~0.4 us (the object, the method calls, the
# EVP context copy of hexdigest), 3-5% of a small-packet dissection.  OpenSSL's own SHA256_*
# functions (the libcrypto hashlib loads, found already loaded or loaded here: importing
# hashlib costs ~2.4 ms of every start, libcrypto alone ~0.6; no link-time dependency) do the
# same work without them.  Not found, or a known-answer check that fails: hashlib, imported
# then.
#
# Large bodies: hashing is a fifth of a bulk dissection (41 MB of bodies, ~21 ms of ~108), and
# it needs neither the GIL nor the decoder.  With ``queued``, a body frame's bytes are copied
# into a ring (ARENA bytes) and hashed by a thread of its own, in order per digest, while the
# walker goes on; a digest still being computed can be handed on (``Content.body_hash`` of a
# decoder with ``deferred_digests``) to a table buffer that writes its 64 characters when it
# makes the batch (``DEFERRED_DIGEST``).  Everything that reads a digest (``hexdigest``,
# ``update`` in place, freeing it) first waits for its queued parts: the digests are the same.
# Why not hashlib on a worker thread (it releases the GIL above 2047 bytes): for 16 x 1 MiB of
# 4-128 KiB pieces, copied as here, the producer spends the same CPU (3.3-4.5 ms against this
# ring's 3.6-6.5 ms) but the wall time is 43-70 ms against 29-39 ms (the worker needs the GIL
# for every piece, which the decoder's thread holds); small bodies inline cost 1.6 us here
# against hashlib's 2.0 us.
# Whole dissection of bench_dissect's bulk capture (41 MB), compiled, hashlib
# (AMQPCAP_HASHLIB=1) against this: 0.244 / 0.214 CPU s (medians of 9 alternating runs).

cdef extern from "dlfcn.h":
    void *dlopen(const char *filename, int flag)
    void *dlsym(void *handle, const char *symbol)
    int RTLD_NOW
    int RTLD_NOLOAD

ctypedef int (*sha_init_fn)(void *ctx) noexcept nogil
ctypedef int (*sha_update_fn)(void *ctx, const void *data, size_t n) noexcept nogil
ctypedef int (*sha_final_fn)(unsigned char *md, void *ctx) noexcept nogil

cdef extern from *:
    """
    #include <pthread.h>
    #include <stdint.h>
    #include <stdlib.h>
    #include <sys/mman.h>
    #include <string.h>
    #include <unistd.h>

    typedef int (*amqpcap_sha_update_fn)(void *ctx, const void *data, size_t n);

    /* One queued piece of a body: ``len`` bytes at ``at`` in the ring for ``ctx``; ``cost``:
       the ring bytes it frees once hashed (``len``, plus the end of the ring it skipped). */
    typedef struct { void *ctx; int *pending; size_t at, len, cost; } amqpcap_hjob;

    #define AMQPCAP_HJOBS 4096u                   /* queued pieces at most (a power of two) */
    #define AMQPCAP_HARENA ((size_t)4 << 20)      /* ring bytes; a producer waits when it is full */
    #define AMQPCAP_HWAKE ((size_t)1024 << 10)     /* bytes queued before an idle hasher is woken */

    static struct {
        pthread_mutex_t mu;
        pthread_cond_t work, done;
        int state;               /* 0: not started (in this process), 1: running, -1: cannot start */
        int idle, busy, waiters;
        unsigned head, tail;     /* jobs[head .. tail) queued; the hasher removes a job once hashed */
        size_t wpos, used, woken;
        unsigned char *ring;
        amqpcap_sha_update_fn update;
        amqpcap_hjob jobs[AMQPCAP_HJOBS];
    } amqpcap_h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};

    /* Under mu: every piece queued now hashed by the caller, in order, then removed (mu is
       taken twice for the lot, not for each: the producer and the hasher contended for it).
       Nobody else hashes meanwhile (busy), so the pieces of a digest are hashed in order. */
    static void amqpcap_hash_queued(void) {
        unsigned i, from = amqpcap_h.head, to = amqpcap_h.tail;
        amqpcap_hjob *job;
        amqpcap_h.busy = 1;
        pthread_mutex_unlock(&amqpcap_h.mu);
        for (i = from; i != to; i++) {  /* the producer writes only past tail: no lock needed */
            job = &amqpcap_h.jobs[i & (AMQPCAP_HJOBS - 1)];
            amqpcap_h.update(job->ctx, amqpcap_h.ring + job->at, job->len);
        }
        pthread_mutex_lock(&amqpcap_h.mu);
        for (i = from; i != to; i++) {
            job = &amqpcap_h.jobs[i & (AMQPCAP_HJOBS - 1)];
            amqpcap_h.used -= job->cost;
            *job->pending -= 1;
        }
        amqpcap_h.head = to;
        amqpcap_h.busy = 0;
        if (amqpcap_h.waiters)
            pthread_cond_broadcast(&amqpcap_h.done);
    }

    static void *amqpcap_hasher(void *unused) {
        (void)unused;
    #ifdef MADV_POPULATE_WRITE
        {   /* The ring's pages faulted in here, not by the producer's first copies (1,024 page
               faults, ~3 ms of the main thread); their contents are left as they are (the
               producer may be writing them already).  An older kernel says EINVAL: no matter. */
            uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
            uintptr_t from = ((uintptr_t)amqpcap_h.ring + page - 1) & ~(page - 1);
            uintptr_t to = ((uintptr_t)amqpcap_h.ring + AMQPCAP_HARENA) & ~(page - 1);
            if (to > from)
                madvise((void *)from, to - from, MADV_POPULATE_WRITE);
        }
    #endif
        pthread_mutex_lock(&amqpcap_h.mu);
        for (;;) {
            while (amqpcap_h.head == amqpcap_h.tail || amqpcap_h.busy) {
                amqpcap_h.idle = 1;
                pthread_cond_wait(&amqpcap_h.work, &amqpcap_h.mu);
            }
            amqpcap_h.idle = 0;
            amqpcap_hash_queued();
        }
        return NULL;
    }

    static void amqpcap_wake(void) {  /* under mu */
        if (amqpcap_h.idle) {
            amqpcap_h.idle = 0;
            pthread_cond_signal(&amqpcap_h.work);
        }
        amqpcap_h.woken = 0;
    }

    static int amqpcap_hdone(void *pending) { return *(int *)pending == 0; }
    static int amqpcap_hidle(void *unused) {
        (void)unused;
        return amqpcap_h.head == amqpcap_h.tail && !amqpcap_h.busy;
    }

    /* Under mu, until ``ready(arg)``: a waiting thread hashes the queued pieces itself while
       the hasher is not on one (no wake-up to wait for; it would otherwise sleep), and sleeps
       only while the hasher is.  The GIL stays held: the waits are short, and a thread handed
       the GIL may keep it for a whole switch interval. */
    static void amqpcap_hwait_until(int (*ready)(void *), void *arg) {
        while (!ready(arg)) {
            if (!amqpcap_h.busy && amqpcap_h.head != amqpcap_h.tail) {
                amqpcap_hash_queued();
                continue;
            }
            amqpcap_h.waiters++;
            pthread_cond_wait(&amqpcap_h.done, &amqpcap_h.mu);
            amqpcap_h.waiters--;
        }
        if (amqpcap_h.head != amqpcap_h.tail)
            amqpcap_wake();  /* what is left, to the hasher */
    }

    /* fork: the child has no hasher; nothing is left queued across the fork (the parent's
       queue is drained first), and the child starts its own on demand. */
    static void amqpcap_hfork_prepare(void) {
        pthread_mutex_lock(&amqpcap_h.mu);
        if (amqpcap_h.state == 1)
            amqpcap_hwait_until(amqpcap_hidle, NULL);
    }
    static void amqpcap_hfork_parent(void) { pthread_mutex_unlock(&amqpcap_h.mu); }
    static void amqpcap_hfork_child(void) {
        pthread_mutex_init(&amqpcap_h.mu, NULL);
        pthread_cond_init(&amqpcap_h.work, NULL);
        pthread_cond_init(&amqpcap_h.done, NULL);
        if (amqpcap_h.state == 1)
            amqpcap_h.state = 0;
        amqpcap_h.idle = amqpcap_h.busy = amqpcap_h.waiters = 0;
        amqpcap_h.head = amqpcap_h.tail = 0;
        amqpcap_h.wpos = amqpcap_h.used = amqpcap_h.woken = 0;
    }

    /* Under mu: 1 if the hasher runs (started here if need be), 0 if it cannot. */
    static int amqpcap_hstart(amqpcap_sha_update_fn update) {
        static int forks = 0;
        pthread_t t;
        pthread_attr_t attr;
        if (amqpcap_h.state)
            return amqpcap_h.state == 1;
        amqpcap_h.state = -1;
        if (!forks) {
            if (pthread_atfork(amqpcap_hfork_prepare, amqpcap_hfork_parent, amqpcap_hfork_child))
                return 0;
            forks = 1;
        }
        if (amqpcap_h.ring == NULL && (amqpcap_h.ring = malloc(AMQPCAP_HARENA)) == NULL)
            return 0;
        amqpcap_h.update = update;
        if (pthread_attr_init(&attr))
            return 0;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 << 10);
        if (pthread_create(&t, &attr, amqpcap_hasher, NULL) == 0)
            amqpcap_h.state = 1;
        pthread_attr_destroy(&attr);
        return amqpcap_h.state == 1;
    }

    /* Every queued piece of the digest whose counter is ``pending`` hashed; with ``drain``,
       every piece queued (a batch's digests are read one after another: one wait, not one
       each). */
    static void amqpcap_hwait(int *pending, int drain) {
        pthread_mutex_lock(&amqpcap_h.mu);
        amqpcap_hwait_until(drain ? amqpcap_hidle : amqpcap_hdone, pending);
        pthread_mutex_unlock(&amqpcap_h.mu);
    }

    /* Where ``n`` ring bytes go (0 .. ARENA-n) and what they cost, or -1 if they do not fit now. */
    static long long amqpcap_hplace(size_t n, size_t *cost) {
        size_t at = amqpcap_h.wpos;
        *cost = n;
        if (at + n > AMQPCAP_HARENA) {  /* the rest of the ring is skipped: contiguous bytes */
            *cost = n + (AMQPCAP_HARENA - at);
            at = 0;
        }
        if (amqpcap_h.used + *cost > AMQPCAP_HARENA || amqpcap_h.tail - amqpcap_h.head >= AMQPCAP_HJOBS)
            return -1;
        return (long long)at;
    }

    static int amqpcap_hroom(void *n) {
        size_t cost;
        return amqpcap_hplace(*(size_t *)n, &cost) >= 0;
    }

    /* ``n`` bytes at ``p`` queued for ``ctx`` (``*pending`` counts them until hashed): 1; 0 if
       not (no hasher, or too large for the ring): the caller hashes them in place. */
    static int amqpcap_hsubmit(amqpcap_sha_update_fn update, void *ctx, int *pending,
                               const unsigned char *p, size_t n) {
        long long at;
        size_t cost;
        amqpcap_hjob *job;
        if (n > AMQPCAP_HARENA / 4)
            return 0;
        pthread_mutex_lock(&amqpcap_h.mu);
        if (!amqpcap_hstart(update)) {
            pthread_mutex_unlock(&amqpcap_h.mu);
            return 0;
        }
        if ((at = amqpcap_hplace(n, &cost)) < 0) {
            amqpcap_hwait_until(amqpcap_hroom, &n);
            at = amqpcap_hplace(n, &cost);
        }
        memcpy(amqpcap_h.ring + at, p, n);
        job = &amqpcap_h.jobs[amqpcap_h.tail & (AMQPCAP_HJOBS - 1)];
        job->ctx = ctx;
        job->pending = pending;
        job->at = (size_t)at;
        job->len = n;
        job->cost = cost;
        amqpcap_h.tail++;
        amqpcap_h.wpos = (size_t)at + n;
        amqpcap_h.used += cost;
        *pending += 1;
        amqpcap_h.woken += n;
        if (amqpcap_h.idle && amqpcap_h.woken >= AMQPCAP_HWAKE)
            amqpcap_wake();
        pthread_mutex_unlock(&amqpcap_h.mu);
        return 1;
    }
    """
    int amqpcap_hsubmit(sha_update_fn update, void *ctx, int *pending, const uint8_t *p, size_t n) noexcept
    void amqpcap_hwait(int *pending, int drain) noexcept nogil
    size_t AMQPCAP_HARENA

cdef sha_init_fn sha_init = NULL
cdef sha_update_fn sha_update = NULL
cdef sha_final_fn sha_final = NULL
cdef bint use_sha = False
cdef enum:
    SHA_CTX_BYTES = 256  # OpenSSL's SHA256_CTX is 112 bytes; room to spare
    # smaller pieces are hashed in place; larger ones cost the walker's thread less queued (a
    # lock, a copy) than hashed (bulk10, bodies mostly 0.3-2 KiB: its main thread -5% of its
    # instructions against queueing from 2 KiB, the total unchanged).  Not from 256 bytes: 200k
    # small packets (bodies up to 319 bytes) then start the thread and its ring, for +1.7% CPU
    # and +5 MB peak RSS
    QUEUE_MIN = 512


@cython.final
@cython.freelist(16)
cdef class Sha256:
    """hashlib.sha256()'s ``update`` and ``hexdigest`` over OpenSSL's SHA256_* (what the
    reference code calls on a content's digest); the walker feeds it bytes directly, in
    place or queued to the hashing thread (``pending``: pieces not hashed yet)."""

    cdef unsigned char ctx[SHA_CTX_BYTES]
    cdef int pending

    def __cinit__(self):
        if sha_final == NULL:  # not found, or not checked: the walker uses hashlib
            raise RuntimeError("amqpcap: OpenSSL's SHA256_* not available; use hashlib.sha256")
        sha_init(self.ctx)
        self.pending = 0

    def __dealloc__(self):
        if self.pending:  # the hasher must be done with ctx (it needs no GIL: none released)
            amqpcap_hwait(&self.pending, 0)

    cdef inline void feed(self, const uint8_t *p, Py_ssize_t n) noexcept:
        if self.pending:
            amqpcap_hwait(&self.pending, 0)
        sha_update(self.ctx, p, n)

    cdef inline void feed_queued(self, const uint8_t *p, Py_ssize_t n) noexcept:
        """``feed``, hashed by the hashing thread if the piece is worth it (or follows one that
        was: the order of the pieces is kept)."""
        if (n < QUEUE_MIN and not self.pending) or not amqpcap_hsubmit(sha_update, self.ctx, &self.pending, p, n):
            self.feed(p, n)

    def update(self, data, *, bint queued=False):
        cdef const uint8_t[::1] v = data
        if v.shape[0]:
            if queued:
                self.feed_queued(&v[0], v.shape[0])
            else:
                self.feed(&v[0], v.shape[0])

    @property
    def computing(self):
        """True while queued pieces are not hashed yet."""
        return self.pending != 0

    cdef void hex_into(self, char *out, bint drain=True) noexcept nogil:
        """The 64 hex characters of the digest so far into ``out``, once every piece is hashed
        (``drain``: every piece queued, of any digest; else this digest's)."""
        cdef unsigned char copy[SHA_CTX_BYTES]
        cdef unsigned char md[32]
        cdef int i
        if self.pending:
            amqpcap_hwait(&self.pending, drain)
        memcpy(copy, self.ctx, SHA_CTX_BYTES)  # the digest so far; more updates may follow
        sha_final(md, copy)
        for i in range(32):
            out[2 * i] = HEX[md[i] >> 4]
            out[2 * i + 1] = HEX[md[i] & 15]

    cpdef str hexdigest(self):
        cdef char out[64]
        self.hex_into(out)
        return PyUnicode_DecodeASCII(out, 64, NULL)

    def __str__(self):
        return self.hexdigest()

    def __repr__(self):
        return f"<amqpcap Sha256 {self.hexdigest()}>"


cdef const char *HEX = "0123456789abcdef"


cdef object new_digest():
    """A content's body digest: a Sha256, or hashlib's sha256 where OpenSSL's is not used."""
    if use_sha:
        return Sha256.__new__(Sha256)
    import hashlib

    return hashlib.sha256()


# (pieces, their SHA-256 as hashlib gives it): what the functions found must answer before they
# are used (empty, one block, several updates across blocks)
_PROBE = bytes(range(256)) * 5
KNOWN_DIGESTS = (
    ((), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ((b"abc",), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    (
        (_PROBE[:63], _PROBE[63:200], b"", _PROBE[200:]),
        "d414b085826eb06778483ba35564dc849e643359f69ed9747878ba6e54985bed",
    ),
)


cdef bint load_openssl():
    """Whether OpenSSL's SHA256_* were found and answer as hashlib does (``AMQPCAP_HASHLIB=1``:
    not looked for, hashlib's digests; the other way the walker hashes, for the tests)."""
    global sha_init, sha_update, sha_final
    cdef void *lib = NULL
    if os.environ.get("AMQPCAP_HASHLIB", "") not in ("", "0"):
        return False
    names = (b"libcrypto.so.3", b"libcrypto.so.1.1", b"libcrypto.so")
    for flags in (RTLD_NOW | RTLD_NOLOAD, RTLD_NOW):  # the one hashlib loaded, if it did; else ours
        for name in names:
            lib = dlopen(<const char *>name, flags)
            if lib != NULL:
                break
        if lib != NULL:
            break
    if lib == NULL:
        return False
    sha_init = <sha_init_fn>dlsym(lib, "SHA256_Init")
    sha_update = <sha_update_fn>dlsym(lib, "SHA256_Update")
    sha_final = <sha_final_fn>dlsym(lib, "SHA256_Final")
    if sha_init == NULL or sha_update == NULL or sha_final == NULL:
        sha_final = NULL
        return False
    # known answers, or not used
    for parts, want in KNOWN_DIGESTS:
        h = Sha256.__new__(Sha256)
        for part in parts:
            h.update(part)
        if h.hexdigest() != want:
            sha_final = NULL
            return False
    return True


# chosen once, at import: OpenSSL's SHA256_* if they are there and right, else hashlib
use_sha = load_openssl()
OPENSSL = use_sha  # which one the walker's digests use


# --- a digest handed on before it is computed (Content.body_hash with deferred_digests) --------

include "../deferred.pxi"


cdef void fill_digest(PyObject *value, char *out) noexcept nogil:
    # a batch's digests, written where the batch is encoded (the Parquet thread): each waits for
    # its own pieces only, not for those the walker queues meanwhile (the first wait hashes
    # every piece queued before it, so the batch's other digests with it)
    (<Sha256>value).hex_into(out, False)


cdef amqpcap_deferred_text deferred_digest
deferred_digest.type = <PyTypeObject *>Sha256
deferred_digest.size = 64
deferred_digest.fill = fill_digest

# fastwriter's text columns take a Sha256 through this (writer.py hands it over): its hex
# digest written when the batch is made, not when the row is
DEFERRED_DIGEST = PyCapsule_New(<void *>&deferred_digest, "amqpcap.deferred_text", NULL)


# --- a whole body's digest for another extension (fast10: a 1.0 delivery read in place) -------

cdef object digest_bytes(const uint8_t *p, Py_ssize_t n):
    """A new Sha256 of the ``n`` bytes at ``p``, hashed as the walker hashes a body frame
    (``feed_queued``: from QUEUE_MIN bytes by the hashing thread, its bytes copied into the
    ring; smaller, at once)."""
    cdef Sha256 h = Sha256.__new__(Sha256)
    if n:
        h.feed_queued(p, n)
    return h


# ``object digest_bytes(const uint8_t *p, Py_ssize_t n)`` (a new reference; NULL and an
# exception set on failure) for fast10, which then makes no Python call or buffer per body; None
# where this module hashes with hashlib (not OPENSSL: no Sha256 can be made)
DIGEST_BYTES = None
if use_sha:
    DIGEST_BYTES = PyCapsule_New(<void *>digest_bytes, "amqpcap.amqp.fast09.digest_bytes", NULL)
