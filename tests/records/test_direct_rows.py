"""Direct rows (amqp/rowsink.pxi): the compiled decoder has the methods and messages rows of what
it decodes on its common path written at once (``fastrows.RowSink``), making no Method or
Content event for them.  The tables must be the ones the events give, row for row and in the
same order, whatever mix of direct and evented methods and contents the packets carry.

The tables are compared as Arrow tables (value, type and null alike).
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest
from fixtures import amqp09 as A
from fixtures.compiled import CAPTURES, FUZZ, built_or_skip
from hypothesis import given
from hypothesis import strategies as st

from amqpcap.amqp import codec_0_9
from amqpcap.amqp.decoder import ConnectionDecoder, Decoder09
from amqpcap.amqp.events import Anomaly, Content, Method
from amqpcap.records import rows
from amqpcap.records.schema import SCHEMAS


@pytest.fixture(scope="module")
def compiled():
    """(fast09, fastrows, fastwriter): the decoder, the row builder and the table buffer."""
    return built_or_skip("fast09"), built_or_skip("fastrows"), built_or_skip("fastwriter")


def decode(compiled, packets, direct: bool):
    """``packets`` ((direction, bytes), ...) through a ConnectionDecoder as the pipeline runs it:
    each packet's events drained into compiled table buffers after it.  (methods table,
    messages table, the events drained)."""
    _, fastrows, fastwriter = compiled
    methods = fastwriter.Columns(SCHEMAS["methods"], 10_000)
    messages = fastwriter.Columns(SCHEMAS["messages"], 10_000)
    sink = rows.row_sink("cap", 3, methods, messages) if direct else None
    assert (sink is not None) == direct
    dec = ConnectionDecoder(frame_events=False, row_sink=sink)
    offsets, drained = [0, 0], []
    for number, (d, data) in enumerate(packets, start=1):
        dec.data(d, offsets[d], data, number, 1000 * number)
        offsets[d] += len(data)
        events = dec.pop_events()
        drained += events
        fastrows.append_rows(events, "cap", 3, dec.version, methods, messages)
    dec.finish(len(packets) + 1, 1000 * (len(packets) + 1))
    events = dec.pop_events()
    drained += events
    fastrows.append_rows(events, "cap", 3, dec.version, methods, messages)
    return pa.Table.from_batches([methods.take()]), pa.Table.from_batches([messages.take()]), drained


def kinds(events, cls) -> int:
    return sum(type(e) is cls for _, e in events)


# -- traffic: client publishes, acks and declares; the server delivers ---------------------------

START = A.method_frame(0, "connection.start", version_major=0, version_minor=9)
HEAD = [(0, A.protocol_header()), (1, START)]


def publish(channel: int, body: bytes, props: dict, frame_body: int) -> bytes:
    method = A.method_frame(channel, "basic.publish", exchange="ex", routing_key=f"rk.{len(body)}")
    return A.content(channel, method, body, props, frame_body=frame_body)


def deliver(channel: int, tag: int, body: bytes, props: dict, frame_body: int) -> bytes:
    method = A.method_frame(
        channel, "basic.deliver", consumer_tag="ctag", delivery_tag=tag, redelivered=tag % 2 == 0,
        exchange="ex", routing_key="rk",
    )  # fmt: skip
    return A.content(channel, method, body, props, frame_body=frame_body)


def interrupted(channel: int) -> bytes:
    """A publish whose content stops after its header: the next method interrupts it."""
    method = A.method_frame(channel, "basic.publish", exchange="ex", routing_key="cut")
    return method + A.header_frame(channel, 60, 10, {"content-type": "text/plain"})


def declare(channel: int) -> bytes:
    """A method the decoder makes an event of (a table argument)."""
    return A.method_frame(channel, "queue.declare", queue="q", arguments={"x-max-length": 10})


def interleaved(body1: bytes, body2: bytes) -> bytes:
    """Channel 1's content around channel 2's: its method and header, then a declare and a whole
    content on channel 2, then its body (a content that ends while others' events wait)."""
    one = A.method_frame(1, "basic.publish", exchange="ex", routing_key="one")
    one += A.header_frame(1, 60, len(body1), {})
    two = declare(2) + publish(2, body2, {"content-type": "a/b"}, 1000)
    return one + two + (A.body_frame(1, body1) if body1 else b"")


PROPS = st.sampled_from([{}, {"content-type": "text/plain"}, {"delivery-mode": 2, "headers": {"a": 1}}])
CLIENT = st.one_of(
    st.tuples(st.just("publish"), st.integers(1, 2), st.binary(max_size=300), PROPS, st.integers(1, 200)),
    st.tuples(st.just("ack"), st.integers(1, 2), st.integers(0, 2**64 - 1)),
    st.tuples(st.just("declare"), st.integers(1, 2)),
    st.tuples(st.just("interrupted"), st.integers(1, 2)),
    st.tuples(st.just("interleaved"), st.just(0), st.binary(max_size=50), st.binary(max_size=50)),
)
SERVER = st.tuples(
    st.integers(1, 2), st.integers(1, 2**64 - 1), st.binary(max_size=300), PROPS, st.integers(1, 200)
)


def client_bytes(item) -> bytes:
    kind, channel = item[0], item[1]
    if kind == "publish":
        return publish(channel, item[2], item[3], item[4])
    if kind == "ack":
        return A.method_frame(channel, "basic.ack", delivery_tag=item[2], multiple=False)
    if kind == "interleaved":
        return interleaved(item[2], item[3])
    return declare(channel) if kind == "declare" else interrupted(channel)


def cut(data: bytes, at: list[int]) -> list[bytes]:
    points = sorted({a % (len(data) + 1) for a in at} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:]) if b > a]


