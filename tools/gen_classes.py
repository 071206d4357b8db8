#!/usr/bin/env python3
"""Generate src/amqpcap/values.py (the value classes every dissect imports) and values_1_0.py
(AMQP 1.0's events), from one field list per class.

    python tools/gen_classes.py [--check]

(tools/gen_spec.py runs it too.)  The classes behave as the dataclasses they were: an
``__init__`` taking every field in order (defaults last), ``__repr__`` and ``__eq__`` over the
fields, ``__slots__``, ``__match_args__``; a frozen class refuses assignment
(``FrozenInstanceError``), hashes its fields and pickles through ``__getstate__`` /
``__setstate__``; ``values.replace`` is ``dataclasses.replace``.  Written out rather than made
by ``dataclasses.dataclass`` at import, which compiles each class's methods from text in every
process (37 M instructions of an empty capture's dissect of 299 M, with the dataclasses import).
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

import gen_spec_write

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(HERE), "src", "amqpcap")
OUT = os.path.join(PACKAGE, "values.py")
OUT_1_0 = os.path.join(PACKAGE, "values_1_0.py")
REQUIRED = None  # a field without a default


class Field(NamedTuple):
    name: str
    annotation: str
    default: str | None = REQUIRED  # source text of the default value
    comment: str = ""
    factory: bool = False  # default is a callable called for each instance (default_factory)


class Cls(NamedTuple):
    name: str
    doc: str
    fields: tuple
    frozen: bool = False
    body: str = ""  # source of the class's own attributes and methods (indented), after the fields'


F = Field

EVENTS = (
    Cls(
        "ProtocolHeader",
        'The 8-byte protocol header ("AMQP" + 4 octets) or a non-AMQP preamble.',
        (
            F("packet", "int"),
            F("ts", "int"),
            F("offset", "int"),
            F("raw", "bytes"),
            F(
                "version",
                "str | None",
                comment='"0-8", "0-9", "0-9-1", "0-10", "1.0", "1.0-sasl", "1.0-tls" or None',
            ),
        ),
    ),
    Cls(
        "Frame",
        "One wire frame (0-8/0-9/0-9-1 frame, or 0-10 frame), for the ``frames`` table.",
        (
            F("packet", "int"),
            F("ts", "int"),
            F("offset", "int"),
            F("channel", "int"),
            F("frame_type", "int"),
            F(
                "type_name",
                "str",
                comment="method, header, body, heartbeat, oob-method, ..., or 0-10 segment type",
            ),
            F("size", "int", comment="payload size as on the wire (header and frame-end excluded)"),
            F("wire_size", "int", comment="whole frame including header and frame-end"),
        ),
    ),
    Cls(
        "Method",
        "A decoded method (0-8/0-9/0-9-1) or command/control (0-10).",
        (
            F("packet", "int"),
            F("ts", "int"),
            F("offset", "int"),
            F("channel", "int"),
            F("class_id", "int"),
            F("method_id", "int"),
            F("name", "str", comment='"class.method", spec spelling, e.g. "basic.get-empty"'),
            F(
                "args",
                "Mapping[str, object]",
                comment="argument name (spec spelling, hyphens) -> decoded value: a dict, or (the compiled "
                "0-9 decoder, a method whose arguments are plain fields) a read-only mapping equal to it "
                "over the frame's bytes (fast09.WireFields)",
            ),
            F("synchronous", "bool"),
            F("has_content", "bool"),
            F("frame_size", "int", "0"),
            F("command_id", "int | None", "None", "0-10: session command number"),
            F(
                "answers_command_id",
                "int | None",
                "None",
                "0-10: the command execution.result/exception answers",
            ),
        ),
    ),
    Cls(
        "Content",
        "A complete (or incomplete) content: the method that carried it, its header and body.",
        (
            F("packet", "int", comment="packet that completed the content (last body frame)"),
            F("ts", "int"),
            F("offset", "int", comment="stream offset of the carrying method frame"),
            F("channel", "int"),
            F("method", "Method"),
            F("class_id", "int"),
            F(
                "properties",
                "Mapping[str, object]",
                comment="property name (spec spelling) -> value, only those present: a dict, or (the "
                "compiled 0-9 decoder) a read-only mapping equal to it over the header's bytes "
                "(fast09.WireFields)",
            ),
            F("body_size", "int", comment="declared in the content header (0-10: bytes received)"),
            F("body_received", "int"),
            F("body_frames", "int"),
            F(
                "body_hash",
                "str",
                comment="sha256 hex of the body bytes received (a decoder with deferred_digests may give "
                "the digest still being computed: str() of it is the text)",
            ),
            F("body", "bytes", comment="first N bytes (N = body_bytes option)"),
            F("complete", "bool"),
            F("first_packet", "int", comment="packet of the carrying method frame"),
            F("header_packet", "int | None", "None"),
            F(
                "body_encoding",
                "str | None",
                "None",
                '0-9 message.transfer body domain: "longstr" / "octet+longstr"',
            ),
            F(
                "exchange",
                "str | None",
                "None",
                "where the content went; None: take it from method.args (0-8/0-9/0-9-1); 0-10 fills "
                "these from message.transfer destination / delivery-properties",
            ),
            F("routing_key", "str | None", "None"),
        ),
    ),
    Cls(
        "Heartbeat",
        "A heartbeat: a heartbeat frame (0-8/0-9/0-9-1) or 0-10's connection.heartbeat control.",
        (F("packet", "int"), F("ts", "int"), F("offset", "int"), F("channel", "int")),
    ),
    Cls(
        "Anomaly",
        "Something that could not be decoded cleanly.  Nothing is dropped silently.",
        (
            F("packet", "int"),
            F("ts", "int"),
            F("offset", "int | None"),
            F(
                "kind",
                "str",
                comment="gap, malformed-frame, bad-frame-end, unknown-frame-type, unknown-method, ...",
            ),
            F("detail", "str"),
            F("channel", "int | None", "None"),
            F("skipped", "int", "0", "bytes of the stream this anomaly accounts for"),
        ),
    ),
)

CONNECTION_FACTS = Cls(
    "ConnectionFacts",
    "What one connection's protocol headers, handshake and close said (None: not seen).",
    (
        F("client_header", "bytes | None", "None", "the 8-octet protocol headers (set by ConnectionDecoder)"),
        F("server_header", "bytes | None", "None"),
        F("client_version", "str | None", "None", "the version the client's header names"),
        F(
            "version",
            "str | None",
            "None",
            'the version decoded ("tls", "1.0", ...: recognised, not decoded)',
        ),
        F("version_evidence", "str | None", "None", "header, header+start, inferred"),
        F("negotiation", "str", '"none"', "none, accepted, rejected, unknown"),
        F("tls", "bool", "False"),
        F("mid_stream", "bool", "False"),
        F("server_properties", "dict | None", "None", "what the codec learnt from the connection methods"),
        F("client_properties", "dict | None", "None"),
        F("mechanism", "str | None", "None"),
        F("user", "str | None", "None"),
        F("vhost", "str | None", "None"),
        F("channel_max", "int | None", "None"),
        F("frame_max", "int | None", "None"),
        F("heartbeat", "int | None", "None"),
        F("start_version", "tuple | None", "None", "(major, minor) of a 0-8/0-9/0-9-1 connection.start"),
        F("open_ts", "int | None", "None", "connection.open-ok"),
        F("close_ts", "int | None", "None", "the first connection.close"),
        F("closed_by", "str | None", "None", '"client" / "server": who sent it'),
        F("close_frame", "int | None", "None", "its packet"),
        F("close_reply_code", "int | None", "None"),
        F("close_reply_text", "object", "None"),
        F("client_container_id", "str | None", "None", "AMQP 1.0 open: each peer's container-id"),
        F("server_container_id", "str | None", "None"),
        F("idle_timeout_ms", "int | None", "None", "the smaller idle-time-out the peers ask for (ms)"),
        F("client_idle_timeout_ms", "int | None", "None"),
        F("server_idle_timeout_ms", "int | None", "None"),
    ),
    frozen=True,
)

PIPELINE = (
    Cls(
        "Options",
        "How a capture is dissected (the dissect command's options).",
        (
            F("body_bytes", "int", "64"),
            F("frames", "bool", "False"),
            F("ports", "frozenset", "DEFAULT_PORTS"),
            F("keep_secrets", "bool", "False"),
        ),
    ),
    Cls(
        "Summary",
        "What a dissect did: counts, rows per table, time (the command's summary line).",
        (
            F("captures", "int", "0"),
            F("packets", "int", "0"),
            F("tcp_streams", "int", "0"),
            F("rows", "dict", "dict", factory=True),
            F("seconds", "float", "0.0"),
            F("bytes", "int", "0"),
            F("frames", "int", "0", "AMQP frames decoded (whether or not the frames table is written)"),
            F("server_ports", "dict", "dict", "server port -> TCP conversations, all captures", factory=True),
            F("errors", "list", "list", "CaptureError of each input that could not be read", factory=True),
        ),
    ),
)

EVENTS_1_0 = (
    Cls(
        "Performative",
        "A decoded performative (open ... close) or SASL frame (sasl.mechanisms ... sasl.outcome).\n"
        "    (Slotted: the compiled frame loop, amqp/fast10.pyx, makes and reads one at its slots'\n"
        "    offsets, the layout and defaults read from this class at its import.)",
        (
            F("packet", "int"),
            F("ts", "int"),
            F("offset", "int"),
            F("channel", "int"),
            F("code", "int", comment="descriptor code (0x10 open ... 0x18 close, 0x40 ... 0x44 SASL)"),
            F("name", "str", comment='"open", ..., "sasl.init"'),
            F("args", "dict", comment="field name (spec spelling) -> decoded value, fields present only"),
            F("frame_type", "int", comment="0 AMQP, 1 SASL"),
            F("frame_size", "int"),
            F(
                "link_name",
                "str | None",
                "None",
                "from the link state: the link the frame's handle names (attach, flow, transfer, detach)",
            ),
            F("source", "str | None", "None", "the link's source and target addresses"),
            F("target", "str | None", "None"),
        ),
        body="""\
    synchronous = False  # (the methods row's 0-9 column: a 1.0 performative is never one)

    @property
    def has_content(self) -> bool:
        \"\"\"A transfer carries a piece of a message.\"\"\"
        return self.name == CONTENT
