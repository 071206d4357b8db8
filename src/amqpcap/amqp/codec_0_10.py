"""AMQP 0-10 sans-IO codec: frames -> segments -> assemblies -> events.

The caller strips the protocol headers (``AMQP 01 01 00 0A``) and feeds the
rest of each direction's byte stream with ``feed``; lost bytes are reported
with ``gap``; ``finish`` ends the capture.  Events are drained with
``pop_events`` as ``(direction, event)`` pairs, direction 0 = client->server.
``Decoder010`` is the 0-10 frame grammar on the stream core (``stream.StreamDecoder``:
buffers, resync, gaps, end of capture, content assembly); segments are read by one
function per segment type (``SEGMENT_READERS``).

Wire structure (spec sections 4.4, 5.3, 5.7-5.9):

* a frame is a 12-octet header (flags ``vv00 BEbe``: first/last segment,
  first/last frame; segment type; size incl. header; track; channel) and a
  payload;
* frames of one (channel, track) are concatenated into segments (a segment may
  span many frames, and control frames of track 0 may come between them);
* a control segment is one assembly; a command segment may be followed by a
  header segment (sized, coded, packed structs) and body segment(s) in the same
  assembly: for message.transfer (and file/stream commands that carry content)
  they become one ``Content`` event.

Events: one ``Frame`` per frame (if ``frame_events``; every frame reaches the ``tally``
either way: stream.py), one ``Method`` per control or command
(commands numbered per session and per sender from session.command-point,
default 0), ``Content`` per content-carrying command, ``Heartbeat`` for
connection.heartbeat (also reported as a Method), ``Anomaly`` for everything
that could not be decoded (kinds: gap, resync, resync-failed, malformed-frame,
oversize-frame, oversize-segment, bad-segment-sequence, unknown-control,
unknown-command, malformed-control, malformed-command, malformed-header,
unknown-struct, incomplete-content, truncated-stream).

Values: integers, floats, bool, str (str8/str16: UTF-8 with errors="replace";
latin and UTF-16 variants decoded likewise), bytes (vbin8/16/32 and binN > 64
bits), None (void), uuid as canonical text, datetime as int seconds, dec32 /
dec64 as float, sequence-set and byte-ranges as lists of [lower, upper],
maps as dict, lists and arrays as list, struct32 and coded structs as dict
with "$struct" naming the struct.  Bit fields of packed structs are always
present (False when their flag is clear); other absent fields are omitted.

Message properties: the 0-9-1 names are mapped from delivery-properties and
message-properties (content-type, content-encoding, headers <-
application-headers, delivery-mode, priority, correlation-id, reply-to as
"exchange/routing-key", expiration <- ttl in ms as text, message-id (uuid
text), timestamp (seconds), user-id, app-id); the original structs are kept
under "delivery-properties", "message-properties" (and "fragment-properties").
Content.exchange is delivery-properties.exchange, else the transfer
destination of a client->server transfer (to a server that is the exchange;
server->client destinations name subscriptions); routing_key is
delivery-properties.routing-key.  body_size is message-properties.content-length
when given, else the body bytes received.
"""

from __future__ import annotations

import uuid as _uuid
from struct import Struct
from struct import error as StructError

from amqpcap.amqp.detect import CANDIDATE_0_10, frame_ok_0_10
from amqpcap.amqp.events import Frame, Heartbeat, Method
from amqpcap.amqp.spec import names_subscription
from amqpcap.amqp.spec import v0_10 as SPEC
from amqpcap.amqp.stream import I64_MAX, DecodeError, Direction, StreamDecoder

MAX_DEPTH = 64  # nesting of maps / lists / arrays / structs
MAX_SEGMENT = 16 << 20  # bytes of one control / command / header segment we buffer
MAX_ZERO_WIDTH_ITEMS = 1 << 16  # array of void / bit: count not bounded by its size
HARD_MAX_FRAME = 0xFFFF  # the size field is a uint16

SEGMENT_NAMES = ("control", "command", "header", "body")

_FRAME_HDR = Struct(">BBHBBH")  # flags, type, size, reserved, track, channel (then 4 reserved)
_U8 = Struct(">B")
_U16 = Struct(">H")
_U32 = Struct(">I")


# --- value decoders: fn(buf, off, end, depth) -> (value, new_off) ----------------------


def _short(what: str, off: int, need: int, end: int):
    return DecodeError(f"{what} needs {need} bytes at {off}, {max(end - off, 0)} left")


def _fixed(fmt: str, name: str, conv=None):
    st = Struct(">" + fmt)
    w = st.size
    unpack = st.unpack_from
    if conv is None:

        def dec(buf, off, end, depth):
            e = off + w
            if e > end:
                raise _short(name, off, w, end)
            return unpack(buf, off)[0], e
    else:

        def dec(buf, off, end, depth):
            e = off + w
            if e > end:
                raise _short(name, off, w, end)
            return conv(*unpack(buf, off)), e

    return dec


def _raw(width: int, name: str):
    def dec(buf, off, end, depth):
        e = off + width
        if e > end:
            raise _short(name, off, width, end)
        return bytes(buf[off:e]), e

    return dec


def _none(buf, off, end, depth):
    return None, off


def _true(buf, off, end, depth):
    return True, off


def _char(b: int) -> str:
    return bytes((b,)).decode("iso8859_15")


def _utf32(cp: int) -> str:
    return chr(cp) if cp < 0x110000 and not 0xD800 <= cp < 0xE000 else "\ufffd"


