"""Broker transit, application RPC and connection setup pairings."""

import math

import pandas as pd
from tables import Capture, at, rows

from amqpcap.analysis import connection_setup, rpc, transit


def test_transit_message_id_content_fifo_and_redelivery():
    c = Capture()
    # stream 0 publishes, stream 1 consumes
    c.method(
        0, "c2s", "basic.publish", stream=0, exchange="ex", routing_key="rk", body=b"A", message_id="m-1"
    )  # 1
    c.method(1, "c2s", "basic.publish", stream=0, exchange="ex", routing_key="rk", body=b"same")  # 2
    c.method(2, "c2s", "basic.publish", stream=0, exchange="ex", routing_key="rk", body=b"same")  # 3
    c.method(
        5,
        "s2c",
        "basic.deliver",
        stream=1,
        exchange="ex",
        routing_key="rk",
        body=b"A",
        message_id="m-1",
        consumer_tag="c",
        delivery_tag=1,
        redelivered=False,
    )  # 4
    c.method(
        6,
        "s2c",
        "basic.deliver",
        stream=1,
        exchange="ex",
        routing_key="rk",
        body=b"same",
        consumer_tag="c",
        delivery_tag=2,
        redelivered=False,
    )  # 5 -> publish 2
    c.method(
        8,
        "s2c",
        "basic.deliver",
        stream=1,
        exchange="ex",
        routing_key="rk",
        body=b"same",
        consumer_tag="c",
        delivery_tag=3,
        redelivered=False,
    )  # 6 -> publish 3
    c.method(
        9,
        "s2c",
        "basic.deliver",
        stream=1,
        exchange="ex",
        routing_key="rk",
        body=b"A",
        message_id="m-1",
        consumer_tag="c",
        delivery_tag=4,
        redelivered=True,
    )  # 7 redelivery
    c.method(
        10,
        "s2c",
        "basic.deliver",
        stream=1,
        exchange="other",
        routing_key="rk",
        body=b"same",
        consumer_tag="c",
        delivery_tag=5,
        redelivered=False,
    )  # 8 no publish
    df = transit(c.tables())
    cols = [
        "tcp_stream",
        "request_frame",
        "response_tcp_stream",
        "response_frame",
        "match",
        "delivery_index",
        "first",
        "redelivered",
        "same_connection",
    ]
    assert rows(df, cols) == [
        (0, 1, 1, 4, "message_id", 0, True, False, False),
        (0, 1, 1, 7, "message_id", 1, False, True, False),
        (0, 2, 1, 5, "content", 0, True, False, False),
        (0, 3, 1, 6, "content", 0, True, False, False),
    ]
    assert df["latency_ms"].tolist() == [5.0, 9.0, 5.0, 6.0]


def test_rpc_reply_publish_delivery_direct_reply_to_and_missing():
    c = Capture()
    # requester on stream 0, responder on stream 1
    c.method(
        0,
        "c2s",
        "basic.publish",
        stream=0,
        routing_key="rpc_queue",
        body=b"q1",
        reply_to="amq.gen-reply",
        correlation_id="1",
    )  # 1
    c.method(
        1,
        "s2c",
        "basic.deliver",
        stream=1,
        routing_key="rpc_queue",
        body=b"q1",
        reply_to="amq.gen-reply",
        correlation_id="1",
    )  # 2
    c.method(
        4, "c2s", "basic.publish", stream=1, routing_key="amq.gen-reply", body=b"r1", correlation_id="1"
    )  # 3
    c.method(
        5, "s2c", "basic.deliver", stream=0, routing_key="amq.gen-reply", body=b"r1", correlation_id="1"
    )  # 4
    # direct reply-to, responder not captured
    c.method(
        10,
        "c2s",
        "basic.publish",
        stream=0,
        routing_key="rpc_queue",
        body=b"q2",
        reply_to="amq.rabbitmq.reply-to",
        correlation_id="2",
    )  # 5
    c.method(
        13,
        "s2c",
        "basic.deliver",
        stream=0,
        routing_key="amq.rabbitmq.reply-to.g1h2AA",
        body=b"r2",
        correlation_id="2",
    )  # 6
    # never answered
    c.method(
        20,
        "c2s",
        "basic.publish",
        stream=0,
        routing_key="rpc_queue",
        body=b"q3",
        reply_to="amq.gen-reply",
        correlation_id="3",
    )  # 7
    df = rpc(c.tables())
    cols = [
        "correlation_id",
        "request_frame",
        "response_frame",
        "response_direction",
        "delivered_frame",
        "status",
    ]
    assert rows(df, cols) == [
        ("1", 1, 3, "c2s", 4, "ok"),
        ("2", 5, 6, "s2c", 6, "ok-delivery"),
        ("3", 7, None, None, None, "missing"),
    ]
    lat = df["latency_ms"].tolist()
    assert lat[:2] == [4.0, 3.0] and math.isnan(lat[2])
    assert df["client_latency_ms"].tolist()[:2] == [5.0, 3.0]


def test_connection_setup():
    c = Capture()
    c.connection(stream=0, syn_ts=at(0), open_ts=at(12.5))
    c.connection(stream=1, syn_ts=at(1), open_ts=None)  # never opened
    c.connection(stream=2, syn_ts=None, open_ts=at(3))  # mid-stream: no SYN, not reported
    c.method(12.5, "s2c", "connection.open-ok", channel=0, stream=0, frame=9)
    df = connection_setup(c.tables())
    assert rows(df, ["tcp_stream", "request_frame", "response_frame", "status"]) == [
        (0, 1, 9, "ok"),
        (1, 1, None, "missing"),
    ]
    assert df["latency_ms"].tolist()[0] == 12.5
    assert math.isnan(df["latency_ms"].tolist()[1])
    assert df["request_ts"].tolist()[0] == pd.Timestamp("2024-05-01T12:00:00", tz="UTC")
