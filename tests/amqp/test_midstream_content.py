"""A capture that starts inside a connection: the rest of a message begun before it is
accounted for by the start-of-stream resync (one anomaly per direction), not reported as
unexpected frames; frames are attributed to the packets that completed them."""

from __future__ import annotations

import os
import sys

from amqpcap.amqp.codec_0_10 import Decoder010
from amqpcap.amqp.events import Anomaly, Content, Frame, Method

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
sys.path.insert(0, os.path.dirname(__file__))
import amqp09 as A  # noqa: E402
import codec010_builders as B  # noqa: E402

BODY = b"x" * 1000
PUB = A.method_frame(1, "basic.publish", exchange="ex", routing_key="rk")
HDR = A.header_frame(1, 60, len(BODY), {})
BODIES = A.body_frame(1, BODY[:600]) + A.body_frame(1, BODY[600:])
ACK = A.method_frame(1, "basic.ack", delivery_tag=1)
MESSAGE = PUB + HDR + BODIES


def _anoms(events):
    return [(a.kind, a.offset, a.skipped, a.channel) for a in A.anomalies(events)]


def test_0_9_content_frames_before_the_first_method_are_counted_with_the_resync():
    stream = MESSAGE + ACK + MESSAGE
    start = 10  # inside basic.publish
    base = 7000
    _, events = A.decode(stream[start:], start=base, midstream=True)
    [a] = A.anomalies(events)
    skip = len(PUB) - start
    assert (a.kind, a.offset, a.skipped, a.channel) == ("resync", base, skip, None)
    assert "then 3 content frames" in a.detail and f"({len(HDR) + len(BODIES)} bytes)" in a.detail
    assert "on channel 1" in a.detail
    assert [m.name for m in A.events_of(events, Method)] == ["basic.ack", "basic.publish"]
    [c] = A.events_of(events, Content)
    assert c.complete and c.body_size == len(BODY)
    assert A.account(events) == len(stream) - start  # frames + skipped bytes tile the stream


def test_0_9_cut_between_frames_of_a_content_skips_nothing_but_says_so():
    stream = BODIES + ACK
    _, events = A.decode(stream, midstream=True)
    [a] = A.anomalies(events)
    assert (a.kind, a.skipped) == ("resync", 0)
    assert "skipped 0 bytes" in a.detail and "2 content frames" in a.detail
    assert A.account(events) == len(stream)


def test_0_9_cut_at_a_method_reports_nothing():
    _, events = A.decode(MESSAGE + ACK, midstream=True)
    assert A.anomalies(events) == []


def test_0_9_the_anomaly_comes_before_the_first_method():
    _, events = A.decode(BODIES + ACK, midstream=True)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("Anomaly") < kinds.index("Method")


def test_0_9_a_message_begun_before_the_capture_on_another_channel_after_the_first_method():
    other = A.body_frame(2, b"late")
    stream = ACK + other + ACK
    _, events = A.decode(stream, midstream=True)
    assert _anoms(events) == [("resync", len(ACK), 0, 2)]
    assert "begun before the capture" in A.anomalies(events)[0].detail
    assert A.account(events) == len(stream)


def test_0_9_a_body_frame_on_a_channel_already_seen_is_still_unexpected():
    stream = ACK + A.body_frame(1, b"stray")
    _, events = A.decode(stream, midstream=True)
    assert [k for k, *_ in _anoms(events)] == ["unexpected-frame"]


def test_0_9_without_a_mid_stream_start_an_orphan_body_is_unexpected():
    _, events = A.decode(BODIES + ACK)
    assert [k for k, *_ in _anoms(events)] == ["unexpected-frame", "unexpected-frame"]


def test_0_9_a_gap_before_the_first_method_reports_the_held_resync_first():
    from amqpcap.amqp.decoder import Decoder09

    dec = Decoder09()
    dec.start_midstream(0, 0)
    dec.feed(0, BODIES, 0, 1, 1)
    dec.gap(0, len(BODIES), 100, 2, 2)
    dec.feed(0, ACK, len(BODIES) + 100, 3, 3)
    dec.finish(4, 4)
    events = [e for _, e in dec.pop_events()]
    assert [k for k, *_ in _anoms(events)] == ["resync", "gap"]
    assert "2 content frames" in A.anomalies(events)[0].detail


# -- 0-10 ---------------------------------------------------------------------------------