def _uuid_text(buf, off, end, depth):
    e = off + 16
    if e > end:
        raise _short("uuid", off, 16, end)
    return str(_uuid.UUID(bytes=bytes(buf[off:e]))), e


def _utf16(raw: bytes) -> str:
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return raw.decode("utf-16", "replace")
    return raw.decode("utf-16-be", "replace")


def _var(size_st: Struct, name: str, conv=None):
    sw = size_st.size
    unpack = size_st.unpack_from

    def dec(buf, off, end, depth):
        if off + sw > end:
            raise _short(name + " size", off, sw, end)
        n = unpack(buf, off)[0]
        s = off + sw
        e = s + n
        if e > end:
            raise _short(name, s, n, end)
        raw = bytes(buf[s:e])
        return (raw if conv is None else conv(raw)), e

    return dec


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _latin(raw: bytes) -> str:
    return raw.decode("iso8859_15", "replace")


def _ranges(item: Struct, name: str):
    w = item.size  # one [lower, upper] pair
    unpack = item.unpack_from

    def dec(buf, off, end, depth):
        if off + 2 > end:
            raise _short(name + " size", off, 2, end)
        n = _U16.unpack_from(buf, off)[0]
        off += 2
        e = off + n
        if e > end:
            raise _short(name, off, n, end)
        if n % w:
            raise DecodeError(f"{name} of {n} bytes is not a whole number of {w}-byte ranges")
        return [list(unpack(buf, p)) for p in range(off, e, w)], e

    return dec


def _map(buf, off, end, depth):
    if off + 4 > end:
        raise _short("map size", off, 4, end)
    size = _U32.unpack_from(buf, off)[0]
    off += 4
    mend = off + size
    if mend > end:
        raise _short("map", off, size, end)
    if size == 0:
        return {}, mend
    if size < 4:
        raise DecodeError(f"map of {size} bytes has no count")
    if depth >= MAX_DEPTH:
        raise DecodeError(f"maps / lists / arrays nested deeper than {MAX_DEPTH}")
    count = _U32.unpack_from(buf, off)[0]
    off += 4
    if count * 2 > mend - off:
        raise DecodeError(f"map claims {count} entries in {mend - off} bytes")
    out = {}
    depth += 1
    tagged = _TAGGED
    for _ in range(count):
        if off >= mend:
            raise _short("map key", off, 1, mend)
        kl = buf[off]
        ks = off + 1
        off = ks + kl
        if off >= mend:
            raise _short("map entry", ks, kl + 1, mend)
        key = bytes(buf[ks:off]).decode("utf-8", "replace")
        code = buf[off]
        out[key], off = tagged[code](buf, off + 1, mend, depth)
    if off != mend:
        raise DecodeError(f"map ends at {off}, its size says {mend}")
    return out, mend


def _list(buf, off, end, depth):
    if off + 4 > end:
        raise _short("list size", off, 4, end)
    size = _U32.unpack_from(buf, off)[0]
    off += 4
    lend = off + size
    if lend > end:
        raise _short("list", off, size, end)
    if size == 0:
        return [], lend
    if size < 4:
        raise DecodeError(f"list of {size} bytes has no count")
    if depth >= MAX_DEPTH:
        raise DecodeError(f"maps / lists / arrays nested deeper than {MAX_DEPTH}")
    count = _U32.unpack_from(buf, off)[0]
    off += 4
    if count > lend - off:
        raise DecodeError(f"list claims {count} items in {lend - off} bytes")
    out = []
    depth += 1
    tagged = _TAGGED
    for _ in range(count):
        if off >= lend:
            raise _short("list item", off, 1, lend)
        v, off = tagged[buf[off]](buf, off + 1, lend, depth)
        out.append(v)
    if off != lend:
        raise DecodeError(f"list ends at {off}, its size says {lend}")
    return out, lend


def _array(buf, off, end, depth):
    if off + 4 > end:
        raise _short("array size", off, 4, end)
    size = _U32.unpack_from(buf, off)[0]
    off += 4
    aend = off + size
    if aend > end:
        raise _short("array", off, size, end)
    if size == 0:
        return [], aend
    if size < 5:
        raise DecodeError(f"array of {size} bytes has no type and count")
    if depth >= MAX_DEPTH:
        raise DecodeError(f"maps / lists / arrays nested deeper than {MAX_DEPTH}")
    code = buf[off]
    count = _U32.unpack_from(buf, off + 1)[0]
    off += 5
    limit = MAX_ZERO_WIDTH_ITEMS if _WIDTH_MIN[code] == 0 else (aend - off) // _WIDTH_MIN[code]
    if count > limit:
        raise DecodeError(f"array claims {count} items of type 0x{code:02x} in {aend - off} bytes")
    dec = _TAGGED[code]
    out = []
    depth += 1
    for _ in range(count):
        v, off = dec(buf, off, aend, depth)
        out.append(v)
    if off != aend:
        raise DecodeError(f"array ends at {off}, its size says {aend}")
    return out, aend


def _struct32(buf, off, end, depth):
    if off + 6 > end:
        raise _short("struct32", off, 6, end)
    size = _U32.unpack_from(buf, off)[0]
    s = off + 4
    e = s + size
    if e > end:
        raise _short("struct32", s, size, end)
    if size < 2:
        raise DecodeError(f"struct32 of {size} bytes has no class and struct code")
    if depth >= MAX_DEPTH:
        raise DecodeError(f"structs nested deeper than {MAX_DEPTH}")
    key = (buf[s], buf[s + 1])
    comp = _CODED.get(key)
    if comp is None:
        return {"$struct": f"unknown-{key[0]}-{key[1]}", "raw": bytes(buf[s + 2 : e])}, e
    value, p = _decode_packed(buf, s + 2, e, comp[1], comp[2], depth + 1)
    value = {"$struct": comp[0], **value}
    return value, e