""",
    ),
    Cls(
        "Delivery",
        "A message: the transfers of one delivery reassembled and its sections decoded.",
        (
            F("packet", "int", comment="packet of the last transfer"),
            F("ts", "int"),
            F("offset", "int", comment="stream offset of the first transfer frame"),
            F("channel", "int"),
            F("handle", "int | None"),
            F("link_name", "str | None"),
            F(
                "address",
                "str | None",
                comment="the link's target (sent to) or source (received from) address",
            ),
            F("delivery_id", "int | None"),
            F("first_packet", "int"),
            F("frames", "int", comment="transfer frames"),
            F("sections", "dict", comment="section name -> decoded value, every section but the body's"),
            F("body_kind", "str | None", comment="data, amqp-sequence, amqp-value"),
            F(
                "body_size",
                "int",
                comment="data: the payload bytes; amqp-sequence / amqp-value: the encoded value's",
            ),
            F("body_hash", "str", comment="sha256 hex of those bytes"),
            F("body", "bytes", comment="their first --body-bytes"),
            F("complete", "bool", comment="every transfer seen and the sections decoded"),
            F("aborted", "bool", "False"),
            F("settled", "bool", "False", "pre-settled, or settled by a disposition"),
            F("settle_ts", "int | None", "None"),
            F(
                "outcome",
                "str | None",
                "None",
                "accepted, rejected, released, modified, received, declared, ...",
            ),
            F("condition", "str | None", "None", "a rejected outcome's error condition"),
        ),
    ),
)

CLASSES = (*EVENTS, CONNECTION_FACTS, *PIPELINE)

HEAD = '''"""The value classes every dissect imports: the decoders' events (amqp/events.py), a connection's
facts (amqp/facts.py), a dissect's options and summary (pipeline.py).

