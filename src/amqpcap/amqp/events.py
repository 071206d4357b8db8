"""Events emitted by the sans-IO AMQP decoders (every protocol version).

Every event carries where it came from: ``packet`` (1-based capture packet
number that completed it, Wireshark's ``frame.number``), ``ts`` (ns since the
epoch, UTC) and ``offset`` (byte offset of the frame in this direction's TCP
stream).  The records layer turns events into table rows; the codecs never
know about Arrow or files.

Events are small dataclasses (h11 style), drained from a decoder with
``pop_events()`` as ``(direction, event)`` pairs.  They are read-only by convention, not
``frozen=True``: a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
four times the cost of a plain one, and an event is built for every frame (the codecs build
them, the records layer only reads them).  Connection-level facts are not
events: see ``facts.ConnectionFacts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(slots=True)
class ProtocolHeader:
    """The 8-byte protocol header ("AMQP" + 4 octets) or a non-AMQP preamble."""

    packet: int
    ts: int
    offset: int
    raw: bytes
    version: str | None  # "0-8", "0-9", "0-9-1", "0-10", "1.0", "1.0-sasl", "1.0-tls" or None


@dataclass(slots=True)
class Frame:
    """One wire frame (0-8/0-9/0-9-1 frame, or 0-10 frame), for the ``frames`` table."""

    packet: int
    ts: int
    offset: int
    channel: int
    frame_type: int
    type_name: str  # method, header, body, heartbeat, oob-method, ..., or 0-10 segment type
    size: int  # payload size as on the wire (header and frame-end excluded)
    wire_size: int  # whole frame including header and frame-end


@dataclass(slots=True)
class Method:
    """A decoded method (0-8/0-9/0-9-1) or command/control (0-10)."""

    packet: int
    ts: int
    offset: int
    channel: int
    class_id: int
    method_id: int
    name: str  # "class.method", spec spelling, e.g. "basic.get-empty"
    # argument name (spec spelling, hyphens) -> decoded value: a dict, or (the compiled 0-9
    # decoder, a method whose arguments are plain fields) a read-only mapping equal to it over
    # the frame's bytes (fast09.WireFields)
    args: Mapping[str, object]
    synchronous: bool
    has_content: bool
    frame_size: int = 0
    # 0-10: session command number, and for execution.result/exception the command answered.
    command_id: int | None = None
    answers_command_id: int | None = None


@dataclass(slots=True)
class Content:
    """A complete (or incomplete) content: the method that carried it, its header and body."""

    packet: int  # packet that completed the content (last body frame)
    ts: int
    offset: int  # stream offset of the carrying method frame
    channel: int
    method: Method
    class_id: int
    # property name (spec spelling) -> value, only those present: a dict, or (the compiled 0-9
    # decoder) a read-only mapping equal to it over the header's bytes (fast09.WireFields)
    properties: Mapping[str, object]
    body_size: int  # declared in the content header (0-10: bytes received)
    body_received: int
    body_frames: int
    # sha256 hex of the body bytes received (a decoder with deferred_digests may give the digest
    # still being computed: str() of it is the text)
    body_hash: str
    body: bytes  # first N bytes (N = body_bytes option)
    complete: bool
    first_packet: int  # packet of the carrying method frame
    header_packet: int | None = None
    body_encoding: str | None = None  # 0-9 message.transfer body domain: "longstr" / "octet+longstr"
    # Where the content went; None means "take it from method.args" (0-8/0-9/0-9-1).
    # 0-10 fills these from message.transfer destination / delivery-properties.
    exchange: str | None = None
    routing_key: str | None = None


@dataclass(slots=True)
class Heartbeat:
    """A heartbeat: a heartbeat frame (0-8/0-9/0-9-1) or 0-10's connection.heartbeat control."""

    packet: int
    ts: int
    offset: int
    channel: int


@dataclass(slots=True)
class Anomaly:
    """Something that could not be decoded cleanly.  Nothing is dropped silently."""

    packet: int
    ts: int
    offset: int | None
    kind: str  # gap, malformed-frame, bad-frame-end, unknown-frame-type, unknown-method, ...
    detail: str
    channel: int | None = None
    skipped: int = 0  # bytes of the stream this anomaly accounts for
