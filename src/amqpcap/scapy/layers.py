"""The AMQP layer classes, generated from the spec tables (amqpcap.amqp.spec).

One frame is one layer; the frames of a packet are a chain of layers.  ``AMQP``
decides which class a frame gets (``dispatch_hook``): the protocol header, a
0-8/0-9/0-9-1 method frame of the conversation's version (one class per
method, its arguments as fields), a content header (one class per content
class, its properties as conditional fields), a body or heartbeat frame, a 0-10
control or command whose segment lies in one frame (one class per operation),
any other 0-10 frame, ``AMQPFragment`` for the bytes of a frame cut by the end
of the packet (or continuing one from an earlier packet), ``TLSRecords`` for TLS
on 5671, ``AMQPUndissected`` after ``MAX_CHAIN`` frames.  A method frame whose
arguments do not decode by the specification is an ``AMQPMethod``: its method
name, the undecoded arguments in ``data``.

Field names are the specification's, with ``-`` written ``_`` (``reply_code``) and a
``_`` after a Python keyword or a scapy Packet attribute (``global_``, ``name_``);
frame header fields are named so that no argument collides with them
(``frame_type``, ``channel``, ``size``, ``class_index``, ``method_index``,
``frame_end``; 0-10: ``flags``, ``segment_type``, ``track``, ``class_index``, ``op_index`` ...).
"""

from __future__ import annotations

import keyword
import struct
from collections import OrderedDict
from functools import cache

from scapy.fields import (
    ByteEnumField,
    ByteField,
    ConditionalField,
    FlagsField,
    IntField,
    LEShortField,
    LongField,
    ShortField,
    StrField,
    StrFixedLenField,
    StrLenField,
    XByteField,
    XShortField,
)
from scapy.packet import Packet, Raw

from amqpcap.amqp import codec_1_0, detect, spec
from amqpcap.amqp.facts import SECRET_ARGS
from amqpcap.scapy.fields import (
    PackBitField,
    PackedBitField,
    SecretBytesField,
    SecretValue010Field,
    Value010Field,
    field_09,
)
from amqpcap.scapy.layers_1_0 import frame_layer, whole_frame

FRAME_END = 0xCE
DEFAULT_VERSION = "0-9-1"  # a 0-8/0-9 conversation is recognised by its protocol header
VERSIONS_09 = ("0-8", "0-9", "0-9-1")
MAX_CHAIN = 100  # frames dissected per packet: scapy dissects a chain by recursion
VERSIONS_10 = ("1.0", "1.0-sasl", "1.0-tls")  # the 1.0 protocol headers: AMQP, SASL, TLS
MAX_CONVERSATIONS = 4096  # protocol headers remembered (per TCP conversation) for the version

_FRAME_TYPES = {**spec.get("0-8").FRAME_TYPES, **spec.get("0-9-1").FRAME_TYPES}
_S10 = spec.get("0-10")
_U16, _U32 = struct.Struct(">H"), struct.Struct(">I")


def field_name(spec_name: str) -> str:
    """The scapy field name of a specification name."""
    n = spec_name.replace("-", "_")
    # a Python keyword (basic.qos "global") or a Packet attribute (0-10 "name") gets a "_"
    return n + "_" if keyword.iskeyword(n) or hasattr(Packet, n) else n


# -- which version a conversation speaks -----------------------------------------------------

_conversations: OrderedDict = OrderedDict()


def _conversation_key(tcp):
    ip = tcp.underlayer
    if ip is None or not hasattr(ip, "src"):
        return None
    return frozenset(((ip.src, tcp.sport), (ip.dst, tcp.dport)))


def remember_version(tcp, version: str) -> None:
    """Frames of the conversation of the TCP layer ``tcp`` are dissected as ``version``."""
    key = _conversation_key(tcp)
    if key is None:
        return
    _conversations[key] = version
    _conversations.move_to_end(key)
    while len(_conversations) > MAX_CONVERSATIONS:
        _conversations.popitem(last=False)


def known_version(tcp) -> str | None:
    """The version of the conversation of ``tcp`` if its protocol header was dissected."""
    key = _conversation_key(tcp)
    return _conversations.get(key) if key is not None else None


