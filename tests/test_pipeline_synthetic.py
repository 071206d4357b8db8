"""End to end on synthetic captures: capture file -> dissect() -> Parquet -> pyarrow.

Every capture is built from one known AMQP 0-9-1 conversation
(``fixtures/amqpconv.py``) so each test can say exactly which rows, frame
numbers, stream offsets and tcp_stream values the output must hold: the
TCP cases (loss, reordering, retransmission, overlap, wraparound, mid-stream
start, snaplen), every link layer and file format, port handling, output
safety and the command line's exit codes; each with the packet loop in Python and compiled.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import random
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from fixtures import amqpconv as C
from fixtures import pcapgen as P
from fixtures.compiled import on_the_other_side

from amqpcap import compiled, pipeline
from amqpcap.capture.reader import CaptureError
from amqpcap.pipeline import dissect
from amqpcap.records.writer import DatasetWriter, OutputExists

MASK = 0xFFFFFFFF
TABLES = ("connections", "methods", "messages", "anomalies")
# columns that move when packets move
POSITION = ("capture", "frame_number", "ts", "first_frame_number", "last_frame_number")
MSG_KEYS = (
    "direction",
    "channel",
    "stream_offset",
    "method",
    "frame_number",
    "first_frame_number",
    "body_size",
    "body_received",
    "body_hash",
    "complete",
)


# -- helpers -------------------------------------------------------------------------------


def read(out) -> dict[str, list[dict]]:
    return {t: pq.read_table(os.path.join(out, t)).to_pylist() for t in TABLES}


def run_blob(tmp_path, blob: bytes, name: str = "cap.pcap", **kw) -> dict[str, list[dict]]:
    path = P.write(tmp_path / name, blob)
    out = tmp_path / (name + ".out")
    dissect([str(path)], str(out), **kw)
    return read(out)


def run(tmp_path, segs, name: str = "cap.pcap", linktype: int = 1, **kw) -> dict[str, list[dict]]:
    return run_blob(tmp_path, P.pcap_bytes(P.to_packets(segs, linktype)), name, **kw)


def order(rows, *extra):
    return sorted(
        rows,
        key=lambda r: (
            r["tcp_stream"] if r["tcp_stream"] is not None else -1,
            r.get("direction") or "",
            r.get("stream_offset") or 0,
            *(r[e] for e in extra),
        ),
    )


def strip(rows, drop=POSITION):
    return [{k: v for k, v in r.items() if k not in drop} for r in order(rows)]


def keys(rows, *cols):
    cols = cols or ("direction", "channel", "stream_offset", "method", "frame_number")
    return [{c: r[c] for c in cols} for r in order(rows)]


def fix_acks(segs, conv):
    """Make every ACK number one a receiver could have sent: never beyond the bytes
    it has (contiguously) received so far in this capture order."""
    have = {"c2s": set(), "s2c": set()}
    prefix = {"c2s": 0, "s2c": 0}
    other = {"c2s": "s2c", "s2c": "c2s"}
    for s in segs:
        o = other[s.direction]
        if "A" in s.flags and "S" not in s.flags:
            real = (conv.data_seq[o] + prefix[o]) & MASK
            # (once the whole stream is in, the original ACK may also cover the peer's FIN)
            if prefix[o] < len(conv.stream(o)) and 0 < (s.ack - real) & MASK < 1 << 31:
                s.ack = real
        if s.payload:
            start = (s.seq - conv.data_seq[s.direction]) & MASK
            have[s.direction].update(range(start, start + len(s.payload)))
            while prefix[s.direction] in have[s.direction]:
                prefix[s.direction] += 1
    return segs


@pytest.fixture(scope="module")
def conv():
    return C.standard()


@pytest.fixture(scope="module")
def baseline(conv, tmp_path_factory):
    """The conversation as captured in order: the reference every variant is compared to."""
    tmp = tmp_path_factory.mktemp("baseline")
    return run(tmp, conv.segments())


# -- the reference capture --------------------------------------------------------------------


def test_in_order_capture_matches_the_builder(conv, baseline):
    segs = conv.segments()
    t = baseline
    assert keys(t["methods"]) == C.expected_methods(conv, segs)
    assert {r["tcp_stream"] for r in t["methods"]} == {0}
    assert t["anomalies"] == []
    # message rows: hashes, sizes, first / completing packets from the builder
    assert keys(t["messages"], *MSG_KEYS) == C.expected_messages(conv, segs)
    for r in t["messages"]:
        assert r["last_frame_number"] == r["frame_number"]
    (c,) = t["connections"]
    assert (c["tcp_stream"], c["frame_number"], c["client_ip"], c["client_port"], c["server_port"]) == (
        0,
        1,
        "10.0.0.1",
        40000,
        5672,
    )
    assert c["mid_stream"] is False and c["direction_source"] == "syn" and c["version"] == "0-9-1"
    assert c["bytes_c2s"] == len(conv.stream("c2s")) and c["bytes_s2c"] == len(conv.stream("s2c"))
    assert c["packets_c2s"] == sum(s.direction == "c2s" for s in segs)
    assert c["packets_s2c"] == sum(s.direction == "s2c" for s in segs)
    assert c["frames_c2s"] == sum(f.direction == "c2s" for f in conv.frames)
    assert c["frames_s2c"] == sum(f.direction == "s2c" for f in conv.frames)
    assert (c["gaps"], c["gap_bytes"], c["anomalies"], c["rst"]) == (0, 0, 0, False)
    assert (c["user"], c["vhost"], c["frame_max"], c["closed_by"]) == ("guest", "/", 131072, "client")


@pytest.mark.parametrize("start", [None, "channel.open", "deliver-1/3"])
def test_frame_counts_and_liveness_are_the_same_with_or_without_the_frames_table(conv, tmp_path, start):
    """Without --frames the decoder tallies frames instead of making Frame events: the
    connection row cannot tell (whole capture, and mid-stream starts whose events are held)."""
    segs = conv.segments()
    if start is not None:
        segs = segs[conv.index(segs, start) :]
    blob = P.pcap_bytes(P.to_packets(segs, 1))
    plain = run_blob(tmp_path, blob, "plain.pcap")
    framed_out = tmp_path / "framed.out"
    dissect([str(P.write(tmp_path / "framed.pcap", blob))], str(framed_out), frames=True)
    framed = read(framed_out)
    frames = pq.read_table(os.path.join(framed_out, "frames")).to_pylist()
    (a,), (b,) = plain["connections"], framed["connections"]
    assert strip([a], ("capture",)) == strip([b], ("capture",))
    for d in ("c2s", "s2c"):
        assert a[f"frames_{d}"] == sum(f["direction"] == d for f in frames) > 0
        assert a[f"last_frame_ts_{d}"] == max(f["ts"] for f in frames if f["direction"] == d)
    for t in ("methods", "messages", "anomalies"):
        assert strip(plain[t], ("capture",)) == strip(framed[t], ("capture",))


def test_password_is_never_written(baseline):
    for rows in baseline.values():
        for r in rows:
            for v in r.values():
                assert C.PASSWORD not in str(v)


def test_segment_with_two_frames_and_the_start_of_a_third(conv, baseline):
    segs = conv.segments()
    first = conv.index(segs, "publish-2+3/1") + 1  # method + header + 20 body bytes
    second = conv.index(segs, "publish-2+3/2") + 1  # rest of that body + a whole publish
    pubs = [r for r in order(baseline["methods"]) if r["method"] == "basic.publish"]
    assert [r["frame_number"] for r in pubs] == [first - 2, first, second]
    assert [r["exchange"] for r in pubs] == ["", "amq.direct", ""]
    msgs = [r for r in order(baseline["messages"]) if r["method"] == "basic.publish"]
    assert [(r["first_frame_number"], r["frame_number"]) for r in msgs] == [
        (first - 2, first - 2),
        (first, second),
        (second, second),
    ]
    assert [r["body_hash"] for r in msgs] == [m.body_hash for m in conv.messages[:3]]
    assert all(r["complete"] for r in msgs)


def test_every_segment_one_byte_long(conv, baseline, tmp_path):
    segs = conv.segments(mss=1)
    t = run(tmp_path, segs)
    assert strip(t["methods"]) == strip(baseline["methods"])
    assert keys(t["methods"]) == C.expected_methods(conv, segs)
    assert strip(t["messages"]) == strip(baseline["messages"])
    assert keys(t["messages"], *MSG_KEYS) == C.expected_messages(conv, segs)
    assert t["anomalies"] == []


# -- TCP cases ---------------------------------------------------------------------------------


def test_lost_segment_in_a_body(conv, baseline, tmp_path):
    segs = conv.segments()
    i = conv.index(segs, "deliver-1/2")
    lost = segs[i]
    lost_off = (lost.seq - conv.data_seq["s2c"]) & MASK
    del segs[i]
    t = run(tmp_path, segs)
    # every method is still decoded, those after the hole too, at the packets that completed them
    assert keys(t["methods"], "direction", "channel", "stream_offset", "method") == keys(
        baseline["methods"], "direction", "channel", "stream_offset", "method"
    )
    assert keys(t["methods"]) == C.expected_methods(conv, segs, lost={"s2c": [(lost_off, len(lost.payload))]})
    # the content is reported, incomplete
    d1 = [r for r in t["messages"] if r["method"] == "basic.deliver" and r["delivery_tag"] == 1]
    assert len(d1) == 1 and d1[0]["complete"] is False
    assert d1[0]["body_size"] == 4000 and d1[0]["body_received"] < 4000
    others = [r for r in t["messages"] if r is not d1[0]]
    assert len(others) == 4 and all(r["complete"] for r in others)
    # the hole is an explicit anomaly where it is, declared by the next data packet after the ACK
    gaps = [r for r in t["anomalies"] if r["kind"] == "gap"]
    assert len(gaps) == 1
    g = gaps[0]
    assert (g["tcp_stream"], g["direction"], g["stream_offset"]) == (0, "s2c", lost_off)
    assert g["skipped_bytes"] >= len(lost.payload)
    assert g["frame_number"] == conv.index(conv.segments(), "deliver-1/3")  # one packet fewer before it
    (c,) = t["connections"]
    assert (c["gaps"], c["gap_bytes"]) == (1, len(lost.payload))
    assert c["bytes_s2c"] == len(conv.stream("s2c")) - len(lost.payload)
    assert c["anomalies"] == len(t["anomalies"])


def test_lost_segment_at_the_end_of_a_direction_is_accounted(conv, tmp_path):
    """The server's last data segment is lost; the client ACKs it and the FINs follow.
    Those bytes were on the wire: they must show up as a gap, not vanish."""
    segs = conv.segments()
    i = conv.index(segs, "connection.close-ok")
    lost = segs.pop(i)
    t = run(tmp_path, segs)
    (c,) = t["connections"]
    assert (c["gaps"], c["gap_bytes"]) == (1, len(lost.payload))
    gaps = [r for r in t["anomalies"] if r["kind"] == "gap"]
    assert [(g["direction"], g["stream_offset"]) for g in gaps] == [
        ("s2c", (lost.seq - conv.data_seq["s2c"]) & MASK)
    ]


def test_fin_then_rst_at_fin_plus_one_loses_no_byte(conv, tmp_path):
    """A client that closes with FIN and then RST (seq = FIN + 1, as Linux sends it): the
    FIN's sequence number is not a byte of the stream, so nothing was lost."""
    segs = [s for s in conv.segments() if "F" not in s.flags]
    client = next(s for s in segs if s.direction == "c2s")
    client_end = (conv.data_seq["c2s"] + len(conv.stream("c2s"))) & MASK
    server_end = (conv.data_seq["s2c"] + len(conv.stream("s2c"))) & MASK
    fin = client.copy(seq=client_end, ack=server_end, flags="FA", payload=b"")
    rst = fin.copy(seq=(client_end + 1) & MASK, flags="RA")
    t = run(tmp_path, P.retime([*segs, fin, rst]))
    (c,) = t["connections"]
    assert (c["gaps"], c["gap_bytes"]) == (0, 0)
    assert [r for r in t["anomalies"] if r["kind"] == "gap"] == []
    assert c["rst"] and c["bytes_c2s"] == len(conv.stream("c2s"))