@FUZZ
@given(
    st.lists(CLIENT, max_size=12),
    st.lists(SERVER, max_size=8),
    st.lists(st.integers(0, 10_000), max_size=12),
    st.lists(st.integers(0, 10_000), max_size=12),
    st.randoms(use_true_random=False),
)
@pytest.mark.compiled("fast09", "fastrows", "fastwriter")
def test_direct_rows_are_the_event_rows_in_the_same_order(compiled, client, server, cuts0, cuts1, rnd):
    up = b"".join(client_bytes(i) for i in client)
    down = b"".join(deliver(*s) for s in server)
    # each direction cut into packets anywhere (frames split, several in one), interleaved
    ups, downs = [(0, p) for p in cut(up, cuts0)], [(1, p) for p in cut(down, cuts1)]
    merged = []
    while ups or downs:
        side = ups if ups and (not downs or rnd.random() < 0.5) else downs
        merged.append(side.pop(0))
    packets = HEAD + merged
    m_direct, c_direct, _ = decode(compiled, packets, direct=True)
    m_events, c_events, _ = decode(compiled, packets, direct=False)
    assert m_direct.equals(m_events)
    assert c_direct.equals(c_events)


@pytest.mark.compiled("fast09", "fastrows", "fastwriter")
def test_common_methods_and_contents_make_no_events(compiled):
    """The point of it: a publish, its content and an ack give rows and no events, in either
    direction; a method with a table argument (queue.declare) stays an event, as does what
    follows it in the same packet."""
    body = b"x" * 100
    packets = HEAD + [
        (0, publish(1, body, {"content-type": "text/plain"}, 40)),
        (1, deliver(1, 7, body, {}, 1000)),
        (0, A.method_frame(1, "basic.ack", delivery_tag=7, multiple=False)),
        (0, declare(1) + publish(1, body, {}, 1000)),
    ]
    methods, messages, events = decode(compiled, packets, direct=True)
    assert methods.column("method").to_pylist() == [
        "connection.start", "basic.publish", "basic.deliver", "basic.ack", "queue.declare", "basic.publish",
    ]  # fmt: skip
    assert messages.column("method").to_pylist() == ["basic.publish", "basic.deliver", "basic.publish"]
    # connection.start (the protocol header waits in the list), then queue.declare and the
    # publish behind it: events; the first publish, the delivery and the ack: none
    evented = [e.name for _, e in events if type(e) is Method]
    assert evented == ["connection.start", "queue.declare", "basic.publish"]
    assert kinds(events, Content) == 1
    m_events, c_events, _ = decode(compiled, packets, direct=False)
    assert methods.equals(m_events) and messages.equals(c_events)


