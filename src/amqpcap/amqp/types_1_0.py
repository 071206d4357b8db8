"""The AMQP 1.0 type system (OASIS AMQP 1.0 part 1): one table-driven decoder of encoded values.

Every constructor octet of ``spec.v1_0.ENCODINGS`` gets one reader, made once at import from
its category and width (fixed, variable, compound, array), so no code is written per type or
per performative: ``decode(buf, off, end, depth)`` reads any value.

Values: null -> None; boolean -> bool; the integer types -> int (timestamp: int ms since the
epoch); float / double -> float; decimal32/64/128 -> ``{"$decimal": text}`` (IEEE 754 binary
integer decimal, as the 0-9 decimals are given); char -> str; uuid -> canonical text; binary ->
bytes; string and symbol -> str (UTF-8, errors replaced); list and array -> list; map -> dict (a
key that cannot be a dict key or a JSON object's key, a list, map or binary, is kept as its
Python text, e.g. ``"b'k'"``). A described value whose
descriptor is a composite of the spec (a performative, a section, a delivery state, ...) -> dict
of its fields by name (those present, null fields left out) with ``"$type"`` naming it; any
other described value -> ``{"$descriptor": descriptor, "value": value}`` (unknown descriptors
are kept, not fatal).

Hostile input is bounded: nesting deeper than ``MAX_DEPTH`` and a count claiming more items
than the bytes can hold raise ``DecodeError`` before anything of that size is made.
"""

from __future__ import annotations

from struct import Struct

from amqpcap.amqp.spec import v1_0 as SPEC
from amqpcap.amqp.stream import DecodeError

MAX_DEPTH = 32  # nesting of described values, lists, maps and arrays
# An array of a zero-width element (null, true, false, uint0, ulong0, list0) is not bounded
# by its size: its count is.
MAX_ZERO_WIDTH_ITEMS = 1 << 16

_U32 = Struct(">I")


def _short(what: str, off: int, need: int, end: int) -> DecodeError:
    return DecodeError(f"{what} needs {need} bytes at {off}, {max(end - off, 0)} left")


def _bid(raw: int, bits: int, ebits: int, bias: int):
    """An IEEE 754-2008 decimal in the binary integer decimal encoding, as ``{"$decimal": text}``."""
    sign = raw >> (bits - 1)
    if (raw >> (bits - 3)) & 3 == 3:
        combo = (raw >> (bits - 6)) & 0x1F
        if combo == 0x1E:
            return {"$decimal": "-Infinity" if sign else "Infinity"}
        if combo == 0x1F:
            return {"$decimal": "NaN"}
        exp = (raw >> (bits - 3 - ebits)) & ((1 << ebits) - 1)
        coeff = (0b100 << (bits - 3 - ebits)) | (raw & ((1 << (bits - 3 - ebits)) - 1))
    else:
        exp = (raw >> (bits - 1 - ebits)) & ((1 << ebits) - 1)
        coeff = raw & ((1 << (bits - 1 - ebits)) - 1)
    from decimal import Decimal  # here: a dissect defers the module (cli.LAZY) until a decimal is read

    return {"$decimal": str(Decimal((sign, tuple(int(c) for c in str(coeff)), exp - bias)))}


def _uuid_text(raw: bytes) -> str:
    """A uuid's canonical text."""
    import uuid  # here: a 1.0 decode without a uuid value goes without it and platform (show)

    return str(uuid.UUID(bytes=raw))


def _char(cp: int) -> str:
    return chr(cp) if cp < 0x110000 and not 0xD800 <= cp < 0xE000 else "\ufffd"


