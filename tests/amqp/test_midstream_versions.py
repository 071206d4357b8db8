"""Which of 0-8, 0-9 and 0-9-1 a conversation picked up mid-stream speaks: the frames look
alike, so the decoder narrows the candidates with every method whose layout differs
between them, and the connection decoder holds the events until the version is settled."""

from __future__ import annotations

import os
import sys

import pytest

from amqpcap.amqp.decoder import ConnectionDecoder, Decoder09
from amqpcap.amqp.events import Anomaly, Method

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import amqp09 as A  # noqa: E402

PUB = A.method_frame(1, "basic.publish", exchange="ex", routing_key="rk")
ACK = A.method_frame(1, "basic.ack", delivery_tag=1)


def _infer(stream: bytes, direction: int = 0):
    dec = Decoder09(infer=True)
    dec.start_midstream(direction, 0)
    dec.feed(direction, stream, 0, 1, 1)
    return dec, [e for _, e in dec.pop_events()]


def _methods(events):
    return [(e.name, e.args) for e in events if isinstance(e, Method)]


def test_methods_every_version_lays_out_alike_leave_the_version_open():
    dec, ev = _infer(PUB + ACK + A.method_frame(1, "queue.declare", queue="q"))
    assert dec.candidates == ("0-9-1", "0-8", "0-9")
    assert dec.version == "0-9-1"
    assert [n for n, _ in _methods(ev)] == ["basic.publish", "basic.ack", "queue.declare"]
    # laid out alike (0-8's ticket is 0-9-1's reserved-1): remembered, not decoded three times again
    assert {(60, 40), (60, 80), (50, 10)} <= {k for k, v in dec._same.items() if v}


def test_0_8_channel_open_ok_without_arguments_settles_0_8():
    dec, ev = _infer(A.method_frame(1, "channel.open-ok", "0-8") + ACK)
    assert dec.candidates == ("0-8",)
    assert dec.version == "0-8"
    assert _methods(ev)[0] == ("channel.open-ok", {})
    assert not [e for e in ev if isinstance(e, Anomaly)]


def test_0_8_connection_close_is_not_taken_for_connection_blocked():
    frame = A.method_frame(
        0, "connection.close", "0-8", reply_code=320, reply_text="CONNECTION_FORCED", class_id=0, method_id=0
    )
    dec, ev = _infer(frame + A.method_frame(0, "connection.close-ok", "0-8"))
    assert dec.version == "0-8"
    assert _methods(ev) == [
        (
            "connection.close",
            {"reply-code": 320, "reply-text": "CONNECTION_FORCED", "class-id": 0, "method-id": 0},
        ),
        ("connection.close-ok", {}),
    ]


def test_0_9_1_connection_blocked_keeps_0_9_1():
    dec, ev = _infer(A.method_frame(0, "connection.blocked", reason="low on memory"))
    assert dec.version == "0-9-1"
    assert "0-8" not in dec.candidates
    assert _methods(ev) == [("connection.blocked", {"reason": "low on memory"})]


def test_0_8_basic_consume_without_an_arguments_table():
    frame = A.method_frame(1, "basic.consume", "0-8", queue="q", consumer_tag="c1")
    dec, ev = _infer(frame)
    assert dec.version == "0-8"
    assert _methods(ev)[0][1]["consumer-tag"] == "c1"


def test_basic_consume_with_its_table_proves_nothing_as_rabbitmq_sends_it_to_0_8_clients_too():
    # (and its 0-8 channel.open-ok is 0-9-1's, an empty long string: see DIALECT_FIELDS)
    dec, ev = _infer(
        A.method_frame(1, "basic.consume", queue="q", consumer_tag="c1", arguments={"x-priority": 5})
        + A.method_frame(1, "channel.open-ok")
    )
    assert dec.candidates == ("0-9-1", "0-8", "0-9")
    assert _methods(ev)[0][1]["arguments"] == {"x-priority": 5}


def test_access_request_rules_out_0_9_1_and_names_0_8_first():
    dec, ev = _infer(A.method_frame(1, "access.request", "0-8", realm="/data", active=True, read=True))
    assert dec.candidates == ("0-8", "0-9")
    assert dec.version == "0-8"
    assert _methods(ev)[0][0] == "access.request"


def test_0_9_message_transfer_settles_0_9():
    frame = A.method_frame(1, "message.transfer", "0-9", destination="d", body=b"hello")
    dec, ev = _infer(frame)
    assert dec.version == "0-9"
    [(name, args)] = _methods(ev)
    assert name == "message.transfer" and args["destination"] == "d"


def test_a_frame_no_candidate_decodes_is_malformed_and_proves_nothing():
    bad = A.frame(1, 1, b"\x00\x14\x00\x0b\x00\x00")  # channel.open-ok with 2 stray bytes: 0-8 no, 0-9-1 no
    dec, ev = _infer(ACK + bad + ACK)
    assert dec.candidates == ("0-9-1", "0-8", "0-9")
    assert [a.kind for a in ev if isinstance(a, Anomaly)] == ["malformed-method"]


