"""Field lists kept as the wire has them (fast09.WireFields): content-header properties and a
method's plain arguments, and the columns the compiled row builder writes from those bytes
(fastrows.stage_wire, raw values into fastwriter's table buffer), against the reference: the
pure decoder's dicts and rows.py's rows.

The tables are compared as Arrow tables (value, type and null alike); the fields through every
way a consumer reads a mapping.
"""

from __future__ import annotations

import collections.abc
import pickle
import struct
import sys
from types import MappingProxyType

import pyarrow as pa
import pytest
from fixtures import amqp09 as A
from fixtures.compiled import FUZZ, built_or_skip, decoder09
from hypothesis import example, given
from hypothesis import strategies as st

from amqpcap.amqp import spec
from amqpcap.amqp.events import Content, Method
from amqpcap.amqp.stream import TS_SECONDS_MAX
from amqpcap.records import rows
from amqpcap.records.schema import SCHEMAS
from amqpcap.values import replace


@pytest.fixture(scope="module")
def compiled():
    """(fast09, fastrows, fastwriter): the three extensions the wire path runs through."""
    return built_or_skip("fast09"), built_or_skip("fastrows"), built_or_skip("fastwriter")


def contents(wire: bytes, compiled_walker: bool, version: str = "0-9-1", properties=None) -> list:
    dec = decoder09(compiled_walker)(version)
    if properties is not None:  # a property list no shipped spec has (every field type)
        dec.properties = properties
    dec.feed(0, wire, 0, 1, 1000)
    dec.finish(2, 2000)
    return [e for _, e in dec.pop_events() if type(e) is Content]


def publish(props: dict, version: str = "0-9-1", encode: dict | None = None) -> bytes:
    method = A.method_frame(1, "basic.publish", exchange="x", routing_key="r")
    if encode is None:
        header = A.header_frame(1, 60, 2, props, version)
    else:  # flags and values by hand: (flag word, encoded values)
        flags, values = encode
        header = A.frame(2, 1, struct.pack(">HHQH", 60, 0, 2, flags) + values)
    return method + header + A.body_frame(1, b"ok")


def message_tables(compiled, wire: bytes, version: str = "0-9-1", properties=None):
    """The messages table of ``wire``: compiled decoder, row builder and table buffer; and the
    reference decoder's events through rows.py's row builder."""
    _, fastrows, fastwriter = compiled
    fast = contents(wire, True, version, properties)
    ref = contents(wire, False, version, properties)
    assert len(fast) == len(ref) == 1
    buf = fastwriter.Columns(SCHEMAS["messages"], 100)
    fastrows.append_rows([(0, c) for c in fast], "cap", 3, version, [], buf)
    got = pa.Table.from_batches([buf.take()])
    # (whether the row builder read the properties as a mapping: the dict's path)
    message_tables.through_dict = getattr(fast[0].properties, "materialized", True)
    names = SCHEMAS["messages"].names
    want = pa.Table.from_pylist(
        [dict(zip(names, rows.message_row_reference("cap", 3, 0, c, version))) for c in ref],
        schema=SCHEMAS["messages"],
    )
    return fast[0], ref[0], got, want


ALL = {
    "content-type": "application/json",
    "content-encoding": "utf-8",
    "headers": {"x-trace": "t-1", "x-seq": 7, "x-retry": False, "n": {"m": [1, "ü"]}},
    "delivery-mode": 2,
    "priority": 5,
    "correlation-id": "c-1",
    "reply-to": "q",
    "expiration": "60000",
    "message-id": "m-1",
    "timestamp": 1_700_000_000,
    "type": "t",
    "user-id": "guest",
    "app-id": "a",
}


