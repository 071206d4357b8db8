# AMQP 1.0 sections' JSON written from their bytes (included by fast10.pyx): the text
# rows_1_0.message_values writes of the decoded sections (``rows.connection_json`` of
# ``other_sections`` for the properties column, of the application-properties for the headers
# column), with no value decoded into Python for it; and the methods row's arguments of a
# performative the frame loop walks (``args_text``: ``rows.connection_json`` of its fields).
# The bytes are read by fast10's tables of
# the generated encodings (KIND / WIDTH, and JKIND below for the kinds the decoder hands to the
# reference's readers); a value is written as types_1_0 decodes it: a described value of a
# composite as its fields by name after its ``$type`` (null fields left out, more fields than
# the spec knows as ``$extra``), of another section type as ``$type`` and ``value``, of any other
# unsigned descriptor as ``$descriptor`` and ``value``; binary as ``{"$b64": ...}``, uuid as its
# text, timestamp as its ms, char as its character (U+FFFD if it is none).  The quoting, base64
# and number forms are records/jsonbuf.pxi's, the ones the decoded values' JSON is written by.
#
# Anything else is "not mine" (Fallback, and the caller writes the reference's text from the
# decoded sections): a decimal, a symbol or signed descriptor, an array of described elements, a
# map key that is not ASCII text, a key twice in a map, a section twice, a map of more than
# MAX_JSON_KEYS keys, a composite section or value encoded as an array, and every damage or
# nesting the reference's decoder rejects (a size past the end, a count the bytes cannot hold,
# deeper than MAX_DEPTH).

include "../records/jsonbuf.pxi"

from libc.string cimport memcmp, memset

# what a constructor octet fast10's decoder reads by the reference's readers is to this writer
cdef enum JsonKind:
    J_NOT_MINE = 0
    J_FLOAT
    J_DOUBLE
    J_CHAR
    J_UUID
    J_ARRAY

cdef enum:
    MAX_JSON_KEYS = 64  # a map's keys checked for repeats, pair by pair
    MAX_ZERO_WIDTH_ITEMS = 1 << 16  # types_1_0's: an array of zero-width items, by its count

cdef unsigned char JKIND[256]
# a zero-width constant's text: amqpcap_jconst[JCONST[code]] (JCONST 0: not one)
cdef unsigned char JCONST[256]
cdef extern from *:
    """
    static const char *const amqpcap_jconst[5] = {"", "null", "true", "false", "0"};
    static const Py_ssize_t amqpcap_jconst_len[5] = {0, 4, 4, 5, 1};
    """
    const char *amqpcap_jconst[5]
    const Py_ssize_t amqpcap_jconst_len[5]
# '"name":' of each section, '"$type":"name"' and ('"field":', ...) of each composite,
# '{"$type":"name","value":' of each other described type (codes below 256: the spec's)
cdef list JSECTION = [None] * 256
cdef list JTYPE = [None] * 256
cdef list JFIELDS = [None] * 256
cdef list JDESCRIBED = [None] * 256
cdef int APP_CODE = -1  # the application-properties section's
# the sections walk_sections decodes besides writing their JSON: those the messages row reads
# from the decoded sections (all until rows10's bind_rows says which)
cdef unsigned char SECTION_READ[256]
memset(SECTION_READ, 1, 256)
cdef bytes BODY_KEY = b',"body-section":'
cdef const char *HEX = "0123456789abcdef"


