"""The compiled frame loop's methods row arguments written from a performative's bytes
(amqp/json10.pxi ``args_text``) against the reference's: the json module's text
(``rows.to_json``) of the fields the reference reader decodes (types_1_0, null fields left out,
fields past the spec's dropped).  Every encoding of the generated 1.0 table, at every width, in
every field of every performative, damaged or not: the writer gives the reference's text, or None
(the row then writes the reference's JSON of the fields) and never a text the reference would not
write.  The rows of the shipped captures' walked performatives are compared with the reference's
in test_fast10 (``test_the_compiled_1_0_rows_are_the_reference_rows``)."""

from __future__ import annotations

import random

import pytest
from fixtures.compiled import built_or_skip
from test_json10 import CODES, sized, value

from amqpcap.amqp import codec_1_0, decoder, types_1_0
from amqpcap.amqp.spec import v1_0 as SPEC
from amqpcap.amqp.stream import DecodeError
from amqpcap.records import rows, rows_1_0

PERFORMATIVES = {code: SPEC.COMPOSITES[code] for code in SPEC.METHOD_NAMES if code in SPEC.COMPOSITES}
LISTS = [c for c in CODES if SPEC.ENCODINGS[c].category == "compound" and SPEC.ENCODINGS[c].type == "list"]


def writer():
    return built_or_skip("fast10").performative_text


def reference(buf: bytes):
    """The reference's arguments text of the performative ``buf``, or None if it does not decode
    (codec_1_0.read_performative_reference over types_1_0's decoder alone)."""
    try:
        code, p = codec_1_0.described_head(buf, 0, len(buf))
        fields = [f.name for f in PERFORMATIVES[code].fields]
        v, _ = types_1_0.decode(buf, p, len(buf), 1)
    except DecodeError:
        return None
    if type(v) is not list:
        return None
    try:
        return rows.to_json({k: x for k, x in zip(fields, v) if x is not None})
    except TypeError:  # a key the json module does not write
        return None


def performative(rng, code: int, n: int | None = None) -> bytes:
    """The performative ``code``: a list (of a width drawn) of ``n`` fields, each null, a value of
    the field's own kind or any value of the table."""
    spec_fields = PERFORMATIVES[code].fields
    if n is None:
        n = rng.randrange(len(spec_fields) + 1)
    items = [b"\x40" if rng.random() < 0.3 else value(rng, 2) for _ in range(n)]
    body = sized(rng.choice(LISTS), b"".join(items), n) if n or rng.random() < 0.5 else b"\x45"
    return b"\x00\x53" + bytes([code]) + body


def check(performative_text, buf: bytes) -> bool:
    """The writer's text of ``buf`` is the reference's, or it declines: whether it wrote."""
    got = performative_text(buf, 0, len(buf))
    if got is None:
        return False
    want = reference(buf)
    assert want is not None, buf
    assert got == want, buf
    return True


def test_every_encoding_in_every_field_of_every_performative_is_written_as_the_reference_writes_it():
    performative_text = writer()
    rng = random.Random(10)
    written = declined = 0
    for _ in range(6000):
        if check(performative_text, performative(rng, rng.choice(list(PERFORMATIVES)))):
            written += 1
        else:
            declined += 1
    # (the rest hold a decimal, a repeated key, a symbol descriptor, ... in some field)
    assert written > declined, (written, declined)


def test_the_performatives_clients_send_are_the_writers_own():
    performative_text = writer()
    from amqp10_wire import accepted, disposition, flow, modified, rejected, released, transfer

    frames = [
        transfer(0, 0, b"\x00\x00\x00\x00", settled=False, more=False),
        transfer(3, 2**32 - 1, b"tag-\xff", settled=True, more=True, state=accepted()),
        transfer(1, 7, b"", aborted=True),
        transfer(0),
        flow(0, 0, 1000),
        flow(2, 5, 0, True, 9),
        flow(),
        disposition(True, 0, 1, True, accepted()),
        disposition(False, 2**32 - 1, None, None, rejected("amqp:not-found", 'no "queue"\n')),
        disposition(True, 4, 9, True, released()),
        disposition(True, 4, 4, False, modified()),
    ]
    for buf in frames:
        assert check(performative_text, buf), buf
    assert performative_text(frames[0], 0, len(frames[0])) == (
        '{"handle":0,"delivery-id":0,"delivery-tag":{"$b64":"AAAAAA=="},"message-format":0,'
        '"settled":false,"more":false}'
    )


