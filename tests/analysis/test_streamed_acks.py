"""stats' consumer acks and unacked health from one pass over a dissect output's row groups: the
same as the pairing of the loaded tables, and the loaded way where the pass cannot decide."""

import os

import pandas as pd
import pyarrow.parquet as pq
import pytest
from tables import Capture
from test_streamed_confirms import dissected, write_output

import amqpcap
from amqpcap.analysis import stats
from amqpcap.analysis.batches import OutOfOrder
from amqpcap.analysis.streamed_acks import streamed_acks
from amqpcap.analysis.summary import latency_summary

WITH_ACKS = (
    "rabbitmq091_pika_full.pcap",
    "rabbitmq091_pika_throughput.pcap",
    "rabbitmq08_amqplib.pcap",
    "rabbitmq09_anyevent.pcap",
)


def of_loaded(t) -> tuple[dict, dict]:
    """stats' consumer_ack summary and unacked health, computed from the loaded tables."""
    s = stats(amqpcap.load(t) if isinstance(t, str) else t)
    return s["latency"]["consumer_ack"], {
        k: s["health"][k] for k in ("max_unacked", "channels_over_prefetch")
    }


def streamed(out) -> tuple[dict, dict]:
    values, counts, health = streamed_acks(out)
    return {**latency_summary(values), **counts}, health


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return dissected(tmp_path_factory, WITH_ACKS)


def test_streamed_acks_equal_the_pairing_of_the_loaded_tables_on_real_captures(outputs):
    for out in outputs:
        want = of_loaded(out)
        assert want[0]["acked"] and want[1]["max_unacked"]
        assert streamed(out) == want
        s = stats(out)
        assert (s["latency"]["consumer_ack"], {k: s["health"][k] for k in want[1]}) == want


def ack_capture() -> Capture:
    """Consumers with a tag of their own, one from consume-ok, a no-ack one, a get, a delivery to
    a tag bound on another channel, multiple / tag-0 / single acks, nack, reject, recover, a tag
    delivered twice while outstanding, a reopened channel, a prefetch exceeded."""
    c = Capture()
    c.method(0, "c2s", "basic.qos", channel=1, prefetch_count=2)
    c.method(0, "c2s", "basic.consume", channel=1, queue="q1", consumer_tag="a", no_ack=False)
    c.method(0, "c2s", "basic.consume", channel=2, queue="q2", consumer_tag="", no_ack=False)
    c.method(1, "s2c", "basic.consume-ok", channel=2, consumer_tag="b")
    c.method(1, "c2s", "basic.consume", channel=3, queue="q3", consumer_tag="n", no_ack=True)
    for i in range(1, 5):
        c.method(10 + i, "s2c", "basic.deliver", channel=1, consumer_tag="a", delivery_tag=i, body=b"a%d" % i,
                 redelivered=i == 2, done_ms=10.5 + i)  # fmt: skip
        c.method(10 + i, "s2c", "basic.deliver", channel=2, consumer_tag="b", delivery_tag=i, body=b"b%d" % i)
        c.method(10 + i, "s2c", "basic.deliver", channel=3, consumer_tag="n", delivery_tag=i, body=b"n%d" % i)
    c.method(15, "s2c", "basic.deliver", channel=4, consumer_tag="a", delivery_tag=1, body=b"x")  # a's, ch 1
    c.method(16, "s2c", "basic.deliver", channel=2, consumer_tag="b", delivery_tag=4, body=b"again")
    c.method(17, "c2s", "basic.get", channel=5, queue="q5", no_ack=False)
    c.method(18, "s2c", "basic.get-ok", channel=5, delivery_tag=1, body=b"got")
    c.method(20, "c2s", "basic.ack", channel=1, delivery_tag=2, multiple=True)
    c.method(21, "c2s", "basic.reject", channel=1, delivery_tag=3, requeue=True)
    c.method(22, "c2s", "basic.nack", channel=2, delivery_tag=0, multiple=True, requeue=False)
    c.method(23, "c2s", "basic.recover", channel=4)
    c.method(24, "c2s", "basic.ack", channel=5, delivery_tag=1)
    c.method(25, "c2s", "channel.open", channel=1)  # delivery 4 of channel 1: unsettled
    c.method(26, "c2s", "basic.ack", channel=1, delivery_tag=4)  # a new scope: settles nothing
    return c


