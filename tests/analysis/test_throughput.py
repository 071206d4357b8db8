"""Throughput buckets: exact counts, with and without the frames table."""

from tables import Capture, rows

from amqpcap.analysis import throughput
from amqpcap.analysis.traffic import message_queues, totals


def _capture():
    c = Capture()
    c.method(0, "c2s", "basic.consume", channel=1, queue="q1", consumer_tag="")  # 1
    c.method(1, "s2c", "basic.consume-ok", channel=1, consumer_tag="amq.ctag-1")  # 2
    c.method(
        100, "c2s", "basic.publish", channel=2, exchange="", routing_key="q1", body=b"hello", frame_size=30
    )  # 3
    c.method(
        600, "c2s", "basic.publish", channel=2, exchange="ex", routing_key="k", body=b"x" * 20, frame_size=30
    )  # 4
    c.method(
        1500,
        "s2c",
        "basic.deliver",
        channel=1,
        exchange="",
        routing_key="q1",
        consumer_tag="amq.ctag-1",
        delivery_tag=1,
        body=b"hello",
        frame_size=40,
    )  # 5
    return c


def test_estimated_frames_by_connection_and_direction():
    t = _capture().tables()
    df = throughput(t, bucket="1s", by="connection")
    assert df.attrs["frames_source"] == "estimate"
    # c2s second 0: consume (20+8) + 2 publishes (30+8 each + header 8 + body 8+size)
    assert rows(df, ["tcp_stream", "direction", "messages", "body_bytes", "frames", "wire_bytes"]) == [
        (0, "c2s", 2, 25, 7, 28 + 2 * 38 + 2 * 16 + 25),
        (0, "s2c", 0, 0, 1, 28),
        (0, "s2c", 1, 5, 3, 48 + 16 + 5),
    ]
    assert [str(b.time()) for b in df["bucket"]] == ["12:00:00", "12:00:00", "12:00:01"]


def test_queue_from_consumer_tag_and_default_exchange():
    t = _capture().tables()
    q = message_queues(t)
    assert q["queue"].tolist()[0] == "q1" and q["queue"].isna().tolist() == [False, True, False]
    df = throughput(t, bucket="1s", by="queue")
    got = rows(df[df["queue"].notna()], ["queue", "direction", "messages", "body_bytes", "frames"])
    assert got == [("q1", "c2s", 1, 5, 3), ("q1", "s2c", 1, 5, 3)]
    df = throughput(t, bucket="500ms", by="exchange")
    assert rows(df[df["messages"] > 0], ["exchange", "messages", "body_bytes"]) == [
        ("", 1, 5),
        ("ex", 1, 20),
        ("", 1, 5),
    ]


def test_frames_table_is_used_when_present():
    c = _capture()
    c.frame_row(1200, "s2c", "heartbeat", channel=0, wire_size=8)
    c.frame_row(1300, "c2s", "heartbeat", channel=0, wire_size=8)
    t = c.tables()
    df = throughput(t, bucket="1s", by="channel")
    assert df.attrs["frames_source"] == "frames"
    # only the two heartbeat frames are in the frames table here: the methods' frames are not
    assert rows(df, ["channel", "direction", "messages", "frames", "wire_bytes"]) == [
        (2, "c2s", 2, 0, 0),
        (0, "c2s", 0, 1, 8),
        (0, "s2c", 0, 1, 8),
        (1, "s2c", 1, 0, 0),
    ]
    tot = totals(t, bucket="1s")
    assert tot["frames"].tolist() == [0, 2]
    assert tot["wire_bytes"].tolist() == [0, 16]
    assert tot["messages"].tolist() == [2, 1]
    assert tot["messages_c2s"].tolist() == [2, 0]


def test_frames_attributed_to_their_message_by_stream_offset():
    c = Capture()
    c.method(0, "c2s", "basic.consume", channel=1, queue="q1", consumer_tag="t")
    c.method(1, "s2c", "basic.consume-ok", channel=1, consumer_tag="t")
    c.frame_row(1, "s2c", "method", channel=1, wire_size=28)  # consume-ok's frame: no queue
    m = c.method(1500, "s2c", "basic.deliver", channel=1, consumer_tag="t", delivery_tag=1, body=b"hello")
    # the deliver's three frames, at and after its stream offset
    c.rows["frames"].append(
        dict(
            capture="t.pcap",
            tcp_stream=0,
            frame_number=m["frame_number"],
            ts=m["ts"],
            direction="s2c",
            channel=1,
            stream_offset=m["stream_offset"],
            frame_type=1,
            type_name="method",
            size=40,
            wire_size=48,
        )
    )
    c.frame_row(1500, "s2c", "header", channel=1, size=14, wire_size=22)
    c.frame_row(1500, "s2c", "body", channel=1, size=5, wire_size=13)
    df = throughput(c.tables(), bucket="1s", by="queue")
    assert rows(df, ["queue", "direction", "messages", "body_bytes", "frames", "wire_bytes"]) == [
        (None, "s2c", 0, 0, 1, 28),
        ("q1", "s2c", 1, 5, 3, 48 + 22 + 13),
    ]


