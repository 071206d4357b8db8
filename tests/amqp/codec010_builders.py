"""A small AMQP 0-10 *encoder* for tests, driven by the generated tables.

It follows the specification (section 4.4 framing, 5.3 structs, 5.7 / 5.8
controls and commands, 7 types), independently of the decoder's code:

    frames = command("message.transfer", {"destination": "ex"}, channel=1,
                     header={"message.delivery-properties": {"routing-key": "k"}},
                     body=b"hello", max_frame=300)

returns the wire bytes of the assembly's frames.  ``Typed(type, value)``
forces a type in maps, lists and arrays; plain Python values get
bool -> boolean, int -> int64, float -> double, str -> str16, bytes -> vbin32,
None -> void, dict -> map, list/tuple -> list, uuid.UUID -> uuid.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

from amqpcap.amqp.spec import v0_10 as SPEC

HEADER_010 = b"AMQP\x01\x01\x00\x0a"


@dataclass(frozen=True)
class Typed:
    type: str
    value: Any


_FIXED = {
    "bin8": "B",
    "int8": "b",
    "uint8": "B",
    "boolean": "B",
    "bin16": "H",
    "int16": "h",
    "uint16": "H",
    "bin32": "I",
    "int32": "i",
    "uint32": "I",
    "float": "f",
    "sequence-no": "I",
    "bin64": "Q",
    "int64": "q",
    "uint64": "Q",
    "double": "d",
    "datetime": "q",
}


def encode_value(t: str, v) -> bytes:
    """Value ``v`` of type ``t`` (primitive type name or qualified struct name)."""
    if "." in t:
        return encode_struct(t, v)
    if t in _FIXED:
        return struct.pack(">" + _FIXED[t], v)
    if t == "char":
        return v.encode("iso8859_15")
    if t == "char-utf32":
        return struct.pack(">I", ord(v))
    if t == "uuid":
        return (v if isinstance(v, uuid.UUID) else uuid.UUID(v)).bytes
    if t in ("bin128", "bin256", "bin512", "bin1024", "bin40", "bin72"):
        width = SPEC.TYPES[t].fixed_width
        assert len(v) == width
        return bytes(v)
    if t in ("dec32", "dec64"):
        exp, mant = v
        return struct.pack(">Bi" if t == "dec32" else ">Bq", exp, mant)
    if t in ("void", "bit"):
        return b""
    size_width = SPEC.TYPES[t].size_width
    if t in (
        "vbin8",
        "vbin16",
        "vbin32",
        "str8",
        "str16",
        "str8-latin",
        "str16-latin",
        "str8-utf16",
        "str16-utf16",
    ):
        if isinstance(v, str):
            enc = "utf-8" if t in ("str8", "str16") else ("iso8859_15" if "latin" in t else "utf-16-be")
            v = v.encode(enc)
        return _sized(size_width, bytes(v))
    if t == "sequence-set":
        return _sized(2, b"".join(struct.pack(">II", lo, hi) for lo, hi in v))
    if t == "byte-ranges":
        return _sized(2, b"".join(struct.pack(">QQ", lo, hi) for lo, hi in v))
    if t == "map":
        body = b"".join(_sized(1, k.encode()) + encode_tagged(x) for k, x in v.items())
        return _sized(4, struct.pack(">I", len(v)) + body)
    if t == "list":
        return _sized(4, struct.pack(">I", len(v)) + b"".join(encode_tagged(x) for x in v))
    if t == "array":
        # v: Typed(element type, [values]) or a list of str (str16-array)
        et, items = (v.type, v.value) if isinstance(v, Typed) else ("str16", v)
        if "." in et:  # array of coded structs: element type struct32
            body = b"".join(encode_struct32(et, x) for x in items)
            code = SPEC.TYPES["struct32"].code
        else:
            body = b"".join(encode_value(et, x) for x in items)
            code = SPEC.TYPES[et].code
        return _sized(4, bytes([code]) + struct.pack(">I", len(items)) + body)
    if t == "struct32":
        qname, values = v
        return encode_struct32(qname, values)
    raise ValueError(f"cannot encode type {t}")


def _sized(width: int, data: bytes) -> bytes:
    return struct.pack({1: ">B", 2: ">H", 4: ">I"}[width], len(data)) + data


def _infer(v) -> tuple[str, Any]:
    if isinstance(v, Typed):
        return v.type, v.value
    if isinstance(v, bool):
        return "boolean", int(v)
    if isinstance(v, int):
        return "int64", v
    if isinstance(v, float):
        return "double", v
    if isinstance(v, str):
        return "str16", v
    if isinstance(v, (bytes, bytearray)):
        return "vbin32", v
    if v is None:
        return "void", None
    if isinstance(v, dict):
        return "map", v
    if isinstance(v, (list, tuple)):
        return "list", list(v)
    if isinstance(v, uuid.UUID):
        return "uuid", v
    raise TypeError(v)


def encode_tagged(v) -> bytes:
    t, v = _infer(v)
    if t == "raw":  # Typed("raw", (code, bytes)): any code, bytes as given
        code, data = v
        return bytes([code]) + data
    return bytes([SPEC.TYPES[t].code]) + encode_value(t, v)


def encode_packed(fields, pack: int, values: dict) -> bytes:
    """Packing flags (``pack`` octets, octet n = fields 8n..8n+7, LSB first) and present fields."""
    flags = 0
    data = b""
    for i, f in enumerate(fields):
        if f.name not in values:
            continue
        v = values[f.name]
        if f.type == "bit":
            if v:
                flags |= 1 << i
            continue
        flags |= 1 << i
        data += encode_value(f.type, v)
    return (flags.to_bytes(pack, "little") if pack else b"") + data


def encode_struct(qname: str, values: dict) -> bytes:
    s = SPEC.STRUCTS[qname]
    body = b""
    if s.code is not None:
        body += bytes([s.class_code, s.code])
    body += encode_packed(s.fields, s.pack, values)
    return _sized(s.size, body) if s.size else body


def encode_struct32(qname: str, values: dict) -> bytes:
    s = SPEC.STRUCTS[qname]
    if s.code is None and qname == "dtx.xid":
        s = SPEC.XID_ERRATA
    return _sized(4, bytes([s.class_code, s.code]) + encode_packed(s.fields, s.pack, values))


# --- assemblies and frames ------------------------------------------------------------


def frames(
    segments: list[tuple[int, bytes]],
    channel: int,
    track: int,
    max_frame: int = 65535,
    flags_override: dict | None = None,
) -> bytes:
    """Frames of one assembly: ``segments`` = [(segment type, payload), ...]."""
    out = b""
    payload_max = max_frame - 12
    for si, (stype, data) in enumerate(segments):
        chunks = [data[i : i + payload_max] for i in range(0, len(data), payload_max)] or [b""]
        for fi, chunk in enumerate(chunks):
            flags = (
                (8 if si == 0 else 0)
                | (4 if si == len(segments) - 1 else 0)
                | (2 if fi == 0 else 0)
                | (1 if fi == len(chunks) - 1 else 0)
            )
            out += frame(flags, stype, chunk, channel, track)
    return out


def frame(flags: int, stype: int, payload: bytes, channel: int, track: int, size: int | None = None) -> bytes:
    size = 12 + len(payload) if size is None else size
    return struct.pack(">BBHBBHI", flags, stype, size, 0, track, channel, 0) + payload


def control_segment(name: str, args: dict | None = None) -> bytes:
    op = SPEC.OPS_BY_NAME[name]
    assert op.kind == "control"
    return bytes([op.class_code, op.code]) + encode_packed(op.fields, 2, args or {})


def command_segment(name: str, args: dict | None = None, sync: bool = False) -> bytes:
    op = SPEC.OPS_BY_NAME[name]
    assert op.kind == "command"
    return bytes([op.class_code, op.code, 1, 1 if sync else 0]) + encode_packed(op.fields, 2, args or {})


def control(name: str, args: dict | None = None, channel: int = 0, max_frame: int = 65535) -> bytes:
    return frames([(0, control_segment(name, args))], channel, 0, max_frame)


def command(
    name: str,
    args: dict | None = None,
    channel: int = 1,
    sync: bool = False,
    header: dict | None = None,
    body: bytes | None = None,
    max_frame: int = 65535,
) -> bytes:
    segs = [(1, command_segment(name, args, sync))]
    if header is not None:
        segs.append((2, b"".join(encode_struct(q, v) for q, v in header.items())))
    if body is not None:
        segs.append((3, body))
    return frames(segs, channel, 1, max_frame)


def handshake(max_frame: int = 65535) -> tuple[bytes, bytes]:
    """(client bytes, server bytes) after the protocol headers: a PLAIN login, tune, open, one
    session on channel 1."""
    s2c = control(
        "connection.start",
        {"server-properties": {"product": "test"}, "mechanisms": ["PLAIN"], "locales": ["en_US"]},
    )
    c2s = control(
        "connection.start-ok",
        {
            "client-properties": {"product": "builder"},
            "mechanism": "PLAIN",
            "response": b"\0alice\0s3cret",
            "locale": "en_US",
        },
    )
    s2c += control(
        "connection.tune",
        {"channel-max": 16, "max-frame-size": max_frame, "heartbeat-min": 0, "heartbeat-max": 60},
    )
    c2s += control("connection.tune-ok", {"channel-max": 16, "max-frame-size": max_frame, "heartbeat": 10})
    c2s += control("connection.open", {"virtual-host": "/"})
    s2c += control("connection.open-ok", {"known-hosts": ["h:5672"]})
    c2s += control("session.attach", {"name": b"s1"}, channel=1)
    s2c += control("session.attached", {"name": b"s1"}, channel=1)
    c2s += control("session.command-point", {"command-id": 0, "command-offset": 0}, channel=1)
    return c2s, s2c
