"""AMQP 0-8 / 0-9 / 0-9-1 codec: frames, methods, content headers, field tables.

``Decoder09Py`` is the frame grammar of these versions on the stream core
(``stream.StreamDecoder``): ``feed()`` bytes of either direction after the
protocol header, ``pop_events()`` to read what they decoded.  It never raises on
wire data: whatever it cannot decode becomes an ``Anomaly`` event and the core
resynchronises on the next frame boundary this grammar proves (``_probe``: valid
type, size within limits, frame-end octet where the size says, and for method
frames a class/method the specification knows).

Memory is bounded: nothing is allocated from a wire length field; a direction
buffers at most one frame (capped by the negotiated frame-max, else
``MAX_FRAME``), bodies are hashed incrementally and only ``body_bytes`` of
them are kept.
"""

from __future__ import annotations

from functools import cache, partial
from struct import Struct
from struct import error as StructError

from amqpcap.amqp import spec as _spec
from amqpcap.amqp.detect import CANDIDATE_0_9, MAX_FRAME_0_9, chain_0_9
from amqpcap.amqp.events import Frame, Heartbeat, Method
from amqpcap.amqp.fields_0_9 import (
    decode_fields,
    field_plan,
    read_plan,
)
from amqpcap.amqp.framing_0_9 import NOT_A_FRAME, NOT_ALL_THERE, frame_end
from amqpcap.amqp.stream import I64_MAX, DecodeError, StreamDecoder

FRAME_HEADER = Struct(">BHI")
MAX_FRAME = MAX_FRAME_0_9  # before tune: RabbitMQ's maximum frame-max is 128 KiB; allow 1 MiB
HARD_MAX_FRAME = 16 << 20  # no frame is accepted above this whatever was negotiated

_U16 = Struct(">H")
_HDR = Struct(">HHQH")  # class-id, weight, body-size, first property flags
_CM = Struct(">HH")


# The generated readers of the argument lists (spec/readers_0_9.py: ~1.6 M instructions of a dissect's start),
# loaded by the first list read here, not at every start: the compiled walker has its own
# (spec/readers_0_9.pxi), and a capture with no 0-8 / 0-9 / 0-9-1 conversation reads none.
_READERS: dict = {}


def compile_fields(fields):
    """The reader of ``fields``: ``f(buf, off, end, rabbit, args) -> end offset``.  A method's
    argument list has a reader generated from the XML (spec/readers_0_9.py); any other list is
    read by the generic reader on its plan."""
    fn = (_READERS or _load_readers()).get(fields)
    return fn if fn is not None else partial(read_plan, field_plan(fields))


def _load_readers() -> dict:
    from amqpcap.amqp.spec import readers_0_9

    _READERS.update(readers_0_9.READERS)
    return _READERS


_PROPS_CACHE: dict = {}


def decode_properties(props, buf, off: int, end: int, rabbit: bool = True) -> dict:
    """Content-header properties: 16-bit flag words (bit 0 = continuation), then values."""
    words = []
    while True:
        if off + 2 > end:
            raise DecodeError("property flags past end")
        flags = _U16.unpack_from(buf, off)[0]
        off += 2
        words.append(flags)
        if not flags & 1:
            break
        if len(words) > 8:
            raise DecodeError("too many property flag words")
    key = (props, tuple(words))
    plan = _PROPS_CACHE.get(key)
    if plan is None:
        present = []
        idx = 0
        for flags in words:
            for bit in range(15, 0, -1):
                if flags & (1 << bit):
                    if idx >= len(props):
                        raise DecodeError(f"property flag {idx} set beyond the {len(props)} defined")
                    present.append(props[idx])
                idx += 1
        # A bit property is its flag alone: no value follows it.
        bits = tuple(n for n, t in present if t == "bit")
        fields = tuple((n, t) for n, t in present if t != "bit")
        if len(_PROPS_CACHE) < 4096:
            plan = _PROPS_CACHE[key] = (compile_fields(fields), bits)
        else:
            # Cache full (random flag words from corrupt data: 2^14 flag sets for basic): the
            # plan is made for this header alone.
            plan = (compile_fields(fields), bits)
    out: dict = {}
    off = plan[0](buf, off, end, rabbit, out)
    for n in plan[1]:
        out[n] = True
    if off != end:
        raise DecodeError(f"{end - off} bytes after the last property")
    return out


