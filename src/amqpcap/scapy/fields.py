"""scapy fields for AMQP wire types (0-8 / 0-9 / 0-9-1 domains, 0-10 types).

Decoding reuses the codecs' public decoders (``fields_0_9.decode_table``,
``codec_0_10.TYPE_DECODERS`` / ``decode_value``) so a value reads the same in
the layer as in the tables; encoding (building packets) is here, since the
pipeline never writes AMQP.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import struct
import uuid as _uuid

from scapy.fields import ByteField, Field, IntField, LongField, ShortField

from amqpcap.amqp import codec_0_10 as _c10
from amqpcap.amqp import fields_0_9 as _f09
from amqpcap.amqp.spec import v0_10 as _S10

_U8, _U16, _U32 = struct.Struct(">B"), struct.Struct(">H"), struct.Struct(">I")


class DecodeError(ValueError):
    """A value runs past the end of its frame or is not valid for its type."""


def _as_bytes(x) -> bytes:
    if x is None:
        return b""
    if isinstance(x, str):
        return x.encode("utf-8")
    return bytes(x)


def _text_repr(b) -> str:
    try:
        s = bytes(b).decode("utf-8")
    except UnicodeDecodeError:
        return repr(bytes(b))
    return repr(s) if s.isprintable() else repr(bytes(b))


class SizedBytesField(Field):
    """A byte string after its length (shortstr: 1 octet, longstr: 4; 0-10 vbin/str: 1, 2 or 4)."""

    __slots__ = ("size_struct",)

    def __init__(self, name, default=b"", width: int = 1):
        self.size_struct = {1: _U8, 2: _U16, 4: _U32}[width]
        Field.__init__(self, name, default)

    def getfield(self, pkt, s):
        st = self.size_struct
        if len(s) < st.size:
            raise DecodeError(f"{self.name}: length past end")
        n = st.unpack_from(s)[0]
        end = st.size + n
        if len(s) < end:
            raise DecodeError(f"{self.name}: {n} bytes past end")
        return s[end:], bytes(s[st.size : end])

    def addfield(self, pkt, s, val):
        v = _as_bytes(val)
        return s + self.size_struct.pack(len(v)) + v

    def any2i(self, pkt, x):
        return _as_bytes(x) if x is not None else None

    def i2len(self, pkt, x):
        return self.size_struct.size + len(_as_bytes(x))

    def i2repr(self, pkt, x):
        return _text_repr(_as_bytes(x))


class keep_secrets:  # noqa: N801 - read as a function: keep_secrets() / with keep_secrets():
    """Show passwords in the layers' ``show()`` / ``repr`` (start-ok, secure-ok, update-secret):
    ``keep_secrets()`` from now on, ``keep_secrets(False)`` no more, ``with keep_secrets():``
    for a block.  Off by default, as ``amqpcap dissect --keep-secrets`` is.  The field values
    themselves (``pkt.fields``, ``bytes(pkt)``) are the wire's either way."""

    on = False

    def __init__(self, on: bool = True) -> None:
        self.before = keep_secrets.on
        keep_secrets.on = on

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        keep_secrets.on = self.before


def redacted_repr(pkt, x) -> str:
    """A SASL response as the tables keep it without --keep-secrets: the user, no password."""
    from amqpcap.amqp.facts import REDACTED, split_credentials

    mechanism = getattr(pkt, "mechanism", None)
    if isinstance(mechanism, bytes):
        mechanism = mechanism.decode("utf-8", "replace")
    user, _password = split_credentials(mechanism, _as_bytes(x) if x is not None else b"")
    return repr({"user": user, "password": REDACTED} if user is not None else REDACTED)


class SecretBytesField(SizedBytesField):
    """A 0-9 secret argument (a SASL response, a new secret): redacted when shown, unless
    ``keep_secrets``."""

    def i2repr(self, pkt, x):
        return super().i2repr(pkt, x) if keep_secrets.on else redacted_repr(pkt, x)