def _category_decoder(code: int):
    """Decoder of a type code the spec does not name, by its code range (spec 5.2)."""
    if code < 0x80:
        return _raw(1 << ((code >> 4) & 7), f"type 0x{code:02x}")
    if code < 0xB0:
        return _var({0x80: _U8, 0x90: _U16, 0xA0: _U32}[code & 0xF0], f"type 0x{code:02x}")
    if 0xC0 <= code < 0xD0:
        return _raw(5, f"type 0x{code:02x}")
    if 0xD0 <= code < 0xE0:
        return _raw(9, f"type 0x{code:02x}")
    if code >= 0xF0:
        return _none

    def reserved(buf, off, end, depth):
        raise DecodeError(f"reserved type code 0x{code:02x}")

    return reserved


def _dec(fmt):
    def conv(exp, mant):
        return mant / (10**exp)

    return conv


TYPE_DECODERS = {
    "bin8": _fixed("B", "bin8"),
    "int8": _fixed("b", "int8"),
    "uint8": _fixed("B", "uint8"),
    "char": _fixed("B", "char", _char),
    "boolean": _fixed("B", "boolean", bool),
    "bin16": _fixed("H", "bin16"),
    "int16": _fixed("h", "int16"),
    "uint16": _fixed("H", "uint16"),
    "bin32": _fixed("I", "bin32"),
    "int32": _fixed("i", "int32"),
    "uint32": _fixed("I", "uint32"),
    "float": _fixed("f", "float"),
    "char-utf32": _fixed("I", "char-utf32", _utf32),
    "sequence-no": _fixed("I", "sequence-no"),
    "bin64": _fixed("Q", "bin64"),
    "int64": _fixed("q", "int64"),
    "uint64": _fixed("Q", "uint64"),
    "double": _fixed("d", "double"),
    "datetime": _fixed("q", "datetime"),
    "bin128": _raw(16, "bin128"),
    "uuid": _uuid_text,
    "bin256": _raw(32, "bin256"),
    "bin512": _raw(64, "bin512"),
    "bin1024": _raw(128, "bin1024"),
    "vbin8": _var(_U8, "vbin8"),
    "str8-latin": _var(_U8, "str8-latin", _latin),
    "str8": _var(_U8, "str8", _text),
    "str8-utf16": _var(_U8, "str8-utf16", _utf16),
    "vbin16": _var(_U16, "vbin16"),
    "str16-latin": _var(_U16, "str16-latin", _latin),
    "str16": _var(_U16, "str16", _text),
    "str16-utf16": _var(_U16, "str16-utf16", _utf16),
    "byte-ranges": _ranges(Struct(">QQ"), "byte-ranges"),
    "sequence-set": _ranges(Struct(">II"), "sequence-set"),
    "vbin32": _var(_U32, "vbin32"),
    "map": _map,
    "list": _list,
    "array": _array,
    "struct32": _struct32,
    "bin40": _raw(5, "bin40"),
    "dec32": _fixed("Bi", "dec32", _dec("i")),
    "bin72": _raw(9, "bin72"),
    "dec64": _fixed("Bq", "dec64", _dec("q")),
    "void": _none,
    "bit": _true,
}
missing = set(SPEC.TYPES) - set(TYPE_DECODERS)
assert not missing, f"no decoder for 0-10 types {missing}"
del missing

# type code -> decoder (tagged values of maps, lists and arrays), and the least
# number of bytes a value of the code takes (bounds array counts).
_TAGGED = [None] * 256
_WIDTH_MIN = [0] * 256
for _code in range(256):
    _name = SPEC.TYPE_CODES.get(_code)
    _TAGGED[_code] = TYPE_DECODERS[_name] if _name else _category_decoder(_code)
    if _name:
        _t = SPEC.TYPES[_name]
        _WIDTH_MIN[_code] = _t.fixed_width if _t.fixed_width is not None else _t.size_width
    elif _code < 0x80:
        _WIDTH_MIN[_code] = 1 << ((_code >> 4) & 7)
    elif _code < 0xB0:
        _WIDTH_MIN[_code] = 1 << ((_code >> 4) & 3)
    elif 0xC0 <= _code < 0xE0:
        _WIDTH_MIN[_code] = 5 if _code < 0xD0 else 9
    elif 0xB0 <= _code < 0xC0 or 0xE0 <= _code < 0xF0:
        _WIDTH_MIN[_code] = 1  # reserved: decoding fails on the first item anyway


# --- packed structs ------------------------------------------------------------------


def _decode_packed(buf, off, end, fields, pack, depth):
    """Fields of a packed struct: ``fields`` = ((mask, name, is_bit, decoder), ...)."""
    if pack == 0:
        flags = -1
    else:
        e = off + pack
        if e > end:
            raise _short("packing flags", off, pack, end)
        if pack == 2:
            flags = buf[off] | (buf[off + 1] << 8)
        elif pack == 1:
            flags = buf[off]
        else:
            flags = int.from_bytes(buf[off:e], "little")
        off = e
    out = {}
    for mask, name, is_bit, dec in fields:
        if flags & mask:
            if is_bit:
                out[name] = True
            else:
                out[name], off = dec(buf, off, end, depth)
        elif is_bit:
            out[name] = False
    return out, off