def test_a_version_named_by_a_header_is_never_narrowed():
    dec = Decoder09("0-9-1")
    dec.feed(0, A.method_frame(1, "channel.open-ok", "0-8"), 0, 1, 1)
    ev = [e for _, e in dec.pop_events()]
    assert dec.version == "0-9-1"
    assert [a.kind for a in ev if isinstance(a, Anomaly)] == ["malformed-method"]


# -- the connection decoder holds the rows until the version is settled -------------------


def _conn(c2s: bytes, s2c: bytes, *, finish: bool = False):
    dec = ConnectionDecoder(amqp_port=True)
    dec.data(0, 1000, c2s, 1, 1)
    first = dec.pop_events()
    dec.data(1, 2000, s2c, 2, 2)
    second = dec.pop_events()
    if finish:
        dec.finish(3, 3)
    return dec, first, second + (dec.pop_events() if finish else [])


def test_events_wait_for_the_evidence_that_names_the_version():
    c2s = (
        A.method_frame(1, "channel.open", "0-8") + PUB + A.header_frame(1, 60, 2, {}) + A.body_frame(1, b"hi")
    )
    s2c = A.method_frame(1, "channel.open-ok", "0-8")
    dec, first, second = _conn(c2s, s2c)
    assert first == []  # 0-8, 0-9 or 0-9-1: not known yet
    assert dec.version == "0-8" and dec.version_evidence == "inferred" and dec.mid_stream
    names = [e.name for _, e in second if isinstance(e, Method)]
    assert names == ["channel.open", "basic.publish", "channel.open-ok"]


def test_events_are_released_at_the_end_of_the_capture_even_if_nothing_settled_it():
    dec, first, rest = _conn(PUB + A.header_frame(1, 60, 0, {}), ACK, finish=True)
    assert first == []
    assert dec.version == "0-9-1"
    assert [e.name for _, e in rest if isinstance(e, Method)] == ["basic.publish", "basic.ack"]


@pytest.mark.parametrize("frame_events", [True, False])
def test_holding_is_bounded(frame_events):
    """Frames count toward the bound whether or not they are events (without --frames the
    version is settled at the same point)."""
    dec = ConnectionDecoder(amqp_port=True, frame_events=frame_events)
    released, off = [], 0
    for i in range(3000):
        dec.data(0, off, ACK, i + 1, i)
        off += len(ACK)
        released += dec.pop_events()
        if released:
            break
    assert released, "events were held without bound"
    assert len(released) <= dec._hold_max + 2
    assert i + 1 == dec._hold_max // 2  # an ack is a frame and a method, events or not
    assert dec.version == "0-9-1"
    dec.data(0, off, ACK, 9999, 9999)
    assert dec.pop_events(), "after the bound, events flow again"


@pytest.mark.parametrize("body_bytes,most", [(64, 4096), (1 << 20, 64)])
def test_hold_bound_shrinks_with_the_body_bytes_kept(body_bytes, most):
    assert ConnectionDecoder(body_bytes=body_bytes)._hold_max == most


def test_once_both_directions_are_settled_the_reassembler_feeds_the_codec_directly():
    dec = ConnectionDecoder()
    dec.data(0, 0, A.protocol_header("0-9-1"), 1, 1)
    assert dec.data.__func__ is ConnectionDecoder.data  # the server has not spoken
    dec.data(1, 0, A.method_frame(0, "connection.start", version_major=0, version_minor=9), 2, 2)
    assert dec.data == dec.codec.data
    dec.data(0, 8, ACK, 3, 3)
    assert [e.name for _, e in dec.pop_events() if isinstance(e, Method)] == ["connection.start", "basic.ack"]


def _server_after_header(s2c: bytes):
    dec = ConnectionDecoder()
    dec.data(0, 0, A.protocol_header("0-9-1"), 1, 1)
    dec.data(1, 0, s2c, 2, 2)
    dec.finish(3, 3)
    return [e for _, e in dec.pop_events()]


def test_a_server_seen_from_its_first_frame_has_no_messages_begun_before_the_capture():
    """The client's header was captured, so the server's first byte is its stream's first: a
    body frame with no delivery before it is a protocol error, not the rest of a message the
    capture missed (a mid-stream start would count it in its resync anomaly)."""
    start = A.method_frame(0, "connection.start", version_major=0, version_minor=9)
    ev = _server_after_header(start + A.body_frame(1, b"stray"))
    assert [(a.kind, a.channel) for a in ev if isinstance(a, Anomaly)] == [("unexpected-frame", 1)]
    assert [e.name for e in ev if isinstance(e, Method)] == ["connection.start"]


def test_a_server_whose_first_bytes_are_not_a_frame_is_still_resynchronised():
    start = A.method_frame(0, "connection.start", version_major=0, version_minor=9)
    ev = _server_after_header(b"\x00junk" + start)
    kinds = [(a.kind, a.skipped) for a in ev if isinstance(a, Anomaly)]
    assert kinds == [("resync", 5)]
    assert [e.name for e in ev if isinstance(e, Method)] == ["connection.start"]
