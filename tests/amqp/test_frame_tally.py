"""The frame tally: every frame decoded reaches the decoder's ``tally``, whether or not it also
becomes a ``Frame`` event (without the frames table the pipeline asks for none)."""

from __future__ import annotations

from fixtures import amqp09 as A

from amqpcap.amqp.decoder import Decoder09
from amqpcap.amqp.events import Frame
from amqpcap.records.liveness import Liveness

BODY = b"x" * 3000


def _chunks():
    """Three packets: a publish in 4 frames; a heartbeat, an ack and the first half of another
    publish (its method and header whole); the rest of it (2 body frames)."""
    pub = [
        A.method_frame(1, "basic.publish", exchange="x", routing_key="k"),
        A.header_frame(1, 60, len(BODY), {}),
        A.body_frame(1, BODY[:1500]),
        A.body_frame(1, BODY[1500:]),
    ]
    one = b"".join(pub)
    two = A.heartbeat() + A.method_frame(1, "basic.ack", delivery_tag=1, multiple=False)
    cut = len(one) // 2
    return [one, two + one[:cut], one[cut:]]


def _decode(frame_events: bool):
    calls = []
    live = Liveness()

    def tally(direction, ts, n):
        calls.append((direction, ts, n))
        live.frames_seen(direction, ts, n)

    dec = Decoder09("0-9-1")
    dec.tally, dec.frame_events = tally, frame_events
    off = 0
    for i, c in enumerate(_chunks()):
        dec.feed(0, c, off, i + 1, 1000 * (i + 1))
        off += len(c)
    dec.finish(9, 9000)
    return calls, live, [e for _, e in dec.pop_events()], dec


def test_every_frame_is_tallied_at_its_packets_time_with_or_without_frame_events():
    with_events, live_a, events, _ = _decode(True)
    without, live_b, quiet, dec = _decode(False)
    frames = [e for e in events if type(e) is Frame]
    assert len(frames) == 10
    assert sum(n for _, _, n in with_events) == sum(n for _, _, n in without) == 10
    # per packet time, the same count either way, and the one the Frame events carry
    by_ts = {}
    for f in frames:
        by_ts[f.ts] = by_ts.get(f.ts, 0) + 1
    for calls in (with_events, without):
        seen = {}
        for _, ts, n in calls:
            seen[ts] = seen.get(ts, 0) + n
        assert seen == by_ts == {1000: 4, 2000: 4, 3000: 2}
    assert live_a.frames == live_b.frames == [10, 0]
    assert live_a.last == live_b.last and live_a.gap == live_b.gap and live_a.gap_start == live_b.gap_start
    # nothing but the Frame events is missing, and the held count knows about them
    assert quiet == [e for e in events if type(e) is not Frame]
    assert dec.silent_frames == 0  # popped


def test_frames_not_emitted_are_counted_until_the_events_are_popped():
    dec = Decoder09("0-9-1")
    dec.frame_events = False
    data = A.method_frame(1, "basic.ack", delivery_tag=1, multiple=False) * 3
    dec.feed(0, data, 0, 1, 1000)
    assert dec.silent_frames == 3
    assert not any(type(e) is Frame for _, e in dec.pop_events())
    assert dec.silent_frames == 0


def test_a_tally_of_n_frames_at_one_time_is_n_frames_one_by_one():
    for n in (1, 2, 5):
        for before in ([], [100], [100, 100], [100, 350]):
            one_by_one, at_once = Liveness(), Liveness()
            for ts in before:
                one_by_one.frames_seen(0, ts)
                at_once.frames_seen(0, ts)
            for _ in range(n):
                one_by_one.frames_seen(0, 500)
            at_once.frames_seen(0, 500, n)
            assert one_by_one.columns() == at_once.columns(), (n, before)
            assert one_by_one.frames == at_once.frames == [len(before) + n, 0]
