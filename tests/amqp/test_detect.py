"""Protocol headers and the framing of a conversation picked up mid-stream (amqp/detect.py)."""

from __future__ import annotations

import os
import random
import sys

import pytest

from amqpcap.amqp import detect

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
sys.path.insert(0, os.path.dirname(__file__))
import amqp09 as A  # noqa: E402
import codec010_builders as B  # noqa: E402

PUB = A.method_frame(1, "basic.publish", exchange="ex", routing_key="rk")
HDR = A.header_frame(1, 60, 300, {"content-type": "text/plain"})
BODY = A.body_frame(1, b"b" * 300)
ACK = A.method_frame(1, "basic.ack", delivery_tag=7)
STREAM_09 = (PUB + HDR + BODY + ACK) * 3

CMD = B.command(
    "message.transfer",
    {"destination": "amq.direct", "accept-mode": 1, "acquire-mode": 0},
    header={"message.message-properties": {"content-type": "text/plain"}},
    body=b"z" * 400,
)
STREAM_010 = (CMD + B.control("session.completed", {"commands": [(0, 3)]}, channel=1)) * 3


def _find(data, final=False):
    found, resume = detect.find_midstream_boundary(data, final)
    return found


@pytest.mark.parametrize(
    "raw,version",
    [
        (b"AMQP\x01\x01\x08\x00", "0-8"),
        (b"AMQP\x01\x01\x09\x01", "0-8"),
        (b"AMQP\x01\x01\x00\x09", "0-9"),
        (b"AMQP\x00\x00\x09\x01", "0-9-1"),
        (b"AMQP\x01\x01\x00\x0a", "0-10"),
        (b"AMQP\x00\x01\x00\x00", "1.0"),
        (b"AMQP\x03\x01\x00\x00", "1.0-sasl"),
        (b"AMQP\x02\x01\x00\x00", "1.0-tls"),
        (b"AMQP\x09\x09\x09\x09", None),
        (b"HTTP/1.1", None),
        (b"AMQP", None),
    ],
)
def test_header_versions(raw, version):
    assert detect.header_version(raw) == version


def test_tls_record_starts():
    assert detect.is_tls(b"\x16\x03\x01\x02\x00")
    assert not detect.is_tls(b"\x01\x00\x00\x00\x00")


def test_a_stream_that_starts_with_a_frame_is_proven_by_that_frame_alone():
    assert _find(PUB) == ("0-9", 0)
    assert _find(B.control("session.completed", {"commands": [(0, 1)]}, channel=1)) == ("0-10", 0)


@pytest.mark.parametrize("cut", [1, 5, 17, 30, 40, 100, 250, 331])
def test_0_9_stream_cut_inside_a_frame_starts_at_the_next_whole_frame(cut):
    data = STREAM_09[cut:]
    starts = _starts_0_9(STREAM_09)
    expected = min(s for s in starts if s >= cut) - cut
    assert _find(data) == ("0-9", expected)


@pytest.mark.parametrize("cut", [1, 11, 12, 40, 200, 430])
def test_0_10_stream_cut_inside_a_frame_starts_at_the_next_whole_frame(cut):
    data = STREAM_010[cut:]
    starts = _starts_0_10(STREAM_010)
    expected = min(s for s in starts if s >= cut) - cut
    assert _find(data) == ("0-10", expected)


def test_one_whole_frame_after_a_cut_is_not_proof_until_the_data_ends():
    # the tail of a body frame, then one ack: a single chained frame could be chance
    data = BODY[-50:] + ACK
    assert _find(data) is None
    assert _find(data, final=True) == ("0-9", 50)
    # a second frame proves it without waiting for the end
    assert _find(data + ACK) == ("0-9", 50)


def test_lone_0_10_header_whose_frame_runs_past_the_end_counts_only_at_the_end():
    big = B.frame(0x0B, 3, b"q" * 60000, 1, 1)
    data = b"\x01" * 37 + big[:30000]
    assert _find(data) is None
    assert _find(data, final=True) == ("0-10", 37)


def test_0_10_frames_are_not_taken_for_0_9_frames_and_back():
    for cut in range(0, 200, 7):
        found = _find(STREAM_010[cut:], final=True)
        assert found is not None and found[0] == "0-10", cut
        found = _find(STREAM_09[cut:], final=True)
        assert found is not None and found[0] == "0-9", cut


def test_chains_break_on_what_no_frame_has():
    assert detect.chain_0_9(ACK + ACK, 0) == 2
    assert detect.chain_0_9(ACK[:-1] + b"\x00" + ACK, 0) == -1  # frame-end octet
    unknown = A.frame(1, 1, b"\x00\x63\x00\x01")  # class 99 is in no 0-8/0-9/0-9-1 table
    assert detect.chain_0_9(unknown + ACK, 0) == -1
    assert detect.chain_0_9(A.frame(8, 1, b"") + ACK, 0) == -1  # heartbeat on channel 1
    assert detect.chain_0_9(A.frame(9, 0, b"") + ACK, 0) == -1  # type 9
    assert detect.chain_0_9(ACK + ACK[:5], 0) == 1  # a cut-short last frame does not break it
    assert detect.chain_0_10(STREAM_010, 0) >= 6
    bad = bytearray(STREAM_010)
    bad[1] = 4  # segment type 4
    assert detect.chain_0_10(bytes(bad), 0) == -1
    wrong_track = B.frame(0x0F, 1, b"\x07\x01\x01\x00", 1, 0)  # a command on the control track
    assert detect.chain_0_10(wrong_track, 0) == -1


def test_random_bytes_prove_nothing():
    rnd = random.Random(3)
    for _ in range(20):
        assert _find(rnd.randbytes(4096)) is None


@pytest.mark.parametrize(
    "stream",
    [
        STREAM_09,
        STREAM_010,
        random.Random(9).randbytes(3000) + STREAM_010,
        random.Random(8).randbytes(3000) + STREAM_09,
    ],
    ids=["09", "010", "junk010", "junk09"],
)
@pytest.mark.parametrize("cut", [0, 3, 29, 150])
def test_a_scan_resumed_as_data_arrives_finds_what_a_whole_scan_finds(stream, cut):
    data = stream[cut:]
    resume = 0
    for end in range(1, len(data) + 1, 37):
        found, new = detect.find_midstream_boundary(data[:end], False, resume)
        assert found == _find(data[:end]), end
        assert resume <= new <= end
        resume = new
        if found:
            break
    assert found is not None


def test_a_resumed_scan_starts_past_what_is_disproven():
    junk = bytes(range(9, 200)) * 20  # no type octet 1-8, no 0-10 header anywhere
    found, resume = detect.find_midstream_boundary(junk)
    assert found is None and resume >= len(junk) - 11


def _starts_0_9(stream):
    out, p = [], 0
    while p < len(stream):
        out.append(p)
        p += 8 + int.from_bytes(stream[p + 3 : p + 7], "big")
    return out


def _starts_0_10(stream):
    out, p = [], 0
    while p < len(stream):
        out.append(p)
        p += int.from_bytes(stream[p + 2 : p + 4], "big")
    return out