def _size_reader(width: int):
    return {1: _U8, 2: _U16, 4: _U32}[width]


def _struct_field_decoder(qname: str):
    """Decoder of a field whose type is a (not struct32) struct: [size] [class code] [flags] fields."""
    spec = SPEC.STRUCTS[qname]

    def dec(buf, off, end, depth):
        comp = _COMPILED[qname]
        if depth >= MAX_DEPTH:
            raise DecodeError(f"structs nested deeper than {MAX_DEPTH}")
        if (
            qname == "dtx.xid"
            and off + 6 <= end
            and buf[off + 4] == 6
            and buf[off + 5] == 4
            and spec.size != 4
        ):
            return _xid_errata(buf, off, end, depth)
        send = end
        if spec.size:
            st = _size_reader(spec.size)
            if off + spec.size > end:
                raise _short(qname + " size", off, spec.size, end)
            n = st.unpack_from(buf, off)[0]
            off += spec.size
            send = off + n
            if send > end:
                raise _short(qname, off, n, end)
        if spec.code is not None:
            if off + 2 > send:
                raise _short(qname + " code", off, 2, send)
            if (buf[off], buf[off + 1]) != (spec.class_code, spec.code):
                raise DecodeError(f"{qname}: struct code {buf[off]}.{buf[off + 1]}")
            off += 2
        value, off = _decode_packed(buf, off, send, comp, spec.pack, depth + 1)
        if spec.size:
            if off != send:
                raise DecodeError(f"{qname} ends at {off}, its size says {send}")
        return value, off

    return dec


def _xid_errata(buf, off, end, depth):
    """dtx.xid as Qpid's errata codes it: 4-octet size, class 6 / struct 4."""
    n = _U32.unpack_from(buf, off)[0]
    send = off + 4 + n
    if send > end:
        raise _short("dtx.xid", off + 4, n, end)
    value, p = _decode_packed(buf, off + 6, send, _COMPILED["dtx.xid"], SPEC.XID_ERRATA.pack, depth + 1)
    return value, send


def _compile_fields(fields) -> tuple:
    out = []
    for i, f in enumerate(fields):
        if "." in f.type:
            dec = _struct_field_decoder(f.type)
        else:
            dec = TYPE_DECODERS[f.type]
        out.append((1 << i, f.name, f.type == "bit", dec))
    return tuple(out)


_COMPILED = {q: _compile_fields(s.fields) for q, s in SPEC.STRUCTS.items()}
# (class code, struct code) -> (name, compiled fields, pack width) for struct32 and header entries
_CODED = {k: (q, _COMPILED[q], SPEC.STRUCTS[q].pack) for k, q in SPEC.STRUCT_CODES.items()}
if SPEC.STRUCTS["dtx.xid"].code is None:
    _CODED[(6, 4)] = ("dtx.xid", _COMPILED["dtx.xid"], SPEC.XID_ERRATA.pack)
# (class, code) -> (OpSpec, compiled fields)
_CONTROLS = {k: (o, _compile_fields(o.fields)) for k, o in SPEC.CONTROLS.items()}
_COMMANDS = {k: (o, _compile_fields(o.fields)) for k, o in SPEC.COMMANDS.items()}


def decode_value(type_name: str, data: bytes):
    """Decode one value of a named 0-10 type (or qualified struct) from ``data``; for tools and tests."""
    dec = _struct_field_decoder(type_name) if "." in type_name else TYPE_DECODERS[type_name]
    return dec(data, 0, len(data), 0)[0]


def _vtext(v):
    return _text(v) if isinstance(v, (bytes, bytearray)) else v


def _content_view(p, direction: int):
    """(properties, body size, exchange, routing key) of a content (``p``: its Pending)."""
    m, structs = p.method, p.props
    props: dict = {}
    exchange = routing_key = declared = None
    dp = structs.get("message.delivery-properties")
    mp = structs.get("message.message-properties")
    if m.class_id == 4:
        if mp is not None:
            for src, dst in (
                ("content-type", "content-type"),
                ("content-encoding", "content-encoding"),
                ("application-headers", "headers"),
            ):
                if src in mp:
                    props[dst] = mp[src]
        if dp is not None:
            for src in ("delivery-mode", "priority"):
                if src in dp:
                    props[src] = dp[src]
            if direction == 1:  # as 0-9-1's deliver: a packed bit, absent is false
                props["redelivered"] = bool(dp.get("redelivered"))
        if mp is not None:
            if "correlation-id" in mp:
                props["correlation-id"] = _vtext(mp["correlation-id"])
            rt = mp.get("reply-to")
            if rt is not None:
                props["reply-to"] = f"{rt.get('exchange', '')}/{rt.get('routing-key', '')}"
        if dp is not None and "ttl" in dp:
            props["expiration"] = str(dp["ttl"])
        if mp is not None and "message-id" in mp:
            props["message-id"] = mp["message-id"]
        if dp is not None and "timestamp" in dp:
            props["timestamp"] = dp["timestamp"]
        if mp is not None:
            for src in ("user-id", "app-id"):
                if src in mp:
                    props[src] = _vtext(mp[src])
            declared = mp.get("content-length")
        if dp is not None:
            props["delivery-properties"] = dp
            exchange = dp.get("exchange")
            routing_key = dp.get("routing-key")
        if mp is not None:
            props["message-properties"] = mp
        fp = structs.get("message.fragment-properties")
        if fp is not None:
            props["fragment-properties"] = fp
        if exchange is None and not names_subscription(m.name, direction, "0-10"):
            exchange = m.args.get("destination")
    else:
        for qname, v in structs.items():
            if qname.startswith(("message.",)):
                continue
            props.update(v)
            props[qname.split(".", 1)[1]] = v
        exchange = m.args.get("exchange")
        routing_key = m.args.get("routing-key")
    if p.unknown:
        props["$unknown-structs"] = p.unknown
    if declared is None:
        declared = p.received
    elif declared > I64_MAX:
        declared = None  # reported when the header was read
    return props, declared, exchange, routing_key


