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

The steps the report draws (``timeline``) go to a temporary file as they are counted, each
channel's peak and largest prefetch count kept as they go: what the pass holds of them is a
number or two per channel, not 21 bytes a step.  :meth:`Timeline.total` reads the file back a
span of time at a time.
"""

from __future__ import annotations

import tempfile

import numpy as np
import pandas as pd

from amqpcap.analysis._common import temp_files

__all__ = ["UnackedCounts", "Unordered", "Steps", "Timeline", "SETTLE", "QOS", "DELIVERY", "LAST", "EVENTS"]

SETTLE, QOS, DELIVERY = 0, 1, 2  # event kinds, in their order within a packet
EVENTS = ("settle", "qos", "deliver")  # their names in unacked()'s ``event`` column
LAST = np.iinfo(np.int64).max  # the packet of an event without one: after every other
_FIELDS = {"chan": np.int32, "ts": np.int64, "frame": np.int64, "kind": np.int8, "delta": np.int32,
           "prefetch": np.int32}  # fmt: skip
# a step (21 bytes): its change of the count, not the count
_STEP = np.dtype(
    [("chan", np.int32), ("ts", np.int64), ("kind", np.int8), ("delta", np.int32), ("latest", np.int32)]
)
_WHAT = "the unacked timeline"  # (named by an error of its temporary file)
READ = 1 << 18  # steps read back from the file at a time
SPAN_STEPS = 1 << 20  # steps :meth:`Timeline.total` sorts at a time (a span of time's: ~40 MB read, sorted)
MIN = np.iinfo(np.int64).min


class Unordered(Exception):
    """An event came before one already counted in its channel (times not rising with packets)."""


class UnackedCounts:
    """Running unacked counts of channels (ids 0..n-1), their peak and the channels exceeding
    their prefetch count; with ``timeline``, every step written for the report (:class:`Steps`)."""

    def __init__(self, timeline: bool = False, bounded: bool = True):
        self.bounded, self.timeline = bounded, timeline
        self.held: list = []  # events not counted yet, as added
        self.count = np.zeros(0, dtype=np.int64)  # channel id -> unacked after its last counted event
        self.latest = np.zeros(0, dtype=np.int32)  # channel id -> latest prefetch count (-1: none)
        self.over = np.zeros(0, dtype=bool)  # channel id -> held more than its prefetch count once
        self.last = np.zeros((0, 3), dtype=np.int64)  # channel id -> key of its last counted event
        self.peak: int | None = None
        self.steps = Steps() if timeline else None

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

    def finish(self) -> tuple[int, np.ndarray, Steps | None]:
        """Count every event held: the peak count (0 without events), the channel ids that held
        more than their prefetch count, and (with ``timeline``) the :class:`Steps` counted."""
        if self.held:
            self._count(self._held())
            self.held = []
        return (0 if self.peak is None else self.peak), np.flatnonzero(self.over), self.steps

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
        if self.steps is not None:
            self.steps.add(
                start, {"chan": chan, "ts": ts, "kind": kind, "delta": delta, "latest": latest}, unacked
            )

    def _check(self, chan, ts, frame, kind) -> None:
        """Raise :class:`Unordered` when a channel's first event to count comes before (or, a
        settle, at the same key as) its last counted one."""
        last = self.last[chan]
        before = (ts < last[:, 0]) | ((ts == last[:, 0]) & (frame < last[:, 1]))
        same = (ts == last[:, 0]) & (frame == last[:, 1])
        if np.any(before | (same & ((kind < last[:, 2]) | ((kind == last[:, 2]) & (kind == SETTLE))))):
            raise Unordered("an event before one already counted in its channel")


class Steps:
    """The steps of a pass as counted (each channel's in its order), written to a temporary file
    (:data:`_STEP` records); kept as they come: their number, their first and last time, whether
    one is no qos, and per channel id its peak count and largest prefetch count (-1: none)."""

    def __init__(self):
        with temp_files(_WHAT):
            self.file = tempfile.TemporaryFile(prefix="amqpcap-unacked-")
        self.n, self.lo, self.hi, self.delivered = 0, None, None, False
        self.peak = np.zeros(0, dtype=np.int64)
        self.latest = np.zeros(0, dtype=np.int64)

    def add(self, start: np.ndarray, steps: dict, counts: np.ndarray) -> None:
        """Steps sorted by channel (``start``: where each channel's begin), each channel's count
        after it ``counts``."""
        rec = np.empty(len(steps["chan"]), dtype=_STEP)
        for k in _STEP.names:
            rec[k] = steps[k]
        with temp_files(_WHAT):
            self.file.write(rec.tobytes())
        del rec
        self.n += len(counts)
        ts = steps["ts"]
        lo, hi = int(ts.min()), int(ts.max())
        self.lo, self.hi = (lo, hi) if self.lo is None else (min(self.lo, lo), max(self.hi, hi))
        self.delivered = self.delivered or bool((steps["kind"] != QOS).any())
        c = steps["chan"][start]
        if len(self.peak) <= c.max():
            more = int(c.max()) + 1 - len(self.peak)
            self.peak = np.r_[self.peak, np.full(more, MIN, dtype=np.int64)]
            self.latest = np.r_[self.latest, np.full(more, -1, dtype=np.int64)]
        self.peak[c] = np.maximum(self.peak[c], np.maximum.reduceat(counts, start))
        self.latest[c] = np.maximum(self.latest[c], np.maximum.reduceat(steps["latest"], start))

    def read(self, lo: int | None = None, hi: int | None = None):
        """The steps in the order written, :data:`READ` at a time (those timed in [lo, hi]
        alone, when given)."""
        with temp_files(_WHAT):
            self.file.flush()
            self.file.seek(0)
            while chunk := self.file.read(READ * _STEP.itemsize):
                rec = np.frombuffer(chunk, dtype=_STEP)
                if lo is not None:
                    rec = rec[(rec["ts"] >= lo) & (rec["ts"] <= hi)]
                yield rec

    def arrays(self) -> dict:
        """Every step, in the order written: a column (:data:`_STEP`'s names) each."""
        s = np.concatenate([np.zeros(0, dtype=_STEP), *self.read()])
        return {k: s[k].copy() for k in _STEP.names}

    def close(self) -> None:
        self.file.close()

    def __getstate__(self) -> dict:  # (pickled, e.g. sent back by a forked process: the file's steps)
        state = dict(self.__dict__)
        with temp_files(_WHAT):
            self.file.flush()
            self.file.seek(0)
            state["file"] = self.file.read()
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, file=None)
        with temp_files(_WHAT):
            self.file = tempfile.TemporaryFile(prefix="amqpcap-unacked-")
            self.file.write(state["file"])


class Timeline:
    """The unacked counts over time of a pass (the :class:`Steps` of :meth:`UnackedCounts.finish`),
    as the report draws them: each step's channel id, time, kind, change of its channel's count
    and latest prefetch count (-1: none), each channel's in its order; ``keys``: channel id ->
    (capture code, tcp_stream, channel; -1 for none), ``captures``: the capture names."""

    def __init__(self, steps: Steps, keys: np.ndarray, captures: list):
        self.steps, self.keys, self.captures = steps, keys, captures

    def __len__(self) -> int:
        return self.steps.n

    def delivered(self) -> bool:
        """Whether a step is no qos (a delivery or a settle)."""
        return self.steps.delivered

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
        s = self.steps.arrays()
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

    def channels(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ids of the channels with steps (ascending), each one's peak count and largest
        prefetch count (-1: none)."""
        ids = np.flatnonzero(self.steps.peak > MIN)
        return ids, self.steps.peak[ids], self.steps.latest[ids]

    def span(self) -> tuple[int, int]:
        """The first and the last step's time (ns)."""
        return self.steps.lo, self.steps.hi

    def total(self, most: int = SPAN_STEPS):
        """The time of each step in time order (ties: by channel id, then in order) and the count
        of every channel together after it, in pieces of consecutive spans of time of about
        ``most`` steps each (the steps evenly spread over time; each span's read from the file and
        sorted alone).  The file is closed once read (a timeline gives its total once, last)."""
        lo, hi, carry = self.steps.lo, self.steps.hi, 0
        spans = max(1, -(-len(self) // most)) if len(self) else 0
        cuts = [lo + (hi - lo) * k // spans for k in range(spans)] + [hi + 1] if spans else []
        for a, b in zip(cuts, cuts[1:]):
            s = np.concatenate([np.zeros(0, dtype=_STEP), *self.steps.read(a, b - 1)])
            o = np.lexsort((s["chan"], s["ts"]))
            ts = s["ts"][o]
            total = s["delta"][o].astype(np.int64)
            del s, o
            np.cumsum(total, out=total)
            total += carry
            carry = int(total[-1]) if len(total) else carry
            yield ts, total
        self.steps.close()


def _running(chan: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Each step's count of its channel, of the steps' changes ``delta`` grouped by ``chan`` (each
    channel's in its order; its count 0 before its first)."""
    total = np.cumsum(delta, dtype=np.int64)
    first = np.r_[True, chan[1:] != chan[:-1]] if len(chan) else np.zeros(0, dtype=bool)
    base = np.maximum.accumulate(np.where(first, np.arange(len(chan)), 0))
    return total - np.r_[0, total][base]
