# JSON written into one growable buffer by the compiled writers: rows.to_json's text (the json
# module's C encoder, ensure_ascii=False, compact separators, bytes as {"$b64": ...} by
# rows.json_default).  Included by fastrows.pyx (JSON of decoded values and of 0-9-1 field
# tables) and fast10.pyx (json10.pxi: AMQP 1.0 sections' JSON from their bytes): the quoting,
# base64 and integer forms are written once, here.

cdef extern from *:
    """
    /* wide: a non-ASCII character was written (the text is then decoded as UTF-8; else it is
       copied into an ASCII str as it is) */
    typedef struct { char *p; Py_ssize_t n, cap; int wide; char small[1024]; } amqpcap_jbuf;

    static int amqpcap_jreserve(amqpcap_jbuf *b, Py_ssize_t more) {
        if (b->n + more <= b->cap) return 0;
        Py_ssize_t cap = b->cap * 2;
        while (cap < b->n + more) cap *= 2;
        char *p = (b->p == b->small) ? PyMem_Malloc(cap) : PyMem_Realloc(b->p, cap);
        if (p == NULL) { PyErr_NoMemory(); return -1; }
        if (b->p == b->small) memcpy(p, b->small, b->n);
        b->p = p; b->cap = cap;
        return 0;
    }
    static inline int amqpcap_jput(amqpcap_jbuf *b, const char *s, Py_ssize_t n) {
        if (b->n + n > b->cap && amqpcap_jreserve(b, n) < 0) return -1;
        memcpy(b->p + b->n, s, n); b->n += n;
        return 0;
    }
    /* one character: most of a text's punctuation */
    static inline int amqpcap_jputc(amqpcap_jbuf *b, char c) {
        if (b->n >= b->cap && amqpcap_jreserve(b, 1) < 0) return -1;
        b->p[b->n++] = c;
        return 0;
    }
    /* Whether a word of 8 bytes holds one the text must escape: below 0x20, '"' or '\\\\'
       (exact for the word as a whole: the bytes are then looked at one by one). */
    static inline int amqpcap_jword_escapes(uint64_t w) {
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t q = w ^ (ones * '"'), s = w ^ (ones * '\\\\');
        return ((((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((s - ones) & ~s)) & highs) != 0;
    }
    static int amqpcap_jquoted(amqpcap_jbuf *b, const char *u, Py_ssize_t n) {
        static const char hex[] = "0123456789abcdef";
        if (amqpcap_jreserve(b, n * 6 + 2) < 0) return -1;
        char *o = b->p + b->n;
        Py_ssize_t i = 0;
        *o++ = '"';
        for (;;) {
            /* eight characters at a time while none is to be escaped (most text) */
            for (; i + 8 <= n; i += 8) {
                uint64_t w;
                memcpy(&w, u + i, 8);
                if (amqpcap_jword_escapes(w)) break;
                memcpy(o, &w, 8);
                o += 8;
            }
            Py_ssize_t stop = i + 8 < n ? i + 8 : n;
            if (i >= n) break;
            for (; i < stop; i++) {
                unsigned char c = (unsigned char)u[i];
                if (c >= 0x20 && c != '"' && c != '\\\\') { *o++ = (char)c; continue; }
                *o++ = '\\\\';
                switch (c) {
                case '"': *o++ = '"'; break;
                case '\\\\': *o++ = '\\\\'; break;
                case '\\b': *o++ = 'b'; break;
                case '\\f': *o++ = 'f'; break;
                case '\\n': *o++ = 'n'; break;
                case '\\r': *o++ = 'r'; break;
                case '\\t': *o++ = 't'; break;
                default: *o++ = 'u'; *o++ = '0'; *o++ = '0'; *o++ = hex[c >> 4]; *o++ = hex[c & 15];
                }
            }
        }
        *o++ = '"';
        b->n = o - b->p;
        return 0;
    }
    /* 0: written; 1: not a value written here (the caller encodes the whole value otherwise);
       -1: error set. */
    static int amqpcap_jstr(amqpcap_jbuf *b, PyObject *s) {
        Py_ssize_t n;
        const char *u;
        if (PyUnicode_IS_COMPACT_ASCII(s)) {  /* most keys and values: the characters are the bytes */
            u = (const char *)PyUnicode_DATA(s);
            n = PyUnicode_GET_LENGTH(s);
        } else {
            u = PyUnicode_AsUTF8AndSize(s, &n);
            if (u == NULL) { PyErr_Clear(); return 1; }  /* a lone surrogate: the json module's job */
            b->wide = 1;
        }
        return amqpcap_jquoted(b, u, n);
    }
    /* The text written as a str. */
    static PyObject *amqpcap_jtext(amqpcap_jbuf *b) {
        if (b->wide) return PyUnicode_DecodeUTF8(b->p, b->n, NULL);
        PyObject *out = PyUnicode_New(b->n, 127);
        if (out != NULL) memcpy(PyUnicode_DATA(out), b->p, b->n);
        return out;
    }
    static int amqpcap_jb64(amqpcap_jbuf *b, const unsigned char *d, Py_ssize_t n) {
        static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        if (amqpcap_jreserve(b, (n + 2) / 3 * 4 + 12) < 0) return -1;
        char *o = b->p + b->n;
        memcpy(o, "{\\"$b64\\":\\"", 9); o += 9;
        Py_ssize_t i = 0;
        for (; i + 2 < n; i += 3) {
            unsigned v = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
            *o++ = al[v >> 18]; *o++ = al[(v >> 12) & 63]; *o++ = al[(v >> 6) & 63]; *o++ = al[v & 63];
        }
        if (n - i == 1) {
            unsigned v = d[i] << 16;
            *o++ = al[v >> 18]; *o++ = al[(v >> 12) & 63]; *o++ = '='; *o++ = '=';
        } else if (n - i == 2) {
            unsigned v = (d[i] << 16) | (d[i + 1] << 8);
            *o++ = al[v >> 18]; *o++ = al[(v >> 12) & 63]; *o++ = al[(v >> 6) & 63]; *o++ = '=';
        }
        *o++ = '"'; *o++ = '}';
        b->n = o - b->p;
        return 0;
    }
    /* str(v): digits written backwards into a small buffer (printf's machinery costs more
       than the rest of a short JSON text) */
    static int amqpcap_juint(amqpcap_jbuf *b, unsigned long long u, int negative) {
        char t[24];
        char *e = t + sizeof t, *p = e;
        do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
        if (negative) *--p = '-';
        return amqpcap_jput(b, p, e - p);
    }
    static int amqpcap_jint(amqpcap_jbuf *b, long long v) {
        return amqpcap_juint(b, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v, v < 0);
    }
    /* float.__repr__, and the json module's NaN / Infinity / -Infinity */
    static int amqpcap_jdouble(amqpcap_jbuf *b, double d) {
        if (d != d) return amqpcap_jput(b, "NaN", 3);
        if (d == Py_HUGE_VAL) return amqpcap_jput(b, "Infinity", 8);
        if (d == -Py_HUGE_VAL) return amqpcap_jput(b, "-Infinity", 9);
        char *t = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (t == NULL) return -1;
        int r = amqpcap_jput(b, t, strlen(t));
        PyMem_Free(t);
        return r;
    }
    static void amqpcap_jinit(amqpcap_jbuf *b) { b->p = b->small; b->n = 0; b->cap = sizeof b->small; b->wide = 0; }
    static void amqpcap_jfree(amqpcap_jbuf *b) { if (b->p != b->small) PyMem_Free(b->p); amqpcap_jinit(b); }
    """
    ctypedef struct amqpcap_jbuf:
        char *p
        Py_ssize_t n
        int wide
    void amqpcap_jinit(amqpcap_jbuf *b)
    void amqpcap_jfree(amqpcap_jbuf *b)
    int amqpcap_jput(amqpcap_jbuf *b, const char *s, Py_ssize_t n) except -1
    int amqpcap_jputc(amqpcap_jbuf *b, char c) except -1
    int amqpcap_jquoted(amqpcap_jbuf *b, const char *u, Py_ssize_t n) except -1
    int amqpcap_jint(amqpcap_jbuf *b, long long v) except -1
    int amqpcap_juint(amqpcap_jbuf *b, unsigned long long u, int negative) except -1
    int amqpcap_jdouble(amqpcap_jbuf *b, double d) except -1
    int amqpcap_jstr(amqpcap_jbuf *b, object s) except -1
    int amqpcap_jb64(amqpcap_jbuf *b, const unsigned char *d, Py_ssize_t n) except -1
    object amqpcap_jtext(amqpcap_jbuf *b)
