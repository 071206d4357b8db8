"""Broken wire data becomes anomalies; decoding resumes at the next provable frame boundary.

Every test also checks the accounting: frame wire sizes + anomaly skipped bytes
(+ gap sizes, which the gap anomaly's skipped includes) == stream length.
"""

from __future__ import annotations

import hashlib
import random
import tracemalloc

import pytest
from fixtures import amqp09 as A

from amqpcap.amqp.decoder import Decoder09
from amqpcap.amqp.events import Content, Frame, Heartbeat, Method

ACK = A.method_frame(1, "basic.ack", delivery_tag=7)  # 21 bytes
QOS = A.method_frame(1, "basic.qos", prefetch_count=5)  # 19 bytes


def names(events):
    return [m.name for m in A.events_of(events, Method)]


def test_ack_and_qos_sizes_used_below():
    assert (len(ACK), len(QOS)) == (21, 19)


def test_bad_frame_end_then_resync_on_the_next_valid_frame():
    bad = ACK[:-1] + b"\x00"
    stream = QOS + bad + ACK + QOS
    _, events = A.decode(stream)
    assert [(a.kind, a.offset, a.skipped, a.channel) for a in A.anomalies(events)] == [
        ("bad-frame-end", 19, 0, 1),
        ("resync", 19, 21, None),
    ]
    assert "frame-end octet is 0x00, not 0xce" in A.anomalies(events)[0].detail
    assert names(events) == ["basic.qos", "basic.ack", "basic.qos"]
    assert [f.offset for f in A.events_of(events, Frame)] == [0, 40, 61]
    assert A.account(events) == len(stream)


def test_resync_skips_garbage_of_any_length_and_counts_it_exactly():
    garbage = bytes(random.Random(5).choice(b"\x00\x10\x20\x30\x55\xaa") for _ in range(1000))
    stream = QOS + ACK[:-1] + b"\xcf" + garbage + ACK
    _, events = A.decode(stream)
    assert [(a.kind, a.offset, a.skipped) for a in A.anomalies(events)] == [
        ("bad-frame-end", 19, 0),
        ("resync", 19, 21 + 1000),
    ]
    assert names(events) == ["basic.qos", "basic.ack"]
    assert A.account(events) == len(stream)


@pytest.mark.parametrize(
    "version, ftype, known",
    [
        ("0-9-1", 4, False),
        ("0-9-1", 9, False),
        ("0-9-1", 0, False),
        ("0-8", 4, True),
        ("0-8", 7, True),
        ("0-8", 9, False),
        ("0-9", 6, True),
    ],
)
def test_frame_types_the_version_does_not_define_are_unknown_frame_type(version, ftype, known):
    odd = A.frame(ftype, 2, b"abc")
    stream = odd + ACK
    _, events = A.decode(stream, version)
    if known:  # 0-8 / 0-9 out-of-band and trace frames: recorded as frames only
        assert [(f.frame_type, f.size) for f in A.events_of(events, Frame)] == [(ftype, 3), (1, 13)]
        assert A.anomalies(events) == []
    else:
        assert [(a.kind, a.offset, a.skipped, a.channel) for a in A.anomalies(events)] == [
            ("unknown-frame-type", 0, 0, None),
            ("resync", 0, len(odd), None),
        ]
        assert f"frame type {ftype} is not defined in AMQP {version}" in A.anomalies(events)[0].detail
    assert names(events) == ["basic.ack"]
    assert A.account(events) == len(stream)


def test_a_4_gb_size_claim_is_oversize_and_allocates_nothing_big():
    # 1 MiB follows the claim; a decoder that buffered "the frame" would hold all of it
    claim = A.frame(3, 1, b"", size=0xFFFFFFFF, end=b"")  # just the 7-byte header
    junk = bytes(64 * 1024)  # zeros never start a frame
    chunks = 16
    tracemalloc.start()
    try:
        dec = Decoder09("0-9-1")
        dec.feed(0, QOS + claim, 0, 1, 1)
        off = len(QOS) + len(claim)
        for i in range(chunks):
            dec.feed(0, junk, off, 2 + i, 2)
            off += len(junk)
        dec.feed(0, ACK, off, 999, 3)
        dec.finish(1000, 4)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    events = [e for _, e in dec.pop_events()]
    assert peak < 512 * 1024
    assert [(a.kind, a.offset, a.skipped, a.channel) for a in A.anomalies(events)] == [
        ("oversize-frame", 19, 0, 1),
        ("resync", 19, 7 + chunks * 65536, None),
    ]
    assert "claims 4294967295 bytes (limit 1048576)" in A.anomalies(events)[0].detail
    assert names(events) == ["basic.qos", "basic.ack"]
    assert A.account(events) == off + len(ACK)