# --- dialects ------------------------------------------------------------------------

# What brokers send where it differs from the version's own XML (docs/dialects.md).
# Tried when the spec fields leave bytes over (or run short): (version, class, method) -> fields.
DIALECT_FIELDS = {
    # RabbitMQ answers 0-8 channel.open with the 0-9-1 encoding (an empty long string).
    ("0-8", 20, 11): (("channel-id", "longstr"),),
    # RabbitMQ sends 0-9-1's basic.consume (with arguments table) to 0-8/0-9 clients too.
    ("0-8", 60, 20): (
        ("ticket", "short"),
        ("queue", "shortstr"),
        ("consumer-tag", "shortstr"),
        ("no-local", "bit"),
        ("no-ack", "bit"),
        ("exclusive", "bit"),
        ("nowait", "bit"),
        ("arguments", "table"),
    ),
}


def _transfer_with_octet():
    # 0-9 message.transfer with the body domain written as "octet then long string".
    spec = _spec.get("0-9").METHODS[(120, 10)]
    fields = tuple(f for f in spec.fields if f[0] != "body")
    return fields + (("body-type", "octet"), ("body", "longstr"))


DIALECT_FIELDS[("0-9", 120, 10)] = _transfer_with_octet()

# --- the decoder ---------------------------------------------------------------------

FRAME_TYPE_NAMES = {
    1: "method",
    2: "header",
    3: "body",
    4: "oob-method",
    5: "oob-header",
    6: "oob-body",
    7: "trace",
    8: "heartbeat",
}

# A conversation picked up mid-stream could be any of these; the first still possible names it.
INFER_ORDER = ("0-9-1", "0-8", "0-9")


@cache
def _method_table(version: str) -> dict:
    """(class, method) -> (spec, dialect) as a ``version`` decoder looks methods up: its own
    table, then 0-9-1's for what it lacks (RabbitMQ speaks 0-9-1 extensions to 0-8 and 0-9
    clients too)."""
    own = _spec.get(version).METHODS
    out = {k: (v, "0-9-1") for k, v in _spec.get("0-9-1").METHODS.items()} if version != "0-9-1" else {}
    out.update((k, (v, None)) for k, v in own.items())
    return out


@cache
def _known_methods(candidates: tuple) -> frozenset:
    """Every (class, method) some candidate version knows: one set per candidate tuple, shared by
    every decoder (one per decoder was its largest allocation)."""
    return frozenset().union(*(_method_table(v) for v in candidates))


@cache
def _frame_types(version: str, inferring: bool) -> frozenset:
    return frozenset(range(1, 9)) if inferring else frozenset(_spec.get(version).FRAME_TYPES) | {8}


def _layout(fields):
    return None if fields is None else tuple(t for _, t in fields)


