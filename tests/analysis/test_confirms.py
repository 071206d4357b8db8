"""Publisher confirms: the n-th publish after confirm.select -> the ack / nack covering n."""

import math

from tables import Capture, rows

from amqpcap.analysis import confirms

COLS = [
    "channel",
    "delivery_tag",
    "request_frame",
    "response_method",
    "response_frame",
    "outcome",
    "multiple",
]


def test_multiple_single_nack_and_unconfirmed():
    c = Capture()
    c.method(
        0, "c2s", "basic.publish", channel=1, exchange="x", routing_key="k", body=b"before"
    )  # 1: not counted
    c.method(1, "c2s", "confirm.select", channel=1)  # 2
    c.method(2, "s2c", "confirm.select-ok", channel=1)  # 3
    for i in range(5):  # frames 4..8 = publishes 1..5, t=10..14
        c.method(10 + i, "c2s", "basic.publish", channel=1, exchange="x", routing_key="k", body=b"m%d" % i)
    c.method(20, "s2c", "basic.ack", channel=1, delivery_tag=3, multiple=True)  # 9: settles 1,2,3
    c.method(21, "s2c", "basic.nack", channel=1, delivery_tag=5, multiple=False)  # 10: settles 5
    t = c.tables()
    df = confirms(t)
    assert rows(df, COLS) == [
        (1, 1, 4, "basic.ack", 9, "ack", True),
        (1, 2, 5, "basic.ack", 9, "ack", True),
        (1, 3, 6, "basic.ack", 9, "ack", True),
        (1, 4, 7, None, None, "unconfirmed", None),
        (1, 5, 8, "basic.nack", 10, "nack", False),
    ]
    lat = df["latency_ms"].tolist()
    assert lat[:3] == [10.0, 9.0, 8.0] and math.isnan(lat[3]) and lat[4] == 7.0


def test_tag_zero_multiple_and_interleaved_channels():
    c = Capture()
    c.method(0, "c2s", "confirm.select", channel=1)  # 1
    c.method(0, "c2s", "confirm.select", channel=2)  # 2
    c.method(1, "c2s", "basic.publish", channel=1, body=b"a")  # 3  ch1 #1
    c.method(2, "c2s", "basic.publish", channel=2, body=b"b")  # 4  ch2 #1
    c.method(3, "c2s", "basic.publish", channel=1, body=b"c")  # 5  ch1 #2
    c.method(4, "c2s", "basic.publish", channel=2, body=b"d")  # 6  ch2 #2
    c.method(5, "s2c", "basic.ack", channel=2, delivery_tag=1, multiple=False)  # 7
    c.method(6, "s2c", "basic.ack", channel=1, delivery_tag=0, multiple=True)  # 8 all of ch1
    c.method(7, "s2c", "basic.ack", channel=2, delivery_tag=1, multiple=False)  # 9 duplicate: nothing
    df = confirms(c.tables())
    assert rows(df, COLS) == [
        (1, 1, 3, "basic.ack", 8, "ack", True),
        (1, 2, 5, "basic.ack", 8, "ack", True),
        (2, 1, 4, "basic.ack", 7, "ack", False),
        (2, 2, 6, None, None, "unconfirmed", None),
    ]
    assert df["latency_ms"].tolist()[:3] == [5.0, 3.0, 3.0]


def test_publish_timed_at_content_completion_and_channel_reopen():
    c = Capture()
    c.method(0, "c2s", "confirm.select", channel=1)  # 1
    c.method(1, "c2s", "basic.publish", channel=1, body=b"x" * 10, done_ms=4, done_frame=3)  # 2, done in 3
    c.method(6, "s2c", "basic.ack", channel=1, delivery_tag=1)  # 4
    c.method(7, "c2s", "basic.publish", channel=1, body=b"y")  # 5 (#2, never confirmed)
    c.method(8, "c2s", "channel.close", channel=1)  # 6
    c.method(9, "s2c", "channel.close-ok", channel=1)  # 7
    c.method(10, "c2s", "channel.open", channel=1)  # 8 new scope: no confirm mode
    c.method(11, "c2s", "basic.publish", channel=1, body=b"z")  # 9 not counted
    c.method(12, "s2c", "basic.ack", channel=1, delivery_tag=2)  # 10 ignored
    df = confirms(c.tables())
    assert rows(df, COLS) == [
        (1, 1, 3, "basic.ack", 4, "ack", False),
        (1, 2, 5, None, None, "unconfirmed", None),
    ]
    assert df["latency_ms"].tolist()[0] == 2.0
