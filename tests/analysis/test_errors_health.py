"""Errors and health, hand-checked."""

import math

from tables import Capture, at, rows

from amqpcap.analysis import blocked, errors, flow, heartbeat_gaps, heartbeat_summary, stats, unacked


def test_errors_every_kind():
    c = Capture()
    c.connection(stream=0, rst=True, closed_by="server-rst", end_ts=at(100))
    c.connection(
        stream=3, rst=True, closed_by="server-rst", negotiation="rejected", end_ts=at(100), ts=at(200)
    )
    c.connection(
        stream=1,
        negotiation="rejected",
        client_header="01010009",
        server_header="00000901",
        client_version="0-9",
        version="0-9-1",
    )
    c.connection(stream=2, rst=True, closed_by="client", end_ts=at(50))  # reset after close: not an error
    c.method(
        1,
        "s2c",
        "channel.close",
        channel=1,
        reply_code=404,
        reply_text="NOT_FOUND - no queue 'x'",
        failing_method="queue.declare",
    )  # 1
    c.method(2, "s2c", "channel.close", channel=2, reply_code=200)  # 2 normal
    c.method(3, "s2c", "basic.return", channel=1, reply_code=312, reply_text="NO_ROUTE", body=b"x")  # 3
    c.method(4, "s2c", "basic.nack", channel=1, delivery_tag=1)  # 4 publisher nack
    c.method(5, "c2s", "basic.reject", channel=1, delivery_tag=2)  # 5 consumer reject
    c.method(6, "s2c", "connection.close", channel=0, reply_code=320, reply_text="CONNECTION_FORCED")  # 6
    df = errors(c.tables())
    assert rows(
        df, ["tcp_stream", "frame_number", "kind", "method", "code", "name", "class", "failing_method"]
    ) == [
        (1, 1, "protocol-rejected", None, None, "protocol-rejected", "hard", None),
        (0, 1, "channel-close", "channel.close", 404, "not-found", "soft", "queue.declare"),
        (0, 3, "return", "basic.return", 312, "no-route", "soft", "basic.publish"),
        (0, 4, "nack", "basic.nack", None, None, None, "basic.publish"),
        (0, 5, "reject", "basic.reject", None, None, None, "basic.deliver"),
        (0, 6, "connection-close", "connection.close", 320, "connection-forced", "hard", None),
        (0, None, "tcp-reset", None, None, "tcp-reset", "hard", None),
        (3, 1, "protocol-rejected", None, None, "protocol-rejected", "hard", None),  # its reset not repeated
    ]


def test_errors_0_10():
    c = Capture(version="0-10")
    c.method(0, "c2s", "queue.query", channel=1, command_id=4)
    c.method(
        1,
        "s2c",
        "execution.exception",
        channel=1,
        command_id=0,
        answers_command_id=4,  # dissect's
        reply_code=404,
        reply_text="no such queue",
        args={"error-code": 404, "command-id": 4, "description": "no such queue"},
    )
    c.method(1.5, "c2s", "message.reject", channel=1, command_id=5, args={"transfers": [[3, 3]], "code": 1})
    c.method(2, "s2c", "session.detached", channel=1, args={"name": "s", "code": 0})
    c.method(3, "s2c", "session.detached", channel=2, args={"name": "s2", "code": 1})
    c.method(4, "s2c", "connection.close", channel=0, reply_code=200)
    df = errors(c.tables())
    assert rows(df, ["kind", "method", "code", "name", "class", "failing_method", "text"]) == [
        (
            "execution-exception",
            "execution.exception",
            404,
            "not-found",
            "soft",
            "queue.query",
            "no such queue",
        ),
        ("reject", "message.reject", 1, "unroutable", None, "message.transfer", None),
        ("session-detached", "session.detached", 1, "session-busy", "soft", None, None),
    ]


def test_heartbeat_gaps_with_frames():
    c = Capture()
    c.connection(heartbeat=10, open_ts=at(0), end_ts=at(60_000))
    c.method(0, "c2s", "connection.open", channel=0)  # 1
    c.method(1, "s2c", "connection.open-ok", channel=0)  # 2
    for ms in (5_000, 14_000, 30_000):  # client heartbeats: 3, 4, 5
        c.frame_row(ms, "c2s", "heartbeat")
    for ms in (10_000, 20_000, 30_000, 40_000, 50_000, 60_000):  # server: 6..11, 10 s apart: fine
        c.frame_row(ms, "s2c", "heartbeat")
    t = c.tables(frames=True)
    df = heartbeat_gaps(t)
    assert rows(df, ["direction", "start_frame", "end_frame", "gap_s", "missed", "open_ended", "source"]) == [
        ("c2s", 4, 5, 16.0, False, False, "frames"),
        ("c2s", 5, None, 30.0, True, True, "frames"),
    ]
    s = heartbeat_summary(t)
    assert rows(s, ["direction", "heartbeat_frames", "max_gap_s", "late", "missed"]) == [
        ("c2s", 3, 30.0, 2, 1),
        ("s2c", 6, 10.0, 0, 0),
    ]


