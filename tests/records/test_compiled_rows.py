"""The compiled row builders (fastrows) against the pure-Python reference (rows.py), and how
compiled.py chooses them.

The rest of tests/records runs with the process's builders (the suite runs once each way); here
the two are compared directly, both in one process (``fastrows`` and the ``*_reference``
functions), value and type (``repr``: True is not 1, NaN equals itself): the rows of every event
of every shipped capture, and rows of generated events with odd values.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from fixtures.compiled import CAPTURES, FUZZ, built_or_skip, rows_of
from hypothesis import given
from hypothesis import strategies as st

from amqpcap import compiled, pipeline
from amqpcap.amqp.events import Content, Method
from amqpcap.records import rows


@pytest.fixture(scope="module")
def fastrows():
    return built_or_skip("fastrows")


def outcome(build, *args) -> tuple:
    try:
        return "row", repr(build(*args))
    except Exception as e:
        return "raises", type(e), str(e)


# --- the choice ------------------------------------------------------------------------------


# (tests/test_compiled_switch.py: pure when asked, not built or stale, for every part)


def _active(env: dict):
    code = "from amqpcap.records import rows; from amqpcap import compiled; "
    code += "print(rows.compiled_in_use(), compiled.describe())"
    env = {k: v for k, v in os.environ.items() if k != "AMQPCAP_PURE"} | env
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)


def test_the_process_default_is_compiled_when_built_and_pure_with_the_env_var(fastrows):
    r = _active({})
    assert r.stderr == ""
    assert (
        r.stdout.startswith("True decoder: compiled (fast09")
        and "; row builder: compiled (fastrows" in r.stdout
    )
    r = _active({"AMQPCAP_PURE": "1"})
    assert r.stderr == ""
    pure = "pure Python (AMQPCAP_PURE is set)"
    assert r.stdout.strip() == "False " + "; ".join(f"{p.what}: {pure}" for p in compiled.PARTS.values())


def test_importing_the_extension_first_does_not_change_the_choice(fastrows):
    code = "import amqpcap.records.fastrows; from amqpcap.records import rows; print(rows.compiled_in_use())"
    env = {k: v for k, v in os.environ.items() if k != "AMQPCAP_PURE"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert (r.stdout, r.stderr) == ("True\n", "")


def test_the_builders_and_liveness_the_pipeline_calls_come_from_one_choice(fastrows):
    code = (
        "from amqpcap.records import liveness, rows; "
        "print(rows.append_rows.__module__, "
        "liveness.Liveness.__module__, rows.connection_json.__module__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "AMQPCAP_PURE"}
    fast, ref = "amqpcap.records.fastrows", "amqpcap.records.rows"
    for pure, want in (("0", [fast] * 3), ("1", [ref, "amqpcap.records.liveness", ref])):
        r = subprocess.run(
            [sys.executable, "-c", code], env=env | {"AMQPCAP_PURE": pure}, capture_output=True, text=True
        )
        assert r.stdout.split() == want, r.stderr


# --- same rows: every shipped capture ----------------------------------------------------------


# the captures whose rows these builders make (AMQP 1.0's are records/rows_1_0.py's)
ROW_CAPTURES = [c for c in CAPTURES if not os.path.basename(c).startswith("rabbitmq10_")]


@pytest.mark.parametrize("capture", ROW_CAPTURES, ids=os.path.basename)
def test_compiled_and_reference_build_identical_rows_for_every_capture(
    fastrows, capture, tmp_path, monkeypatch
):
    seen = {"methods": 0, "messages": 0}
    reference = rows.append_rows_reference

    def checked(events, capture, stream, version, methods, messages):
        want_m, want_c, got_m, got_c = [], [], [], []
        want_rest = reference(events, capture, stream, version, want_m, want_c)
        got_rest = fastrows.append_rows(events, capture, stream, version, got_m, got_c)
        assert repr((got_m, got_c, got_rest)) == repr((want_m, want_c, want_rest))
        assert all(type(row) is tuple for row in got_m + got_c)
        seen["methods"] += len(got_m)
        seen["messages"] += len(got_c)
        return reference(events, capture, stream, version, methods, messages)

    monkeypatch.setattr(rows, "append_rows", checked)
    # every row from an event (direct rows, written with no event, are compared with these in
    # test_direct_rows.py)
    monkeypatch.setattr(rows, "row_sink", lambda *a: None)
    pipeline.dissect([capture], str(tmp_path / "out"))
    # every row written went through the comparison
    for table, n in seen.items():
        assert n == sum(pq.read_metadata(p).num_rows for p in (tmp_path / "out").rglob(f"{table}/*.parquet"))


@pytest.mark.parametrize("capture", CAPTURES, ids=os.path.basename)
def test_compiled_append_rows_appends_and_hands_back_what_the_reference_does(
    fastrows, capture, tmp_path, monkeypatch
):
    """The pipeline's one call per batch of events: the same rows in the same tables, and the
    other events (anomalies, heartbeats, frames) handed back in order. An AMQP 1.0
    conversation's events never come here (records/rows_1_0.py makes its rows)."""
    calls = {"events": 0, "rest": 0}
    reference = rows.append_rows_reference

    def both(events, capture, stream, version, methods, messages):
        out = {}
        for name, fn in (("reference", reference), ("compiled", fastrows.append_rows)):
            m, c = [], []  # tables: the rows in the order appended
            rest = fn(events, capture, stream, version, m, c)
            out[name] = (repr(m), repr(c), rest)
        assert out["compiled"] == out["reference"]
        calls["events"] += len(events)
        calls["rest"] += len(out["compiled"][2])
        return reference(events, capture, stream, version, methods, messages)

    monkeypatch.setattr(rows, "append_rows", both)
    pipeline.dissect([capture], str(tmp_path / "out"), frames=True)
    connections = pq.read_table(tmp_path / "out" / "connections", columns=["version"])
    versions = set(connections["version"].to_pylist())
    if versions - {"1.0"}:
        assert calls["events"] >= calls["rest"] > 0  # frames=True: Frame events come back
    else:
        assert calls["events"] == 0


