"""Property-based fuzzing of the 0-8 / 0-9 / 0-9-1 codec (hypothesis).

Whatever bytes arrive, ``Decoder09`` never raises: it emits events and
anomalies.  And it accounts for every byte, which is checked in its strongest
form, a *tiling*: the ranges ``[offset, offset + wire_size)`` of the Frame
events and ``[offset, offset + skipped)`` of the anomalies that skip bytes
(resync, resync-failed, truncated-stream; a gap covers the lost bytes plus the
incomplete frame before them, ending where the gap ends) are disjoint and
cover the stream exactly, in order, with no hole.

The number of examples per property comes from ``AMQPCAP_FUZZ_EXAMPLES``
(default 200, so CI stays quick).  A longer run:

    AMQPCAP_FUZZ_EXAMPLES=20000 python -m pytest tests/amqp/test_fuzz_codec_0_9.py -q \
        -p no:cacheprovider --hypothesis-show-statistics
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping

import pytest
from fixtures import amqp09 as A
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpcap.amqp.decoder import Decoder09
from amqpcap.amqp.events import Anomaly, Content, Frame, Heartbeat, Method
from amqpcap.amqp.fields_0_9 import DecodeError, decode_table

EXAMPLES = int(os.environ.get("AMQPCAP_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
VERSIONS = ("0-8", "0-9", "0-9-1")
EVENT_TYPES = (Frame, Method, Content, Heartbeat, Anomaly)
SKIPPING = {"resync", "resync-failed", "truncated-stream", "gap"}


# --- the accounting property ---------------------------------------------------------


def assert_tiles(events, start: int, end: int, gaps: dict | None = None) -> None:
    """Frames and skipping anomalies cover [start, end) exactly once, in order."""
    gaps = gaps or {}
    ranges = []
    for e in events:
        assert isinstance(e, EVENT_TYPES), e
        if isinstance(e, Frame):
            assert e.wire_size == e.size + 8
            ranges.append((e.offset, e.offset + e.wire_size, "frame"))
        elif isinstance(e, Anomaly) and e.skipped:
            assert e.kind in SKIPPING, e  # in-frame anomalies never skip: their Frame counts the bytes
            if e.kind == "gap":
                lost_end = e.offset + gaps[e.offset]
                ranges.append((lost_end - e.skipped, lost_end, "gap"))
            else:
                ranges.append((e.offset, e.offset + e.skipped, e.kind))
    ranges.sort()
    pos = start
    for a, b, kind in ranges:
        assert a == pos, f"{kind} range [{a}, {b}) does not start where the previous ended ({pos}): {ranges}"
        assert b > a
        pos = b
    assert pos == end, f"accounted up to {pos}, stream ends at {end}: {ranges}"


def assert_events_sane(events) -> None:
    for e in events:
        if isinstance(e, Content):
            assert e.body_received >= 0 and e.body_frames >= 0
            assert len(e.body) <= 64
            if e.complete:
                assert e.body_received == e.body_size
        if isinstance(e, Method):
            assert isinstance(e.args, Mapping) and e.name.count(".") == 1


def run(version, chunks, *, start=0, midstream=False, gaps=(), **kw):
    """Feed ``chunks`` (list of bytes) with ``gaps`` {chunk index: lost bytes before it}; finish; events."""
    dec = Decoder09(version, **kw)
    if midstream:
        dec.start_midstream(0, start)
    off = start
    gap_at = {}
    for i, c in enumerate(chunks):
        lost = dict(gaps).get(i)
        if lost:
            dec.gap(0, off, lost, i + 1, i)
            gap_at[off] = lost
            off += lost
        dec.feed(0, c, off, i + 1, i)
        off += len(c)
    dec.finish(len(chunks) + 1, len(chunks))
    popped = dec.pop_events()
    assert {d for d, _ in popped} <= {0} and dec.pop_events() == []
    return [e for _, e in popped], off, gap_at


def split(data: bytes, cuts) -> list:
    cuts = sorted(set(c for c in cuts if 0 < c < len(data)))
    return [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]


# --- strategies ------------------------------------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
short_text = text.filter(lambda s: len(s.encode()) <= 255)


def _scalar_triples(rabbit: bool):
    """(value to encode, letter, decoded value) for the non-container letters."""
    i = st.integers
    out = [
        st.booleans().map(lambda v: (v, "t", v)),
        i(-128, 127).map(lambda v: (v, "b", v)),
        i(0, 255).map(lambda v: (v, "B", v)),
        i(-(2**15), 2**15 - 1).map(lambda v: (v, "U", v)),
        i(0, 2**16 - 1).map(lambda v: (v, "u", v)),
        i(-(2**31), 2**31 - 1).map(lambda v: (v, "I", v)),
        i(0, 2**32 - 1).map(lambda v: (v, "i", v)),
        i(-(2**63), 2**63 - 1).map(lambda v: (v, "L", v)),
        st.floats(width=32, allow_nan=False).map(lambda v: (v, "f", v)),
        st.floats(allow_nan=False).map(lambda v: (v, "d", v)),
        st.tuples(i(0, 255), i(-(2**31), 2**31 - 1)).map(
            lambda v: (v, "D", {"$decimal": f"{v[1]}e-{v[0]}" if v[0] else str(v[1])})
        ),
        text.map(lambda v: (v, "S", v)),
        st.binary(max_size=20).map(lambda v: (v, "x", v)),
        i(0, 2**64 - 1).map(lambda v: (v, "T", v)),
        st.just((None, "V", None)),
    ]
    if rabbit:
        out += [
            i(-(2**15), 2**15 - 1).map(lambda v: (v, "s", v)),
            i(-(2**63), 2**63 - 1).map(lambda v: (v, "l", v)),
        ]
    else:
        out += [short_text.map(lambda v: (v, "s", v)), i(0, 2**64 - 1).map(lambda v: (v, "l", v))]
    return st.one_of(out)


def _table_of(values):
    return st.dictionaries(short_text, values, max_size=5).map(
        lambda d: ({k: A.Typed(t[1], t[0]) for k, t in d.items()}, {k: t[2] for k, t in d.items()})
    )


def triples(rabbit: bool):
    def extend(children):
        arrays = st.lists(children, max_size=4).map(
            lambda xs: ([A.Typed(x[1], x[0]) for x in xs], "A", [x[2] for x in xs])
        )
        tables = _table_of(children).map(lambda t: (t[0], "F", t[1]))
        return arrays | tables

    return st.recursive(_scalar_triples(rabbit), extend, max_leaves=12)


def tables(rabbit: bool = True):
    """(wire bytes of a table, decoded dict)."""
    return _table_of(triples(rabbit)).map(lambda t: (A.encode_table(t[0], rabbit=rabbit), t[1]))


FIELD_VALUES = {
    "bit": st.booleans(),
    "octet": st.integers(0, 255),
    "short": st.integers(0, 2**16 - 1),
    "long": st.integers(0, 2**32 - 1),
    "longlong": st.integers(0, 2**64 - 1),
    "timestamp": st.integers(0, 2**64 - 1),
    "shortstr": short_text,
    "longstr": st.binary(max_size=30) | text,
    "content": st.binary(max_size=30),
    "table": tables().map(lambda t: t[0]),
}


@st.composite
def method_frames(draw, version):
    ms = A.methods(version)
    name = draw(st.sampled_from(sorted(ms)))
    cid, mid, spec = ms[name]
    values = {f: draw(FIELD_VALUES[t]) for f, t in spec.fields}
    channel = draw(st.integers(0, 3))
    return A.frame(1, channel, struct.pack(">HH", cid, mid) + A.encode_fields(spec.fields, values))


@st.composite
def contents(draw, version):
    channel = draw(st.integers(1, 3))
    body = draw(st.binary(max_size=300))
    frame_body = draw(st.integers(1, 128))
    props = {"content-type": draw(short_text)} if draw(st.booleans()) else {}
    if draw(st.booleans()):
        props["headers"] = draw(tables())[0]
    method = A.method_frame(
        channel,
        "basic.deliver",
        version,
        consumer_tag="c",
        delivery_tag=draw(st.integers(0, 2**64 - 1)),
        routing_key="rk",
    )
    return A.content(channel, method, body, props, frame_body=frame_body, version=version)


def valid_frames(version):
    return st.one_of(
        method_frames(version),
        contents(version),
        st.just(A.heartbeat()),
        st.binary(max_size=40).map(lambda b: A.body_frame(1, b)),
    )


@st.composite
def valid_streams(draw):
    version = draw(st.sampled_from(VERSIONS))
    frames = draw(st.lists(valid_frames(version), min_size=1, max_size=12))
    return version, frames


CORRUPTIONS = ("flip", "insert", "delete", "overwrite")


@st.composite
def corrupted(draw):
    version, frames = draw(valid_streams())
    data = bytearray(b"".join(frames))
    first = len(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(CORRUPTIONS))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        first = min(first, at)
        if op == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=20))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 20))]
        elif op == "overwrite":
            junk = draw(st.binary(min_size=1, max_size=20))
            data[at : at + len(junk)] = junk
    return version, frames, bytes(data), first


# --- properties ------------------------------------------------------------------------


@FUZZ
@given(
    st.sampled_from(VERSIONS),
    st.binary(max_size=3000),
    st.lists(st.integers(1, 3000), max_size=20),
    st.booleans(),
    st.integers(0, 2**40),
)
def test_random_bytes_never_raise_and_every_byte_is_accounted(version, data, cuts, midstream, start):
    events, end, _ = run(version, split(data, cuts), start=start, midstream=midstream)
    assert_tiles(events, start, end)
    assert_events_sane(events)


@FUZZ
@given(
    st.sampled_from(VERSIONS),
    st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=10),
    st.lists(st.tuples(st.integers(0, 9), st.integers(1, 5000)), max_size=3),
    st.booleans(),
)
def test_random_bytes_with_gaps_never_raise_and_every_byte_is_accounted(version, chunks, gaps, midstream):
    gaps = dict(gaps)
    events, end, gap_at = run(version, chunks, midstream=midstream, gaps=gaps)
    assert_tiles(events, 0, end, gap_at)
    assert len([e for e in events if isinstance(e, Anomaly) and e.kind == "gap"]) == len(gap_at)


@FUZZ
@given(valid_streams(), st.lists(st.integers(1, 10**5), max_size=30))
def test_valid_streams_decode_without_anomalies_and_split_invariantly(vf, cuts):
    version, frames = vf
    data = b"".join(frames)
    events, end, _ = run(version, split(data, cuts))
    ref, _, _ = run(version, [data])
    anomalies = [e for e in events if isinstance(e, Anomaly)]
    # the only anomalies valid frames can cause: body frames outside a content, contents cut
    # short, values (a 64-bit delivery-tag, body size or timestamp) their columns cannot hold
    assert {a.kind for a in anomalies} <= {"unexpected-frame", "incomplete-content", "value-out-of-range"}
    assert_tiles(events, 0, end)
    assert [f.offset for f in events if isinstance(f, Frame)] == [
        sum(map(len, frames[:i])) + o for i, fr in enumerate(frames) for o in _frame_offsets(fr)
    ]
    assert [A.strip_position(e) for e in events] == [A.strip_position(e) for e in ref]


def _frame_offsets(blob: bytes):
    out, p = [], 0
    while p < len(blob):
        out.append(p)
        p += 8 + struct.unpack_from(">I", blob, p + 3)[0]
    return out


@FUZZ
@given(corrupted(), st.lists(st.integers(1, 10**5), max_size=10), st.booleans())
def test_corrupted_streams_never_raise_account_every_byte_and_keep_the_clean_prefix(c, cuts, midstream):
    version, frames, data, first_bad = c
    events, end, _ = run(version, split(data, cuts), midstream=midstream)
    assert_tiles(events, 0, end)
    assert_events_sane(events)
    # frames entirely before the first corrupted byte decode exactly as in the clean stream
    clean, _, _ = run(version, [b"".join(frames)], midstream=midstream)
    before = lambda evs: [
        A.strip_position(e)
        for e in evs  # noqa: E731
        if isinstance(e, (Frame, Method)) and e.offset + _wire(e, evs) <= first_bad
    ]
    assert before(events) == before(clean)
    assert split_invariant(version, data, cuts, midstream)


def _wire(e, evs):
    if isinstance(e, Frame):
        return e.wire_size
    return e.frame_size + 8  # Method


def split_invariant(version, data, cuts, midstream):
    a, _, _ = run(version, split(data, cuts), midstream=midstream)
    b, _, _ = run(version, [data], midstream=midstream)
    return [A.strip_position(e) for e in a] == [A.strip_position(e) for e in b]


@FUZZ
@given(valid_streams(), st.data())
def test_truncation_at_any_offset_of_a_valid_stream(vf, data):
    version, frames = vf
    stream = b"".join(frames)
    cut = data.draw(st.integers(0, len(stream)))
    events, end, _ = run(version, [stream[:cut]])
    assert_tiles(events, 0, cut)
    full, _, _ = run(version, [stream])
    kept = [A.strip_position(e) for e in full if isinstance(e, Frame) and e.offset + e.wire_size <= cut]
    assert [A.strip_position(e) for e in events if isinstance(e, Frame)] == kept
    boundary = max([0] + [e.offset + e.wire_size for e in events if isinstance(e, Frame)])
    tail = [(a.kind, a.offset, a.skipped) for a in events if isinstance(a, Anomaly) and a.skipped]
    assert tail == ([("truncated-stream", boundary, cut - boundary)] if cut > boundary else [])


def _handshake_stream():
    return b"".join(
        [
            A.method_frame(
                0,
                "connection.start-ok",
                client_properties={"p": "x"},
                mechanism="PLAIN",
                response=b"\0u\0p",
                locale="en_US",
            ),
            A.method_frame(0, "connection.tune-ok", channel_max=0, frame_max=4096, heartbeat=0),
            A.content(
                1,
                A.method_frame(1, "basic.publish", routing_key="r"),
                b"b" * 5000,
                {"priority": 1},
                frame_body=4088,
            ),
            A.heartbeat(),
            A.method_frame(1, "basic.ack", delivery_tag=1),
        ]
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_truncation_at_every_offset_of_a_fixed_stream(version):
    stream = _handshake_stream()
    full, _, _ = run(version, [stream])
    for cut in range(len(stream) + 1):
        events, _, _ = run(version, [stream[:cut]])
        assert_tiles(events, 0, cut)
        kept = [A.strip_position(e) for e in full if isinstance(e, Frame) and e.offset + e.wire_size <= cut]
        assert [A.strip_position(e) for e in events if isinstance(e, Frame)] == kept


@pytest.mark.parametrize("version", VERSIONS)
def test_midstream_start_at_every_offset_of_a_fixed_stream(version):
    stream = _handshake_stream()
    for start in range(0, len(stream), 7):
        events, end, _ = run(version, [stream[start:]], start=start, midstream=True)
        assert_tiles(events, start, len(stream))
        assert_events_sane(events)


@FUZZ
@given(tables(rabbit=True))
def test_random_field_tables_round_trip_under_the_broker_reading(t):
    wire, decoded = t
    assert decode_table(wire, rabbit=True) == decoded


@FUZZ
@given(tables(rabbit=False))
def test_random_field_tables_round_trip_under_the_spec_reading(t):
    wire, decoded = t
    assert decode_table(wire, rabbit=False) == decoded


@FUZZ
@given(tables(rabbit=True), st.data())
def test_random_field_tables_in_a_method_round_trip_and_survive_truncation(t, data):
    wire, decoded = t
    frame = A.method_frame(1, "queue.declare", queue="q", arguments=wire)
    events, _, _ = run("0-9-1", [frame])
    [m] = [e for e in events if isinstance(e, Method)]
    assert m.args["arguments"] == decoded
    # a table cut short inside a well-framed method: malformed-method, never an exception
    cut = data.draw(st.integers(0, len(wire) - 1))
    short = A.frame(1, 1, A.method_payload("queue.declare", queue="q")[:-4] + wire[:cut])
    events, end, _ = run("0-9-1", [short])
    assert [(a.kind, a.skipped) for a in events if isinstance(a, Anomaly)] in (
        [("malformed-method", 0)],
        [],
    )  # [] only when the cut happens to leave a valid shorter table
    assert_tiles(events, 0, end)


@FUZZ
@given(st.binary(max_size=200), st.booleans())
def test_decode_table_on_random_bytes_returns_a_dict_or_raises_decode_error(data, rabbit):
    try:
        out = decode_table(data, rabbit=rabbit)
    except DecodeError:
        return
    assert isinstance(out, dict)


@FUZZ
@given(st.sampled_from(VERSIONS), st.integers(1, 3), st.binary(min_size=12, max_size=80))
def test_random_content_headers_never_raise(version, channel, payload):
    stream = A.method_frame(channel, "basic.publish", version) + A.frame(2, channel, b"\x00\x3c" + payload)
    events, end, _ = run(version, [stream])
    assert_tiles(events, 0, end)
    assert len([e for e in events if isinstance(e, Content)]) == 1


@FUZZ
@given(valid_streams(), st.data())
def test_a_gap_anywhere_in_a_valid_stream_is_accounted_and_keeps_the_frames_before_it(vf, data):
    version, frames = vf
    stream = b"".join(frames)
    a = data.draw(st.integers(0, len(stream) - 1))
    b = data.draw(st.integers(a + 1, len(stream)))
    chunks = [stream[:a], stream[b:]] if a else [stream[b:]]
    events, end, gap_at = run(version, chunks, gaps={len(chunks) - 1: b - a})
    assert end == len(stream) and gap_at == {a: b - a}
    assert_tiles(events, 0, len(stream), gap_at)
    full, _, _ = run(version, [stream])
    kept = [A.strip_position(e) for e in full if isinstance(e, Frame) and e.offset + e.wire_size <= a]
    assert [A.strip_position(e) for e in events if isinstance(e, Frame) and e.offset < a] == kept
    # a content open at the gap is closed incomplete: none completes across it
    after_gap = len(chunks)  # packet number of the chunk after the gap
    assert not [
        c for c in events if isinstance(c, Content) and c.complete and c.offset < a and c.packet == after_gap
    ]
