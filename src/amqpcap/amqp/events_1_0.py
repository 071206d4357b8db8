"""Events of the AMQP 1.0 codec (codec_1_0.py), next to the shared ones of events.py.

A 1.0 conversation also emits the shared ``Frame``, ``Heartbeat`` (an empty frame),
``ProtocolHeader`` (the SASL layer's second header) and ``Anomaly`` events.  Its performatives
and SASL frames are ``Performative`` events and its reassembled messages ``Delivery`` events:
they carry what the link state knows (the link a handle names, a delivery's settlement), which
a 0-9 ``Method`` / ``Content`` has no place for.  The records layer builds their rows
(records/rows_1_0.py).
"""

from __future__ import annotations

from dataclasses import dataclass

CONTENT = "transfer"  # the performative that carries a piece of a message (has_content)


@dataclass(slots=True)
class Performative:
    """A decoded performative (open ... close) or SASL frame (sasl.mechanisms ... sasl.outcome).
    (A slotted dataclass: the compiled frame loop, amqp/fast10.pyx, makes and reads one at its
    slots' offsets, the layout and defaults read from this class at its import.)"""

    packet: int
    ts: int
    offset: int
    channel: int
    code: int  # descriptor code (0x10 open ... 0x18 close, 0x40 ... 0x44 SASL)
    name: str  # "open", ..., "sasl.init"
    args: dict  # field name (spec spelling) -> decoded value, fields present only
    frame_type: int  # 0 AMQP, 1 SASL
    frame_size: int
    # from the link state: the link the frame's handle names (attach, flow, transfer, detach)
    link_name: str | None = None
    source: str | None = None  # the link's source and target addresses
    target: str | None = None

    synchronous = False  # (the methods row's 0-9 column: a 1.0 performative is never one)

    @property
    def has_content(self) -> bool:
        """A transfer carries a piece of a message."""
        return self.name == CONTENT


@dataclass(slots=True)
class Delivery:
    """A message: the transfers of one delivery reassembled and its sections decoded."""

    packet: int  # packet of the last transfer
    ts: int
    offset: int  # stream offset of the first transfer frame
    channel: int
    handle: int | None
    link_name: str | None
    address: str | None  # the link's target (sent to) or source (received from) address
    delivery_id: int | None
    first_packet: int
    frames: int  # transfer frames
    sections: dict  # section name -> decoded value, every section but the body's
    body_kind: str | None  # data, amqp-sequence, amqp-value
    body_size: int  # data: the payload bytes; amqp-sequence / amqp-value: the encoded value's
    body_hash: str  # sha256 hex of those bytes
    body: bytes  # their first --body-bytes
    complete: bool  # every transfer seen and the sections decoded
    aborted: bool = False
    settled: bool = False  # pre-settled, or settled by a disposition
    settle_ts: int | None = None
    outcome: str | None = None  # accepted, rejected, released, modified, received, declared, ...
    condition: str | None = None  # a rejected outcome's error condition


def creation_time(sections: dict):
    """The properties section's creation-time (ms since the epoch), if it is an integer (a
    boolean is not), else None."""
    props = sections.get("properties")
    value = props.get("creation-time") if isinstance(props, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