def _json_tables():
    global APP_CODE
    kinds = {("fixed", "float"): J_FLOAT, ("fixed", "double"): J_DOUBLE, ("fixed", "char"): J_CHAR}
    kinds.update({("fixed", "uuid"): J_UUID, ("array", "array"): J_ARRAY})
    for code, enc in SPEC.ENCODINGS.items():
        if KIND[code] == K_PY:
            JKIND[code] = kinds.get((enc.category, enc.type), J_NOT_MINE)
        if KIND[code] == K_CONST:
            v = VALUES[code]
            JCONST[code] = 1 if v is None else 2 if v is True else 3 if v is False else 4  # (4: uint0, ulong0)
    def key(name):
        if '"' in name or "\\" in name or not name.isascii():
            raise ValueError(f"a spec name the JSON writer does not quote: {name!r}")
        return f'"{name}"'.encode("ascii")
    for code, c in SPEC.COMPOSITES.items():
        if code < 256:
            JTYPE[code] = b'"$type":' + key(c.name)
            JFIELDS[code] = tuple(key(f.name) + b":" for f in c.fields)
    for code, d in SPEC.DESCRIBED.items():
        if code < 256:
            JDESCRIBED[code] = b'{"$type":' + key(d.name) + b',"value":'
    for code, name in SPEC.SECTIONS.items():
        JSECTION[code] = key(name) + b":"
        if name == "application-properties":
            APP_CODE = code
    if max(list(SPEC.COMPOSITES) + list(SPEC.DESCRIBED)) >= 256:
        raise ValueError("a composite's code beyond the JSON writer's tables")


_json_tables()


cdef inline int jbytes(amqpcap_jbuf *j, bytes s) except -1:
    return amqpcap_jput(j, PyBytes_AS_STRING(s), len(s))


cdef inline bint is_null(unsigned char code) noexcept:
    return JCONST[code] == 1


cdef int jtext(amqpcap_jbuf *j, const unsigned char *s, Py_ssize_t n) except -1:
    """A string or symbol: its bytes quoted as they are if ASCII, else the decoder's text (UTF-8,
    errors replaced)."""
    cdef Py_ssize_t i = 0
    cdef uint64_t w, high = 0
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        high |= w
        i += 8
    while i < n:
        high |= s[i]
        i += 1
    if high & 0x8080808080808080ULL:
        if amqpcap_jstr(j, PyUnicode_DecodeUTF8(<const char *>s, n, "replace")) != 0:
            raise FALLBACK
        return 0
    return amqpcap_jquoted(j, <const char *>s, n)


cdef int jvalue10(amqpcap_jbuf *j, const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int depth) except -1:
    """The JSON of the value at ``pos`` (constructor included), ``pos`` moved past it."""
    cdef Py_ssize_t p = pos[0]
    if p >= end:
        raise FALLBACK
    pos[0] = p + 1
    if b[p] == 0:
        return jdescribed(j, b, pos, end, depth)
    return jbody(j, b[p], b, pos, end, depth)


cdef int jbody(amqpcap_jbuf *j, unsigned char code, const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int depth) except -1:
    """The JSON of a value of constructor ``code`` whose bytes begin at ``pos``."""
    cdef Py_ssize_t p = pos[0], n, s
    cdef unsigned char k = KIND[code], w = WIDTH[code]
    cdef uint32_t u32
    cdef uint64_t u64
    cdef float f
    cdef double d
    if k == K_CONST:
        return amqpcap_jput(j, amqpcap_jconst[JCONST[code]], amqpcap_jconst_len[JCONST[code]])
    if k == K_LIST0:
        return amqpcap_jput(j, "[]", 2)
    if k >= K_U8 and k <= K_S64:
        if p + w > end:
            raise FALLBACK
        pos[0] = p + w
        return jnumber(j, k, b + p)
    if k == K_BINARY or k == K_TEXT:
        if p + w > end:
            raise FALLBACK
        n = b[p] if w == 1 else be32(b + p)
        s = p + w
        if s + n > end:
            raise FALLBACK
        pos[0] = s + n
        if k == K_BINARY:
            return amqpcap_jb64(j, b + s, n)
        return jtext(j, b + s, n)
    if k == K_LIST or k == K_MAP:
        return jcompound(j, b, pos, end, depth, w, k == K_MAP)
    k = JKIND[code]
    if k == J_ARRAY:
        return jarray(j, b, pos, end, depth, w)
    if k == J_NOT_MINE or p + w > end:
        raise FALLBACK
    pos[0] = p + w
    if k == J_FLOAT:
        u32 = be32(b + p)
        memcpy(&f, &u32, 4)
        return amqpcap_jdouble(j, <double>f)
    if k == J_DOUBLE:
        u64 = be64(b + p)
        memcpy(&d, &u64, 8)
        return amqpcap_jdouble(j, d)
    if k == J_CHAR:
        return jchar(j, be32(b + p))
    return juuid(j, b + p)