# --- same rows: odd values -------------------------------------------------------------------

INTS = st.integers(-(2**70), 2**70) | st.sampled_from(
    [0, -1, 1, -9, -10, 32767, 32768, -32769, 2**63 - 1, 2**63, 2**64, 8_999_999_999, 9_000_000_000]
    + [-(2**63), -(2**63) - 1]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    INTS,
    st.floats(),
    st.text(max_size=6),
    st.binary(max_size=6),
    st.binary(max_size=4).map(bytearray),
    st.sampled_from([b"\xff\xfe", "é\n\x00", memoryview(b"m")]),
)
VALUES = st.recursive(
    SCALARS,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=6,
)
ARG_NAMES = sorted(
    {k for _, names, _ in rows.METHOD_ARGS for k in names}
    | {"destination", "error-code", "class-id", "method-id", "class-code", "command-code", "other"}
)
PROPERTY_NAMES = sorted(
    {k for _, names, _ in rows.MESSAGE_PROPERTIES for k in names} | {"redelivered", "other"}
)
METHOD_NAMES = (
    "basic.publish",
    "basic.deliver",
    "basic.get-ok",
    "channel.close",
    "connection.close",
    "execution.exception",
    "execution.result",
    "message.transfer",
    "message.subscribe",
    "message.cancel",
    "message.flow",
    "session.completed",
    "queue.declare",
    "x.y",
)
VERSIONS = st.sampled_from(["0-8", "0-9", "0-9-1", "0-10", None])
RANGES = st.lists(st.lists(INTS | st.booleans(), min_size=1, max_size=3), max_size=3)


def _value(draw, name):
    # sometimes a well-typed value, sometimes anything
    if name in ("commands", "transfers") and draw(st.booleans()):
        return draw(RANGES)
    if name in ("class-id", "method-id", "class-code", "command-code") and draw(st.booleans()):
        return draw(st.integers(0, 120))
    return draw(VALUES)


@st.composite
def arguments(draw, names):
    keys = draw(st.lists(st.sampled_from(names), unique=True, max_size=8))
    return {k: _value(draw, k) for k in keys}


