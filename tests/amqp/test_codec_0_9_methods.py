"""Every method of 0-8, 0-9 and 0-9-1 round-trips through the fixture encoder and Decoder09."""

from __future__ import annotations

import pytest
from fixtures import amqp09 as A

from amqpcap.amqp import spec
from amqpcap.amqp.events import Content, Frame, Method

SAMPLES = {
    "bit": True,
    "octet": 200,
    "short": 65000,
    "long": 4000000000,
    "longlong": 2**63 + 5,
    "timestamp": 1700000000,
    "shortstr": "shortstr-é",
    "longstr": "long string ✓",
    "content": "inline body",
    "table": {"S": "str", "I": -7, "t": False, "F": {"A": [1, "x", None]}},
}
ZEROS = {
    "bit": False,
    "octet": 0,
    "short": 0,
    "long": 0,
    "longlong": 0,
    "timestamp": 0,
    "shortstr": "",
    "longstr": "",
    "content": "",
    "table": {},
}


def _cases(version):
    return [
        (version, name, cid, mid, s)
        for name, (cid, mid, s) in sorted(A.methods(version).items(), key=lambda kv: kv[1][:2])
    ]


CASES = _cases("0-8") + _cases("0-9") + _cases("0-9-1")


def _roundtrip(version, name, s, samples, channel=7):
    values = {f: samples[t] for f, t in s.fields}
    wire = A.method_frame(channel, name, version, **{f.replace("-", "_"): v for f, v in values.items()})
    dec, events = A.decode(wire, version, finish=False, keep_secrets=True)
    return wire, values, events


