"""Differential test: amqpcap against Wireshark's AMQP 1.0 dissector (tshark).

Every AMQP 1.0 frame tshark decodes (a performative or SASL frame) must be a methods row of
amqpcap's in the same packet and TCP stream, with the same performative, handle,
delivery-id, more, settled, first / last and outcome, and the reverse.  Wireshark decodes each
frame alone: the messages a delivery's transfers carry are checked against the clients' logs
(the recordings' truth files) instead.

Run on the recorded 1.0 captures in captures/ and on synthetic conversations (SASL, a message
over several transfers, every outcome).  tshark must be installed (scripts/test.sh installs it);
elsewhere the test skips unless AMQPCAP_REQUIRE_TOOLS is set.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pandas as pd
import pytest
from amqp10_wire import (
    AMQP_HEADER,
    accepted,
    attach,
    begin,
    close,
    data,
    disposition,
    flow,
    frame,
    modified,
    open_,
    rejected,
    released,
    transfer,
)
from fixtures import pcapgen as P
from fixtures.tshark import amqp_pdus, tshark
from test_amqp10_pipeline import conversation

from amqpcap.pipeline import dissect

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
RECORDED = sorted(CAPTURES.glob("rabbitmq10_*.pcap"))

OUTCOMES = ("accepted", "rejected", "released", "modified", "received")


def tshark_frames(exe: str, capture: Path, ports=()) -> list[tuple]:
    """(packet, stream, code, handle, delivery-id, more, settled, first, last, outcome) per frame."""
    rows = []
    for number, stream, fields in amqp_pdus(exe, capture, ports):
        code = fields.get("amqp.performative") or fields.get("amqp.sasl.method")
        if code is None:
            continue  # a protocol header or an empty frame
        # a delivery state of a transfer or disposition (an attach's source names a default one)
        state = next((o for o in OUTCOMES if f"amqp.delivery-state.{o}" in fields), None)
        if int(code) not in (0x14, 0x15):
            state = None

        num = _num_of(fields)
        flag = _flag_of(fields)
        rows.append(
            (
                number,
                stream,
                int(code),
                num("handle"),
                num("deliveryId"),
                flag("more"),
                flag("settled"),
                num("first"),
                num("last"),
                state,
            )
        )
    return rows


def _num_of(fields):
    def num(name):
        v = fields.get(f"amqp.performative.arguments.{name}")
        return int(v) if v is not None else None

    return num


def _flag_of(fields):
    return lambda name: fields.get(f"amqp.performative.arguments.{name}") == "1"


def _int(v):
    return None if v is None or pd.isna(v) else int(v)


def our_frames(methods: pd.DataFrame) -> list[tuple]:
    rows = []
    for r in methods.to_dict("records"):
        if r["version"] != "1.0":
            continue
        name = r["method"]
        rng = r["id_ranges"]
        first = _int(r["delivery_id"]) if name == "disposition" else None
        last = None
        if name == "disposition" and rng is not None and len(rng) and '"last"' in r["arguments"]:
            last = int(rng[0]["upper"])
        outcome = r["outcome"] if r["outcome"] in OUTCOMES else None
        rows.append(
            (
                int(r["frame_number"]),
                int(r["tcp_stream"]),
                int(r["method_id"]),
                _int(r["handle"]),
                _int(r["delivery_id"]) if name == "transfer" else None,
                r["more"] is True,
                r["settled"] is True,
                first,
                last,
                outcome,
            )
        )
    return rows


def synthetic_outcomes():
    """A sender link and a receiver link, every outcome, a range, a pre-settled delivery."""
    c2s = [
        AMQP_HEADER,
        frame(open_("c")) + frame(begin()) + frame(attach("out", 0, False, tgt="/queues/q")),
        b"".join(frame(transfer(0, i, bytes([i])) + data(b"m%d" % i)) for i in range(6)),
        frame(transfer(0, 6, b"6", settled=True) + data(b"pre")),
        frame(attach("in", 1, True, src="/queues/q")) + frame(flow(1, 0, 5)),
        frame(disposition(True, 0, None, True, released())),
        frame(close()),
    ]
    s2c = [
        AMQP_HEADER,
        frame(open_("s"))
        + frame(begin(0))
        + frame(attach("out", 0, True, tgt="/queues/q"))
        + frame(flow(0, 0, 10)),
        frame(disposition(True, 0, 1, True, accepted()))
        + frame(disposition(True, 2, None, True, rejected("x:y"))),
        frame(disposition(True, 3, None, True, modified()))
        + frame(disposition(True, 4, 5, True, released())),
        frame(attach("in", 1, False, src="/queues/q"))
        + frame(transfer(1, 0, b"a", more=True) + data(b"x" * 300)),
        frame(transfer(1, more=False) + data(b"y")),
        frame(close()),
    ]
    return P.tcp_conversation(client_chunks=c2s, server_chunks=s2c, server=("10.0.0.2", 5672))


def _synthetic(tmp_path, name, segs):
    return P.write(tmp_path / name, P.pcap_bytes(P.to_packets(segs)))


CASES = {"synthetic-sasl-multiframe": conversation, "synthetic-outcomes": synthetic_outcomes}


def _check(exe, capture: Path, tmp_path):
    theirs = tshark_frames(exe, capture)
    assert theirs, f"tshark decoded no AMQP 1.0 frames in {capture.name}"
    dissect([str(capture)], str(tmp_path / "out"))
    mine = our_frames(pd.read_parquet(tmp_path / "out" / "methods"))
    missed = collections.Counter(theirs) - collections.Counter(mine)
    extra = collections.Counter(mine) - collections.Counter(theirs)
    assert not missed and not extra, f"tshark only: {list(missed)[:5]}; amqpcap only: {list(extra)[:5]}"
    return mine


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_synthetic_1_0_frame_agrees_with_tshark(case, tmp_path):
    exe = tshark()
    mine = _check(exe, _synthetic(tmp_path, case + ".pcap", CASES[case]()), tmp_path)
    assert len(mine) >= 10


@pytest.mark.parametrize("capture", RECORDED, ids=[c.name for c in RECORDED])
def test_every_recorded_1_0_frame_agrees_with_tshark(capture, tmp_path):
    _check(tshark(), capture, tmp_path)