cdef int jchar(amqpcap_jbuf *j, uint32_t cp) except -1:
    """types_1_0._char: the character of a code point, U+FFFD if it is none."""
    cdef char c
    if cp < 0x80:
        c = <char>cp
        return amqpcap_jquoted(j, &c, 1)
    if cp >= 0x110000 or 0xD800 <= cp < 0xE000:
        cp = 0xFFFD
    return amqpcap_jstr(j, chr(cp))


cdef int juuid(amqpcap_jbuf *j, const unsigned char *u) except -1:
    """str(uuid.UUID(bytes=...)): 8-4-4-4-12 lower-case hex digits."""
    cdef char t[38]
    cdef int i, o = 1
    t[0] = c'"'
    for i in range(16):
        if i == 4 or i == 6 or i == 8 or i == 10:
            t[o] = c'-'
            o += 1
        t[o] = HEX[u[i] >> 4]
        t[o + 1] = HEX[u[i] & 15]
        o += 2
    t[o] = c'"'
    return amqpcap_jput(j, t, 38)


cdef int jcompound(
    amqpcap_jbuf *j, const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int depth, int w, bint is_map
) except -1:
    """A list, or a map of ASCII text keys each once."""
    cdef Py_ssize_t count, e, i, q, kn
    cdef Py_ssize_t ks[MAX_JSON_KEYS]
    cdef Py_ssize_t kl[MAX_JSON_KEYS]
    cdef unsigned char c
    if depth >= MAX_DEPTH:
        raise FALLBACK
    pos[0] = sized(b, pos[0], end, w, &count, &e)
    if not is_map:
        amqpcap_jputc(j, c'[')
        for i in range(count):
            if i:
                amqpcap_jputc(j, c',')
            jvalue10(j, b, pos, e, depth + 1)
        if pos[0] != e:
            raise FALLBACK
        return amqpcap_jputc(j, c']')
    if count % 2 or count > 2 * MAX_JSON_KEYS:
        raise FALLBACK
    amqpcap_jputc(j, c'{')
    for i in range(0, count, 2):
        q = pos[0]
        c = b[q] if q < e else 0
        if KIND[c] != K_TEXT:
            raise FALLBACK
        if i:
            amqpcap_jputc(j, c',')
        jvalue10(j, b, pos, e, depth + 1)
        # the key's bytes: ASCII (its text), not one seen before in this map
        kl[i // 2] = kn = b[q + 1] if WIDTH[c] == 1 else be32(b + q + 1)
        ks[i // 2] = pos[0] - kn
        for q in range(ks[i // 2], pos[0]):
            if b[q] & 0x80:
                raise FALLBACK
        for q in range(i // 2):
            if kl[q] == kn and memcmp(b + ks[q], b + pos[0] - kn, kn) == 0:
                raise FALLBACK
        amqpcap_jputc(j, c':')
        jvalue10(j, b, pos, e, depth + 1)
    if pos[0] != e:
        raise FALLBACK
    return amqpcap_jputc(j, c'}')


cdef int jarray(amqpcap_jbuf *j, const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int depth, int w) except -1:
    """An array of elements that are not described."""
    cdef Py_ssize_t p = pos[0], size, count, e, i
    cdef unsigned char code
    if depth >= MAX_DEPTH or p + 2 * w > end:
        raise FALLBACK
    if w == 1:
        size, count = b[p], b[p + 1]
    else:
        size, count = be32(b + p), be32(b + p + 4)
    e = p + w + size
    p += 2 * w
    if size < w or e > end or p >= e or b[p] == 0:
        raise FALLBACK
    code = b[p]
    if KIND[code] == K_PY and JKIND[code] == J_NOT_MINE:
        raise FALLBACK
    if (KIND[code] == K_CONST or KIND[code] == K_LIST0) and count > MAX_ZERO_WIDTH_ITEMS:
        raise FALLBACK
    if KIND[code] != K_CONST and KIND[code] != K_LIST0 and count > e - p:  # each at least 1 byte
        raise FALLBACK
    pos[0] = p + 1
    amqpcap_jputc(j, c'[')
    for i in range(count):
        if i:
            amqpcap_jputc(j, c',')
        jbody(j, code, b, pos, e, depth + 1)
    if pos[0] != e:
        raise FALLBACK
    return amqpcap_jputc(j, c']')


cdef int jdescribed(amqpcap_jbuf *j, const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int depth) except -1:
    """A described value (``pos`` after its 0x00) of an unsigned descriptor."""
    cdef Py_ssize_t p = pos[0]
    cdef unsigned char c, k
    cdef uint64_t code
    if depth >= MAX_DEPTH or p >= end:
        raise FALLBACK
    c = b[p]
    k = KIND[c]
    if JCONST[c] == 4:  # (uint0, ulong0)
        code = 0
        p += 1
    elif (k == K_U8 or k == K_U16 or k == K_U32 or k == K_U64) and p + 1 + WIDTH[c] <= end:
        p += 1
        code = b[p] if k == K_U8 else ((<uint64_t>b[p] << 8) | b[p + 1]) if k == K_U16 else be32(b + p) if k == K_U32 else be64(b + p)
        p += WIDTH[c]
    else:
        raise FALLBACK
    pos[0] = p
    if p >= end:
        raise FALLBACK
    c = b[p]
    if code < 256 and JFIELDS[code] is not None and (KIND[c] == K_LIST or KIND[c] == K_LIST0):
        amqpcap_jputc(j, c'{')
        jbytes(j, <bytes>JTYPE[code])
        jfields(j, <tuple>JFIELDS[code], b, pos, end, depth + 1, False)
        return amqpcap_jputc(j, c'}')
    if code < 256 and JFIELDS[code] is not None and JKIND[c] == J_ARRAY:
        raise FALLBACK  # (an array decodes to a list: its fields)
    if code < 256 and JDESCRIBED[code] is not None:
        jbytes(j, <bytes>JDESCRIBED[code])
    else:
        amqpcap_jput(j, '{"$descriptor":', 15)
        amqpcap_juint(j, code, 0)
        amqpcap_jput(j, ',"value":', 9)
    jvalue10(j, b, pos, end, depth + 1)
    return amqpcap_jputc(j, c'}')


cdef inline int jnumber(amqpcap_jbuf *j, unsigned char k, const unsigned char *v) except -1:
    """An integer or boolean of kind ``k`` (K_U8 to K_S64) whose bytes are at ``v``."""
    if k == K_U8:
        return amqpcap_juint(j, v[0], 0)
    if k == K_S8:
        return amqpcap_jint(j, <int8_t>v[0])
    if k == K_BOOL:
        return amqpcap_jput(j, "true", 4) if v[0] != 0 else amqpcap_jput(j, "false", 5)
    if k == K_U16:
        return amqpcap_juint(j, (<uint16_t>v[0] << 8) | v[1], 0)
    if k == K_S16:
        return amqpcap_jint(j, <int16_t>((<uint16_t>v[0] << 8) | v[1]))
    if k == K_U32:
        return amqpcap_juint(j, be32(v), 0)
    if k == K_S32:
        return amqpcap_jint(j, <int32_t>be32(v))
    if k == K_U64:
        return amqpcap_juint(j, be64(v), 0)
    return amqpcap_jint(j, <int64_t>be64(v))


cdef inline bint jsimple(amqpcap_jbuf *j, const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end) except -1:
    """The value at ``pos`` written, ``pos`` moved past it, if it is a constant (null, true,
    false, 0), a boolean or an integer that fits before ``end`` (a composite's fields are
    mostly these: written here, not by jvalue10's and jbody's calls); else False, nothing
    written."""
    cdef Py_ssize_t p = pos[0]
    cdef unsigned char c, k
    if p >= end:
        return False
    c = b[p]
    k = KIND[c]
    if k == K_CONST:
        pos[0] = p + 1
        amqpcap_jput(j, amqpcap_jconst[JCONST[c]], amqpcap_jconst_len[JCONST[c]])
        return True
    if k < K_U8 or k > K_S64 or p + 1 + WIDTH[c] > end:
        return False
    pos[0] = p + 1 + WIDTH[c]
    jnumber(j, k, b + p + 1)
    return True


cdef int jfields(
    amqpcap_jbuf *j, tuple fields, const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int depth,
    bint first,
) except -1:
    """A composite's list (at ``pos``, its constructor a list's) as its fields by name, into an
    object the caller opened (``first``: with no member yet): types_1_0.fields_of."""
    cdef Py_ssize_t count, e, i, nf = len(fields)
    cdef unsigned char c = b[pos[0]]
    pos[0] += 1
    if KIND[c] == K_LIST0:
        return 0
    if depth >= MAX_DEPTH:
        raise FALLBACK
    pos[0] = sized(b, pos[0], end, WIDTH[c], &count, &e)
    for i in range(count):
        if i == nf:
            amqpcap_jput(j, ',"$extra":[' if not first else '"$extra":[', 11 if not first else 10)
        elif i < nf and (pos[0] >= e or is_null(b[pos[0]])):
            if pos[0] >= e:
                raise FALLBACK
            pos[0] += 1
            continue
        if i < nf:
            if not first:
                amqpcap_jputc(j, c',')
            jbytes(j, <bytes>fields[i])
        elif i > nf:
            amqpcap_jputc(j, c',')
        first = False
        if not jsimple(j, b, pos, e):
            jvalue10(j, b, pos, e, depth + 1)
    if count > nf:
        amqpcap_jputc(j, c']')
    if pos[0] != e:
        raise FALLBACK
    return 0


cdef struct SectionJson:
    # a message's properties and headers texts, written as walk_sections reads its sections
    amqpcap_jbuf props  # every section but the application-properties, then the body's kind
    amqpcap_jbuf app  # the application-properties
    bint has_app  # (absent, or null: no headers text)
    unsigned char seen[256]  # the sections written (one twice: not mine)


cdef int json_begin(SectionJson *js) except -1:
    amqpcap_jinit(&js.props)
    amqpcap_jinit(&js.app)
    js.has_app = False
    memset(js.seen, 0, 256)
    return amqpcap_jputc(&js.props, c'{')


cdef void json_free(SectionJson *js) noexcept:
    amqpcap_jfree(&js.props)
    amqpcap_jfree(&js.app)


cdef Py_ssize_t json_section(
    SectionJson *js, unsigned char code, const unsigned char *b, Py_ssize_t p, Py_ssize_t n
) except -1:
    """The section ``code`` (not a body's: its value at ``p``) written into its text; the offset
    after it."""
    cdef Py_ssize_t pos = p
    if js.seen[code]:
        raise FALLBACK
    js.seen[code] = 1
    if code == APP_CODE:
        if p < n and is_null(b[p]):
            return p + 1
        jsection(&js.app, code, b, &pos, n)
        js.has_app = True
        return pos
    if js.props.n > 1:
        amqpcap_jputc(&js.props, c',')
    jbytes(&js.props, <bytes>JSECTION[code])
    jsection(&js.props, code, b, &pos, n)
    return pos


cdef tuple json_end(SectionJson *js, kind):
    """(the properties column's text, the headers column's text or None) of the sections
    written, the body's ``kind`` last (rows_1_0.other_sections)."""
    if kind is not None:
        jbytes(&js.props, BODY_KEY[1:] if js.props.n == 1 else BODY_KEY)
        amqpcap_jstr(&js.props, kind)
    amqpcap_jputc(&js.props, c'}')
    return amqpcap_jtext(&js.props), amqpcap_jtext(&js.app) if js.has_app else None


cdef int jsection(amqpcap_jbuf *j, unsigned char code, const unsigned char *b, Py_ssize_t *pos, Py_ssize_t n) except -1:
    """A section's value (at ``pos``, after its descriptor): a composite's list as its fields by
    name (no ``$type``: walk_sections' dict), any other value as it is."""
    cdef Py_ssize_t p = pos[0]
    if p < n and JFIELDS[code] is not None and (KIND[b[p]] == K_LIST or KIND[b[p]] == K_LIST0):
        amqpcap_jputc(j, c'{')
        jfields(j, <tuple>JFIELDS[code], b, pos, n, 1, True)
        return amqpcap_jputc(j, c'}')
    if p < n and JFIELDS[code] is not None and JKIND[b[p]] == J_ARRAY:
        raise FALLBACK
    return jvalue10(j, b, pos, n, 1)


def section_texts(buf):
    """The properties and headers texts of a message's bytes as the walker writes them (its
    sections read by walk_sections), or None: not written here (for the tests)."""
    cdef Py_buffer view
    cdef SectionJson js
    json_begin(&js)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        kind = walk_sections(<const unsigned char *>view.buf, view.len, {}, [], buf, &js)
        return json_end(&js, kind)
    except (Fallback, DecodeError):
        return None
    finally:
        PyBuffer_Release(&view)
        json_free(&js)


cdef object args_text(const unsigned char *b, Py_ssize_t p, Py_ssize_t end, int code):
    """The methods row's arguments column of the performative ``code`` whose list is at ``p``
    (after its descriptor) and ends at ``end`` (walk_performative read it so): the text
    ``rows.connection_json`` writes of the fields walk_performative decodes (those present, in
    the spec's order; the fields past the spec's are not in them), or None: not written here
    (a field this writer does not write as the reference, or more fields than the spec's)."""
    cdef amqpcap_jbuf j
    cdef Py_ssize_t pos = p, count, e
    cdef unsigned char c = b[p]
    fields = JFIELDS[code]
    if fields is None or (KIND[c] != K_LIST and KIND[c] != K_LIST0):
        return None
    amqpcap_jinit(&j)
    try:
        if KIND[c] == K_LIST:
            sized(b, p + 1, end, WIDTH[c], &count, &e)
            if count > len(<tuple>fields):
                return None
        amqpcap_jputc(&j, c'{')
        jfields(&j, <tuple>fields, b, &pos, end, 1, True)
        if pos != end:
            return None
        amqpcap_jputc(&j, c'}')
        return amqpcap_jtext(&j)
    except (Fallback, DecodeError):
        return None
    finally:
        amqpcap_jfree(&j)


def performative_text(buf, Py_ssize_t body, Py_ssize_t end):
    """The arguments column of the performative at ``body`` (its descriptor) as the frame loop
    writes it from the bytes, or None: not written here (for the tests)."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if body < 0 or end > view.len or body + 3 > end:
            return None
        try:
            code, _args, e = walk_performative(<const unsigned char *>view.buf, body, end, buf)
        except (Fallback, DecodeError):
            return None
        return args_text(<const unsigned char *>view.buf, body + 3, e, code)
    finally:
        PyBuffer_Release(&view)