def test_streamed_acks_follow_the_settlement_and_consumer_rules(tmp_path):
    c = ack_capture()
    want = of_loaded(c.tables())
    assert want[0]["acked"] == 3 and want[0]["nacked"] == 4 and want[0]["rejected"] == 1
    assert want[0]["recovered"] == 1 and want[0]["unsettled"] == 1 and want[0]["redelivered"] == 1
    assert want[1] == {"max_unacked": 4, "channels_over_prefetch": 1}
    assert streamed(write_output(c, tmp_path)) == want


def test_a_0_10_capture_is_left_to_the_loaded_pairing(tmp_path):
    c = Capture(version="0-10")
    c.method(0, "c2s", "message.subscribe", channel=1, queue="q", consumer_tag="d", accept_mode=0)
    c.method(1, "s2c", "message.transfer", channel=1, consumer_tag="d", command_id=0, body=b"m")
    out = write_output(c, tmp_path)
    with pytest.raises(OutOfOrder):
        streamed_acks(out)
    assert stats(out)["latency"]["consumer_ack"] == of_loaded(c.tables())[0]


def test_an_output_without_a_column_it_reads_streams_with_that_column_null(tmp_path):
    c = ack_capture()
    out = write_output(c, tmp_path)
    path = os.path.join(out, "methods", "part-00000.parquet")
    pq.write_table(pq.read_table(path).drop_columns(["qos_global", "no_wait"]), path)
    assert streamed(out) == of_loaded(c.tables())


def random_consumer_traffic(seed: int, rows: int = 500) -> Capture:
    """Consumers (own tags, server tags, no-ack, no-wait), gets, deliveries (tags repeated while
    outstanding, redelivered), acks single / multiple / tag 0, nacks, rejects, recovers, qos and
    channel reopenings on three channels of two connections, in random order."""
    import random

    rnd = random.Random(seed)
    c = Capture()
    delivered: dict = {}
    for i in range(rows):
        stream, channel = rnd.randrange(2), rnd.randrange(1, 4)
        key = dict(channel=channel, stream=stream)
        top = delivered.get((stream, channel), 0)
        r = rnd.random()
        if r < 0.03:
            c.method(i, "c2s", "channel.open", **key)
        elif r < 0.08:
            c.method(i, "c2s", "basic.consume", queue="q", consumer_tag=rnd.choice(("", "a", "b", "c")),
                     no_ack=rnd.random() < 0.3, no_wait=rnd.random() < 0.2, **key)  # fmt: skip
        elif r < 0.11:
            c.method(i, "s2c", "basic.consume-ok", consumer_tag=rnd.choice(("a", "b", "s")), **key)
        elif r < 0.13:
            c.method(i, "c2s", "basic.get", queue="q", no_ack=rnd.random() < 0.3, **key)
        elif r < 0.15:
            c.method(i, "c2s", "basic.qos", prefetch_count=rnd.choice((0, 2, 5)), **key)
        elif r < 0.6:
            name = rnd.choice(("basic.deliver",) * 6 + ("basic.get-ok",))
            tag = rnd.choice((top + 1, top + 1, top + 1, max(top - 1, 1)))
            delivered[(stream, channel)] = max(top, tag)
            ctag = rnd.choice(("a", "b", "s", None)) if name == "basic.deliver" else None
            c.method(i, "s2c", name, consumer_tag=ctag, delivery_tag=tag, body=b"%d" % i,
                     redelivered=rnd.random() < 0.2, **key)  # fmt: skip
        else:
            name = rnd.choice(("basic.ack",) * 4 + ("basic.nack", "basic.reject", "basic.recover"))
            tag = rnd.choice((0, rnd.randrange(0, top + 2), top))
            c.method(i, rnd.choice(("c2s",) * 6 + ("s2c",)), name, delivery_tag=tag,
                     multiple=rnd.random() < 0.5, **key)  # fmt: skip
    return c