TRANSFER = B.command(
    "message.transfer",
    {"destination": "d", "accept-mode": 1, "acquire-mode": 0},
    header={"message.delivery-properties": {"routing-key": "rk"}},
    body=b"m" * 500,
    max_frame=112,
)
COMPLETED = B.control("session.completed", {"commands": [(0, 1)]}, channel=1)


def _frames_0_10(stream):
    out, p = [], 0
    while p < len(stream):
        n = int.from_bytes(stream[p + 2 : p + 4], "big")
        out.append(stream[p : p + n])
        p += n
    return out


def _decode_0_10(chunks, start=0):
    dec = Decoder010()
    dec.start_midstream(0, start)
    off = start
    for i, c in enumerate(chunks):
        dec.feed(0, c, off, i + 1, 1000 * (i + 1))
        off += len(c)
    dec.finish(len(chunks) + 1, 1000 * (len(chunks) + 1))
    return [e for _, e in dec.pop_events()]


def _account_0_10(events):
    return sum(e.wire_size for e in events if isinstance(e, Frame)) + sum(
        e.skipped for e in events if isinstance(e, Anomaly)
    )


def test_0_10_body_frames_of_a_transfer_begun_before_the_capture():
    frames = _frames_0_10(TRANSFER)
    assert len(frames) >= 6
    cut = sum(map(len, frames[:3])) + 5  # inside the fourth frame (a body frame)
    stream = (TRANSFER + COMPLETED + TRANSFER)[cut:]
    events = _decode_0_10([stream])
    [a] = [e for e in events if isinstance(e, Anomaly)]
    assert a.kind == "resync" and a.skipped == len(frames[3]) - 5
    assert f"then {len(frames) - 4} content frames" in a.detail
    assert [m.name for m in events if isinstance(m, Method)] == ["session.completed", "message.transfer"]
    [c] = [e for e in events if isinstance(e, Content)]
    assert c.complete and c.body_size == 500
    assert _account_0_10(events) == len(stream)


def test_0_10_continuation_frames_of_a_header_segment_begun_before_the_capture():
    big_header = B.command(
        "message.transfer",
        {"destination": "d", "accept-mode": 1, "acquire-mode": 0},
        header={"message.message-properties": {"application-headers": {"k": "v" * 200}}},
        body=b"b",
        max_frame=64,
    )
    frames = _frames_0_10(big_header)
    flags = [f[0] for f in frames]
    # the first frame of the header segment (type 2) whose continuation frames the capture starts in
    first_header = next(i for i, f in enumerate(frames) if f[1] == 2)
    assert frames[first_header + 1][1] == 2 and not flags[first_header + 1] & 2
    stream = b"".join(frames[first_header + 1 :]) + COMPLETED
    events = _decode_0_10([stream])
    assert [a.kind for a in events if isinstance(a, Anomaly)] == ["resync"]
    assert [m.name for m in events if isinstance(m, Method)] == ["session.completed"]
    assert _account_0_10(events) == len(stream)


def test_0_10_frames_proven_by_a_later_packet_keep_their_own_packet():
    # each packet holds exactly one frame: a frame is only proven by the header after it
    frames = _frames_0_10(COMPLETED + B.command("queue.declare", {"queue": "q"}) + COMPLETED)
    events = _decode_0_10(frames)
    got = [(e.name, e.packet, e.ts) for e in events if isinstance(e, Method)]
    assert got == [("session.completed", 1, 1000), ("queue.declare", 2, 2000), ("session.completed", 3, 3000)]
    assert [f.packet for f in events if isinstance(f, Frame)] == [1, 2, 3]
    assert not [a for a in events if isinstance(a, Anomaly)]


def test_0_10_frames_after_a_malformed_one_keep_their_own_packet_too():
    a, b, c = (B.control("session.completed", {"commands": [(0, i)]}, channel=1) for i in (1, 2, 3))
    dec = Decoder010()
    dec.feed(0, a + b"\xff" * 5 + b, 0, 1, 1000)  # b is only proven by c's header, a packet later
    dec.feed(0, c, len(a) + 5 + len(b), 2, 2000)
    dec.finish(3, 3000)
    events = [e for _, e in dec.pop_events()]
    assert [(e.args["commands"], e.packet) for e in events if isinstance(e, Method)] == [
        ([[0, 1]], 1),
        ([[0, 2]], 1),
        ([[0, 3]], 2),
    ]
    assert [a.kind for a in events if isinstance(a, Anomaly)] == ["malformed-frame", "resync"]