def test_random_junk_keeps_the_buffer_within_one_maximal_frame_while_resynchronising():
    # random bytes hold candidate headers of up to 1 MiB that the decoder must wait on;
    # it never holds more than one such frame plus the chunk just fed
    rnd = random.Random(7)
    dec = Decoder09("0-9-1")
    dec.start_midstream(0, 0)
    off, most, waited = 0, 0, 0
    for i in range(48):  # 3 MiB
        chunk = rnd.randbytes(65536)
        dec.feed(0, chunk, off, i + 1, i)
        off += len(chunk)
        held = len(dec.dirs[0].buf)
        most = max(most, held)
        waited += held > 2 * len(chunk)
    assert waited > 0  # the data did make it wait on a far candidate (else this proves nothing)
    assert most <= dec.frame_max + 8 + 65536
    dec.finish(99, 99)
    events = [e for _, e in dec.pop_events()]
    assert A.account(events) == off


def test_frame_larger_than_negotiated_frame_max_is_oversize():
    tune_ok = A.method_frame(0, "connection.tune-ok", channel_max=0, frame_max=4096, heartbeat=0)
    big = A.method_frame(1, "basic.publish") + A.header_frame(1, 60, 5000, {}) + A.body_frame(1, b"x" * 5000)
    stream = tune_ok + big + ACK
    dec, events = A.decode(stream)
    assert dec.frame_max == 4096
    oversize = A.anomalies(events, "oversize-frame")
    assert [(a.offset, a.channel) for a in oversize] == [(len(tune_ok) + 17 + 22, 1)]
    assert "claims 5000 bytes (limit 4096)" in oversize[0].detail
    assert names(events) == ["connection.tune-ok", "basic.publish", "basic.ack"]
    assert A.account(events) == len(stream)


@pytest.mark.parametrize("cm", [(999, 1), (60, 999), (0, 0)])
def test_unknown_class_or_method_is_reported_and_the_next_frame_decodes(cm):
    odd = A.frame(1, 3, bytes.fromhex(f"{cm[0]:04x}{cm[1]:04x}") + b"args")
    stream = odd + ACK
    _, events = A.decode(stream)
    [an] = A.anomalies(events)
    assert (an.kind, an.offset, an.channel, an.skipped) == ("unknown-method", 0, 3, 0)
    assert an.detail == f"class {cm[0]} method {cm[1]} is not defined in AMQP 0-9-1"
    assert names(events) == ["basic.ack"]
    assert [f.wire_size for f in A.events_of(events, Frame)] == [len(odd), len(ACK)]
    assert A.account(events) == len(stream)


@pytest.mark.parametrize("cut", [1, 5, 8, 9])
def test_truncated_method_arguments_are_malformed_method(cut):
    payload = A.method_payload("basic.ack", delivery_tag=7, multiple=True)  # 4 + 8 + 1 bytes
    odd = A.frame(1, 1, payload[:-cut])
    stream = odd + QOS
    _, events = A.decode(stream)
    [an] = A.anomalies(events)
    assert (an.kind, an.offset, an.channel, an.skipped) == ("malformed-method", 0, 1, 0)
    assert an.detail.startswith("basic.ack: ")
    assert names(events) == ["basic.qos"]
    assert A.account(events) == len(stream)


def test_method_arguments_with_trailing_bytes_are_malformed_method():
    odd = A.frame(1, 1, A.method_payload("basic.ack", delivery_tag=7) + b"\x00\x00")
    _, events = A.decode(odd)
    [an] = A.anomalies(events)
    assert (an.kind, an.detail) == ("malformed-method", "basic.ack: 2 bytes left after the last argument")


@pytest.mark.parametrize("payload", [b"", b"\x00\x3c\x00"])
def test_method_frame_shorter_than_class_and_method_ids_is_malformed_frame(payload):
    stream = A.frame(1, 1, payload) + ACK
    _, events = A.decode(stream)
    assert [(a.kind, a.detail) for a in A.anomalies(events)] == [
        ("malformed-frame", f"method frame of {len(payload)} bytes")
    ]
    assert names(events) == ["basic.ack"]
    assert A.account(events) == len(stream)


