"""Hand-encoded AMQP 1.0 bytes for the tests: a few encoders written from the spec's tables
(OASIS AMQP 1.0 part 1), independent of the decoder under test."""

from __future__ import annotations

import struct


class Sym(str):
    """A symbol (sym8) rather than a string."""


class UInt(int):
    """A uint (0x70) rather than the encoder's default ulong / smallulong choice."""


def null() -> bytes:
    return b"\x40"


def boolean(v: bool) -> bytes:
    return b"\x41" if v else b"\x42"


def uint(v: int) -> bytes:
    if v == 0:
        return b"\x43"
    if v < 256:
        return b"\x52" + bytes([v])
    return b"\x70" + struct.pack(">I", v)


def ulong(v: int) -> bytes:
    if v == 0:
        return b"\x44"
    if v < 256:
        return b"\x53" + bytes([v])
    return b"\x80" + struct.pack(">Q", v)


def string(v: str) -> bytes:
    b = v.encode()
    return (b"\xa1" + bytes([len(b)]) if len(b) < 256 else b"\xb1" + struct.pack(">I", len(b))) + b


def symbol(v: str) -> bytes:
    b = v.encode()
    return (b"\xa3" + bytes([len(b)]) if len(b) < 256 else b"\xb3" + struct.pack(">I", len(b))) + b


def binary(v: bytes) -> bytes:
    return (b"\xa0" + bytes([len(v)]) if len(v) < 256 else b"\xb0" + struct.pack(">I", len(v))) + v


def list_(items: list, wide: bool = False) -> bytes:
    body = b"".join(enc(i) for i in items)
    if not items and not wide:
        return b"\x45"
    if not wide and len(body) + 1 < 256:
        return b"\xc0" + bytes([len(body) + 1, len(items)]) + body
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(items)) + body


def map_(d: dict, wide: bool = False) -> bytes:
    body = b"".join(enc(k) + enc(v) for k, v in d.items())
    if not wide and len(body) + 1 < 256:
        return b"\xc1" + bytes([len(body) + 1, 2 * len(d)]) + body
    return b"\xd1" + struct.pack(">II", len(body) + 4, 2 * len(d)) + body


def described(code: int, value: bytes) -> bytes:
    return b"\x00" + ulong(code) + value


def enc(v) -> bytes:
    if v is None:
        return null()
    if isinstance(v, Raw):
        return bytes(v)
    if isinstance(v, bool):
        return boolean(v)
    if isinstance(v, UInt):
        return uint(v)
    if isinstance(v, int):
        return ulong(v) if v >= 0 else b"\x81" + struct.pack(">q", v)
    if isinstance(v, Sym):
        return symbol(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, bytes):
        return binary(v)
    if isinstance(v, list):
        return list_(v)
    if isinstance(v, dict):
        return map_(v)
    raise TypeError(v)


class Raw(bytes):
    """Bytes already encoded (a described value, a specific width)."""


def perf(code: int, fields: list) -> bytes:
    return described(code, list_(fields))


def frame(body: bytes, channel: int = 0, ftype: int = 0, doff: int = 2, ext: bytes = b"") -> bytes:
    ext = ext.ljust(doff * 4 - 8, b"\0")
    return struct.pack(">IBBH", 8 + len(ext) + len(body), doff, ftype, channel) + ext + body


# performatives, fields in spec order (uint fields as UInt)
def open_(container: str, hostname=None, max_frame=None, channel_max=None, idle=None, props=None) -> bytes:
    f = [
        container,
        hostname,
        None if max_frame is None else UInt(max_frame),
        channel_max,
        None if idle is None else UInt(idle),
    ]
    f += [None, None, None, None, props]
    return perf(0x10, f)


def begin(remote=None, next_out=0, in_win=2048, out_win=2048) -> bytes:
    return perf(
        0x11,
        [
            None if remote is None else Raw(b"\x60" + struct.pack(">H", remote)),
            UInt(next_out),
            UInt(in_win),
            UInt(out_win),
        ],
    )


def source(address: str) -> Raw:
    return Raw(described(0x28, list_([address])))