@st.composite
def methods(draw):
    return Method(
        draw(st.integers(0, 10**6)),
        draw(st.integers(0, 2**62)),
        draw(st.integers(0, 10**6) | st.none()),
        draw(st.integers(0, 65535)),
        draw(st.integers(0, 65535)),
        draw(st.integers(0, 65535)),
        draw(st.sampled_from(METHOD_NAMES)),
        draw(arguments(ARG_NAMES)),
        draw(st.booleans()),
        draw(st.booleans()),
        draw(st.integers(0, 2**31)),
        draw(st.none() | st.integers(0, 2**32)),
        draw(st.none() | st.integers(0, 2**32)),
    )


@st.composite
def contents(draw):
    return Content(
        draw(st.integers(0, 10**6)),
        draw(st.integers(0, 2**62)),
        draw(st.integers(0, 10**6)),
        draw(st.integers(0, 65535)),
        draw(methods()),
        60,
        draw(arguments(PROPERTY_NAMES)),
        draw(st.integers(0, 2**40)),
        draw(st.integers(0, 2**40)),
        draw(st.integers(0, 100)),
        "ab" * 32,
        draw(st.binary(max_size=8)),
        draw(st.booleans()),
        draw(st.integers(0, 10**6)),
        draw(st.none() | st.integers(0, 10**6)),
        draw(st.none() | st.sampled_from(["longstr", "octet+longstr"])),
        draw(st.none() | VALUES),
        draw(st.none() | VALUES),
    )


@FUZZ
@given(methods(), st.sampled_from([0, 1]), VERSIONS)
def test_compiled_and_reference_method_rows_are_identical_for_odd_arguments(fastrows, m, direction, version):
    args = ("cap", 3, direction, m, version)
    assert outcome(rows_of(fastrows.append_rows)[0], *args) == outcome(rows.method_row_reference, *args)


@FUZZ
@given(contents(), st.sampled_from([0, 1]), VERSIONS)
def test_compiled_and_reference_message_rows_are_identical_for_odd_properties(
    fastrows, c, direction, version
):
    args = ("cap", None, direction, c, version)
    assert outcome(rows_of(fastrows.append_rows)[1], *args) == outcome(rows.message_row_reference, *args)


@FUZZ
@given(st.lists(methods(), max_size=12), st.lists(contents(), max_size=12), VERSIONS)
def test_rows_in_a_sequence_are_identical_whatever_plan_the_row_before_left(fastrows, ms, cs, version):
    # the compiled builders reuse the plan of the previous row of the same method name (or
    # property count) when the keys are the same: a sequence mixes hits and misses
    for m in ms:
        args = ("cap", 3, 1, m, version)
        assert outcome(rows_of(fastrows.append_rows)[0], *args) == outcome(rows.method_row_reference, *args)
    for c in cs:
        args = ("cap", 3, 0, c, version)
        assert outcome(rows_of(fastrows.append_rows)[1], *args) == outcome(rows.message_row_reference, *args)


@pytest.mark.parametrize("key", ["é", "x-ü", "\u2028", "plain"])
@pytest.mark.parametrize("value", ["ascii", "ü", "\u2028", 5, {"é": "ü"}])
def test_json_of_non_ascii_keys_and_values_is_the_reference_text_on_every_path(fastrows, key, value):
    # the compiled JSON is copied into an ASCII str unless a key (written from the plan's
    # pre-encoded keys) or a value is not ASCII: every mix, twice (the second row takes the plan
    # of the first)
    m = _method("basic.publish", {"exchange": "x", key: value, "routing-key": "r"})
    for _ in range(2):
        args = ("cap", 3, 0, m, "0-9-1")
        got, want = rows_of(fastrows.append_rows)[0](*args), rows.method_row_reference(*args)
        assert got == want
        assert [type(v) for v in got] == [type(v) for v in want]