# fixed-width primitives: type name -> (struct format, converter or None)
_FIXED = {
    "ubyte": ("B", None),
    "ushort": ("H", None),
    "uint": ("I", None),
    "ulong": ("Q", None),
    "byte": ("b", None),
    "short": ("h", None),
    "int": ("i", None),
    "long": ("q", None),
    "float": ("f", None),
    "double": ("d", None),
    "char": ("I", _char),
    "timestamp": ("q", None),
    "decimal32": ("I", lambda v: _bid(v, 32, 8, 101)),
    "decimal64": ("Q", lambda v: _bid(v, 64, 10, 398)),
}
# the small forms of signed types are signed
_SMALL_SIGNED = {"smallint": "b", "smalllong": "b"}
_ZERO = {"null": None, "true": True, "false": False, "uint0": 0, "ulong0": 0, "list0": []}


def _text(raw) -> str:
    return str(raw, "utf-8", "replace")


# a reader reads the value after its constructor: fn(buf, off, end, depth) -> (value, new off)


def _zero_reader(value):
    if isinstance(value, list):
        return lambda buf, off, end, depth: ([], off)
    return lambda buf, off, end, depth: (value, off)


def _fixed_reader(fmt: str, conv, name: str):
    st = Struct(">" + fmt)
    w = st.size
    unpack = st.unpack_from

    def read(buf, off, end, depth):
        e = off + w
        if e > end:
            raise _short(name, off, w, end)
        v = unpack(buf, off)[0]
        return (v if conv is None else conv(v)), e

    return read


def _raw_reader(width: int, conv, name: str):
    def read(buf, off, end, depth):
        e = off + width
        if e > end:
            raise _short(name, off, width, end)
        return conv(bytes(buf[off:e])), e

    return read


def _variable_reader(width: int, conv, name: str):
    def read(buf, off, end, depth):
        s = off + width
        if s > end:
            raise _short(name + " size", off, width, end)
        n = buf[off] if width == 1 else _U32.unpack_from(buf, off)[0]
        e = s + n
        if e > end:
            raise _short(name, s, n, end)
        return conv(buf[s:e]), e

    return read


def _sized(buf, off: int, end: int, width: int, name: str):
    """(count, start of the items, end of the value) of a compound or array value."""
    need = 2 * width
    if off + need > end:
        raise _short(name + " size and count", off, need, end)
    if width == 1:
        size, count = buf[off], buf[off + 1]
    else:
        size, count = _U32.unpack_from(buf, off)[0], _U32.unpack_from(buf, off + 4)[0]
    e = off + width + size
    if size < width:
        raise DecodeError(f"{name} at {off}: size {size} smaller than its count field")
    if e > end:
        raise _short(name, off + width, size, end)
    return count, off + need, e


def _compound_reader(width: int, is_map: bool, name: str):
    def read(buf, off, end, depth):
        if depth >= MAX_DEPTH:
            raise DecodeError(f"{name} at {off}: nesting deeper than {MAX_DEPTH}")
        if width == 1 and off + 2 <= end and 1 <= buf[off] <= end - off - 1:  # (_sized's common case)
            count, p, e = buf[off + 1], off + 2, off + 1 + buf[off]
        else:
            count, p, e = _sized(buf, off, end, width, name)
        if count > e - p:  # every item has a constructor octet at least
            raise DecodeError(f"{name} at {off}: count {count} claims more items than its {e - p} bytes")
        if is_map and count % 2:
            raise DecodeError(f"{name} at {off}: odd count {count} (keys without values)")
        items = []
        append = items.append
        readers = READERS
        constant, octet, short = CONSTANT, OCTET, SHORT
        for _ in range(count):
            if p >= e:
                raise _short("constructor", p, 1, e)
            code = buf[p]
            # the commonest items read here, not by a call: a value in its constructor (null,
            # true, false, zeros) and a one-octet unsigned (the small uint, ulong and ubyte)
            k = constant[code]
            if k:
                append(VALUES[code] if k == 1 else [])  # (2: list0, a list of its own)
                p += 1
            elif octet[code]:
                if p + 2 > e:
                    raise _short(SPEC.ENCODINGS[code].name, p + 1, 1, e)
                append(buf[p + 1])
                p += 2
            elif short[code]:
                if p + 2 > e:
                    raise _short(SPEC.ENCODINGS[code].name + " size", p + 1, 1, e)
                s, q = p + 2, p + 2 + buf[p + 1]
                if q > e:
                    raise _short(SPEC.ENCODINGS[code].name, s, q - s, e)
                append(str(buf[s:q], "utf-8", "replace") if short[code] == 1 else bytes(buf[s:q]))
                p = q
            elif code:  # (decode() inlined: most items are not described)
                v, p = readers[code](buf, p + 1, e, depth + 1)
                append(v)
            else:
                v, p = decode(buf, p, e, depth + 1)
                append(v)
        if p != e:
            raise DecodeError(f"{name} at {off}: {e - p} bytes after its {count} items")
        if not is_map:
            return items, e
        return {map_key(items[i]): items[i + 1] for i in range(0, count, 2)}, e

    return read


