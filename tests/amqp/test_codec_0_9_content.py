"""Contents: a content method, its header (properties) and body frames become one Content event."""

from __future__ import annotations

import hashlib

import pytest
from fixtures import amqp09 as A

from amqpcap.amqp.codec_0_9 import DecodeError, decode_properties
from amqpcap.amqp.decoder import Decoder09
from amqpcap.amqp.events import Content, Frame, Method

ALL_14 = {
    "content-type": "application/json",
    "content-encoding": "gzip",
    "headers": {"x-trace": "abc", "n": 42, "nested": {"arr": [1, "two", True, None]}},
    "delivery-mode": 2,
    "priority": 9,
    "correlation-id": "corr-1",
    "reply-to": "amq.rabbitmq.reply-to",
    "expiration": "60000",
    "message-id": "msg-1",
    "timestamp": 1700000000,
    "type": "order.created",
    "user-id": "guest",
    "app-id": "shop",
    "reserved": "cluster-x",
}
BODY = bytes(range(256)) * 10  # 2560 bytes


def _publish_stream(props, body, parts):
    method = A.method_frame(1, "basic.publish", exchange="orders", routing_key="eu.created", mandatory=True)
    header = A.header_frame(1, 60, len(body), props)
    cuts = [0] + [len(body) * i // parts for i in range(1, parts)] + [len(body)]
    bodies = [A.body_frame(1, body[a:b]) for a, b in zip(cuts, cuts[1:])]
    return [method, header] + bodies


def test_publish_header_with_all_14_properties_and_body_in_3_frames_is_one_content():
    chunks = _publish_stream(ALL_14, BODY, 3)
    dec, events = A.decode(chunks, "0-9-1", body_bytes=10, finish=False)
    [c] = A.events_of(events, Content)
    [m] = A.events_of(events, Method)
    assert c.method == m
    assert (m.name, m.args) == (
        "basic.publish",
        {
            "reserved-1": 0,
            "exchange": "orders",
            "routing-key": "eu.created",
            "mandatory": True,
            "immediate": False,
        },
    )
    assert c.properties == ALL_14
    assert (c.class_id, c.channel, c.body_size, c.body_received, c.body_frames, c.complete) == (
        60,
        1,
        2560,
        2560,
        3,
        True,
    )
    assert c.body_hash == hashlib.sha256(BODY).hexdigest()
    assert c.body == BODY[:10]
    # positions: offset of the method frame; packets of method, header and last body frame
    assert (c.offset, c.first_packet, c.header_packet, c.packet, c.ts) == (0, 1, 2, 5, 5000)
    assert [f.type_name for f in A.events_of(events, Frame)] == ["method", "header", "body", "body", "body"]
    assert A.anomalies(events) == []


def test_content_events_come_after_the_frames_that_complete_them():
    chunks = _publish_stream({}, b"abc", 1)
    _, events = A.decode(b"".join(chunks), finish=False)
    assert [type(e).__name__ for e in events] == ["Frame", "Method", "Frame", "Frame", "Content"]


def test_body_size_zero_completes_at_the_header_with_no_body_frames():
    wire = A.method_frame(1, "basic.publish", routing_key="q") + A.header_frame(
        1, 60, 0, {"content-type": "t/p"}
    )
    _, events = A.decode(wire, finish=False)
    [c] = A.events_of(events, Content)
    assert (c.complete, c.body_size, c.body_received, c.body_frames, c.body, c.body_hash, c.properties) == (
        True,
        0,
        0,
        0,
        b"",
        hashlib.sha256(b"").hexdigest(),
        {"content-type": "t/p"},
    )
    assert A.anomalies(events) == []


def test_body_bytes_zero_keeps_no_body_but_still_hashes_it():
    _, events = A.decode(b"".join(_publish_stream({}, BODY, 2)), body_bytes=0)
    [c] = A.events_of(events, Content)
    assert (c.body, c.body_hash, c.body_frames) == (b"", hashlib.sha256(BODY).hexdigest(), 2)


def test_body_bytes_larger_than_the_body_keeps_the_whole_body():
    _, events = A.decode(b"".join(_publish_stream({}, b"0123456789", 4)), body_bytes=1000)
    [c] = A.events_of(events, Content)
    assert (c.body, c.body_frames) == (b"0123456789", 4)


def test_contents_interleaved_on_two_channels_and_both_directions_stay_apart():
    pub = lambda ch, rk: A.method_frame(ch, "basic.publish", routing_key=rk)  # noqa: E731
    c2s = (
        pub(1, "one")
        + pub(2, "two")
        + A.header_frame(2, 60, 3, {"type": "b"})
        + A.header_frame(1, 60, 4, {"type": "a"})
        + A.body_frame(1, b"AA")
        + A.body_frame(2, b"BBB")
        + A.body_frame(1, b"AA")
    )
    s2c = (
        A.method_frame(1, "basic.deliver", consumer_tag="ct", delivery_tag=1, routing_key="one")
        + A.header_frame(1, 60, 1, {})
        + A.body_frame(1, b"D")
    )
    dec = Decoder09("0-9-1")
    dec.feed(0, c2s, 0, 1, 1)
    dec.feed(1, s2c, 0, 2, 2)
    got = [
        (d, e.method.name, e.channel, e.method.args["routing-key"], e.properties, e.body, e.complete)
        for d, e in dec.pop_events()
        if isinstance(e, Content)
    ]
    assert got == [
        (0, "basic.publish", 2, "two", {"type": "b"}, b"BBB", True),
        (0, "basic.publish", 1, "one", {"type": "a"}, b"AAAA", True),
        (1, "basic.deliver", 1, "one", {}, b"D", True),
    ]


def test_header_flag_word_with_continuation_then_an_empty_word_decodes():
    # 14 basic properties fit one word; a (legal, if unusual) continuation word of zeros follows
    payload = bytes.fromhex("003c 0000 0000000000000001 8001 0000") + A.shortstr("text/plain")
    wire = A.method_frame(1, "basic.publish") + A.frame(2, 1, payload) + A.body_frame(1, b"x")
    _, events = A.decode(wire)
    [c] = A.events_of(events, Content)
    assert (c.properties, c.complete) == ({"content-type": "text/plain"}, True)


PROPS_20 = tuple((f"p{i}", "octet") for i in range(18)) + (("s18", "shortstr"), ("b19", "bit"))


def test_property_flag_continuation_reaches_properties_past_the_fifteenth():
    props = {"p0": 1, "p14": 14, "p15": 15, "s18": "eighteen", "b19": True}
    payload = A.header_payload(60, 0, props, props=PROPS_20)
    # word 0: p0 (bit 15), p14 (bit 1), continuation (bit 0); word 1: p15 (bit 15), s18 (12), b19 (11)
    assert payload[12:16] == bytes.fromhex("8003 9800")
    assert decode_properties(PROPS_20, payload, 12, len(payload)) == props


def test_property_flag_for_an_undefined_property_is_a_malformed_header():
    payload = bytes.fromhex("003c 0000 0000000000000000 0001 8000")  # continuation to a 16th basic property
    wire = A.method_frame(1, "basic.publish") + A.frame(2, 1, payload) + A.heartbeat()
    _, events = A.decode(wire)
    [an] = A.anomalies(events, "malformed-header")
    assert (
        "beyond the 14 defined" in an.detail and an.channel == 1 and an.offset == 17
    )  # publish frame is 17 bytes
    [c] = A.events_of(events, Content)
    assert (c.complete, c.properties, c.body_frames) == (False, {}, 0)
    assert A.kinds(events) == ["malformed-header"]


@pytest.mark.parametrize(
    "payload, why",
    [
        (
            bytes.fromhex("003c 0000 0000000000000000 8000"),
            "property flags past end",
        ),  # flags say content-type, none follows
        (bytes.fromhex("003c 0000 0000000000000000 0000 ff"), "1 bytes after the last property"),
        (bytes.fromhex("003c 0000 00000000"), "shorter than 14"),
        (bytes.fromhex("0028 0000 0000000000000000 0000"), "class 40 does not match basic.publish"),
    ],
)
def test_bad_content_headers_are_malformed_header_anomalies(payload, why):
    wire = (
        A.method_frame(1, "basic.publish")
        + A.frame(2, 1, payload)
        + A.method_frame(1, "basic.ack", delivery_tag=1)
    )
    _, events = A.decode(wire)
    [an] = A.anomalies(events, "malformed-header")
    assert why in an.detail or (why == "property flags past end" and "short string past end" in an.detail)
    [c] = A.events_of(events, Content)
    assert c.complete is False
    assert [m.name for m in A.events_of(events, Method)] == ["basic.publish", "basic.ack"]


def test_decode_properties_rejects_more_than_eight_flag_words():
    words = bytes.fromhex("0001") * 9 + bytes.fromhex("0000")
    with pytest.raises(DecodeError, match="too many property flag words"):
        decode_properties(PROPS_20, words, 0, len(words))


def test_get_ok_and_return_carry_contents_too():
    wire = (
        A.method_frame(1, "basic.get-ok", delivery_tag=3, exchange="e", routing_key="r", message_count=2)
        + A.header_frame(1, 60, 2, {"priority": 1})
        + A.body_frame(1, b"ok")
        + A.method_frame(
            1, "basic.return", reply_code=312, reply_text="NO_ROUTE", exchange="e", routing_key="x"
        )
        + A.header_frame(1, 60, 2, {})
        + A.body_frame(1, b"rt")
    )
    _, events = A.decode(wire)
    assert [(c.method.name, c.body, c.properties, c.complete) for c in A.events_of(events, Content)] == [
        ("basic.get-ok", b"ok", {"priority": 1}, True),
        ("basic.return", b"rt", {}, True),
    ]
    assert A.anomalies(events) == []


def test_body_overrunning_the_declared_size_is_reported_and_content_incomplete():
    wire = A.method_frame(1, "basic.publish") + A.header_frame(1, 60, 3, {}) + A.body_frame(1, b"12345")
    _, events = A.decode(wire)
    [an] = A.anomalies(events)
    assert (an.kind, an.channel, an.detail) == ("body-overrun", 1, "5 body bytes for a declared size of 3")
    [c] = A.events_of(events, Content)
    assert (c.complete, c.body_size, c.body_received, c.body) == (False, 3, 5, b"12345")


def test_property_flag_sets_beyond_the_plan_cache_are_decoded_without_keeping_a_plan(monkeypatch):
    # corrupt or random headers can carry any of 2^14 flag sets: the plan cache is bounded, and
    # once full no further plans are kept
    from amqpcap.amqp import codec_0_9 as C

    monkeypatch.setattr(C, "_PROPS_CACHE", {("filler", i): None for i in range(4096)})
    props = tuple((f"only-here-{i}", t) for i, t in enumerate(["octet", "shortstr", "table", "longlong"] * 3))
    for present in ([0], [1, 2], [0, 3, 5, 7, 11], list(range(12))):
        values = {
            props[i][0]: {"octet": 7, "shortstr": "s", "table": {"k": 1}, "longlong": 2**40}[props[i][1]]
            for i in present
        }
        payload = A.header_payload(60, 0, values, props=props)
        assert decode_properties(props, payload, 12, len(payload)) == values
    assert len(C._PROPS_CACHE) == 4096
