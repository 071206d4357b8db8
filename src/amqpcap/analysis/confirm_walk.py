"""The settlement walk of publisher confirms over batches of method rows, in numpy: a batch's
publishes are numbered per confirm scope and matched to the batch's acks at once
(:func:`~amqpcap.analysis.settle.first_settlement`); only the publishes still unconfirmed (and
the channels' scope and count) are carried to the next batch.

A publish (number n of its scope, at row p) is settled by the first ack / nack of its scope after
p that covers it: a single one whose delivery-tag is n, or a ``multiple`` one whose tag is at
least n (tag 0: all) -- what a walk row by row does (a multiple ack settles every pending number up
to its tag, a single one its own).
"""

from __future__ import annotations

import numpy as np

from amqpcap.analysis.content_stream import UNTIMED
from amqpcap.analysis.settle import ALL, first_settlement

__all__ = ["ConfirmWalk"]

OPEN, PUBLISH, SELECT, ACK, NACK = range(5)
_NONE = np.iinfo(np.int64).max
# what a carried publish holds: scope, number, conversation, stream offset, own time, content time
_CARRIED = ("scope", "n", "conv", "off", "ts", "start")


class ConfirmWalk:
    """The walk's state between batches; :meth:`batch` takes one batch's rows (kinds, channel ids,
    and the columns of a settled publish), returns its settled publishes."""

    def __init__(self):
        self.scope_of: np.ndarray = np.full(16, -1, dtype=np.int64)  # channel id -> scope (-1: none)
        self.counted: list = []  # scope -> publishes numbered so far
        self.alive: list = []  # scope -> still open
        self.pending: dict = {k: np.zeros(0, dtype=np.int64) for k in _CARRIED}
        self.unconfirmed = 0
        self.acked = 0

    def _scopes(self, kind, chan, c2s) -> np.ndarray:
        """Each row's confirm scope (-1: its channel not in confirm mode), control rows applied in
        order (a select in c2s starts a scope unless one is open; a channel open ends it)."""
        if len(chan) and chan.max() >= len(self.scope_of):
            grown = np.full(max(int(chan.max()) + 1, 2 * len(self.scope_of)), -1, dtype=np.int64)
            grown[: len(self.scope_of)] = self.scope_of
            self.scope_of = grown
        scope = np.empty(len(kind), dtype=np.int64)
        start = 0
        for i in np.flatnonzero((kind == OPEN) | ((kind == SELECT) & c2s)).tolist():
            scope[start:i] = self.scope_of[chan[start:i]]
            ch = chan[i]
            if kind[i] == OPEN:
                if self.scope_of[ch] >= 0:
                    self.alive[self.scope_of[ch]] = False
                self.scope_of[ch] = -1
            elif self.scope_of[ch] < 0:
                self.scope_of[ch] = len(self.counted)
                self.counted.append(0)
                self.alive.append(True)
            scope[i] = -1
            start = i + 1
        scope[start:] = self.scope_of[chan[start:]]
        return scope

    def batch(self, kind, chan, c2s, s2c, conv, off, ts, tag, has_tag, multiple, content) -> tuple:
        """The publishes this batch settles: (conversation, stream offset, own time, content time,
        settling time) arrays.  ``content(conv, off)``: (time, packet, found) of the packets
        completing the contents of publishes (:meth:`~amqpcap.analysis.content_stream.
        ContentStream.match`), asked for each publish until found (a content time of
        :data:`~amqpcap.analysis.content_stream.UNTIMED`: not found yet)."""
        scope = self._scopes(kind, chan, c2s)
        pub = np.flatnonzero((kind == PUBLISH) & c2s & (scope >= 0))
        ps = scope[pub]
        order = np.argsort(ps, kind="stable")
        first = np.r_[True, ps[order][1:] != ps[order][:-1]] if len(pub) else np.zeros(0, dtype=bool)
        rank = np.arange(len(pub)) - np.maximum.accumulate(np.where(first, np.arange(len(pub)), 0))
        n = np.empty(len(pub), dtype=np.int64)
        counted = np.asarray(self.counted, dtype=np.int64)
        n[order] = counted[ps[order]] + rank + 1
        for s, c in zip(*np.unique(ps, return_counts=True)):
            self.counted[s] += int(c)
        # candidates: the carried publishes (before every row of the batch), then the batch's
        P = self.pending
        cand = {
            "scope": np.r_[P["scope"], ps],
            "n": np.r_[P["n"], n],
            "pos": np.r_[np.full(len(P["n"]), -1, dtype=np.int64), pub],
            "conv": np.r_[P["conv"], conv[pub]],
            "off": np.r_[P["off"], off[pub]],
            "ts": np.r_[P["ts"], ts[pub]],
            "start": np.r_[P["start"], np.full(len(pub), UNTIMED, dtype=np.int64)],
        }
        waiting = np.flatnonzero(cand["start"] == UNTIMED)
        found, _, hit = content(cand["conv"][waiting], cand["off"][waiting])
        cand["start"][waiting[hit]] = found[hit]
        acks = np.flatnonzero(((kind == ACK) | (kind == NACK)) & s2c & has_tag & (scope >= 0))
        at = self._settling(cand, acks, scope, tag, multiple)
        hit = at != _NONE
        settled_at = at[hit]
        self.acked += int(np.count_nonzero(kind[settled_at] == ACK))
        out = (cand["conv"][hit], cand["off"][hit], cand["ts"][hit], cand["start"][hit], ts[settled_at])
        alive = np.asarray(self.alive, dtype=bool)
        keep = ~hit & alive[cand["scope"]]
        self.unconfirmed += int(np.count_nonzero(~hit & ~keep))
        self.pending = {k: cand[k][keep] for k in P}
        return out

    @staticmethod
    def _settling(cand: dict, acks, scope, tag, multiple) -> np.ndarray:
        """For each candidate publish, the row of the first ack settling it (``_NONE``: none):
        :func:`~amqpcap.analysis.settle.first_settlement` (positions: a carried publish 0, the
        batch's rows from 1)."""
        best = np.full(len(cand["n"]), _NONE, dtype=np.int64)
        if len(acks) == 0 or len(best) == 0:
            return best
        many = multiple[acks]
        events = {
            "g": scope[acks],
            "tag": np.where(many & (tag[acks] == 0), ALL, tag[acks]),
            "pos": acks + 1,
            "multiple": many,
        }
        at, _ = first_settlement({"g": cand["scope"], "tag": cand["n"], "pos": cand["pos"] + 1}, events)
        best[at >= 0] = acks[at[at >= 0]]
        return best
