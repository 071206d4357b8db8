"""Field tables and arrays: every type letter, both readings of s / l, nesting and its limit."""

from __future__ import annotations

import struct

import pytest
from fixtures import amqp09 as A

from amqpcap.amqp.events import Method
from amqpcap.amqp.fields_0_9 import MAX_DEPTH, DecodeError, decode_table

T = A.Typed

# (letter, value to encode, decoded value) under the broker (RabbitMQ / Qpid) reading
EVERY_LETTER = [
    ("t", True, True),
    ("t", False, False),
    ("b", -128, -128),
    ("B", 255, 255),
    ("s", -32768, -32768),  # RabbitMQ: int16
    ("U", -32768, -32768),
    ("u", 65535, 65535),
    ("I", -(2**31), -(2**31)),
    ("i", 2**32 - 1, 2**32 - 1),
    ("l", -(2**63), -(2**63)),  # RabbitMQ: int64
    ("L", -(2**63), -(2**63)),
    ("f", 1.5, 1.5),
    ("d", -2.25e300, -2.25e300),
    ("D", (2, 31415), {"$decimal": "31415e-2"}),
    ("D", (0, -7), {"$decimal": "-7"}),
    ("S", "long ✓ string", "long ✓ string"),
    ("x", b"\x00\xffbytes", b"\x00\xffbytes"),
    ("A", [1, "a", [True]], [1, "a", [True]]),
    ("T", 1700000000, 1700000000),
    ("F", {"k": {"kk": "v"}}, {"k": {"kk": "v"}}),
    ("V", None, None),
]


@pytest.mark.parametrize(
    "letter, value, decoded", EVERY_LETTER, ids=[f"{x[0]}-{i}" for i, x in enumerate(EVERY_LETTER)]
)
def test_every_type_letter_decodes_under_the_broker_reading(letter, value, decoded):
    wire = A.encode_table({"key": value}, types={"key": letter})
    assert decode_table(wire) == {"key": decoded}


SPEC_READING = [
    ("s", "short", "short"),  # 0-9-1 spec text: short string
    ("l", 2**64 - 1, 2**64 - 1),  # 0-9-1 spec text: unsigned 64
    ("U", -5, -5),
    ("L", -5, -5),
    ("I", -5, -5),
    ("S", "x", "x"),
]


@pytest.mark.parametrize("letter, value, decoded", SPEC_READING)
def test_spec_reading_of_s_and_l_and_the_letters_both_readings_share(letter, value, decoded):
    wire = A.encode_table({"key": value}, types={"key": letter}, rabbit=False)
    assert decode_table(wire, rabbit=False) == {"key": decoded}


def test_the_same_s_and_l_bytes_read_differently_under_the_two_readings():
    # 's' 00 02 'h' 'i' ... : RabbitMQ reads int16 2 then stops short of the table end
    s_wire = A.encode_table({"k": "hi"}, types={"k": "s"}, rabbit=False)
    assert decode_table(s_wire, rabbit=False) == {"k": "hi"}
    with pytest.raises(DecodeError):
        decode_table(s_wire, rabbit=True)
    l_wire = A.encode_table({"k": -1}, types={"k": "l"}, rabbit=True)
    assert decode_table(l_wire, rabbit=True) == {"k": -1}
    assert decode_table(l_wire, rabbit=False) == {"k": 2**64 - 1}


def test_every_letter_in_one_method_argument_table_through_the_decoder():
    table = {f"k{i}": v for i, (_, v, _) in enumerate(EVERY_LETTER)}
    types = {f"k{i}": letter for i, (letter, _, _) in enumerate(EVERY_LETTER)}
    wire = A.method_frame(1, "queue.declare", queue="q", arguments=A.encode_table(table, types=types))
    _, events = A.decode(wire)
    [m] = A.events_of(events, Method)
    assert m.args["arguments"] == {f"k{i}": d for i, (_, _, d) in enumerate(EVERY_LETTER)}
    assert A.anomalies(events) == []


def test_spec_reading_decoder_option_reads_s_as_short_string():
    wire = A.method_frame(
        1,
        "queue.declare",
        queue="q",
        arguments=A.encode_table({"a": "str", "b": 2**64 - 1}, types={"a": "s", "b": "l"}, rabbit=False),
    )
    _, events = A.decode(wire, rabbit_tables=False)
    [m] = A.events_of(events, Method)
    assert m.args["arguments"] == {"a": "str", "b": 2**64 - 1}
    _, events = A.decode(wire, rabbit_tables=True)
    assert A.events_of(events, Method) == []
    assert A.kinds(events) == ["malformed-method"]


