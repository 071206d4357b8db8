"""Publisher confirms of a dissect output in one pass over its tables (what ``stats`` reports of
them: latencies and outcome counts), holding the channels in confirm mode, their unconfirmed
publishes and a few numbers per confirmed one, not the tables.

The rules are :func:`amqpcap.analysis.publisher_confirms.confirms`'s: after a c2s confirm.select,
the n-th c2s basic.publish of the channel (a channel.open starts over) is settled by the first
s2c basic.ack / basic.nack whose delivery-tag is n, or covers it (``multiple``: tags up to its
own; tag 0: all).  Its time is that of the packet completing its content (the first ``messages``
row at its stream offset), else its own.
"""

from __future__ import annotations

import numpy as np

from amqpcap.analysis._common import ROW_KEYS, latency_ms, release_memory
from amqpcap.analysis.batches import Codes, WireOrder, batches, channel_ids
from amqpcap.analysis.confirm_walk import ACK, NACK, OPEN, PUBLISH, SELECT, ConfirmWalk
from amqpcap.analysis.content_stream import UNTIMED, ContentStream
from amqpcap.analysis.growing import Chunks
from amqpcap.analysis.pairing import SCOPE_OPEN
from amqpcap.analysis.publisher_confirms import CONFIRM_METHODS

__all__ = ["streamed_confirms"]

_COLUMNS = [c for c in ROW_KEYS if c != "version"] + ["delivery_tag", "multiple"]


def _kinds(values: list) -> np.ndarray:
    """Kind (:mod:`~amqpcap.analysis.confirm_walk`) of each method code, then of code -1."""
    of = {"basic.publish": PUBLISH, "confirm.select": SELECT, "basic.ack": ACK, "basic.nack": NACK}
    of.update(dict.fromkeys(SCOPE_OPEN, OPEN))
    return np.array([of.get(v, -1) for v in values] + [-1], dtype=np.int8)


def _walk(directory, strings: dict) -> tuple[np.ndarray, int, int, int]:
    """The latencies of the confirmed publishes (in the order they are settled, those settled
    before their content was read last), how many confirmed, how many by an ack, how many were
    left unconfirmed."""
    order = WireOrder()
    walk = ConfirmWalk()
    stream = ContentStream(directory, strings, CONFIRM_METHODS, "c2s")
    values = Chunks(np.float64)
    late = _Late()
    ids: dict = {}
    methods = strings["method"]
    nulls = ("channel", "delivery_tag")
    for b in batches(directory, "methods", _COLUMNS, strings, CONFIRM_METHODS, nulls=nulls):
        order.check(b["capture"], b["tcp_stream"], b["frame_number"], b["stream_offset"])
        kind = _kinds(methods.values)[b["method"]]
        chan = channel_ids(ids, b["capture"], b["tcp_stream"], b["channel"], b["channel_valid"])
        c2s = b["direction"] == strings["direction"].index.get("c2s", -2)
        s2c = b["direction"] == strings["direction"].index.get("s2c", -2)
        conv = b["capture"].astype(np.int64) * (1 << 32) + b["tcp_stream"]
        stream.advance(int(b["capture"][-1]), int(b["frame_number"][-1]))
        conv_, off, own, start, at = walk.batch(
            kind, chan, c2s, s2c, conv, b["stream_offset"], b["ts"], b["delivery_tag"],
            b["delivery_tag_valid"], b["multiple"], stream.match,
        )  # fmt: skip
        timed = start != UNTIMED
        values.append(latency_ms(start[timed], at[timed]))
        late.add(conv_[~timed], off[~timed], own[~timed], at[~timed])
        late.time(stream, values)
        stream.passed(conv, b["frame_number"])
    for _ in stream.drain() if len(late) else ():
        if not late.time(stream, values):
            break
    late.untimed(values)
    unconfirmed = walk.unconfirmed + len(walk.pending["n"])
    release_memory(collect=False)  # (the walk's freed heap given back before the values are joined)
    return values.take(), walk.acked, unconfirmed


class _Late:
    """Publishes settled before the packet completing their content was read (rare: the broker
    confirms a publish it has received): held until that packet is read, else timed at their own."""

    def __init__(self):
        self.rows = {k: np.zeros(0, dtype=np.int64) for k in ("conv", "off", "own", "at")}

    def __len__(self) -> int:
        return len(self.rows["conv"])

    def add(self, conv, off, own, at) -> None:
        if len(conv):
            new = {"conv": conv, "off": off, "own": own, "at": at}
            self.rows = {k: np.r_[v, new[k]] for k, v in self.rows.items()}

    def time(self, stream: ContentStream, values: Chunks) -> int:
        """Time those whose content the stream has read; how many are left."""
        if len(self):
            R = self.rows
            ts, _, hit = stream.match(R["conv"], R["off"])
            values.append(latency_ms(ts[hit], R["at"][hit]))
            self.rows = {k: v[~hit] for k, v in R.items()}
        return len(self)

    def untimed(self, values: Chunks) -> None:
        """The publishes whose content no messages row completes: timed at their own packet."""
        values.append(latency_ms(self.rows["own"], self.rows["at"]))
        self.rows = {k: v[:0] for k, v in self.rows.items()}


def streamed_confirms(directory) -> tuple[np.ndarray, dict]:
    """The latencies (ms, float64: the settled publishes') and the ``acked`` / ``nacked`` /
    ``unconfirmed`` counts of :func:`~amqpcap.analysis.publisher_confirms.confirms` on the dissect
    output ``directory``.  Raises :class:`~amqpcap.analysis.batches.OutOfOrder` when a table is
    not in wire order within a conversation (or its keys do not fit one number)."""
    strings = {c: Codes() for c in ("capture", "direction", "method")}
    values, acked, unconfirmed = _walk(directory, strings)
    counts = {"acked": acked, "nacked": int(len(values) - acked), "unconfirmed": int(unconfirmed)}
    return values, counts