# --- decoder state -----------------------------------------------------------------------


class _Direction(Direction):
    __slots__ = ("next_cmd", "ids_unknown")

    def __init__(self) -> None:
        super().__init__()
        self.next_cmd: dict[int, int | None] = {}  # channel -> next command id of this sender
        self.ids_unknown = False  # after a loss: command ids are unknown until a command-point

    def take_command_id(self, channel: int):
        """The id of this sender's next command on ``channel`` (None if unknown), and count it."""
        cur = self.next_cmd.get(channel, -1)
        if cur == -1:
            cur = None if self.ids_unknown else 0
        self.next_cmd[channel] = None if cur is None else (cur + 1) & 0xFFFFFFFF
        return cur


class _Segment:
    __slots__ = ("type", "parts", "length", "offset", "frames", "dropped", "why")

    def __init__(self, stype: int, offset: int) -> None:
        self.type = stype
        self.parts: list = []
        self.length = 0
        self.offset = offset
        self.frames = 0
        self.dropped = False  # swallow the frames of this segment: it cannot be decoded
        self.why = ""


class Decoder010(StreamDecoder):
    """Sans-IO decoder of one AMQP 0-10 connection (both directions, after the protocol
    headers): the 0-10 frame grammar on the stream core."""

    version = "0-10"
    candidates = ("0-10",)  # the framing alone proves the version
    HEADER = 12
    CANDIDATE = CANDIDATE_0_10
    MARK_PACKETS = True  # a boundary is proven by the header after the frame, perhaps packets later
    FLUSH_AT_GAP = False  # a gap inside a frame with a readable header is skipped exactly (_gap)
    Direction = _Direction

    def __init__(self, *, body_bytes: int = 64, keep_secrets: bool = False) -> None:
        super().__init__(body_bytes=body_bytes, keep_secrets=keep_secrets)
        self.segs: tuple[dict, dict] = ({}, {})  # per direction: (channel << 4 | track) -> _Segment
        self.frame_limit = HARD_MAX_FRAME

    def start_midstream(
        self, direction: int, offset: int, at: int | None = None, begun: bool = False
    ) -> None:
        super().start_midstream(direction, offset, at, begun)
        self.dirs[direction].ids_unknown = True

    def tuned(self, frame_max: int) -> None:
        # frames above the negotiated size are anomalies from here on
        self.frame_limit = min(max(frame_max, SPEC.CONSTANTS.get("MIN-MAX-FRAME-SIZE", 4096)), HARD_MAX_FRAME)

    # -- losses ----------------------------------------------------------------------------

    def _gap(self, direction: int, d: _Direction, offset: int, size: int) -> None:
        """A loss inside a frame whose header was read keeps the framing: the frame's end is
        a provable boundary, skipped to exactly."""
        if d.base < 0:  # nothing seen yet: the stream starts unknown
            d.base = offset + size
            self.report_anomaly(direction, offset, "gap", f"{size} bytes lost before any data", None, size)
            self._lose_sync(direction, d, offset + size, "gap before any data")
            return
        end = d.base + len(d.buf)
        if offset < end:  # part of the "gap" was seen: only the rest is lost
            size -= end - offset
            offset = end
            if size <= 0:
                return
        elif offset > end:
            size += offset - end
            offset = end
        gap_end = offset + size
        left = len(d.buf) - d.pos

        def lost(detail: str, skipped: int, channel=None) -> None:
            self.report_anomaly(direction, offset, "gap", detail, channel, skipped)
            d.reset(gap_end)

        if d.resync:
            skipped = end - d.resync_from
            lost(f"{size} bytes lost while resynchronising", size)
            if skipped > 0:
                detail = f"{skipped} bytes before a gap hold no provable frame boundary"
                self.report_anomaly(direction, d.resync_from, "resync", detail, None, skipped)
            d.resync_from = gap_end
            return
        if d.skip and size <= d.skip:
            d.skip -= size
            # these bytes were counted when the frame was found damaged
            lost(f"{size} bytes lost inside a frame already damaged by a gap", 0)
            return
        if d.skip:
            lost_tail, d.skip = d.skip, 0  # counted by the anomaly of the gap that damaged the frame
            lost(f"{size} bytes lost; the next frame boundary with them", size - lost_tail)
        elif left >= 12:
            flags, stype, fsize, _r, track, channel = _FRAME_HDR.unpack_from(d.buf, d.pos)
            fstart = d.base + d.pos
            frame_end = fstart + fsize
            # A partial frame with a readable header: its end is a provable boundary
            # if the gap does not reach past it.
            _damaged_frame(self, direction, d, flags, stype, fsize, track, channel, fstart)
            if frame_end >= gap_end:
                tail = frame_end - gap_end
                lost(
                    f"{size} bytes lost inside a {SEGMENT_NAMES[stype]} frame of {fsize} bytes at "
                    f"{fstart} on channel {channel}; the {left} bytes before and {tail} bytes after "
                    f"the gap of that frame are discarded; in sync again at {frame_end}",
                    size + left + tail,
                    channel,
                )
                d.skip = tail
                return
            lost(
                f"{size} bytes lost, taking the end of a frame at {fstart} and the next frame "
                f"boundary; {left} bytes of the frame discarded",
                size + left,
                channel,
            )
        else:
            header = f"; {left} bytes of a frame header before it discarded" if left else ""
            lost(f"{size} bytes lost{header}", size + left)
        self._lose_sync(direction, d, gap_end, "gap")

    def _finish_direction(self, direction: int, d: _Direction) -> None:
        self._drop_segments(
            direction,
            "truncated-stream",
            True,
            lambda t, n: f"stream ends inside a {t} segment ({n} bytes of it captured)",
        )

    def _drop_segments(self, direction: int, kind: str, begun: bool, detail) -> None:
        """Segments in progress are lost: an anomaly for each that holds bytes (``begun``: or frames)."""
        segs = self.segs[direction]
        for key in sorted(segs):
            s = segs[key]
            if s.length or (begun and s.frames):
                self.report_anomaly(
                    direction, s.offset, kind, detail(SEGMENT_NAMES[s.type], s.length), key >> 4, s.length
                )
        segs.clear()

    def _lost(self, direction: int, d: _Direction, why: str) -> None:
        """Frames may have been lost anywhere: forget segments and command numbering."""
        d.ids_unknown = True
        # every byte buffered now arrived by this packet: frames in them completed here
        d.marks = [(d.base + len(d.buf), d.packet, d.ts)]
        for ch in d.next_cmd:
            d.next_cmd[ch] = None
        self._drop_segments(
            direction,
            "incomplete-segment",
            False,
            lambda t, n: f"{t} segment cut by a {why} ({n} bytes discarded)",
        )

    # -- framing -----------------------------------------------------------------------------

    def _probe(self, buf, p: int, n: int, final: bool) -> int:
        """A boundary is proven by a strictly valid frame header followed, where its size
        says, by another one (or, at the end of the capture, by the end)."""
        limit = self.frame_limit
        size = frame_ok_0_10(buf, p, limit)
        if not size:
            return -1
        q = p + size
        if q + 12 <= n:
            return 1 if frame_ok_0_10(buf, q, limit) else -1
        if final:
            return 1 if q == n else -1
        return 0

    def _resync_detail(self, at: int, skipped: int) -> str:
        return f"resynchronised at stream offset {at} after {skipped} undecodable bytes"

    def _frames(self, direction: int, d: _Direction, pos: int) -> int:
        buf = d.buf
        n = len(buf)
        unpack = _FRAME_HDR.unpack_from
        limit = self.frame_limit
        events = self.events
        segs = self.segs[direction]
        while n - pos >= 12:
            flags, stype, size, _r, track, channel = unpack(buf, pos)
            if flags & 0xF0 or stype > 3 or size < 12 or size > limit:
                off = d.base + pos
                if size > limit and not (flags & 0xF0 or stype > 3):
                    self.report_anomaly(
                        direction,
                        off,
                        "oversize-frame",
                        f"frame of {size} bytes exceeds the negotiated max-frame-size {limit}",
                        channel,
                    )
                else:
                    self.report_anomaly(
                        direction,
                        off,
                        "malformed-frame",
                        f"invalid frame header {bytes(buf[pos : pos + 12]).hex()}",
                        channel,
                    )
                self._lose_sync(direction, d, off, "malformed frame")
                return pos + 1
            end = pos + size
            if end > n:
                break
            offset = d.base + pos
            if d.marks:
                d.packet_of(offset + size)
            if self._counted(direction, d):
                events.append(
                    (
                        direction,
                        Frame(d.packet, d.ts, offset, channel, stype, SEGMENT_NAMES[stype], size - 12, size),
                    )
                )
            key = (channel << 4) | track
            if stype == 3:
                self.decode_body_frame(direction, d, key, channel, flags, buf, pos + 12, end, offset)
            elif flags & 3 == 3 and key not in segs:
                # the common case: a segment in one frame
                SEGMENT_READERS[stype](
                    self, direction, d, key, channel, flags, bytes(buf[pos + 12 : end]), offset, size - 12
                )
            else:
                self._frame_part(direction, d, key, channel, stype, flags, buf, pos + 12, end, offset)
            pos = end
            limit = self.frame_limit
        return pos

    def _frame_part(self, direction, d, key, channel, stype, flags, buf, start, end, offset) -> None:
        """A frame of a segment spanning several frames (control / command / header)."""
        segs = self.segs[direction]
        s = segs.get(key)
        n = end - start
        if flags & 2:
            if s is not None:
                if s.length or not s.dropped:
                    _unended_segment(self, direction, s, channel)
            s = segs[key] = _Segment(stype, offset)
        elif s is None:
            if self._orphan(direction, d, key, channel, offset, n + 12, f"{SEGMENT_NAMES[stype]} frame"):
                return
            s = segs[key] = _Segment(stype, offset)
            s.dropped = True
            s.why = "continuation frames without a first frame"
        elif s.type != stype:
            self.report_anomaly(
                direction,
                s.offset,
                "bad-segment-sequence",
                f"{SEGMENT_NAMES[stype]} frame inside a {SEGMENT_NAMES[s.type]} segment",
                channel,
                s.length,
            )
            s.dropped = True
            s.why = "segment type changed between frames"
            s.type = stype
        s.frames += 1
        s.length += n
        if not s.dropped:
            if s.length > MAX_SEGMENT:
                s.dropped = True
                s.why = f"segment longer than {MAX_SEGMENT} bytes"
                s.parts = []
            else:
                s.parts.append(bytes(buf[start:end]))
        if flags & 1:
            del segs[key]
            if s.dropped:
                self.report_anomaly(
                    direction,
                    s.offset,
                    "oversize-segment" if "longer" in s.why else "bad-segment-sequence",
                    f"{SEGMENT_NAMES[s.type]} segment not decoded: {s.why}",
                    channel,
                    s.length,
                )
                if s.type == 1 and "without a first" not in s.why:
                    d.take_command_id(channel)
                p = self.pending[direction].get(key)
                if p is not None and flags & 4:
                    p.damaged = True
                    self._assembled(direction, p)
                return
            data = s.parts[0] if len(s.parts) == 1 else b"".join(s.parts)
            SEGMENT_READERS[s.type](self, direction, d, key, channel, flags, data, s.offset, s.length)

    # -- assemblies ------------------------------------------------------------------------

    def _start_pending(self, direction, key, method, offset):
        p = self._start_content(direction, key, key >> 4, method, offset)
        p.props = {}  # the header's structs by qualified name
        p.unknown = []
        return p

    def _assembled(self, direction, p) -> None:
        """The assembly ended (its last segment's last frame)."""
        self.end_content(
            direction,
            p,
            not p.damaged,
            f"{p.method.name}: {p.why}" if p.damaged and p.method is not None else None,
        )

    def decode_body_frame(self, direction, d, key, channel, flags, buf, start, end, offset) -> None:
        n = end - start
        p = self.pending[direction].get(key)
        if p is None and self._orphan(direction, d, key, channel, offset, n + 12, "body frame"):
            return
        if p is None:
            self.report_anomaly(
                direction, offset, "bad-segment-sequence", "body frame without a command", channel, n
            )
            if not flags & 4 or not flags & 1:
                self._start_pending(direction, key, None, offset).why = "body frames without a command"
                self.pending[direction][key].absorbed = 0
            return
        self._body(p, buf, start, end)
        if flags & 5 == 5:
            self._assembled(direction, p)

    _content_view = staticmethod(_content_view)