def _version_for(under, data: bytes) -> str:
    if isinstance(under, AMQP):
        return under.version
    if isinstance(under, AMQPProtocolHeader):
        v = under.protocol_version
        if v in spec.VERSIONS or v in VERSIONS_10:
            return v
    elif under is not None and under.name == "TCP":
        v = known_version(under)
        if v is not None:
            return v
    # No header seen: the framing tells 0-10 and 1.0 from the others (as mid-stream detection does).
    if detect.chain_0_9(data, 0) < 0 and codec_1_0.chain(data, 0) > 0:
        return "1.0"
    if detect.chain_0_9(data, 0) < 0 and detect.chain_0_10(data, 0) >= 0:
        return "0-10"
    return DEFAULT_VERSION


# -- base classes ---------------------------------------------------------------------------


class _ChosenByAMQP:
    """Classes ``AMQP(...)`` may return: they accept its ``method`` / ``version`` arguments, which
    chose the class (``dispatch_hook``) and are not fields."""

    def __init__(self, *args, method=None, version=None, **fields):
        super().__init__(*args, **fields)


class AMQP(_ChosenByAMQP, Packet):
    """An AMQP frame; ``AMQP(bytes)`` picks the class of the frame (see the module docstring).

    Build with ``AMQP(method="basic.publish", channel=1, exchange="ex", ...)`` (``version=``
    for another version than 0-9-1), ``AMQPBody(data=...)``, ``AMQPHeartbeat()``, the
    content header class of ``header_class(version, class_id)``; chain frames with ``/``.
    """

    name = "AMQP frame"
    match_subclass = True
    version = DEFAULT_VERSION
    method = None  # "class.method" of method frames (0-10: controls and commands)
    fields_desc = [
        ByteEnumField("frame_type", 1, _FRAME_TYPES),
        ShortField("channel", 0),
        IntField("size", None),
        StrLenField("data", b"", length_from=lambda p: p.size),
        XByteField("frame_end", FRAME_END),
    ]

    @classmethod
    def dispatch_hook(cls, _pkt=None, *args, **kw):
        if _pkt:
            return _dispatch(bytes(_pkt), kw.get("_underlayer"), kw.get("version"))
        method = kw.get("method")
        if method:
            return method_class(kw.get("version") or DEFAULT_VERSION, method)
        if kw.get("version") == "0-10":
            return AMQP010
        return cls

    @property
    def arguments(self) -> dict:
        """The method's arguments (or content properties) by their specification names."""
        return {self._spec_names.get(k, k): v for k, v in self.fields.items() if k in self._spec_names}

    _spec_names: dict = {}  # field name -> specification name, of the arguments

    def post_build(self, pkt, pay):
        if self.size is None:
            pkt = pkt[:3] + _U32.pack(len(pkt) - 8) + pkt[7:]
        return pkt + pay

    def guess_payload_class(self, payload):
        if self.frame_end != FRAME_END:
            return Raw  # lost the framing: the rest is not frames
        return AMQP

    def mysummary(self):
        what = self.method or _FRAME_TYPES.get(self.frame_type, self.frame_type)
        return f"AMQP {self.version} ch{self.channel} {what}"


class AMQPMethod(AMQP):
    """A method frame whose arguments are not decoded (unknown method, or arguments that do
    not fit the specification's layout: ``data`` holds them)."""

    name = "AMQP method (arguments not decoded)"
    fields_desc = AMQP.fields_desc[:3] + [
        ShortField("class_index", 0),
        ShortField("method_index", 0),
        StrLenField("data", b"", length_from=lambda p: p.size - 4),
        XByteField("frame_end", FRAME_END),
    ]

    @property
    def method(self):
        s = method_spec(self.version, self.class_index, self.method_index)
        return s.name if s else f"{self.class_index}.{self.method_index}"


class AMQPBody(AMQP):
    name = "AMQP body"
    fields_desc = [ByteEnumField("frame_type", 3, _FRAME_TYPES)] + AMQP.fields_desc[1:]


class AMQPHeartbeat(AMQP):
    name = "AMQP heartbeat"
    fields_desc = [
        ByteEnumField("frame_type", 8, _FRAME_TYPES),
        ShortField("channel", 0),
        IntField("size", None),
        XByteField("frame_end", FRAME_END),
    ]


