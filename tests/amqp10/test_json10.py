"""The compiled walker's messages JSON written from the sections' bytes (amqp/json10.pxi) against
the reference's: the properties column (``rows.to_json`` of ``rows_1_0.other_sections``) and
the headers column (of the application-properties) of the sections codec_1_0's reference reader
decodes.  Every encoding of the generated 1.0 table, at every width, in every position (a
section, a field, a list, a map, an array, a described value), damaged or not: the writer gives
the reference's texts, or None ("not mine": the row then writes the reference's) and never a
text the reference would not write."""

from __future__ import annotations

import random
import struct

import pytest
from fixtures.compiled import built_or_skip

from amqpcap.amqp import codec_1_0
from amqpcap.amqp.spec import v1_0 as SPEC
from amqpcap.amqp.stream import DecodeError
from amqpcap.records import rows, rows_1_0

CODES = sorted(SPEC.ENCODINGS)
SECTION = {name: code for code, name in SPEC.SECTIONS.items()}
TEXTS = ["", "k", "n", 'q"uote', "back\\slash", "tab\tnew\nline\x01\x1f\x7f", "é", "日本", "\U0001f600", "k"]
RAW_TEXTS = [b"\xff", b"a\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"]  # invalid UTF-8


def writer():
    """fast10's ``section_texts``, with the messages row's plan bound (as in a dissect, whose
    first row binds it): the sections the row does not read are then only written, not decoded,
    so that the writer alone decides whether the reference would have read them."""
    fast10 = built_or_skip("fast10")
    fast10.append_rows([], None, None, None, [], [])  # (no events: the plan bound, nothing written)
    return fast10.section_texts


def reference(buf: bytes):
    """The reference's (properties text, headers text), or its DecodeError's text."""
    sections, spans = {}, []
    try:
        kind = codec_1_0.read_sections_reference(buf, sections, spans)
    except DecodeError as e:
        return ("error", e.args)
    app = sections.get("application-properties")
    try:
        return rows.to_json(rows_1_0.other_sections(sections, kind)), None if app is None else rows.to_json(
            app
        )
    except TypeError as e:  # a key the json module does not write (binary)
        return ("error", e.args)


def sized(code: int, body: bytes, count: int | None = None) -> bytes:
    """``body`` after its constructor's size (and count) of the encoding's width."""
    w = SPEC.ENCODINGS[code].width
    fmt = "B" if w == 1 else ">I"
    if count is None:
        return bytes([code]) + struct.pack(fmt, len(body)) + body
    return bytes([code]) + struct.pack(fmt, len(body) + w) + struct.pack(fmt, count) + body


def of_width(rng, category: str, type_: str | None = None) -> int:
    return rng.choice(
        [
            c
            for c in CODES
            if SPEC.ENCODINGS[c].category == category and type_ in (None, SPEC.ENCODINGS[c].type)
        ]
    )


def text_bytes(rng) -> bytes:
    return rng.choice(RAW_TEXTS) if rng.random() < 0.1 else rng.choice(TEXTS).encode()


def body(rng, code: int, depth: int) -> bytes:
    """A value of the encoding ``code``, without its constructor."""
    enc = SPEC.ENCODINGS[code]
    if enc.category == "fixed":
        if enc.type == "char" and rng.random() < 0.7:
            cp = rng.choice([0x41, 0x0A, 0x22, 0x5C, 0xE9, 0x1F600, 0xD800, 0x110000, 0xFFFFFFFF])
            return struct.pack(">I", cp)
        if enc.type in ("float", "double") and rng.random() < 0.5:
            v = rng.choice([0.0, -0.0, 1.5, 1e30, float("nan"), float("inf"), -float("inf"), 0.1, 3.4e38])
            return struct.pack(">f" if enc.width == 4 else ">d", v)
        return bytes(rng.randrange(256) for _ in range(enc.width))
    if enc.category == "variable":
        raw = (
            bytes(rng.randrange(256) for _ in range(rng.randrange(5)))
            if enc.type == "binary"
            else text_bytes(rng)
        )
        return sized(code, raw)[1:]
    if enc.category == "compound":
        n = rng.randrange(4) if depth < 4 else 0
        if enc.type == "map":
            items = b"".join(key(rng, depth) + value(rng, depth + 1) for _ in range(n))
            return sized(code, items, 2 * n)[1:]
        return sized(code, b"".join(value(rng, depth + 1) for _ in range(n)), n)[1:]
    # an array: one element constructor, its values
    element = rng.choice([c for c in CODES if SPEC.ENCODINGS[c].category != "array" or depth < 3])
    n = rng.randrange(4)
    head = bytes([element])
    if rng.random() < 0.1:  # described elements
        head = b"\x00\x53\x70" + head
    return sized(code, head + b"".join(body(rng, element, depth + 1) for _ in range(n)), n)[1:]


def key(rng, depth: int) -> bytes:
    """A map's key: text mostly (repeated at times), else any value."""
    if rng.random() < 0.85:
        return sized(of_width(rng, "variable", rng.choice(["string", "symbol"])), text_bytes(rng))
    return value(rng, depth + 1)