def test_body_without_header_is_unexpected_frame():
    stream = A.method_frame(1, "basic.publish") + A.body_frame(1, b"body!") + ACK
    _, events = A.decode(stream)
    assert [(a.kind, a.detail, a.channel, a.offset, a.skipped) for a in A.anomalies(events)] == [
        ("unexpected-frame", "body frame without a content header", 1, 17, 0),
        ("incomplete-content", "basic.publish content interrupted by basic.ack", 1, 0, 0),
    ]
    [c] = A.events_of(events, Content)
    assert (c.complete, c.body_frames, c.body_received, c.properties) == (False, 0, 0, {})
    assert A.account(events) == len(stream)


def test_body_on_a_channel_with_no_content_is_unexpected_frame():
    stream = A.body_frame(4, b"orphan") + ACK
    _, events = A.decode(stream)
    assert [(a.kind, a.channel) for a in A.anomalies(events)] == [("unexpected-frame", 4)]
    assert A.events_of(events, Content) == []
    assert A.account(events) == len(stream)


def test_header_without_method_is_unexpected_frame():
    stream = A.header_frame(2, 60, 3, {}) + A.body_frame(2, b"abc") + ACK
    _, events = A.decode(stream)
    assert [(a.kind, a.detail, a.channel, a.offset) for a in A.anomalies(events)] == [
        ("unexpected-frame", "content header without a content method", 2, 0),
        ("unexpected-frame", "body frame without a content header", 2, 22),
    ]
    assert A.events_of(events, Content) == []
    assert names(events) == ["basic.ack"]


def test_second_header_for_the_same_content_is_unexpected_and_the_content_still_completes():
    stream = (
        A.method_frame(1, "basic.publish")
        + A.header_frame(1, 60, 2, {"type": "a"})
        + A.header_frame(1, 60, 9, {"type": "b"})
        + A.body_frame(1, b"ok")
    )
    _, events = A.decode(stream)
    assert [(a.kind, a.offset) for a in A.anomalies(events)] == [("unexpected-frame", 17 + 24)]
    [c] = A.events_of(events, Content)
    assert (c.complete, c.properties, c.body) == (True, {"type": "a"}, b"ok")


def test_method_interrupting_a_content_emits_an_incomplete_content_and_an_anomaly():
    stream = (
        A.method_frame(1, "basic.publish", routing_key="rk")
        + A.header_frame(1, 60, 10, {"priority": 3})
        + A.body_frame(1, b"12345")
        + ACK
        + A.method_frame(1, "basic.publish", routing_key="two")
        + A.header_frame(1, 60, 1, {})
        + A.body_frame(1, b"Z")
    )
    _, events = A.decode(stream)
    cs = A.events_of(events, Content)
    assert [
        (
            c.method.args["routing-key"],
            c.complete,
            c.body_size,
            c.body_received,
            c.body_frames,
            c.body,
            c.properties,
        )
        for c in cs
    ] == [("rk", False, 10, 5, 1, b"12345", {"priority": 3}), ("two", True, 1, 1, 1, b"Z", {})]
    assert [(a.kind, a.offset, a.channel, a.detail) for a in A.anomalies(events)] == [
        ("incomplete-content", 0, 1, "basic.publish content interrupted by basic.ack")
    ]
    # the interrupting method is reported before the content it cut short
    kinds = [type(e).__name__ for e in events if not isinstance(e, Frame)]
    assert kinds == ["Method", "Method", "Anomaly", "Content", "Method", "Content"]
    assert A.account(events) == len(stream)


def test_a_method_on_another_channel_does_not_interrupt_a_content():
    stream = (
        A.method_frame(1, "basic.publish")
        + A.header_frame(1, 60, 2, {})
        + A.body_frame(1, b"a")
        + A.method_frame(2, "basic.ack", delivery_tag=1)
        + A.body_frame(1, b"b")
    )
    _, events = A.decode(stream)
    [c] = A.events_of(events, Content)
    assert (c.complete, c.body) == (True, b"ab")
    assert A.anomalies(events) == []


def test_gap_in_the_middle_of_a_body_and_decoding_resumes_at_the_next_boundary():
    body = b"x" * 300
    head = A.method_frame(1, "basic.publish") + A.header_frame(1, 60, 300, {}) + A.body_frame(1, body[:100])
    second = A.body_frame(1, body[100:])  # 208 bytes; the gap falls inside it
    tail = ACK + A.heartbeat()
    dec = Decoder09("0-9-1", body_bytes=1000)
    dec.feed(0, head + second[:50], 0, 1, 10)
    gap_at, gap_size = len(head) + 50, 60
    dec.gap(0, gap_at, gap_size, 2, 20)
    rest = second[110:] + tail
    dec.feed(0, rest, gap_at + gap_size, 3, 30)
    dec.finish(4, 40)
    events = [e for _, e in dec.pop_events()]
    assert [(a.kind, a.offset, a.skipped, a.packet) for a in A.anomalies(events)] == [
        ("gap", gap_at, 60 + 50, 2),  # lost bytes + the partial frame before them
        ("incomplete-content", 0, 0, 2),
        ("resync", gap_at + gap_size, len(second) - 110, 3),
    ]
    [c] = A.events_of(events, Content)
    assert (c.complete, c.body_size, c.body_received, c.body_frames, c.body, c.packet) == (
        False,
        300,
        100,
        1,
        body[:100],
        2,
    )
    assert c.body_hash == hashlib.sha256(body[:100]).hexdigest()
    assert names(events) == ["basic.publish", "basic.ack"]
    assert len(A.events_of(events, Heartbeat)) == 1
    assert A.account(events) == len(head) + len(second) + len(tail)


