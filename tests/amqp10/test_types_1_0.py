"""The AMQP 1.0 type system, from hand-built bytes: every primitive encoding and width, described
types, compounds and arrays, and what hostile counts and nesting get."""

import struct

import pytest

from amqpcap.amqp.spec import v1_0 as SPEC
from amqpcap.amqp.stream import DecodeError
from amqpcap.amqp.types_1_0 import MAX_DEPTH, decode


def value(raw: bytes):
    v, end = decode(raw, 0, len(raw))
    assert end == len(raw)
    return v


ENCODED = [
    (b"\x40", None),
    (b"\x41", True),
    (b"\x42", False),
    (b"\x56\x01", True),
    (b"\x56\x00", False),
    (b"\x50\xff", 255),
    (b"\x60\xff\xfe", 0xFFFE),
    (b"\x70\xff\xff\xff\xff", 0xFFFFFFFF),
    (b"\x52\x07", 7),
    (b"\x43", 0),
    (b"\x80" + struct.pack(">Q", 2**64 - 1), 2**64 - 1),
    (b"\x53\x10", 0x10),
    (b"\x44", 0),
    (b"\x51\xff", -1),
    (b"\x61\xff\xfe", -2),
    (b"\x71\xff\xff\xff\xfd", -3),
    (b"\x54\xfc", -4),
    (b"\x81" + struct.pack(">q", -(2**63)), -(2**63)),
    (b"\x55\xfb", -5),
    (b"\x72" + struct.pack(">f", 1.5), 1.5),
    (b"\x82" + struct.pack(">d", -2.25), -2.25),
    (b"\x73\x00\x01\xf6\x00", "\U0001f600"),
    (b"\x83" + struct.pack(">q", 1700000000123), 1700000000123),
    (b"\x98" + bytes(range(16)), "00010203-0405-0607-0809-0a0b0c0d0e0f"),
    (b"\xa0\x03abc", b"abc"),
    (b"\xb0\x00\x00\x00\x02\x00\xff", b"\x00\xff"),
    (b"\xa1\x05h\xc3\xa9llo"[:7], "h\xe9ll"),
    (b"\xb1\x00\x00\x00\x02hi", "hi"),
    (b"\xa3\x05PLAIN", "PLAIN"),
    (b"\xb3\x00\x00\x00\x01x", "x"),
    (b"\x45", []),
    (b"\xc0\x03\x02\x41\x42", [True, False]),
    (b"\xd0\x00\x00\x00\x06\x00\x00\x00\x02\x43\x40", [0, None]),
    (b"\xc1\x05\x02\xa3\x01k\x41", {"k": True}),
    (b"\xd1\x00\x00\x00\x08\x00\x00\x00\x02\x52\x01\x52\x02", {1: 2}),
    (b"\xe0\x06\x02\xa3\x01a\x01b", ["a", "b"]),
    (b"\xf0\x00\x00\x00\x0d\x00\x00\x00\x02\x70" + struct.pack(">II", 1, 2), [1, 2]),
    (b"\xe0\x02\x03\x40", [None, None, None]),
]


@pytest.mark.parametrize("raw, expected", ENCODED)
def test_every_primitive_encoding_decodes_to_its_value(raw, expected):
    assert value(raw) == expected


def list8(*items: bytes) -> bytes:
    body = b"".join(items)
    return bytes([0xC0, len(body) + 1, len(items)]) + body


@pytest.mark.parametrize("raw, expected", ENCODED)
def test_every_encoding_inside_a_list_decodes_as_it_does_alone(raw, expected):
    # a list reads its commonest items without a reader call: each reads as it does alone
    assert value(list8(raw, raw, b"\x40")) == [expected, expected, None]


def test_empty_lists_inside_a_list_are_lists_of_their_own():
    first, second = value(list8(b"\x45", b"\x45"))
    first.append(1)
    assert second == []


def test_every_constructor_cut_short_inside_a_list_is_refused_as_it_is_alone():
    for code in SPEC.ENCODINGS:
        for rest in (b"", b"\x05", b"\x05\x00"):  # no payload, a size only, a size and less
            raw = list8(bytes([code]) + rest)
            try:
                alone = decode(raw, 3, len(raw))  # the item at the same offset, outside its list
            except DecodeError as e:
                with pytest.raises(DecodeError) as inside:
                    decode(raw, 0, len(raw))
                assert str(inside.value) == str(e)
            else:
                if alone[1] == len(raw):
                    assert value(raw) == [alone[0]]


