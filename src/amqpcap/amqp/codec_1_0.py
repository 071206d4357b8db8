"""AMQP 1.0 sans-IO codec: frames -> performatives, SASL frames and reassembled messages.

The frame grammar on the stream core (``stream.StreamDecoder``: buffers, resync, gaps, end of
capture).  The caller strips the first protocol header; the ones inside the stream (after the
SASL exchange, ``AMQP 0 1 0 0``; ``AMQP 2 1 0 0`` before TLS) are read here.

Wire structure (OASIS AMQP 1.0 part 2): a frame is an 8-octet header (size, data offset in
4-octet words, type 0 AMQP / 1 SASL, channel), an extended header up to the data offset, and a
body: none (an empty frame, the heartbeat), or a performative (a described list) and, for a
transfer, a payload: a piece of the message.  The values are read by types_1_0's one
table-driven decoder (or its compiled twin, amqp/fast10.pyx, chosen below once: ``decode``,
``read_performative``, ``read_sections``); the fields are named by the generated table
(spec/v1_0.py).

Events: ``Frame`` per frame (if ``frame_events``), ``Heartbeat`` per empty frame,
``ProtocolHeader`` for a header inside the stream, ``Performative`` per performative or SASL
frame, ``Delivery`` per message (its transfers reassembled, ``more`` ... last; emitted when it
is settled, see links_1_0), ``Anomaly`` for what could not be decoded (kinds: gap, resync,
resync-failed, malformed-frame, oversize-frame, malformed-performative,
unknown-performative, malformed-message, oversize-message, incomplete-content,
truncated-stream, unexpected-transfer, encrypted).

After a TLS protocol header the rest of that direction is encrypted: counted, not decoded.
"""

from __future__ import annotations

import re
from struct import Struct

from amqpcap import compiled
from amqpcap.amqp import links_1_0, types_1_0
from amqpcap.amqp.detect import header_version
from amqpcap.amqp.events import Frame, Heartbeat, ProtocolHeader
from amqpcap.amqp.events_1_0 import Delivery, Performative, creation_time
from amqpcap.amqp.facts import REDACTED, ConnectionFacts, split_credentials
from amqpcap.amqp.spec import v1_0 as SPEC
from amqpcap.amqp.stream import TS_MS_MAX, DecodeError, Pending, StreamDecoder
from amqpcap.amqp.types_1_0 import described_head, fields_of

HARD_MAX_FRAME = 16 << 20  # a larger frame header is taken as lost framing (memory bound)
MAX_MESSAGE = 16 << 20  # bytes of one message held for its sections to be decoded
MAX_HELD_BYTES = 64 << 20  # bytes of all the messages of a direction being assembled
MAX_ASSEMBLIES = 4096  # deliveries being assembled at once per direction (links x sessions)
MIN_MAX_FRAME = int(SPEC.DEFINITIONS["MIN-MAX-FRAME-SIZE"])

_U32 = Struct(">I")
_HEAD = Struct(">IBBH")  # size, data offset, type, channel

TRANSFER = 0x14
DISPOSITION = 0x15
_FIELDS = {code: tuple(f.name for f in c.fields) for code, c in SPEC.COMPOSITES.items()}
_BODY = {"data", "amqp-sequence", "amqp-value"}

# Where a frame header could start (resynchronisation, mid-stream): a size below 16 MiB, a data
# offset of 2 and type 0 or 1, then a performative's descriptor (a smallulong or ulong code);
# an empty frame; or a protocol header.
_CODES = bytes(sorted(SPEC.METHOD_NAMES))
_CODE_CLASS = b"[" + b"".join(re.escape(bytes([c])) for c in _CODES) + b"]"
CANDIDATE = re.compile(
    rb"(?=\x00[\x00-\xff]{3}\x02[\x00\x01][\x00-\xff]{2}\x00(?:\x53|\x80\x00{7})" + _CODE_CLASS + rb")"
    rb"|(?=\x00\x00\x00\x08\x02\x00[\x00-\xff]{2})"
    rb"|(?=AMQP[\x00\x02\x03]\x01\x00\x00)"
)