class AMQPProtocolHeader(_ChosenByAMQP, Packet):
    """The protocol header ``AMQP`` + 4 octets naming the version; 0-9-1 writes
    0, 0, 9, 1 (protocol id, major, minor, revision); 0-8, 0-9, 0-10 write 1, 1 (class,
    instance) and the version."""

    name = "AMQP protocol header"
    fields_desc = [
        StrFixedLenField("magic", b"AMQP", 4),
        ByteField("protocol_class", 0),
        ByteField("protocol_instance", 0),
        ByteField("version_major", 9),
        ByteField("version_minor", 1),
    ]

    @property
    def protocol_version(self) -> str | None:
        return detect.header_version(
            b"AMQP"
            + bytes((self.protocol_class, self.protocol_instance, self.version_major, self.version_minor))
        )

    def post_dissect(self, s):
        v = self.protocol_version
        known = v in spec.VERSIONS or v in VERSIONS_10
        if known and self.underlayer is not None and self.underlayer.name == "TCP":
            remember_version(self.underlayer, v)
        return s

    def guess_payload_class(self, payload):
        return AMQP

    def mysummary(self):
        return f"AMQP protocol header {self.protocol_version or 'unknown'}"


class AMQPFragment(_ChosenByAMQP, Packet):
    """Bytes that are not a whole frame: a frame cut by the end of the packet (its rest is in
    the next TCP segment), or the continuation of a frame that began in an earlier one."""

    name = "AMQP fragment"
    fields_desc = [StrField("data", b"")]

    def mysummary(self):
        return f"AMQP fragment of {len(self.data)} bytes"


class AMQPUndissected(_ChosenByAMQP, Packet):
    """The frames of a packet after the first ``MAX_CHAIN`` (scapy dissects a chain of layers
    by recursion; thousands of small frames in one packet would exhaust the stack)."""

    name = f"AMQP frames after the first {MAX_CHAIN} (not dissected)"
    fields_desc = [StrField("data", b"")]


class TLSRecords(_ChosenByAMQP, Raw):
    """TLS records where AMQP was expected (AMQPS on 5671): not decoded."""

    name = "TLS (not decoded)"


class AMQP10(frame_layer(AMQP)):
    """An AMQP 1.0 frame: the header's fields, the performative decoded (``method``,
    ``arguments``, ``message_bytes``; amqpcap.scapy.layers_1_0)."""

    def guess_payload_class(self, payload):
        return AMQP  # the next frame of the packet (dispatched as 1.0: this frame's version)


# -- 0-8 / 0-9 / 0-9-1 classes from the tables -----------------------------------------------


def _class_name(version: str, name: str) -> str:
    return "AMQP_" + version.replace("-", "_") + "_" + name.replace(".", "_").replace("-", "_")


def _fields_09(fields, secret: str | None = None) -> list:
    """scapy fields of ((name, type), ...) in wire order; runs of bits share octets; the
    argument named ``secret`` redacted when shown."""
    out = []
    i = 0
    while i < len(fields):
        name, t = fields[i]
        if t == "bit":
            j = i
            while j < len(fields) and fields[j][1] == "bit":
                j += 1
            out += [PackedBitField(field_name(fields[k][0]), False, k - i, j - i) for k in range(i, j)]
            i = j
        elif name == secret:
            out.append(SecretBytesField(field_name(name), b"", 4 if t == "longstr" else 1))
            i += 1
        else:
            out.append(field_09(field_name(name), t))
            i += 1
    return out


@cache
def _method_table_09(version: str) -> dict:
    # As the 0-9 codec looks methods up: the version's own table, then 0-9-1's for what it
    # lacks (RabbitMQ answers 0-8 and 0-9 clients with 0-9-1 extensions).
    own = spec.get(version).METHODS
    return {**spec.get("0-9-1").METHODS, **own} if version != "0-9-1" else dict(own)


def _make_method_09(version: str, key, ms) -> type:
    cid, mid = key
    return type(
        _class_name(version, ms.name),
        (AMQP,),
        {
            "name": f"AMQP {version} {ms.name}",
            "version": version,
            "method": ms.name,
            "_spec_names": {field_name(n): n for n, _ in ms.fields},
            "fields_desc": AMQP.fields_desc[:3]
            + [ShortField("class_index", cid), ShortField("method_index", mid)]
            + _fields_09(ms.fields, SECRET_ARGS.get(ms.name))
            + [XByteField("frame_end", FRAME_END)],
        },
    )


class _ContentHeader(AMQP):
    """Base of the content header classes: fills the property flags when building."""

    name = "AMQP content header"
    _props: tuple = ()

    def post_build(self, pkt, pay):
        if self.property_flags is None:
            flags = 0
            for i, (n, _t) in enumerate(self._props):
                if self.getfieldval(field_name(n)) is not None:
                    flags |= 1 << (15 - i)
            pkt = pkt[:19] + _U16.pack(flags) + pkt[21:]
        return super().post_build(pkt, pay)