def map_key(k):
    """A map's key as a dict holds it: a list or map key (unhashable) or a binary one (no JSON
    object's key: the rows' JSON could not be written) as its repr."""
    return k if not isinstance(k, (list, dict, bytes)) else repr(k)


def _array_reader(width: int, name: str):
    def read(buf, off, end, depth):
        if depth >= MAX_DEPTH:
            raise DecodeError(f"{name} at {off}: nesting deeper than {MAX_DEPTH}")
        count, p, e = _sized(buf, off, end, width, name)
        # the element constructor (described: descriptor then primitive constructor)
        descriptor = None
        if p >= e:
            raise _short(name + " element constructor", p, 1, e)
        if buf[p] == 0:
            descriptor, p = decode(buf, p + 1, e, depth + 1)
            if p >= e:
                raise _short(name + " element constructor", p, 1, e)
        code = buf[p]
        p += 1
        enc = SPEC.ENCODINGS.get(code)
        if enc is None:
            raise DecodeError(f"{name} at {off}: unknown element constructor 0x{code:02x}")
        least = enc.width if enc.category == "fixed" else enc.width * (2 if enc.category != "variable" else 1)
        if least == 0:
            if count > MAX_ZERO_WIDTH_ITEMS:
                raise DecodeError(f"{name} at {off}: {count} zero-width items")
        elif count * least > e - p:
            raise DecodeError(f"{name} at {off}: count {count} claims more items than its {e - p} bytes")
        reader = READERS[code]
        items = []
        append = items.append
        for _ in range(count):
            v, p = reader(buf, p, e, depth + 1)
            append(v if descriptor is None else described(descriptor, v))
        if p != e:
            raise DecodeError(f"{name} at {off}: {e - p} bytes after its {count} items")
        return items, e

    return read


def _reader(code: int, enc):
    t, name, category, width = enc
    if category == "fixed":
        if width == 0:
            return _zero_reader(_ZERO[name])
        if name in _SMALL_SIGNED:
            return _fixed_reader(_SMALL_SIGNED[name], None, name)
        if t == "boolean":
            return _fixed_reader("B", lambda v: v != 0, name)
        if t in ("ulong", "uint") and width == 1:
            return _fixed_reader("B", None, name)
        if t == "uuid":
            return _raw_reader(16, _uuid_text, name)
        if t == "decimal128":
            return _raw_reader(16, lambda b: _bid(int.from_bytes(b, "big"), 128, 14, 6176), name)
        fmt, conv = _FIXED[t]
        return _fixed_reader(fmt, conv, name)
    if category == "variable":
        return _variable_reader(width, bytes if t == "binary" else _text, name)
    if category == "compound":
        return _compound_reader(width, t == "map", name)
    return _array_reader(width, name)


def _bad_constructor(code: int):
    def read(buf, off, end, depth):
        raise DecodeError(f"unknown constructor 0x{code:02x} at {off - 1}")

    return read


READERS = [_bad_constructor(c) for c in range(256)]
for _code, _enc in SPEC.ENCODINGS.items():
    READERS[_code] = _reader(_code, _enc)