@pytest.mark.parametrize(
    "headers", [{"x-a": 1, "x-b": "ü", "n": {"d": [1, b"\x00"]}}, {}, None, "text", [1, 2], b"\xff", 2.5]
)
def test_the_headers_column_is_the_reference_text_when_taken_from_the_properties_text(fastrows, headers):
    # the compiled message row takes the headers' JSON from the properties' JSON (written once):
    # the same text as encoding them alone, and null for None
    m = _method("basic.publish", {"exchange": "x", "routing-key": "r"})
    p = {"content-type": "t", "headers": headers, "delivery-mode": 2}
    for _ in range(2):  # the second row takes the plan of the first
        c = Content(4, 5, 6, 1, m, 60, dict(p), 1, 1, 1, "h", b"x", True, 4)
        args = ("cap", 3, 0, c, "0-9-1")
        got, want = rows_of(fastrows.append_rows)[1](*args), rows.message_row_reference(*args)
        assert got == want
        row = dict(zip(rows.COLUMNS["messages"], got))
        assert row["headers"] == (None if headers is None else rows.to_json(headers))


class _Key(str):
    pass


def test_the_same_names_in_another_order_type_or_object_are_not_the_plan_of_the_row_before(fastrows):
    fresh = "".join(["exch", "ange"])  # equal to "exchange", another object
    sequences = [
        {"exchange": "e", "routing-key": "r", "mandatory": True},
        {"routing-key": "r", "exchange": "e", "mandatory": True},  # same names, other order
        {fresh: "e\n\u00e9", "routing-key": "r", "mandatory": True},
        {_Key("exchange"): "e", "routing-key": "r", "mandatory": True},  # a str subclass key
        {"exchange": "e", "routing-key": "r", "mandatory": True, "$dialect": "x"},
        {"exchange": "e", "routing-key": "r"},
        {"exchange": "e", "routing-key": "r", "mandatory": True},
    ]
    for args in sequences:
        m = _method("basic.publish", args)
        call = ("c", 1, 0, m, "0-9-1")
        expected = outcome(rows.method_row_reference, *call)
        assert outcome(rows_of(fastrows.append_rows)[0], *call) == expected
        # and as the properties of a message (a plan per property count)
        c = Content(4, 5, 6, 1, _method("basic.publish", {}), 60, dict(args), 1, 1, 1, "h", b"x", True, 4)
        call = ("c", 1, 0, c, "0-9-1")
        assert outcome(rows_of(fastrows.append_rows)[1], *call) == outcome(rows.message_row_reference, *call)
    row = dict(
        zip(
            rows.METHOD_COLUMNS,
            rows_of(fastrows.append_rows)[0]("c", 1, 0, _method("basic.publish", sequences[1]), "0-9-1"),
        )
    )
    assert (
        row["arguments"] == '{"routing-key":"r","exchange":"e","mandatory":true}'
    )  # in the dict's own order


def _method(name, args, **kw):
    return Method(1, 2, 3, 1, 0, 0, name, args, False, False, 9, **kw)


@pytest.mark.parametrize("direction", [0, 1])
@pytest.mark.parametrize("version", ["0-10", "0-9-1"])
@pytest.mark.parametrize(
    "name", ["message.transfer", "message.subscribe", "message.flow", "basic.publish", "message.accept"]
)
@pytest.mark.parametrize(
    "args",
    [
        {"destination": "d"},
        {"destination": b"d\xff"},
        {"destination": None},
        {"destination": 7, "exchange": "e"},
        {"exchange": None, "destination": "d"},
        {"consumer-tag": "c", "destination": "d", "routing-key": "r"},
    ],
)
def test_destination_cases_are_identical(fastrows, direction, version, name, args):
    m = _method(name, args)
    call = ("c", 1, direction, m, version)
    assert outcome(rows_of(fastrows.append_rows)[0], *call) == outcome(rows.method_row_reference, *call)
    c = Content(4, 5, 6, 1, m, 60, {"content-type": "t"}, 1, 1, 1, "h", b"x", True, 4)
    call = ("c", 1, direction, c, version)
    assert outcome(rows_of(fastrows.append_rows)[1], *call) == outcome(rows.message_row_reference, *call)