class PackedBitField(Field):
    """One bit of a run of consecutive 0-9 ``bit`` fields, packed 8 to an octet, least
    significant bit first; the last bit of the run consumes the run's octets."""

    __slots__ = ("index", "count", "octets")

    def __init__(self, name, default=False, index: int = 0, count: int = 1):
        self.index = index
        self.count = count
        self.octets = (count + 7) // 8
        Field.__init__(self, name, default)

    def getfield(self, pkt, s):
        if len(s) < self.octets:
            raise DecodeError(f"{self.name}: bit past end")
        value = bool(s[self.index // 8] >> (self.index % 8) & 1)
        return (s[self.octets :] if self.index == self.count - 1 else s), value

    def addfield(self, pkt, s, val):
        if self.index == 0:
            s = s + b"\0" * self.octets
        if val:
            b = bytearray(s)
            b[len(b) - self.octets + self.index // 8] |= 1 << (self.index % 8)
            s = bytes(b)
        return s

    def any2i(self, pkt, x):
        return bool(x)

    def i2repr(self, pkt, x):
        return repr(bool(x))


# -- 0-9 field tables -----------------------------------------------------------------------


def encode_table_value(v) -> bytes:
    """One typed field-table value, with the type letters RabbitMQ uses."""
    if isinstance(v, bool):
        return b"t" + bytes((int(v),))
    if isinstance(v, int):
        return b"I" + struct.pack(">i", v) if -(1 << 31) <= v < (1 << 31) else b"l" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"d" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        return b"S" + _U32.pack(len(b)) + b
    if isinstance(v, (bytes, bytearray)):
        return b"x" + _U32.pack(len(v)) + bytes(v)
    if isinstance(v, dict) and set(v) == {"$decimal"}:  # how the decoder spells a decimal
        v = decimal.Decimal(v["$decimal"])
    if isinstance(v, decimal.Decimal):
        _sign, _digits, exp = v.as_tuple()
        scale = max(-exp, 0)
        unscaled = int(v.scaleb(scale))
        return b"D" + struct.pack(">Bi", scale, unscaled)
    if isinstance(v, dict):
        return b"F" + encode_table(v)
    if isinstance(v, (list, tuple)):
        items = b"".join(encode_table_value(x) for x in v)
        return b"A" + _U32.pack(len(items)) + items
    if isinstance(v, _dt.datetime):
        return b"T" + struct.pack(">Q", int(v.timestamp()))
    if v is None:
        return b"V"
    raise TypeError(f"cannot put a {type(v).__name__} in an AMQP field table")


def encode_table(d: dict) -> bytes:
    """A 0-9 field table with its 4-octet size."""
    out = bytearray()
    for k, v in d.items():
        key = str(k).encode("utf-8")
        out += bytes((len(key),)) + key + encode_table_value(v)
    return _U32.pack(len(out)) + bytes(out)


class FieldTableField(Field):
    """0-9 ``table``: a dict, decoded by the codec's ``decode_table``."""

    ismutable = True

    def __init__(self, name, default=None):
        Field.__init__(self, name, default)

    def getfield(self, pkt, s):
        if len(s) < 4:
            raise DecodeError(f"{self.name}: table size past end")
        end = 4 + _U32.unpack_from(s)[0]
        if len(s) < end:
            raise DecodeError(f"{self.name}: table past end")
        try:
            value = _f09.decode_table(bytes(s[:end]))
        except _f09.DecodeError as e:
            raise DecodeError(f"{self.name}: {e}") from None
        return s[end:], value

    def addfield(self, pkt, s, val):
        return s + encode_table(val or {})

    def i2repr(self, pkt, x):
        return repr(x if x is not None else {})


def field_09(name: str, ftype: str):
    """The scapy field of one 0-9 argument or property of type ``ftype``."""
    if ftype == "octet":
        return ByteField(name, 0)
    if ftype == "short":
        return ShortField(name, 0)
    if ftype == "long":
        return IntField(name, 0)
    if ftype in ("longlong", "timestamp"):
        return LongField(name, 0)
    if ftype == "shortstr":
        return SizedBytesField(name, b"", 1)
    if ftype in ("longstr", "content"):
        return SizedBytesField(name, b"", 4)
    if ftype == "table":
        return FieldTableField(name, None)
    raise ValueError(f"{name}: no field for type {ftype}")


# -- 0-10 values ------------------------------------------------------------------------------

_FIXED_010 = {
    "uint8": ">B",
    "bin8": ">B",
    "int8": ">b",
    "boolean": ">B",
    "uint16": ">H",
    "bin16": ">H",
    "int16": ">h",
    "uint32": ">I",
    "bin32": ">I",
    "int32": ">i",
    "sequence-no": ">I",
    "uint64": ">Q",
    "bin64": ">Q",
    "int64": ">q",
    "datetime": ">q",
    "float": ">f",
    "double": ">d",
}
_VAR_010 = {"vbin8": 1, "str8": 1, "str8-latin": 1, "vbin16": 2, "str16": 2, "str16-latin": 2, "vbin32": 4}


def _tagged_type(v) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "str16"
    if isinstance(v, (bytes, bytearray)):
        return "vbin32"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, (list, tuple)):
        return "list"
    if v is None:
        return "void"
    raise TypeError(f"cannot put a {type(v).__name__} in an AMQP 0-10 map")


def _tagged(v) -> bytes:
    t = _tagged_type(v)
    return bytes((_S10.TYPES[t].code,)) + encode_010(t, v)


def encode_010(t: str, v) -> bytes:
    """Encode ``v`` as a value of 0-10 type ``t`` (the types controls and commands use)."""
    if t in _FIXED_010:
        return struct.pack(_FIXED_010[t], v)
    if t in _VAR_010:
        b = _as_bytes(v)
        return {1: _U8, 2: _U16, 4: _U32}[_VAR_010[t]].pack(len(b)) + b
    if t == "void":
        return b""
    if t == "uuid":
        return _uuid.UUID(str(v)).bytes
    if t == "sequence-set":
        body = b"".join(struct.pack(">II", lo, hi) for lo, hi in v)
        return _U16.pack(len(body)) + body
    if t == "map":
        if not v:
            return _U32.pack(0)
        body = _U32.pack(len(v)) + b"".join(
            bytes((len(k.encode()),)) + k.encode() + _tagged(x) for k, x in v.items()
        )
        return _U32.pack(len(body)) + body
    if t == "list":
        body = _U32.pack(len(v)) + b"".join(_tagged(x) for x in v)
        return _U32.pack(len(body)) + body
    if t == "array":
        if not v:
            return _U32.pack(0)
        it = _tagged_type(v[0])
        body = bytes((_S10.TYPES[it].code,)) + _U32.pack(len(v)) + b"".join(encode_010(it, x) for x in v)
        return _U32.pack(len(body)) + body
    raise TypeError(f"building 0-10 values of type {t} is not supported")


def _struct_extent(qname: str, s) -> int:
    """Bytes a (non struct32) struct field of type ``qname`` takes at the start of ``s``."""
    spec = _S10.STRUCTS[qname]
    if not spec.size:
        raise DecodeError(f"{qname}: unsized struct")
    if qname == "dtx.xid" and len(s) >= 6 and s[4] == 6 and s[5] == 4:  # Qpid's errata coding
        return 4 + _U32.unpack_from(s)[0]
    st = {1: _U8, 2: _U16, 4: _U32}[spec.size]
    if len(s) < st.size:
        raise DecodeError(f"{qname}: size past end")
    return st.size + st.unpack_from(s)[0]


class Value010Field(Field):
    """One 0-10 argument of type ``type010`` (a primitive type or a qualified struct)."""

    __slots__ = ("type010",)
    ismutable = True
    islist = True  # a list value (array, sequence-set) is one value, not a set of packets to generate

    def __init__(self, name, type010: str, default=None):
        self.type010 = type010
        Field.__init__(self, name, default)

    def getfield(self, pkt, s):
        t = self.type010
        try:
            if "." in t:
                n = _struct_extent(t, s)
                if n > len(s):
                    raise DecodeError(f"{self.name}: struct past end")
                return s[n:], _c10.decode_value(t, bytes(s[:n]))
            value, off = _c10.TYPE_DECODERS[t](bytes(s), 0, len(s), 0)
        except _c10.DecodeError as e:
            raise DecodeError(f"{self.name}: {e}") from None
        return s[off:], value

    def addfield(self, pkt, s, val):
        return s + encode_010(self.type010, val)

    def i2repr(self, pkt, x):
        return _text_repr(x) if isinstance(x, bytes) else repr(x)


class SecretValue010Field(Value010Field):
    """A 0-10 secret argument (the SASL response): redacted when shown, unless ``keep_secrets``."""

    def i2repr(self, pkt, x):
        return super().i2repr(pkt, x) if keep_secrets.on else redacted_repr(pkt, x)


class PackBitField(Field):
    """A 0-10 ``bit`` argument: its packing flag is the value; it takes no bytes."""

    __slots__ = ("mask", "flags_field")

    def __init__(self, name, mask: int, flags_field: str = "packing_flags"):
        self.mask = mask
        self.flags_field = flags_field
        Field.__init__(self, name, False)

    def getfield(self, pkt, s):
        return s, bool((pkt.getfieldval(self.flags_field) or 0) & self.mask)

    def addfield(self, pkt, s, val):
        return s

    def any2i(self, pkt, x):
        return bool(x)

    def i2repr(self, pkt, x):
        return repr(bool(x))
