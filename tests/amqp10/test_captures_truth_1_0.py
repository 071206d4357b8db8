"""The recorded AMQP 1.0 captures against their clients' logs (captures/rabbitmq10_*.truth.json).

Every frame the client logged as on the wire is a methods row of its connection, in order,
named and sized as logged; every message it sent or received is one messages row with its
delivery-id, link, message-id and body (size and SHA-256 of a data body), reassembled however
many transfers carried it; the outcomes it saw and the settlements it made are the rows'
outcomes; the connection's container-id, user and the broker's product come from the log.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from amqpcap.pipeline import dissect

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
RECORDED = sorted(CAPTURES.glob("rabbitmq10_*.pcap"))


@pytest.fixture(scope="module", params=RECORDED, ids=[c.name for c in RECORDED])
def recorded(request, tmp_path_factory):
    cap = request.param
    truth = json.loads(cap.with_suffix(".truth.json").read_text())
    out = tmp_path_factory.mktemp(cap.stem) / "out"
    dissect([str(cap)], str(out))
    tables = {t: pd.read_parquet(out / t) for t in ("connections", "methods", "messages", "anomalies")}
    return truth, tables


def _v10(truth) -> list:
    """The 1.0 connections of a recording (a cross-protocol one has 0-9-1 ones too)."""
    return [c for c in truth["connections"] if c.get("protocol", "AMQP 1.0") == "AMQP 1.0"]


def _rows(df, stream, direction=None):
    d = df[df["tcp_stream"] == stream]
    if direction is not None:
        d = d[d["direction"] == direction]
    return d.sort_values(["frame_number", "stream_offset"], kind="stable")


def test_the_recordings_have_connections_and_no_anomalies_of_their_own(recorded):
    truth, t = recorded
    assert len(t["connections"]) == len(truth["connections"])
    ours = t["connections"].set_index("tcp_stream")["version"]
    assert {c["tcp_stream"]: ours[c["tcp_stream"]] for c in _v10(truth)} == {
        c["tcp_stream"]: "1.0" for c in _v10(truth)
    }
    v10 = {c["tcp_stream"] for c in _v10(truth)}
    a = t["anomalies"]
    assert list(a[a["tcp_stream"].isin(v10)]["kind"]) == []
    # RabbitMQ hands a 1.0 creation-time (ms) to a 0-9-1 consumer as its timestamp property
    # unchanged: no seconds timestamp holds it, so that column is null with an anomaly.
    other = a[~a["tcp_stream"].isin(v10)]
    assert set(other["kind"]) <= {"value-out-of-range"}
    assert all(d.startswith("timestamp property ") for d in other["detail"])


def _unlogged(truth, stream: int, direction: str) -> int:
    """Frames the capture has after the last one the client logged (it had stopped reading), as
    the recorder notes them."""
    pattern = rf"tcp\.stream {stream} {direction}: the capture has (\d+) frame\(s\) after the last one"
    return sum(int(m.group(1)) for n in truth["notes"] if (m := re.match(pattern, n)))


def test_every_logged_frame_is_a_methods_row_in_order_with_its_size(recorded):
    """... and every empty frame it logged is a heartbeat of its connection."""
    truth, t = recorded
    conns = t["connections"].set_index("tcp_stream")
    for c in _v10(truth):
        for d in ("c2s", "s2c"):
            on_wire = [f for f in c["frames"] if f["dir"] == d and f.get("on_wire", True)]
            logged = [(f["performative"], f["size"]) for f in on_wire if f["performative"] != "empty"]
            beats = conns.loc[c["tcp_stream"], f"heartbeats_{d}"]
            assert beats == sum(f["performative"] == "empty" for f in on_wire), (c["tcp_stream"], d)
            rows = _rows(t["methods"], c["tcp_stream"], d)
            ours = list(zip(rows["method"], rows["frame_size"]))
            assert ours[: len(logged)] == logged, (c["tcp_stream"], d)
            assert len(ours) == len(logged) + _unlogged(truth, c["tcp_stream"], d)


def _message_row(t, stream, direction, delivery_id, link):
    m = _rows(t["messages"], stream, direction)
    hit = m[(m["delivery_id"] == delivery_id) & (m["link_name"] == link)]
    assert len(hit) == 1, (stream, direction, delivery_id, link)
    return hit.iloc[0]


def _check_message(row, logged):
    msg = logged["message"]
    mid = msg.get("message_id")
    if isinstance(mid, str):
        assert row["message_id"] == mid
    if msg.get("body_kind") == "data":
        assert row["body_size"] == msg["body_len"]
        assert row["body_hash"] == msg["body_sha256"]
    assert row["complete"]


def test_every_message_sent_or_received_is_one_reassembled_row(recorded):
    truth, t = recorded
    multi = 0
    for c in _v10(truth):
        for direction, key in (("c2s", "sends"), ("s2c", "receives")):
            for logged in c[key]:
                row = _message_row(t, c["tcp_stream"], direction, logged["delivery_id"], logged["link"])
                _check_message(row, logged)
                multi += row["body_frames"] > 1
        assert len(_rows(t["messages"], c["tcp_stream"], "c2s")) == len(c["sends"])
        assert len(_rows(t["messages"], c["tcp_stream"], "s2c")) == len(c["receives"])
    if "frames512" in truth["capture"]:
        assert multi >= 6  # the 3 kB and 20 kB messages, both ways, over many transfers


def test_outcomes_and_settlements_are_those_the_clients_logged(recorded):
    truth, t = recorded
    for c in _v10(truth):
        for o in c["outcomes"]:  # what the broker told the sender
            row = _message_row(t, c["tcp_stream"], "c2s", o["delivery_id"], o["link"])
            assert row["outcome"] == o["outcome"]
            # (rhea logs the settlement with the outcome; Proton's callback may come before it)
            assert row["settled"] or not o["remote_settled"]
        on_wire = {(f["dir"], f["performative"]) for f in c["frames"] if f.get("on_wire", True)}
        for s in c["settles"]:  # what the consumer settled (a refused state closes the session)
            row = _message_row(t, c["tcp_stream"], "s2c", s["delivery_id"], s["link"])
            if ("c2s", "disposition") in on_wire:
                assert row["outcome"] == s["outcome"], s
        for logged in c["sends"]:
            if logged.get("presettled", logged["settled"]):  # (Proton logs it as presettled)
                row = _message_row(t, c["tcp_stream"], "c2s", logged["delivery_id"], logged["link"])
                assert row["settled"] and pd.isna(row["outcome"])


def test_error_conditions_are_the_ones_the_clients_saw(recorded):
    truth, t = recorded
    for c in _v10(truth):
        ours = _rows(t["methods"], c["tcp_stream"])
        seen = set(zip(ours["condition"], ours["reply_text"]))
        for e in c["errors"]:
            if "condition" not in e:  # a socket error, or one without an AMQP error
                continue
            assert (e["condition"], e["description"]) in seen


def test_connection_facts_match_the_log(recorded):
    truth, t = recorded
    conns = t["connections"].set_index("tcp_stream")
    for c in _v10(truth):
        row = conns.loc[c["tcp_stream"]]
        assert row["user"] == c["user"] and row["mechanism"] == "PLAIN"
        s2c = _rows(t["methods"], c["tcp_stream"], "s2c")
        code = s2c[s2c["method"] == "sasl.outcome"]["code"].iloc[0]
        if c.get("password") == truth["credentials"]["wrong_password"]:
            assert code == 1  # auth: the refused login
            assert pd.isna(row["client_container_id"])  # its open never reached the wire
            continue
        assert code == 0
        assert row["client_container_id"] == c["container_id"]
        assert row["server_container_id"] == c["remote"]["container_id"]
        assert row["server_product"] == c["remote"]["properties"]["product"]
        assert row["server_product_version"] == c["remote"]["properties"]["version"]
        ours = _rows(t["methods"], c["tcp_stream"], "c2s")
        init = json.loads(ours[ours["method"] == "sasl.init"]["arguments"].iloc[0])
        assert init["initial-response"] == {"user": c["user"], "password": "<redacted>"}