# --- segment readers (h11 style: one function per segment type, handed in as a table) ------


def _unended_segment(dec, direction: int, s: _Segment, channel: int) -> None:
    """A new segment began on a track before ``s`` had its last frame."""
    dec.report_anomaly(
        direction,
        s.offset,
        "bad-segment-sequence",
        f"{SEGMENT_NAMES[s.type]} segment without its last frame",
        channel,
        s.length,
    )


def _damaged_frame(dec, direction, d, flags, stype, fsize, track, channel, fstart) -> None:
    """A frame whose payload was (partly) lost: keep segments, assemblies and command ids right."""
    key = (channel << 4) | track
    if stype == 3:
        p = dec.pending[direction].get(key)
        if p is not None:
            p.damaged = True
            p.frames += 1
            p.why = "body bytes lost in a gap"
            if flags & 5 == 5:  # last frame of the last segment: the assembly ends here
                dec._assembled(direction, p)
        return
    segs = dec.segs[direction]
    s = segs.get(key)
    if flags & 2:  # first frame of a segment
        if s is not None and s.length:
            _unended_segment(dec, direction, s, channel)
        s = segs[key] = _Segment(stype, fstart)
        if stype == 1:  # a command was lost: it still took a command id
            d.take_command_id(channel)
            if not flags & 4:
                dec._start_pending(direction, key, None, fstart)
        elif stype == 2 and (p := dec.pending[direction].get(key)) is not None:
            p.damaged = True
            p.why = "header segment lost in a gap"
    if s is not None:
        s.dropped = True
        s.why = "lost in a gap"
        s.frames += 1
        if flags & 1:
            del segs[key]
            if s.length:
                dec.report_anomaly(
                    direction,
                    s.offset,
                    "incomplete-segment",
                    f"{SEGMENT_NAMES[s.type]} segment damaged by a gap",
                    channel,
                    s.length,
                )
            if stype == 2 and flags & 4 and (p := dec.pending[direction].get(key)) is not None:
                p.damaged = True
                dec._assembled(direction, p)