del _code, _enc

# per constructor octet, what a list's loop reads without a call: CONSTANT, a value that is its
# constructor (a zero-width encoding: 1, VALUES holds it; 2, list0); OCTET, one octet that is
# its unsigned value (the small uint, ulong and ubyte); SHORT, below
_WIDTH0 = {c: e.name for c, e in SPEC.ENCODINGS.items() if e.category == "fixed" and e.width == 0}
CONSTANT = bytes(0 if c not in _WIDTH0 else 2 if _WIDTH0[c] == "list0" else 1 for c in range(256))
VALUES = [_ZERO.get(_WIDTH0.get(c)) if CONSTANT[c] == 1 else None for c in range(256)]
_OCTETS = {
    c
    for c, e in SPEC.ENCODINGS.items()
    if e.category == "fixed" and e.width == 1 and e.type in ("ubyte", "uint", "ulong")
}
OCTET = bytes(1 if c in _OCTETS else 0 for c in range(256))
# SHORT: a one-octet size then that many octets of text (1: string, symbol) or binary (2)
_SHORTS = {c: e.type for c, e in SPEC.ENCODINGS.items() if e.category == "variable" and e.width == 1}
SHORT = bytes(0 if c not in _SHORTS else 2 if _SHORTS[c] == "binary" else 1 for c in range(256))


def decode(buf, off: int, end: int, depth: int = 0):
    """The value encoded at ``buf[off:end]`` (constructor included): (value, offset after it)."""
    if off >= end:
        raise _short("constructor", off, 1, end)
    code = buf[off]
    if code == 0:  # a described value: descriptor, then the value
        if depth >= MAX_DEPTH:
            raise DecodeError(f"described value at {off}: nesting deeper than {MAX_DEPTH}")
        descriptor, p = decode(buf, off + 1, end, depth + 1)
        value, p = decode(buf, p, end, depth + 1)
        return described(descriptor, value), p
    return READERS[code](buf, off + 1, end, depth)


def descriptor_code(descriptor) -> int | None:
    """The numeric code of a descriptor (a ulong, or a symbol the spec names), else None."""
    if type(descriptor) is int:
        return descriptor
    if type(descriptor) is str:
        return SPEC.SYMBOLS.get(descriptor)
    return None


# composite code -> its field names, in order
_FIELDS = {code: tuple(f.name for f in c.fields) for code, c in SPEC.COMPOSITES.items()}


def fields_of(fields: tuple, value: list, out: dict | None = None) -> dict:
    """A composite's list of values as a dict of its fields by name (``fields``: the names in
    order; null fields left out, values beyond them kept as ``$extra``), added to ``out``."""
    if out is None:
        out = {}
    for name, v in zip(fields, value):
        if v is not None:
            out[name] = v
    if len(value) > len(fields):  # more fields than the spec knows: kept
        out["$extra"] = value[len(fields) :]
    return out


def described(descriptor, value):
    """A described value as the module docstring says."""
    code = descriptor_code(descriptor)
    fields = _FIELDS.get(code)
    if fields is not None and type(value) is list:
        return fields_of(fields, value, {"$type": SPEC.COMPOSITES[code].name})
    if code in SPEC.DESCRIBED:
        return {"$type": SPEC.DESCRIBED[code].name, "value": value}
    return {"$descriptor": descriptor, "value": value}


def described_head(buf, off: int, end: int):
    """(descriptor code or None, offset of the described value) of the described value at
    ``off``: what a section or performative is, without decoding it."""
    if off + 3 <= end and buf[off] == 0 and buf[off + 1] == 0x53:  # the common smallulong code
        return buf[off + 2], off + 3
    if off >= end or buf[off] != 0:
        raise DecodeError(f"expected a described value at {off}")
    descriptor, p = decode(buf, off + 1, end, 1)
    return descriptor_code(descriptor), p
