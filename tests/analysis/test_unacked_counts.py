"""Unacked counts of the consumer-ack pass counted as the walk passes each channel's events: the
same as counting every event at the end, holding the events not final rather than one per
delivery, and counted again with every event held when times do not rise with packets."""

import os
import random

import numpy as np
import pandas as pd
import pytest
from tables import Capture
from test_content_stream import delay_contents
from test_streamed_acks import TIMELINE, of_loaded, random_consumer_traffic, streamed
from test_streamed_confirms import write_output

from amqpcap.analysis import batches
from amqpcap.analysis import streamed_acks as acks_module
from amqpcap.analysis.connection_health import unacked
from amqpcap.analysis.streamed_acks import streamed_acks
from amqpcap.analysis.unacked_counts import DELIVERY, QOS, SETTLE, UnackedCounts, Unordered


def same_timeline(got, c: Capture) -> None:
    """The pass' unacked steps equal unacked of the loaded tables, channel by channel."""
    keys = ["capture", "tcp_stream", "channel"]
    want = unacked(c.tables())[TIMELINE].sort_values(keys, kind="stable").reset_index(drop=True)
    got = got.frame().astype({"capture": object, "event": object}).sort_values(keys, kind="stable")
    pd.testing.assert_frame_equal(
        got.reset_index(drop=True), want.astype({"capture": object, "event": object}), check_dtype=False
    )


def random_events(seed: int, n: int = 400) -> dict:
    """Events of four channels in packet order with times rising with packets (ties too), a few
    settles sharing a packet, qos with and without a prefetch count."""
    rnd = random.Random(seed)
    rows = []
    frame, ts = 0, 0
    for _ in range(n):
        frame += rnd.choice((0, 1, 1, 2))
        ts += rnd.choice((0, 0, 5))
        kind = rnd.choice((DELIVERY,) * 5 + (SETTLE,) * 3 + (QOS,))
        delta = 1 if kind == DELIVERY else -rnd.randrange(1, 4) if kind == SETTLE else 0
        prefetch = rnd.choice((-1, 0, 2, 3)) if kind == QOS else -2
        rows.append((rnd.randrange(4), ts, frame, kind, delta, prefetch))
    return {k: np.array(v) for k, v in zip(("chan", "ts", "frame", "kind", "delta", "prefetch"), zip(*rows))}


def counted(ev: dict, chunks: list, bounds: list | None, timeline: bool = True):
    """``ev`` added in the pieces ``chunks`` (index arrays), folded after each at ``bounds``."""
    u = UnackedCounts(timeline=timeline, bounded=bounds is not None)
    for i, at in enumerate(chunks):
        for kind in (SETTLE, QOS, DELIVERY):
            k = at[ev["kind"][at] == kind]
            u.add(ev["chan"][k], ev["ts"][k], ev["frame"][k], kind, ev["delta"][k],
                  ev["prefetch"][k] if kind == QOS else None)  # fmt: skip
        if bounds is not None:
            u.fold(bounds[i])
    peak, over, steps = u.finish()
    return peak, over, steps.arrays() if timeline else steps


def same(a, b) -> None:
    """The same peak, channels over their prefetch and steps, each channel's in the same order."""
    assert a[0] == b[0] and list(a[1]) == list(b[1])
    oa, ob = (np.argsort(x[2]["chan"], kind="stable") for x in (a, b))
    for k in a[2]:
        assert np.array_equal(a[2][k][oa], b[2][k][ob]), k


@pytest.mark.parametrize("seed", range(8))
def test_counting_as_packets_pass_equals_counting_every_event_at_the_end(seed):
    ev = random_events(seed)
    rnd = random.Random(seed)
    cuts = sorted(rnd.sample(range(1, len(ev["chan"])), 30))
    chunks = np.split(np.arange(len(ev["chan"])), cuts)
    # a piece's events are final below its last packet (the next piece may share that packet)
    bounds = [np.full(4, ev["frame"][c[-1]]) for c in chunks]
    whole = counted(ev, [np.arange(len(ev["chan"]))], None)
    assert whole[0] >= 2 and len(whole[1])
    same(counted(ev, chunks, bounds), whole)
    # (pieces in another order: settles of one packet split across pieces still one step)
    same(counted(ev, chunks[::-1], [np.full(4, -1)] * (len(chunks) - 1) + [bounds[-1]]), whole)


def test_a_packet_settling_in_two_pieces_is_one_step_when_both_are_held():
    ev = {"chan": np.array([0, 0, 0, 0]), "ts": np.array([1, 2, 3, 3]), "frame": np.array([1, 2, 3, 3]),
          "kind": np.array([DELIVERY, DELIVERY, SETTLE, SETTLE]), "delta": np.array([1, 1, -1, -1]),
          "prefetch": np.full(4, -2)}  # fmt: skip
    got = counted(ev, [np.array([0, 1, 2]), np.array([3])], [np.array([3]), np.array([4])])
    assert got[0] == 2 and list(np.cumsum(got[2]["delta"])) == [1, 2, 0]