def _read_control(dec, direction, d, key, channel, flags, data, offset, length) -> None:
    if length < 2:
        dec.report_anomaly(
            direction, offset, "malformed-control", f"control segment of {length} bytes", channel, length
        )
        return
    entry = _CONTROLS.get((data[0], data[1]))
    if entry is None:
        dec.report_anomaly(
            direction,
            offset,
            "unknown-control",
            f"class {data[0]} control {data[1]} is not defined in AMQP 0-10",
            channel,
            length,
        )
        return
    op, fields = entry
    try:
        args, off = _decode_packed(data, 2, length, fields, 2, 0)
    except (DecodeError, StructError, IndexError, ValueError) as e:
        dec.report_anomaly(direction, offset, "malformed-control", f"{op.name}: {e}", channel, length)
        return
    if off != length:
        dec.report_anomaly(
            direction,
            offset,
            "malformed-control",
            f"{op.name}: {length - off} bytes after the last argument",
            channel,
            length - off,
        )
    m = Method(
        d.packet, d.ts, offset, channel, op.class_code, op.code, op.name, args, op.synchronous, False, length
    )
    dec._method(direction, m)
    if op.class_code <= 2:
        _session(dec, direction, d, m)


def _read_command(dec, direction, d, key, channel, flags, data, offset, length) -> None:
    dec.fresh_channel(direction, d, key)
    pend = dec.pending[direction]
    if key in pend:
        dec._abort_one(direction, pend[key], "a new command began before its assembly ended")
    cmd_id = d.take_command_id(channel)
    entry = _COMMANDS.get((data[0], data[1])) if length >= 2 else None
    if entry is None:
        if length < 2:
            dec.report_anomaly(
                direction, offset, "malformed-command", f"command segment of {length} bytes", channel, length
            )
        else:
            dec.report_anomaly(
                direction,
                offset,
                "unknown-command",
                f"class {data[0]} command {data[1]} is not defined in AMQP 0-10",
                channel,
                length,
            )
        if not flags & 4:
            dec._start_pending(direction, key, None, offset).why = "segments of an undecodable command"
        return
    op, fields = entry
    try:
        if length < 3:
            raise _short("session header", 2, 1, length)
        hs = data[2]
        sync = bool(hs and length > 3 and data[3] & 1)
        args, off = _decode_packed(data, 3 + hs, length, fields, 2, 0)
    except (DecodeError, StructError, IndexError, ValueError) as e:
        dec.report_anomaly(direction, offset, "malformed-command", f"{op.name}: {e}", channel, length)
        if not flags & 4:
            dec._start_pending(direction, key, None, offset).why = f"segments of a malformed {op.name}"
        return
    if off != length:
        dec.report_anomaly(
            direction,
            offset,
            "malformed-command",
            f"{op.name}: {length - off} bytes after the last argument",
            channel,
            length - off,
        )
    answers = args.get("command-id") if op.class_code == 3 and op.code in (2, 3) else None
    m = Method(
        d.packet,
        d.ts,
        offset,
        channel,
        op.class_code,
        op.code,
        op.name,
        args,
        op.synchronous or sync,
        op.segments is not None,
        length,
        cmd_id,
        answers,
    )
    dec._method(direction, m)
    if op.segments is not None:
        p = dec._start_pending(direction, key, m, offset)
        if flags & 4:  # the command segment is the whole assembly: empty content
            dec._assembled(direction, p)
    elif not flags & 4:
        dec._start_pending(direction, key, None, offset).why = f"segments after {op.name}, which has none"