def frame_ok(buf, p: int, n: int) -> int:
    """Size of a plausible 1.0 frame at ``p`` (header checked, and the performative's
    descriptor where the body is in the buffer), 0 if not, -1 if more bytes are needed."""
    if p + 8 > n:
        return -1
    size, doff, ftype, _ch = _HEAD.unpack_from(buf, p)
    if size < 8 or doff < 2 or doff * 4 > size or ftype > 1 or size > HARD_MAX_FRAME:
        return 0
    body = p + doff * 4
    if body == p + size:
        return size if ftype == 0 else 0
    if body + 3 > n:
        return -1
    if buf[body] != 0:
        return 0
    if buf[body + 1] == 0x53:
        return size if buf[body + 2] in SPEC.METHOD_NAMES else 0
    if buf[body + 1] == 0x80:
        if body + 10 > n:
            return -1
        code = int.from_bytes(buf[body + 2 : body + 10], "big")
        return size if code in SPEC.METHOD_NAMES else 0
    return 0


def chain(buf, p: int, n: int | None = None) -> int:
    """How many whole frames (or protocol headers) follow each other from ``p`` to ``n``
    (the last may be cut short), -1 where the chain breaks."""
    if n is None:
        n = len(buf)
    k = 0
    while p + 8 <= n:
        if buf[p : p + 4] == b"AMQP":
            if header_version(bytes(buf[p : p + 8])) not in ("1.0", "1.0-sasl", "1.0-tls"):
                return -1
            p += 8
            k += 1
            continue
        size = frame_ok(buf, p, n)
        if size == 0:
            return -1
        if size < 0 or p + size > n:
            return k
        k += 1
        p += size
    return k


class Assembly:
    """A delivery whose transfers are arriving on one link (the compiled walker, fast10, makes
    and adds to the same ones)."""

    __slots__ = (
        "first",
        "offset",
        "channel",
        "handle",
        "link",
        "buf",
        "size",
        "frames",
        "too_big",
        "settled",
    )

    def __init__(self, first: Performative, link) -> None:
        self.first = first
        self.offset = first.offset
        self.channel = first.channel
        self.handle = first.args.get("handle")
        self.link = link
        self.buf = bytearray()
        self.size = 0  # payload bytes received
        self.frames = 0
        self.too_big = False
        # a transfer of it said settled (the delivery's fields, not the first transfer's row)
        self.settled = False


