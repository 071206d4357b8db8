"""Consumer acknowledgements of a dissect output in one pass over its tables (what ``stats``
reports of them: latencies, outcome counts and the unacked health), holding the consumers, the
outstanding deliveries and a few numbers per settled one, not the tables
(:mod:`~amqpcap.analysis.ack_walk`: a batch of rows at a time, in numpy).

The rules are :func:`amqpcap.analysis.acknowledgements.consumer_acks`'s for 0-8 / 0-9 / 0-9-1
channels (settled by tag, ``multiple``, recover) and :func:`~amqpcap.analysis.connection_health.unacked`'s.
What they decide otherwise (0-10 command sets) raises :class:`~amqpcap.analysis.batches.OutOfOrder`:
the caller pairs the loaded tables.
"""

from __future__ import annotations

import itertools

import numpy as np

from amqpcap.analysis._common import latency_ms, release_memory
from amqpcap.analysis.ack_walk import MESSAGE, OUTCOMES, QOS, AckWalk, kinds_of
from amqpcap.analysis.acknowledgements import ACK_METHODS
from amqpcap.analysis.batches import Codes, OutOfOrder, WireOrder, batches, channel_ids
from amqpcap.analysis.content_stream import UNTIMED, ContentStream
from amqpcap.analysis.growing import Chunks
from amqpcap.analysis.unacked_counts import DELIVERY, LAST, SETTLE, Timeline, UnackedCounts, Unordered
from amqpcap.analysis.unacked_counts import QOS as QOS_EVENT

__all__ = ["streamed_acks", "ROWS"]

MIN = np.iinfo(np.int64).min
# rows per batch of the pass (its work is per batch, in numpy): about one methods row group a batch,
# read alone; a batch of several groups joined holds more (+45 MB on 1 GB tables) and costs more CPU
ROWS = 1 << 15

_COLUMNS = ["capture", "tcp_stream", "frame_number", "stream_offset", "ts", "direction", "channel", "method",
            "delivery_tag", "multiple", "redelivered", "consumer_tag", "no_ack", "no_wait", "prefetch_count",
            "qos_global", "version"]  # fmt: skip


