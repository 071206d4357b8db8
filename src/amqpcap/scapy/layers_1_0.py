"""The AMQP 1.0 frame layer: one class for every 1.0 frame (performatives, SASL frames, empty
frames), the performative decoded by the dissector's own type system (amqp.types_1_0).

Fields are the frame header's (``size``, ``doff``, ``frame_type`` 0 AMQP / 1 SASL,
``channel``, the extended header ``ext``) and ``body`` (the performative and, on a transfer,
the message bytes after it).  ``method`` is the performative's name (``open`` ... ``close``,
``sasl.mechanisms`` ... ``sasl.outcome``; ``empty`` for an empty frame, the 1.0 heartbeat),
``arguments`` its fields by specification name, ``message_bytes`` a transfer's payload.
``show()`` and ``repr`` print the performative decoded; a sasl-init's PLAIN password and a
sasl-response are redacted unless ``keep_secrets``, as in the tables.
"""

from __future__ import annotations

import struct

from scapy.fields import ByteEnumField, ByteField, IntField, ShortField, StrLenField

from amqpcap.amqp import codec_1_0
from amqpcap.amqp.facts import REDACTED, split_credentials
from amqpcap.amqp.spec import v1_0 as SPEC
from amqpcap.amqp.stream import DecodeError
from amqpcap.amqp.types_1_0 import decode, described_head
from amqpcap.scapy.fields import keep_secrets

FRAME_TYPES_10 = {0: "amqp", 1: "sasl"}
_FIELDS = {code: tuple(f.name for f in c.fields) for code, c in SPEC.COMPOSITES.items()}
_SIZE = struct.Struct(">I")


def performative(body: bytes) -> tuple[str, dict, int]:
    """(name, arguments by specification name, offset after the performative) of a frame body;
    ``("empty", {}, 0)`` for an empty frame.  Raises DecodeError when the body is no
    performative."""
    if not body:
        return "empty", {}, 0
    code, p = described_head(body, 0, len(body))
    fields = _FIELDS.get(code) if code in SPEC.METHOD_NAMES else None
    if fields is None:
        raise DecodeError(f"descriptor {code!r} is no performative")
    value, p = decode(body, p, len(body), 1)
    if type(value) is not list:
        raise DecodeError(f"{SPEC.METHOD_NAMES[code]} is not a list")
    return SPEC.METHOD_NAMES[code], {k: v for k, v in zip(fields, value) if v is not None}, p


def redacted(name: str, args: dict) -> dict:
    """``args`` as the tables keep them without --keep-secrets: a sasl-init's PLAIN (AMQPLAIN,
    CRAM-MD5) password and a sasl-response replaced by ``<redacted>``."""
    if name == "sasl.init" and args.get("initial-response") is not None:
        user, password = split_credentials(args.get("mechanism"), args["initial-response"], False)
        if password is not None:
            return {**args, "initial-response": {"user": user, "password": REDACTED}}
    if name == "sasl.response" and "response" in args:
        return {**args, "response": REDACTED}
    return args


class PerformativeField(StrLenField):
    """The frame body: bytes on the wire, shown as the decoded performative."""

    def i2repr(self, pkt, x):
        try:
            name, args, end = performative(bytes(x or b""))
        except (DecodeError, IndexError, ValueError) as e:
            return f"<not a performative: {e}> {len(x or b'')} bytes"
        if not keep_secrets.on:
            args = redacted(name, args)
        rest = len(x) - end if x else 0
        return f"{name} {args!r}" + (f" + {rest} message bytes" if rest else "")


def frame_layer(base):
    """The 1.0 frame class, a subclass of the scapy layer ``base`` (layers.AMQP: so that
    ``pkt[AMQP]`` finds 1.0 frames too)."""

    class AMQP10(base):
        """An AMQP 1.0 frame (see the module docstring)."""

        name = "AMQP 1.0 frame"
        version = "1.0"
        fields_desc = [
            IntField("size", None),
            ByteField("doff", 2),
            ByteEnumField("frame_type", 0, FRAME_TYPES_10),
            ShortField("channel", 0),
            StrLenField("ext", b"", length_from=lambda p: max(p.doff * 4 - 8, 0)),
            PerformativeField("body", b"", length_from=lambda p: max(p.size - max(p.doff * 4, 8), 0)),
        ]

        @classmethod
        def dispatch_hook(cls, _pkt=None, *args, **kw):
            return cls

        def _decoded(self):
            try:
                return performative(bytes(self.body or b""))
            except (DecodeError, IndexError, ValueError):
                return None, {}, 0

        @property
        def method(self):
            return self._decoded()[0]

        @property
        def arguments(self) -> dict:
            """The performative's fields by their specification names (as on the wire)."""
            return self._decoded()[1]

        @property
        def message_bytes(self) -> bytes:
            """A transfer's payload: the message bytes after the performative."""
            name, _, end = self._decoded()
            return bytes(self.body or b"")[end:] if name == "transfer" else b""

        def post_build(self, pkt, pay):
            if self.size is None:
                pkt = _SIZE.pack(len(pkt)) + pkt[4:]
            return pkt + pay

        def mysummary(self):
            name, args, _ = self._decoded()
            keys = ("handle", "delivery-id", "link-credit", "first", "last", "name", "code")
            shown = " ".join(f"{k}={args[k]}" for k in keys if k in args and not isinstance(args[k], bytes))
            return f"AMQP 1.0 ch{self.channel} {name or 'undecoded'}" + (f" {shown}" if shown else "")

    return AMQP10


def whole_frame(data: bytes) -> int:
    """The size of the 1.0 frame ``data`` starts with when it is whole and plausible, else 0."""
    size = codec_1_0.frame_ok(data, 0, len(data))
    return size if 0 < size <= len(data) else 0