def _read_header(dec, direction, d, key, channel, flags, data, offset, length) -> None:
    p = dec.pending[direction].get(key)
    if p is None and dec._orphan(direction, d, key, channel, offset, length, "header segment"):
        return
    if p is None:
        dec.report_anomaly(
            direction, offset, "bad-segment-sequence", "header segment without a command", channel, length
        )
        if not flags & 4:
            dec._start_pending(direction, key, None, offset).why = "segments after an orphan header"
        return
    if p.method is None:
        p.absorbed += length
    else:
        p.header_packet = d.packet
        off = 0
        try:
            while off < length:
                if off + 6 > length:
                    raise _short("header entry", off, 6, length)
                size = _U32.unpack_from(data, off)[0]
                e = off + 4 + size
                if e > length or size < 2:
                    raise DecodeError(f"header entry of {size} bytes at {off} in a {length}-byte segment")
                ck = (data[off + 4], data[off + 5])
                comp = _CODED.get(ck)
                if comp is None:
                    p.unknown.append(
                        {"class-code": ck[0], "struct-code": ck[1], "raw": bytes(data[off + 6 : e])}
                    )
                    dec.report_anomaly(
                        direction,
                        offset,
                        "unknown-struct",
                        f"header entry with unknown struct code {ck[0]}.{ck[1]} kept as raw bytes",
                        channel,
                    )
                else:
                    v, q = _decode_packed(data, off + 6, e, comp[1], comp[2], 1)
                    if q != e:
                        raise DecodeError(f"{comp[0]} ends at {q}, its size says {e}")
                    p.props[comp[0]] = v
                off = e
        except (DecodeError, StructError, IndexError, ValueError) as ex:
            dec.report_anomaly(
                direction,
                offset,
                "malformed-header",
                f"{p.method.name} header segment: {ex}",
                channel,
                length - off,
            )
            p.damaged = True
            p.why = "malformed header segment"
        mp = p.props.get("message.message-properties") or {}
        dp = p.props.get("message.delivery-properties") or {}
        if "content-length" in mp or "timestamp" in dp:
            dec.report_unfit_content(
                direction, offset, channel, mp.get("content-length"), dp.get("timestamp")
            )
    if flags & 4:
        dec._assembled(direction, p)


def _session(dec, direction: int, d: _Direction, m: Method) -> None:
    name, a = m.name, m.args
    if name == "connection.heartbeat":
        dec.events.append((direction, Heartbeat(m.packet, m.ts, m.offset, m.channel)))
    elif name == "session.command-point":
        if "command-id" in a:
            d.next_cmd[m.channel] = a["command-id"]
    elif name in ("session.attach", "session.attached"):
        # This side (re)starts its numbering on the channel; a resumed session
        # follows with session.command-point before its first command.
        d.next_cmd[m.channel] = 0


SEGMENT_READERS = (_read_control, _read_command, _read_header)  # by segment type 0-2
