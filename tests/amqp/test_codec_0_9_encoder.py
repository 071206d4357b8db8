"""The fixture encoder (tests/fixtures/amqp09.py) pinned to bytes written from the spec.

The round-trip tests elsewhere only prove decoder(encoder(x)) == x; a table
mistake shared by both would pass them.  These tests pin the encoder to
hand-written bytes (pamqp style) and, for every 0-9-1 method and the basic
content header, to pika's independent encoder.
"""

from __future__ import annotations

import datetime
import decimal

import pika.frame
import pika.spec
import pytest
from fixtures import amqp09 as A


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def test_heartbeat_frame_is_type_8_channel_0_size_0_then_frame_end():
    assert A.heartbeat() == h("08 0000 00000000 ce")


def test_basic_ack_frame_bytes():
    # type 1, channel 1, size 13: class 60, method 80, delivery-tag 5 (longlong), multiple bit set
    assert A.method_frame(1, "basic.ack", delivery_tag=5, multiple=True) == h(
        "01 0001 0000000d 003c 0050 0000000000000005 01 ce"
    )


def test_connection_tune_frame_bytes():
    assert A.method_frame(0, "connection.tune", channel_max=2047, frame_max=131072, heartbeat=60) == h(
        "01 0000 0000000c 000a 001e 07ff 00020000 003c ce"
    )


def test_basic_publish_frame_bytes_shortstrs_and_packed_bits():
    assert A.method_frame(
        1, "basic.publish", exchange="ex", routing_key="rk", mandatory=True, immediate=True
    ) == h("01 0001 0000000d 003c 0028 0000 02 6578 02 726b 03 ce")


def test_eight_bits_fill_one_octet_and_ninth_bit_starts_another():
    fields = tuple((f"b{i}", "bit") for i in range(9))
    assert A.encode_fields(fields, {"b0": True, "b7": True, "b8": True}) == h("81 01")


def test_0_8_connection_close_is_10_60_and_0_9_1_is_10_50():
    assert A.method_payload("connection.close", "0-8", reply_code=320, reply_text="bye") == h(
        "000a 003c 0140 03 627965 0000 0000"
    )
    assert A.method_payload("connection.close", "0-9-1", reply_code=320, reply_text="bye") == h(
        "000a 0032 0140 03 627965 0000 0000"
    )


def test_content_header_frame_bytes():
    # class 60, weight 0, body-size 5, flags: content-type (bit 15) + delivery-mode (4th, bit 12)
    assert A.header_frame(1, 60, 5, {"content-type": "text/plain", "delivery-mode": 2}) == h(
        "02 0001 0000001a 003c 0000 0000000000000005 9000 0a 746578742f706c61696e 02 ce"
    )


def test_property_flags_continue_into_a_second_word_after_15_properties():
    # index 0 -> word 0 bit 15 (+ continuation bit 0); index 15 -> word 1 bit 15; index 16 -> bit 14
    assert A.property_flags([0, 15, 16]) == h("8001 c000")
    assert A.property_flags([14]) == h("0002")
    assert A.property_flags([]) == h("0000")


def test_body_frame_bytes():
    assert A.body_frame(3, b"hi") == h("03 0003 00000002 6869 ce")


def test_protocol_headers():
    assert A.protocol_header("0-9-1") == b"AMQP\x00\x00\x09\x01"
    assert A.protocol_header("0-8") == b"AMQP\x01\x01\x08\x00"
    assert A.protocol_header("0-9") == b"AMQP\x01\x01\x00\x09"