def _present(bit: int, fname: str):
    def cond(pkt):
        flags = pkt.property_flags
        return bool(flags & bit) if flags is not None else pkt.getfieldval(fname) is not None

    return cond


def _make_header_09(version: str, cid: int, props) -> type:
    cname = spec.get(version).CLASSES.get(cid, str(cid))
    fields = [
        ConditionalField(field_09(field_name(n), t), _present(1 << (15 - i), field_name(n)))
        for i, (n, t) in enumerate(props)
    ]
    for f in fields:
        f.fld.default = None
    return type(
        _class_name(version, cname + ".header"),
        (_ContentHeader,),
        {
            "name": f"AMQP {version} {cname} content header",
            "version": version,
            "_props": props,
            "_spec_names": {field_name(n): n for n, _ in props},
            "fields_desc": [
                ByteEnumField("frame_type", 2, _FRAME_TYPES),
                ShortField("channel", 0),
                IntField("size", None),
                ShortField("class_index", cid),
                ShortField("weight", 0),
                LongField("body_size", 0),
                XShortField("property_flags", None),
            ]
            + fields
            + [XByteField("frame_end", FRAME_END)],
        },
    )


# -- 0-10 -----------------------------------------------------------------------------------

_FLAGS_010 = ["last_frame", "first_frame", "last_segment", "first_segment", "r4", "r5", "v0", "v1"]


class AMQP010(AMQP):
    """An AMQP 0-10 frame: 12-octet header and a part of a segment (``data``); frames holding a
    whole control or command segment get the class of the operation instead."""

    name = "AMQP 0-10 frame"
    version = "0-10"
    fields_desc = [
        FlagsField("flags", 0x0F, 8, _FLAGS_010),
        ByteEnumField("segment_type", 0, _S10.SEGMENT_TYPES),
        ShortField("size", None),
        ByteField("reserved1", 0),
        ByteEnumField("track", 0, _S10.TRACKS),
        ShortField("channel", 0),
        IntField("reserved2", 0),
        StrLenField("data", b"", length_from=lambda p: p.size - 12),
    ]
    _flags_at = None  # offset of the packing flags of an operation's arguments
    _masks: tuple = ()

    def post_build(self, pkt, pay):
        if self._flags_at is not None and self.packing_flags is None:
            flags = 0
            for mask, fname, is_bit in self._masks:
                v = self.getfieldval(fname)
                if v if is_bit else v is not None:
                    flags |= mask
            pkt = pkt[: self._flags_at] + struct.pack("<H", flags) + pkt[self._flags_at + 2 :]
        if self.size is None:
            pkt = pkt[:2] + _U16.pack(len(pkt)) + pkt[4:]
        return pkt + pay

    def guess_payload_class(self, payload):
        return AMQP

    def mysummary(self):
        what = self.method or _S10.SEGMENT_TYPES.get(self.segment_type, self.segment_type)
        return f"AMQP 0-10 ch{self.channel} {what}"


def _cond010(mask: int, fname: str):
    def cond(pkt):
        flags = pkt.packing_flags
        return bool(flags & mask) if flags is not None else pkt.getfieldval(fname) is not None

    return cond


def _make_op_010(op) -> type:
    control = op.kind == "control"
    head = [
        FlagsField("flags", 0x0F, 8, _FLAGS_010),
        ByteEnumField("segment_type", 0 if control else 1, _S10.SEGMENT_TYPES),
        ShortField("size", None),
        ByteField("reserved1", 0),
        ByteEnumField("track", 0 if control else 1, _S10.TRACKS),
        ShortField("channel", 0),
        IntField("reserved2", 0),
        ByteField("class_index", op.class_code),
        ByteField("op_index", op.code),
    ]
    if not control:
        head += [ByteField("session_header_size", 1), FlagsField("session_flags", 0, 8, ["sync"])]
    head.append(LEShortField("packing_flags", None))
    args, masks = [], []
    for i, f in enumerate(op.fields):
        n = field_name(f.name)
        if f.type == "bit":
            args.append(PackBitField(n, 1 << i))
        else:
            field = (SecretValue010Field if SECRET_ARGS.get(op.name) == f.name else Value010Field)(n, f.type)
            args.append(ConditionalField(field, _cond010(1 << i, n)))
        masks.append((1 << i, n, f.type == "bit"))
    return type(
        _class_name("0-10", op.name),
        (AMQP010,),
        {
            "name": f"AMQP 0-10 {op.name}",
            "method": op.name,
            "_flags_at": 14 if control else 16,
            "_masks": tuple(masks),
            "_spec_names": {field_name(f.name): f.name for f in op.fields},
            "fields_desc": head + args,
        },
    )