def test_gap_at_a_frame_boundary_needs_no_resync_skip():
    dec = Decoder09("0-9-1")
    dec.feed(0, QOS, 0, 1, 1)
    dec.gap(0, len(QOS), 100, 2, 2)
    dec.feed(0, ACK, len(QOS) + 100, 3, 3)
    dec.finish(4, 4)
    events = [e for _, e in dec.pop_events()]
    assert [(a.kind, a.offset, a.skipped, a.detail) for a in A.anomalies(events)] == [
        ("gap", 19, 100, "100 bytes lost in capture")
    ]
    assert names(events) == ["basic.qos", "basic.ack"]
    assert A.account(events) == len(QOS) + 100 + len(ACK)


def test_feed_at_an_unexpected_offset_is_treated_as_a_gap():
    dec = Decoder09("0-9-1")
    dec.feed(0, ACK[:10], 0, 1, 1)
    dec.feed(0, QOS, 50, 2, 2)
    dec.finish(3, 3)
    events = [e for _, e in dec.pop_events()]
    assert [(a.kind, a.offset, a.skipped) for a in A.anomalies(events)] == [("gap", 10, 40 + 10)]
    assert names(events) == ["basic.qos"]
    assert A.account(events) == 50 + len(QOS)


def test_finish_inside_a_frame_is_truncated_stream():
    stream = QOS + ACK[:15]
    _, events = A.decode(stream)
    [an] = A.anomalies(events)
    assert (an.kind, an.offset, an.skipped, an.detail) == (
        "truncated-stream",
        19,
        15,
        "stream ends inside a frame (15 bytes of it captured)",
    )
    assert A.account(events) == len(stream)


def test_finish_inside_a_content_emits_it_incomplete():
    stream = A.method_frame(1, "basic.publish") + A.header_frame(1, 60, 9, {}) + A.body_frame(1, b"abc")
    _, events = A.decode(stream)
    assert [(a.kind, a.detail) for a in A.anomalies(events)] == [
        ("incomplete-content", "basic.publish content incomplete: capture ended")
    ]
    [c] = A.events_of(events, Content)
    assert (c.complete, c.body_received, c.body) == (False, 3, b"abc")


def test_finish_while_resynchronising_is_resync_failed():
    stream = QOS + b"\x01\x00"  # a frame header that never completes, after garbage
    dec = Decoder09("0-9-1")
    dec.feed(0, b"\xff" * 30 + stream, 0, 1, 1)
    dec.finish(2, 2)
    events = [e for _, e in dec.pop_events()]
    assert [(a.kind, a.offset, a.skipped) for a in A.anomalies(events)] == [
        ("unknown-frame-type", 0, 0),
        ("resync", 0, 30),
        ("truncated-stream", 49, 2),
    ]
    dec = Decoder09("0-9-1")
    dec.feed(0, b"\xff" * 30, 0, 1, 1)
    dec.finish(2, 2)
    events = [e for _, e in dec.pop_events()]
    assert [(a.kind, a.offset, a.skipped) for a in A.anomalies(events)] == [
        ("unknown-frame-type", 0, 0),
        ("resync-failed", 0, 30),
    ]
    assert A.account(events) == 30


def test_start_midstream_inside_a_body_frame_skips_to_the_next_frame():
    body = b"y" * 500
    stream = (
        A.method_frame(1, "basic.publish")
        + A.header_frame(1, 60, 500, {})
        + A.body_frame(1, body)
        + ACK
        + A.method_frame(1, "basic.publish")
        + A.header_frame(1, 60, 1, {})
        + A.body_frame(1, b"!")
    )
    start = 17 + 22 + 100  # inside the body frame
    base = 5000  # stream offset of the first captured byte
    dec = Decoder09("0-9-1")
    dec.start_midstream(0, base)
    dec.feed(0, stream[start:], base, 1, 1)
    dec.finish(2, 2)
    events = [e for _, e in dec.pop_events()]
    skip = 17 + 22 + 508 - start
    assert [(a.kind, a.offset, a.skipped) for a in A.anomalies(events)] == [("resync", base, skip)]
    assert names(events) == ["basic.ack", "basic.publish"]
    assert A.events_of(events, Method)[0].offset == base + skip
    [c] = A.events_of(events, Content)
    assert (c.complete, c.body) == (True, b"!")
    assert A.account(events) == len(stream) - start


