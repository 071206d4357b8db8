"""Differential test: amqpcap against Wireshark's AMQP dissector (tshark) on real 0-9-1 captures.

For every method frame tshark decodes, amqpcap must have a methods row with
the same packet number (frame.number), TCP stream (tcp.stream), channel,
class, method and key arguments, and the reverse: every amqpcap method row
must be one tshark shows.  Places where tshark is known to be wrong are
listed in KNOWN_TSHARK_ERRORS with the reason (docs/dialects.md).

tshark must be installed in CI (scripts/test.sh installs it); elsewhere the
test skips and says why, unless AMQPCAP_REQUIRE_TOOLS is set.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pandas as pd
import pytest
from fixtures.tshark import amqp_pdus, tshark

from amqpcap.pipeline import dissect

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
CAPS_091 = sorted(CAPTURES.glob("rabbitmq091_*.pcap"))

# tshark field -> our methods column
ARGS = {
    "amqp.method.arguments.exchange": "exchange",
    "amqp.method.arguments.routing_key": "routing_key",
    "amqp.method.arguments.queue": "queue",
    "amqp.method.arguments.consumer_tag": "consumer_tag",
    "amqp.method.arguments.delivery_tag": "delivery_tag",
    "amqp.method.arguments.reply_code": "reply_code",
    "amqp.method.arguments.prefetch_count": "prefetch_count",
}

# (class_id, method_id) pairs where tshark 4.0's decode is wrong, and why.
KNOWN_TSHARK_ERRORS: dict = {}


def tshark_methods(exe: str, capture: Path) -> list[dict]:
    rows = []
    for number, stream, fields in amqp_pdus(exe, capture):
        if fields.get("amqp.type") != "1":
            continue
        row = {
            "frame_number": number,
            "tcp_stream": stream,
            "channel": int(fields["amqp.channel"]),
            "class_id": int(fields["amqp.method.class"]),
            "method_id": int(fields["amqp.method.method"]),
        }
        for tf, col in ARGS.items():
            if tf in fields:
                row[col] = fields[tf]
        rows.append(row)
    return rows


def _norm(v):
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return None
    if isinstance(v, bool):
        return str(int(v))
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


@pytest.mark.parametrize("capture", CAPS_091, ids=[c.name for c in CAPS_091])
def test_every_method_frame_agrees_with_tshark(capture, tmp_path):
    exe = tshark()
    theirs = tshark_methods(exe, capture)
    assert theirs, f"tshark decoded no AMQP methods in {capture.name}"
    dissect([str(capture)], str(tmp_path / "out"))
    ours = pd.read_parquet(tmp_path / "out" / "methods")
    key = ("frame_number", "tcp_stream", "channel", "class_id", "method_id")
    mine = collections.Counter(tuple(int(r[k]) for k in key) for r in ours[list(key)].to_dict("records"))
    seen = collections.Counter(
        tuple(r[k] for k in key) for r in theirs if (r["class_id"], r["method_id"]) not in KNOWN_TSHARK_ERRORS
    )
    for k in KNOWN_TSHARK_ERRORS:
        mine = collections.Counter({m: n for m, n in mine.items() if (m[3], m[4]) != k})
    assert seen - mine == collections.Counter(), (
        f"tshark saw methods amqpcap missed: {list(seen - mine)[:10]}"
    )
    assert mine - seen == collections.Counter(), (
        f"amqpcap has methods tshark does not: {list(mine - seen)[:10]}"
    )
    # Key arguments, method by method (same order within a packet in both tools).
    ours_by = collections.defaultdict(list)
    for r in ours.to_dict("records"):
        ours_by[tuple(int(r[k]) for k in key)].append(r)
    mismatches = []
    for t in theirs:
        k = tuple(t[c] for c in key)
        if (t["class_id"], t["method_id"]) in KNOWN_TSHARK_ERRORS:
            continue
        o = ours_by[k].pop(0)
        for col in ARGS.values():
            if col in t and _norm(o[col]) != _norm(t[col]):
                mismatches.append((k, col, o[col], t[col]))
    assert not mismatches, f"{len(mismatches)} argument mismatches, first: {mismatches[:5]}"


def test_differential_test_has_captures():
    assert CAPS_091, "no 0-9-1 captures in captures/"