def assert_reads_as(w, d: dict, other_value: tuple) -> None:
    """``w`` (a WireFields) reads as the reference's dict ``d`` every way a consumer reads a
    mapping; ``other_value``: (a key of d, a value it does not have)."""
    assert type(w).__name__ == "WireFields" and type(d) is dict  # not a dict made up front
    assert isinstance(w, collections.abc.Mapping)
    assert w == d and d == w and not (w != d)
    key, value = other_value
    assert w != {**d, key: value} and w != list(d)
    assert list(w) == list(d) and list(w.keys()) == list(d)  # wire order, as the dict
    assert list(w.items()) == list(d.items()) and list(w.values()) == list(d.values())
    assert len(w) == len(d) and key in w and "nope" not in w
    assert w[key] == d[key] and w.get("nope", 9) == 9 and w.get(key) == d[key]
    assert repr(w) == repr(d)
    assert dict(w) == d and w.copy() == d and type(w.copy()) is dict
    assert pickle.loads(pickle.dumps(w)) == d
    with pytest.raises(TypeError):
        hash(w)
    with pytest.raises(KeyError):
        w["nope"]


def test_the_compiled_decoder_keeps_properties_as_a_mapping_equal_to_the_reference_dict(compiled):
    [fast] = contents(publish(ALL), True)
    [ref] = contents(publish(ALL), False)
    p, d = fast.properties, ref.properties
    assert_reads_as(p, d, ("priority", 6))
    assert p == contents(publish(ALL), True)[0].properties and repr(fast) == repr(ref)
    assert len(p) == 13 and p["headers"] == ALL["headers"] and p.get("type") == "t"


def test_a_copy_of_the_properties_is_the_callers_to_change(compiled):
    [fast] = contents(publish(ALL), True)
    mine = fast.properties.copy()
    mine["priority"] = 0
    del mine["type"]
    assert fast.properties["priority"] == 5 and "type" in fast.properties


def test_the_message_row_of_every_basic_property_is_the_references(compiled):
    fast, ref, got, want = message_tables(compiled, publish(ALL))
    assert not message_tables.through_dict  # written from the bytes
    assert got.equals(want)
    row = got.to_pylist()[0]
    assert (row["content_type"], row["delivery_mode"], row["priority"]) == ("application/json", 2, 5)
    assert row["msg_timestamp"].timestamp() == 1_700_000_000
    assert row["headers"] == rows.to_json(ALL["headers"]) and row["properties"] == rows.to_json(ALL)


TEXT = st.one_of(
    st.text(max_size=12),  # any characters: quotes, backslashes, controls, non-ASCII
    st.sampled_from(['"', "\\", "\x00", "\x1f\x7f", "a\nb\tc", "é", "\u2028", "日本"]),
    st.binary(max_size=12).filter(lambda b: len(b) <= 255),  # invalid UTF-8: replaced
).filter(lambda s: len(s.encode() if isinstance(s, str) else s) <= 255)
TIMESTAMPS = st.integers(0, 2**64 - 1) | st.sampled_from(
    [0, 8_999_999_999, 9_000_000_000, 2**63 - 1, 2**63, 2**64 - 1]
)
HEADERS = st.dictionaries(
    st.text(max_size=4),
    st.one_of(st.text(max_size=5), st.integers(-(2**31), 2**31 - 1), st.booleans(), st.none()),
    max_size=3,
)


@st.composite
def basic_properties(draw) -> tuple:
    """(version, properties): any of the version's basic properties, odd values."""
    version = draw(st.sampled_from(["0-8", "0-9", "0-9-1"]))
    types = dict(spec.get(version).PROPERTIES[60])
    out = {}
    for n in draw(st.lists(st.sampled_from(sorted(types)), unique=True)):
        t = types[n]
        kinds = {"table": HEADERS, "octet": st.integers(0, 255), "timestamp": TIMESTAMPS}
        out[n] = draw(kinds.get(t, TEXT))
    return version, out