class Decoder10(StreamDecoder):
    HEADER = 8
    CANDIDATE = CANDIDATE
    version = "1.0"
    candidates = ("1.0",)  # the framing alone proves the version
    MARK_PACKETS = True  # a boundary is proven by the frames after it, perhaps packets later
    State = links_1_0.ConnectionState  # the connection's sessions, links and deliveries
    # a Delivery's body_hash may be a digest still being computed, for a table buffer that takes
    # one (decoder.py sets it as for 0-9-1): what the compiled class (fast10) does; the reference
    # always gives the hex digest
    deferred_digests = False

    def __init__(self, *, body_bytes: int = 64, keep_secrets: bool = False, rabbit: bool = True) -> None:
        super().__init__(body_bytes=body_bytes, keep_secrets=keep_secrets, rabbit=rabbit)
        self.keep_secrets = keep_secrets
        self.state = self.State()
        self.assembling: tuple[dict, dict] = ({}, {})  # per direction: (channel, handle) -> Assembly
        self.encrypted = [False, False]  # a TLS header: the rest of the direction is TLS
        self.held_bytes = [0, 0]  # bytes of the deliveries being assembled, per direction
        self.v: dict = {}  # connection facts learnt
        self.opens: list = [None, None]  # each direction's open fields

    # -- connection facts ----------------------------------------------------------------

    @property
    def facts(self) -> ConnectionFacts:
        return ConnectionFacts(**open_facts(self.v, self.opens))

    # -- stream core hooks -----------------------------------------------------------------

    def _probe(self, buf, p: int, n: int, final: bool) -> int:
        k = chain(buf, p, n)
        if k < 0:
            return -1
        if k >= 2 or (k == 1 and final):
            return 1
        return -1 if final else 0

    def _gap(self, direction: int, d, offset: int, size: int) -> None:
        partial = len(d.buf) - d.pos
        self.report_anomaly(
            direction,
            offset,
            "gap",
            f"{size} bytes lost in capture"
            + (f"; {partial} bytes of an incomplete frame before it discarded" if partial else ""),
            None,
            size + partial,
        )
        d.reset(offset + size)
        if self.encrypted[direction]:
            return
        self._lose_sync(direction, d, offset + size, "gap in the TCP stream")

    def _lost(self, direction: int, d, why: str) -> None:
        # every byte buffered now arrived by this packet: frames in them completed here
        d.marks = [(d.base + len(d.buf), d.packet, d.ts)]

    def _abort_contents(self, direction: int, why: str) -> None:
        asm = self.assembling[direction]
        for key in list(asm):
            self._deliver(direction, asm.pop(key), complete=False, why=why)

    def _finish_direction(self, direction: int, d) -> None:
        if direction == 1:  # both directions are done: what is still held is unsettled
            self.events.extend(self.state.release_all())

    # -- frames ----------------------------------------------------------------------------

    def _frames(self, direction: int, d, pos: int) -> int:
        buf = d.buf
        n = len(buf)
        if self.encrypted[direction]:
            return n
        while pos + 8 <= n:
            if buf[pos] == 0x41 and buf[pos : pos + 4] == b"AMQP":
                pos = self._header(direction, d, buf, pos)
                if self.encrypted[direction]:
                    return n
                continue
            size, doff, ftype, channel = _HEAD.unpack_from(buf, pos)
            if size < 8 or doff < 2 or doff * 4 > size or ftype > 1 or size > HARD_MAX_FRAME:
                self._lose_sync(direction, d, d.base + pos, "bad frame header")
                self.report_anomaly(
                    direction,
                    d.base + pos,
                    "malformed-frame",
                    f"frame header size={size} doff={doff} type={ftype}: framing lost",
                    channel,
                )
                return pos
            end = pos + size
            if end > n:
                break
            if d.marks:  # proven late: the frame belongs to the packet that completed it
                d.packet_of(d.base + end)
            self._frame(direction, d, buf, pos, end, doff, ftype, channel)
            pos = end
        return pos

    def _header(self, direction: int, d, buf, pos: int) -> int:
        raw = bytes(buf[pos : pos + 8])
        version = header_version(raw)
        self.events.append((direction, ProtocolHeader(d.packet, d.ts, d.base + pos, raw, version)))
        if version == "1.0-tls":
            self.encrypted[direction] = True
            self.report_anomaly(
                direction,
                d.base + pos + 8,
                "encrypted",
                "TLS after the protocol header: the rest of this direction is not decoded",
            )
        elif version not in ("1.0", "1.0-sasl"):
            self.report_anomaly(
                direction, d.base + pos, "malformed-frame", f"unexpected protocol header {raw!r}"
            )
        return pos + 8

    def _frame(self, direction, d, buf, pos: int, end: int, doff: int, ftype: int, channel: int) -> None:
        offset = d.base + pos
        size = end - pos
        if self._counted(direction, d):
            name = "sasl" if ftype else ("heartbeat" if doff * 4 == size else "amqp")
            self.events.append((direction, Frame(d.packet, d.ts, offset, channel, ftype, name, size, size)))
        body = pos + doff * 4
        if body == end:
            self.events.append((direction, Heartbeat(d.packet, d.ts, offset, channel)))
            return
        try:
            code, args, p = read_performative(buf, body, end)
        except DecodeError as e:
            self.report_anomaly(direction, offset, "malformed-performative", str(e), channel, size)
            return
        if args is None:
            self.report_anomaly(
                direction, offset, "unknown-performative", f"descriptor {code!r} is no performative", channel
            )
            return
        perf = Performative(d.packet, d.ts, offset, channel, code, SPEC.METHOD_NAMES[code], args, ftype, size)
        if code == TRANSFER:
            self._transfer(direction, d, perf, buf, p, end)
        else:
            self._performative(direction, perf)

    # -- performatives -----------------------------------------------------------------------

    def _performative(self, direction: int, perf: Performative) -> None:
        name, a, ch, st = perf.name, perf.args, perf.channel, self.state
        link = None
        if name == "attach":
            link = st.attach(direction, ch, a)
        elif name in ("flow", "detach") and "handle" in a:
            link = (
                st.detach(direction, ch, a["handle"])
                if name == "detach"
                else st.link(direction, ch, a["handle"])
            )
        elif name == "begin":
            st.begin(direction, ch, a)
        elif name == "end":
            st.end(direction, ch)
        elif name == "open":
            self.opens[direction] = a
            if direction == 1:
                self.v.setdefault("open_ts", perf.ts)
        elif name == "close":
            self._close(direction, perf)
        elif name == "sasl.init":
            self._sasl_init(a)
        elif name == "sasl.response" and "response" in a and not self.keep_secrets:
            a["response"] = REDACTED  # (what secure-ok's response is to 0-9-1: a credential)
        if link is not None:
            perf.link_name, perf.source, perf.target = link.name, link.source, link.target
        self.events.append((direction, perf))
        if name == "disposition":
            self.events.extend(st.disposition(direction, ch, a, perf.ts))

    def _close(self, direction: int, perf: Performative) -> None:
        if "close_ts" in self.v:
            return
        err = perf.args.get("error")
        text = None
        if isinstance(err, dict):
            text = _text(err.get("description")) or _text(err.get("condition"))
        self.v.update(
            close_ts=perf.ts, closed_by="client" if direction == 0 else "server", close_reply_text=text
        )

    def _sasl_init(self, a: dict) -> None:
        mech = _text(a.get("mechanism"))
        self.v["mechanism"] = mech
        resp = a.get("initial-response")
        if resp is None:
            return
        user, _password = split_credentials(mech, resp, False)
        if user is None and mech and mech.upper() in ("ANONYMOUS", "EXTERNAL"):
            return
        if user is not None:
            self.v["user"] = user
        if not self.keep_secrets:
            a["initial-response"] = {"user": user, "password": REDACTED} if user is not None else REDACTED

    # -- messages ----------------------------------------------------------------------------

    def _transfer(self, direction: int, d, perf: Performative, buf, p: int, end: int) -> None:
        a, ch = perf.args, perf.channel
        handle = a.get("handle")
        link = self.state.link(direction, ch, handle)
        if link is not None:
            perf.link_name, perf.source, perf.target = link.name, link.source, link.target
        self.events.append((direction, perf))
        key = (ch, handle)
        asm_map = self.assembling[direction]
        asm = asm_map.get(key)
        if asm is None and d.mid is not None and key not in d.mid.fresh:
            # picked up mid-stream: a message starts with a section's descriptor; anything else
            # is the rest of a delivery begun before the capture (accounted for with the resync)
            if end - p >= 3 and buf[p] == 0 and buf[p + 1] == 0x53 and 0x70 <= buf[p + 2] <= 0x78:
                self.fresh_channel(direction, d, key)
            elif self._orphan(direction, d, key, ch, perf.offset, perf.frame_size, "transfer"):
                return
        more, aborted = a.get("more") is True, a.get("aborted") is True
        if asm is None and not more and not aborted and len(asm_map) < MAX_ASSEMBLIES:
            # a whole delivery in one frame (the common case): its sections are read where they
            # lie, not copied into an assembly first
            asm = Assembly(perf, link)
            asm.frames, asm.size = 1, end - p
            if asm.size > MAX_MESSAGE or self.held_bytes[direction] + asm.size > MAX_HELD_BYTES:
                asm.too_big = True
                self._deliver(direction, asm, True, None, last=perf)
            else:
                with memoryview(buf) as mv, mv[p:end] as payload:
                    self._deliver(direction, asm, True, None, last=perf, payload=payload)
            return
        if asm is None:
            if len(asm_map) >= MAX_ASSEMBLIES:  # the oldest ends: memory stays bounded
                self._deliver(
                    direction, asm_map.pop(next(iter(asm_map))), False, "too many deliveries in progress"
                )
            asm = asm_map[key] = Assembly(perf, link)
        elif "delivery-id" in a and a["delivery-id"] != asm.first.args.get("delivery-id"):
            self._deliver(direction, asm_map.pop(key), False, "a new delivery began before its last transfer")
            asm = asm_map[key] = Assembly(perf, link)
        asm.frames += 1
        n = end - p
        asm.size += n
        if not asm.too_big:
            if len(asm.buf) + n > MAX_MESSAGE or self.held_bytes[direction] + n > MAX_HELD_BYTES:
                asm.too_big = True
                self.held_bytes[direction] -= len(asm.buf)
                asm.buf = bytearray()
            else:
                with memoryview(buf) as mv, mv[p:end] as piece:  # (one copy, not two)
                    asm.buf += piece
                self.held_bytes[direction] += n
        if a.get("settled") is True:
            asm.settled = True
        if aborted:
            self._deliver(direction, asm_map.pop(key), False, None, aborted=True)
        elif not more:
            self._deliver(direction, asm_map.pop(key), True, None, last=perf)

    def _deliver(
        self, direction, asm: Assembly, complete: bool, why, aborted=False, last=None, payload=None
    ) -> None:
        """Emit a delivery; its message is ``payload`` if given (a single-frame message, read
        in place), else what its assembly holds."""
        d = self.dirs[direction]
        self.held_bytes[direction] -= len(asm.buf)
        if payload is None:
            payload = asm.buf
        fa = asm.first.args
        link = asm.link
        settled = asm.settled or (last is not None and last.args.get("settled") is True)
        state = (last.args if last is not None else fa).get("state")
        outcome, condition = links_1_0.outcome_of(state)
        sections, kind, size, digest, head = {}, None, 0, None, b""
        if asm.too_big:
            complete = False
            self.report_anomaly(
                direction,
                asm.offset,
                "oversize-message",
                f"message of {asm.size} bytes: over {MAX_MESSAGE} (or {MAX_HELD_BYTES} in all) held, "
                "sections not decoded",
                asm.channel,
            )
        elif payload:
            # a delivery cut short (aborted, lost, the capture's end) keeps the sections it has
            sections, kind, size, digest, head, err = self._message(payload)
            if err is not None and complete and not aborted:
                complete = False
                self.report_anomaly(direction, asm.offset, "malformed-message", err, asm.channel, asm.size)
            created = creation_time(sections)
            if created is not None and not -TS_MS_MAX < created < TS_MS_MAX:
                self.report_unfit(
                    direction, asm.offset, asm.channel, "creation-time", created, "messages.msg_timestamp"
                )
        if why:
            self.report_anomaly(
                direction, asm.offset, "incomplete-content", f"transfer incomplete: {why}", asm.channel
            )
        if digest is None:
            digest = EMPTY_DIGEST
        did = fa.get("delivery-id")
        if did is not None and not links_1_0.is_delivery_id(did):
            self.report_anomaly(
                direction,
                asm.offset,
                "malformed-performative",
                f"transfer delivery-id {repr(did)[:60]} is no uint: no disposition can settle its delivery",
                asm.channel,
            )
        addr = None
        if link is not None:
            # sent to its target; received from its source (the queue a consumer reads)
            addr = link.target if direction == 0 else (link.source or link.target)
        dv = Delivery(
            d.packet,
            d.ts,
            asm.offset,
            asm.channel,
            asm.handle,
            link.name if link is not None else None,
            addr,
            did,
            asm.first.packet,
            asm.frames,
            sections,
            kind,
            size,
            digest,
            head,
            complete and not aborted,
            aborted,
            bool(settled) or aborted,
            None,
            outcome,
            condition,
        )
        self.events.extend(self.state.delivered(direction, dv, d.ts))

    def _message(self, payload) -> tuple:
        """``body_sections`` of a delivery's message (the compiled class walks it in C)."""
        return body_sections(payload, self.body_bytes)


