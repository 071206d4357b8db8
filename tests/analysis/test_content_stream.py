"""Publishes and deliveries timed at the packet completing their content, read from ``messages``
alongside the methods walk: contents completing packets after their method (after the ack, after
other methods of the conversation) in batches of a few rows give the loaded pairing's numbers."""

import random

import numpy as np
import pandas as pd
import pytest
from tables import Capture
from test_streamed_acks import of_loaded, random_consumer_traffic, streamed
from test_streamed_confirms import streamed_summary, summary_of_frame, write_output

from amqpcap.analysis import batches
from amqpcap.analysis import streamed_acks as acks_module


def delay_contents(c: Capture, seed: int, most: int = 25) -> int:
    """Each content completed 0 to ``most`` packets (and ms) after its method, the messages rows
    in packet order (as dissect writes them); how many complete after a later method."""
    rnd = random.Random(seed)
    later = 0
    for m in c.rows["messages"]:
        d = rnd.randrange(most)
        m["frame_number"] += d
        m["ts"] += pd.Timedelta(milliseconds=d)
        later += d > 1
    c.rows["messages"].sort(key=lambda m: m["frame_number"])
    return later


def random_confirm_traffic(seed: int, rows: int = 400) -> Capture:
    """Publishes on channels in confirm mode and not, acks / nacks single, multiple and tag 0,
    channel reopenings and selects, on three channels of two connections."""
    rnd = random.Random(seed)
    c = Capture()
    published: dict = {}
    for i in range(rows):
        stream, channel = rnd.randrange(2), rnd.randrange(1, 4)
        key = dict(channel=channel, stream=stream)
        r = rnd.random()
        if r < 0.04:
            c.method(i, "c2s", "channel.open", **key)
            published[(stream, channel)] = 0
        elif r < 0.1:
            c.method(i, "c2s", "confirm.select", **key)
        elif r < 0.6:
            c.method(i, "c2s", "basic.publish", body=b"%d" % i, **key)
            published[(stream, channel)] = published.get((stream, channel), 0) + 1
        else:
            top = published.get((stream, channel), 0) + 1
            c.method(i, "s2c", rnd.choice(("basic.ack",) * 3 + ("basic.nack",)),
                     delivery_tag=rnd.choice((0, rnd.randrange(0, top + 1), top)),
                     multiple=rnd.random() < 0.5, **key)  # fmt: skip
    return c


@pytest.mark.parametrize("seed", range(5))
def test_confirms_timed_at_contents_completed_later_equal_the_loaded_pairing_in_small_batches(
    tmp_path, monkeypatch, seed
):
    monkeypatch.setattr(batches, "PASS_ROWS", 5)
    c = random_confirm_traffic(seed)
    assert delay_contents(c, seed) > 50
    want = summary_of_frame(c.tables())
    assert want["acked"] and want["nacked"] and want["unconfirmed"]
    assert streamed_summary(write_output(c, tmp_path)) == want


@pytest.mark.parametrize("seed", range(5))
def test_deliveries_timed_at_contents_completed_later_equal_the_loaded_pairing_in_small_batches(
    tmp_path, monkeypatch, seed
):
    monkeypatch.setattr(batches, "PASS_ROWS", 5)
    monkeypatch.setattr(acks_module, "ROWS", 7)
    c = random_consumer_traffic(seed)
    assert delay_contents(c, seed) > 50
    want = of_loaded(c.tables())
    assert want[0]["acked"] and want[0]["unsettled"] and want[1]["max_unacked"]
    assert streamed(write_output(c, tmp_path)) == want


def test_a_publish_confirmed_before_its_content_is_read_is_timed_at_its_content(tmp_path, monkeypatch):
    monkeypatch.setattr(batches, "PASS_ROWS", 1)
    c = Capture()
    c.method(0, "c2s", "confirm.select", channel=1)
    c.method(10, "c2s", "basic.publish", channel=1, body=b"x", frame=2)
    c.method(11, "s2c", "basic.ack", channel=1, delivery_tag=1, frame=3)
    for i in range(5):  # (messages rows of another conversation read before the content)
        c.method(12 + i, "c2s", "basic.publish", channel=1, stream=1, body=b"y", frame=4 + i)
    c.rows["messages"][0].update(frame_number=20, ts=c.rows["messages"][0]["ts"] + pd.Timedelta(seconds=1))
    c.rows["messages"].sort(key=lambda m: m["frame_number"])
    from amqpcap.analysis.streamed_confirms import streamed_confirms

    values, counts = streamed_confirms(write_output(c, tmp_path))
    assert np.allclose(values, [11 - 1010]) and counts["acked"] == 1