def test_blocked_and_flow():
    c = Capture()
    c.method(100, "s2c", "connection.blocked", channel=0, args={"reason": "low on memory"})  # 1
    c.method(150, "s2c", "connection.blocked", channel=0, args={"reason": "again"})  # 2 (same period)
    c.method(400, "s2c", "connection.unblocked", channel=0)  # 3
    c.method(900, "s2c", "connection.blocked", channel=0, args={"reason": "disk"})  # 4 never unblocked
    c.method(10, "s2c", "channel.flow", channel=1, args={"active": False})  # 5
    c.method(11, "c2s", "channel.flow-ok", channel=1, args={"active": False})  # 6
    c.method(60, "s2c", "channel.flow", channel=1, args={"active": True})  # 7
    c.method(61, "c2s", "channel.flow-ok", channel=1, args={"active": True})  # 8
    t = c.tables()
    b = blocked(t)
    assert rows(b, ["reason", "blocked_frame", "unblocked_frame", "status"]) == [
        ("low on memory", 1, 3, "unblocked"),
        ("disk", 4, None, "still-blocked"),
    ]
    assert b["duration_ms"].tolist()[0] == 300.0 and math.isnan(b["duration_ms"].tolist()[1])
    f = flow(t)
    assert rows(f, ["frame_number", "active", "ok_frame", "resumed_frame"]) == [
        (5, False, 6, 7),
        (7, True, 8, None),
    ]
    assert f["paused_ms"].tolist()[0] == 50.0


def test_unacked_against_prefetch():
    c = Capture()
    c.method(0, "c2s", "basic.qos", channel=1, prefetch_count=2)  # 1
    c.method(1, "c2s", "basic.consume", channel=1, queue="q", consumer_tag="c")  # 2
    for i in (1, 2, 3):  # 3, 4, 5
        c.method(1 + i, "s2c", "basic.deliver", channel=1, consumer_tag="c", delivery_tag=i, body=b"m")
    c.method(10, "c2s", "basic.ack", channel=1, delivery_tag=2, multiple=True)  # 6
    c.method(11, "c2s", "basic.ack", channel=1, delivery_tag=3)  # 7
    df = unacked(c.tables())
    assert rows(df, ["frame_number", "event", "unacked", "prefetch_count", "over_prefetch"]) == [
        (1, "qos", 0, 2, False),
        (3, "deliver", 1, 2, False),
        (4, "deliver", 2, 2, False),
        (5, "deliver", 3, 2, True),
        (6, "settle", 1, 2, False),
        (7, "settle", 0, 2, False),
    ]


def _idle_connection(c, **live):
    """heartbeat 10 s; methods only at 0-1 s and 60 s: 59 s without a method each way."""
    c.connection(heartbeat=10, open_ts=at(1000), end_ts=at(60_000), **live)
    c.method(0, "c2s", "connection.open", channel=0)
    c.method(1000, "s2c", "connection.open-ok", channel=0)
    c.method(60_000, "c2s", "connection.close", channel=0, reply_code=200)


def test_heartbeats_hidden_without_frames_are_not_missed_when_the_liveness_columns_say_so():
    c = Capture()
    # every 5 s a heartbeat each way (invisible: no frames table); longest frame silence 5 s
    live = {
        f"{n}_{d}": v
        for d in ("c2s", "s2c")
        for n, v in (
            ("heartbeats", 11),
            ("silence_start_ts", at(5_000)),
            ("silence_end_ts", at(10_000)),
            ("last_frame_ts", at(60_000 if d == "c2s" else 55_000)),
        )
    }
    _idle_connection(c, **live)
    t = c.tables()
    assert len(heartbeat_gaps(t)) == 0
    s = heartbeat_summary(t)
    assert rows(s, ["direction", "heartbeat_frames", "max_gap_s", "late", "missed", "unknown", "source"]) == [
        ("c2s", 11, 5.0, 0, 0, 0, "liveness"),
        ("s2c", 11, 5.0, 0, 0, 0, "liveness"),
    ]
    h = stats(t)["health"]
    assert (h["heartbeat_late"], h["heartbeat_missed"], h["heartbeat_unknown"], h["heartbeat_source"]) == (
        0,
        0,
        0,
        "liveness",
    )


def test_the_recorded_longest_silence_is_an_exact_gap_without_frames():
    c = Capture()
    live = {
        "heartbeats_c2s": 2,
        "silence_start_ts_c2s": at(10_000),
        "silence_end_ts_c2s": at(35_000),
        "last_frame_ts_c2s": at(60_000),
        "heartbeats_s2c": 0,
        "silence_start_ts_s2c": at(1000),
        "silence_end_ts_s2c": at(1000),
        "last_frame_ts_s2c": at(1000),
    }
    _idle_connection(c, **live)
    df = heartbeat_gaps(c.tables())
    got = rows(df, ["direction", "start_frame", "end_frame", "gap_s", "missed", "open_ended", "evidence"])
    assert got == [
        # c2s: 10 s -> 35 s had no frame (exact); 35 s -> the close at 60 s had frames the tables do not show
        ("c2s", None, None, 25.0, True, False, "liveness"),
        ("c2s", None, 3, 25.0, None, False, "unknown"),
        # s2c: silent after its last frame at 1 s until the close at 60 s: exact
        ("s2c", 2, None, 59.0, True, True, "liveness"),
    ]
    h = stats(c.tables())["health"]
    assert (h["heartbeat_late"], h["heartbeat_missed"], h["heartbeat_unknown"]) == (2, 2, 1)


def test_an_output_without_heartbeat_evidence_says_unknown_never_missed():
    c = Capture()
    _idle_connection(c)  # liveness columns null: a dissect output of an older amqpcap
    df = heartbeat_gaps(c.tables())
    assert rows(df, ["direction", "gap_s", "missed", "evidence", "source"]) == [
        ("s2c", 59.0, None, "unknown", "methods")
    ]  # c2s: nothing between open_ts and the close
    h = stats(c.tables())["health"]
    assert (h["heartbeat_late"], h["heartbeat_missed"], h["heartbeat_unknown"]) == (0, 0, 1)
