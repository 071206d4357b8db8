"""The readers of the 0-8 / 0-9 / 0-9-1 field types, written once: field values and tables,
short and long strings, and the generic reader of a field list (property lists and broker
dialects).  The per-method argument readers are generated from the XML (spec/readers_0_9.py,
by tools/gen_spec.py) and call these for the variable-size types; codec_0_9 decodes frames
with both.  Their typed twin, for the compiled parts, is fields_0_9.pxi."""

from __future__ import annotations

from struct import Struct
from struct import error as StructError

from amqpcap.amqp.stream import DecodeError

MAX_DEPTH = 64  # nesting limit for field tables and arrays

_U16 = Struct(">H")
_I16 = Struct(">h")
_U32 = Struct(">I")
_I32 = Struct(">i")
_U64 = Struct(">Q")
_I64 = Struct(">q")
_F32 = Struct(">f")
_F64 = Struct(">d")
_I8 = Struct(">b")


# --- field tables -----------------------------------------------------------------


def _text(b) -> str:
    return bytes(b).decode("utf-8", "replace")


# Field values of a fixed width, by type octet (compiled once, dpkt style): I int32,
# T timestamp (seconds), d double, f float, b int8, B uint8, U int16, u uint16, i uint32, L int64.
_FIXED_VALUES = {
    0x49: _I32,
    0x54: _U64,
    0x64: _F64,
    0x66: _F32,
    0x62: _I8,
    0x42: Struct(">B"),
    0x55: _I16,
    0x75: _U16,
    0x69: _U32,
    0x4C: _I64,
}


def _long(buf, off: int, end: int, what: str):
    """The bytes of a value with a 4-byte size, and the offset after it."""
    n = _U32.unpack_from(buf, off)[0]
    off += 4
    if off + n > end:
        raise DecodeError(f"{what} past end of table")
    return buf[off : off + n], off + n


def _decode_value(buf, off: int, end: int, depth: int, rabbit: bool):
    if off >= end:
        raise DecodeError("field value past end of table")
    t = buf[off]
    off += 1
    try:
        if t == 0x53:  # S long string
            raw, off = _long(buf, off, end, "long string")
            return _text(raw), off
        st = _FIXED_VALUES.get(t)
        if st is not None:
            return st.unpack_from(buf, off)[0], off + st.size
        if t == 0x74:  # t boolean
            return buf[off] != 0, off + 1
        if t == 0x46:  # F table
            return decode_table_at(buf, off, end, depth + 1, rabbit)
        if t == 0x41:  # A array
            return _decode_array(buf, off, end, depth + 1, rabbit)
        if t == 0x6C:  # l: int64 (RabbitMQ/Qpid) or uint64 (0-9-1 spec text)
            return (_I64 if rabbit else _U64).unpack_from(buf, off)[0], off + 8
        if t == 0x73:  # s: int16 (brokers) or short string (spec text)
            if rabbit:
                return _I16.unpack_from(buf, off)[0], off + 2
            n = buf[off]
            return _text(buf[off + 1 : off + 1 + n]), off + 1 + n
        if t == 0x44:  # D decimal: scale octet + int32
            scale = buf[off]
            v = _I32.unpack_from(buf, off + 1)[0]
            return {"$decimal": f"{v}e-{scale}" if scale else str(v)}, off + 5
        if t == 0x78:  # x byte array (RabbitMQ)
            raw, off = _long(buf, off, end, "byte array")
            return bytes(raw), off
        if t == 0x56:  # V void
            return None, off
    except (StructError, IndexError):
        raise DecodeError("field value truncated") from None
    raise DecodeError(f"unknown field type {chr(t)!r} (0x{t:02x})")


def sized_end(what: str, plural: str, buf, off: int, end: int, depth: int):
    """(start, end) of a field table's or array's entries, after its 4-byte size."""
    if depth > MAX_DEPTH:
        raise DecodeError(f"{plural} nested deeper than {MAX_DEPTH}")
    if off + 4 > end:
        raise DecodeError(f"{what} size past end")
    n = _U32.unpack_from(buf, off)[0]
    if off + 4 + n > end:
        raise DecodeError(f"{what} of {n} bytes past end of frame")
    return off + 4, off + 4 + n


def decode_table_at(buf, off: int, end: int, depth: int = 0, rabbit: bool = True):
    off, tend = sized_end("table", "field tables", buf, off, end, depth)
    out = {}
    while off < tend:
        kl = buf[off]
        key = _text(buf[off + 1 : off + 1 + kl])
        off += 1 + kl
        out[key], off = _decode_value(buf, off, tend, depth, rabbit)
    if off != tend:
        raise DecodeError("table entries overrun table size")
    return out, tend