def test_start_midstream_at_a_frame_boundary_reports_nothing():
    dec = Decoder09("0-9-1")
    dec.start_midstream(0, 0)
    dec.feed(0, ACK + QOS, 0, 1, 1)
    dec.finish(2, 2)
    events = [e for _, e in dec.pop_events()]
    assert A.anomalies(events) == []
    assert names(events) == ["basic.ack", "basic.qos"]


def test_resync_does_not_accept_a_candidate_method_the_spec_does_not_know():
    # a fake method frame with a valid frame-end but unknown class is not a provable boundary
    fake = A.frame(1, 0, b"\x01\x02\x03\x04")
    stream = b"\xee" + fake + ACK
    _, events = A.decode(stream)
    assert [(a.kind, a.skipped) for a in A.anomalies(events)] == [
        ("unknown-frame-type", 0),
        ("resync", 1 + len(fake)),
    ]
    assert names(events) == ["basic.ack"]


def test_heartbeat_on_a_non_zero_channel_is_not_a_resync_boundary_but_decodes_in_sync():
    hb = A.frame(8, 3, b"")
    _, events = A.decode(b"\xee" + hb + ACK)
    assert [(a.kind, a.skipped) for a in A.anomalies(events)] == [
        ("unknown-frame-type", 0),
        ("resync", 1 + 8),
    ]
    _, events = A.decode(hb + ACK)
    assert [(h.channel, h.offset) for h in A.events_of(events, Heartbeat)] == [(3, 0)]


# A false resync candidate (bytes that look like a header claiming up to frame-max) makes the
# decoder wait for its end.  When the stream ends or a gap comes first, that end can never be
# seen: the valid frames buffered behind the candidate must still be decoded, not discarded.
FALSE_CANDIDATE = b"\x03\x00\x01\x00\x0f\x00\x00"  # body frame header claiming 983040 bytes


def test_valid_frames_behind_an_unresolvable_resync_candidate_decode_at_finish():
    stream = b"\xee" + FALSE_CANDIDATE + ACK + QOS + ACK[:5]
    _, events = A.decode(stream)
    assert [(a.kind, a.offset, a.skipped) for a in A.anomalies(events)] == [
        ("unknown-frame-type", 0, 0),
        ("resync", 0, 8),
        ("truncated-stream", 8 + 21 + 19, 5),
    ]
    assert names(events) == ["basic.ack", "basic.qos"]
    assert A.account(events) == len(stream)


def test_valid_frames_behind_an_unresolvable_resync_candidate_decode_before_a_gap():
    dec = Decoder09("0-9-1")
    head = b"\xee" + FALSE_CANDIDATE + ACK + QOS + ACK[:5]
    dec.feed(0, head, 0, 1, 1)
    dec.gap(0, len(head), 1000, 2, 2)
    dec.feed(0, ACK[5:] + QOS, len(head) + 1000, 3, 3)
    dec.finish(4, 4)
    events = [e for _, e in dec.pop_events()]
    assert [(a.kind, a.offset, a.skipped, a.packet) for a in A.anomalies(events)] == [
        ("unknown-frame-type", 0, 0, 1),
        ("resync", 0, 8, 1),
        ("gap", len(head), 1000 + 5, 2),
        ("resync", len(head) + 1000, 16, 3),
    ]
    assert names(events) == ["basic.ack", "basic.qos", "basic.qos"]
    assert A.account(events) == len(head) + 1000 + 16 + len(QOS)


def test_feed_at_an_unexpected_offset_with_nothing_buffered_is_a_gap_too():
    dec = Decoder09("0-9-1")
    dec.feed(0, ACK, 0, 1, 1)  # a whole frame: nothing stays buffered
    dec.feed(0, QOS, 100, 2, 2)
    dec.finish(3, 3)
    events = [e for _, e in dec.pop_events()]
    assert [(a.kind, a.offset, a.skipped) for a in A.anomalies(events)] == [("gap", 21, 79)]
    assert names(events) == ["basic.ack", "basic.qos"]
    assert A.account(events) == 100 + len(QOS)