class Decoder09Py(StreamDecoder):
    """Sans-IO decoder for one 0-8 / 0-9 / 0-9-1 connection (both directions): the frame
    grammar of these versions on the stream core; the reference.

    ``decoder.Decoder09`` is this class or its compiled twin (``fast09.Decoder09``, a subclass),
    chosen once at import.  The twin hands every frame that is not on its common path to the
    public ``decode_*_frame`` methods here, and every walk it cannot do to ``frames_reference``."""

    HEADER = 7
    CANDIDATE = CANDIDATE_0_9
    type_names = tuple(FRAME_TYPE_NAMES.get(t) for t in range(9))  # by frame type (the walker's)

    def __init__(
        self,
        version: str = "0-9-1",
        *,
        body_bytes: int = 64,
        keep_secrets: bool = False,
        rabbit_tables: bool = True,
        infer: bool = False,
    ) -> None:
        super().__init__(body_bytes=body_bytes, keep_secrets=keep_secrets, rabbit=rabbit_tables)
        # ``infer``: the version is a guess (no protocol header was captured); methods whose
        # layout differs between 0-8, 0-9 and 0-9-1 narrow it down as they arrive.
        self.candidates = INFER_ORDER if infer else (version,)
        # bumped whenever the tables below (methods, properties, frame types, frame-max) change:
        # the compiled walker re-reads them then, not on every packet
        self.generation = 0
        self._lookup = {v: _method_table(v) for v in self.candidates}
        self._same: dict = {}  # (class, method) -> True if every candidate decodes it alike
        self._use_version(version if not infer else INFER_ORDER[0])
        self.rabbit = rabbit_tables
        self.frame_max = MAX_FRAME

    def _use_version(self, version: str) -> None:
        self.generation += 1
        self.version = version
        self.tables = _spec.get(version)
        self.methods = self._lookup[version]
        self.properties = self.tables.PROPERTIES
        self.frame_types = _frame_types(version, len(self.candidates) > 1)
        # a resync proves a method frame by a (class, method) some candidate knows
        self._known = _known_methods(self.candidates)

    def tuned(self, frame_max: int) -> None:
        # Allow the 8 bytes of framing the frame-max counts, and a little slack.
        self.frame_max = min(max(frame_max, 4096), HARD_MAX_FRAME)
        self.generation += 1

    # -- framing ---------------------------------------------------------------------

    def _probe(self, buf, p: int, n: int, final: bool) -> int:
        """A boundary is proven by one whole frame: a known type, a size within the limit,
        the frame-end octet where the size says, a method some candidate version knows."""
        k = chain_0_9(buf, p, n, 1, self.frame_types, self.frame_max, self._known)
        return -1 if k < 0 or (k == 0 and final) else k

    def frames_reference(self, direction: int, d, pos: int) -> int:
        buf = d.buf
        n = len(buf)
        while n - pos >= 7:
            end = frame_end(buf, pos, n, self.frame_types, self.frame_max)
            if end == NOT_ALL_THERE:
                break
            if end == NOT_A_FRAME:
                self.bad_frame(direction, d, pos)
                return pos + 1
            self._frame(direction, d, buf[pos], (buf[pos + 1] << 8) | buf[pos + 2], buf, pos, end)
            pos = end + 1
        return pos

    def bad_frame(self, direction, d, pos) -> None:
        """The frame whose header is at ``d.buf[pos]`` is not one (an unknown type, too large, or
        no frame-end octet where its size says): reported, and the framing is lost from it."""
        ftype, channel, size = FRAME_HEADER.unpack_from(d.buf, pos)
        if ftype not in self.frame_types:
            kind, why = "unknown-frame-type", f"frame type {ftype} is not defined in AMQP {self.version}"
        elif size > self.frame_max:
            kind, why = (
                "oversize-frame",
                f"frame type {ftype} channel {channel} claims {size} bytes (limit {self.frame_max})",
            )
        else:
            kind = "bad-frame-end"
            why = (
                f"frame type {ftype} channel {channel} size {size}: frame-end octet is "
                f"0x{d.buf[pos + 7 + size]:02x}, not 0xce"
            )
        self.report_anomaly(
            direction, d.base + pos, kind, why, channel if ftype in self.frame_types else None
        )
        d.resync = True
        d.resync_from = d.base + pos

    def _gap(self, direction: int, d, offset: int, size: int) -> None:
        """The frame in progress is lost with the gap: resync after it."""
        partial = len(d.buf) - d.pos
        lost = partial if not d.resync else (d.base + len(d.buf) - d.resync_from if d.base >= 0 else 0)
        self.report_anomaly(
            direction,
            offset,
            "gap",
            f"{size} bytes lost in capture"
            + (f"; {lost} bytes of an incomplete frame before it discarded" if lost else ""),
            None,
            size + max(lost, 0),
        )
        d.reset(offset + size)
        self._lose_sync(direction, d, offset + size, "gap in the TCP stream")

    # -- frames ----------------------------------------------------------------------

    def _frame(self, direction: int, d, ftype: int, channel: int, buf, pos: int, end: int) -> None:
        size = end - pos - 7
        offset = d.base + pos
        if self._counted(direction, d):
            self.events.append(
                (
                    direction,
                    Frame(
                        d.packet,
                        d.ts,
                        offset,
                        channel,
                        ftype,
                        FRAME_TYPE_NAMES.get(ftype, str(ftype)),
                        size,
                        size + 8,
                    ),
                )
            )
        start = pos + 7
        if ftype == 1:
            self.decode_method_frame(direction, d, channel, buf, start, end, offset, size)
        elif ftype == 3:
            self.decode_body_frame(direction, d, channel, buf, start, end, offset)
        elif ftype == 2:
            self.decode_header_frame(direction, d, channel, buf, start, end, offset)
        elif ftype == 8:
            self.events.append((direction, Heartbeat(d.packet, d.ts, offset, channel)))
        # 4-7 (0-8 out-of-band and trace frames) are recorded as Frame events only.

    def decode_method_frame(self, direction, d, channel, buf, start, end, offset, size) -> None:
        if size < 4:
            self.report_anomaly(
                direction, offset, "malformed-frame", f"method frame of {size} bytes", channel
            )
            return
        cid, mid = _CM.unpack_from(buf, start)
        if len(self.candidates) > 1 and not self._same.get((cid, mid), False):
            self._narrow(cid, mid, buf, start + 4, end)
        found = self.methods.get((cid, mid))
        if found is None:
            self.report_anomaly(
                direction,
                offset,
                "unknown-method",
                f"class {cid} method {mid} is not defined in AMQP {self.version}",
                channel,
            )
            return
        spec, dialect = found
        try:
            args = self._decode_args(self.version, spec, cid, mid, buf, start + 4, end)
        except DecodeError as e:
            self.report_anomaly(direction, offset, "malformed-method", f"{spec.name}: {e}", channel)
            return
        if dialect:
            args["$dialect"] = dialect
        name = spec.name
        m = Method(
            d.packet, d.ts, offset, channel, cid, mid, name, args, spec.synchronous, spec.content, size
        )
        self.fresh_channel(direction, d, channel)
        self._method(direction, m)
        p = self.pending[direction].get(channel)
        if p is not None:
            self.end_content(direction, p, False, f"{p.method.name} content interrupted by {name}")
        if spec.content:
            self._start_content(direction, channel, channel, m, offset)
        elif name == "message.transfer" and "body" in args:
            self.inline_transfer(direction, m, buf, start + 4, end)

    def _decode_args(self, version: str, spec, cid: int, mid: int, buf, start: int, end: int) -> dict:
        """The arguments of a method frame as ``version`` lays them out, else DecodeError; a
        broker dialect of the layout (DIALECT_FIELDS) is tried before giving up."""
        args: dict = {}
        try:
            off = compile_fields(spec.fields)(buf, start, end, self.rabbit, args)
            if off != end:
                raise DecodeError(f"{end - off} bytes left after the last argument")
            return args
        except DecodeError as e:
            alt = DIALECT_FIELDS.get((version, cid, mid))
            if alt is None:
                raise
            args = {}
            try:
                if decode_fields(alt, buf, start, end, self.rabbit, args) != end:
                    raise e
            except DecodeError:
                raise e from None
            if cid != 120:
                args["$dialect"] = "rabbitmq"
            return args

    def _narrow(self, cid: int, mid: int, buf, start: int, end: int) -> None:
        """Mid-stream, version unknown: keep the candidate versions that decode this method
        frame exactly, and name the connection after the first of them.  A method every
        candidate lays out alike (the same argument types; names such as 0-8's ticket and
        0-9-1's reserved-1 do not matter) proves nothing and is remembered as such; one that
        no candidate decodes proves nothing either (it is reported as malformed)."""
        key = (cid, mid)
        found = [(v, self._lookup[v].get(key)) for v in self.candidates]
        sigs = {
            (_layout(f[0].fields), _layout(DIALECT_FIELDS.get((v, cid, mid)))) if f else None
            for v, f in found
        }
        if len(sigs) == 1:
            self._same[key] = True
            return
        keep = []
        for v, f in found:
            if f is not None:
                try:
                    self._decode_args(v, f[0], cid, mid, buf, start, end)
                except DecodeError:
                    continue
                keep.append(v)
        if keep and len(keep) < len(self.candidates):
            self.candidates = tuple(keep)
            self._same.clear()
            self._use_version(keep[0])

    def inline_transfer(self, direction, m: Method, buf, start, end) -> None:
        # 0-9 message.transfer: body domain "content" is undefined in the XML;
        # we decoded it as a long string; also accept "octet then long string".
        body = m.args.get("body")
        raw = body.encode() if isinstance(body, str) else bytes(body)
        enc = "octet+longstr" if "body-type" in m.args else "longstr"
        p = self.Pending(m, m.channel, m.channel, m.offset, m.packet)
        p.props = {k: v for k, v in m.args.items() if k not in ("body", "$dialect")}
        p.size = len(raw)
        p.encoding = enc
        p.hash.update(raw)
        p.head = raw[: self.body_bytes]
        p.received = len(raw)
        self.end_content(direction, p, True)

    def decode_header_frame(self, direction, d, channel, buf, start, end, offset) -> None:
        p = self.pending[direction].get(channel)
        if p is None and self._orphan(
            direction, d, channel, channel, offset, end - start + 8, "content header frame"
        ):
            return
        if p is None or p.props is not None:
            self.report_anomaly(
                direction, offset, "unexpected-frame", "content header without a content method", channel
            )
            return
        try:
            if end - start < 14:
                raise DecodeError("content header shorter than 14 bytes")
            cid, _weight, body_size, _ = _HDR.unpack_from(buf, start)
            if cid != p.method.class_id:
                raise DecodeError(f"content header class {cid} does not match {p.method.name}")
            props = decode_properties(self.properties.get(cid, ()), buf, start + 12, end, self.rabbit)
        except (DecodeError, StructError) as e:
            self.report_anomaly(direction, offset, "malformed-header", str(e), channel)
            self.end_content(direction, p, False)
            return
        p.props = props
        p.size = body_size
        p.header_packet = d.packet
        if body_size > I64_MAX or "timestamp" in props:
            self.report_unfit_content(direction, offset, channel, body_size, props.get("timestamp"))
        if body_size == 0:
            self.end_content(direction, p, True)

    def decode_body_frame(self, direction, d, channel, buf, start, end, offset) -> None:
        p = self.pending[direction].get(channel)
        if p is None and self._orphan(direction, d, channel, channel, offset, end - start + 8, "body frame"):
            return
        if p is None or p.props is None:
            # No skipped bytes: the frame's own Frame event already accounts for them.
            self.report_anomaly(
                direction, offset, "unexpected-frame", "body frame without a content header", channel
            )
            return
        self._body(p, buf, start, end)
        if p.received >= p.size:
            if p.received > p.size:
                self.report_anomaly(
                    direction,
                    offset,
                    "body-overrun",
                    f"{p.received} body bytes for a declared size of {p.size}",
                    channel,
                )
            self.end_content(direction, p, p.received == p.size)

    def _content_view(self, p, direction: int):
        return p.props or {}, max(p.size, 0) if p.size <= I64_MAX else None, None, None

    _frames = frames_reference  # the stream core's frame loop for this grammar


def direct_output(codec, row_sink, deferred_digests: bool) -> None:
    """Let ``codec`` write rows and digests without events, if it is a compiled walker (the
    reference makes every event; the dissect pipeline chooses, pipeline.Dissector): the rows of
    the methods and contents it decodes on its common path go to ``row_sink`` (a
    fastrows.RowSink; None: events), and a finished content's ``body_hash`` may be a digest
    still being computed (fast09.Sha256, ``deferred_digests``) for a table buffer that takes one.
    The compiled classes declare both (``row_sink``, ``deferred_digests``; fast09's and fast10's
    ``Decoder10``, whose walker writes the rows of the 1.0 events it made as it walks a packet);
    the references not ``row_sink``."""
    if hasattr(type(codec), "row_sink"):
        codec.deferred_digests = deferred_digests
        codec.row_sink = row_sink