@pytest.mark.parametrize("seed", range(6))
def test_streamed_acks_equal_the_loaded_pairing_on_random_traffic_in_batches_of_a_few_rows(
    tmp_path, monkeypatch, seed
):
    from amqpcap.analysis import streamed_acks as module

    monkeypatch.setattr(module, "ROWS", 7)
    c = random_consumer_traffic(seed)
    want = of_loaded(c.tables())
    assert want[0]["acked"] and want[0]["nacked"] and want[0]["unsettled"] and want[0]["redelivered"]
    assert streamed(write_output(c, tmp_path)) == want


TIMELINE = ["capture", "tcp_stream", "channel", "ts", "event", "unacked", "prefetch_count"]


@pytest.mark.parametrize("seed", range(3))
def test_the_unacked_counts_of_the_pass_equal_unacked_of_the_loaded_tables_channel_by_channel(
    tmp_path, monkeypatch, seed
):
    from amqpcap.analysis import streamed_acks as module
    from amqpcap.analysis.connection_health import unacked

    monkeypatch.setattr(module, "ROWS", 7)
    c = random_consumer_traffic(seed)
    got: list = []
    streamed_acks(write_output(c, tmp_path), on_timeline=got.append)
    want = unacked(c.tables())[TIMELINE]
    assert want.groupby(["tcp_stream", "channel"]).ngroups >= 5 and (want["event"] == "qos").any()
    keys = ["capture", "tcp_stream", "channel"]
    # (each channel's events in the same order; channels may come in another order)
    got = got[0].frame().astype({"capture": object, "event": object})
    got = got.sort_values(keys, kind="stable").reset_index(drop=True)
    want = want.sort_values(keys, kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want.astype({"capture": object, "event": object}), check_dtype=False)


def test_the_report_of_a_directory_draws_unacked_from_the_pass_without_loading_the_deliveries(
    tmp_path, monkeypatch
):
    from amqpcap.analysis import report, summary

    out = write_output(random_consumer_traffic(1), tmp_path / "out")
    loads: list = []  # the methods each load reads
    load_section = summary.load_section

    def counted(directory, columns, names=None, *rest):
        if "methods" in columns:
            loads.append((names or {}).get("methods", ("every method",)))
        return load_section(directory, columns, names, *rest)

    monkeypatch.setattr(summary, "load_section", counted)
    drawn = tmp_path / "drawn"  # (by the report's forked process: what it was handed, noted in a file)
    fig = report.fig_unacked

    def noted(un, *a, **k):
        with open(drawn, "a", encoding="utf-8") as f:
            f.write(f"{type(un).__name__} {un.frame()['unacked'].max()}\n")
        return fig(un, *a, **k)

    monkeypatch.setattr(report, "fig_unacked", noted)
    report.write_report(out, tmp_path / "report")
    assert loads and not [m for m in loads if "basic.deliver" in m or "every method" in m]
    ((kind, peak),) = [line.split() for line in drawn.read_text().splitlines()]
    assert kind == "Timeline" and int(peak) > 0


@pytest.mark.parametrize("top", [3, 8], ids=["total-line", "per-channel-lines"])
def test_the_unacked_figure_of_the_pass_timeline_is_the_figure_of_its_frame(tmp_path, monkeypatch, top):
    from amqpcap.analysis import report
    from amqpcap.analysis import streamed_acks as module

    monkeypatch.setattr(module, "ROWS", 7)
    c = random_consumer_traffic(1)
    got: list = []
    streamed_acks(write_output(c, tmp_path / "out"), on_timeline=got.append)
    un = got[0].frame()
    channels = un.groupby(["tcp_stream", "channel"]).ngroups
    assert 3 < channels <= 8
    t0 = un["ts"].min()
    report.fig_unacked(un, tmp_path / "frame.png", t0, top=top)
    report.fig_unacked(got[0], tmp_path / "timeline.png", t0, top=top)
    assert (tmp_path / "frame.png").read_bytes() == (tmp_path / "timeline.png").read_bytes()
