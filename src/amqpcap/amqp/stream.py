"""The stream core every AMQP codec plugs into (sans-IO, both directions of one connection).

``StreamDecoder`` owns what does not depend on the framing: each direction's buffer
(base offset, read position, compaction), resynchronisation after damage (search for a
candidate header, prove it, account for the bytes skipped), gaps, the end of the
capture and the truncation it leaves, the start of a capture inside a stream, the
assembly of contents (body hashing, head, completion, abort), the connection facts and
the hand-over of events (``pop_events``).

A codec is a frame grammar on top of it (h11 style: the mechanism here, the grammar in
its own module).  It provides:

* ``HEADER`` (octets of a frame header) and ``CANDIDATE`` (a regular expression matching
  where a header could start; ``detect`` uses the same ones);
* ``_probe(buf, p, n, final)``: 1 if a frame boundary at ``p`` is proven, 0 if more data
  is needed to tell, -1 if not;
* ``_frames(direction, d, pos)``: decode the whole frames from ``pos``, return where it
  stopped (setting ``d.resync`` where it lost the framing);
* ``_gap(direction, d, offset, size)``: what a loss does to a frame in progress;
* ``_content_view(p, direction)``: properties, body size, exchange and routing key of
  a finished content;
* optionally ``_lost`` / ``_finish_direction`` (grammar state to drop on a loss or at
  the end), ``tuned`` (the negotiated frame size) and ``_resync_detail``.

Memory is bounded: a direction buffers at most one frame (the grammar caps its size),
and while resynchronising only what may still start a frame.
"""

from __future__ import annotations

from bisect import bisect_right

from amqpcap.amqp.events import Anomaly, Content
from amqpcap.amqp.facts import SECRET_ARGS, FactLearner
from amqpcap.amqp.midstream import MidstreamStart

COMPACT_AT = 1 << 16  # a read position past this is cut from the buffer
# What the tables' columns hold of the wire's unsigned 64-bit values (records/schema.py): an
# int64 column up to I64_MAX, a timestamp column (ns) seconds below TS_SECONDS_MAX.  A value
# past them is null in its column and reported as a value-out-of-range anomaly.
I64_MAX = (1 << 63) - 1
TS_SECONDS_MAX = 9_000_000_000
TS_MS_MAX = TS_SECONDS_MAX * 1000  # AMQP 1.0 timestamps are signed milliseconds


class DecodeError(Exception):
    """Malformed wire data inside one frame or segment (caught per frame, never escapes)."""


class Direction:
    """One direction's stream: the unparsed bytes and where they are."""

    __slots__ = (
        "buf",
        "pos",
        "base",
        "resync",
        "resync_from",
        "skip",
        "packet",
        "ts",
        "marks",
        "scan_from",
        "mid",
    )

    def __init__(self) -> None:
        self.buf = b""  # bytes (a fed packet, not copied) or bytearray (data held across feeds)
        self.pos = 0  # read position in buf
        self.base = -1  # stream offset of buf[0]; -1 before the first feed
        self.resync = False  # looking for a provable frame boundary
        self.resync_from = 0  # stream offset where the unprovable bytes begin
        self.skip = 0  # bytes still to skip of a frame damaged by a gap
        self.packet = 0  # packet and time of the data being decoded
        self.ts = 0
        # While resynchronising a grammar whose proof looks past the frame (MARK_PACKETS),
        # (stream end offset, packet, ts) of each piece fed: a frame proven late belongs to
        # the packet that completed it.
        self.marks: list = []
        self.scan_from = 0  # stream offset before which no boundary is looked for
        self.mid: MidstreamStart | None = None  # picked up mid-stream

    def reset(self, base: int) -> None:
        """Drop the bytes held; the stream continues at ``base``."""
        self.marks = []
        self.buf = b""
        self.pos = 0
        self.base = base

    def packet_of(self, frame_end: int) -> None:
        """Attribute a frame proven late (ending at ``frame_end``) to the packet that completed it."""
        marks = self.marks
        i = 0
        while i < len(marks) - 1 and marks[i][0] < frame_end:
            i += 1
        if i:
            del marks[:i]
        _, self.packet, self.ts = marks[0]