@FUZZ
@given(basic_properties())
@example(("0-9-1", {"timestamp": 2**63}))  # beyond the timestamp column: the dict's path
@example(("0-9-1", {"content-type": b"\xff\xfe", "type": "é"}))
@example(("0-8", {"cluster-id": '"\\\n'}))
@example(("0-9-1", {}))
def test_message_rows_written_from_the_bytes_are_the_references(compiled, case):
    version, props = case
    fast, ref, got, want = message_tables(compiled, publish(props, version), version)
    # the dict's path only for a timestamp past what the ns column holds (the reference reports
    # it as value-out-of-range), or none at all (empty)
    assert message_tables.through_dict == (props.get("timestamp", 0) >= TS_SECONDS_MAX or not props)
    assert fast.properties == ref.properties
    assert got.equals(want), (got.to_pylist(), want.to_pylist())


# Every field type the decoder knows, and bit properties (one named redelivered, which the
# redelivered column takes when the method has none): no shipped spec has them in a header.
EVERY_TYPE = {
    60: (
        ("content-type", "shortstr"),
        ("delivery-mode", "short"),
        ("priority", "long"),
        ("timestamp", "longlong"),
        ("headers", "table"),
        ("type", "longstr"),
        ("flag", "bit"),
        ("redelivered", "bit"),
        ("app-id", "octet"),
    )
}


@pytest.mark.parametrize(
    "flags, values",
    [
        # every value, the first bit set: WireFields, bits after the values
        (
            0xFE80,
            A.shortstr("t")
            + struct.pack(">HIQ", 40000, 7, 5)
            + A.encode_table({"a": 1})
            + A.longstr("ü")
            + b"\x09",
        ),
        (
            0xFE80,
            A.shortstr("")
            + struct.pack(">HIQ", 32767, 2**32 - 1, 0)
            + A.encode_table({})
            + A.longstr(b"\xff")
            + b"\0",
        ),
        # redelivered set: the dict's path
        (0x8100, A.shortstr("t")),
        # only bits: a dict
        (0x0300, b""),
    ],
)
def test_rows_of_every_field_type_and_of_bits_are_the_references(compiled, flags, values):
    fast, ref, got, want = message_tables(
        compiled, publish({}, encode=(flags, values)), properties=EVERY_TYPE
    )
    # the dict's path: redelivered set (the column may take it), or bits only (no values)
    assert message_tables.through_dict == (flags & 0x0100 != 0 or flags & 0xFE80 == 0)
    assert fast.properties == ref.properties and list(fast.properties) == list(ref.properties)
    assert got.equals(want), (got.to_pylist(), want.to_pylist())


def test_properties_that_do_not_decode_are_the_references_anomaly(compiled):
    # a short string running past the header: both decoders report it (and the body frame
    # after it), neither keeps a content with made-up properties
    wire = publish({}, encode=(0x8000, b"\x09abc"))
    seen = {}
    for compiled_walker in (True, False):
        _, events = A.decode(wire, decoder=decoder09(compiled_walker))
        seen[compiled_walker] = [repr(e) for e in events]
        assert [a.kind for a in A.anomalies(events)][0] == "malformed-header"
        assert [(c.complete, c.properties) for c in A.events_of(events, Content)] == [(False, {})]
    assert seen[True] == seen[False]


def test_properties_that_fail_after_a_table_leave_nothing_allocated(compiled):
    # headers (a table, decoded as it is checked) then a delivery-mode the header does not hold:
    # the half-made value is released with the properties that did not decode
    dec = decoder09(True)("0-9-1")
    wire = publish({}, encode=(0x3000, A.encode_table({"k": {"n": [1, 2]}})))
    off = 0

    def feed(times):
        nonlocal off
        for _ in range(times):
            dec.feed(0, wire, off, 1, 1000)
            off += len(wire)
            assert "malformed-header" in [a.kind for a in A.anomalies([e for _, e in dec.pop_events()])]

    feed(200)  # warm: plans, caches
    before = sys.getallocatedblocks()
    feed(2000)
    assert sys.getallocatedblocks() - before < 500  # a leak: a table (3+ blocks) each time


