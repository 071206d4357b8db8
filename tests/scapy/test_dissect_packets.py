"""amqpcap.dissect_packets: the pipeline over scapy packets gives the tables of the capture file."""

from __future__ import annotations

import pandas as pd
import pytest
from scapy.layers.inet import IP, TCP
from scapy.utils import rdpcap

import amqpcap
from amqpcap.scapy import AMQP, AMQPBody, AMQPProtocolHeader, header_class
from amqpcap.scapy.source import PacketsSource, timestamp_ns

TABLES = ("connections", "methods", "messages", "anomalies", "frames")


@pytest.mark.parametrize(
    "name", ["rabbitmq091_pika_full", "qpid010_basic", "rabbitmq08_amqplib", "rabbitmq091_pika_refused"]
)
def test_rdpcap_packets_give_the_same_tables_as_the_capture_file_row_for_row(name):
    path = f"captures/{name}.pcap"
    from_file = amqpcap.load(path, frames=True)
    from_packets = amqpcap.dissect_packets(rdpcap(path), capture=path, frames=True)
    for table in TABLES:
        a, b = getattr(from_file, table), getattr(from_packets, table)
        assert len(a) == len(b), table
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=True)
    assert len(from_packets.methods) > 0 or name == "rabbitmq091_pika_refused"


def test_packet_source_yields_what_the_reader_yields():
    from amqpcap.capture.reader import open_capture

    path = "captures/rabbitmq091_pyamqp_basic.pcap"
    assert list(PacketsSource(rdpcap(path))) == list(open_capture(path))


def test_out_writes_the_dataset_too(tmp_path):
    tables = amqpcap.dissect_packets(rdpcap("captures/rabbitmq091_pyamqp_basic.pcap"), tmp_path / "out")
    again = amqpcap.load(tmp_path / "out")
    assert len(again.methods) == len(tables.methods) > 0
    assert (tmp_path / "out" / "methods").is_dir()


def _conversation(sport=40100, dport=5672):
    """A crafted 0-9-1 conversation: handshake, channel, one publish with content, close."""
    c, s = "192.0.2.1", "192.0.2.2"
    seq = {c: 1000, s: 5000}
    t = [1_700_000_000.0]
    out = []

    def pkt(src, payload=b"", flags="PA"):
        dst = s if src == c else c
        sp, dp = (sport, dport) if src == c else (dport, sport)
        p = IP(src=src, dst=dst) / TCP(sport=sp, dport=dp, flags=flags, seq=seq[src], ack=seq[dst]) / payload
        p.time = t[0]
        t[0] += 0.001
        seq[src] += len(payload) + (1 if "S" in flags or "F" in flags else 0)
        out.append(p)

    pkt(c, flags="S")
    pkt(s, flags="SA")
    pkt(c, flags="A")
    pkt(c, bytes(AMQPProtocolHeader()))
    pkt(
        s,
        bytes(
            AMQP(
                method="connection.start",
                version_major=0,
                version_minor=9,
                server_properties={"product": "crafted"},
                mechanisms="PLAIN",
                locales="en_US",
            )
        ),
    )
    pkt(
        c,
        bytes(
            AMQP(
                method="connection.start-ok",
                client_properties={"product": "scapy"},
                mechanism="PLAIN",
                response=b"\0guest\0guest",
                locale="en_US",
            )
        ),
    )
    pkt(s, bytes(AMQP(method="connection.tune", channel_max=10, frame_max=4096, heartbeat=0)))
    pkt(c, bytes(AMQP(method="connection.tune-ok", channel_max=10, frame_max=4096, heartbeat=0)))
    pkt(c, bytes(AMQP(method="connection.open", virtual_host="/")))
    pkt(s, bytes(AMQP(method="connection.open-ok")))
    pkt(c, bytes(AMQP(method="channel.open", channel=1)))
    pkt(s, bytes(AMQP(method="channel.open-ok", channel=1)))
    pkt(
        c,
        bytes(
            AMQP(method="basic.publish", channel=1, exchange="ex", routing_key="rk")
            / header_class("0-9-1")(channel=1, body_size=5, content_type="text/plain")
            / AMQPBody(channel=1, data=b"hello")
        ),
    )
    pkt(c, bytes(AMQP(method="connection.close", reply_code=200, reply_text="bye")))
    pkt(s, bytes(AMQP(method="connection.close-ok")))
    pkt(c, flags="FA")
    pkt(s, flags="FA")
    return out


def test_crafted_packets_are_dissected_like_a_capture():
    t = amqpcap.dissect_packets(_conversation())
    assert list(t.methods.method) == [
        "connection.start",
        "connection.start-ok",
        "connection.tune",
        "connection.tune-ok",
        "connection.open",
        "connection.open-ok",
        "channel.open",
        "channel.open-ok",
        "basic.publish",
        "connection.close",
        "connection.close-ok",
    ]
    assert list(t.messages.body) == [b"hello"] and list(t.messages.content_type) == ["text/plain"]
    conn = t.connections.iloc[0]
    assert conn.client_version == "0-9-1" and conn.closed_by in ("client", "client-fin")
    assert conn.server_product == "crafted" and t.connections.iloc[0].user == "guest"
    assert t.source is None
    assert set(t.methods.capture) == {"packets"}
    assert len(t.anomalies) == 0


def test_float_times_from_sniff_keep_microseconds():
    assert timestamp_ns(1_700_000_000.123456) == 1_700_000_000_123_456_000


def test_a_packet_without_a_known_link_layer_is_reported_not_dropped():
    from scapy.packet import Raw

    pkts = _conversation()
    odd = Raw(b"\x00" * 20)
    odd.time = 1_700_000_001.0
    t = amqpcap.dissect_packets(pkts + [odd])
    assert len(t.methods) == 11
    assert list(t.anomalies.kind) == ["unsupported-link-type"]