def test_snaplen_cut_packet_in_a_body(conv, baseline, tmp_path):
    segs = conv.segments()
    i = conv.index(segs, "deliver-1/2")
    pkts = P.to_packets(segs)
    hdr = 14 + 20 + 20
    pkts[i] = P.snap(pkts[i], hdr + 100)  # 100 of 1000 payload bytes captured
    t = run_blob(tmp_path, P.pcap_bytes(pkts))
    kinds = {(r["layer"], r["kind"]) for r in t["anomalies"]}
    assert ("tcp", "truncated-packet") in kinds
    trunc = [r for r in t["anomalies"] if r["kind"] == "truncated-packet"]
    assert trunc[0]["frame_number"] == i + 1 and trunc[0]["direction"] == "s2c"
    d1 = [r for r in t["messages"] if r["method"] == "basic.deliver" and r["delivery_tag"] == 1]
    assert d1[0]["complete"] is False
    assert keys(t["methods"], "direction", "stream_offset", "method") == keys(
        baseline["methods"], "direction", "stream_offset", "method"
    )
    (c,) = t["connections"]
    assert (c["gaps"], c["gap_bytes"]) == (1, 900)


def _swap(segs, a, b):
    segs[a], segs[b] = segs[b], segs[a]
    return P.retime(segs, C.START_NS, C.STEP_NS)


def test_reordered_body_segments_give_identical_rows(conv, baseline, tmp_path):
    segs = conv.segments()
    _swap(segs, conv.index(segs, "deliver-1/2"), conv.index(segs, "deliver-1/3"))
    fix_acks(segs, conv)
    t = run(tmp_path, segs)
    for table in TABLES:
        assert strip(t[table], ("capture",)) == strip(baseline[table], ("capture",)), table


def test_reordered_segments_holding_frame_starts(conv, baseline, tmp_path):
    segs = conv.segments()
    _swap(segs, conv.index(segs, "publish-2+3/1"), conv.index(segs, "publish-2+3/2"))
    fix_acks(segs, conv)
    t = run(tmp_path, segs)
    assert strip(t["methods"]) == strip(baseline["methods"])
    assert keys(t["methods"]) == C.expected_methods(conv, segs)
    assert strip(t["messages"]) == strip(baseline["messages"])
    assert keys(t["messages"], *MSG_KEYS) == C.expected_messages(conv, segs)
    assert t["anomalies"] == []