def test_a_row_the_reference_builds_after_its_properties_were_staged_leaves_nothing_behind(compiled):
    # the properties are staged from the bytes before the method's arguments turn out not to be
    # a dict (the reference then builds the row): the next row must not take the staged values
    _, fastrows, fastwriter = compiled
    [fast] = contents(publish(ALL), True)
    [plain] = contents(publish({"type": "t"}), True)
    odd = replace(fast, method=replace(fast.method, args=MappingProxyType(fast.method.args)))
    buf = fastwriter.Columns(SCHEMAS["messages"], 100)
    fastrows.append_rows([(0, odd), (0, plain)], "cap", 3, "0-9-1", [], buf)
    got = pa.Table.from_batches([buf.take()])
    names = SCHEMAS["messages"].names
    want = pa.Table.from_pylist(
        [dict(zip(names, rows.message_row_reference("cap", 3, 0, c, "0-9-1"))) for c in (odd, plain)],
        schema=SCHEMAS["messages"],
    )
    assert got.equals(want)
    assert got.column("content_type").to_pylist() == ["application/json", None]


# --- method arguments ---------------------------------------------------------------------


def events(wire: bytes, compiled_walker: bool, version: str = "0-9-1") -> list:
    dec = decoder09(compiled_walker)(version)
    dec.feed(0, wire, 0, 1, 1000)
    dec.finish(2, 2000)
    return [e for _, e in dec.pop_events() if type(e) in (Method, Content)]


def with_content(method: bytes, version: str = "0-9-1") -> bytes:
    return method + A.header_frame(1, 60, 2, {"content-type": "t"}, version) + A.body_frame(1, b"ok")


def tables(compiled, wire: bytes, version: str = "0-9-1"):
    """(compiled events, reference events, {table: (got, want)}): the methods and messages tables
    of ``wire`` from the compiled decoder, row builder and table buffer, and from the reference
    decoder's events through rows.py's row builders."""
    _, fastrows, fastwriter = compiled
    fast = events(wire, True, version)
    ref = events(wire, False, version)
    bufs = {t: fastwriter.Columns(SCHEMAS[t], 100) for t in ("methods", "messages")}
    fastrows.append_rows([(1, e) for e in fast], "cap", 3, version, bufs["methods"], bufs["messages"])
    out = {}
    for table, kind, build in (
        ("methods", Method, rows.method_row_reference),
        ("messages", Content, rows.message_row_reference),
    ):
        names = SCHEMAS[table].names
        want = pa.Table.from_pylist(
            [dict(zip(names, build("cap", 3, 1, e, version))) for e in ref if type(e) is kind],
            schema=SCHEMAS[table],
        )
        out[table] = (pa.Table.from_batches([bufs[table].take()]), want)
    return fast, ref, out


DELIVER = dict(consumer_tag="ctag", delivery_tag=7, redelivered=True, exchange="ex", routing_key="rk")


def test_plain_arguments_are_a_mapping_equal_to_the_reference_dict(compiled):
    wire = with_content(A.method_frame(1, "basic.deliver", **DELIVER))
    [fast, _], [ref, _] = events(wire, True), events(wire, False)
    a, d = fast.args, ref.args
    assert_reads_as(a, d, ("delivery-tag", 8))
    assert fast == ref and repr(fast) == repr(ref)
    assert list(a) == ["consumer-tag", "delivery-tag", "redelivered", "exchange", "routing-key"]
    assert a["delivery-tag"] == 7 and a["redelivered"] is True


@pytest.mark.parametrize(
    "name, args, wire_kept",
    [
        ("basic.publish", dict(exchange="x", routing_key="r", mandatory=True), True),
        ("basic.ack", dict(delivery_tag=3, multiple=True), True),
        (
            "channel.close",
            dict(reply_code=406, reply_text="PRECONDITION_FAILED", class_id=50, method_id=10),
            True,
        ),
        # a table among them, a secret to redact, a fact the connection row learns: a dict
        ("basic.consume", dict(queue="q", consumer_tag="c", arguments={"x-priority": 1}), False),
        ("connection.start-ok", dict(client_properties={}, mechanism="PLAIN", response=b"\0u\0p"), False),
        ("connection.tune", dict(channel_max=10, frame_max=131072, heartbeat=60), False),
    ],
)
def test_which_arguments_are_kept_as_the_wire_has_them(compiled, name, args, wire_kept):
    wire = A.method_frame(0 if name.startswith("connection.") else 1, name, **args)
    [fast], [ref] = ([e for e in events(wire, way) if type(e) is Method] for way in (True, False))
    assert (type(fast.args).__name__ == "WireFields") == wire_kept and type(ref.args) is dict
    assert fast == ref and list(fast.args.items()) == list(ref.args.items())