def open_facts(learnt: dict, opens: list) -> dict:
    """The connection facts of ``learnt`` (SASL, close) and each direction's open fields."""
    v = dict(learnt)
    o0, o1 = opens
    both = [o for o in (o0, o1) if o is not None]
    if both:
        fm = [o.get("max-frame-size", 0xFFFFFFFF) for o in both]
        cm = [o.get("channel-max", 0xFFFF) for o in both]
        idle = [o["idle-time-out"] for o in both if o.get("idle-time-out")]
        v.update(
            frame_max=min(x for x in fm if isinstance(x, int)) if fm else None,
            channel_max=min(x for x in cm if isinstance(x, int)) if cm else None,
            idle_timeout_ms=min(x for x in idle if isinstance(x, int)) if idle else None,
        )
    if o0 is not None:
        v.update(
            client_idle_timeout_ms=_int(o0.get("idle-time-out")),
            client_container_id=_text(o0.get("container-id")),
            client_properties=o0.get("properties"),
            vhost=_text(o0.get("hostname")),
        )
    if o1 is not None:
        v.update(
            server_container_id=_text(o1.get("container-id")),
            server_properties=o1.get("properties"),
            server_idle_timeout_ms=_int(o1.get("idle-time-out")),
        )
    return v


def _text(v):
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def _int(v):
    """A milliseconds field (uint) as an int, else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def body_sections(buf, keep: int, read=None):
    """The message's sections: (sections by name, body kind, body size, body digest, its
    first ``keep`` bytes, what could not be decoded or None).  A data body is its sections'
    payloads; an amqp-sequence or amqp-value body its encoded values.  ``read``: the sections
    reader (default ``read_sections``)."""
    sections: dict = {}
    spans: list = []  # (start, end) of each body section's bytes
    err = None
    try:
        kind = (read or read_sections)(buf, sections, spans)
    except DecodeError as e:
        kind = e.args[1] if len(e.args) > 1 else None
        err = str(e.args[0])
    return (sections, kind, *body_digest(buf, spans, keep), err)


# The SHA-256 of no bytes: a delivery without a payload's digest.
EMPTY_DIGEST = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def sha256(data=b""):
    """The stream core's body digest (hashlib's SHA-256, imported at its first use: the compiled
    walker hashes a dissect's bodies with fast09's digests, and a 1.0 dissect's start does
    without hashlib, ~7 M instructions) of ``data``."""
    h = Pending.digest()
    h.update(data)
    return h


def body_digest(buf, spans: list, keep: int) -> tuple:
    """(size, sha256 hex digest, first ``keep`` bytes) of the body whose bytes are ``spans``
    ((start, end) in ``buf``)."""
    if len(spans) == 1:  # the common body: one section, hashed and cut where it lies
        s, e = spans[0]
        with memoryview(buf) as mv, mv[s:e] as body:  # (a bytearray's slice would be a copy)
            digest = sha256(body).hexdigest()
        return e - s, digest, bytes(buf[s : min(e, s + keep)])
    h, head, size = sha256(), bytearray(), 0
    for s, e in spans:
        h.update(buf[s:e])
        if len(head) < keep:
            head += buf[s : min(e, s + keep - len(head))]
        size += e - s
    return size, h.hexdigest(), bytes(head)


def read_sections_reference(buf, sections: dict, spans: list):
    """Decode the sections into ``sections`` and note the body's in ``spans``: the body's
    kind, or DecodeError(what, the body's kind so far)."""
    n = len(buf)
    p = 0
    kind = None
    while p < n:
        at = p
        try:
            code, p = described_head(buf, p, n)
            name = SPEC.SECTIONS.get(code)
            if name is None:
                raise DecodeError(f"section at {at}: descriptor {code!r} is no message section")
            if name in _BODY:
                kind = kind or name
                if name == "data":
                    if p >= n or buf[p] not in (0xA0, 0xB0):
                        raise DecodeError(f"data section at {at} is not binary")
                    w = 1 if buf[p] == 0xA0 else 4
                    if p + 1 + w > n:
                        raise DecodeError(f"data section at {at} cut short")
                    ln = buf[p + 1] if w == 1 else _U32.unpack_from(buf, p + 1)[0]
                    s, e = p + 1 + w, p + 1 + w + ln
                    if e > n:
                        raise DecodeError(f"data section at {at}: {ln} bytes, {n - s} left")
                else:
                    s = p
                    _v, e = decode(buf, p, n, 1)
                spans.append((s, e))
                p = e
            else:
                value, p = decode(buf, p, n, 1)
                fields = _FIELDS.get(code) if type(value) is list else None
                if fields is not None:  # header, properties: by field name
                    value = fields_of(fields, value)
                sections[name] = value
        except DecodeError as e:
            raise DecodeError(str(e), kind) from None
    return kind


def read_performative_reference(buf, body: int, end: int):
    """(descriptor code, the performative's fields by name (null fields left out), offset after
    them) of the frame body at ``body``; fields None if the code is no performative's.
    DecodeError if it does not decode."""
    code, p = described_head(buf, body, end)
    fields = _FIELDS.get(code) if code in SPEC.METHOD_NAMES else None
    if fields is None:
        return code, None, p
    value, p = decode(buf, p, end, 1)
    if type(value) is not list:
        raise DecodeError(f"{SPEC.METHOD_NAMES[code]} is not a list")
    return code, {k: v for k, v in zip(fields, value) if v is not None}, p


# ``decode``, ``read_sections``, ``read_performative``: the compiled twins (fast10: the same
# values, C reads) if built, else the reference; chosen once, here
_fast = compiled.select("fast10")
decode = types_1_0.decode if _fast is None else _fast.decode
read_sections = read_sections_reference if _fast is None else _fast.read_sections
read_performative = read_performative_reference if _fast is None else _fast.read_performative