def _decode_array(buf, off: int, end: int, depth: int, rabbit: bool):
    off, aend = sized_end("array", "arrays", buf, off, end, depth)
    out = []
    while off < aend:
        v, off = _decode_value(buf, off, aend, depth, rabbit)
        out.append(v)
    if off != aend:
        raise DecodeError("array entries overrun array size")
    return out, aend


def decode_table(data: bytes, rabbit: bool = True) -> dict:
    """Decode a field table (with its 4-byte size) from ``data``; raises DecodeError."""
    return decode_table_at(data, 0, len(data), 0, rabbit)[0]


# --- methods and properties ---------------------------------------------------------


def shortstr_value(buf, off: int, end: int, name: str):
    """A short string field: (text, end offset)."""
    if off >= end:
        raise DecodeError(f"{name}: short string past end")
    n = buf[off] + 1
    if off + n > end:
        raise DecodeError(f"{name}: short string past end")
    return buf[off + 1 : off + n].decode("utf-8", "replace"), off + n


# The generic reader of a field list, for what has no generated reader (property lists, broker
# dialects): the list as steps grouped as tools/gen_spec.py groups them for the generated ones
# (fixed-size fields run together are one struct; up to eight bits share an octet), so both
# read the same bytes the same way and fail with the same text.
_FIXED = {"octet": "B", "short": "H", "long": "I", "longlong": "Q", "timestamp": "Q"}
_VARIABLE = {
    "shortstr": lambda buf, off, end, name, rabbit: shortstr_value(buf, off, end, name),
    "table": lambda buf, off, end, name, rabbit: decode_table_at(buf, off, end, 0, rabbit),
    "longstr": lambda buf, off, end, name, rabbit: longstr_value(buf, off, end, name),
    "content": lambda buf, off, end, name, rabbit: longstr_value(buf, off, end, name),
}
_FIXED_RUN, _BITS, _ONE = 0, 1, 2


def field_plan(fields) -> tuple:
    """``fields`` ((name, type), ...) as the generic reader's steps."""
    steps, i, nf = [], 0, len(fields)
    while i < nf:
        name, t = fields[i]
        if t in _FIXED:
            j = i
            while j < nf and fields[j][1] in _FIXED:
                j += 1
            fmt = Struct(">" + "".join(_FIXED[f[1]] for f in fields[i:j]))
            names = tuple(f[0] for f in fields[i:j])
            steps.append((_FIXED_RUN, fmt, names, f"{name}: fixed fields past end"))
            i = j
        elif t == "bit":
            j = i
            while j < nf and fields[j][1] == "bit" and j - i < 8:
                j += 1
            steps.append((_BITS, None, tuple(f[0] for f in fields[i:j]), f"{name}: bit past end"))
            i = j
        elif t in _VARIABLE:
            steps.append((_ONE, _VARIABLE[t], name, None))
            i += 1
        else:
            raise DecodeError(f"{name}: unsupported field type {t}")
    return tuple(steps)


def read_plan(plan: tuple, buf, off: int, end: int, rabbit: bool, args: dict) -> int:
    """Read the fields of ``plan`` (``field_plan``) into ``args``; returns the end offset."""
    for kind, how, names, error in plan:
        if kind == _FIXED_RUN:
            if off + how.size > end:
                raise DecodeError(error)
            args.update(zip(names, how.unpack_from(buf, off)))
            off += how.size
        elif kind == _BITS:
            if off >= end:
                raise DecodeError(error)
            b = buf[off]
            off += 1
            for k, name in enumerate(names):
                args[name] = bool(b & (1 << k))
        else:
            args[names], off = how(buf, off, end, names, rabbit)
    return off


def decode_fields(fields, buf, off: int, end: int, rabbit: bool, args: dict) -> int:
    """Decode ``fields`` ((name, type), ...) into ``args``; returns the end offset."""
    return read_plan(field_plan(fields), buf, off, end, rabbit, args)


def longstr_value(buf, off, end, name):
    if off + 4 > end:
        raise DecodeError(f"{name}: long string past end")
    n = _U32.unpack_from(buf, off)[0]
    off += 4
    if off + n > end:
        raise DecodeError(f"{name}: long string of {n} bytes past end of frame")
    raw = bytes(buf[off : off + n])
    return (raw.decode("utf-8") if _is_text(raw) else raw), off + n


def _is_text(raw: bytes) -> bool:
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return s.isprintable() or not raw