def test_values_keep_their_types(fastrows):
    m = _method(
        "basic.ack",
        {"delivery-tag": True, "multiple": 1, "reply-code": True, "prefetch-count": 2**70, "queue": b"q\xff"},
    )
    row = dict(zip(rows.METHOD_COLUMNS, rows_of(fastrows.append_rows)[0]("c", 0, 0, m, "0-9-1")))
    assert row["delivery_tag"] is True and row["multiple"] is None and row["reply_code"] is None
    assert row["prefetch_count"] == 2**70 and row["queue"] == "q\ufffd"
    p = {"delivery-mode": 2**80, "priority": -(2**80), "timestamp": True, "headers": {"b": b"\x00"}}
    c = Content(4, 5, 6, 1, m, 60, p, 1, 1, 1, "h", b"x", True, 4)
    row = dict(zip(rows.COLUMNS["messages"], rows_of(fastrows.append_rows)[1]("c", 0, 0, c, "0-9-1")))
    assert row["delivery_mode"] is None and row["priority"] == -(2**80)
    assert row["msg_timestamp"] == 1_000_000_000 and type(row["msg_timestamp"]) is int
    assert row["headers"] == '{"b":{"$b64":"AA=="}}' and row["delivery_tag"] is True


def test_other_event_classes_and_argument_mappings_go_to_the_reference(fastrows):
    class Sub(Method):
        __slots__ = ()

    class Args(dict):
        pass

    for m in (
        Sub(1, 2, 3, 1, 0, 0, "basic.publish", {"exchange": "x"}, False, True, 9),
        _method("basic.publish", Args(exchange="x")),
        _method("basic.publish", ["exchange", "queue"]),
    ):
        # tables and the events handed back: a subclass of Method is not a methods row for either
        out = []
        for append_rows in (fastrows.append_rows, rows.append_rows_reference):
            methods, messages = [], []
            rest = outcome(append_rows, [(0, m)], "c", 0, "0-9-1", methods, messages)
            out.append((rest, repr(methods), messages))
        assert out[0] == out[1]


def test_the_compiled_builders_build_rows_themselves(fastrows, monkeypatch):
    """Not builders that hand every row to the reference (the comparisons above would pass)."""

    def reference(*args):
        raise AssertionError("the reference was called")

    monkeypatch.setattr(rows, "method_row_reference", reference)
    monkeypatch.setattr(rows, "message_row_reference", reference)
    m = _method("basic.deliver", {"consumer-tag": "c", "delivery-tag": 5, "redelivered": False})
    c = Content(4, 5, 6, 1, m, 60, {"content-type": "t", "priority": 3}, 1, 1, 1, "h", b"x", True, 4)
    row = dict(zip(rows.METHOD_COLUMNS, rows_of(fastrows.append_rows)[0]("c", 0, 1, m, "0-9-1")))
    assert row["consumer_tag"] == "c" and row["delivery_tag"] == 5 and row["redelivered"] is False
    row = dict(zip(rows.COLUMNS["messages"], rows_of(fastrows.append_rows)[1]("c", 0, 1, c, "0-9-1")))
    assert row["priority"] == 3 and row["direction"] == "s2c" and row["body"] == b"x"


JSON_VALUES = st.recursive(
    SCALARS
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=8)
    | st.text(st.sampled_from('ab"\\\x00\x1f\x20\x7f\xe9\n'), min_size=7, max_size=40)
    | st.sampled_from(["\ud800", "\\", '"', "\x7f\x1f\b\f\n\r\t", float("nan"), float("-inf"), -0.0, 1e300]),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.lists(kids, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.sampled_from([1, None, True, 2.5]), kids, max_size=4)
    ),
    max_leaves=12,
)


@FUZZ
@given(JSON_VALUES)
def test_compiled_json_text_is_the_reference_text(fastrows, value):
    assert outcome(fastrows.json_text, value) == outcome(rows.to_json, value)


SPECIAL = ['"', "\\", "\x00", "\x1f", "\n", "\x7f", " ", "!", "#", "[", "]", "\xe9", "\u2028"]


@pytest.mark.parametrize("special", SPECIAL)
def test_compiled_json_escapes_a_special_character_at_every_position(fastrows, special):
    # (the compiled writer copies text eight bytes at a time: every place in a word, ASCII text
    # and text of several bytes a character)
    for at in range(25):
        for pad in ("a", "é", "\u2028"):
            value = {"k": pad * at + special + "b" * (24 - at), "w": special * at}
            assert fastrows.json_text(value) == rows.to_json(value)


def test_compiled_json_text_of_nested_and_long_values(fastrows):
    deep = {"a": []}
    for _ in range(80):  # deeper than the compiled writer goes: the reference writes it
        deep = {"a": [deep]}
    for value in (deep, {"s": "é" * 5000, "b": bytes(range(256)) * 9, "n": [2**64, -(2**63)]}):
        assert fastrows.json_text(value) == rows.to_json(value)