def test_nested_tables_and_arrays_mixed():
    value = {"a": [{"b": [1, [2, {"c": None}]]}, T("x", b"\x01")], "d": {"e": {"f": [T("b", -1), T("u", 7)]}}}
    assert decode_table(A.encode_table(value)) == {
        "a": [{"b": [1, [2, {"c": None}]]}, b"\x01"],
        "d": {"e": {"f": [-1, 7]}},
    }


def test_empty_table_and_empty_array():
    assert decode_table(A.encode_table({"a": [], "t": {}})) == {"a": [], "t": {}}
    assert decode_table(b"\x00\x00\x00\x00") == {}


def _deep_table_wire(levels):
    """``levels`` tables nested below the top-level table, built without recursion."""
    v = A.encode_table({"leaf": 1})
    for _ in range(levels):
        v = struct.pack(">I", 3 + len(v)) + b"\x01nF" + v
    return v


def _nested_tables(levels):
    v = {"leaf": 1}
    for _ in range(levels - 1):
        v = {"n": v}
    return {"n": v}  # ``levels`` tables below the top-level table


def _nested_arrays(levels):
    v = [1]
    for _ in range(levels - 1):
        v = [v]
    return {"a": v}


@pytest.mark.parametrize("nest", [_nested_tables, _nested_arrays])
def test_nesting_up_to_the_limit_decodes(nest):
    assert MAX_DEPTH == 64
    wire = A.encode_table(nest(64))
    assert decode_table(wire) == nest(64)


@pytest.mark.parametrize("nest", [_nested_tables, _nested_arrays])
def test_nesting_past_the_limit_raises_decode_error(nest):
    with pytest.raises(DecodeError, match="nested deeper than 64"):
        decode_table(A.encode_table(nest(65)))


@pytest.mark.parametrize("levels", [65, 5000])
def test_too_deep_table_in_a_method_is_an_anomaly_and_decoding_continues(levels):
    assert _deep_table_wire(3) == A.encode_table(_nested_tables(3))
    wire = A.method_frame(
        1, "queue.declare", queue="deep", arguments=_deep_table_wire(levels)
    ) + A.method_frame(1, "basic.qos", prefetch_count=10)
    _, events = A.decode(wire)
    [an] = A.anomalies(events)
    assert (an.kind, an.channel, an.offset) == ("malformed-method", 1, 0)
    assert "nested deeper than 64" in an.detail
    assert [(m.name, m.args) for m in A.events_of(events, Method)] == [
        ("basic.qos", {"prefetch-size": 0, "prefetch-count": 10, "global": False})
    ]


@pytest.mark.parametrize(
    "wire, message",
    [
        (b"\x00\x00\x00\x03\x01kZ", "unknown field type 'Z'"),
        (b"\x00\x00\x00\x04\x01kI\x00", "truncated|overrun"),
        (b"\x00\x00\x00\x09\x01kI\x00\x00\x00", "table of 9 bytes past end"),
        (b"\x00\x00\x00\x09\x01kS\x00\x00\x00\x09ab", "long string past end"),
        (b"\x00\x00\x00\x09\x01kx\x00\x00\x00\x09ab", "byte array past end"),
        (b"\x00\x00\x00\x07\x01kA\x00\x00\x00\x09", "array of 9 bytes past end"),
        (b"\x00\x00\x00\x02\x05k", "field value past end"),
        (b"\x00\x00", "table size past end"),
        (b"\x00\x00\x00\x05\x01kA\x00\x00", "array size past end"),
        (b"\x00\x00\x00\x08\x01kA\x00\x00\x00\x01I", "field value truncated"),
    ],
)
def test_malformed_tables_raise_decode_error(wire, message):
    with pytest.raises(DecodeError, match=message):
        decode_table(wire)


def test_value_may_not_read_past_its_table_into_the_next_field():
    # table claims 4 bytes ("\x01kI" + 1) but the int32 needs 4: the bytes after the table must not be used
    wire = struct.pack(">I", 4) + b"\x01kI\x00" + b"\x00\x00\x07"
    with pytest.raises(DecodeError):
        decode_table(wire)


def test_invalid_utf8_keys_and_strings_decode_with_replacement():
    wire = struct.pack(">I", 8) + b"\x02\xff\xfeS\x00\x00\x00\x00"
    assert decode_table(wire) == {"\ufffd\ufffd": ""}