class _Paired:
    """What the pass keeps of the deliveries paired (:class:`~amqpcap.analysis.ack_walk.AckWalk`
    rows): the latencies of those acked, nacked or rejected, the count of each outcome; each one
    counted in unacked (:class:`~amqpcap.analysis.unacked_counts.UnackedCounts`) at its time and
    packet (+1), not kept."""

    def __init__(self, unacked: UnackedCounts):
        self.values = Chunks(np.float64)
        self.outcomes = np.zeros(len(OUTCOMES), dtype=np.int64)
        self.unacked = unacked

    def add(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        self.outcomes += np.bincount(rows[:, 7], minlength=len(OUTCOMES))
        timed = rows[:, 7] <= 2
        self.values.append(latency_ms(rows[timed, 2], rows[timed, 5]))
        self.unacked.add(rows[:, 4], rows[:, 2], rows[:, 3], DELIVERY, 1)

    def settled(self, rows: np.ndarray) -> None:
        """unacked's settle events of walk rows (timed at their content or not yet)."""
        keys, n = _settle_events(rows[:, 4], rows[:, 5], rows[:, 6], np.ones(len(rows), dtype=np.int64))
        self.unacked.add(keys[:, 0], keys[:, 1], keys[:, 2], SETTLE, -n)


class _Bounds:
    """Per channel, the first packet at which unacked events may still come: the latest packet
    walked in its conversation, or the packet of an outstanding delivery not counted yet."""

    def __init__(self, keys: list):
        self.keys = keys  # channel id -> (capture, tcp_stream, channel or -1)
        self.convs: dict = {}  # (capture, tcp_stream) -> conversation number
        self.of = np.zeros(0, dtype=np.int64)  # channel id -> conversation number
        self.seen = np.zeros(0, dtype=np.int64)  # conversation number -> latest packet walked

    def walked(self, chan: np.ndarray, frame: np.ndarray) -> None:
        if len(self.of) < len(self.keys):
            more = [self.convs.setdefault(k[:2], len(self.convs)) for k in self.keys[len(self.of) :]]
            self.of = np.r_[self.of, np.array(more, dtype=np.int64)]
            self.seen = np.r_[self.seen, np.full(len(self.convs) - len(self.seen), MIN, dtype=np.int64)]
        np.maximum.at(self.seen, self.of[chan], frame)

    def bound(self, chan: np.ndarray, frame: np.ndarray) -> np.ndarray:
        """The bounds, the outstanding deliveries not counted yet being on ``chan`` at ``frame``."""
        out = self.seen[self.of]
        np.minimum.at(out, chan, np.where(frame < 0, LAST, frame))
        return out


def _walk(directory, strings: dict, unacked: UnackedCounts):
    """The deliveries paired (:class:`_Paired`), how many of them were redelivered and the
    channel ids (key -> id); unacked's events counted into ``unacked`` as the walk passes them."""
    order = WireOrder()
    ids: dict = {}
    keys: list = []  # channel id -> key
    walk = AckWalk(keys)
    got, bounds = _Paired(unacked), _Bounds(keys)
    stream = ContentStream(directory, strings, ACK_METHODS, "s2c")
    late = np.zeros((0, 8), dtype=np.int64)  # deliveries paired before their content was read
    methods, version = strings["method"], strings["version"]
    nulls = ("channel", "delivery_tag", "consumer_tag", "prefetch_count", "no_ack", "qos_global")
    names = ACK_METHODS + ("basic.qos",)
    for b in batches(directory, "methods", _COLUMNS, strings, names, nulls=nulls, rows=ROWS):
        order.check(b["capture"], b["tcp_stream"], b["frame_number"], b["stream_offset"])
        if any(version.values[v] == "0-10" for v in np.unique(b["version"]).tolist() if v >= 0):
            raise OutOfOrder("0-10 channels settle by command sets")
        kind = kinds_of(methods.values)[b["method"]]
        if np.any(kind == MESSAGE):  # (0-9 and 0-10 message class: by command ids)
            raise OutOfOrder("0-10 channels settle by command sets")
        chan = channel_ids(ids, b["capture"], b["tcp_stream"], b["channel"], b["channel_valid"])
        keys.extend(itertools.islice(ids, len(keys), None))
        c2s = b["direction"] == strings["direction"].index.get("c2s", -2)
        s2c = b["direction"] == strings["direction"].index.get("s2c", -2)
        conv = b["capture"].astype(np.int64) * (1 << 32) + b["tcp_stream"]
        stream.advance(int(b["capture"][-1]), int(b["frame_number"][-1]))
        rows, untimed = walk.batch(
            kind, chan, c2s, s2c, conv, b, strings["consumer_tag"].values, stream.match
        )
        got.settled(rows)
        got.add(rows[~untimed])
        late = _timed(np.concatenate([late, rows[untimed]]), stream, got)
        stream.passed(conv, b["frame_number"])
        q = np.flatnonzero((kind == QOS) & c2s)
        count = np.where(b["prefetch_count_valid"][q], b["prefetch_count"][q], -1)
        unacked.add(chan[q], b["ts"][q], b["frame_number"][q], QOS_EVENT, 0, count)
        bounds.walked(chan, b["frame_number"])
        P = walk.pending  # (a delivery's packet: its content's once timed, else its own)
        pin = np.where(P["start"] == UNTIMED, P["frame"], P["sframe"])
        unacked.fold(bounds.bound(np.r_[P["chan"], late[:, 4]], np.r_[pin, late[:, 3]]))
    rows, untimed = walk.end()
    got.add(rows[~untimed])
    late = np.concatenate([late, rows[untimed]])
    for _ in stream.drain() if len(late) else ():
        if not len(late := _timed(late, stream, got)):
            break
    got.add(late)  # (no messages row completes them: timed at their own packet)
    return got, walk.redelivered, ids


def streamed_acks(directory, on_timeline=None) -> tuple[np.ndarray, dict, dict]:
    """The latencies (ms: of the deliveries acked, nacked or rejected), the counts of stats'
    ``consumer_ack`` (acked, nacked, rejected, unsettled, recovered, redelivered) and the unacked
    health (``max_unacked``, ``channels_over_prefetch``) of the dissect output ``directory``.
    ``on_timeline``, when given, is handed the unacked counts over time the report draws (a
    :class:`~amqpcap.analysis.unacked_counts.Timeline`: its ``frame()`` has
    :func:`~amqpcap.analysis.connection_health.unacked`'s columns)."""
    try:
        paired, redelivered, ids, strings, (peak, over, steps) = _counted(directory, on_timeline, True)
    except Unordered:  # (times not rising with packets in a conversation: every event held)
        paired, redelivered, ids, strings, (peak, over, steps) = _counted(directory, on_timeline, False)
    names = ("acked", "nacked", "rejected", "unsettled", "recovered")
    counts = {k: int(paired.outcomes[OUTCOMES.index(k)]) for k in names}
    counts["redelivered"] = redelivered
    release_memory(collect=False)  # (the walk's freed heap given back before the values are joined)
    values = paired.values.take()
    del paired
    # (a channel without a capture or number is not counted)
    named = np.array([k[0] >= 0 and k[2] >= 0 for k in ids], dtype=bool)
    health = {"max_unacked": peak, "channels_over_prefetch": int(np.count_nonzero(named[over]))}
    if on_timeline is not None:
        keys = np.array(list(ids), dtype=np.int64).reshape(-1, 3)
        on_timeline(Timeline(steps, keys, list(strings["capture"].values)))
    return values, counts, health


def _counted(directory, on_timeline, bounded: bool) -> tuple:
    """:func:`_walk`'s results, its strings and the unacked counts' (peak, channels over their
    prefetch count, steps)."""
    strings = {c: Codes() for c in ("capture", "direction", "method", "consumer_tag", "version")}
    unacked = UnackedCounts(timeline=on_timeline is not None, bounded=bounded)
    return *_walk(directory, strings, unacked), strings, unacked.finish()


def _timed(late: np.ndarray, stream: ContentStream, got: list) -> np.ndarray:
    """The rows of ``late`` whose content the stream has read, timed at it, added to ``got``
    (:class:`_Paired`); the others."""
    if not len(late):
        return late
    ts, frame, hit = stream.match(late[:, 0], late[:, 1])
    done = late[hit]
    done[:, 2], done[:, 3] = ts[hit], frame[hit]
    got.add(done)
    return late[~hit]


def _settle_events(chan, ts, frame, n) -> tuple[np.ndarray, np.ndarray]:
    """One settle event per settling packet of a channel (channel id, time, packet) and the
    number of deliveries it settled, of rows settled (``frame`` >= 0) at (``chan``, ``ts``,
    ``frame``) ``n`` at a time."""
    settled = np.flatnonzero(frame >= 0)
    if not len(settled):
        return np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64)
    chan, ts, frame, n = chan[settled], ts[settled], frame[settled], n[settled]
    o = np.lexsort((frame, ts, chan))
    chan, ts, frame = chan[o], ts[o], frame[o]
    first = np.r_[True, (chan[1:] != chan[:-1]) | (ts[1:] != ts[:-1]) | (frame[1:] != frame[:-1])]
    at = np.flatnonzero(first)
    return np.c_[chan[at], ts[at], frame[at]].astype(np.int64), np.add.reduceat(n[o], at)