@pytest.mark.parametrize(
    "letter, value, rabbit, wire",
    [
        ("t", True, True, "74 01"),
        ("b", -2, True, "62 fe"),
        ("B", 254, True, "42 fe"),
        ("U", -2, True, "55 fffe"),
        ("u", 65534, True, "75 fffe"),
        ("I", -2, True, "49 fffffffe"),
        ("i", 4294967294, True, "69 fffffffe"),
        ("L", -2, True, "4c fffffffffffffffe"),
        ("l", -2, True, "6c fffffffffffffffe"),
        ("l", 2**64 - 2, False, "6c fffffffffffffffe"),
        ("s", -2, True, "73 fffe"),
        ("s", "ab", False, "73 02 6162"),
        ("f", 1.5, True, "66 3fc00000"),
        ("d", 1.5, True, "64 3ff8000000000000"),
        ("D", (2, 314), True, "44 02 0000013a"),
        ("D", decimal.Decimal("3.14"), True, "44 02 0000013a"),
        ("S", "ab", True, "53 00000002 6162"),
        ("x", b"\x00\xff", True, "78 00000002 00ff"),
        ("A", [1, "a"], True, "41 0000000b 49 00000001 53 00000001 61"),
        ("T", 1700000000, True, "54 000000006553f100"),
        ("F", {"k": True}, True, "46 00000004 01 6b 74 01"),
        ("V", None, True, "56"),
    ],
)
def test_every_field_type_letter_encodes_as_the_spec_says(letter, value, rabbit, wire):
    assert A.encode_value(value, letter, rabbit=rabbit) == h(wire)


def test_encode_table_types_force_letters_per_key():
    assert A.encode_table({"a": 1, "b": 1}, types={"b": "B"}) == h("0000000b 01 61 49 00000001 01 62 42 01")


# --- against pika (an independent 0-9-1 encoder) --------------------------------------

SAMPLES = {
    "bit": True,
    "octet": 7,
    "short": 513,
    "long": 70000,
    "longlong": 2**40 + 3,
    "shortstr": "short-string",
    "longstr": "long string",
    "timestamp": 1700000000,
    "table": {"x-k": "v", "n": 3, "flag": True, "nested": {"a": [1, "b", None]}},
}


def _pika_methods():
    out = {}
    for cls in vars(pika.spec).values():
        if isinstance(cls, type) and hasattr(cls, "INDEX") and hasattr(cls, "NAME") and cls.INDEX:
            for m in vars(cls).values():
                if isinstance(m, type) and issubclass(m, pika.spec.amqp_object.Method):
                    out[(m.INDEX >> 16, m.INDEX & 0xFFFF)] = m
    return out


PIKA = _pika_methods()
ALL_0_9_1 = sorted(A.methods("0-9-1").items(), key=lambda kv: kv[1][:2])


@pytest.mark.parametrize("name, entry", ALL_0_9_1, ids=[n for n, _ in ALL_0_9_1])
def test_every_0_9_1_method_frame_equals_pikas_encoding(name, entry):
    cid, mid, spec = entry
    values = {f: SAMPLES[t] for f, t in spec.fields}
    pm = PIKA[(cid, mid)](*[values[f] for f, _ in spec.fields])
    ours = A.method_frame(3, name, **{f.replace("-", "_"): v for f, v in values.items()})
    assert ours == pika.frame.Method(3, pm).marshal()


def test_pika_knows_exactly_the_0_9_1_methods_of_our_tables_plus_the_dropped_access_class():
    # pika still carries 0-8's access.request / request-ok (30.10 / 30.11); 0-9-1 removed the class.
    assert set(PIKA) - {(30, 10), (30, 11)} == {(c, m) for _, (c, m, _) in ALL_0_9_1}


def test_basic_header_with_all_14_properties_equals_pikas_encoding():
    props = {
        "content-type": "application/json",
        "content-encoding": "gzip",
        "headers": {"h": "v", "n": 1, "when": datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)},
        "delivery-mode": 2,
        "priority": 9,
        "correlation-id": "corr",
        "reply-to": "amq.rabbitmq.reply-to",
        "expiration": "60000",
        "message-id": "m-1",
        "timestamp": 1700000000,
        "type": "t",
        "user-id": "guest",
        "app-id": "app",
        "reserved": "cluster",
    }
    pp = pika.spec.BasicProperties(
        content_type="application/json",
        content_encoding="gzip",
        headers=props["headers"],
        delivery_mode=2,
        priority=9,
        correlation_id="corr",
        reply_to="amq.rabbitmq.reply-to",
        expiration="60000",
        message_id="m-1",
        timestamp=1700000000,
        type="t",
        user_id="guest",
        app_id="app",
        cluster_id="cluster",
    )
    assert A.header_frame(5, 60, 123456, props) == pika.frame.Header(5, 123456, pp).marshal()