def append_data(d: Direction, data) -> None:
    """``data``, which follows ``d``'s buffer in the stream, after it: in place of a buffer read
    to its end (not copied), else appended."""
    if d.pos == len(d.buf):
        d.base += d.pos
        d.buf = data if type(data) is bytes else bytes(data)
        d.pos = 0
    else:
        if type(d.buf) is not bytearray:
            d.buf = bytearray(d.buf)
        d.buf += data


def keep_tail(d: Direction) -> None:
    """Keep only the unparsed tail of ``d``'s buffer after a parse: never slice a big buffer per
    frame, never keep more than one frame (or, resynchronising, what may still start one)."""
    buf, pos = d.buf, d.pos
    if pos >= len(buf):
        d.base += len(buf)
        d.buf = b""
        d.pos = 0
    elif type(buf) is not bytearray:
        d.base += pos
        d.buf = bytearray(buf[pos:])
        d.pos = 0
    elif pos > COMPACT_AT or pos * 2 > len(buf) or (d.resync and pos):
        d.base += pos
        del buf[:pos]
        d.pos = 0


class Pending:
    """A content being assembled on one channel (0-10: channel and track) of one direction.

    ``method`` None: the assembly of a method that could not be decoded; its bytes are
    absorbed and reported once."""

    __slots__ = (
        "method",
        "key",
        "channel",
        "offset",
        "first_packet",
        "header_packet",
        "props",
        "size",
        "received",
        "frames",
        "hash",
        "head",
        "encoding",
        "unknown",
        "damaged",
        "absorbed",
        "why",
    )

    def __init__(self, method, key: int, channel: int, offset: int, packet: int) -> None:
        self.method = method
        self.key = key
        self.channel = channel
        self.offset = offset  # stream offset of the carrying method
        self.first_packet = packet
        self.header_packet = None
        self.props = None  # the grammar's header values (None until a header arrived)
        self.size = -1  # declared body size, -1 until known
        self.received = 0
        self.frames = 0
        self.hash = self.digest()
        self.head = b""
        self.encoding = None
        self.unknown = None
        self.damaged = False
        self.absorbed = 0
        self.why = ""

    @staticmethod
    def digest():
        """A new body digest (the compiled walker's Pending has its own)."""
        import hashlib  # here: ~2.4 ms of every start (the compiled walker hashes without it)

        return hashlib.sha256()


class ContentAssembly:
    """The content half of the stream core: a message's header and body frames assembled per
    channel (``pending``) into one ``Content`` event.  Mixed into ``StreamDecoder``, whose
    state (``dirs``, ``pending``, ``events``, ``body_bytes``) and ``report_anomaly`` it uses."""

    def _start_content(self, direction: int, key: int, channel: int, method, offset: int) -> Pending:
        pend = self.pending[direction]
        old = pend.get(key)
        if old is not None:
            self._abort_one(direction, old, "a new assembly began before it ended")
        p = pend[key] = self.Pending(method, key, channel, offset, self.dirs[direction].packet)
        return p

    def _body(self, p: Pending, buf, start: int, end: int) -> None:
        """A body frame's payload ``buf[start:end]``: hashed, its head kept."""
        p.frames += 1
        n = end - start
        if p.method is None:
            p.absorbed += n
        elif n:
            with memoryview(buf) as mv:
                p.hash.update(mv[start:end])
            if len(p.head) < self.body_bytes:
                p.head += bytes(buf[start : min(end, start + self.body_bytes - len(p.head))])
            p.received += n

    def end_content(self, direction: int, p: Pending, complete: bool, why: str | None = None) -> None:
        """The content ends (``why`` it is incomplete, if it is): emit it."""
        self.pending[direction].pop(p.key, None)
        if p.method is None:
            if p.absorbed:
                self.report_anomaly(
                    direction,
                    p.offset,
                    "incomplete-content",
                    f"{p.why}: {p.absorbed} bytes not decoded",
                    p.channel,
                    p.absorbed,
                )
            return
        if why:
            self.report_anomaly(direction, p.offset, "incomplete-content", why, p.channel)
        d = self.dirs[direction]
        m = p.method
        props, body_size, exchange, routing_key = self._content_view(p, direction)
        self.events.append(
            (
                direction,
                Content(
                    d.packet,
                    d.ts,
                    p.offset,
                    p.channel,
                    m,
                    m.class_id,
                    props,
                    body_size,
                    p.received,
                    p.frames,
                    p.hash.hexdigest(),
                    p.head,
                    complete,
                    p.first_packet,
                    p.header_packet,
                    p.encoding,
                    exchange,
                    routing_key,
                ),
            )
        )

    def _abort_one(self, direction: int, p: Pending, why: str) -> None:
        self.end_content(
            direction, p, False, None if p.method is None else f"{p.method.name} content incomplete: {why}"
        )

    def _abort_contents(self, direction: int, why: str) -> None:
        pend = self.pending[direction]
        for key in sorted(pend):
            self._abort_one(direction, pend[key], why)
        pend.clear()

    def _orphan(self, direction, d, key, channel, offset, size, what) -> bool:
        """Content with no method before it on ``key``: the rest of a message begun before a
        mid-stream capture (True: accounted for), or not (False)."""
        if d.mid is None:
            return False
        held = d.mid.orphan(key, channel, size)
        if held is False:
            self.report_anomaly(
                direction,
                offset,
                "resync",
                f"{what} of a message begun before the capture started ({size} bytes)",
                channel,
            )
        return held is not None