def test_totals_memory_follows_the_traffic_not_the_time_span():
    """Two bursts 10 minutes apart: the non-empty buckets and one zero bucket at each edge of the
    pause (a plot drops to zero), not 600 rows; the mean still counts every bucket of the span."""
    from amqpcap.analysis import stats

    c = Capture()
    c.method(100, "c2s", "basic.publish", channel=1, exchange="", routing_key="q", body=b"a")
    c.method(1100, "c2s", "basic.publish", channel=1, exchange="", routing_key="q", body=b"b")
    c.method(600_100, "c2s", "basic.publish", channel=1, exchange="", routing_key="q", body=b"c")
    t = c.tables()
    tot = totals(t, bucket="1s")
    assert [(b - tot["bucket"][0]).total_seconds() for b in tot["bucket"]] == [0, 1, 2, 599, 600]
    assert tot["messages"].tolist() == [1, 1, 0, 0, 1]
    assert tot.attrs["buckets"] == 601
    tp = stats(t)["throughput"]
    assert (tp["buckets"], tp["messages"]) == (601, 3)
    assert tp["msgs_per_s"] == {"mean": round(3 / 601, 3), "peak": 1.0}


def test_captures_recorded_years_apart_count_only_their_own_spans():
    import pandas as pd

    from amqpcap.analysis import from_frames, stats

    parts = []
    for name, shift in (("a.pcap", pd.Timedelta(0)), ("b.pcap", pd.Timedelta(days=3 * 365))):
        c = Capture(name)
        c.method(0, "c2s", "basic.publish", channel=1, exchange="", routing_key="q", body=b"x")
        c.method(2500, "c2s", "basic.publish", channel=1, exchange="", routing_key="q", body=b"y")
        t = c.tables()
        parts.append(
            (t.methods.assign(ts=t.methods["ts"] + shift), t.messages.assign(ts=t.messages["ts"] + shift))
        )
    t = from_frames(methods=pd.concat([m for m, _ in parts]), messages=pd.concat([m for _, m in parts]))
    tot = totals(t, bucket="1s")
    # per capture: buckets 0 and 2, a zero at 1; the 3 years between: one zero row at each edge
    assert tot["messages"].tolist() == [1, 0, 1, 0, 0, 1, 0, 1]
    assert tot.attrs["buckets"] == 6  # 3 per capture, not 3 years of seconds
    assert stats(t)["throughput"]["msgs_per_s"]["mean"] == round(4 / 6, 3)


def _pixels_of(png, hex_color) -> int:
    """Pixels nearer ``hex_color`` than the other direction's colour, white and grey (antialiased
    edges count for the colour they lean to)."""
    import matplotlib.image as mpimg
    import numpy as np

    from amqpcap.analysis.report import C2S, S2C

    img = mpimg.imread(png)[..., :3]
    palette = [C2S, S2C, "#ffffff", "#000000", "#808080", "#b0b0b0", "#e6e6e6"]
    rgb = np.array([[int(h[i : i + 2], 16) / 255 for i in (1, 3, 5)] for h in palette])
    nearest = np.abs(img[..., None, :] - rgb).sum(axis=-1).argmin(axis=-1)
    return int((nearest == palette.index(hex_color)).sum())


def test_report_draws_equal_client_and_server_throughput_as_two_visible_lines(tmp_path):
    """A broker that forwards every publish: both directions at the same rates. Each direction's
    line must still show (not only in the legend)."""
    from tables import T0

    from amqpcap.analysis.report import C2S, S2C, fig_throughput

    c = Capture()
    for i in range(40):
        ms = 50 * i + (i % 7) * 10
        c.method(ms, "c2s", "basic.publish", exchange="x", routing_key="k", body=b"b" * (100 + 10 * i))
        c.method(ms, "s2c", "basic.deliver", consumer_tag="c", delivery_tag=i + 1, body=b"b" * (100 + 10 * i))
    t = c.tables()
    tot = totals(t, bucket="100ms")
    assert (tot["messages_c2s"] == tot["messages_s2c"]).all()  # the lines coincide exactly
    png = fig_throughput(t, tmp_path / "throughput.png", "100ms", T0)
    blue, red = _pixels_of(png, C2S), _pixels_of(png, S2C)
    assert red > 500 and blue > 500, (blue, red)  # a legend entry is ~100 pixels


def test_stats_text_says_what_frames_were_counted_from_in_words():
    from amqpcap.analysis import render_text, stats

    estimated = render_text(stats(_capture().tables()))
    c = _capture()
    c.frame_row(5, "c2s", "method", size=40)
    counted = render_text(stats(c.tables(frames=True)))
    for text in (estimated, counted):
        assert "frames from" not in text and "None" not in text.split("Throughput")[1].splitlines()[0]
    assert "frames and wire bytes estimated from methods and messages" in estimated
    assert "frames and wire bytes counted in the frames table" in counted