def descriptor(rng) -> bytes:
    r = rng.random()
    if r < 0.6:
        return b"\x53" + bytes([rng.choice(list(SPEC.COMPOSITES) + list(SPEC.DESCRIBED) + [0x99])])
    if r < 0.7:
        return b"\x80" + struct.pack(">Q", rng.choice([0x73, 2**64 - 1, 1 << 40]))
    if r < 0.8:
        return rng.choice([b"\x44", b"\x43", b"\x52\x70", b"\x60\x00\x73", b"\x70\x00\x00\x00\x73"])
    return rng.choice([b"\xa3\x04amqp", b"\x54\x05", b"\x41", b"\x81" + bytes(8)])


def value(rng, depth: int = 0) -> bytes:
    """Any value: every encoding of the table, a described one at times."""
    if depth < 5 and rng.random() < 0.15:
        return b"\x00" + descriptor(rng) + value(rng, depth + 1)
    code = rng.choice(CODES)
    if depth >= 5 and SPEC.ENCODINGS[code].category in ("compound", "array"):
        code = 0x40
    return bytes([code]) + body(rng, code, depth)


def fields(rng, n: int) -> bytes:
    items = [value(rng, 2) if rng.random() < 0.6 else b"\x40" for _ in range(n)]
    return sized(of_width(rng, "compound", "list"), b"".join(items), n) if n else b"\x45"


def message(rng) -> bytes:
    """Sections in the usual order (one of them repeated or moved at times), any body (or none,
    when a value drawn is too large for the narrow width drawn)."""
    try:
        return sections(rng)
    except struct.error:
        return b""


def sections(rng) -> bytes:
    out = []
    if rng.random() < 0.6:
        out.append(b"\x00\x53\x70" + (fields(rng, rng.randrange(7)) if rng.random() < 0.9 else value(rng, 1)))
    for name in ("delivery-annotations", "message-annotations"):
        if rng.random() < 0.3:
            out.append(b"\x00\x53" + bytes([SECTION[name]]) + value(rng, 1))
    if rng.random() < 0.8:
        out.append(
            b"\x00\x53\x73" + (fields(rng, rng.randrange(16)) if rng.random() < 0.9 else value(rng, 1))
        )
    if rng.random() < 0.7:
        code = of_width(rng, "compound", "map")
        n = rng.randrange(4)
        app = sized(code, b"".join(key(rng, 1) + value(rng, 2) for _ in range(n)), 2 * n)
        out.append(b"\x00\x53\x74" + (app if rng.random() < 0.85 else value(rng, 1)))
    for _ in range(rng.randrange(3)):
        kind = rng.choice(["data", "data", "amqp-value", "amqp-sequence"])
        v = (
            sized(of_width(rng, "variable", "binary"), bytes(rng.randrange(9)))
            if kind == "data"
            else value(rng, 1)
        )
        out.append(b"\x00\x53" + bytes([SECTION[kind]]) + v)
    if rng.random() < 0.2:
        out.append(b"\x00\x53\x78" + value(rng, 1))
    if out and rng.random() < 0.1:
        out.insert(rng.randrange(len(out)), rng.choice(out))
    return b"".join(out)


def check(section_texts, buf: bytes) -> bool:
    """The writer's texts of ``buf`` are the reference's, or it declines: whether it wrote."""
    got = section_texts(buf)
    want = reference(buf)
    if got is None:
        return False
    assert want[0] != "error", buf
    assert got == want, buf
    return True


def test_every_encoding_anywhere_in_a_message_is_written_as_the_reference_writes_it():
    section_texts = writer()
    rng = random.Random(31)
    written = declined = 0
    for _ in range(6000):
        if check(section_texts, message(rng)):
            written += 1
        else:
            declined += 1
    # (the rest hold a decimal, a repeated key or section, a symbol descriptor, ... somewhere)
    assert written > declined / 3, (written, declined)


def test_the_messages_clients_send_are_the_writers_own():
    section_texts = writer()
    from amqp10_wire import (
        Sym,
        amqp_value,
        application_properties,
        data,
        described,
        header,
        message_annotations,
        properties,
        timestamp,
    )

    app = {"n": 3, "s": "é\n", "b": b"\x01", "neg": -5, "l": [1, "x", None, True], "m": {"a": Sym("y")}}
    messages = [
        header(True)
        + properties(message_id="msg-0", to="/exchanges/amq.topic/orders.1")
        + application_properties({"n": 3})
        + data(b"x"),
        header(False, 9, 5000)
        + properties(
            user_id=b"u\xff",
            to="/queues/q",
            correlation_id=7,
            content_type=Sym("text/plain"),
            creation_time=timestamp(1700000000123),
        )
        + application_properties(app)
        + message_annotations({"x-opt-a": "v", "x-opt-t": timestamp(-1)})
        + data(b"a")
        + data(b"b"),
        properties(reply_to="/queues/r") + amqp_value([1, "two", {"k": None}]),
        described(0x78, message_annotations({"x": 1.5 if False else 1})[3:]) + data(b""),
    ]
    for m in messages:
        assert check(section_texts, m), m