class StreamDecoder(ContentAssembly):
    """The framing-independent half of a codec (see the module docstring)."""

    HEADER = 7
    CANDIDATE = None
    MARK_PACKETS = False
    FLUSH_AT_GAP = True  # a gap ends the stream for a pending resync: prove what is held first
    Direction = Direction
    Pending = Pending
    version = ""
    # Every frame decoded is reported to ``tally(direction, ts, n)`` if one is handed in (the
    # pipeline's per-direction liveness and counts), and becomes a ``Frame`` event only if
    # ``frame_events``: without the frames table an event per frame is work for nobody.
    tally = None
    frame_events = True

    def __init__(self, *, body_bytes: int = 64, keep_secrets: bool = False, rabbit: bool = True) -> None:
        self.body_bytes = body_bytes
        self.dirs = (self.Direction(), self.Direction())
        self.pending: tuple[dict, dict] = ({}, {})  # per direction: key -> Pending
        self.events: list = []  # (direction, event), drained by pop_events
        self.silent_frames = 0  # frames decoded without a Frame event since the last pop_events
        self.learner = FactLearner(keep_secrets, rabbit)

    @property
    def facts(self):
        """The ``ConnectionFacts`` learnt so far."""
        return self.learner.snapshot()

    # -- sink API ----------------------------------------------------------------------------

    def feed(self, direction: int, data: bytes, offset: int, packet: int, ts: int) -> None:
        d = self.dirs[direction]
        d.packet = packet
        d.ts = ts
        if not data:
            return
        if d.base < 0:
            d.base = offset
        end = d.base + len(d.buf)
        if offset != end:
            if offset > end:  # the TCP layer reports gaps first; be defensive
                self.gap(direction, end, offset - end, packet, ts)
                end = d.base + len(d.buf)
            if offset < end:  # overlap: keep what is new
                cut = end - offset
                if cut >= len(data):
                    return
                data = data[cut:]
        append_data(d, data)
        if d.resync and self.MARK_PACKETS:
            marks = d.marks
            if marks and marks[0][0] <= d.base + d.pos:
                # pieces wholly before the scan position cannot complete a frame (marks are in
                # stream order: cut them from the front)
                del marks[: bisect_right(marks, (d.base + d.pos, 1 << 62))]
            marks.append((d.base + len(d.buf), packet, ts))
        self._parse(direction, d)
        if d.marks and not d.resync:
            d.marks = []
            d.packet, d.ts = packet, ts

    def data(self, direction: int, offset: int, data: bytes, packet: int, ts: int) -> None:
        """``feed`` with the TCP reassembler's sink arguments (ConnectionDecoder hands its
        streams straight to the codec once both directions are settled)."""
        self.feed(direction, data, offset, packet, ts)

    def start_midstream(
        self, direction: int, offset: int, at: int | None = None, begun: bool = False
    ) -> None:
        """The capture starts inside this direction's stream at ``offset``: decode from the first
        provable frame (at or after ``at``, where the caller has proven one).  ``begun``: the
        capture saw the conversation begin (a server answering a client's header): a first
        frame right at ``offset`` is then the stream's own beginning, not a mid-stream start."""
        d = self.dirs[direction]
        d.resync = True
        d.resync_from = offset
        d.scan_from = offset if at is None else at
        d.mid = MidstreamStart(begun)

    def gap(self, direction: int, offset: int, size: int, packet: int, ts: int) -> None:
        """``size`` bytes of this direction are lost at ``offset``."""
        if size <= 0:
            return
        d = self.dirs[direction]
        if self.FLUSH_AT_GAP:
            self._flush_resync(direction, d)
        d.packet, d.ts = packet, ts
        self._release_held(direction, d)
        self._gap(direction, d, offset, size)

    def finish(self, packet: int, ts: int) -> None:
        """The capture ends: account for every byte still held, end every content."""
        for direction, d in enumerate(self.dirs):
            d.packet = d.packet or packet
            d.ts = d.ts or ts
            self._flush_resync(direction, d)
            self._release_held(direction, d)
            left = len(d.buf) - d.pos
            if d.resync:
                skipped = d.base + len(d.buf) - d.resync_from if d.base >= 0 else 0
                if skipped > 0:
                    self.report_anomaly(
                        direction,
                        d.resync_from,
                        "resync-failed",
                        f"{skipped} bytes at the end of the stream hold no provable frame boundary",
                        None,
                        skipped,
                    )
            elif d.skip:
                d.skip = 0  # the rest of a frame damaged by a gap: already accounted for
            elif left > 0:
                self.report_anomaly(
                    direction,
                    d.base + d.pos,
                    "truncated-stream",
                    f"stream ends inside a frame ({left} bytes of it captured)",
                    None,
                    left,
                )
            if d.base >= 0:
                d.reset(d.base + len(d.buf))
            self._finish_direction(direction, d)
            self._abort_contents(direction, "capture ended")

    def pop_events(self) -> list:
        ev = self.events
        self.events = []
        self.silent_frames = 0
        return ev

    def _counted(self, direction: int, d: Direction) -> bool:
        """One frame decoded: reported to the tally; True if it is to be a Frame event too."""
        if self.tally is not None:
            self.tally(direction, d.ts, 1)
        if self.frame_events:
            return True
        self.silent_frames += 1
        return False

    # -- framing and resynchronisation -------------------------------------------------------

    def _parse(self, direction: int, d: Direction, final: bool = False) -> None:
        pos = d.pos
        if d.skip:  # the rest of a frame damaged by a gap
            take = min(d.skip, len(d.buf) - pos)
            pos += take
            d.skip -= take
            d.pos = pos
        while not d.skip:
            if d.resync:
                pos = self.find_boundary(direction, d, pos, final)
                if pos < 0:
                    break
            pos = self._frames(direction, d, pos)
            if not d.resync:
                d.pos = pos
                break
        keep_tail(d)

    def _flush_resync(self, direction: int, d: Direction) -> None:
        """The stream ends here (end of capture, or a gap for grammars that say so): a
        candidate whose proof lies beyond it can never be proven, so look for a boundary
        within the bytes held instead of discarding them all."""
        if d.resync and len(d.buf) > d.pos:
            self._parse(direction, d, final=True)

    def find_boundary(self, direction: int, d: Direction, pos: int, final: bool) -> int:
        """The first provable frame boundary from ``pos`` (resync over, the skip accounted
        for), or -1 with d.pos where the search resumes once more data arrives."""
        buf = d.buf
        n = len(buf)
        hdr = self.HEADER
        probe = self._probe
        p = start = max(pos, d.resync_from - d.base, min(d.scan_from - d.base, n))
        for m in self.CANDIDATE.finditer(buf, p):
            p = m.start()
            if p + hdr > n:
                break
            proof = probe(buf, p, n, final)
            if proof > 0:
                skipped = d.base + p - d.resync_from
                if d.mid is not None and d.mid.starting:
                    if d.mid.begun and not skipped:
                        d.mid = None  # no message of this direction began before the capture
                    else:
                        d.mid.resynced(d.resync_from, skipped, d.packet, d.ts)
                else:
                    detail = self._resync_detail(d.base + p, skipped)
                    if detail is not None:
                        self.report_anomaly(direction, d.resync_from, "resync", detail, None, skipped)
                d.resync = False
                return p
            if proof == 0:  # cannot tell yet: wait for more bytes
                d.pos = p
                return -1
        else:
            p = max(n - hdr + 1, start)  # no candidate left: the last bytes may yet start a header
        d.pos = min(p, n)
        return -1

    def _resync_detail(self, at: int, skipped: int) -> str | None:
        return f"skipped {skipped} bytes to the next provable frame boundary" if skipped else None

    def _lose_sync(self, direction: int, d: Direction, at: int, why: str) -> None:
        """Frames may have been lost anywhere: resync from ``at``, end every content."""
        d.resync = True
        d.resync_from = at
        self._lost(direction, d, why)
        self._abort_contents(direction, why)

    def _lost(self, direction: int, d: Direction, why: str) -> None:
        """Grammar state that a loss of the framing makes unknown (hook)."""

    def _finish_direction(self, direction: int, d: Direction) -> None:
        """Grammar state left at the end of the capture (hook)."""

    def tuned(self, frame_max: int) -> None:
        """connection.tune-ok negotiated ``frame_max`` (hook)."""

    # -- events ------------------------------------------------------------------------------

    def report_anomaly(self, direction, offset, kind, detail, channel=None, skipped=0) -> None:
        d = self.dirs[direction]
        self.events.append((direction, Anomaly(d.packet, d.ts, offset, kind, detail, channel, skipped)))

    def report_unfit(self, direction, offset, channel, what: str, value, column: str) -> None:
        """``value`` (``what`` on the wire) does not fit ``column``: the column is null."""
        self.report_anomaly(
            direction,
            offset,
            "value-out-of-range",
            f"{what} {value} does not fit {column} (stored null)",
            channel,
        )

    def report_unfit_content(self, direction, offset, channel, body_size, timestamp) -> None:
        """Report a content header's declared body size and timestamp property that do not fit
        messages.body_size and messages.msg_timestamp."""
        if type(body_size) is int and body_size > I64_MAX:
            self.report_unfit(direction, offset, channel, "body size", body_size, "messages.body_size")
        if type(timestamp) is int and not 0 <= timestamp < TS_SECONDS_MAX:
            self.report_unfit(
                direction, offset, channel, "timestamp property", timestamp, "messages.msg_timestamp"
            )

    def _method(self, direction: int, m) -> None:
        """Hand over a decoded method: secrets out, then the event, then what it tells of
        the connection."""
        name = m.name
        tag = m.args.get("delivery-tag")
        if type(tag) is int and tag > I64_MAX:
            self.report_unfit(direction, m.offset, m.channel, "delivery-tag", tag, "delivery_tag")
        if name in SECRET_ARGS:
            self.learner.redact(name, m.args)
        self.events.append((direction, m))
        learn = self.learner.handlers.get(name)
        if learn is not None:
            learn(direction, m)
            if name == "connection.tune-ok" and (fm := self.learner.v.get("frame_max")):
                self.tuned(fm)

    def _release_held(self, direction: int, d: Direction) -> None:
        if d.mid is not None and (a := d.mid.release()) is not None:
            self.events.append((direction, a))

    def fresh_channel(self, direction: int, d: Direction, key: int) -> None:
        """A method on ``key``: what follows on it is no rest of a message begun earlier."""
        if d.mid is not None:
            self._release_held(direction, d)
            d.mid.fresh.add(key)
