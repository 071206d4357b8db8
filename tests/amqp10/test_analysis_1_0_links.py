"""AMQP 1.0 analysis of links and connections: credit stalls, drain cycles, idle-time-out
liveness, and 1.0 messages in the transit and RPC pairings (alone and next to 0-9-1)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from amqp10_wire import (
    AMQP_HEADER,
    Sym,
    attach,
    begin,
    close,
    data,
    detach,
    flow,
    frame,
    open_,
    properties,
    transfer,
)
from fixtures import pcapgen as P

from amqpcap.analysis import amqp10, amqp10_credit, from_frames, load, rpc, transit
from amqpcap.analysis.summary import stats
from amqpcap.pipeline import dissect

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
MS = 1_000_000


def _timed(exchange: list, pauses: dict) -> list:
    """Segments of ``exchange`` ((direction, bytes) items), 1 ms apart, with ``pauses``
    (item index -> ns) of silence before the items named."""
    segs = P.tcp_conversation(exchange)
    payloads = [b for _, b in exchange]
    shift, k = 0, 0
    for s in segs:
        if s.payload and k < len(payloads) and s.payload == payloads[k]:
            shift += pauses.get(k, 0)
            k += 1
        s.ts_ns += shift
    return segs


def _dissect(tmp_path, segs):
    cap = P.write(tmp_path / "c.pcap", P.pcap_bytes(P.to_packets(segs)))
    dissect([str(cap)], str(tmp_path / "out"))
    return tmp_path / "out"


def _credit_conversation():
    """A receiver attached with no credit while the broker has 3 messages, credit 2 used up,
    then a drain of 5 credits that one message and a drained flow end."""
    msg = properties(message_id="m", content_type=Sym("text/plain")) + data(b"x")
    ex = [
        ("c2s", AMQP_HEADER),
        ("s2c", AMQP_HEADER),
        ("c2s", frame(open_("client", idle=60000)) + frame(begin())),
        ("s2c", frame(open_("broker", idle=60000)) + frame(begin(0))),
        ("c2s", frame(attach("rx", 0, True, src="/queues/q"))),
        ("s2c", frame(attach("rx", 0, False, src="/queues/q")) + frame(flow(0, 0, 0, available=3))),
        ("c2s", frame(flow(0, 0, 2))),  # 6: 2 s after the attach
        (
            "s2c",
            frame(transfer(0, 0, b"a", settled=True) + msg) + frame(transfer(0, 1, b"b", settled=True) + msg),
        ),
        ("s2c", frame(flow(0, 2, 0, available=1))),
        ("c2s", frame(flow(0, 2, 5, drain=True))),  # 9: 0.5 s after the credit ran out
        (
            "s2c",
            frame(transfer(0, 2, b"c", settled=True) + msg) + frame(flow(0, 3, 0, drain=True, available=0)),
        ),
        ("c2s", frame(close())),
        ("s2c", frame(close())),
    ]
    return _timed(ex, {6: 2000 * MS, 9: 500 * MS})


def test_zero_credit_with_messages_waiting_is_a_stall_until_credit_comes(tmp_path):
    t = load(str(_dissect(tmp_path, _credit_conversation())))
    s = amqp10_credit.credit_stalls(t)
    got = [
        (r["link_name"], r["sender"], r["cause"], r["status"], r["backlog"], r["stalled"])
        for _, r in s.iterrows()
    ]
    assert got == [
        ("rx", "s2c", "attach", "resumed", 3, True),
        ("rx", "s2c", "exhausted", "resumed", 1, True),
        ("rx", "s2c", "drained", "ended", 0, False),
    ]
    # the first stall lasts from the attach to the flow granting credit: the 2 s pause and a packet
    assert 2000 < s["duration_ms"].iloc[0] < 2010
    assert 500 < s["duration_ms"].iloc[1] < 510
    assert (s["end_ts"] - s["start_ts"]).dt.total_seconds().mul(1000).round(6).tolist() == s[
        "duration_ms"
    ].round(6).tolist()


def test_a_drain_ends_when_the_sender_reports_no_credit_left(tmp_path):
    t = load(str(_dissect(tmp_path, _credit_conversation())))
    (d,) = amqp10_credit.drains(t).to_dict("records")
    assert (d["link_name"], d["credit"], d["available"], d["deliveries"], d["status"]) == (
        "rx",
        5,
        0,
        1,
        "drained",
    )
    assert d["end_frame"] > d["request_frame"]


def test_stats_health_counts_stalls_and_drains(tmp_path):
    h = stats(str(_dissect(tmp_path, _credit_conversation())))["health"]
    assert (h["credit_stalls"], h["credit_stalls_open"], h["drain_cycles"], h["drains_incomplete"]) == (
        2,
        0,
        1,
        0,
    )
    assert 2500 < h["credit_stall_ms_total"] < 2520 and 2000 < h["credit_stall_ms_max"] < 2010


def test_recorded_credit_receiver_stalled_a_second_and_its_drain_never_completed():
    # rhea attached a receiver with no credit while 4 messages waited, granted 2 a second
    # later, then asked a drain of 5 that the broker answered by ending the session
    t = load(str(CAPTURES / "rabbitmq10_rhea_multiplex.pcap"))
    s = amqp10_credit.credit_stalls(t)
    s = s[s["link_name"] == "rhea-mux-credit-receiver"]
    assert s[["cause", "backlog", "status"]].values.tolist() == [
        ["attach", 4, "resumed"],
        ["exhausted", 2, "resumed"],
    ]
    assert 1000 < s["duration_ms"].iloc[0] < 1100
    (d,) = amqp10_credit.drains(t).to_dict("records")
    assert (d["link_name"], d["credit"], d["available"], d["deliveries"], d["status"]) == (
        "rhea-mux-credit-receiver",
        5,
        2,
        1,
        "ended",
    )


def _idle_conversation():
    ex = [
        ("c2s", AMQP_HEADER),
        ("s2c", AMQP_HEADER),
        ("c2s", frame(open_("client", idle=1000))),
        ("s2c", frame(open_("broker", idle=60000))),
        ("c2s", frame(b"")),  # 4: 2.5 s of silence both ways before it
        ("s2c", frame(b"")),
        ("c2s", frame(close())),
        ("s2c", frame(close())),
    ]
    return _timed(ex, {4: 2500 * MS})


def test_a_silence_over_two_idle_timeouts_the_peer_asked_for_is_missed(tmp_path):
    out = _dissect(tmp_path, _idle_conversation())
    t = load(str(out))
    c = t.connections.iloc[0]
    assert (c["client_idle_timeout_ms"], c["server_idle_timeout_ms"], c["idle_timeout_ms"]) == (
        1000,
        60000,
        1000,
    )
    g = amqp10.idle_gaps(t)
    # the server owed the client a frame every second and was silent 2.5 s; the client owed
    # the server one a minute: its silence is fine
    (r,) = g.to_dict("records")
    assert (r["direction"], r["sender"], r["idle_timeout_ms"], r["missed"]) == ("s2c", "server", 1000, True)
    assert 2.5 < r["gap_s"] < 2.51 and r["intervals"] == r["gap_s"] / 1.0
    h = stats(str(out))["health"]
    assert (h["heartbeat_late"], h["heartbeat_missed"]) == (1, 1)


def test_the_recorded_broker_keeps_the_one_second_idle_timeout_rhea_asked_for():
    t = load(str(CAPTURES / "rabbitmq10_rhea_multiplex.pcap"), frames=True)  # every frame: exact gaps
    assert amqp10.idle_gaps(t).empty
    every = amqp10.idle_gaps(t, all_gaps=True)
    assert set(every["evidence"]) == {"frames"}
    s2c = every[every["direction"] == "s2c"]
    assert len(s2c) > 20 and s2c["gap_s"].max() < 1.0  # about one empty frame each 500 ms
    assert every[every["direction"] == "c2s"]["idle_timeout_ms"].unique().tolist() == [60000]


def test_1_0_rpc_reply_names_the_request_by_its_message_id():
    t = load(str(CAPTURES / "rabbitmq10_rhea_rpc.pcap"))
    r = rpc(t)
    assert r["status"].tolist() == ["ok"] * 3
    assert r["correlation_id"].tolist() == ["rpc-req-0", "rpc-req-1", "rpc-req-2"]
    assert r["reply_to"].tolist() == ["/queue/amqpcap10-rhea-rpc-replies"] * 3
    assert (r["latency_ms"] > 0).all() and (r["client_latency_ms"] > r["latency_ms"]).all()
    assert stats(t)["latency"]["rpc"]["count"] == 3
    # from the output directory, section by section, the ids as codes: the reply's correlation-id
    # and the request's message-id share one dictionary
    assert stats(str(t.source))["latency"]["rpc"] == stats(t)["latency"]["rpc"]


def test_1_0_rpc_with_correlation_ids_pairs_on_them():
    r = rpc(load(str(CAPTURES / "rabbitmq10_proton_rpc.pcap")))
    assert r["status"].tolist() == ["ok"] * 3
    assert all(c.startswith("05ec0000-") for c in r["correlation_id"])


def test_a_1_0_publisher_and_a_0_9_1_consumer_pair_in_transit():
    t = load(str(CAPTURES / "rabbitmq10_proton_pika.pcap"))
    tr = transit(t)
    assert tr["message_id"].tolist() == ["proton-msg-0", "cross-1", "cross-2", "cross-3"]
    assert set(tr["request_method"]) == {"transfer"} and set(tr["response_method"]) == {"basic.get-ok"}
    assert (tr["tcp_stream"] == 1).all() and (tr["response_tcp_stream"] == 0).all()
    assert (tr["latency_ms"] > 0).all() and stats(t)["latency"]["transit"]["count"] == 4


def _msg(ts_ms, tcp_stream, direction, method, version, **kw):
    row = dict(
        capture="x.pcap",
        tcp_stream=tcp_stream,
        frame_number=ts_ms,
        stream_offset=0,
        ts=pd.Timestamp("2024-01-01", tz="UTC") + pd.Timedelta(milliseconds=ts_ms),
        direction=direction,
        channel=1,
        method=method,
        version=version,
    )
    row.update(kw)
    return row


def test_rpc_pairs_across_protocols_both_ways():
    rows = [
        # a 1.0 request answered by a 0-9-1 responder publishing to the queue its reply-to names
        _msg(1, 0, "c2s", "transfer", "1.0", message_id="q1", reply_to="/queue/replies", routing_key="work"),
        _msg(5, 1, "c2s", "basic.publish", "0-9-1", correlation_id="q1", routing_key="replies", exchange=""),
        # a 0-9-1 request answered by a 1.0 responder sending to /queues/<reply_to>
        _msg(
            10, 1, "c2s", "basic.publish", "0-9-1", correlation_id="c2", reply_to="back", routing_key="work"
        ),
        _msg(17, 0, "c2s", "transfer", "1.0", correlation_id="c2", routing_key="back", exchange=""),
    ]
    cols = ["correlation_id", "reply_to", "routing_key", "exchange", "message_id"]
    m = pd.DataFrame(rows)
    for c in cols:
        m[c] = m[c].astype(object) if c in m else None
    r = rpc(from_frames(messages=m))
    assert r[["request_method", "response_method", "status", "correlation_id"]].values.tolist() == [
        ["transfer", "basic.publish", "ok", "q1"],
        ["basic.publish", "transfer", "ok", "c2"],
    ]
    assert r["latency_ms"].tolist() == [4.0, 7.0]


def test_rabbitmq_4_addresses_name_their_percent_decoded_exchange_and_key():
    from amqpcap.analysis.amqp10_pairing import reply_key
    from amqpcap.records.rows_1_0 import exchange_key

    assert exchange_key("/exchanges/x%2Fy/a%2Fb") == ("x/y", "a/b")
    assert exchange_key("/exchanges/amq.fanout") == ("amq.fanout", None)
    assert exchange_key("/queues/q%20one+two") == ("", "q one+two")
    assert exchange_key("/exchanges/x/a/b") == (None, None)  # v2 keys are one encoded segment
    assert exchange_key("/exchange/x/a/b") == ("x", "a/b")  # v1 keys are not encoded
    assert exchange_key("/topic/a.b") == ("amq.topic", "a.b")
    assert [reply_key(a) for a in ("/queues/r%2F1", "/queue/r", "/management", "$me")] == [
        "r/1",
        "r",
        "/management",
        "$me",
    ]


def test_a_link_name_attached_again_is_a_new_link_with_its_own_stall(tmp_path):
    ex = [
        ("c2s", AMQP_HEADER),
        ("s2c", AMQP_HEADER),
        ("c2s", frame(open_("client")) + frame(begin())),
        ("s2c", frame(open_("broker")) + frame(begin(0))),
        ("c2s", frame(attach("rx", 0, True, src="/queues/q")) + frame(flow(0, 0, 10))),
        ("s2c", frame(attach("rx", 0, False, src="/queues/q")) + frame(flow(0, 0, 10, available=0))),
        ("c2s", frame(detach(0, True))),
        ("s2c", frame(detach(0, True))),
        ("c2s", frame(attach("rx", 1, True, src="/queues/q"))),  # 8: the same name again
        ("s2c", frame(attach("rx", 1, False, src="/queues/q")) + frame(flow(1, 0, 0, available=7))),
        ("c2s", frame(flow(1, 0, 3))),  # 10: 300 ms later
        ("c2s", frame(close())),
        ("s2c", frame(close())),
    ]
    t = load(str(_dissect(tmp_path, _timed(ex, {10: 300 * MS}))))
    s = amqp10_credit.credit_stalls(t)
    assert s[["cause", "status", "backlog"]].values.tolist() == [
        ["attach", "resumed", 0],
        ["attach", "resumed", 7],
    ]
    assert s["stalled"].tolist() == [False, True] and 300 < s["duration_ms"].iloc[1] < 310


def test_exchange_keys_cache_holds_at_most_max_addresses_and_answers_past_it():
    from amqpcap.records import rows_1_0

    keys = rows_1_0.EXCHANGE_KEYS
    try:
        keys.clear()
        for i in range(rows_1_0.MAX_ADDRESSES + 10):
            assert rows_1_0.exchange_key(f"/queues/q{i}") == ("", f"q{i}")
        assert len(keys) == rows_1_0.MAX_ADDRESSES
        assert rows_1_0.exchange_key(["/queues/q"]) == (None, None)  # not text: not kept
    finally:
        keys.clear()
