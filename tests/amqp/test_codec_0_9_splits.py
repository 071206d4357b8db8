"""How the bytes are cut into packets must not change what is decoded (packets / timestamps aside)."""

from __future__ import annotations

import random

from fixtures import amqp09 as A
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpcap.amqp.decoder import Decoder09
from amqpcap.amqp.events import Anomaly, Content, Method


def _clean_parts() -> list:
    return [
        A.method_frame(
            0,
            "connection.start-ok",
            client_properties={"product": "t", "caps": {"a": [1, True]}},
            mechanism="PLAIN",
            response=b"\0u\0p",
            locale="en_US",
        ),
        A.method_frame(0, "connection.tune-ok", channel_max=10, frame_max=4096, heartbeat=5),
        A.method_frame(0, "connection.open", virtual_host="/"),
        A.method_frame(1, "channel.open"),
        A.heartbeat(),
        A.content(
            1,
            A.method_frame(1, "basic.publish", exchange="x", routing_key="r"),
            bytes(range(256)) * 40,
            {"content-type": "a/b", "headers": {"h": 1}},
            frame_body=4088,
        ),
        A.content(2, A.method_frame(2, "basic.publish", routing_key="empty"), b"", {}),
        A.method_frame(1, "basic.ack", delivery_tag=1),
        A.heartbeat(),
    ]


def _clean_stream() -> bytes:
    return b"".join(_clean_parts())


def _dirty_stream() -> bytes:
    good = _clean_parts()
    return b"".join(
        [
            b"\x99garbage",  # unknown frame type, then resync
            *good[:4],
            A.frame(1, 1, b"\x00\x3c\x00\x50" + b"\0" * 9, end=b"\x00"),  # bad frame-end
            A.frame(9, 1, b"??"),  # unknown type
            A.frame(3, 4, b"orphan body"),  # body without header
            A.frame(1, 1, b"\x03\xe7\x00\x01"),  # unknown class/method
            *good[4:],
            A.method_frame(1, "basic.publish") + A.header_frame(1, 60, 10, {}) + A.body_frame(1, b"12345"),
            A.method_frame(1, "basic.ack", delivery_tag=2),  # interrupts the content
            b"\x01\x00\x01\x00",  # truncated frame at the end
        ]
    )


def _decode_chunks(stream: bytes, cuts, midstream=False):
    return A.decode([stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)])], midstream=midstream)[1]


def _normal(events):
    return [A.strip_position(e) for e in events]


def test_clean_stream_reference_decode_is_what_we_expect():
    events = _decode_chunks(_clean_stream(), [])
    assert A.anomalies(events) == []
    assert [m.name for m in A.events_of(events, Method)] == [
        "connection.start-ok",
        "connection.tune-ok",
        "connection.open",
        "channel.open",
        "basic.publish",
        "basic.publish",
        "basic.ack",
    ]
    assert [(c.body_size, c.body_frames, c.complete) for c in A.events_of(events, Content)] == [
        (10240, 3, True),
        (0, 0, True),
    ]
    assert A.account(events) == len(_clean_stream())


def test_dirty_stream_reference_decode_is_what_we_expect():
    events = _decode_chunks(_dirty_stream(), [])
    # the type-9 frame right after the bad frame-end is inside the skipped range: no anomaly of its own
    assert [(a.kind, a.offset, a.skipped) for a in A.anomalies(events)] == [
        ("unknown-frame-type", 0, 0),
        ("resync", 0, 8),
        ("bad-frame-end", 131, 0),
        ("resync", 131, 21 + 10),
        ("unexpected-frame", 162, 0),
        ("unknown-method", 181, 0),
        ("incomplete-content", 10594, 0),
        ("truncated-stream", 10667, 4),
    ]
    assert A.account(events) == len(_dirty_stream())


def test_clean_stream_fed_one_byte_at_a_time_decodes_identically():
    s = _clean_stream()
    assert _normal(_decode_chunks(s, list(range(1, len(s))))) == _normal(_decode_chunks(s, []))


def test_dirty_stream_fed_one_byte_at_a_time_decodes_identically():
    s = _dirty_stream()
    assert _normal(_decode_chunks(s, list(range(1, len(s))))) == _normal(_decode_chunks(s, []))


def test_seeded_random_splits_decode_identically():
    rnd = random.Random(1234)
    for s in (_clean_stream(), _dirty_stream()):
        ref = _normal(_decode_chunks(s, []))
        for _ in range(50):
            cuts = sorted(rnd.sample(range(1, len(s)), rnd.randint(1, 40)))
            assert _normal(_decode_chunks(s, cuts)) == ref


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_hypothesis_splits_decode_identically(data):
    s = data.draw(st.sampled_from([_clean_stream(), _dirty_stream()]))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(s) - 1), max_size=60)))
    assert _normal(_decode_chunks(s, cuts)) == _normal(_decode_chunks(s, []))


def test_midstream_start_is_split_invariant_too():
    s = _clean_stream()[37:]  # starts inside the start-ok frame
    ref = _normal(_decode_chunks(s, [], midstream=True))
    # the start-of-stream resync is reported with the first method (it is held to count the
    # content frames of messages begun before the capture) and before it
    kinds = [e[0] for e in ref]
    assert ref[kinds.index("Anomaly")][:3] == ("Anomaly", 0, "resync")
    assert kinds.index("Anomaly") < kinds.index("Method")
    assert _normal(_decode_chunks(s, list(range(1, len(s))), midstream=True)) == ref


def test_packets_of_events_are_the_packets_that_completed_them():
    s = A.method_frame(1, "basic.ack", delivery_tag=1)
    dec = Decoder09()
    dec.feed(0, s[:5], 0, 11, 110)
    dec.feed(0, s[5:], 5, 12, 120)
    [(d, f), (_, m)] = dec.pop_events()
    assert (d, f.packet, f.ts, m.packet, m.ts, m.offset) == (0, 12, 120, 12, 120, 0)


def test_anomaly_events_are_identical_objects_modulo_packets():
    # sanity: the normalisation keeps the anomaly offsets (so resync positions are compared)
    events = _decode_chunks(_dirty_stream(), [])
    assert [e.offset for e in events if isinstance(e, Anomaly)][:2] == [0, 0]