def test_damaged_performatives_are_written_as_the_reference_or_left_to_it():
    performative_text = writer()
    rng = random.Random(11)
    for _ in range(1500):
        buf = performative(rng, rng.choice(list(PERFORMATIVES)))
        for _ in range(3):
            i = rng.randrange(len(buf))
            for b in (buf[:i] + bytes([rng.randrange(256)]) + buf[i + 1 :], buf[:i], buf[:i] + buf[i + 1 :]):
                check(performative_text, b)


@pytest.mark.parametrize(
    "buf, mine",
    [
        (b"\x00\x53\x14\x45", True),  # no fields: {}
        (b"\x00\x53\x14\xc0\x01\x00", True),  # an empty list
        (b"\x00\x53\x14\xc0\x02\x01\x40", True),  # a null field only: {}
        (b"\x00\x53\x13" + sized(0xC0, b"\x40" * 12, 12), False),  # more fields than flow's 11
        (b"\x00\x53\x14\xa1\x01x", False),  # not a list
        (b"\x00\x53\x14\xd0" + bytes([0, 0, 0, 6, 0, 0, 0, 1]) + b"\x52\x01", True),  # a list32
        (b"\x00\x53\x14\xc0\x03\x01\x74" + bytes(1), False),  # a field cut short
        (
            b"\x00\x53\x13" + sized(0xC0, b"\x40" * 10 + sized(0xC1, b"\xa3\x01k\x41\xa1\x01k\x42", 4), 11),
            False,
        ),
        (
            b"\x00\x53\x14" + sized(0xC0, b"\x52\x01\x52\x02\xa0\x01t\x43\x41\x40\x40\x00\x53\x24\x45", 8),
            True,
        ),
    ],
)
def test_the_writer_declines_what_it_does_not_write_as_the_reference(buf, mine):
    performative_text = writer()
    assert check(performative_text, buf) is mine


@pytest.mark.compiled("fast10")
def test_the_rows_of_a_delivery_a_later_transfer_settles_are_the_references():
    """A delivery whose second transfer settles it, its first transfer's row written before its
    last transfer comes: the walker's rows are the reference's, the first transfer's arguments
    the fields it carries (the walked text) and nothing the decoder keeps of the delivery."""
    fast10 = built_or_skip("fast10")
    from amqp10_wire import attach, data, frame, properties, transfer
    from test_fuzz_codec_1_0 import stream

    msg = properties(message_id="m") + data(b"z" * 40)
    head = stream() + frame(attach("k", 1, False, tgt="/queues/r"))
    pieces = [
        head
        + frame(transfer(1, 5, b"t", more=True) + msg[:10])
        + frame(transfer(1, settled=True, more=True) + msg[10:20]),
        frame(transfer(1, more=False) + msg[20:]),
    ]
    got = []
    for cls, append_rows in (
        (decoder.decoder_1_0(), fast10.append_rows),
        (codec_1_0.Decoder10, rows_1_0.append_rows_reference),
    ):
        d = cls()
        d.frame_events = False
        methods, messages = [], []
        for i, piece in enumerate(pieces):
            d.feed(0, piece, 8 + sum(map(len, pieces[:i])), 1 + i, 10 + i)
            append_rows(d.pop_events(), "c", 1, "1.0", methods, messages)
        d.finish(99, 99)
        append_rows(d.pop_events(), "c", 1, "1.0", methods, messages)
        got.append(repr((methods, messages)))
    assert got[0] == got[1]
    assert "$settled" not in got[0]