@pytest.mark.parametrize("version, name, cid, mid, s", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
@pytest.mark.parametrize("samples", [SAMPLES, ZEROS], ids=["values", "zeros"])
def test_every_method_round_trips_with_name_ids_flags_and_arguments(version, name, cid, mid, s, samples):
    wire, values, events = _roundtrip(version, name, s, samples)
    frames = A.events_of(events, Frame)
    assert [(f.offset, f.channel, f.frame_type, f.type_name, f.size, f.wire_size) for f in frames] == [
        (0, 7, 1, "method", len(wire) - 8, len(wire))
    ]
    [m] = A.events_of(events, Method)
    assert (m.name, m.class_id, m.method_id, m.channel, m.offset) == (name, cid, mid, 7, 0)
    assert (m.synchronous, m.has_content, m.frame_size) == (s.synchronous, s.content, len(wire) - 8)
    assert m.args == values
    # a delivery-tag past the int64 column is reported (the column will be null), nothing else
    tag = values.get("delivery-tag")
    unfit = ["value-out-of-range"] if isinstance(tag, int) and tag > 2**63 - 1 else []
    assert [a.kind for a in A.anomalies(events)] == unfit
    if name == "message.transfer":  # 0-9: the body travels inside the method
        [c] = A.events_of(events, Content)
        assert (c.complete, c.body_size, c.body, c.body_encoding) == (
            True,
            len(samples["content"]),
            samples["content"].encode(),
            "longstr",
        )
    else:
        assert A.events_of(events, Content) == []


def test_the_three_versions_have_the_expected_method_counts():
    # pins the generated tables the round-trip above iterates over (nothing silently skipped):
    # <method> elements in the XML files, plus RabbitMQ's 4 connection methods its XML lacks.
    assert {v: len(spec.get(v).METHODS) for v in ("0-8", "0-9", "0-9-1")} == {
        "0-8": 89,
        "0-9": 101,
        "0-9-1": 60 + 4,
    }


def test_0_9_1_rabbitmq_extensions_are_native_methods():
    names = {s.name: cm for cm, s in spec.get("0-9-1").METHODS.items()}
    assert {
        n: names[n]
        for n in (
            "confirm.select",
            "confirm.select-ok",
            "basic.nack",
            "connection.blocked",
            "connection.unblocked",
            "connection.update-secret",
            "connection.update-secret-ok",
            "exchange.bind",
            "exchange.bind-ok",
            "exchange.unbind",
            "exchange.unbind-ok",
        )
    } == {
        "confirm.select": (85, 10),
        "confirm.select-ok": (85, 11),
        "basic.nack": (60, 120),
        "connection.blocked": (10, 60),
        "connection.unblocked": (10, 61),
        "connection.update-secret": (10, 70),
        "connection.update-secret-ok": (10, 71),
        "exchange.bind": (40, 30),
        "exchange.bind-ok": (40, 31),
        "exchange.unbind": (40, 40),
        "exchange.unbind-ok": (40, 51),
    }


def test_0_8_channel_open_ok_has_no_arguments():
    wire = A.frame(1, 1, bytes.fromhex("0014 000b"))
    _, events = A.decode(wire, "0-8")
    [m] = A.events_of(events, Method)
    assert (m.name, m.args) == ("channel.open-ok", {})
    assert A.anomalies(events) == []


@pytest.mark.parametrize("channel_id", ["", "ch-1"])
def test_0_8_channel_open_ok_with_rabbitmqs_long_string_decodes_as_rabbitmq_dialect(channel_id):
    wire = A.frame(1, 1, bytes.fromhex("0014 000b") + A.longstr(channel_id))
    _, events = A.decode(wire, "0-8")
    [m] = A.events_of(events, Method)
    assert (m.name, m.args) == ("channel.open-ok", {"channel-id": channel_id, "$dialect": "rabbitmq"})
    assert A.anomalies(events) == []


def test_0_8_basic_consume_with_rabbitmqs_arguments_table_decodes_as_rabbitmq_dialect():
    wire = A.frame(
        1,
        1,
        bytes.fromhex("003c 0014 0000")
        + A.shortstr("q")
        + A.shortstr("tag")
        + b"\x02"
        + A.encode_table({"x-priority": 5}),
    )
    _, events = A.decode(wire, "0-8")
    [m] = A.events_of(events, Method)
    assert m.name == "basic.consume"
    assert m.args == {
        "ticket": 0,
        "queue": "q",
        "consumer-tag": "tag",
        "no-local": False,
        "no-ack": True,
        "exclusive": False,
        "nowait": False,
        "arguments": {"x-priority": 5},
        "$dialect": "rabbitmq",
    }


def test_0_8_10_60_and_10_61_are_connection_close_and_close_ok():
    wire = A.frame(
        1, 0, bytes.fromhex("000a 003c 0140") + A.shortstr("bye") + bytes.fromhex("0000 0000")
    ) + A.frame(1, 0, bytes.fromhex("000a 003d"))
    dec, events = A.decode(wire, "0-8")
    assert [(m.name, m.class_id, m.method_id, m.args) for m in A.events_of(events, Method)] == [
        ("connection.close", 10, 60, {"reply-code": 320, "reply-text": "bye", "class-id": 0, "method-id": 0}),
        ("connection.close-ok", 10, 61, {}),
    ]
    assert (dec.facts.closed_by, dec.facts.close_reply_code, dec.facts.close_reply_text) == (
        "client",
        320,
        "bye",
    )


def test_0_9_1_10_60_and_10_61_are_connection_blocked_and_unblocked():
    wire = A.method_frame(0, "connection.blocked", reason="low on memory") + A.method_frame(
        0, "connection.unblocked"
    )
    _, events = A.decode(wire, "0-9-1")
    assert [(m.name, m.args) for m in A.events_of(events, Method)] == [
        ("connection.blocked", {"reason": "low on memory"}),
        ("connection.unblocked", {}),
    ]


@pytest.mark.parametrize("version", ["0-8", "0-9"])
def test_rabbitmq_0_9_1_extensions_sent_on_older_versions_decode_marked_as_0_9_1(version):
    wire = (
        A.method_frame(1, "confirm.select", nowait=False)
        + A.method_frame(1, "confirm.select-ok")
        + A.method_frame(1, "basic.nack", delivery_tag=9, multiple=True, requeue=False)
        + A.method_frame(1, "exchange.bind", destination="d", source="s", routing_key="k")
    )
    _, events = A.decode(wire, version)
    assert [(m.name, m.args) for m in A.events_of(events, Method)] == [
        ("confirm.select", {"nowait": False, "$dialect": "0-9-1"}),
        ("confirm.select-ok", {"$dialect": "0-9-1"}),
        ("basic.nack", {"delivery-tag": 9, "multiple": True, "requeue": False, "$dialect": "0-9-1"}),
        (
            "exchange.bind",
            {
                "reserved-1": 0,
                "destination": "d",
                "source": "s",
                "routing-key": "k",
                "no-wait": False,
                "arguments": {},
                "$dialect": "0-9-1",
            },
        ),
    ]
    assert A.anomalies(events) == []


def test_0_9_message_transfer_body_as_octet_then_long_string_is_accepted():
    cid, mid, s = A.lookup("message.transfer", "0-9")
    fields = tuple(f for f in s.fields if f[0] != "body") + (("body-type", "octet"), ("body", "longstr"))
    wire = A.frame(
        1,
        2,
        A.method_payload(
            "message.transfer",
            "0-9",
            fields=fields,
            destination="dst",
            routing_key="rk",
            body_type=0,
            body=b"\x00\x01binary",
        ),
    )
    _, events = A.decode(wire, "0-9", body_bytes=4)
    [m] = A.events_of(events, Method)
    assert (m.name, m.args["destination"], m.args["routing-key"], m.args["body-type"], m.args["body"]) == (
        "message.transfer",
        "dst",
        "rk",
        0,
        b"\x00\x01binary",
    )
    assert "$dialect" not in m.args
    [c] = A.events_of(events, Content)
    import hashlib

    assert (
        c.complete,
        c.body_size,
        c.body_received,
        c.body_frames,
        c.body,
        c.body_hash,
        c.body_encoding,
    ) == (True, 8, 8, 0, b"\x00\x01bi", hashlib.sha256(b"\x00\x01binary").hexdigest(), "octet+longstr")
    assert c.properties["destination"] == "dst" and "body" not in c.properties


def test_connection_facts_are_learnt_from_the_handshake():
    c2s = (
        A.method_frame(
            0,
            "connection.start-ok",
            client_properties={"product": "pika"},
            mechanism="PLAIN",
            response=b"\0guest\0guest",
            locale="en_US",
        )
        + A.method_frame(0, "connection.tune-ok", channel_max=2047, frame_max=131072, heartbeat=60)
        + A.method_frame(0, "connection.open", virtual_host="/vh")
    )
    s2c = (
        A.method_frame(
            0,
            "connection.start",
            version_major=0,
            version_minor=9,
            server_properties={"product": "RabbitMQ", "version": "3.13.0"},
            mechanisms="PLAIN AMQPLAIN",
            locales="en_US",
        )
        + A.method_frame(0, "connection.tune", channel_max=0, frame_max=131072, heartbeat=30)
        + A.method_frame(0, "connection.open-ok")
    )
    from amqpcap.amqp.decoder import Decoder09

    dec = Decoder09("0-9-1")
    dec.feed(1, s2c[:-12], 0, 1, 10)
    dec.feed(0, c2s, 0, 2, 20)
    dec.feed(1, s2c[-12:], len(s2c) - 12, 3, 30)
    f = dec.facts
    assert (
        f.server_properties,
        f.client_properties,
        f.mechanism,
        f.user,
        f.vhost,
        f.channel_max,
        f.frame_max,
        f.heartbeat,
        f.start_version,
        f.open_ts,
    ) == (
        {"product": "RabbitMQ", "version": "3.13.0"},
        {"product": "pika"},
        "PLAIN",
        "guest",
        "/vh",
        2047,
        131072,
        60,
        (0, 9),
        30,
    )
    assert dec.frame_max == 131072