def test_damaged_messages_are_written_as_the_reference_or_left_to_it():
    section_texts = writer()
    rng = random.Random(5)
    for _ in range(1500):
        buf = message(rng)
        if not buf:
            continue
        for _ in range(3):
            i = rng.randrange(len(buf))
            for b in (buf[:i] + bytes([rng.randrange(256)]) + buf[i + 1 :], buf[:i], buf[:i] + buf[i + 1 :]):
                check(section_texts, b)


def nested(depth: int) -> bytes:
    v = b"\x40"
    for i in range(depth):
        v = sized(0xC0, v, 1) if i % 2 else b"\x00\x53\x99" + v
    return v


@pytest.mark.parametrize(
    "buf, mine",
    [
        # the bench's message: a header, properties, application-properties, a data body
        (
            b"\x00\x53\x70"
            + sized(0xC0, b"\x41", 1)
            + b"\x00\x53\x73"
            + sized(0xC0, b"\xa1\x01m\x40\xa1\x04/q/q", 3)
            + b"\x00\x53\x74"
            + sized(0xC1, b"\xa1\x01n\x52\x03", 2)
            + b"\x00\x53\x75\xa0\x02hi",
            True,
        ),
        (b"\x00\x53\x75\xa0\x00", True),  # a body alone: {"body-section":"data"}
        (b"\x00\x53\x74\x40\x00\x53\x75\xa0\x00", True),  # null application-properties: no headers
        (
            b"\x00\x53\x74" + sized(0xC1, b"\xa1\x01k\x41\xa3\x01k\x42", 4),
            False,
        ),  # a key twice (string, symbol)
        (b"\x00\x53\x74" + sized(0xC1, b"\xa1\x01\xe9\x41", 2), False),  # a key that is not ASCII
        (b"\x00\x53\x74" + sized(0xC1, b"\x52\x01\x41", 2), False),  # a key that is not text
        (b"\x00\x53\x72\xc1\x01\x00\x00\x53\x72\xc1\x01\x00", False),  # a section twice
        (b"\x00\x53\x77\x74" + bytes(4) + b"\x00\x53\x74\xc1\x01\x00", True),  # a decimal in the body
        (b"\x00\x53\x72" + sized(0xC1, b"\xa3\x01x\x74" + bytes(4), 2), False),  # a decimal in an annotation
        (b"\x00\x53\x73" + sized(0xE0, b"\xa1\x01m\x01n", 2), False),  # a composite section as an array
        (b"\x00\x53\x72" + nested(31), True),
        (b"\x00\x53\x72" + nested(40), False),  # deeper than the decoder reads
        (
            b"\x00\x53\x72\xf0" + struct.pack(">II", 5, 1 << 20) + b"\x40",
            False,
        ),  # a zero-width array's huge count
        (
            b"\x00\x53\x72\xd0" + struct.pack(">II", 8, 1 << 30) + b"\x40" * 4,
            False,
        ),  # a count its bytes cannot hold
    ],
)
def test_the_writer_declines_what_it_does_not_write_as_the_reference(buf, mine):
    section_texts = writer()
    assert check(section_texts, buf) is mine


def test_the_texts_escape_and_format_as_the_json_module_does():
    section_texts = writer()
    strings = b"".join(sized(0xA1, t.encode()) for t in TEXTS) + b"".join(sized(0xA1, t) for t in RAW_TEXTS)
    floats = b"".join(
        b"\x82" + struct.pack(">d", v) for v in (float("nan"), float("inf"), -float("inf"), 1e22, 5e-324)
    )
    floats += b"".join(b"\x72" + struct.pack(">f", v) for v in (0.1, -0.0, 3.4e38))
    chars = b"".join(b"\x73" + struct.pack(">I", cp) for cp in (0x22, 0x0A, 0xE9, 0x1F600, 0xD800, 0x110000))
    numbers = (
        b"\x80" + b"\xff" * 8 + b"\x81" + b"\x80" + bytes(7) + b"\x83" + struct.pack(">q", -1) + b"\x56\x02"
    )
    odd = (
        b"\x98"
        + bytes(range(16))
        + b"\xa0\x04\x00\xff\x10\x7f"
        + b"\x00\x53\x99\x45"
        + b"\x00\x80"
        + b"\xff" * 8
        + b"\x43"
    )
    for item in (strings, floats, chars, numbers, odd):
        # each value under its own key of a message-annotations map (the properties column)
        values = split(item)
        pairs = b"".join(sized(0xA1, b"k%d" % i) + v for i, v in enumerate(values))
        assert check(section_texts, b"\x00\x53\x72" + sized(0xD1, pairs, 2 * len(values)))


def split(item: bytes) -> list:
    """The values encoded one after the other in ``item``."""
    from amqpcap.amqp import types_1_0

    out, p = [], 0
    while p < len(item):
        _, q = types_1_0.decode(item, p, len(item))
        out.append(item[p:q])
        p = q
    return out