def test_reversed_run_of_segments(conv, baseline, tmp_path):
    segs = conv.segments()
    idx = [conv.index(segs, f"deliver-1/{k}") for k in (1, 2, 3, 4)]
    data = [segs[i] for i in idx]
    for i, s in zip(idx, reversed(data)):
        segs[i] = s
    P.retime(segs, C.START_NS, C.STEP_NS)
    fix_acks(segs, conv)
    t = run(tmp_path, segs)
    assert strip(t["methods"]) == strip(baseline["methods"])
    assert keys(t["methods"]) == C.expected_methods(conv, segs)
    assert keys(t["messages"], *MSG_KEYS) == C.expected_messages(conv, segs)
    assert t["anomalies"] == []
    assert t["connections"][0]["gaps"] == 0


def test_retransmitted_segments_give_no_duplicate_rows(conv, baseline, tmp_path):
    segs = conv.segments()
    dup = []
    for s in segs:
        dup.append(s)
        if s.payload:
            dup.append(s.copy())  # every data segment twice
    P.retime(dup, C.START_NS, C.STEP_NS)
    t = run(tmp_path, dup)
    assert strip(t["methods"]) == strip(baseline["methods"])
    assert keys(t["methods"]) == C.expected_methods(conv, dup)
    assert strip(t["messages"]) == strip(baseline["messages"])
    assert keys(t["messages"], *MSG_KEYS) == C.expected_messages(conv, dup)
    assert t["anomalies"] == []
    (c,) = t["connections"]
    b = baseline["connections"][0]
    assert (c["bytes_c2s"], c["bytes_s2c"], c["frames_c2s"], c["frames_s2c"], c["gaps"]) == (
        b["bytes_c2s"],
        b["bytes_s2c"],
        b["frames_c2s"],
        b["frames_s2c"],
        0,
    )
    assert c["packets_c2s"] + c["packets_s2c"] == len(dup)


def test_late_retransmission_after_later_data(conv, baseline, tmp_path):
    segs = conv.segments()
    late = segs[conv.index(segs, "publish-1")].copy()
    segs.insert(conv.index(segs, "ack-2"), late)  # long after, between other traffic
    P.retime(segs, C.START_NS, C.STEP_NS)
    t = run(tmp_path, segs)
    assert strip(t["methods"]) == strip(baseline["methods"])
    assert len(t["messages"]) == len(baseline["messages"])
    assert t["anomalies"] == []