def test_an_event_before_one_already_counted_raises_unordered():
    ev = {"chan": np.array([0, 0]), "ts": np.array([5, 1]), "frame": np.array([1, 2]),
          "kind": np.array([DELIVERY, DELIVERY]), "delta": np.array([1, 1]),
          "prefetch": np.full(2, -2)}  # fmt: skip
    with pytest.raises(Unordered):
        counted(ev, [np.array([0]), np.array([1])], [np.array([2]), np.array([3])])
    # a settle at a packet already counted would be a second step for that packet
    ev["ts"], ev["kind"], ev["delta"] = np.array([1, 1]), np.array([SETTLE, SETTLE]), np.array([-1, -1])
    ev["frame"] = np.array([1, 1])
    with pytest.raises(Unordered):
        counted(ev, [np.array([0]), np.array([1])], [np.array([2]), np.array([3])])


def long_consumer_traffic(seed: int, n: int = 3000) -> Capture:
    """Two consumers on two connections taking deliveries for a long time, acking 1-5 at a time
    (single or multiple, nack, reject), some left unacked until their channel is opened again,
    a qos now and then."""
    rnd = random.Random(seed)
    c = Capture()
    for st in (0, 1):
        c.method(0, "c2s", "basic.consume", stream=st, channel=1, queue="q", consumer_tag="c%d" % st)
    tags = {0: 0, 1: 0}
    out: dict = {0: [], 1: []}
    for i in range(n):
        st = rnd.randrange(2)
        key = dict(stream=st, channel=1)
        r = rnd.random()
        if r < 0.5:
            tags[st] += 1
            out[st].append(tags[st])
            c.method(i, "s2c", "basic.deliver", consumer_tag="c%d" % st, delivery_tag=tags[st], body=b"x",
                     redelivered=rnd.random() < 0.1, **key)  # fmt: skip
        elif r < 0.95 and out[st]:
            many = rnd.random() < 0.5
            tag = out[st][min(rnd.randrange(5), len(out[st]) - 1)] if many else rnd.choice(out[st])
            name = rnd.choice(("basic.ack",) * 4 + ("basic.nack", "basic.reject"))
            c.method(i, "c2s", name, delivery_tag=tag, multiple=many and name != "basic.reject", **key)
            out[st] = [t for t in out[st] if t > tag] if many and name != "basic.reject" else out[st]
            if not many or name == "basic.reject":
                out[st].remove(tag)
        elif r < 0.97:
            c.method(i, "c2s", "basic.qos", prefetch_count=rnd.choice((2, 4)), **key)
        elif r < 0.975:
            c.method(i, "c2s", "channel.open", **key)
            c.method(i, "c2s", "basic.consume", queue="q", consumer_tag="c%d" % st, **key)
            out[st] = []
    return c


class Held(UnackedCounts):
    """UnackedCounts recording the most events it held after a fold and the ways it counted."""

    made: list = []

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.most = 0
        Held.made.append(self)

    def fold(self, bound):
        super().fold(bound)
        self.most = max(self.most, sum(len(h["chan"]) for h in self.held))


