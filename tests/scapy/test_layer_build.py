"""Frames built with the scapy layer are what our decoders read back (and what the fixture
encoder, pinned to pika's bytes, writes)."""

from __future__ import annotations

import datetime

import pytest
from fixtures import amqp09 as A

import amqpcap.scapy  # noqa: F401  (binds the layer)
from amqpcap.amqp import spec
from amqpcap.amqp.codec_0_10 import Decoder010
from amqpcap.amqp.events import Content, Method
from amqpcap.scapy import AMQP, AMQPBody, AMQPHeartbeat, AMQPProtocolHeader, header_class
from amqpcap.scapy.layers import field_name

SAMPLE = {
    "octet": 7,
    "short": 513,
    "long": 70000,
    "longlong": 2**40 + 3,
    "timestamp": 1_700_000_000,
    "shortstr": "kurz",
    "longstr": "lang text",
    "content": "body text",
    "table": {
        "i": 5,
        "s": "x",
        "b": True,
        "n": {"l": [1, "two", False]},
        "big": 2**40,
        "f": 0.5,
        "bytes": b"\x00\x01",
    },
}


def sample_args(fields):
    out = {}
    for i, (name, t) in enumerate(fields):
        out[name] = (i % 2 == 0) if t == "bit" else SAMPLE[t]
    return out


def scapy_kwargs(args):
    return {field_name(k): v for k, v in args.items()}


@pytest.mark.parametrize("version", ["0-9-1", "0-9", "0-8"])
def test_every_method_built_with_scapy_decodes_to_its_arguments(version):
    methods = spec.get(version).METHODS
    stream = b""
    expected = []
    for ms in methods.values():
        if ms.content:
            continue
        args = sample_args(ms.fields)
        stream += bytes(AMQP(method=ms.name, version=version, channel=3, **scapy_kwargs(args)))
        expected.append((ms.name, args))
    _, events = A.decode(stream, version, keep_secrets=True)
    got = [(e.name, e.args) for e in events if isinstance(e, Method)]
    assert [n for n, _ in got] == [n for n, _ in expected]
    for (name, args), (_, dec) in zip(expected, got):
        for k, v in args.items():
            assert dec[k] == v, (name, k)


def test_scapy_bytes_equal_the_fixture_encoders_bytes():
    cases = [
        ("basic.publish", dict(exchange="ex", routing_key="rk", mandatory=True)),
        ("basic.ack", dict(delivery_tag=5, multiple=True)),
        ("connection.tune", dict(channel_max=2047, frame_max=131072, heartbeat=60)),
        ("queue.declare", dict(queue="q", durable=True, auto_delete=True, arguments={"x-max-length": 10})),
        ("basic.nack", dict(delivery_tag=9, multiple=False, requeue=True)),
    ]
    for name, kw in cases:
        assert bytes(AMQP(method=name, channel=1, **kw)) == A.method_frame(1, name, **kw), name


def test_content_header_and_body_built_with_scapy_decode_to_one_message():
    props = {
        "content_type": "text/plain",
        "delivery_mode": 2,
        "headers": {"k": "v"},
        "timestamp": 1_700_000_000,
        "message_id": "m-1",
    }
    body = b"hello world"
    pkt = (
        AMQP(method="basic.publish", channel=1, exchange="ex", routing_key="rk")
        / header_class("0-9-1", 60)(channel=1, body_size=len(body), **props)
        / AMQPBody(channel=1, data=body)
        / AMQPHeartbeat()
    )
    _, events = A.decode(bytes(pkt), "0-9-1")
    content = [e for e in events if isinstance(e, Content)]
    assert len(content) == 1 and content[0].complete
    c = content[0]
    assert c.body == body and c.body_size == len(body) and c.method.args["routing-key"] == "rk"
    assert c.properties == {
        "content-type": "text/plain",
        "delivery-mode": 2,
        "headers": {"k": "v"},
        "timestamp": 1_700_000_000,
        "message-id": "m-1",
    }
    # and scapy reads its own frames back
    again = AMQP(bytes(pkt))
    assert again.method == "basic.publish" and again.payload.fields["message_id"] == b"m-1"
    assert again.payload.payload.data == body and isinstance(again.payload.payload.payload, AMQPHeartbeat)


def test_protocol_header_bytes():
    assert bytes(AMQPProtocolHeader()) == b"AMQP\x00\x00\x09\x01"
    assert AMQPProtocolHeader(b"AMQP\x01\x01\x00\x0a").protocol_version == "0-10"


def test_field_table_values_survive_a_round_trip_through_the_decoder():
    table = {
        "decimal": {"$decimal": "314e-2"},
        "when": datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC),
        "void": None,
        "arr": [1, 2.5, "s"],
        "neg": -3,
    }
    frame = bytes(AMQP(method="exchange.declare", channel=1, exchange="e", type="topic", arguments=table))
    _, events = A.decode(frame, "0-9-1")
    args = next(e for e in events if isinstance(e, Method)).args["arguments"]
    assert args["decimal"] == {"$decimal": "314e-2"} and args["void"] is None
    assert args["when"] == 1704153600 and args["arr"] == [1, 2.5, "s"] and args["neg"] == -3


OPS_010 = [
    (
        "connection.start",
        {
            "server_properties": {"product": "qpidd", "n": 1},
            "mechanisms": ["PLAIN", "ANONYMOUS"],
            "locales": ["en_US"],
        },
    ),
    (
        "connection.tune",
        {"channel_max": 32767, "max_frame_size": 65535, "heartbeat_min": 0, "heartbeat_max": 120},
    ),
    ("session.attach", {"name_": b"sess-1", "force": True}),
    ("message.transfer", {"destination": "amq.direct", "accept_mode": 0, "acquire_mode": 0}),
    ("message.accept", {"transfers": [[1, 4], [7, 7]]}),
    (
        "execution.exception",
        {
            "error_code": 404,
            "command_id": 3,
            "class_code": 8,
            "command_code": 1,
            "description": "queue not found",
        },
    ),
    ("queue.declare", {"queue": "q1", "durable": True, "arguments": {"x": "y"}}),
]


def test_0_10_operations_built_with_scapy_decode_to_their_arguments():
    dec = Decoder010(keep_secrets=True)
    stream = b""
    for name, kw in OPS_010:
        stream += bytes(AMQP(method=name, version="0-10", channel=1, **kw))
    dec.feed(0, stream, 0, 1, 1000)
    got = [e for _, e in dec.pop_events() if isinstance(e, Method)]
    assert [m.name for m in got] == [n for n, _ in OPS_010]
    for (name, kw), m in zip(OPS_010, got):
        names = {field_name(f.name): f.name for f in spec.get("0-10").OPS_BY_NAME[name].fields}
        for k, v in kw.items():
            want = v.decode() if isinstance(v, bytes) and name == "session.attach" else v
            got_v = m.args[names[k]]
            assert (got_v.decode() if isinstance(got_v, bytes) else got_v) == want, (name, k)
    again = AMQP(stream, version="0-10")
    assert again.method == "connection.start"


def test_bits_beyond_eight_take_a_second_octet():
    from scapy.packet import Packet

    from amqpcap.scapy.fields import PackedBitField

    class Nine(Packet):
        fields_desc = [PackedBitField(f"b{i}", False, i, 9) for i in range(9)]

    raw = bytes(Nine(b0=True, b8=True))
    assert raw == b"\x01\x01"
    back = Nine(raw)
    assert back.b0 and back.b8 and not back.b1