def test_overlapping_resegmented_retransmissions(conv, baseline, tmp_path):
    segs = conv.segments()
    i = conv.index(segs, "publish-2+3/2")
    s = segs[i]
    n = len(s.payload)
    # the segment arrives as two overlapping pieces, then a piece straddling two old segments
    a = s.copy(payload=s.payload[: n // 2 + 30])
    b = s.copy(seq=(s.seq + n // 2 - 30) & MASK, payload=s.payload[n // 2 - 30 :])
    prev = segs[conv.index(segs, "publish-2+3/1")]
    straddle = prev.copy(
        seq=(prev.seq + len(prev.payload) - 10) & MASK, payload=prev.payload[-10:] + s.payload[:10]
    )
    segs[i : i + 1] = [a, b, straddle]
    P.retime(segs, C.START_NS, C.STEP_NS)
    t = run(tmp_path, segs)
    assert strip(t["methods"]) == strip(baseline["methods"])
    assert keys(t["methods"]) == C.expected_methods(conv, segs)
    assert strip(t["messages"]) == strip(baseline["messages"])
    assert keys(t["messages"], *MSG_KEYS) == C.expected_messages(conv, segs)
    assert t["anomalies"] == []
    assert t["connections"][0]["bytes_c2s"] == len(conv.stream("c2s"))


@pytest.mark.parametrize(
    "client_isn,server_isn",
    [
        ((1 << 32) - 300, (1 << 32) - 2000),  # both streams wrap mid-conversation (s2c inside a body)
        ((1 << 32) - 1, (1 << 32) - 1),  # the SYN itself takes the last sequence number
        ((1 << 32) - 9, 7),  # the first data segment (protocol header) ends exactly at 2**32
    ],
)
def test_sequence_wraparound(baseline, tmp_path, client_isn, server_isn):
    segs = C.standard().segments(client_isn=client_isn, server_isn=server_isn)
    t = run(tmp_path, segs)
    for table in TABLES:
        assert strip(t[table], ("capture",)) == strip(baseline[table], ("capture",)), table


def test_mid_stream_start(conv, baseline, tmp_path):
    segs = conv.segments()
    first = conv.index(segs, "channel.open")
    base = {
        "c2s": (segs[first].seq - conv.data_seq["c2s"]) & MASK,
        "s2c": (segs[conv.index(segs, "channel.open-ok")].seq - conv.data_seq["s2c"]) & MASK,
    }
    cut = segs[first:]
    t = run(tmp_path, cut)
    assert keys(t["methods"]) == C.expected_methods(conv, cut, base=base)
    assert [r["method"] for r in order(t["methods"]) if r["direction"] == "c2s"][:2] == [
        "channel.open",
        "queue.declare",
    ]
    assert len(t["messages"]) == 5 and all(r["complete"] for r in t["messages"])
    (c,) = t["connections"]
    assert c["mid_stream"] is True
    assert (c["client_ip"], c["client_port"], c["server_port"], c["direction_source"]) == (
        "10.0.0.1",
        40000,
        5672,
        "port",
    )
    assert c["version"] == "0-9-1" and c["client_header"] is None
    assert c["frame_number"] == 1 and c["tcp_stream"] == 0


def test_mid_stream_start_inside_a_body(conv, baseline, tmp_path):
    segs = conv.segments()
    cut = segs[conv.index(segs, "deliver-1/3") :]  # s2c starts in the middle of a body frame
    t = run(tmp_path, cut)
    got = [(r["direction"], r["method"]) for r in order(t["methods"])]
    assert got == [
        ("c2s", "basic.ack"),
        ("c2s", "basic.ack"),
        ("c2s", "channel.close"),
        ("c2s", "connection.close"),
        ("s2c", "basic.deliver"),
        ("s2c", "channel.close-ok"),
        ("s2c", "connection.close-ok"),
    ]
    (c,) = t["connections"]
    assert c["mid_stream"] is True
    # the skipped part of the body is accounted for as a resynchronisation (a capture that
    # starts mid-frame is not a malformed frame), not decoded as frames
    s2c = [r for r in t["anomalies"] if r["direction"] == "s2c"]
    assert [(r["kind"], r["stream_offset"], r["skipped_bytes"]) for r in s2c] == [("resync", 0, 1000 + 1501)]
    d2 = [r for r in t["messages"] if r["delivery_tag"] == 2]
    assert len(d2) == 1 and d2[0]["complete"] is True


def test_mid_stream_start_inside_a_frame_keeps_frame_numbers(conv, tmp_path):
    """The client side starts inside publish-2's body; the server side starts later with
    consume-ok.  Frames held while the version was being inferred must keep the packet
    numbers that completed them."""
    segs = conv.segments()
    first = conv.index(segs, "publish-2+3/2")
    base = {
        "c2s": (segs[first].seq - conv.data_seq["c2s"]) & MASK,
        "s2c": (segs[conv.index(segs, "consume-ok")].seq - conv.data_seq["s2c"]) & MASK,
    }
    cut = segs[first:]
    t = run(tmp_path, cut)
    exp = C.expected_methods(conv, cut, base=base)
    assert exp[0]["method"] == "basic.publish" and exp[0]["frame_number"] == 1
    assert keys(t["methods"]) == exp
    c2s = [r for r in t["anomalies"] if r["direction"] == "c2s"]
    assert [(r["kind"], r["stream_offset"], r["skipped_bytes"]) for r in c2s] == [("resync", 0, 100 - 20 + 1)]
    msgs = [r for r in t["messages"] if r["method"] == "basic.publish"]
    assert [(r["frame_number"], r["body_hash"], r["complete"]) for r in msgs] == [
        (1, conv.messages[2].body_hash, True)
    ]


def _tls_record(ctype: int, body: bytes) -> bytes:
    return bytes([ctype, 3, 3]) + len(body).to_bytes(2, "big") + body


@pytest.mark.parametrize("port", [5671, 5672])
def test_tls_on_an_amqp_port_is_reported_as_tls_not_as_malformed_amqp(tmp_path, port):
    rnd = random.Random(port)
    hello = b"\x16\x03\x01" + (200).to_bytes(2, "big") + rnd.randbytes(200)  # ClientHello record
    server = [_tls_record(22, rnd.randbytes(1200)), _tls_record(23, rnd.randbytes(300))]
    client = [hello, _tls_record(23, rnd.randbytes(500))]
    t = run(
        tmp_path, P.tcp_conversation(client_chunks=client, server_chunks=server, server=("10.0.0.2", port))
    )
    (c,) = t["connections"]
    assert (c["tls"], c["version"], c["server_port"]) == (True, "tls", port)
    assert (c["bytes_c2s"], c["bytes_s2c"]) == (sum(map(len, client)), sum(map(len, server)))
    assert (c["frames_c2s"], c["frames_s2c"]) == (0, 0)
    assert t["anomalies"] == [] and t["methods"] == []


def test_tls_on_another_port_is_not_amqp(tmp_path):
    hello = b"\x16\x03\x01" + (100).to_bytes(2, "big") + bytes(100)
    t = run(tmp_path, P.tcp_conversation(client_chunks=[hello], server=("10.0.0.2", 443)))
    assert t["connections"] == [] and t["anomalies"] == []


def test_mid_stream_junk_on_an_amqp_port_is_accounted_for_to_the_byte(tmp_path):
    # more than the 256 KiB the framing scan holds: no boundary is ever proven
    junk = random.Random(21).randbytes(300_000)
    segs = P.tcp_conversation(
        client_chunks=[junk[i : i + 1448] for i in range(0, len(junk), 1448)], acks=False
    )
    t = run(tmp_path, segs)
    (c,) = t["connections"]
    assert (c["mid_stream"], c["version"], c["version_evidence"], c["negotiation"]) == (
        True,
        "0-9-1",
        "inferred",
        "unknown",
    )
    assert t["methods"] == [] and t["messages"] == []
    assert [(r["kind"], r["stream_offset"], r["skipped_bytes"]) for r in t["anomalies"]] == [
        ("resync-failed", 0, len(junk))
    ]


# -- link layers and file formats ---------------------------------------------------------------


def _ipv6_segments(conv, ext=("hop", "routing", "dest")):
    segs = conv.segments(client=("fd00::1", 40000), server=("fd00::2", 5672))
    for s in segs:
        s.ip_kw["ipv6_ext"] = ext
    return segs


LINKS = {
    "ethernet": (1, {}),
    "vlan": (1, {"vlans": [(0x8100, 100)]}),
    "qinq": (1, {"vlans": [(0x88A8, 10), (0x8100, 20)]}),
    "sll": (113, {}),
    "sll2": (276, {}),
    "null": (0, {}),
    "null-big-endian": (0, {"byteorder": "big"}),
    "loop": (108, {}),
    "raw": (101, {}),
    "raw-ipv4": (228, {}),
}


@pytest.mark.parametrize("name", sorted(LINKS))
def test_link_layers_give_the_same_rows(conv, baseline, tmp_path, name):
    linktype, kw = LINKS[name]
    pkts = P.to_packets(conv.segments(), linktype, **kw)
    t = run_blob(tmp_path, P.pcap_bytes(pkts))
    for table in ("methods", "messages", "anomalies"):
        assert strip(t[table], ("capture",)) == strip(baseline[table], ("capture",)), table


def test_ipv4_options_give_the_same_rows(conv, baseline, tmp_path):
    segs = conv.segments()
    for s in segs:
        s.ip_kw["ip_options"] = b"\x01\x01\x01\x00"  # NOP NOP NOP EOL
    t = run(tmp_path, segs)
    assert strip(t["methods"], ("capture",)) == strip(baseline["methods"], ("capture",))


@pytest.mark.parametrize("linktype", [1, 113, 229, 0])
def test_ipv6_with_extension_headers_gives_the_same_rows(conv, baseline, tmp_path, linktype):
    segs = _ipv6_segments(conv)
    t = run_blob(tmp_path, P.pcap_bytes(P.to_packets(segs, linktype)))
    for table in ("methods", "messages", "anomalies"):
        assert strip(t[table], ("capture",)) == strip(baseline[table], ("capture",)), table
    (c,) = t["connections"]
    assert (c["ip_version"], c["client_ip"], c["server_ip"]) == (6, "fd00::1", "fd00::2")


def _formats(conv):
    segs = conv.segments()
    pkts = P.to_packets(segs)
    mixed = [s.packet(1) if s.direction == "c2s" else s.packet(113) for s in segs]
    return {
        "pcap-usec-le": P.pcap_bytes(pkts),
        "pcap-usec-be": P.pcap_bytes(pkts, endian=">"),
        "pcap-nsec-le": P.pcap_bytes(pkts, nano=True),
        "pcap-nsec-be": P.pcap_bytes(pkts, nano=True, endian=">"),
        "pcapng-le": P.pcapng_bytes(pkts),
        "pcapng-be": P.pcapng_bytes(pkts, endian=">"),
        "pcapng-2-interfaces": P.pcapng_bytes(mixed, tsresol={1: 9, 113: 6}),
        "pcapng-2-interfaces-be": P.pcapng_bytes(mixed, endian=">", tsresol={1: 6, 113: 9}),
        "pcap.gz": P.gzip_bytes(P.pcap_bytes(pkts, nano=True)),
        "pcapng.gz": P.gzip_bytes(P.pcapng_bytes(mixed), members=3),
    }


FORMATS = [
    "pcap-usec-le",
    "pcap-usec-be",
    "pcap-nsec-le",
    "pcap-nsec-be",
    "pcapng-le",
    "pcapng-be",
    "pcapng-2-interfaces",
    "pcapng-2-interfaces-be",
    "pcap.gz",
    "pcapng.gz",
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_file_formats_give_the_same_rows(conv, baseline, tmp_path, fmt):
    blob = _formats(conv)[fmt]
    t = run_blob(tmp_path, blob, name="capture.bin")  # recognised by content, not by name
    for table in TABLES:
        assert strip(t[table], ("capture",)) == strip(baseline[table], ("capture",)), table
    assert {r["capture"] for r in t["methods"]} == {str(tmp_path / "capture.bin")}


# -- ports and conversation numbering -------------------------------------------------------------


def _interleave(*convs):
    """Round-robin merge of several segment lists; returns (merged, positions per list)."""
    merged, where = [], [[] for _ in convs]
    lists = [list(c) for c in convs]
    while any(lists):
        for k, lst in enumerate(lists):
            if lst:
                where[k].append(len(merged))
                merged.append(lst.pop(0))
    P.retime(merged, C.START_NS, C.STEP_NS)
    return merged, where


def _http(client, server):
    return P.tcp_conversation(
        [
            ("c2s", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            ("s2c", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ],
        client=client,
        server=server,
    )


def test_ports_and_tcp_stream_numbering(conv, tmp_path):
    http = _http(("10.0.0.9", 41000), ("10.0.0.2", 8080))  # not AMQP: ignored, still numbered
    amqp_odd_port = C.standard()
    odd = amqp_odd_port.segments(client=("10.0.0.1", 40001), server=("10.0.0.2", 15672))
    std = conv.segments(client=("10.0.0.1", 40002))
    merged, where = _interleave(http, odd, std)
    t = run(tmp_path, merged)
    conns = sorted(t["connections"], key=lambda r: r["tcp_stream"])
    assert [(r["tcp_stream"], r["server_port"], r["direction_source"]) for r in conns] == [
        (1, 15672, "syn"),
        (2, 5672, "syn"),
    ]
    assert all(r["frame_number"] == where[k][0] + 1 for r, k in zip(conns, (1, 2)))
    for stream, c, segs, pos in ((1, amqp_odd_port, odd, where[1]), (2, conv, std, where[2])):
        rows = [r for r in t["methods"] if r["tcp_stream"] == stream]
        exp = C.expected_methods(c, segs)
        for e in exp:
            e["frame_number"] = pos[e["frame_number"] - 1] + 1
        assert keys(rows) == exp
    assert {r["tcp_stream"] for r in t["anomalies"]} <= {1, 2}
    assert t["anomalies"] == []


def test_non_amqp_port_without_header_is_ignored_unless_listed(conv, tmp_path):
    segs = conv.segments(server=("10.0.0.2", 15673))
    first = conv.index(segs, "channel.open")
    base = {
        "c2s": (segs[first].seq - conv.data_seq["c2s"]) & MASK,
        "s2c": (segs[conv.index(segs, "channel.open-ok")].seq - conv.data_seq["s2c"]) & MASK,
    }
    cut = segs[first:]  # mid-stream: no AMQP header to recognise
    t = run(tmp_path, cut, name="a.pcap")
    assert t["methods"] == [] and t["connections"] == [] and t["anomalies"] == []
    t = run(tmp_path, cut, name="b.pcap", ports=[15673])
    assert keys(t["methods"]) == C.expected_methods(conv, cut, base=base)
    assert t["connections"][0]["mid_stream"] is True


# -- output safety --------------------------------------------------------------------------------


def _leftovers(path):
    return [n for n in os.listdir(path) if ".tmp-" in n or ".old-" in n]


def test_existing_output_needs_force(conv, tmp_path):
    cap = P.write(tmp_path / "c.pcap", P.pcap_bytes(P.to_packets(conv.segments())))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(OutputExists):
        dissect([str(cap)], str(out))
    assert (out / "keep.txt").read_text() == "mine"
    dissect([str(cap)], str(out), force=True)
    assert not (out / "keep.txt").exists()
    assert len(read(out)["methods"]) == 23
    assert _leftovers(tmp_path) == []


def test_failed_run_leaves_no_output_and_no_temporary_directory(conv, tmp_path):
    good = P.write(tmp_path / "c.pcap", P.pcap_bytes(P.to_packets(conv.segments())))
    bad = P.write(tmp_path / "bad.pcap", b"this is not a capture at all\n")
    with pytest.raises(CaptureError) as e:
        dissect([str(bad)], str(tmp_path / "out"))
    assert e.value.exit_code == 2
    # with a readable input beside it, the readable one is written and the other named
    s = dissect([str(good), str(bad)], str(tmp_path / "mixed"))
    assert [(x.path, x.exit_code) for x in s.errors] == [(str(bad), 2)] and s.captures == 1
    assert len(read(tmp_path / "mixed")["methods"]) == len(conv.methods())
    # unsupported link type: detected while reading, after the writer was opened
    odd = P.write(tmp_path / "odd.pcap", P.pcap_bytes([(C.START_NS, 147, b"\x00" * 40)]))
    with pytest.raises(CaptureError) as e:
        dissect([str(odd)], str(tmp_path / "out"))
    assert e.value.exit_code == 4
    assert not (tmp_path / "out").exists()
    assert _leftovers(tmp_path) == []


# -- command line -----------------------------------------------------------------------------------


def _cli(*args, cwd=None):
    exe = shutil.which("amqpcap")
    cmd = [exe] if exe else [sys.executable, "-m", "amqpcap.cli"]
    env = dict(os.environ)
    env.pop("AMQPCAP_DEBUG", None)
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def _one_line_error(p):
    lines = p.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("amqpcap:"), p.stderr
    assert "Traceback" not in p.stderr


@pytest.fixture
def capture_file(conv, tmp_path):
    return str(P.write(tmp_path / "c.pcap", P.pcap_bytes(P.to_packets(conv.segments()))))


def test_cli_dissect_succeeds_and_summarises(capture_file, tmp_path):
    p = _cli("dissect", capture_file, "-o", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    assert "methods 23" in p.stdout and "messages 5" in p.stdout and "anomalies 0" in p.stdout
    assert len(read(tmp_path / "out")["methods"]) == 23


@pytest.mark.parametrize("pure", ["0", "1"])
def test_dissect_command_runs_without_numpy_and_writes_what_the_library_does(capture_file, tmp_path, pure):
    """The amqpcap process leaves numpy out for dissect (cli.lean): nothing on its path, compiled
    or pure Python, imports it, and the tables are the library's (numpy loaded) to the byte."""
    probe = (  # at the very end: dissect leaves by cli.leave (os._exit: no atexit handler runs)
        "import sys; from amqpcap import cli\n"
        "leave = cli.leave\n"
        "def probe(code):\n"
        "    print('numpy loaded:', sys.modules.get('numpy') is not None)\n"
        "    leave(code)\n"
        "cli.leave = probe\n"
        "sys.argv = ['amqpcap'] + sys.argv[1:]; cli.console()\n"
    )
    env = dict(os.environ, AMQPCAP_PURE=pure)
    cmd = [sys.executable, "-c", probe, "dissect", capture_file, "-o", str(tmp_path / "cli")]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "numpy loaded: False" in p.stdout and "methods 23" in p.stdout
    dissect([capture_file], str(tmp_path / "lib"))
    for t in TABLES:
        a = pq.read_table(tmp_path / "cli" / t)
        b = pq.read_table(tmp_path / "lib" / t)
        assert a.equals(b), t


def test_dissect_command_starts_without_collections_and_dissects_with_them(capture_file, tmp_path):
    """The dissect process imports with the cyclic GC off (cli.QUIET_START) and runs the packet
    loop with it on, at the loop's own threshold (pipeline.GC_GEN0)."""
    probe = (
        "import gc, sys; from amqpcap import cli\n"
        "sys.argv = ['amqpcap'] + sys.argv[1:]\n"
        "import contextlib; from amqpcap import pipeline\n"
        "hot = pipeline._hot_loop\n"
        "@contextlib.contextmanager\n"
        "def probe():\n"
        "    with hot():\n"
        "        print('start', START, 'run', gc.get_threshold()[0], gc.isenabled())\n"
        "        yield\n"
        "pipeline._hot_loop = probe\n"
        "lean = cli.lean\n"
        "def lean_probe(command):\n"
        "    global START; lean(command); START = gc.get_threshold()[0]\n"
        "cli.lean = lean_probe; cli.console()\n"
    )
    cmd = [sys.executable, "-c", probe, "dissect", capture_file, "-o", str(tmp_path / "cli")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"start 0 run {pipeline.GC_GEN0} True" in p.stdout
    cmd[3:] = ["show", capture_file]  # other commands keep the interpreter's collections
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "start 0 " not in p.stdout and f" run {pipeline.GC_GEN0} True" in p.stdout


def test_dissect_command_writes_parquet_with_arrows_jemalloc_pool_unless_told_otherwise(
    capture_file, tmp_path
):
    """cli.ARROW_POOL: the dissect process's Arrow pool (C++'s default, which the Parquet writer
    uses) is jemalloc where Arrow has it; ARROW_DEFAULT_MEMORY_POOL given wins; other commands
    keep Arrow's default."""
    from amqpcap import cli

    probe = (
        "import os, sys; from amqpcap import cli\n"
        "sys.argv = ['amqpcap'] + sys.argv[1:]\n"
        "main = cli.main\n"
        "def probe(**kw):\n"
        "    code = main(**kw); import pyarrow as pa; chosen = os.environ.get('ARROW_DEFAULT_MEMORY_POOL')\n"
        "    print('pool', pa.default_memory_pool().backend_name, chosen)\n"
        "    return code\n"
        "cli.main = probe; cli.console()\n"
    )

    def pool(*args, env=None):
        e = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
        p = subprocess.run(
            [sys.executable, "-c", probe, *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**e, **(env or {})},
        )
        assert p.returncode == 0, p.stderr
        return [line.split()[1:] for line in p.stdout.splitlines() if line.startswith("pool ")]

    dissect_args = ["dissect", capture_file, "-o", str(tmp_path / "out"), "--force", "-q"]
    if "jemalloc" in cli.arrow_pools():
        assert pool(*dissect_args) == [["jemalloc", "jemalloc"]]
    assert pool(*dissect_args, env={"ARROW_DEFAULT_MEMORY_POOL": "system"}) == [["system", "system"]]
    assert pool("show", capture_file)[0][1] == "None"  # Arrow's own default


def test_dissect_command_binds_library_functions_at_first_call_and_other_commands_at_load(
    capture_file, tmp_path
):
    """cli.LAZY_BINDING: the dissect process loads shared libraries with RTLD_LAZY (the tests
    above check its tables are the library's); show keeps Python's RTLD_NOW."""
    probe = (
        "import os, sys; from amqpcap import cli\n"
        "sys.argv = ['amqpcap'] + sys.argv[1:]\n"
        "main = cli.main\n"
        "def probe(**kw):\n"
        "    code = main(**kw); flags = sys.getdlopenflags()\n"
        "    print('binding', flags & os.RTLD_LAZY == os.RTLD_LAZY, flags & os.RTLD_NOW == os.RTLD_NOW)\n"
        "    return code\n"
        "cli.main = probe; cli.console()\n"
    )

    def binding(*args):
        p = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return [line for line in p.stdout.splitlines() if line.startswith("binding ")]

    assert binding("dissect", capture_file, "-o", str(tmp_path / "out"), "-q") == ["binding True False"]
    assert binding("show", capture_file) == ["binding False True"]


def test_arrow_pools_are_read_from_arrows_build_configuration(tmp_path, monkeypatch):
    import importlib.util

    from amqpcap import cli

    pkg = tmp_path / "pyarrow"
    (pkg / "include" / "arrow" / "util").mkdir(parents=True)
    config = pkg / "include" / "arrow" / "util" / "config.h"
    spec = importlib.util.spec_from_file_location(
        "pyarrow", pkg / "__init__.py", submodule_search_locations=[str(pkg)]
    )
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    assert cli.arrow_pools() == set()  # no configuration: Arrow's default
    config.write_text(
        "#define ARROW_JEMALLOC\n#define ARROW_JEMALLOC_VENDORED\n/* #undef ARROW_MIMALLOC */\n"
    )
    assert cli.arrow_pools() == {"jemalloc"}
    config.write_text("#define ARROW_MIMALLOC\n")
    assert cli.arrow_pools() == {"mimalloc"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert cli.arrow_pools() == set()
    monkeypatch.undo()  # the installed Arrow: what its build says is what it supports
    import pyarrow as pa

    assert cli.arrow_pools() == {"jemalloc", "mimalloc"} & set(pa.supported_memory_backends())


def test_dissect_command_leaves_modules_it_does_not_use_unloaded_and_writes_the_same_tables(
    capture_file, tmp_path
):
    """cli.LAZY: the dissect process never runs the modules LAZY names, nor imports ``inspect``
    (with ast: dataclasses would, and the dissect path makes none), nor typing, nor
    show's filters (with difflib), nor hashlib nor json with the compiled decoder and row builder
    (their JSON is the builder's), and writes what ``dissect`` from Python writes."""
    probe = (
        "import sys; from amqpcap import cli\n"
        "sys.argv = ['amqpcap'] + sys.argv[1:]\n"
        "main = cli.main\n"
        "def probe(**kw):\n"
        "    code = main(**kw)\n"
        "    lazy = cli.LAZY['dissect']\n"
        "    print('loaded', sorted(n for n in lazy if type(sys.modules[n]) is not cli.Deferred))\n"
        "    print('ast', 'ast' in sys.modules)\n"
        "    print('typing', 'typing' in sys.modules)\n"
        "    print('difflib', 'difflib' in sys.modules)\n"
        "    print('json', 'json' in sys.modules)\n"
        "    print('hashlib', 'hashlib' in sys.modules)\n"
        "    return code\n"
        "cli.main = probe; cli.console()\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", probe, "dissect", capture_file, "-o", str(tmp_path / "cli"), "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "loaded []" in p.stdout and "ast False" in p.stdout and "typing False" in p.stdout
    assert "difflib False" in p.stdout, p.stdout
    # the compiled decoder hashes with OpenSSL's SHA-256 itself: no hashlib
    if compiled.select("fast09") is not None:
        assert "hashlib False" in p.stdout, p.stdout
    if compiled.select("fastrows") is not None:
        assert "json False" in p.stdout, p.stdout
    dissect([capture_file], str(tmp_path / "lib"))
    for t in ("connections", "methods", "messages", "anomalies"):
        assert pq.read_table(tmp_path / "cli" / t).equals(pq.read_table(tmp_path / "lib" / t)), t


def test_a_dissect_builds_no_dataclass():
    """The classes of a dissect are written out (values.py, values_1_0.py: tools/gen_classes.py):
    a dataclass compiles its methods from text at every import."""
    probe = (
        "import sys; from amqpcap import cli\n"
        "cli.lean('dissect')\n"
        "from amqpcap import pipeline\n"
        "from amqpcap.amqp import codec_1_0, decoder\n"
        "from amqpcap.records import rows_1_0, writer\n"
        "print('dataclasses' in sys.modules)\n"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout.strip().splitlines()[-1]) == (0, "False"), p.stderr


def test_mid_stream_detection_loads_the_0_8_and_0_9_1_tables_only_when_it_proves_a_0_9_chain():
    probe = (
        "import sys; from amqpcap.amqp import detect\n"
        "print(sorted(n for n in sys.modules if n.startswith('amqpcap.amqp.spec.v')))\n"
        "print(detect.chain_0_9(bytes([1, 0, 0, 0, 0, 0, 4, 0, 10, 0, 10, 0xCE]), 0))\n"
        "print(sorted(n for n in sys.modules if n.startswith('amqpcap.amqp.spec.v')))\n"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:3] == [
        "[]",
        "1",
        "['amqpcap.amqp.spec.v0_8', 'amqpcap.amqp.spec.v0_9', 'amqpcap.amqp.spec.v0_9_1']",
    ]


@pytest.fixture
def deferred(tmp_path, monkeypatch):
    """``deferred(name, source)``: module ``name`` of ``source`` put in sys.modules by
    ``cli.lean`` as a cli.Deferred (its code not run); removed from sys.modules afterwards."""
    from amqpcap import cli

    names = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(name: str, source: str):
        (tmp_path / f"{name}.py").write_text(source)
        names.append(name)
        monkeypatch.setitem(cli.LAZY, "probe-command", (name,))
        cli.lean("probe-command")
        assert type(sys.modules[name]) is cli.Deferred
        return sys.modules[name]

    yield make
    for name in names:
        sys.modules.pop(name, None)


RUN_COUNTER = "import builtins\nbuiltins.DEFERRED_RUNS = getattr(builtins, 'DEFERRED_RUNS', 0) + 1\n"


def test_deferred_module_runs_its_code_on_first_use_only(deferred, monkeypatch):
    import builtins

    from amqpcap import cli

    monkeypatch.setattr(builtins, "DEFERRED_RUNS", 0, raising=False)
    deferred("deferred_probe", RUN_COUNTER + "def answer():\n    return 42\nVALUE = 'v'\n")
    import deferred_probe  # an import statement reads __spec__: still not run

    assert type(deferred_probe) is cli.Deferred and builtins.DEFERRED_RUNS == 0
    assert deferred_probe.answer() == 42 and builtins.DEFERRED_RUNS == 1
    from deferred_probe import VALUE

    assert VALUE == "v" and builtins.DEFERRED_RUNS == 1
    assert type(sys.modules["deferred_probe"]) is not cli.Deferred
    assert sys.modules["deferred_probe"].answer is deferred_probe.answer


def test_a_deferred_module_used_by_two_threads_at_once_runs_once(deferred, monkeypatch):
    import builtins
    import threading

    monkeypatch.setattr(builtins, "DEFERRED_RUNS", 0, raising=False)
    module = deferred(
        "deferred_slow",
        RUN_COUNTER + "import time\ntime.sleep(0.2)  # the second thread comes meanwhile\nVALUE = 42\n",
    )
    got = []
    threads = [threading.Thread(target=lambda: got.append(module.VALUE)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [42, 42] and builtins.DEFERRED_RUNS == 1


def test_a_deferred_module_that_fails_to_import_fails_at_each_use(deferred):
    module = deferred("deferred_broken", "raise ImportError('deferred_broken cannot load')\n")
    for _ in range(2):  # as an import statement would, each time
        with pytest.raises(ImportError, match="cannot load"):
            _ = module.anything
        assert sys.modules["deferred_broken"] is module


@pytest.mark.parametrize("content", [b"", b"hello, not a capture\n" * 10, b"\x1f\x8bnot really gzip"])
def test_cli_not_a_capture_exits_2(tmp_path, content):
    bad = P.write(tmp_path / "bad.pcap", content)
    p = _cli("dissect", str(bad), "-o", str(tmp_path / "out"))
    assert p.returncode == 2
    _one_line_error(p)
    assert not (tmp_path / "out").exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_cli_unreadable_path_exits_3(tmp_path, what):
    path = tmp_path / "nope.pcap"
    if what == "directory":
        path.mkdir()
    p = _cli("dissect", str(path), "-o", str(tmp_path / "out"))
    assert p.returncode == 3
    _one_line_error(p)
    assert not (tmp_path / "out").exists()


def test_cli_existing_output_exits_5_and_force_replaces(capture_file, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    p = _cli("dissect", capture_file, "-o", str(out))
    assert p.returncode == 5
    _one_line_error(p)
    assert "--force" in p.stderr
    p = _cli("dissect", capture_file, "-o", str(out), "--force", "-q")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert len(read(out)["methods"]) == 23
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["dissect"],
        ["dissect", "{cap}"],  # no -o
        ["dissect", "{cap}", "-o", "{out}", "--no-such-option"],
        ["dissect", "{cap}", "-o", "{out}", "--body-bytes", "-1"],
        ["dissect", "{cap}", "-o", "{out}", "--ports", "http"],
        ["dissect", "{cap}", "-o", "{out}", "--ports", "70000"],
        ["frobnicate"],
    ],
)
def test_cli_bad_usage_exits_64(capture_file, tmp_path, args):
    args = [a.format(cap=capture_file, out=tmp_path / "out") for a in args]
    p = _cli(*args)
    assert p.returncode == 64, (p.returncode, p.stderr)
    _one_line_error(p)
    assert not (tmp_path / "out").exists()


def test_every_anomaly_row_is_built_by_rows_anomaly_row(conv, tmp_path, monkeypatch):
    # TCP (truncated packet), capture (malformed packet, cut file) and AMQP anomalies alike
    from amqpcap.records import rows as R

    built = []
    real = R.anomaly_row

    def spy(*a, **kw):
        row = real(*a, **kw)
        built.append(row)
        return row

    monkeypatch.setattr(R, "anomaly_row", spy)
    segs = conv.segments()
    pkts = P.to_packets(segs)
    i = conv.index(segs, "deliver-1/2")
    pkts[i] = P.snap(pkts[i], 14 + 20 + 20 + 100)
    pkts.insert(3, (pkts[3][0], 1, P.ether(P.tcp_ip("10.9.9.9", "10.9.9.8", 1, 5672))[:20]))
    blob = P.pcap_bytes(pkts)
    t = run_blob(tmp_path, blob[:-7])  # cut inside the last record
    kinds = {(r["layer"], r["kind"]) for r in t["anomalies"]}
    assert {
        ("tcp", "truncated-packet"),
        ("capture", "malformed-packet"),
        ("capture", "truncated-file"),
    } <= kinds
    assert len(built) == len(t["anomalies"])


@pytest.mark.compiled("fastflows")
def test_the_compiled_loop_parses_each_packet_once_into_compiled_conversations(conv, tmp_path, monkeypatch):
    """The packet loop and its conversations are the compiled classes (flows.py built as
    fastflows, Conversation a C class), and each record is parsed once."""
    from amqpcap import flows
    from amqpcap.capture import link

    parses, made = [], []
    parse = link.parse_located

    def parse_counted(linktype, buf, start, n):
        parses.append(linktype)
        return parse(linktype, buf, start, n)

    monkeypatch.setattr(link, "parse_located", parse_counted)
    segs = conv.segments()
    cap = tmp_path / "c.pcap"
    cap.write_bytes(P.pcap_bytes(P.to_packets(segs, 1)))
    w = DatasetWriter(str(tmp_path / "out"), TABLES)
    d = pipeline.Dissector(str(cap), w, pipeline.Options())
    d.on_conversation = made.append
    with pipeline.open_capture(str(cap)) as source:
        d.run(source)
    w.close()
    assert flows.new_flows.__module__ == flows.new_conversation.__module__ == "amqpcap.fastflows"
    assert [type(c) for c in made] == [flows.new_conversation] and not hasattr(made[0], "__dict__")
    assert len(parses) == len(segs) and d.packets == len(segs)
    assert made[0].packets == [sum(s.direction == x for s in segs) for x in ("c2s", "s2c")]


def dissected_captures(captures: list, out: str) -> dict:
    """{capture/plain|frames/table file: Arrow table} of ``captures`` dissected into ``out``."""
    tables = {}
    for capture in captures:
        for kind, frames in (("plain", False), ("frames", True)):
            where = os.path.join(out, os.path.basename(capture), kind)
            dissect([capture], where, frames=frames)
            for table in sorted(os.listdir(where)):
                for part in sorted(os.listdir(os.path.join(where, table))):
                    key = f"{os.path.basename(capture)}/{kind}/{table}/{part}"
                    tables[key] = pq.read_table(os.path.join(where, table, part))
    return tables


@pytest.mark.compiled("fastflows")
def test_the_packet_loop_alone_in_pure_python_writes_the_compiled_loops_tables(tmp_path):
    """AMQPCAP_PURE=fastflows runs only the packet loop pure (every other part compiled): every
    shipped capture's tables, with and without the frames table, equal the compiled loop's."""
    from fixtures.compiled import CAPTURES

    here = dissected_captures(CAPTURES, str(tmp_path / "here"))
    code = (
        "import pickle, sys; sys.path[:0] = [%r]; import test_pipeline_synthetic as t\n"
        "from amqpcap import compiled\n"
        "tables = t.dissected_captures(pickle.loads(bytes.fromhex(sys.argv[1])), sys.argv[2])\n"
        "open(sys.argv[3], 'wb').write(pickle.dumps((compiled.describe(), tables)))\n"
    ) % os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, AMQPCAP_PURE="fastflows")
    result = tmp_path / "result"
    cmd = [sys.executable, "-c", code, pickle.dumps(CAPTURES).hex(), str(tmp_path / "there"), str(result)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    assert p.returncode == 0, p.stderr
    describe, there = pickle.loads(result.read_bytes())
    assert "packet loop: pure Python (AMQPCAP_PURE is set)" in describe
    assert describe.count("pure Python") == 1, describe  # every other part compiled
    assert here.keys() == there.keys() and len(here) >= 8 * len(CAPTURES)
    for name, t in there.items():
        assert t.equals(here[name]), name


def test_a_source_of_single_records_gives_the_tables_of_one_of_batches(conv, tmp_path, monkeypatch):
    """The loop takes the reader's lists (``PacketSource.batches``) or, from any other source
    (Spark's buckets, a live capture's), one record at a time: the same tables either way."""
    segs = conv.segments()
    batched = run(tmp_path, segs, name="batched.pcap")

    class Records:  # a source without batches(): iteration only
        def __init__(self, source):
            self.source, self.anomalies = source, source.anomalies

        def __iter__(self):
            return iter(self.source)

        def close(self):
            self.source.close()

    real = pipeline.open_capture
    wrapped = []
    monkeypatch.setattr(pipeline, "open_capture", lambda path: wrapped.append(path) or Records(real(path)))
    single = run(tmp_path, segs, name="single.pcap")
    assert wrapped and len(batched["methods"]) == 23
    for table in ("methods", "messages", "anomalies", "connections"):  # all but the file's name
        assert strip(single[table], ("capture",)) == strip(batched[table], ("capture",))


@pytest.mark.compiled("fastflows")
def test_a_zero_window_period_is_reported_alike_by_the_compiled_loop_and_the_reference(conv, tmp_path):
    """A zero-window period that opens and closes again: the same connections row from the
    compiled loop and from a pure-Python process, the period closed by the packet that reopens
    the window."""
    segs = conv.segments()
    s2c = [
        i for i, s in enumerate(segs) if s.direction == "s2c" and s.payload and not set(s.flags) & set("SFR")
    ]
    zero = s2c[1]
    segs[zero] = segs[zero].copy(window=0)
    reopen = next(i for i in range(zero + 1, len(segs)) if segs[i].direction == "s2c")
    blob = P.pcap_bytes(P.to_packets(segs, 1))
    tables = {True: run_blob(tmp_path, blob, "compiled.pcap")}
    tables[False] = on_the_other_side(run_blob, tmp_path, blob, "reference.pcap")
    for table in ("connections", "methods", "messages", "anomalies"):
        assert strip(tables[True][table], ("capture",)) == strip(tables[False][table], ("capture",))
    (periods,) = [json.loads(r["zero_windows"]) for r in tables[True]["connections"] if r["zero_windows"]]
    assert [p[:2] for p in periods] == [["s2c", zero + 1]] and periods[0][3] == reopen + 1


def test_the_hot_loop_hands_the_gil_over_sooner_and_restores_the_interpreter_after(tmp_path):
    """While packets are read the switch interval is short (the Parquet thread gets the GIL
    within it) and gen 0 of the GC large; both come back afterwards, whatever they were, and
    a caller's interval already shorter is kept."""
    seen = []

    class Source:
        def __iter__(self):
            seen.append((sys.getswitchinterval(), gc.get_threshold()[0]))
            return iter(())

    old_interval, old_threshold = sys.getswitchinterval(), gc.get_threshold()
    writer = DatasetWriter(str(tmp_path / "out"), ["connections", "methods", "messages", "anomalies"])
    try:
        for interval in (0.01, 0.0001):
            sys.setswitchinterval(interval)
            gc.set_threshold(700, 11, 12)
            pipeline.Dissector("x", writer, pipeline.Options()).run(Source())
            assert sys.getswitchinterval() == pytest.approx(interval, abs=2e-6)  # kept in whole us
            assert gc.get_threshold() == (700, 11, 12)
        writer.close()
    finally:
        sys.setswitchinterval(old_interval)
        gc.set_threshold(*old_threshold)
    assert seen[0] == (pytest.approx(pipeline.SWITCH_INTERVAL, rel=0.02), pipeline.GC_GEN0)
    assert seen[1] == (pytest.approx(0.0001, rel=0.02), pipeline.GC_GEN0)
