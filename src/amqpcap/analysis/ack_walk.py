"""The consumer-ack walk over batches of method rows, in numpy: a batch's deliveries are matched
to the batch's acks, nacks, rejects and recovers at once
(:func:`~amqpcap.analysis.settle.first_settlement`); only the deliveries still outstanding (and
each channel's consumers and count of reopenings) are carried to the next batch.

The consumer state (consume, consume-ok, get, a channel reopening) changes on a few rows; Python
walks those alone and looks a delivery's consumer up once per state, channel and consumer tag
(a delivery to a no-ack consumer is not awaiting an ack).  The rules are those of
:func:`~amqpcap.analysis.acknowledgements.consumer_acks` for 0-8 / 0-9 / 0-9-1 channels: a delivery
(tag n) is settled by the first c2s ack / nack / reject of its channel, before the channel is
opened again, naming n or covering it (``multiple``: tags up to its own, tag 0: all; a recover:
all); a tag delivered again while outstanding replaces the first delivery.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from amqpcap.analysis._common import NAT
from amqpcap.analysis.batches import OutOfOrder
from amqpcap.analysis.content_stream import UNTIMED
from amqpcap.analysis.pairing import SCOPE_OPEN
from amqpcap.analysis.settle import ALL, first_settlement

__all__ = ["AckWalk", "kinds_of", "OUTCOMES", "UNSETTLED"]

# row kinds; the settling ones first, their numbers being the outcome's
ACK, NACK, REJECT, RECOVER, OPEN, CONSUME, CONSUME_OK, GET, DELIVER, GET_OK, QOS, MESSAGE = range(12)
OUTCOMES = ("acked", "nacked", "rejected", "recovered", "unsettled")
UNSETTLED = 4
_KIND = {
    "basic.ack": ACK, "basic.nack": NACK, "basic.reject": REJECT, "basic.recover": RECOVER,
    "basic.recover-async": RECOVER, **dict.fromkeys(SCOPE_OPEN, OPEN), "basic.consume": CONSUME,
    "basic.consume-ok": CONSUME_OK, "basic.get": GET, "basic.deliver": DELIVER, "basic.get-ok": GET_OK,
    "basic.qos": QOS,
}  # fmt: skip
# what a carried delivery holds: scope, tag, conversation, stream offset, time, packet, channel, redelivered,
# time and packet of its content's completion
_CARRIED = ("g", "tag", "conv", "off", "ts", "frame", "chan", "redl", "start", "sframe")


def kinds_of(values: list) -> np.ndarray:
    """Kind of each method code (``values``: the method strings), then of code -1 (-1: a row the
    walk ignores; :data:`MESSAGE`: the message class, settled by command sets)."""
    kinds = [_KIND.get(v, MESSAGE if str(v).startswith("message.") else -1) for v in values]
    return np.array(kinds + [-1], dtype=np.int8)


class _Consumers:
    """The consumer state of every channel: consumers bound by tag, those awaiting a consume-ok,
    the latest get; a consumer is a one-item list ``[no_ack]`` (None: unknown)."""

    def __init__(self, keys: list):
        self.keys = keys  # channel id -> (capture, tcp_stream, channel or -1)
        self.bound: dict = {}  # channel id -> {consumer tag: consumer}
        self.pending: dict = {}  # channel id -> [consumer awaiting its consume-ok]
        self.get: dict = {}  # channel id -> the consumer of its latest basic.get
        self.conns: dict = {}  # (capture, tcp_stream) -> {(channel, tag): consumer}, in binding order

    def _bind(self, ch: int, tag, consumer) -> None:
        cap, st, number = self.keys[ch]
        self.bound.setdefault(ch, {})[tag] = self.conns.setdefault((cap, st), {})[(number, tag)] = consumer

    def apply(self, kind: int, ch: int, tag, no_ack, no_wait: bool) -> None:
        """A state row (kind, channel id, consumer tag or None, no_ack or None, no_wait)."""
        if kind == OPEN:
            bound = self.bound.pop(ch, {})
            if bound:
                cap, st, number = self.keys[ch]
                binds = self.conns.get((cap, st), {})
                for t in bound:
                    binds.pop((number, t), None)
            self.pending.pop(ch, None)
        elif kind == CONSUME:
            consumer = [no_ack]
            if tag:
                self._bind(ch, tag, consumer)
            if not no_wait:
                self.pending.setdefault(ch, []).append(consumer)
        elif kind == CONSUME_OK:
            waiting = self.pending.get(ch)
            if waiting:
                consumer = waiting.pop(0)
                if tag:
                    self._bind(ch, tag, consumer)
        elif kind == GET:
            self.get[ch] = [no_ack]

    def acked(self, ch: int, tag, is_get: bool) -> bool:
        """Whether a delivery on channel ``ch`` (consumer tag ``tag`` or None; a get-ok) awaits an
        ack: not when its consumer is no-ack (a deliver's: bound to its tag on the channel, else
        the first of the connection bound to that tag)."""
        if is_get:
            consumer = self.get.get(ch)
        elif tag is None:
            return True
        else:
            consumer = self.bound.get(ch, {}).get(tag)
            if consumer is None:
                cap, st, _ = self.keys[ch]
                binds = self.conns.get((cap, st), {})
                consumer = next((c for (_, t), c in binds.items() if t == tag), None)
        return consumer is None or consumer[0] is not True


class AckWalk:
    """The walk's state between batches; :meth:`batch` takes one batch's rows (kinds, channel ids,
    directions and columns), returns its settled and ended deliveries."""

    def __init__(self, keys: list):
        self.consumers = _Consumers(keys)
        self.epoch = np.zeros(16, dtype=np.int64)  # channel id -> reopenings so far
        self.pending = {k: np.zeros(0, dtype=np.int64) for k in _CARRIED}
        self.redelivered = 0

    def _epochs(self, kind, chan) -> np.ndarray:
        """Each row's count of its channel's reopenings up to and including it (carried over)."""
        if len(chan) and chan.max() >= len(self.epoch):
            grown = np.zeros(max(int(chan.max()) + 1, 2 * len(self.epoch)), dtype=np.int64)
            grown[: len(self.epoch)] = self.epoch
            self.epoch = grown
        opens = (kind == OPEN).astype(np.int64)
        if not opens.any():
            return self.epoch[chan]
        o = np.argsort(chan, kind="stable")
        run = np.cumsum(opens[o])
        first = np.r_[True, chan[o][1:] != chan[o][:-1]] if len(o) else np.zeros(0, dtype=bool)
        before = (run - opens[o])[first]  # the opens before each channel's first row
        ep = np.empty(len(chan), dtype=np.int64)
        ep[o] = self.epoch[chan[o]] + run - before[np.cumsum(first) - 1]
        last = np.r_[first[1:], True] if len(o) else first
        self.epoch[chan[o][last]] = ep[o][last]
        return ep

    def _awaiting(self, kind, chan, c2s, s2c, col: dict, tags: list) -> np.ndarray:
        """Whether each delivery row (s2c deliver / get-ok) awaits an ack: the state rows walked in
        order, a delivery's consumer looked up once per (state, channel, tag, get)."""
        state = np.flatnonzero(
            (kind == OPEN) | (((kind == CONSUME) | (kind == GET)) & c2s) | ((kind == CONSUME_OK) & s2c)
        )
        dl = np.flatnonzero(((kind == DELIVER) | (kind == GET_OK)) & s2c)
        out = np.ones(len(kind), dtype=bool)
        if not len(dl):
            for i in state.tolist():
                self._apply(i, kind, chan, col, tags)
            return out
        # (state rows before it, channel, consumer tag, get) as one int64 (ordered by the first)
        nchan, ntag = int(chan.max()) + 1, len(tags) + 1
        if (len(state) + 1) * nchan * ntag * 2 >= 1 << 62:
            raise OutOfOrder("delivery keys too wide for one number")
        asked = np.searchsorted(state, dl) * nchan + chan[dl]
        asked = (asked * ntag + col["consumer_tag"][dl] + 1) * 2 + (kind[dl] == GET_OK)
        inverse, combos = pd.factorize(asked)
        o = np.argsort(combos)
        rank = np.empty(len(o), dtype=np.int64)
        rank[o] = np.arange(len(o))
        combos = combos[o]
        parts = zip(
            (combos // (2 * ntag * nchan)).tolist(),
            (combos // (2 * ntag) % nchan).tolist(),
            (combos // 2 % ntag - 1).tolist(),
            (combos % 2).tolist(),
        )
        verdict = np.empty(len(combos), dtype=bool)
        s, walked = 0, state.tolist()
        for j, (seg, ch, tag, is_get) in enumerate(parts):
            while s < seg:
                self._apply(walked[s], kind, chan, col, tags)
                s += 1
            verdict[j] = self.consumers.acked(ch, tags[tag] if tag >= 0 else None, bool(is_get))
        for i in walked[s:]:
            self._apply(i, kind, chan, col, tags)
        out[dl] = verdict[rank[inverse]]
        return out

    def _apply(self, i: int, kind, chan, col: dict, tags: list) -> None:
        tag = int(col["consumer_tag"][i])
        tag = tags[tag] if tag >= 0 else None
        no_ack = bool(col["no_ack"][i]) if col["no_ack_valid"][i] else None
        self.consumers.apply(int(kind[i]), int(chan[i]), tag, no_ack, bool(col["no_wait"][i]))

    def batch(self, kind, chan, c2s, s2c, conv, col: dict, tags: list, content) -> tuple:
        """The deliveries this batch settles or ends (rows: conversation, stream offset, time and
        packet, channel id, settling time and packet, outcome: an index of :data:`OUTCOMES`) and
        which of them are not timed at their content yet.  ``col``: the batch's columns
        (:func:`~amqpcap.analysis.batches.batches`); ``content(conv, off)``: (time, packet, found) of
        the packets completing deliveries' contents
        (:meth:`~amqpcap.analysis.content_stream.ContentStream.match`), asked until found; a row is
        timed at its content's packet when found, else at its own."""
        awaiting = self._awaiting(kind, chan, c2s, s2c, col, tags)
        ep = self._epochs(kind, chan)
        g = chan * (1 << 31) + ep  # one number per scope: a channel between two reopenings
        tag, has_tag = col["delivery_tag"], col["delivery_tag_valid"]
        dl = np.flatnonzero(((kind == DELIVER) | (kind == GET_OK)) & s2c & has_tag & awaiting)
        # the carried deliveries of channels without a row in the batch stay as they are
        P, touched = self.pending, np.isin(self.pending["chan"], chan)
        still = {k: v[~touched] for k, v in P.items()}
        new = {
            "g": g[dl], "tag": tag[dl], "pos": dl + 1, "conv": conv[dl], "off": col["stream_offset"][dl],
            "ts": col["ts"][dl], "frame": col["frame_number"][dl], "chan": chan[dl],
            "redl": col["redelivered"][dl].astype(np.int64), "start": np.full(len(dl), UNTIMED),
            "sframe": np.full(len(dl), -1, dtype=np.int64),
        }  # fmt: skip
        carried = np.count_nonzero(touched)
        cand = {k: np.r_[P[k][touched], new[k]] for k in _CARRIED}
        cand["pos"] = np.r_[np.zeros(carried, dtype=np.int64), new["pos"]]
        for part in (cand, still):
            waiting = np.flatnonzero(part["start"] == UNTIMED)
            found, frame, hit = content(part["conv"][waiting], part["off"][waiting])
            part["start"][waiting[hit]], part["sframe"][waiting[hit]] = found[hit], frame[hit]
        settling = (kind <= RECOVER) & c2s & (has_tag | (kind == RECOVER))
        ev = np.flatnonzero(settling)
        many = (kind[ev] == RECOVER) | (col["multiple"][ev] & (kind[ev] != REJECT))
        events = {
            "g": g[ev],
            "tag": np.where((kind[ev] == RECOVER) | (many & (tag[ev] == 0)), ALL, tag[ev]),
            "pos": ev + 1,
            "multiple": many,
        }
        at, replaced = first_settlement(cand, events)
        hit = at >= 0
        row = ev[at[hit]]
        ended = ~hit & ~replaced & (cand["g"] - cand["chan"] * (1 << 31) < self.epoch[cand["chan"]])
        self.redelivered += int(cand["redl"][hit].sum() + cand["redl"][ended].sum())
        keep = ~hit & ~replaced & ~ended
        self.pending = {k: np.r_[still[k], cand[k][keep]] for k in _CARRIED}
        settled = _rows(cand, hit, col["ts"][row], col["frame_number"][row], kind[row])
        out = np.concatenate([settled, _rows(cand, ended)])
        untimed = np.r_[cand["start"][hit], cand["start"][ended]] == UNTIMED
        return out, untimed

    def end(self) -> tuple:
        """The deliveries still outstanding at the end of the tables (unsettled), and which of
        them are not timed at their content yet."""
        P = self.pending
        self.redelivered += int(P["redl"].sum())
        out = _rows(P, np.ones(len(P["g"]), dtype=bool))
        untimed = P["start"] == UNTIMED
        self.pending = {k: v[:0] for k, v in P.items()}
        return out, untimed


def _rows(cand: dict, at: np.ndarray, ts=None, frame=None, outcome=None) -> np.ndarray:
    """The walk's result rows of the candidates ``at`` (a mask): settled at ``ts`` / ``frame``
    with ``outcome``, or unsettled; timed at their content when found."""
    n = int(np.count_nonzero(at))
    timed = cand["start"][at] != UNTIMED
    return np.stack(
        [
            cand["conv"][at],
            cand["off"][at],
            np.where(timed, cand["start"][at], cand["ts"][at]),
            np.where(timed, cand["sframe"][at], cand["frame"][at]),
            cand["chan"][at],
            np.full(n, NAT, dtype=np.int64) if ts is None else ts,
            np.full(n, -1, dtype=np.int64) if frame is None else frame,
            np.full(n, UNSETTLED, dtype=np.int64) if outcome is None else outcome.astype(np.int64),
        ],
        axis=1,
    ).astype(np.int64)
