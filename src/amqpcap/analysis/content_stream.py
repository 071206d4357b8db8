"""The packet completing each method's content, read from ``messages`` alongside a walk over
``methods``: the two tables are read in step (messages up to where the methods batch ends), so a
pass holds the messages rows read ahead of the methods and the methods still waiting for their
content, not a key per method of the whole table.

A method at (conversation, stream offset) is timed at the first ``messages`` row of that key (in
the direction asked), as the pairing of loaded tables does.  A messages row read is kept until
the methods walked have passed its packet in its conversation (wire order: the method whose
content it completes came at or before that packet) and every method waiting has been matched
against it.
"""

from __future__ import annotations

import numpy as np

from amqpcap.analysis.batches import OutOfOrder, batches

__all__ = ["ContentStream", "UNTIMED"]

UNTIMED = np.iinfo(np.int64).min + 1  # a content time not known yet (NAT is "none")
_OFF_BITS = 43  # a key: dense conversation number << 43 | stream offset
_EMPTY = ("conv", "off", "ts", "frame")


class ContentStream:
    """``messages`` rows of ``names`` in ``direction`` read as a methods walk advances:
    :meth:`advance` before matching a methods batch, :meth:`match` for its waiting methods,
    :meth:`passed` after it."""

    def __init__(self, directory, strings: dict, names, direction: str):
        cols = ["capture", "tcp_stream", "stream_offset", "ts", "frame_number", "direction", "method"]
        nulls = ("stream_offset", "frame_number")
        self._rows = batches(directory, "messages", cols, strings, names, nulls=nulls)
        self._strings, self._direction = strings, direction
        self.buffer = {k: np.zeros(0, dtype=np.int64) for k in _EMPTY}
        self.convs = np.zeros(0, dtype=np.int64)  # conversations seen, sorted
        self.seen = np.zeros(0, dtype=np.int64)  # by conversation: latest packet of the methods walked
        self.read_to = (-1, -1)  # (capture code, packet) of the last messages row read
        self.done = False

    def advance(self, cap: int, frame: int) -> None:
        """Read ``messages`` until past packet ``frame`` of capture code ``cap`` (or its end)."""
        while not self.done and self.read_to <= (cap, frame):
            self._read()

    def _read(self) -> None:
        b = next(self._rows, None)
        if b is None:
            self.done = True
            return
        want = self._strings["direction"].index.get(self._direction, -2)
        ok = (b["direction"] == want) & (b["capture"] >= 0) & (b["tcp_stream"] >= 0)
        ok &= b["stream_offset_valid"]
        self.read_to = (int(b["capture"][-1]), int(b["frame_number"][-1]))
        new = {
            "conv": b["capture"][ok].astype(np.int64) * (1 << 32) + b["tcp_stream"][ok],
            "off": b["stream_offset"][ok],
            "ts": b["ts"][ok],
            "frame": np.where(b["frame_number_valid"], b["frame_number"], -1)[ok],
        }
        self._know(new["conv"])
        self.buffer = {k: np.r_[self.buffer[k], new[k]] for k in _EMPTY}

    def _know(self, conv: np.ndarray) -> None:
        """Number the conversations ``conv`` (the methods' latest packet kept by conversation)."""
        if not len(conv) or np.isin(conv, self.convs).all():
            return
        grown = np.union1d(self.convs, conv)
        seen = np.full(len(grown), np.iinfo(np.int64).min, dtype=np.int64)
        seen[np.searchsorted(grown, self.convs)] = self.seen
        self.convs, self.seen = grown, seen

    def _keys(self, conv: np.ndarray, off: np.ndarray) -> np.ndarray:
        if len(off) and (off.min() < 0 or off.max() >= 1 << _OFF_BITS or len(self.convs) >= 1 << 20):
            raise OutOfOrder("keys too wide for one number")
        return (np.searchsorted(self.convs, conv).astype(np.int64) << _OFF_BITS) | off

    def match(self, conv: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For methods at (``conv``, ``off``): the time and packet of the first messages row read
        at that key and whether there is one."""
        ts = np.full(len(conv), UNTIMED, dtype=np.int64)
        frame = np.full(len(conv), -1, dtype=np.int64)
        B = self.buffer
        if not len(conv) or not len(B["conv"]):
            return ts, frame, np.zeros(len(conv), dtype=bool)
        self._know(conv)
        have, first = np.unique(self._keys(B["conv"], B["off"]), return_index=True)
        key = self._keys(conv, off)
        at = np.minimum(np.searchsorted(have, key), len(have) - 1)
        hit = have[at] == key
        ts[hit], frame[hit] = B["ts"][first[at[hit]]], B["frame"][first[at[hit]]]
        return ts, frame, hit

    def passed(self, conv: np.ndarray, frame: np.ndarray) -> None:
        """The methods walked reached packet ``frame`` of conversation ``conv`` (rows of a batch):
        the messages rows before those packets are dropped (their methods were matched)."""
        if len(conv):
            self._know(conv)
            at = np.searchsorted(self.convs, conv)
            np.maximum.at(self.seen, at, frame)
        B = self.buffer
        if len(B["conv"]):
            keep = B["frame"] >= self.seen[np.searchsorted(self.convs, B["conv"])]
            self.buffer = {k: v[keep] for k, v in B.items()}

    def drain(self):
        """The rest of ``messages``, a batch at a time (after the last methods batch): yields once
        per batch read, the rows read then dropped once the caller has matched them."""
        while not self.done:
            self._read()
            yield
            self.buffer = {k: v[:0] for k, v in self.buffer.items()}
