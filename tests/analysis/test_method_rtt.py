"""Hand-checked pairings: synchronous request -> response."""

import math

from tables import Capture, rows

from amqpcap.analysis import method_rtt


def _rows(df):
    return rows(df, ["request_method", "request_frame", "response_method", "response_frame", "status"])


def test_interleaved_channels_and_async_methods():
    c = Capture()
    c.method(0, "c2s", "queue.declare", channel=1, queue="a")  # 1
    c.method(1, "c2s", "queue.declare", channel=2, queue="b")  # 2
    c.method(2, "s2c", "basic.deliver", channel=1, delivery_tag=1)  # 3 async, ignored
    c.method(4, "s2c", "queue.declare-ok", channel=2, queue="b")  # 4
    c.method(7, "s2c", "queue.declare-ok", channel=1, queue="a")  # 5
    c.method(8, "c2s", "basic.consume", channel=1, queue="a")  # 6
    c.method(9, "s2c", "basic.deliver", channel=1, delivery_tag=2)  # 7 interleaves
    c.method(10.5, "s2c", "basic.consume-ok", channel=1)  # 8
    df = method_rtt(c.tables())
    assert _rows(df) == [
        ("queue.declare", 1, "queue.declare-ok", 5, "ok"),
        ("queue.declare", 2, "queue.declare-ok", 4, "ok"),
        ("basic.consume", 6, "basic.consume-ok", 8, "ok"),
    ]
    assert df["latency_ms"].tolist() == [7.0, 3.0, 2.5]
    assert df["channel"].tolist() == [1, 2, 1]


def test_missing_response_error_and_nowait():
    c = Capture()
    c.method(
        0, "c2s", "exchange.declare", channel=1, args={"exchange": "x", "no-wait": True}
    )  # 1: no response expected
    c.method(1, "c2s", "basic.get", channel=2, queue="q")  # 2: never answered
    c.method(2, "c2s", "queue.declare", channel=1, queue="nope")  # 3: answered by channel.close 404
    c.method(5, "s2c", "channel.close", channel=1, reply_code=404)  # 4
    c.method(6, "c2s", "channel.close-ok", channel=1)  # 5
    df = method_rtt(c.tables())
    assert _rows(df) == [
        ("basic.get", 2, None, None, "missing"),
        ("queue.declare", 3, "channel.close", 4, "error"),
        ("channel.close", 4, "channel.close-ok", 5, "ok"),
    ]
    assert math.isnan(df["latency_ms"][0])
    assert df["latency_ms"][1] == 3.0
    assert df["latency_ms"][2] == 1.0


def test_server_requests_and_get_alternatives():
    c = Capture()
    c.method(0, "s2c", "connection.start", channel=0)  # 1
    c.method(2, "c2s", "connection.start-ok", channel=0)  # 2
    c.method(3, "s2c", "connection.tune", channel=0)  # 3
    c.method(4, "c2s", "connection.tune-ok", channel=0)  # 4
    c.method(5, "c2s", "connection.open", channel=0)  # 5
    c.method(6, "s2c", "connection.open-ok", channel=0)  # 6
    c.method(7, "c2s", "basic.get", channel=1)  # 7
    c.method(9, "s2c", "basic.get-empty", channel=1)  # 8
    c.method(10, "c2s", "basic.get", channel=1)  # 9
    c.method(10.25, "s2c", "basic.get-ok", channel=1, delivery_tag=1, body=b"x")  # 10
    df = method_rtt(c.tables())
    assert _rows(df) == [
        ("connection.start", 1, "connection.start-ok", 2, "ok"),
        ("connection.tune", 3, "connection.tune-ok", 4, "ok"),
        ("connection.open", 5, "connection.open-ok", 6, "ok"),
        ("basic.get", 7, "basic.get-empty", 8, "ok"),
        ("basic.get", 9, "basic.get-ok", 10, "ok"),
    ]
    assert df["latency_ms"].tolist() == [2.0, 1.0, 1.0, 2.0, 0.25]
    assert df["request_direction"].tolist() == ["s2c", "s2c", "c2s", "c2s", "c2s"]


def test_connection_close_ends_every_channel_and_reused_channel():
    c = Capture()
    c.method(0, "c2s", "channel.open", channel=1)  # 1
    c.method(1, "s2c", "channel.open-ok", channel=1)  # 2
    c.method(2, "c2s", "queue.declare", channel=1)  # 3 missing: channel closed by client
    c.method(3, "c2s", "channel.close", channel=1, reply_code=200)  # 4
    c.method(4, "s2c", "channel.close-ok", channel=1)  # 5
    c.method(5, "c2s", "channel.open", channel=1)  # 6 channel 1 reused
    c.method(6, "s2c", "queue.declare-ok", channel=1)  # 7 stray: must not pair with 3
    c.method(7, "s2c", "channel.open-ok", channel=1)  # 8
    c.method(8, "c2s", "queue.bind", channel=1)  # 9
    c.method(9, "s2c", "connection.close", channel=0, reply_code=320)  # 10 server closes: bind errors
    c.method(10, "c2s", "connection.close-ok", channel=0)  # 11
    df = method_rtt(c.tables())
    assert _rows(df) == [
        ("channel.open", 1, "channel.open-ok", 2, "ok"),
        ("queue.declare", 3, None, None, "missing"),
        ("channel.close", 4, "channel.close-ok", 5, "ok"),
        ("channel.open", 6, "channel.open-ok", 8, "ok"),
        ("queue.bind", 9, "connection.close", 10, "error"),
        ("connection.close", 10, "connection.close-ok", 11, "ok"),
    ]


def test_0_10_sync_completed_and_result():
    c = Capture(version="0-10")
    c.method(0, "c2s", "queue.query", channel=3, command_id=0, synchronous=True)  # 1 -> result
    c.method(1, "c2s", "message.transfer", channel=3, command_id=1, synchronous=False)  # 2
    c.method(2, "c2s", "execution.sync", channel=3, command_id=2, synchronous=False)  # 3 -> completed
    c.method(3, "c2s", "queue.query", channel=3, command_id=3, synchronous=True)  # 4 never answered
    c.method(4, "s2c", "session.completed", channel=3, args={"commands": [[0, 1]]})  # 5 does not cover 2
    c.method(5, "s2c", "execution.result", channel=3, command_id=0, answers_command_id=0)  # 6
    c.method(
        6, "s2c", "session.completed", channel=3, args={"commands": [[0, 2]], "timely-reply": False}
    )  # 7
    df = method_rtt(c.tables())
    assert _rows(df) == [
        ("queue.query", 1, "execution.result", 6, "ok"),
        ("execution.sync", 3, "session.completed", 7, "ok"),
        ("queue.query", 4, None, None, "missing"),
    ]
    assert df["latency_ms"].tolist()[:2] == [5.0, 4.0]
    assert df["command_id"].tolist() == [0, 2, 3]


def test_0_10_exception_answers_command():
    c = Capture(version="0-10")
    c.method(0, "c2s", "queue.query", channel=1, command_id=7, synchronous=True)
    c.method(2, "s2c", "execution.exception", channel=1, command_id=0, answers_command_id=7, reply_code=404)
    df = method_rtt(c.tables())
    assert _rows(df) == [("queue.query", 1, "execution.exception", 2, "error")]
    assert df["latency_ms"].tolist() == [2.0]