def test_every_constructor_with_a_payload_refuses_a_missing_one():
    assert len(SPEC.ENCODINGS) == 39  # the spec's primitive encodings, each with a reader
    for code, enc in SPEC.ENCODINGS.items():
        if enc.category == "fixed" and enc.width == 0:
            assert decode(bytes([code]), 0, 1)[1] == 1
            continue
        with pytest.raises(DecodeError, match="needs"):
            decode(bytes([code]), 0, 1)


def test_decimals_decode_as_binary_integer_decimals():
    # decimal32 1.5 = coefficient 15, exponent -1 (bias 101): 0 | 01100100 | 15
    assert value(b"\x74" + struct.pack(">I", (100 << 23) | 15)) == {"$decimal": "1.5"}
    # decimal64 -42 = sign, exponent 0 (bias 398), coefficient 42
    assert value(b"\x84" + struct.pack(">Q", (1 << 63) | (398 << 53) | 42)) == {"$decimal": "-42"}
    # decimal128 7e3: exponent 3 (bias 6176)
    raw = ((6176 + 3) << 113) | 7
    assert value(b"\x94" + raw.to_bytes(16, "big")) == {"$decimal": "7E+3"}
    # the large-coefficient form (combination bits 11): coefficient 0b100 << 21 | 1, exponent 0
    raw32 = (0b11 << 29) | (101 << 21) | 1
    assert value(b"\x74" + struct.pack(">I", raw32)) == {"$decimal": str((0b100 << 21) | 1)}


def test_a_known_composite_decodes_as_its_fields_by_name():
    raw = b"\x00\x53\x1d\xc0\x12\x02\xa3\x0eamqp:not-found\x40"
    assert value(raw) == {"$type": "error", "condition": "amqp:not-found"}


def test_a_symbolic_descriptor_names_the_composite_too():
    raw = b"\x00\xa3\x12amqp:accepted:list\x45"
    assert value(raw) == {"$type": "accepted"}


def test_an_unknown_descriptor_is_kept_not_fatal():
    raw = b"\x00\x80" + struct.pack(">Q", 0x0000_1234_0000_0001) + b"\xa1\x02hi"
    assert value(raw) == {"$descriptor": 0x0000_1234_0000_0001, "value": "hi"}


def test_an_array_of_described_elements_describes_each():
    raw = b"\xe0\x05\x02\x00\x53\x24\x45"  # two accepted (list0 elements)
    assert value(raw) == [{"$type": "accepted"}, {"$type": "accepted"}]


def test_a_count_claiming_more_items_than_bytes_is_refused_before_allocating():
    with pytest.raises(DecodeError, match="claims more items"):
        decode(b"\xd0\x00\x00\x00\x04\xff\xff\xff\xff", 0, 9)
    with pytest.raises(DecodeError, match="claims more items"):
        decode(b"\xf0\x00\x00\x00\x05\x7f\xff\xff\xff\x70", 0, 10)


def test_an_array_of_zero_width_items_is_bounded_by_its_count():
    with pytest.raises(DecodeError, match="zero-width"):
        decode(b"\xf0\x00\x00\x00\x05\x7f\xff\xff\xff\x40", 0, 10)


def test_a_map_with_an_odd_count_is_malformed():
    with pytest.raises(DecodeError, match="odd count"):
        decode(b"\xc1\x02\x01\x41", 0, 4)


def test_a_size_running_past_the_bytes_is_malformed():
    with pytest.raises(DecodeError, match="needs"):
        decode(b"\xa1\x10abc", 0, 5)
    with pytest.raises(DecodeError, match="needs"):
        decode(b"\xc0\x10\x01\x40", 0, 4)


def _nested(levels: int) -> bytes:
    raw = b"\x40"
    for _ in range(levels):
        raw = b"\xd0" + struct.pack(">II", len(raw) + 4, 1) + raw
    return raw


def test_nesting_is_bounded():
    assert value(_nested(5)) == [[[[[None]]]]]
    raw = _nested(MAX_DEPTH + 5)
    with pytest.raises(DecodeError, match="nesting"):
        decode(raw, 0, len(raw))


def test_a_descriptor_loop_is_bounded_by_the_nesting_limit():
    raw = b"\x00" * 200 + b"\x40"
    with pytest.raises(DecodeError, match="nesting|needs"):
        decode(raw, 0, len(raw))


def test_an_unknown_constructor_is_malformed():
    with pytest.raises(DecodeError, match="unknown constructor 0x57"):
        decode(b"\x57", 0, 1)


def test_items_after_a_compounds_count_are_malformed():
    with pytest.raises(DecodeError, match="bytes after"):
        decode(b"\xc0\x03\x01\x40\x40", 0, 5)