Generated by tools/gen_classes.py from one field list per class; do not edit.  They behave as
dataclasses: ``__init__`` over the fields in order, ``__repr__``, ``__eq__``, ``__slots__``,
``__match_args__`` (the field names); a frozen class refuses assignment, hashes its fields and
pickles through ``__getstate__``; ``replace`` is ``dataclasses.replace``.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_PORTS = frozenset({5672, 5671})  # 5671: AMQPS, reported as TLS
_FACTORY = object()  # the default of a field whose default is made for each instance


class FrozenInstanceError(AttributeError):
    """An assignment to a field of a frozen class."""


def replace(obj, /, **changes):
    """A new ``obj`` with ``changes`` to its fields (what ``dataclasses.replace`` does)."""
    for name in obj.__match_args__:
        if name not in changes:
            changes[name] = getattr(obj, name)
    return type(obj)(**changes)
'''

HEAD_1_0 = """\"\"\"The value classes of AMQP 1.0's events (amqp/events_1_0.py), imported at a run's first 1.0
conversation.

Generated by tools/gen_classes.py from one field list per class; do not edit.  They behave as
the slotted dataclasses of their fields, as values.py's do.
\"\"\"

from __future__ import annotations

CONTENT = "transfer"  # the performative that carries a piece of a message (has_content)
"""


def _comment(text: str, indent: str, width: int = 110) -> list:
    """``text`` as ``# `` lines of at most ``width`` characters."""
    out, line = [], ""
    for word in text.split():
        if line and len(indent) + 2 + len(line) + 1 + len(word) > width:
            out.append(f"{indent}# {line}")
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        out.append(f"{indent}# {line}")
    return out


def _tuple(names: list) -> str:
    return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"


def render_class(c: Cls) -> list:
    names = [f.name for f in c.fields]
    mine = [f"self.{n}" for n in names]
    theirs = [f"other.{n}" for n in names]
    out = ["", "", f"class {c.name}:", f'    """{c.doc}"""', "", "    __slots__ = ("]
    for f in c.fields:
        if len(f.comment) + len(f.name) < 90:
            out.append(f'        "{f.name}",' + (f"  # {f.comment}" if f.comment else ""))
        else:
            out += _comment(f.comment, "        ")
            out.append(f'        "{f.name}",')
    out += ["    )", "    __match_args__ = __slots__"]
    if not c.frozen:
        out.append("    __hash__ = None  # mutable: equal by value, so not hashable (as a dataclass)")
    params = [
        f"{f.name}: {f.annotation}"
        + ("" if f.default is REQUIRED else f" = {'_FACTORY' if f.factory else f.default}")
        for f in c.fields
    ]
    out += ["", "    def __init__(", "        self,", *(f"        {p}," for p in params), "    ) -> None:"]
    for f in c.fields:
        value = f"{f.default}() if {f.name} is _FACTORY else {f.name}" if f.factory else f.name
        if c.frozen:
            out.append(f'        object.__setattr__(self, "{f.name}", {value})')
        else:
            out.append(f"        self.{f.name} = {value}")
    shown = ", ".join(f"{n}={{self.{n}!r}}" for n in names)
    out += [
        "",
        "    def __repr__(self) -> str:",
        f'        return f"{{type(self).__qualname__}}({shown})"',
        "",
        "    def __eq__(self, other):",
        "        if other.__class__ is self.__class__:",
        f"            return {_tuple(mine)} == {_tuple(theirs)}",
        "        return NotImplemented",
    ]
    if c.body:
        out += ["", *c.body.rstrip("\n").split("\n")]
    if c.frozen:
        out += [
            "",
            "    def __hash__(self) -> int:",
            f"        return hash({_tuple(mine)})",
            "",
            "    def __setattr__(self, name, value):",
            '        raise FrozenInstanceError(f"cannot assign to field {name!r}")',
            "",
            "    def __delattr__(self, name):",
            '        raise FrozenInstanceError(f"cannot delete field {name!r}")',
            "",
            "    def __getstate__(self) -> list:",
            f"        return [{', '.join(mine)}]",
            "",
            "    def __setstate__(self, state: list) -> None:",
            "        for name, value in zip(self.__slots__, state):",
            "            object.__setattr__(self, name, value)",
        ]
    return out


def render(head: str, classes: tuple) -> str:
    lines = [head.rstrip("\n")]
    for c in classes:
        lines += render_class(c)
    return "\n".join(lines) + "\n"


def generate() -> dict:
    """{path: source} of every module this script writes."""
    return {OUT: render(HEAD, CLASSES), OUT_1_0: render(HEAD_1_0, EVENTS_1_0)}


def main(argv=None) -> int:
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    return gen_spec_write.write(generate(), check)


if __name__ == "__main__":
    sys.exit(main())