# -- the class tables ---------------------------------------------------------------------------

METHOD_CLASSES = {
    v: {k: _make_method_09(v, k, ms) for k, ms in _method_table_09(v).items()} for v in VERSIONS_09
}
HEADER_CLASSES = {
    v: {cid: _make_header_09(v, cid, props) for cid, props in spec.get(v).PROPERTIES.items()}
    for v in VERSIONS_09
}
OP_CLASSES_010 = {
    (op.kind, op.class_code, op.code): _make_op_010(op)
    for op in (*_S10.CONTROLS.values(), *_S10.COMMANDS.values())
}
_BY_NAME = {v: {c.method: c for c in METHOD_CLASSES[v].values()} for v in VERSIONS_09}
_BY_NAME["0-10"] = {c.method: c for c in OP_CLASSES_010.values()}


def method_spec(version: str, class_id: int, method_id: int):
    """The MethodSpec a ``version`` conversation gives (class_id, method_id), or None."""
    return _method_table_09(version).get((class_id, method_id)) if version in VERSIONS_09 else None


def method_class(version: str, name: str) -> type:
    """The layer class of method (0-10: control or command) ``name`` of ``version``."""
    try:
        return _BY_NAME[version][name]
    except KeyError:
        raise ValueError(f"AMQP {version} has no method {name!r}") from None


def header_class(version: str, class_id: int = 60) -> type:
    """The content header class of content class ``class_id`` (60: basic) of ``version``."""
    return HEADER_CLASSES[version][class_id]


# -- dispatch -------------------------------------------------------------------------------------


def _exactly(cls, frame: bytes) -> bool:
    """``frame`` dissects with ``cls`` using every byte (arguments fit the specification)."""
    try:
        p = cls(frame, _internal=1)
    except Exception:  # any field error: the arguments do not fit
        return False
    return p.raw_packet_cache is not None and len(p.raw_packet_cache) == len(frame)


def _depth(under) -> int:
    n = 0
    while isinstance(under, AMQP):
        n += 1
        under = under.underlayer
    return n


def _dispatch(data: bytes, under, version: str | None = None) -> type:
    if isinstance(under, AMQP) and _depth(under) >= MAX_CHAIN:
        return AMQPUndissected
    if data[:4] == b"AMQP"[: len(data)]:
        return AMQPProtocolHeader if len(data) >= 8 else AMQPFragment
    version = version or _version_for(under, data)
    if version == "0-10":
        return _dispatch_010(data)
    if version == "1.0-tls":
        return TLSRecords  # after the TLS protocol header, TLS records
    if version in VERSIONS_10:
        return AMQP10 if whole_frame(data) else AMQPFragment
    if detect.is_tls(data):
        return TLSRecords  # AMQPS (5671): TLS records, not frames
    if len(data) < 7:
        return AMQPFragment
    size = _U32.unpack_from(data, 3)[0]
    end = 8 + size
    if len(data) < end or detect.chain_0_9(data[:end], 0) < 0:
        # cut by the end of the packet, or not a frame start: the continuation of a frame
        # that began in an earlier segment (scapy sees one packet at a time)
        return AMQPFragment
    ftype = data[0]
    if ftype == 1 and size >= 4:
        cls = METHOD_CLASSES[version].get((_U16.unpack_from(data, 7)[0], _U16.unpack_from(data, 9)[0]))
        return cls if cls is not None and _exactly(cls, data[:end]) else AMQPMethod
    if ftype == 2 and size >= 14:
        cls = HEADER_CLASSES[version].get(_U16.unpack_from(data, 7)[0])
        return cls if cls is not None and _exactly(cls, data[:end]) else AMQP
    if ftype == 3:
        return AMQPBody
    if ftype == 8 and size == 0:
        return AMQPHeartbeat
    return AMQP


def _dispatch_010(data: bytes) -> type:
    if len(data) < 12:
        return AMQPFragment
    size = detect.frame_ok_0_10(data, 0)
    if not size or len(data) < size:
        return AMQPFragment  # cut by the end of the packet, or the continuation of a frame
    flags, stype = data[0], data[1]
    if flags & 0x03 == 0x03 and stype in (0, 1) and size >= 14:  # a whole segment in this frame
        cls = OP_CLASSES_010.get(("control" if stype == 0 else "command", data[12], data[13]))
        if cls is not None and _exactly(cls, data[:size]):
            return cls
    return AMQP010
