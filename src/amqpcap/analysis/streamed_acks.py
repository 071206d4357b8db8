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
import pandas as pd

from amqpcap.analysis._common import latency_ms
from amqpcap.analysis.ack_walk import MESSAGE, OUTCOMES, QOS, AckWalk, kinds_of
from amqpcap.analysis.acknowledgements import ACK_METHODS
from amqpcap.analysis.batches import BATCH_ROWS, Codes, OutOfOrder, WireOrder, batches, channel_ids
from amqpcap.analysis.content_stream import ContentStream
from amqpcap.analysis.growing import Columns

__all__ = ["streamed_acks", "ROWS"]

_EVENTS = ("settle", "qos", "deliver")  # unacked's events, in their order within a packet
ROWS = BATCH_ROWS  # rows per batch of the pass: its work is per batch, in numpy

_COLUMNS = ["capture", "tcp_stream", "frame_number", "stream_offset", "ts", "direction", "channel", "method",
            "delivery_tag", "multiple", "redelivered", "consumer_tag", "no_ack", "no_wait", "prefetch_count",
            "qos_global", "version"]  # fmt: skip


class _Paired:
    """What the pass keeps of the deliveries paired (:class:`~amqpcap.analysis.ack_walk.AckWalk`
    rows): the latencies of those acked, nacked or rejected, each one's channel, time and packet
    (unacked's +1), the settling packets (channel, time, packet, deliveries settled: unacked's
    -n), the count of each outcome; not the rows."""

    def __init__(self):
        self.values = Columns({"ms": np.float64})
        self.deliveries = Columns({"chan": np.int32, "ts": np.int64, "frame": np.int64})
        self.settles = Columns({"chan": np.int32, "ts": np.int64, "frame": np.int64, "n": np.int64})
        self.outcomes = np.zeros(len(OUTCOMES), dtype=np.int64)

    def add(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        self.outcomes += np.bincount(rows[:, 7], minlength=len(OUTCOMES))
        timed = rows[:, 7] <= 2
        self.values.append({"ms": latency_ms(rows[timed, 2], rows[timed, 5])})
        self.deliveries.append({"chan": rows[:, 4], "ts": rows[:, 2], "frame": rows[:, 3]})
        keys, n = _settle_events(rows[:, 4], rows[:, 5], rows[:, 6], np.ones(len(rows), dtype=np.int64))
        self.settles.append({"chan": keys[:, 0], "ts": keys[:, 1], "frame": keys[:, 2], "n": n})


def _walk(directory, strings: dict):
    """The deliveries paired (:class:`_Paired`), how many of them were redelivered, the qos events
    (channel id, time, packet, prefetch count or -1, global) and the channel ids (key -> id)."""
    order = WireOrder()
    ids: dict = {}
    keys: list = []  # channel id -> key
    walk = AckWalk(keys)
    got, qos = _Paired(), []
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
        got.add(rows[~untimed])
        late = _timed(np.concatenate([late, rows[untimed]]), stream, got)
        stream.passed(conv, b["frame_number"])
        q = np.flatnonzero((kind == QOS) & c2s)
        count = np.where(b["prefetch_count_valid"][q], b["prefetch_count"][q], -1)
        qos.append(np.stack([chan[q], b["ts"][q], b["frame_number"][q], count, b["qos_global"][q]], 1))
    rows, untimed = walk.end()
    got.add(rows[~untimed])
    late = np.concatenate([late, rows[untimed]])
    for _ in stream.drain() if len(late) else ():
        if not len(late := _timed(late, stream, got)):
            break
    got.add(late)  # (no messages row completes them: timed at their own packet)
    qos = np.concatenate(qos).astype(np.int64) if qos else np.zeros((0, 5), dtype=np.int64)
    return got, walk.redelivered, qos, ids


def streamed_acks(directory, on_timeline=None) -> tuple[np.ndarray, dict, dict]:
    """The latencies (ms: of the deliveries acked, nacked or rejected), the counts of stats'
    ``consumer_ack`` (acked, nacked, rejected, unsettled, recovered, redelivered) and the unacked
    health (``max_unacked``, ``channels_over_prefetch``) of the dissect output ``directory``.
    ``on_timeline``, when given, is handed the unacked counts over time (a frame of
    :func:`~amqpcap.analysis.connection_health.unacked`'s columns the report draws)."""
    strings = {c: Codes() for c in ("capture", "direction", "method", "consumer_tag", "version")}
    paired, redelivered, qos, ids = _walk(directory, strings)
    names = ("acked", "nacked", "rejected", "unsettled", "recovered")
    counts = {k: int(paired.outcomes[OUTCOMES.index(k)]) for k in names}
    counts["redelivered"] = redelivered
    values = paired.values["ms"]
    steps = _steps(_events(paired, qos))
    del paired, qos
    health = _unacked(steps, ids)
    if on_timeline is not None:
        on_timeline(_timeline(steps, ids, strings["capture"].values))
    return values, counts, health


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


def _events(paired: _Paired, qos: np.ndarray) -> dict:
    """unacked's events: a delivery (+1 at the packet completing it), a settling packet (-the
    deliveries it settled), a qos (its prefetch count); channel, time, packet (a missing one:
    last), their order within a packet (settle, qos, delivery), change, prefetch count (-1: none
    given, -2: not a qos)."""
    S, D = paired.settles, paired.deliveries
    keys, n = _settle_events(S["chan"], S["ts"], S["frame"], S["n"])
    frame = np.concatenate([D["frame"], keys[:, 2], qos[:, 2]])
    frame[frame < 0] = np.iinfo(np.int64).max
    return {
        "chan": np.concatenate([D["chan"], keys[:, 0], qos[:, 0]]).astype(np.int32),
        "ts": np.concatenate([D["ts"], keys[:, 1], qos[:, 1]]),
        "frame": frame,
        "kind": np.repeat(np.array([2, 0, 1], dtype=np.int8), [len(D), len(keys), len(qos)]),
        "delta": np.concatenate(
            [np.ones(len(D), dtype=np.int32), -n.astype(np.int32), np.zeros(len(qos), dtype=np.int32)]
        ),  # fmt: skip
        "prefetch": np.concatenate(
            [np.full(len(D) + len(keys), -2, dtype=np.int32), qos[:, 3].astype(np.int32)]
        ),  # fmt: skip
    }


def _steps(events: dict) -> dict:
    """:func:`_events` per channel, by time then packet (a settle, then a qos, then a delivery
    within one), with the count of unsettled deliveries after each (``unacked``) and the channel's
    latest prefetch count (``latest``; -1: none)."""
    order = np.lexsort((events["kind"], events["frame"], events["ts"], events["chan"]))
    out = {k: events.pop(k)[order] for k in ("chan", "ts", "kind", "delta", "prefetch")}
    del order, events
    chan, prefetch = out["chan"], out.pop("prefetch")
    start = np.r_[True, chan[1:] != chan[:-1]]
    total = np.cumsum(out.pop("delta"), dtype=np.int64)
    base = np.maximum.accumulate(np.where(start, np.arange(len(chan)), 0))
    out["unacked"] = total - np.r_[0, total][base]  # the channel's running sum
    del total, base
    # the latest prefetch count of the channel (a qos without one keeps the one before)
    has = (prefetch >= 0) | start
    at = np.maximum.accumulate(np.where(has, np.arange(len(chan)), 0))
    out["latest"] = np.where(prefetch[at] >= 0, prefetch[at], -1)
    return out


def _unacked(steps: dict, ids: dict) -> dict:
    """stats' unacked health from :func:`_steps`: the most unsettled deliveries of a channel, the
    channels holding more than their prefetch count at some point."""
    chan, unacked, latest = steps["chan"], steps["unacked"], steps["latest"]
    if not len(chan):
        return {"max_unacked": 0, "channels_over_prefetch": 0}
    over = (latest > 0) & (unacked > latest)
    # (a channel without a capture or number is not counted)
    named = np.array([k[0] >= 0 and k[2] >= 0 for k in ids], dtype=bool)
    return {
        "max_unacked": int(unacked.max()),
        "channels_over_prefetch": int(len(np.unique(chan[over & named[chan]]))),
    }


def _timeline(steps: dict, ids: dict, captures: list) -> pd.DataFrame:
    """The columns of :func:`~amqpcap.analysis.connection_health.unacked` the report draws
    (capture, tcp_stream, channel, ts, event, unacked, prefetch_count), of :func:`_steps`."""
    keys = np.array(list(ids), dtype=np.int64).reshape(-1, 3)
    chan = steps.pop("chan")
    cap, stream, channel = (keys[:, i][chan] for i in range(3))
    del chan
    latest = steps.pop("latest")
    return pd.DataFrame(
        {
            "capture": pd.Categorical.from_codes(cap, pd.Index(captures, dtype=object)),
            "tcp_stream": pd.arrays.IntegerArray(stream.astype(np.int32), stream < 0),
            "channel": pd.arrays.IntegerArray(channel.astype(np.int32), channel < 0),
            "ts": pd.to_datetime(steps.pop("ts").view("datetime64[ns]"), utc=True),
            "event": pd.Categorical.from_codes(steps.pop("kind"), _EVENTS),
            "unacked": steps.pop("unacked"),
            "prefetch_count": pd.arrays.IntegerArray(latest.astype(np.int32), latest < 0),
        }
    )