@pytest.mark.compiled("fast09", "fastrows", "fastwriter")
def test_an_interrupted_content_names_its_direct_method(compiled):
    """A content whose method's row was written directly, interrupted by the next method: the
    anomaly and the content's row name the method as its event would have (it is made from
    the pending content's fields when asked for)."""
    ack = A.method_frame(1, "basic.ack", delivery_tag=1, multiple=False)
    packets = HEAD + [(0, interrupted(1)), (0, ack)]
    methods, messages, events = decode(compiled, packets, direct=True)
    anomalies = [e for _, e in events if type(e) is Anomaly]
    assert [a.detail for a in anomalies if "interrupted" in a.detail] == [
        "basic.publish content interrupted by basic.ack"
    ]
    content = [e for _, e in events if type(e) is Content]
    assert len(content) == 1 and content[0].method.name == "basic.publish"
    assert content[0].method.args["routing-key"] == "cut" and not content[0].complete
    m_events, c_events, events_ref = decode(compiled, packets, direct=False)
    ref = [e for _, e in events_ref if type(e) is Content][0]
    assert content[0].method == ref.method
    assert methods.equals(m_events) and messages.equals(c_events)


@pytest.mark.compiled("fast09", "fastrows", "fastwriter")
def test_no_row_sink_without_compiled_table_buffers(compiled):
    _, fastrows, fastwriter = compiled
    buf = fastwriter.Columns(SCHEMAS["methods"], 10)
    assert rows.row_sink("cap", 0, [], buf) is None  # a list of tuples: the reference's table
    with pytest.raises(ValueError):
        fastrows.RowSink("cap", 0, [], buf)


def test_the_reference_row_builder_takes_events_only():
    buf = built_or_skip("fastwriter").Columns(SCHEMAS["methods"], 10)
    assert (rows.row_sink("cap", 0, buf, buf) is None) is not rows.compiled_in_use()


@pytest.mark.compiled("fast09", "fastrows", "fastwriter")
@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.rsplit("/", 1)[-1])
def test_dissect_writes_the_same_tables_with_direct_rows(compiled, capture, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from amqpcap.pipeline import dissect

    dissect([capture], str(tmp_path / "direct"))
    monkeypatch.setattr(rows, "row_sink", lambda *a: None)
    dissect([capture], str(tmp_path / "events"))
    for t in ("connections", "methods", "messages", "anomalies"):
        assert pq.read_table(tmp_path / "direct" / t).equals(pq.read_table(tmp_path / "events" / t)), t


def test_the_reference_codec_takes_no_direct_output_and_makes_every_event():
    """Direct rows and deferred digests are the compiled walker's alone: handed to the
    reference codec they change nothing (it has no such hook) and every method and content is
    an event with a text digest."""
    dec = codec_0_9.Decoder09Py("0-9-1")
    codec_0_9.direct_output(dec, object(), True)
    assert not hasattr(dec, "row_sink") and not hasattr(dec, "deferred_digests")
    body = bytes(range(256)) * 40
    publish = A.method_frame(1, "basic.publish", exchange="x", routing_key="k")
    data = A.method_frame(1, "channel.open") + A.content(1, publish, body, {"delivery-mode": 2})
    dec.feed(0, data, 0, 1, 1000)
    events = [e for _, e in dec.pop_events()]
    assert [e.name for e in events if type(e) is Method] == ["channel.open", "basic.publish"]
    (content,) = [e for e in events if type(e) is Content]
    assert content.body_hash == hashlib.sha256(body).hexdigest()


@pytest.mark.compiled("fast09", "fastrows", "fastwriter")
def test_the_compiled_codec_takes_the_direct_output_it_is_handed(compiled):
    dec = Decoder09("0-9-1")
    assert dec.row_sink is None and dec.deferred_digests is False  # events until told otherwise
    sink = object()
    codec_0_9.direct_output(dec, sink, True)
    assert dec.row_sink is sink and dec.deferred_digests is True
