"""Consumer acks: deliver / get-ok -> the ack, nack or reject covering its tag."""

import math

from tables import Capture, rows

from amqpcap.analysis import consumer_acks, consumers

COLS = [
    "channel",
    "request_method",
    "delivery_tag",
    "request_frame",
    "response_method",
    "response_frame",
    "outcome",
    "multiple",
    "redelivered",
    "queue",
]


def _consume(c, ch, q, tag, no_ack=False, t=0):
    c.method(t, "c2s", "basic.consume", channel=ch, queue=q, consumer_tag="", no_ack=no_ack)
    c.method(t + 0.5, "s2c", "basic.consume-ok", channel=ch, consumer_tag=tag)


def test_multiple_tag_zero_reject_redelivery_unsettled():
    c = Capture()
    _consume(c, 1, "q1", "ctag-1")  # 1, 2
    for i in range(1, 6):  # 3..7, t=10..14
        c.method(
            9 + i,
            "s2c",
            "basic.deliver",
            channel=1,
            consumer_tag="ctag-1",
            delivery_tag=i,
            redelivered=(i == 4),
            body=b"m%d" % i,
        )
    c.method(20, "c2s", "basic.ack", channel=1, delivery_tag=2, multiple=True)  # 8: 1, 2
    c.method(21, "c2s", "basic.reject", channel=1, delivery_tag=4, requeue=True)  # 9: 4
    c.method(
        22, "c2s", "basic.nack", channel=1, delivery_tag=0, multiple=True, requeue=False
    )  # 10: 3 (5 is later)
    c.method(
        23,
        "s2c",
        "basic.deliver",
        channel=1,
        consumer_tag="ctag-1",
        delivery_tag=6,
        redelivered=False,
        body=b"m6",
    )  # 11
    c.method(
        24,
        "s2c",
        "basic.deliver",
        channel=1,
        consumer_tag="ctag-1",
        delivery_tag=7,
        redelivered=False,
        body=b"m7",
    )  # 12
    c.method(25, "c2s", "basic.ack", channel=1, delivery_tag=6)  # 13
    df = consumer_acks(c.tables())
    assert rows(df, COLS) == [
        (1, "basic.deliver", 1, 3, "basic.ack", 8, "ack", True, False, "q1"),
        (1, "basic.deliver", 2, 4, "basic.ack", 8, "ack", True, False, "q1"),
        (1, "basic.deliver", 3, 5, "basic.nack", 10, "nack", True, False, "q1"),
        (1, "basic.deliver", 4, 6, "basic.reject", 9, "reject", None, True, "q1"),
        (1, "basic.deliver", 5, 7, "basic.nack", 10, "nack", True, False, "q1"),
        (1, "basic.deliver", 6, 11, "basic.ack", 13, "ack", False, False, "q1"),
        (1, "basic.deliver", 7, 12, None, None, "unsettled", None, False, "q1"),
    ]
    lat = df["latency_ms"].tolist()
    assert lat[:6] == [10.0, 9.0, 10.0, 8.0, 8.0, 2.0] and math.isnan(lat[6])
    assert df["requeue"].tolist()[2:5] == [False, True, False]


def test_no_ack_consumer_excluded_get_ok_included_interleaved():
    c = Capture()
    _consume(c, 1, "fast", "auto", no_ack=True)  # 1, 2
    _consume(c, 2, "slow", "manual", t=1)  # 3, 4
    c.method(
        5, "s2c", "basic.deliver", channel=1, consumer_tag="auto", delivery_tag=1, body=b"a"
    )  # 5 (no-ack)
    c.method(6, "s2c", "basic.deliver", channel=2, consumer_tag="manual", delivery_tag=1, body=b"b")  # 6
    c.method(7, "c2s", "basic.get", channel=3, queue="polled")  # 7
    c.method(8, "s2c", "basic.get-ok", channel=3, delivery_tag=1, body=b"c")  # 8
    c.method(9, "c2s", "basic.ack", channel=3, delivery_tag=1)  # 9
    c.method(10, "c2s", "basic.ack", channel=2, delivery_tag=1)  # 10
    c.method(11, "c2s", "basic.ack", channel=1, delivery_tag=1)  # 11 (stray)
    df = consumer_acks(c.tables())
    assert rows(df, COLS) == [
        (2, "basic.deliver", 1, 6, "basic.ack", 10, "ack", False, None, "slow"),
        (3, "basic.get-ok", 1, 8, "basic.ack", 9, "ack", False, None, "polled"),
    ]
    assert df["latency_ms"].tolist() == [4.0, 1.0]
    cons = consumers(c.tables())
    assert rows(cons, ["channel", "consumer_tag", "queue", "no_ack"]) == [
        (1, "auto", "fast", True),
        (2, "manual", "slow", False),
    ]


def test_0_10_accept_release_reject_ranges():
    c = Capture(version="0-10")
    c.method(
        0,
        "c2s",
        "message.subscribe",
        channel=1,
        queue="q",
        consumer_tag="sub",
        args={"queue": "q", "destination": "sub", "accept-mode": 0, "acquire-mode": 0},
    )  # 1
    c.method(
        0,
        "c2s",
        "message.subscribe",
        channel=1,
        queue="q2",
        consumer_tag="fire",
        args={"queue": "q2", "destination": "fire", "accept-mode": 1, "acquire-mode": 0},
    )  # 2
    for i in range(4):  # 3..6 ids 0..3
        c.method(
            1 + i, "s2c", "message.transfer", channel=1, consumer_tag="sub", command_id=i, body=b"t%d" % i
        )
    c.method(
        5, "s2c", "message.transfer", channel=1, consumer_tag="fire", command_id=4, body=b"f"
    )  # 7 (accept none)
    c.method(10, "c2s", "message.accept", channel=1, args={"transfers": [[0, 1]]})  # 8
    c.method(11, "c2s", "message.release", channel=1, args={"transfers": [[2, 2]]})  # 9
    df = consumer_acks(c.tables())
    assert rows(
        df, ["delivery_tag", "request_frame", "response_method", "response_frame", "outcome", "queue"]
    ) == [
        (0, 3, "message.accept", 8, "ack", "q"),
        (1, 4, "message.accept", 8, "ack", "q"),
        (2, 5, "message.release", 9, "nack", "q"),
        (3, 6, None, None, "unsettled", "q"),
    ]
    assert df["latency_ms"].tolist()[:3] == [9.0, 8.0, 8.0]


def test_0_10_transfer_names_subscription_and_carries_its_accept_mode():
    # as dissect writes them: consumer_tag = the destination, queue and accept_mode typed columns
    c = Capture(version="0-10")
    c.method(
        0,
        "c2s",
        "message.subscribe",
        channel=1,
        consumer_tag="s",
        queue="q",
        args={"destination": "s", "accept-mode": 0},
    )  # 1
    c.method(
        1,
        "s2c",
        "message.transfer",
        channel=1,
        command_id=0,
        body=b"a",
        consumer_tag="s",
        args={"destination": "s", "accept-mode": 0, "acquire-mode": 0},
    )  # 2
    c.method(
        2,
        "s2c",
        "message.transfer",
        channel=1,
        command_id=1,
        body=b"b",
        consumer_tag="s",
        args={"destination": "s", "accept-mode": 1, "acquire-mode": 0},
    )  # 3 none
    c.method(3, "c2s", "message.accept", channel=1, args={"transfers": [[0, 1]]})  # 4
    df = consumer_acks(c.tables())
    assert rows(
        df, ["delivery_tag", "request_frame", "response_frame", "outcome", "queue", "consumer_tag"]
    ) == [(0, 2, 4, "ack", "q", "s")]
