"""The unacknowledged deliveries of each channel over a walk of its events, counted as the walk
passes them: a delivery (+1 at the packet completing it), a settling packet (minus the deliveries
it settled), a qos (its prefetch count).  unacked's order is each channel's events by time, then
packet, then kind (a settle, a qos, a delivery within one packet).

Events come in batches, not in that order; :meth:`UnackedCounts.fold` is told, per channel, the
packet below which no event can still come and counts the events below it, in order, into the
channel's running count: what is held is the events not yet final, not one per delivery.  That is
exact when times rise with packets within a conversation; an event that comes before one already
counted raises :class:`Unordered`, and the caller counts again with ``bounded=False`` (every event
held, counted once at the end).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["UnackedCounts", "Unordered", "Timeline", "SETTLE", "QOS", "DELIVERY", "LAST", "EVENTS"]

SETTLE, QOS, DELIVERY = 0, 1, 2  # event kinds, in their order within a packet
EVENTS = ("settle", "qos", "deliver")  # their names in unacked()'s ``event`` column
LAST = np.iinfo(np.int64).max  # the packet of an event without one: after every other
_FIELDS = {"chan": np.int32, "ts": np.int64, "frame": np.int64, "kind": np.int8, "delta": np.int32,
           "prefetch": np.int32}  # fmt: skip
_STEPS = ("chan", "ts", "kind", "delta", "latest")  # a step: its change of the count, not the count


class Unordered(Exception):
    """An event came before one already counted in its channel (times not rising with packets)."""


class UnackedCounts:
    """Running unacked counts of channels (ids 0..n-1), their peak and the channels exceeding
    their prefetch count; with ``timeline``, every step (:data:`_STEPS`: 21 bytes) kept for the
    report."""

    def __init__(self, timeline: bool = False, bounded: bool = True):
        self.bounded, self.timeline = bounded, timeline
        self.held: list = []  # events not counted yet, as added
        self.count = np.zeros(0, dtype=np.int64)  # channel id -> unacked after its last counted event
        self.latest = np.zeros(0, dtype=np.int32)  # channel id -> latest prefetch count (-1: none)
        self.over = np.zeros(0, dtype=bool)  # channel id -> held more than its prefetch count once
        self.last = np.zeros((0, 3), dtype=np.int64)  # channel id -> key of its last counted event
        self.peak: int | None = None
        self.steps: list = []

    def add(self, chan, ts, frame, kind: int, delta, prefetch=None) -> None:
        """Events of one ``kind`` (channel id, time, packet: < 0 for none, change of the count,
        prefetch count or -1 for a qos)."""
        if not len(chan):
            return
        n = len(chan)
        self.held.append(
            {
                "chan": np.asarray(chan, dtype=np.int32),
                "ts": np.asarray(ts, dtype=np.int64),
                "frame": np.where(np.asarray(frame) < 0, LAST, frame).astype(np.int64),
                "kind": np.full(n, kind, dtype=np.int8),
                "delta": np.broadcast_to(np.asarray(delta, dtype=np.int32), (n,)),
                "prefetch": np.full(n, -2, dtype=np.int32) if prefetch is None else prefetch.astype(np.int32),
            }
        )

    def fold(self, bound: np.ndarray) -> None:
        """Count the events held whose packet is below ``bound`` of their channel (channel id ->
        first packet at which events may still come)."""
        if not self.bounded or not self.held:
            return
        held = self._held()
        final = held["frame"] < bound[held["chan"]]
        self.held = [{k: v[~final] for k, v in held.items()}] if not final.all() else []
        if final.any():
            self._count({k: v[final] for k, v in held.items()})

    def finish(self) -> tuple[int, np.ndarray, dict | None]:
        """Count every event held: the peak count (0 without events), the channel ids that held
        more than their prefetch count, and the steps in the order counted (with ``timeline``: each
        channel's in its order; a column at a time joined, the pieces let go as it is)."""
        if self.held:
            self._count(self._held())
            self.held = []
        steps = None
        if self.timeline:
            parts, self.steps = self.steps or [{k: np.zeros(0, dtype=np.int64) for k in _STEPS}], []
            steps = {k: np.concatenate([p.pop(k) for p in parts]) for k in _STEPS}
        return (0 if self.peak is None else self.peak), np.flatnonzero(self.over), steps

    def _held(self) -> dict:
        if len(self.held) == 1:
            return self.held[0]
        return {k: np.concatenate([h[k] for h in self.held]) for k in _FIELDS}

    def _grow(self, size: int) -> None:
        if size <= len(self.count):
            return
        n, grow = len(self.count), max(size, 2 * len(self.count))
        self.count = np.r_[self.count, np.zeros(grow - n, dtype=np.int64)]
        self.latest = np.r_[self.latest, np.full(grow - n, -1, dtype=np.int32)]
        self.over = np.r_[self.over, np.zeros(grow - n, dtype=bool)]
        self.last = np.r_[self.last, np.full((grow - n, 3), np.iinfo(np.int64).min, dtype=np.int64)]

    def _count(self, ev: dict) -> None:
        """Count events (all final) after each channel's counted ones, in unacked's order; a
        packet's settles of one channel are one step."""
        o = np.lexsort((ev["kind"], ev["frame"], ev["ts"], ev["chan"]))
        chan, ts, frame, kind = ev["chan"][o], ev["ts"][o], ev["frame"][o], ev["kind"][o]
        delta, prefetch = ev["delta"][o], ev["prefetch"][o]
        del o, ev
        same = (chan[1:] == chan[:-1]) & (ts[1:] == ts[:-1]) & (frame[1:] == frame[:-1])
        one = np.flatnonzero(np.r_[True, ~(same & (kind[1:] == SETTLE) & (kind[:-1] == SETTLE))])
        if len(one) < len(chan):
            delta = np.add.reduceat(delta.astype(np.int64), one).astype(np.int32)
            chan, ts, frame, kind, prefetch = chan[one], ts[one], frame[one], kind[one], prefetch[one]
        self._grow(int(chan.max()) + 1)
        start = np.flatnonzero(np.r_[True, chan[1:] != chan[:-1]])
        self._check(chan[start], ts[start], frame[start], kind[start])
        first = np.zeros(len(chan), dtype=bool)
        first[start] = True
        total = np.cumsum(delta, dtype=np.int64)
        base = np.maximum.accumulate(np.where(first, np.arange(len(chan)), 0))
        unacked = self.count[chan] + total - np.r_[0, total][base]
        del total, base
        # the latest prefetch count (a qos without one keeps the one before)
        at = np.maximum.accumulate(np.where((prefetch >= 0) | first, np.arange(len(chan)), 0))
        latest = np.where(prefetch[at] >= 0, prefetch[at], self.latest[chan])
        del at
        end = np.r_[start[1:] - 1, len(chan) - 1]
        c = chan[end]
        self.count[c], self.latest[c] = unacked[end], latest[end]
        self.last[c] = np.c_[ts[end], frame[end], kind[end]]
        self.over[chan[(latest > 0) & (unacked > latest)]] = True
        top = int(unacked.max())
        self.peak = top if self.peak is None else max(self.peak, top)
        if self.timeline:
            self.steps.append({"chan": chan, "ts": ts, "kind": kind, "delta": delta, "latest": latest})

    def _check(self, chan, ts, frame, kind) -> None:
        """Raise :class:`Unordered` when a channel's first event to count comes before (or, a
        settle, at the same key as) its last counted one."""
        last = self.last[chan]
        before = (ts < last[:, 0]) | ((ts == last[:, 0]) & (frame < last[:, 1]))
        same = (ts == last[:, 0]) & (frame == last[:, 1])
        if np.any(before | (same & ((kind < last[:, 2]) | ((kind == last[:, 2]) & (kind == SETTLE))))):
            raise Unordered("an event before one already counted in its channel")


class Timeline:
    """The unacked counts over time of a pass (the steps of :meth:`UnackedCounts.finish`), as the
    report draws them: each step's channel id, time, kind, change of its channel's count and
    latest prefetch count (-1: none), each channel's in its order; ``keys``: channel id ->
    (capture code, tcp_stream, channel; -1 for none), ``captures``: the capture names."""

    def __init__(self, steps: dict, keys: np.ndarray, captures: list):
        self.steps, self.keys, self.captures = steps, keys, captures

    def __len__(self) -> int:
        return len(self.steps["chan"]) if self.steps else 0

    def channel_keys(self, chan: np.ndarray) -> dict:
        """The capture, tcp_stream and channel columns of unacked() of the channel ids ``chan``."""
        cap, stream, channel = (self.keys[:, i][chan].astype(np.int32) for i in range(3))
        return {
            "capture": pd.Categorical.from_codes(cap, pd.Index(self.captures, dtype=object)),
            "tcp_stream": pd.arrays.IntegerArray(stream, stream < 0),
            "channel": pd.arrays.IntegerArray(channel, channel < 0),
        }

    def frame(self) -> pd.DataFrame:
        """The columns of :func:`~amqpcap.analysis.connection_health.unacked` of the steps
        (capture, tcp_stream, channel, ts, event, unacked, prefetch_count), channel by channel."""
        s = self.steps
        o = np.argsort(s["chan"], kind="stable")
        chan = s["chan"][o]
        latest = s["latest"][o]
        return pd.DataFrame(
            {
                **self.channel_keys(chan),
                "ts": pd.to_datetime(s["ts"][o].view("datetime64[ns]"), utc=True),
                "event": pd.Categorical.from_codes(s["kind"][o], EVENTS),
                "unacked": _running(chan, s["delta"][o]),
                "prefetch_count": pd.arrays.IntegerArray(latest.astype(np.int32), latest < 0),
            }
        )

    def channels(self, chunk: int = 1 << 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ids of the channels with steps (ascending), each one's peak count and largest
        prefetch count (-1: none); the counts made a ``chunk`` of steps at a time."""
        s, n = self.steps, len(self.keys)
        count = np.zeros(n, dtype=np.int64)  # channel id -> its count after the steps so far
        peak = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        latest = np.full(n, -1, dtype=np.int64)
        for at in range(0, len(self), chunk):
            chan = s["chan"][at : at + chunk]
            o = np.argsort(chan, kind="stable")
            chan = chan[o]
            unacked = _running(chan, s["delta"][at : at + chunk][o]) + count[chan]
            last = np.r_[chan[1:] != chan[:-1], True]
            count[chan[last]] = unacked[last]
            np.maximum.at(peak, chan, unacked)
            np.maximum.at(latest, chan, s["latest"][at : at + chunk][o])
        ids = np.flatnonzero(peak > np.iinfo(np.int64).min)
        return ids, peak[ids], latest[ids]

    def total(self) -> tuple[np.ndarray, np.ndarray]:
        """The time of each step in time order (ties: by channel id, then in order) and the count
        of every channel together after it.  The steps are let go as they are read (a timeline
        gives its total once, last)."""
        s, self.steps = self.steps, {}
        o = np.lexsort((s.pop("chan"), s["ts"]))
        del s["kind"], s["latest"]
        ts = s.pop("ts")[o]
        total = s.pop("delta")[o].astype(np.int64)
        del o
        return ts, np.cumsum(total, out=total)


def _running(chan: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Each step's count of its channel, of the steps' changes ``delta`` grouped by ``chan`` (each
    channel's in its order; its count 0 before its first)."""
    total = np.cumsum(delta, dtype=np.int64)
    first = np.r_[True, chan[1:] != chan[:-1]] if len(chan) else np.zeros(0, dtype=bool)
    base = np.maximum.accumulate(np.where(first, np.arange(len(chan)), 0))
    return total - np.r_[0, total][base]
