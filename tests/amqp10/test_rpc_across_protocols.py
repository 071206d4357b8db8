"""RPC across protocols on a recorded capture: a 1.0 requester (Qpid Proton) answered by a
0-9-1 responder (pika), and a 0-9-1 requester answered by a 1.0 responder, through one RabbitMQ.
The clients' own logs (the truth's ``rpc`` list: each request, the reply that carries its
correlation-id and that reply's delivery) say what every pair must be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amqpcap.analysis import load, rpc_replies

PCAP = Path(__file__).resolve().parents[2] / "captures" / "rabbitmq10_proton_pika_rpc.pcap"
TRUTH = json.loads(PCAP.with_suffix(".truth.json").read_text())


@pytest.fixture(scope="module")
def tables():
    return load(str(PCAP))


def _at(messages, frame: int) -> dict:
    """The messages row of packet ``frame`` (one message a packet in this capture)."""
    (row,) = messages[messages["frame_number"] == frame].to_dict("records")
    return row


def test_the_truth_has_both_directions_across_protocols():
    kinds = [(p["request"]["protocol"], p["reply"]["protocol"]) for p in TRUTH["rpc"]]
    assert kinds == [("AMQP 1.0", "AMQP 0-9-1")] * 3 + [("AMQP 0-9-1", "AMQP 1.0")] * 3
    assert all(
        p["delivered"] and p["delivered"]["tcp_stream"] == p["request"]["tcp_stream"] for p in TRUTH["rpc"]
    )


def test_every_request_is_paired_with_the_reply_and_delivery_the_clients_logged(tables):
    got = rpc_replies.rpc(tables)
    assert got["correlation_id"].tolist() == [p["correlation_id"] for p in TRUTH["rpc"]]
    for row, want in zip(got.to_dict("records"), TRUTH["rpc"]):
        assert row["status"] == "ok" and row["reply_to"] == want["reply_to"]
        for side, frame in (
            ("request", "request_frame"),
            ("reply", "response_frame"),
            ("delivered", "delivered_frame"),
        ):
            msg = _at(tables.messages, row[frame])
            truth = want[side]
            assert (msg["tcp_stream"], msg["method"], msg["message_id"]) == (
                truth["tcp_stream"],
                truth["method"],
                truth["message_id"],
            ), (want["correlation_id"], side)
        assert (row["request_method"], row["response_method"]) == (
            want["request"]["method"],
            want["reply"]["method"],
        )
        assert (row["tcp_stream"], row["response_tcp_stream"]) == (
            want["request"]["tcp_stream"],
            want["reply"]["tcp_stream"],
        )
        assert 0 < row["latency_ms"] < row["client_latency_ms"]


def test_stats_json_counts_every_pair_and_misses_none(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "amqpcap.cli", "stats", str(PCAP), "--json"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path)),
    )
    section = json.loads(p.stdout)["latency"]["rpc"]
    assert (section["count"], section["missing"]) == (len(TRUTH["rpc"]), 0)
    assert 0 < section["p50_ms"] <= section["max_ms"]
