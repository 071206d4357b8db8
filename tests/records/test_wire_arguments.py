"""Method arguments kept as the wire has them (fast09.WireFields, for plain argument lists) and
the method and message columns the compiled row builder writes from those bytes
(fastrows.stage_wire, raw values into fastwriter's table buffer), against the reference: the
pure decoder's dict and rows.py's rows.

The tables are compared as Arrow tables (value, type and null alike); the arguments through
every way a consumer reads a mapping.
"""

from __future__ import annotations

import collections.abc
import pickle

import pyarrow as pa
import pytest
from fixtures import amqp09 as A
from fixtures.compiled import FUZZ, built_or_skip, own_choice
from hypothesis import example, given
from hypothesis import strategies as st

from amqpcap.amqp import codec_0_9
from amqpcap.amqp.codec_0_9 import Decoder09
from amqpcap.amqp.events import Content, Method
from amqpcap.records import rows
from amqpcap.records.schema import SCHEMAS

walker = own_choice(codec_0_9, "walker")  # these tests choose the walker themselves
row_builder = own_choice(rows, "row_builder")  # and the row builders


@pytest.fixture(scope="module")
def compiled():
    """(fast09, fastrows, fastwriter): the three extensions the wire path runs through."""
    return built_or_skip("fast09"), built_or_skip("fastrows"), built_or_skip("fastwriter")


def events(wire: bytes, compiled_walker: bool, version: str = "0-9-1") -> list:
    codec_0_9.use_compiled(compiled_walker)
    dec = Decoder09(version)
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
    assert type(a).__name__ == "WireFields" and type(d) is dict  # no dict made up front
    assert isinstance(a, collections.abc.Mapping)
    assert a == d and d == a and not (a != d) and fast == ref
    assert a != {**d, "delivery-tag": 8} and a != list(d)
    assert list(a) == list(d) == ["consumer-tag", "delivery-tag", "redelivered", "exchange", "routing-key"]
    assert list(a.items()) == list(d.items()) and list(a.values()) == list(d.values())
    assert len(a) == 5 and "redelivered" in a and "nope" not in a
    assert a["delivery-tag"] == 7 and a["redelivered"] is True and a.get("nope", 9) == 9
    assert repr(a) == repr(d) and repr(fast) == repr(ref)
    assert dict(a) == d and a.copy() == d and type(a.copy()) is dict
    assert pickle.loads(pickle.dumps(a)) == d
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(KeyError):
        a["nope"]


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


TEXT = st.one_of(
    st.text(max_size=12),  # any characters: quotes, backslashes, controls, non-ASCII
    st.sampled_from(['"', "\\", "\x00", "\x1f\x7f", "a\nb\tc", "é", "\u2028", "日本", ""]),
    st.binary(max_size=12),  # invalid UTF-8: replaced
)
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
    assert fast == ref and type(fast[0].args).__name__ == "WireFields"
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
    assert got_m == [rows.method_row_reference("cap", 3, 1, ref[0], "0-9-1")]
    assert got_c == [rows.message_row_reference("cap", 3, 1, ref[1], "0-9-1")]
    assert repr(fastrows.method_row("cap", 3, 1, fast[0], "0-9-1")) == repr(got_m[0])
    assert repr(fastrows.message_row("cap", 3, 1, fast[1], "0-9-1")) == repr(got_c[0])


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