def target(address: str) -> Raw:
    return Raw(described(0x29, list_([address])))


def attach(name: str, handle: int, role: bool, src=None, tgt=None, snd=None, rcv=None) -> bytes:
    f = [
        name,
        UInt(handle),
        role,
        None if snd is None else Raw(b"\x50" + bytes([snd])),
        None if rcv is None else Raw(b"\x50" + bytes([rcv])),
    ]
    f += [None if src is None else source(src), None if tgt is None else target(tgt)]
    return perf(0x12, f)


def flow(handle=None, delivery_count=None, credit=None, drain=None, available=None) -> bytes:
    f = [UInt(0), UInt(2048), UInt(0), UInt(2048), None if handle is None else UInt(handle)]
    f += [
        None if delivery_count is None else UInt(delivery_count),
        None if credit is None else UInt(credit),
        None if available is None else UInt(available),
        drain,
    ]
    return perf(0x13, f)


def transfer(
    handle: int, delivery_id=None, tag=None, settled=None, more=None, state=None, aborted=None
) -> bytes:
    f = [
        UInt(handle),
        None if delivery_id is None else UInt(delivery_id),
        tag,
        None if delivery_id is None else UInt(0),
        settled,
        more,
    ]
    f += [None, state, None, aborted]
    while f and f[-1] is None:
        f.pop()
    return perf(0x14, f)


def accepted() -> Raw:
    return Raw(described(0x24, b"\x45"))


def released() -> Raw:
    return Raw(described(0x26, b"\x45"))


def error(condition: str, description=None) -> Raw:
    return Raw(described(0x1D, list_([Sym(condition), description])))


def rejected(condition: str, description=None) -> Raw:
    return Raw(described(0x25, list_([error(condition, description)])))


def modified(failed=True, undeliverable=True) -> Raw:
    return Raw(described(0x27, list_([failed, undeliverable])))


def disposition(role: bool, first: int, last=None, settled=None, state=None) -> bytes:
    return perf(0x15, [role, UInt(first), None if last is None else UInt(last), settled, state])


def detach(handle: int, closed=None, err=None) -> bytes:
    return perf(0x16, [UInt(handle), closed, err])


def end(err=None) -> bytes:
    return perf(0x17, [err] if err is not None else [])


def close(err=None) -> bytes:
    return perf(0x18, [err] if err is not None else [])


def sasl_mechanisms(*mechs: str) -> bytes:
    arr = b"".join(bytes([len(m)]) + m.encode() for m in mechs)
    return perf(0x40, [Raw(b"\xe0" + bytes([len(arr) + 2, len(mechs)]) + b"\xa3" + arr)])


def sasl_init(mechanism: str, response=None, hostname=None) -> bytes:
    return perf(0x41, [Sym(mechanism), response, hostname])


def sasl_outcome(code: int) -> bytes:
    return perf(0x44, [Raw(b"\x50" + bytes([code]))])


# message sections
def header(durable=None, priority=None, ttl=None) -> bytes:
    return described(
        0x70,
        list_(
            [
                durable,
                None if priority is None else Raw(b"\x50" + bytes([priority])),
                None if ttl is None else UInt(ttl),
            ]
        ),
    )


def properties(**kw) -> bytes:
    names = [
        "message-id",
        "user-id",
        "to",
        "subject",
        "reply-to",
        "correlation-id",
        "content-type",
        "content-encoding",
        "absolute-expiry-time",
        "creation-time",
    ]
    f = [kw.get(n.replace("-", "_")) for n in names]
    while f and f[-1] is None:
        f.pop()
    return described(0x73, list_(f))


def timestamp(ms: int) -> Raw:
    """A timestamp (0x83): signed milliseconds since the epoch."""
    return Raw(b"\x83" + struct.pack(">q", ms))


def application_properties(d: dict) -> bytes:
    return described(0x74, map_(d))


def message_annotations(d: dict) -> bytes:
    return described(0x72, map_(d))


def data(payload: bytes) -> bytes:
    return described(0x75, binary(payload))


def amqp_value(v) -> bytes:
    return described(0x77, enc(v))


AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
