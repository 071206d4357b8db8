"""Hostile AMQP 1.0 input: mutated, truncated and random streams never raise, and what cannot be
decoded becomes anomalies."""

import random

from amqp10_wire import (
    accepted,
    application_properties,
    attach,
    begin,
    close,
    data,
    disposition,
    flow,
    frame,
    header,
    open_,
    properties,
    sasl_init,
    transfer,
)

from amqpcap.amqp.codec_1_0 import Decoder10
from amqpcap.amqp.events import Anomaly, Frame, Heartbeat, ProtocolHeader
from amqpcap.amqp.events_1_0 import Delivery, Performative

KNOWN = (Anomaly, Frame, Heartbeat, ProtocolHeader, Performative, Delivery)


def stream() -> bytes:
    msg = header(True) + properties(message_id="m") + application_properties({"a": [1, 2]}) + data(b"z" * 700)
    return (
        frame(sasl_init("PLAIN", b"\0u\0p"), ftype=1)
        + b"AMQP\x00\x01\x00\x00"
        + frame(open_("c", max_frame=512))
        + frame(begin())
        + frame(attach("l", 0, False, tgt="/queues/q"))
        + frame(flow(0, 0, 10))
        + frame(transfer(0, 0, b"t", more=True) + msg[:400])
        + frame(transfer(0, more=False) + msg[400:])
        + frame(disposition(True, 0, 0, True, accepted()))
        + frame(b"")
        + frame(close())
    )


def feed(raw: bytes, rnd: random.Random) -> list:
    d = Decoder10()
    pos = 0
    while pos < len(raw):
        n = rnd.randint(1, 300)
        d.feed(0, raw[pos : pos + n], 8 + pos, 1, 1)
        pos += n
    d.finish(2, 2)
    return d.pop_events()


def test_mutated_streams_never_raise_and_give_only_known_events():
    base = stream()
    rnd = random.Random(31)
    anomalies = 0
    for _ in range(400):
        raw = bytearray(base)
        for _ in range(rnd.randint(1, 6)):
            i = rnd.randrange(len(raw))
            raw[i] = rnd.choice((0x00, 0xFF, 0x40, 0xD0, 0xF0, 0xE0, rnd.randrange(256)))
        ev = feed(bytes(raw), rnd)
        assert all(isinstance(e, KNOWN) for _, e in ev)
        anomalies += sum(isinstance(e, Anomaly) for _, e in ev)
    assert anomalies > 100  # the mutations are noticed, not silently absorbed


def test_random_bytes_are_accounted_for_as_anomalies():
    rnd = random.Random(7)
    for _ in range(50):
        raw = rnd.randbytes(rnd.randint(1, 5000))
        ev = feed(raw, rnd)
        assert all(isinstance(e, KNOWN) for _, e in ev)


def test_every_truncation_of_a_stream_is_accounted_for():
    base = stream()
    rnd = random.Random(3)
    for cut in range(1, len(base), 7):
        ev = feed(base[:cut], rnd)
        kinds = {e.kind for _, e in ev if isinstance(e, Anomaly)}
        assert kinds <= {"truncated-stream", "incomplete-content"}


def test_deliveries_left_open_on_many_handles_stay_bounded():
    from amqpcap.amqp import codec_1_0

    d = Decoder10()
    raw = frame(open_("c")) + frame(begin())
    raw += b"".join(frame(transfer(h, h, b"t", more=True) + data(b"x" * 100)) for h in range(5000))
    d.feed(0, raw, 8, 1, 1)
    assert len(d.assembling[0]) == codec_1_0.MAX_ASSEMBLIES
    assert len(d.state.held) == 5000 - codec_1_0.MAX_ASSEMBLIES  # ended early, awaiting settlement
    assert d.held_bytes[0] == sum(len(a.buf) for a in d.assembling[0].values())
    d.finish(2, 2)
    ended = [e for _, e in d.pop_events() if isinstance(e, Delivery)]
    assert len(ended) == 5000 and not any(e.complete for e in ended)


def test_a_message_over_the_hold_limit_is_counted_not_held(monkeypatch):
    from amqpcap.amqp import codec_1_0

    monkeypatch.setattr(codec_1_0, "MAX_MESSAGE", 1000)
    d = Decoder10()
    raw = frame(open_("c")) + frame(begin()) + frame(attach("l", 0, False))
    raw += b"".join(
        frame(transfer(0, 0 if i == 0 else None, b"t", more=i < 9) + b"y" * 300) for i in range(10)
    )
    d.feed(0, raw, 8, 1, 1)
    assert d.held_bytes[0] == 0
    d.finish(2, 2)
    (dv,) = [e for _, e in d.pop_events() if isinstance(e, Delivery)]
    assert not dv.complete and dv.sections == {} and dv.frames == 10
    assert d.held_bytes[0] == 0