TAGS = st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1])


@st.composite
def plain_methods(draw) -> tuple:
    """(version, wire): a basic method with plain arguments, odd values; one with a content
    carries a header and a body."""
    version = draw(st.sampled_from(["0-8", "0-9", "0-9-1"]))
    name = draw(
        st.sampled_from(["basic.publish", "basic.deliver", "basic.get-ok", "basic.return", "basic.ack"])
    )
    _, _, spec = A.lookup(name, version)
    args = {}
    for field, ftype in spec.fields:
        kinds = {
            "shortstr": TEXT,
            "bit": st.booleans(),
            "longlong": TAGS,
            "long": st.integers(0, 2**32 - 1),
            "short": st.integers(0, 2**16 - 1),
            "octet": st.integers(0, 255),
        }
        args[field.replace("-", "_")] = draw(kinds[ftype])
    method = A.method_frame(1, name, version, **args)
    return version, with_content(method, version) if spec.content else method


@FUZZ
@given(plain_methods())
@example(("0-9-1", with_content(A.method_frame(1, "basic.deliver", **{**DELIVER, "delivery_tag": 2**63}))))
@example(("0-9-1", with_content(A.method_frame(1, "basic.publish", exchange=b"\xff\xfe", routing_key="é"))))
@example(("0-8", with_content(A.method_frame(1, "basic.publish", "0-8", exchange='"\\\n', routing_key=""))))
def test_method_and_message_rows_written_from_the_bytes_are_the_references(compiled, case):
    version, wire = case
    fast, ref, out = tables(compiled, wire, version)
    # a longlong (delivery-tag) its column may not hold goes to the reference, which reports it
    big = any(type(v) is int and v >= TS_SECONDS_MAX for v in dict(ref[0].args).values())
    assert fast == ref and type(fast[0].args).__name__ == ("dict" if big else "WireFields")
    for table, (got, want) in out.items():
        assert got.equals(want), (table, got.to_pylist(), want.to_pylist())
    assert out["methods"][0].num_rows == 1


def test_rows_built_as_tuples_from_the_bytes_are_the_references(compiled):
    # a table buffer that is not the compiled one takes tuples: the dict's path, the same rows
    _, fastrows, _ = compiled
    wire = with_content(A.method_frame(1, "basic.deliver", **DELIVER))
    fast, ref = events(wire, True), events(wire, False)
    got_m, got_c = [], []
    fastrows.append_rows([(1, e) for e in fast], "cap", 3, "0-9-1", got_m, got_c)
    assert repr(got_m) == repr([rows.method_row_reference("cap", 3, 1, ref[0], "0-9-1")])
    assert repr(got_c) == repr([rows.message_row_reference("cap", 3, 1, ref[1], "0-9-1")])


def test_the_columns_written_from_the_bytes_hold_the_arguments(compiled):
    wire = with_content(A.method_frame(1, "basic.deliver", **DELIVER))
    _, _, out = tables(compiled, wire)
    m = out["methods"][0].to_pylist()[0]
    c = out["messages"][0].to_pylist()[0]
    assert (m["exchange"], m["routing_key"], m["consumer_tag"], m["delivery_tag"], m["redelivered"]) == (
        "ex",
        "rk",
        "ctag",
        7,
        True,
    )
    assert m["arguments"] == rows.to_json(A.arg_values(**DELIVER))
    assert (c["exchange"], c["routing_key"], c["consumer_tag"], c["delivery_tag"], c["redelivered"]) == (
        "ex",
        "rk",
        "ctag",
        7,
        True,
    )
