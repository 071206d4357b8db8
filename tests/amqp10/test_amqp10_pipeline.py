"""AMQP 1.0 through the whole pipeline: a synthetic capture (scapy) -> Parquet rows, and show."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from amqp10_wire import (
    AMQP_HEADER,
    SASL_HEADER,
    Raw,
    Sym,
    UInt,
    accepted,
    application_properties,
    attach,
    begin,
    close,
    data,
    detach,
    disposition,
    error,
    flow,
    frame,
    list_,
    message_annotations,
    open_,
    perf,
    properties,
    sasl_init,
    sasl_mechanisms,
    sasl_outcome,
    string,
    transfer,
)
from fixtures import pcapgen as P

from amqpcap.pipeline import dissect

PAYLOAD = bytes(range(256)) * 12  # 3 kB: four transfers at max-frame-size 1024


def conversation(header=SASL_HEADER):
    msg = properties(message_id="id-1", to="/exchanges/amq.topic/a.b", content_type=Sym("text/plain")) + data(
        PAYLOAD
    )
    chunks = [msg[i : i + 1000] for i in range(0, len(msg), 1000)]
    transfers = [frame(transfer(0, 7, b"t7", more=True) + chunks[0])]
    transfers += [frame(transfer(0, more=i < len(chunks) - 1) + c) for i, c in enumerate(chunks[1:], 1)]
    client = [header]
    if header == SASL_HEADER:
        client += [frame(sasl_init("PLAIN", b"\0guest\0hunter2"), ftype=1), AMQP_HEADER]
    client += [
        frame(open_("client-c", "vhost:/", max_frame=1024, idle=60000))
        + frame(begin())
        + frame(attach("pub-link", 0, False, tgt="/exchanges/amq.topic/a.b"))
        + frame(attach("missing", 1, True, src="/queues/nope")),
        b"".join(transfers),
        frame(b""),
        frame(close()),
    ]
    server = [header]
    if header == SASL_HEADER:
        server += [frame(sasl_mechanisms("PLAIN"), ftype=1) + frame(sasl_outcome(0), ftype=1), AMQP_HEADER]
    server += [
        frame(
            open_("rabbit@x", max_frame=131072, props={Sym("product"): "RabbitMQ", Sym("version"): "4.1.0"})
        )
        + frame(begin(0))
        + frame(attach("pub-link", 0, True, tgt="/exchanges/amq.topic/a.b"))
        + frame(flow(0, 0, 100)),
        frame(attach("missing", 1, False, src="/queues/nope"))
        + frame(detach(1, True, error("amqp:not-found", "no queue 'nope'"))),
        frame(disposition(True, 7, None, True, accepted())),
        frame(close()),
    ]
    return P.tcp_conversation(client_chunks=client, server_chunks=server, server=("10.0.0.2", 5672))


def run(tmp_path, segs, **kw):
    path = P.write(tmp_path / "c.pcap", P.pcap_bytes(P.to_packets(segs)))
    dissect([str(path)], str(tmp_path / "out"), **kw)
    tables = ("connections", "methods", "messages", "anomalies") + (("frames",) if kw.get("frames") else ())
    return {t: pq.read_table(tmp_path / "out" / t).to_pylist() for t in tables}, path


def test_a_1_0_conversation_gives_methods_messages_and_its_connection(tmp_path):
    t, _ = run(tmp_path, conversation())
    assert t["anomalies"] == []
    (c,) = t["connections"]
    assert (c["client_version"], c["version"], c["negotiation"]) == ("1.0-sasl", "1.0", "accepted")
    assert (c["mechanism"], c["user"], c["vhost"]) == ("PLAIN", "guest", "vhost:/")
    assert (c["client_container_id"], c["server_container_id"]) == ("client-c", "rabbit@x")
    assert (c["frame_max"], c["idle_timeout_ms"], c["server_product"], c["server_product_version"]) == (
        1024,
        60000,
        "RabbitMQ",
        "4.1.0",
    )
    names = [(r["direction"], r["method"]) for r in t["methods"]]
    assert [n for d, n in names if d == "c2s"][:2] == ["sasl.init", "open"]
    assert ("s2c", "sasl.outcome") in names and names.count(("c2s", "transfer")) == 4
    assert all(r["version"] == "1.0" for r in t["methods"])
    init = next(r for r in t["methods"] if r["method"] == "sasl.init")
    assert (
        "hunter2" not in init["arguments"]
        and json.loads(init["arguments"])["initial-response"]["user"] == "guest"
    )
    tr = [r for r in t["methods"] if r["method"] == "transfer"]
    assert [(r["link_name"], r["delivery_id"], r["more"]) for r in tr] == [
        ("pub-link", 7, True),
        ("pub-link", None, True),
        ("pub-link", None, True),
        ("pub-link", None, False),
    ]
    det = next(r for r in t["methods"] if r["method"] == "detach")
    assert (det["link_name"], det["source"], det["condition"], det["reply_text"]) == (
        "missing",
        "/queues/nope",
        "amqp:not-found",
        "no queue 'nope'",
    )
    disp = next(r for r in t["methods"] if r["method"] == "disposition")
    assert (disp["role"], disp["delivery_id"], disp["id_ranges"], disp["outcome"], disp["settled"]) == (
        "receiver",
        7,
        [{"lower": 7, "upper": 7}],
        "accepted",
        True,
    )
    fl = next(r for r in t["methods"] if r["method"] == "flow")
    assert (fl["link_name"], fl["link_credit"], fl["delivery_count"]) == ("pub-link", 100, 0)
    (m,) = t["messages"]
    assert (m["method"], m["exchange"], m["routing_key"], m["message_id"], m["content_type"]) == (
        "transfer",
        "amq.topic",
        "a.b",
        "id-1",
        "text/plain",
    )
    assert (m["body_size"], m["body_frames"], m["complete"]) == (len(PAYLOAD), 4, True)
    assert m["body_hash"] == hashlib.sha256(PAYLOAD).hexdigest() and m["body"] == PAYLOAD[:64]
    assert (m["link_name"], m["delivery_id"], m["settled"], m["outcome"]) == ("pub-link", 7, True, "accepted")
    assert m["settle_ts"] == disp["ts"] and m["first_frame_number"] == tr[0]["frame_number"]
    assert c["heartbeats_c2s"] == 1


def test_keep_secrets_keeps_the_sasl_password(tmp_path):
    t, _ = run(tmp_path, conversation(), keep_secrets=True)
    init = next(r for r in t["methods"] if r["method"] == "sasl.init")
    assert base64.b64decode(json.loads(init["arguments"])["initial-response"]["$b64"]) == b"\0guest\0hunter2"


def test_a_1_0_conversation_without_sasl_decodes_the_same(tmp_path):
    t, _ = run(tmp_path, conversation(AMQP_HEADER))
    (c,) = t["connections"]
    assert (c["client_version"], c["version"], c["mechanism"]) == ("1.0", "1.0", None)
    assert [r["method"] for r in t["methods"]][:2] == ["open", "begin"]
    assert len(t["messages"]) == 1 and t["anomalies"] == []


def test_a_1_0_capture_started_mid_stream_is_recognised_from_frame_shape(tmp_path):
    segs = conversation(AMQP_HEADER)
    data_segs = [s for s in segs if s.payload]
    cut = [s for s in segs if s not in data_segs[:2]]  # both protocol headers lost
    t, _ = run(tmp_path, cut)
    (c,) = t["connections"]
    assert (c["version"], c["version_evidence"], c["mid_stream"]) == ("1.0", "inferred", True)
    assert "transfer" in [r["method"] for r in t["methods"]]
    assert len(t["messages"]) == 1


def test_show_prints_one_line_per_performative_with_its_key_fields(tmp_path):
    _, path = run(tmp_path, conversation())
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "amqpcap.cli",
            "show",
            str(path),
            "--method",
            "attach",
            "--method",
            "disposition",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    lines = [x for x in out.stdout.splitlines() if not x.startswith("#")]
    assert len(lines) == 5
    assert (
        "attach" in lines[0] and "link=pub-link" in lines[0] and "target=/exchanges/amq.topic/a.b" in lines[0]
    )
    assert "disposition" in lines[-1] and "range=7" in lines[-1] and "outcome=accepted" in lines[-1]


@pytest.mark.parametrize("cut", [37, 500, 1500])
def test_a_1_0_capture_cut_anywhere_accounts_for_every_byte(tmp_path, cut):
    client = P.stream_bytes(conversation(), "c2s")[:cut]
    segs = P.tcp_conversation(client_chunks=[client], server=("10.0.0.2", 5672), close=None)
    t, _ = run(tmp_path, segs, frames=True)
    (c,) = t["connections"]
    assert c["version"] == "1.0"
    kinds = {a["kind"] for a in t["anomalies"]}
    assert kinds <= {"truncated-stream", "incomplete-content"} and "truncated-stream" in kinds
    lost = sum(a["skipped_bytes"] for a in t["anomalies"] if a["kind"] == "truncated-stream")
    headers = client.count(b"AMQP") * 8
    assert headers + sum(f["wire_size"] for f in t["frames"]) + lost == cut


@pytest.mark.parametrize(
    "delivery_id",
    [string("7"), b"\x82" + struct.pack(">d", 7.0), list_([UInt(7)])],
    ids=["string", "double", "list"],
)
def test_a_transfer_whose_delivery_id_is_no_uint_is_an_anomaly_and_the_capture_decodes(tmp_path, delivery_id):
    """A hostile transfer's delivery-id (not a uint) keeps its messages row, unsettled, with an
    anomaly; a later disposition over a wide range settles the other deliveries."""
    hostile = perf(0x14, [UInt(0), Raw(delivery_id), b"tx", UInt(0)]) + data(b"hostile")
    link = frame(attach("pub", 0, False, tgt="/queues/q")), frame(attach("pub", 0, True, tgt="/queues/q"))
    segs = P.tcp_conversation(
        [
            ("c2s", AMQP_HEADER),
            ("s2c", AMQP_HEADER),
            ("c2s", frame(open_("client-c")) + frame(begin()) + link[0]),
            ("s2c", frame(open_("rabbit@x")) + frame(begin(0)) + link[1]),
            ("c2s", frame(transfer(0, 5, b"t5") + data(b"five"))),
            ("c2s", frame(hostile)),
            ("c2s", frame(transfer(0, 6, b"t6") + data(b"six"))),
            ("s2c", frame(disposition(True, 0, 100, True, accepted()))),
            ("c2s", frame(transfer(0, 7, b"t7") + data(b"seven"))),
            ("s2c", frame(disposition(True, 7, None, True, accepted()))),
            ("c2s", frame(close())),
            ("s2c", frame(close())),
        ]
    )
    t, _ = run(tmp_path, segs)
    assert [(m["delivery_id"], m["settled"], m["outcome"]) for m in t["messages"]] == [
        (None, False, None),  # released at once: no disposition can name it
        (5, True, "accepted"),
        (6, True, "accepted"),
        (7, True, "accepted"),
    ]
    (a,) = t["anomalies"]
    assert a["kind"] == "malformed-performative" and "delivery-id" in a["detail"]
    assert [r["method"] for r in t["methods"]].count("close") == 2


def test_a_map_with_binary_keys_is_written_with_each_key_as_its_text(tmp_path):
    """A binary map key (legal on the wire, no JSON object's key) is kept as its Python text in
    the message's JSON columns, as a list key is; the capture decodes whole, no anomaly."""
    msg = message_annotations({b"ann": 1, Sym("x-opt"): 2}) + application_properties({b"k": "v", "n": 3})
    segs = P.tcp_conversation(
        [
            ("c2s", AMQP_HEADER),
            ("s2c", AMQP_HEADER),
            ("c2s", frame(open_("client-c")) + frame(begin())),
            ("c2s", frame(attach("pub", 0, False, tgt="/queues/q"))),
            ("c2s", frame(transfer(0, 0, b"t0") + msg + data(b"body"))),
            ("c2s", frame(close())),
            ("s2c", frame(close())),
        ]
    )
    t, _ = run(tmp_path, segs)
    (m,) = t["messages"]
    assert json.loads(m["headers"]) == {"b'k'": "v", "n": 3}
    assert json.loads(m["properties"])["message-annotations"] == {"b'ann'": 1, "x-opt": 2}
    assert m["body_size"] == 4
    assert t["anomalies"] == []


@pytest.mark.parametrize("settling", [0, 1])
def test_a_delivery_settled_before_its_last_transfer_keeps_its_transfers_arguments(tmp_path, settling):
    """A delivery over three transfers, the first (``settling`` 0) or the second (1) of them
    settled, the first two in one packet and the last in the next: the first transfer's methods
    row is written before the delivery ends, with the fields the transfer carries and nothing of
    the decoder's; the messages row is settled."""
    msg = properties(message_id="m") + data(b"z" * 600)
    first = transfer(0, 7, b"t7", settled=True if settling == 0 else None, more=True)
    second = transfer(0, settled=True if settling == 1 else None, more=True)
    segs = P.tcp_conversation(
        [
            ("c2s", AMQP_HEADER),
            ("s2c", AMQP_HEADER),
            ("c2s", frame(open_("c")) + frame(begin()) + frame(attach("l", 0, False, tgt="/queues/q"))),
            ("s2c", frame(open_("s")) + frame(begin(0)) + frame(attach("l", 0, True, tgt="/queues/q"))),
            ("c2s", frame(first + msg[:200]) + frame(second + msg[200:400])),
            ("c2s", frame(transfer(0) + msg[400:])),
            ("c2s", frame(close())),
            ("s2c", frame(close())),
        ],
        server=("10.0.0.2", 5672),
    )
    t, _ = run(tmp_path, segs)
    args = [json.loads(m["arguments"]) for m in t["methods"] if m["method"] == "transfer"]
    assert args == [
        {"handle": 0, "delivery-id": 7, "delivery-tag": {"$b64": "dDc="}, "message-format": 0, "more": True}
        | ({"settled": True} if settling == 0 else {}),
        {"handle": 0, "more": True} | ({"settled": True} if settling == 1 else {}),
        {"handle": 0},
    ]
    (m,) = t["messages"]
    assert m["settled"] is True