@pytest.mark.parametrize("seed", range(3))
def test_the_pass_holds_the_events_not_final_not_one_per_delivery(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(batches, "PASS_ROWS", 5)
    monkeypatch.setattr(acks_module, "ROWS", 16)
    monkeypatch.setattr(acks_module, "UnackedCounts", Held)
    Held.made = []
    c = long_consumer_traffic(seed)
    delay_contents(c, seed, most=6)
    got: list = []
    out = write_output(c, tmp_path)
    values, counts, health = streamed_acks(out, on_timeline=got.append)
    assert [u.bounded for u in Held.made] == [True]
    assert counts["acked"] > 800 and counts["unsettled"] and health["max_unacked"] > 5
    assert 0 < Held.made[0].most < 100  # (about 1,500 deliveries)
    assert streamed(out) == of_loaded(c.tables())
    same_timeline(got[0], c)


def backwards_times(c: Capture, seed: int) -> int:
    """Some methods (and their contents) stamped earlier than the packets before them in their
    conversation; how many."""
    rnd = random.Random(seed)
    moved = 0
    for m in c.rows["methods"]:
        if rnd.random() < 0.05:
            m["ts"] -= pd.Timedelta(milliseconds=rnd.randrange(20, 200))
            moved += 1
    done = {(m["tcp_stream"], m["frame_number"]): m["ts"] for m in c.rows["methods"]}
    for m in c.rows["messages"]:
        m["ts"] = done.get((m["tcp_stream"], m["frame_number"]), m["ts"])
    return moved


@pytest.mark.parametrize("seed", range(4))
def test_times_going_back_within_a_conversation_are_counted_again_with_every_event_held(
    tmp_path, monkeypatch, seed
):
    monkeypatch.setattr(batches, "PASS_ROWS", 5)
    monkeypatch.setattr(acks_module, "ROWS", 7)
    monkeypatch.setattr(acks_module, "UnackedCounts", Held)
    Held.made = []
    c = long_consumer_traffic(seed, n=600)
    assert backwards_times(c, seed) > 10
    out = write_output(c, tmp_path)
    got: list = []
    values, counts, health = streamed_acks(out, on_timeline=got.append)
    assert [u.bounded for u in Held.made] == [True, False]
    assert streamed(out) == of_loaded(c.tables())
    same_timeline(got[0], c)


@pytest.mark.parametrize("seed", range(6, 10))
def test_random_consumer_traffic_with_late_contents_counts_unacked_as_the_loaded_tables(
    tmp_path, monkeypatch, seed
):
    monkeypatch.setattr(batches, "PASS_ROWS", 5)
    monkeypatch.setattr(acks_module, "ROWS", 5)
    c = random_consumer_traffic(seed, rows=700)
    delay_contents(c, seed)
    out = write_output(c, tmp_path)
    assert streamed(out) == of_loaded(c.tables())
    got: list = []
    streamed_acks(out, on_timeline=got.append)
    same_timeline(got[0], c)


def test_deliveries_whose_content_never_completes_are_counted_at_their_own_packet_in_order(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(batches, "PASS_ROWS", 5)
    monkeypatch.setattr(acks_module, "ROWS", 16)
    monkeypatch.setattr(acks_module, "UnackedCounts", Held)
    Held.made = []
    c = long_consumer_traffic(3, n=800)
    delay_contents(c, 3, most=4)
    rows = c.rows["messages"]
    c.rows["messages"] = [m for i, m in enumerate(rows) if i % 25 != 7]  # (those timed at their own)
    assert len(c.rows["messages"]) < len(rows) - 10
    out = write_output(c, tmp_path)
    got: list = []
    streamed_acks(out, on_timeline=got.append)
    assert [u.bounded for u in Held.made] == [True]
    assert streamed(out) == of_loaded(c.tables())
    same_timeline(got[0], c)


@pytest.mark.parametrize("most", [3, 1 << 16], ids=["total-in-spans-of-3-steps", "total-in-one-span"])
def test_the_pass_timeline_gives_the_channel_peaks_and_total_line_of_its_frame(tmp_path, monkeypatch, most):
    from amqpcap.analysis import report, unacked_counts

    monkeypatch.setattr(acks_module, "ROWS", 7)
    monkeypatch.setattr(unacked_counts, "READ", 5)  # (the file read back a few steps at a time)
    got: list = []
    streamed_acks(write_output(random_consumer_traffic(2), tmp_path), on_timeline=got.append)
    timeline = got[0]
    un = timeline.frame()
    assert len(un) == len(timeline) and un.groupby(["tcp_stream", "channel"]).ngroups >= 5
    ids, peak, latest = timeline.channels()
    want_peak, want_pf = report._per_channel(un, report._channel_codes(un))
    got_peak, got_pf = report._peaks(pd.DataFrame(timeline.channel_keys(ids)), peak, latest)
    pd.testing.assert_series_equal(got_peak, want_peak)
    pd.testing.assert_series_equal(got_pf, want_pf)
    pieces = list(timeline.total(most=most))
    assert len(pieces) == (1 if most > len(un) else -(-len(un) // most))
    ts, total = (np.concatenate(v) for v in zip(*pieces))
    t0n = int(ts[0])
    x, y = report.total_unacked(un, t0n)
    np.testing.assert_array_equal((ts - t0n) / 1e9, x)
    np.testing.assert_array_equal(total.astype(float), y)
    assert (ts[0], ts[-1]) == timeline.span()


def test_the_timeline_steps_go_to_a_temporary_file_and_a_full_folder_is_an_error_naming_it(
    tmp_path, monkeypatch
):
    import errno
    import io
    import tempfile

    from amqpcap.analysis import unacked_counts

    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    out = write_output(random_consumer_traffic(1), tmp_path / "out")
    got: list = []
    streamed_acks(out, on_timeline=got.append)
    steps = got[0].steps
    assert len(got[0]) > 100 and steps.file.seek(0, io.SEEK_END) == 21 * len(got[0])
    assert os.listdir(root) == []  # (the file has no name: nothing left behind)

    class Full(io.BytesIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(unacked_counts.tempfile, "TemporaryFile", lambda **kw: Full())
    with pytest.raises(OSError) as e:
        streamed_acks(out, on_timeline=got.append)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(root)
    # (an OSError naming a file: the command line's one line and exit 3)
    assert "No space left on device (temporary files of the unacked timeline)" in str(e.value)
    assert streamed_acks(out)[1] == streamed_acks(write_output(random_consumer_traffic(1), tmp_path / "b"))[1]


def test_each_channels_rows_found_by_its_code_are_the_rows_its_key_selects(tmp_path):
    from amqpcap.analysis import report

    got: list = []
    streamed_acks(write_output(random_consumer_traffic(2), tmp_path), on_timeline=got.append)
    un = got[0].frame()
    rows = report._channel_rows(un, report._channel_codes(un))
    keys = list(un.groupby(report._CHANNEL, observed=True).groups)
    assert len(keys) >= 5 and set(rows) == {*keys, None} and len(rows[None]) == 0
    for k in keys:
        selected = (un["capture"] == k[0]) & (un["tcp_stream"] == k[1]) & (un["channel"] == k[2])
        np.testing.assert_array_equal(rows[k], np.flatnonzero(selected.to_numpy()))
