"""AMQP 1.0 wire cases no local broker produces, as synthetic captures through dissect and
show: an aborted transfer, a SASL challenge / response exchange, the TLS protocol header."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from amqp10_wire import (
    AMQP_HEADER,
    SASL_HEADER,
    Sym,
    attach,
    begin,
    binary,
    close,
    data,
    frame,
    open_,
    perf,
    properties,
    sasl_init,
    sasl_mechanisms,
    sasl_outcome,
    transfer,
)
from fixtures import pcapgen as P

from amqpcap.cli import main
from amqpcap.pipeline import dissect

TLS_HEADER = b"AMQP\x02\x01\x00\x00"


def _tables(tmp_path, segs, **kw):
    cap = P.write(tmp_path / "c.pcap", P.pcap_bytes(P.to_packets(segs)))
    dissect([str(cap)], str(tmp_path / "out"), **kw)
    return {
        t: pq.read_table(tmp_path / "out" / t).to_pylist() for t in ("connections", "methods", "messages")
    }, cap


def _show(capsys, cap, *opts) -> list[str]:
    assert main(["show", str(cap), *opts]) == 0
    return [ln for ln in capsys.readouterr().out.splitlines() if ln and not ln.startswith("#")]


def _aborted():
    first = properties(message_id="gone", content_type=Sym("text/plain")) + data(b"a" * 300)
    kept = properties(message_id="kept") + data(b"b" * 10)
    client = [
        AMQP_HEADER,
        frame(open_("c")) + frame(begin()) + frame(attach("tx", 0, False, tgt="/queues/q")),
        frame(transfer(0, 0, b"t0", more=True) + first[:200]),
        frame(transfer(0, aborted=True)),  # the sender gives the delivery up
        frame(transfer(0, 1, b"t1", settled=True) + kept),
        frame(close()),
    ]
    server = [
        AMQP_HEADER,
        frame(open_("broker")) + frame(begin(0)) + frame(attach("tx", 0, True, tgt="/queues/q")),
        b"",
        b"",
        b"",
        frame(close()),
    ]
    return P.tcp_conversation(client_chunks=client, server_chunks=server)


def test_an_aborted_transfer_is_a_message_recorded_as_aborted(tmp_path, capsys):
    t, cap = _tables(tmp_path, _aborted())
    gone, kept = t["messages"]
    assert (gone["delivery_id"], gone["aborted"], gone["complete"], gone["body_frames"]) == (
        0,
        True,
        False,
        2,
    )
    assert (kept["delivery_id"], kept["aborted"], kept["complete"], kept["message_id"]) == (
        1,
        False,
        True,
        "kept",
    )
    transfers = [r for r in t["methods"] if r["method"] == "transfer"]
    assert [(r["delivery_id"], r["more"]) for r in transfers] == [(0, True), (None, False), (1, False)]
    lines = _show(capsys, cap, "--method", "transfer")
    assert len(lines) == 3 and "aborted=true" in lines[1] and "aborted" not in lines[0] + lines[2]


def _scram(response=b"c=biws,r=nonce1nonce2,p=cHJvb2Y="):
    challenge = b"r=nonce1nonce2,s=c2FsdA==,i=4096"
    client = [
        SASL_HEADER,
        frame(sasl_init("SCRAM-SHA-256", b"n,,n=alice,r=nonce1"), ftype=1),
        frame(perf(0x43, [binary(response)]), ftype=1),  # sasl-response
        AMQP_HEADER,
        frame(open_("c")) + frame(close()),
    ]
    server = [
        SASL_HEADER + frame(sasl_mechanisms("SCRAM-SHA-256", "PLAIN"), ftype=1),
        frame(perf(0x42, [binary(challenge)]), ftype=1),  # sasl-challenge
        frame(sasl_outcome(0), ftype=1) + AMQP_HEADER,
        frame(open_("broker")) + frame(close()),
    ]
    return P.tcp_conversation(client_chunks=client, server_chunks=server)


def test_a_sasl_challenge_and_response_are_methods_and_the_response_is_redacted(tmp_path, capsys):
    t, cap = _tables(tmp_path, _scram())
    names = [(r["direction"], r["method"]) for r in t["methods"]]
    assert names[:5] == [
        ("s2c", "sasl.mechanisms"),
        ("c2s", "sasl.init"),
        ("s2c", "sasl.challenge"),
        ("c2s", "sasl.response"),
        ("s2c", "sasl.outcome"),
    ]
    (c,) = t["connections"]
    assert (c["mechanism"], c["version"], c["negotiation"]) == ("SCRAM-SHA-256", "1.0", "accepted")
    resp = next(r for r in t["methods"] if r["method"] == "sasl.response")
    assert json.loads(resp["arguments"]) == {"response": "<redacted>"}
    challenge = next(r for r in t["methods"] if r["method"] == "sasl.challenge")
    assert "challenge" in json.loads(challenge["arguments"])  # the server's challenge is no secret
    lines = _show(capsys, cap, "--method", "sasl.response")
    assert len(lines) == 1 and "response=<redacted>" in lines[0] and "cHJvb2Y" not in lines[0]


def test_keep_secrets_keeps_the_sasl_response(tmp_path):
    t, _ = _tables(tmp_path, _scram(), keep_secrets=True)
    resp = next(r for r in t["methods"] if r["method"] == "sasl.response")
    assert json.loads(resp["arguments"])["response"] != "<redacted>"
    assert "<redacted>" not in resp["arguments"]


def test_the_tls_header_is_recorded_and_the_rest_counted_as_encrypted_bytes(tmp_path, capsys):
    hello = b"\x16\x03\x01\x00\x30" + bytes(range(48))
    app = b"\x17\x03\x03\x00\x10" + b"x" * 16
    segs = P.tcp_conversation(client_chunks=[TLS_HEADER, hello, app], server_chunks=[TLS_HEADER, hello[:37]])
    t, cap = _tables(tmp_path, segs)
    (c,) = t["connections"]
    assert (c["client_version"], c["version"], c["tls"], c["negotiation"]) == (
        "1.0-tls",
        "1.0-tls",
        True,
        "accepted",
    )
    assert (c["client_header"], c["server_header"]) == ("02010000", "02010000")
    # every byte after the headers is TLS: counted, not decoded into any row
    assert (c["bytes_c2s"] - 8, c["bytes_s2c"] - 8) == (len(hello) + len(app), 37)
    assert t["methods"] == [] and t["messages"] == []
    assert _show(capsys, cap) == []
