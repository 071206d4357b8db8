"""stats' publisher confirms from one pass over a dissect output's row groups: the same summary as
the pairing of the loaded tables, and the loaded way when a table is not in wire order."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tables import Capture

import amqpcap
from amqpcap.analysis import confirms, stats
from amqpcap.analysis.batches import OutOfOrder, WireOrder
from amqpcap.analysis.streamed_confirms import streamed_confirms
from amqpcap.analysis.summary import latency_summary
from amqpcap.analysis.tables import dissect_cached
from amqpcap.records.schema import SCHEMAS

HERE = os.path.dirname(__file__)
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "..", "captures"))
WITH_CONFIRMS = (
    "rabbitmq091_pika_full.pcap",
    "rabbitmq091_pika_throughput.pcap",
    "rabbitmq091_pyamqp_basic.pcap",
)


def summary_of_frame(t) -> dict:
    """The confirm summary of stats, made from the whole confirms() frame."""
    c = confirms(t)
    out = latency_summary(c.loc[c["outcome"].isin(["ack", "nack"]), "latency_ms"])
    out.update({k: int((c["outcome"] == v).sum()) for k, v in
                (("acked", "ack"), ("nacked", "nack"), ("unconfirmed", "unconfirmed"))})  # fmt: skip
    return out


def streamed_summary(out) -> dict:
    values, counts = streamed_confirms(out)
    return {**latency_summary(values), **counts}


def write_output(c: Capture, path, shuffle_methods: bool = False) -> str:
    """The rows of ``c`` as a dissect output directory (one Parquet file a table, small row groups
    so that a pass reads several)."""
    for name in ("connections", "methods", "messages", "anomalies"):
        rows = list(c.rows[name])
        if shuffle_methods and name == "methods":
            rows = rows[::-1]
        table = pa.Table.from_pylist(
            [{k: (v.value if hasattr(v, "value") else v) for k, v in r.items()} for r in rows],
            schema=SCHEMAS[name],
        )
        os.makedirs(path / name)
        pq.write_table(table, path / name / "part-00000.parquet", row_group_size=3)
    return str(path)


def confirm_capture() -> Capture:
    """Two connections, channels in confirm mode and not, multiple / single / tag-0 acks, a nack,
    a reopened channel, a content completed packets after its method, an unconfirmed publish."""
    c = Capture()
    for stream in (0, 1):
        c.method(0, "c2s", "basic.publish", channel=1, stream=stream, body=b"before")  # not counted
        c.method(1, "c2s", "confirm.select", channel=1, stream=stream)
        c.method(1, "c2s", "confirm.select", channel=2, stream=stream)
    for i in range(6):
        c.method(10 + i, "c2s", "basic.publish", channel=1, body=b"a%d" % i, done_ms=10.5 + i)
        c.method(10 + i, "c2s", "basic.publish", channel=2, stream=1, body=b"b%d" % i)
        c.method(10 + i, "c2s", "basic.publish", channel=3, body=b"c%d" % i)  # no confirm mode
    c.method(20, "s2c", "basic.ack", channel=1, delivery_tag=3, multiple=True)
    c.method(21, "s2c", "basic.nack", channel=1, delivery_tag=5, multiple=False)
    c.method(22, "s2c", "basic.ack", channel=2, stream=1, delivery_tag=0, multiple=True)
    c.method(23, "c2s", "channel.open", channel=1)  # publish 4 and 6 of channel 1: unconfirmed
    c.method(24, "c2s", "basic.publish", channel=1, body=b"after")  # a new scope, not in confirm mode
    c.method(25, "s2c", "basic.ack", channel=1, delivery_tag=1, multiple=False)  # nothing to settle
    return c


def dissected(tmp_path_factory, names) -> list[str]:
    """The dissect outputs of the shipped captures ``names``."""
    cache = tmp_path_factory.mktemp("cache")
    return [str(dissect_cached(os.path.join(CAPTURES, n), cache_dir=cache)) for n in names]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return dissected(tmp_path_factory, WITH_CONFIRMS)


def test_streamed_confirms_equal_the_pairing_of_the_loaded_tables_on_real_captures(outputs):
    for out in outputs:
        want = summary_of_frame(amqpcap.load(out))
        assert streamed_summary(out) == want
        assert stats(out)["latency"]["confirm"] == want
    assert any(summary_of_frame(amqpcap.load(out))["acked"] for out in outputs)


def test_streamed_confirms_follow_the_settlement_rules(tmp_path):
    c = confirm_capture()
    want = summary_of_frame(c.tables())
    assert want["acked"] == 9 and want["nacked"] == 1 and want["unconfirmed"] == 2
    assert streamed_summary(write_output(c, tmp_path)) == want


def test_a_publish_is_timed_at_the_packet_completing_its_content(tmp_path):
    c = Capture()
    c.method(0, "c2s", "confirm.select", channel=1)
    c.method(10, "c2s", "basic.publish", channel=1, body=b"x", done_ms=12)
    c.method(15, "s2c", "basic.ack", channel=1, delivery_tag=1)
    values, counts = streamed_confirms(write_output(c, tmp_path))
    assert list(values) == [3.0] and counts == {"acked": 1, "nacked": 0, "unconfirmed": 0}


def test_methods_out_of_wire_order_are_refused_and_stats_pairs_the_loaded_tables(tmp_path):
    c = confirm_capture()
    out = write_output(c, tmp_path, shuffle_methods=True)
    with pytest.raises(OutOfOrder):
        streamed_confirms(out)
    assert stats(out)["latency"]["confirm"] == summary_of_frame(c.tables())


def test_wire_order_holds_across_batches_per_conversation():
    w = WireOrder()
    cap, st = np.array([0, 0, 0]), np.array([0, 1, 0])
    w.check(cap, st, np.array([1, 2, 3]), np.array([8, 8, 30]))
    w.check(cap[:2], st[:2], np.array([3, 2]), np.array([40, 9]))  # later rows of both streams
    with pytest.raises(OutOfOrder):
        w.check(cap[:1], st[:1], np.array([2]), np.array([50]))  # stream 0 went back to packet 2
    with pytest.raises(OutOfOrder):
        WireOrder().check(cap, np.zeros(3, dtype=int), np.array([1, 1, 1]), np.array([8, 30, 20]))


@pytest.mark.parametrize("seed", range(6))
def test_streamed_confirms_equal_the_loaded_pairing_on_random_traffic_in_batches_of_a_few_rows(
    tmp_path, monkeypatch, seed
):
    import random

    from amqpcap.analysis import batches

    monkeypatch.setattr(batches, "PASS_ROWS", 5)
    rnd = random.Random(seed)
    c = Capture()
    published: dict = {}
    for i in range(400):
        stream, channel = rnd.randrange(2), rnd.randrange(1, 4)
        key = (stream, channel)
        r = rnd.random()
        if r < 0.05:
            c.method(i, rnd.choice(("c2s", "s2c")), "channel.open", channel=channel, stream=stream)
            published[key] = 0
        elif r < 0.12:
            c.method(i, rnd.choice(("c2s", "c2s", "s2c")), "confirm.select", channel=channel, stream=stream)
        elif r < 0.6:
            c.method(i, rnd.choice(("c2s",) * 5 + ("s2c",)), "basic.publish", channel=channel, stream=stream,
                     body=b"%d" % i)  # fmt: skip
            published[key] = published.get(key, 0) + 1
        else:
            top = published.get(key, 0) + 2
            tag = rnd.choice((0, rnd.randrange(0, top + 1), top // 2))
            name = rnd.choice(("basic.ack", "basic.ack", "basic.nack"))
            c.method(i, rnd.choice(("s2c",) * 5 + ("c2s",)), name, channel=channel, stream=stream,
                     delivery_tag=tag, multiple=rnd.random() < 0.5)  # fmt: skip
    want = summary_of_frame(c.tables())
    assert want["acked"] and want["unconfirmed"]
    assert streamed_summary(write_output(c, tmp_path)) == want