# --- liveness ------------------------------------------------------------------------------


TALLIES = st.lists(
    st.tuples(
        st.sampled_from([0, 1]),
        st.integers(0, 10**6) | st.integers(2**63 - 10, 2**64 + 10),  # beyond int64: pcapng times
        st.integers(1, 5),
    ),
    max_size=30,
)


@FUZZ
@given(TALLIES, st.lists(st.sampled_from([0, 1]), max_size=5))
def test_compiled_liveness_keeps_the_reference_facts(fastrows, tallies, heartbeats):
    from amqpcap.records.liveness import LivenessReference

    ours, ref = fastrows.Liveness(), LivenessReference()
    for d, ts, n in tallies:
        ours.frames_seen(d, ts, n) if n > 1 else ours.frames_seen(d, ts)
        ref.frames_seen(d, ts, n)
    for d in heartbeats:
        ours.heartbeat(d)
        ref.heartbeat(d)
    assert ours.columns() == ref.columns()
    for name in ("frames", "heartbeats", "last", "gap", "gap_start"):
        assert getattr(ours, name) == getattr(ref, name), name
    # an index that is not a direction fails as the reference fails
    assert outcome(ours.frames_seen, 2, 5) == outcome(ref.frames_seen, 2, 5)


# --- rows straight into the compiled table buffer ----------------------------------------------


def test_rows_go_into_a_compiled_table_buffer_as_values_not_tuples(fastrows):
    """append_rows hands a compiled table buffer the staged values (no row tuple, no call of
    its ``append``); the batch reads back as the same rows appended as tuples; a value the
    buffer refuses raises as it does for a tuple and leaves the rows before it."""
    import pyarrow as pa

    from amqpcap.records.schema import SCHEMAS

    fastwriter = built_or_skip("fastwriter")

    class Counting(fastwriter.Columns):
        calls = 0

        def append(self, row):
            Counting.calls += 1
            return super().append(row)

    ack = _method("basic.ack", {"delivery-tag": 5, "multiple": False})
    publish = _method("basic.publish", {"exchange": "e", "routing-key": "r", "mandatory": False})
    props = {"content-type": "t", "headers": {"a": 1, "b": [True, None]}, "delivery-mode": 2}
    content = Content(4, 5, 6, 1, publish, 60, props, 3, 3, 1, "h", b"abc", True, 4)
    events = [(0, publish), (0, content), (1, ack), (0, _method("channel.close", {"reply-code": 404}))]
    direct = {n: Counting(SCHEMAS[n], 100) for n in ("methods", "messages")}
    tuples = {n: fastwriter.Columns(SCHEMAS[n], 100) for n in ("methods", "messages")}
    assert fastrows.append_rows(events, "cap", 7, "0-9-1", direct["methods"], direct["messages"]) == []
    for d, e in events:
        if type(e) is Method:
            tuples["methods"].append(rows_of(fastrows.append_rows)[0]("cap", 7, d, e, "0-9-1"))
        else:
            tuples["messages"].append(rows_of(fastrows.append_rows)[1]("cap", 7, d, e, "0-9-1"))
    assert Counting.calls == 0 and direct["methods"].pending == 3 and direct["messages"].pending == 1
    bad = _method("basic.ack", {"delivery-tag": 6})
    bad.channel = "not a channel"  # the int16 column refuses it
    for table in (direct["methods"], tuples["methods"]):
        add = fastrows.append_rows if table is direct["methods"] else None
        with pytest.raises(pa.ArrowInvalid):
            if add:
                add([(1, bad)], "cap", 7, "0-9-1", table, direct["messages"])
            else:
                table.append(rows_of(fastrows.append_rows)[0]("cap", 7, 1, bad, "0-9-1"))
    for name in ("methods", "messages"):
        got, want = direct[name].take(), tuples[name].take()
        assert got.equals(want), name
        assert got.num_rows == (3 if name == "methods" else 1)  # the refused row left nothing
    assert got.column("headers").to_pylist() == ['{"a":1,"b":[true,null]}']
