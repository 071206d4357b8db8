"""Consumer acknowledgements of a dissect output in one pass over its tables (what ``stats``
reports of them: latencies, outcome counts and the unacked health), holding the consumers, the
outstanding deliveries and a few numbers per settled one, not the tables.

The rules are :func:`amqpcap.analysis.acknowledgements.consumer_acks`'s for 0-8 / 0-9 / 0-9-1
channels (settled by tag, ``multiple``, recover) and :func:`~amqpcap.analysis.connection_health.unacked`'s.
What they decide otherwise (0-10 command sets, a delivery whose consumer tag is not bound on its
channel) raises :class:`~amqpcap.analysis.batches.OutOfOrder`: the caller pairs the loaded tables.
"""

from __future__ import annotations

import numpy as np

from amqpcap.analysis._common import NAT, latency_ms
from amqpcap.analysis.acknowledgements import ACK_METHODS
from amqpcap.analysis.batches import Codes, OutOfOrder, WireOrder, batches
from amqpcap.analysis.pairing import SCOPE_OPEN
from amqpcap.analysis.streamed_confirms import Blocks, content_times

__all__ = ["streamed_acks"]

_COLUMNS = ["capture", "tcp_stream", "frame_number", "stream_offset", "ts", "direction", "channel", "method",
            "delivery_tag", "multiple", "redelivered", "consumer_tag", "no_ack", "no_wait", "prefetch_count",
            "qos_global", "version"]  # fmt: skip
_WALKED = ("capture", "tcp_stream", "channel", "channel_valid", "stream_offset", "ts", "frame_number",
           "delivery_tag", "delivery_tag_valid", "multiple", "redelivered", "consumer_tag", "no_ack",
           "no_ack_valid", "no_wait", "prefetch_count", "prefetch_count_valid", "qos_global")  # fmt: skip
_SETTLING = {"basic.ack": 0, "basic.nack": 1, "basic.reject": 2, "basic.recover": 3, "basic.recover-async": 3}
_OUTCOMES = ("acked", "nacked", "rejected", "recovered", "unsettled")
_UNSETTLED = 4


class _Channel:
    """One channel's consumer state and outstanding deliveries."""

    __slots__ = ("bound", "pending", "get", "out")

    def __init__(self):
        self.bound: dict = {}  # consumer tag -> no_ack of the consumer bound to it
        self.pending: list = []  # consumers awaiting their consume-ok: [no_ack]
        self.get = None  # no_ack of the latest basic.get
        self.out: dict = {}  # tag -> (row of the delivery in ``rows``)


def _walk(directory, strings: dict):
    """The deliveries paired (:class:`Blocks` rows: conversation, stream offset, own time and
    packet, channel id, settling time and packet, outcome: an index of ``_OUTCOMES``), how many
    of them were redelivered, the qos events (channel id, time, packet, prefetch count or -1, global) and
    the channel ids (key -> id: the channels with a delivery or a qos)."""
    order = WireOrder()
    rows, qos = Blocks(8), Blocks(5)
    redelivered = 0
    add = rows.add
    chans: dict = {}
    ids: dict = {}
    conns: dict = {}  # (capture, tcp_stream) -> {(channel, consumer tag): consumer}, in binding order
    methods = strings["method"]
    nulls = ("channel", "delivery_tag", "consumer_tag", "prefetch_count", "no_ack", "qos_global")
    for b in batches(directory, "methods", _COLUMNS, strings, ACK_METHODS + ("basic.qos",), nulls=nulls):
        rows.flush()
        order.check(b["capture"], b["tcp_stream"], b["frame_number"], b["stream_offset"])
        version = strings["version"]
        if any(version.values[v] == "0-10" for v in np.unique(b["version"]).tolist() if v >= 0):
            raise OutOfOrder("0-10 channels settle by command sets")
        tags = strings["consumer_tag"].values
        c2s = (b["direction"] == strings["direction"].index.get("c2s", -2)).tolist()
        s2c = (b["direction"] == strings["direction"].index.get("s2c", -2)).tolist()
        cols = [b[c].tolist() for c in _WALKED]
        names = [methods.values[i] for i in b["method"].tolist()]
        walked = zip(names, *cols[:15])
        for i, (name, cap, st, ch, has_ch, off, ts, frame, tag, has_tag, mult, redl, ctag, no_ack, has_na,
                no_wait) in enumerate(walked):  # fmt: skip
            key = (cap, st, ch if has_ch else None)
            chan = chans.get(key)  # (made when the channel has consumer state: not every channel has)
            ctag = tags[ctag] if ctag >= 0 else None
            if name in SCOPE_OPEN:
                if chan is None:
                    continue
                for item in chan.out.values():
                    add(item[:5] + (NAT, -1, _UNSETTLED))
                    redelivered += item[5]
                binds = conns.get((cap, st), {})
                for t in chan.bound:
                    binds.pop((key[2], t), None)
                chan.out, chan.bound, chan.pending = {}, {}, []
            elif name == "basic.consume" and c2s[i]:
                chan = chan or chans.setdefault(key, _Channel())
                consumer = [no_ack if has_na else None]
                if ctag:
                    chan.bound[ctag] = conns.setdefault((cap, st), {})[(key[2], ctag)] = consumer
                if not no_wait:
                    chan.pending.append(consumer)
            elif name == "basic.consume-ok" and s2c[i]:
                if chan is not None and chan.pending:
                    consumer = chan.pending.pop(0)
                    if ctag:
                        chan.bound[ctag] = conns.setdefault((cap, st), {})[(key[2], ctag)] = consumer
            elif name == "basic.get" and c2s[i]:
                chans.setdefault(key, _Channel()).get = [no_ack if has_na else None]
            elif name in ("basic.deliver", "basic.get-ok") and s2c[i]:
                if name == "basic.get-ok":
                    consumer = chan.get if chan is not None else None
                elif ctag is None:
                    consumer = None
                else:
                    consumer = chan.bound.get(ctag) if chan is not None else None
                    if consumer is None:  # the first consumer of its tag on the connection, if any
                        binds = conns.get((cap, st), {})
                        consumer = next((c for (_, t), c in binds.items() if t == ctag), None)
                if not has_tag or (consumer is not None and consumer[0] is True):
                    continue
                # (a tag delivered again while outstanding replaces the first delivery)
                chan = chan or chans.setdefault(key, _Channel())
                chan.out[tag] = (
                    cap * (1 << 32) + st,
                    off,
                    ts,
                    frame,
                    ids.setdefault(key, len(ids)),
                    int(redl),
                )
            elif name.startswith("message."):  # (0-9 and 0-10 message class: by command ids)
                raise OutOfOrder("0-10 channels settle by command sets")
            elif name == "basic.qos" and c2s[i]:
                count = cols[15][i] if cols[16][i] else -1
                qos.add((ids.setdefault(key, len(ids)), ts, frame, count, int(cols[17][i])))
            elif name in _SETTLING and c2s[i] and chan is not None and chan.out:
                kind = _SETTLING[name]
                if not has_tag and kind != 3:
                    continue
                if kind == 3 or (mult and kind != 2):
                    hit = [k for k in chan.out if kind == 3 or tag == 0 or k <= tag]
                else:
                    hit = [tag] if tag in chan.out else []
                for k in hit:
                    item = chan.out.pop(k)
                    add(item[:5] + (ts, frame, kind))
                    redelivered += item[5]
    for chan in chans.values():
        for item in chan.out.values():
            add(item[:5] + (NAT, -1, _UNSETTLED))
            redelivered += item[5]
    return rows.arrays(), redelivered, qos.arrays(), ids


def streamed_acks(directory) -> tuple[np.ndarray, dict, dict]:
    """The latencies (ms: of the deliveries acked, nacked or rejected), the counts of stats'
    ``consumer_ack`` (acked, nacked, rejected, unsettled, recovered, redelivered) and the unacked
    health (``max_unacked``, ``channels_over_prefetch``) of the dissect output ``directory``."""
    strings = {c: Codes() for c in ("capture", "direction", "method", "consumer_tag", "version")}
    rows, redelivered, qos, ids = _walk(directory, strings)
    n = np.bincount(rows[:, 7], minlength=len(_OUTCOMES))
    names = ("acked", "nacked", "rejected", "unsettled", "recovered")
    counts = {k: int(n[_OUTCOMES.index(k)]) for k in names}
    counts["redelivered"] = redelivered
    values = np.zeros(0)
    if len(rows):
        done, frames, has = content_times(directory, rows[:, 0], rows[:, 1], strings, ACK_METHODS, "s2c")
        rows[:, 2] = np.where(has, done, rows[:, 2])  # the delivery timed at its content's packet
        rows[:, 3] = np.where(has, frames, rows[:, 3])
        del done, frames, has
        timed = rows[:, 7] <= 2
        values = latency_ms(rows[timed, 2], rows[timed, 5])
        del timed
    events = _events(rows, qos)
    del rows, qos
    return values, counts, _unacked(events, ids)


def _settle_events(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One settle event per settling packet of a channel (channel id, time, packet) and the
    number of deliveries it settled."""
    settled = np.flatnonzero(rows[:, 6] >= 0)
    if not len(settled):
        return np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64)
    chan, ts, frame = rows[settled, 4], rows[settled, 5], rows[settled, 6]
    o = np.lexsort((frame, ts, chan))
    chan, ts, frame = chan[o], ts[o], frame[o]
    first = np.r_[True, (chan[1:] != chan[:-1]) | (ts[1:] != ts[:-1]) | (frame[1:] != frame[:-1])]
    at = np.flatnonzero(first)
    return np.c_[chan[at], ts[at], frame[at]], np.diff(np.r_[at, len(chan)])


def _events(rows: np.ndarray, qos: np.ndarray) -> dict:
    """unacked's events: a delivery (+1 at the packet completing it), a settling packet (-the
    deliveries it settled), a qos (its prefetch count); channel, time, packet (a missing one:
    last), their order within a packet (settle, qos, delivery), change, prefetch count (-1: none
    given, -2: not a qos)."""
    keys, n = _settle_events(rows)
    frame = np.concatenate([rows[:, 3], keys[:, 2], qos[:, 2]])
    frame[frame < 0] = np.iinfo(np.int64).max
    return {
        "chan": np.concatenate([rows[:, 4], keys[:, 0], qos[:, 0]]).astype(np.int32),
        "ts": np.concatenate([rows[:, 2], keys[:, 1], qos[:, 1]]),
        "frame": frame,
        "kind": np.repeat(np.array([2, 0, 1], dtype=np.int8), [len(rows), len(keys), len(qos)]),
        "delta": np.concatenate(
            [np.ones(len(rows), dtype=np.int32), -n.astype(np.int32), np.zeros(len(qos), dtype=np.int32)]
        ),  # fmt: skip
        "prefetch": np.concatenate(
            [np.full(len(rows) + len(keys), -2, dtype=np.int32), qos[:, 3].astype(np.int32)]
        ),  # fmt: skip
    }


def _unacked(events: dict, ids: dict) -> dict:
    """stats' unacked health from :func:`_events`: per channel, by time then packet (a settle,
    then a qos, then a delivery within one), the count of unsettled deliveries after each event
    against the latest prefetch count."""
    chan = events["chan"]
    if not len(chan):
        return {"max_unacked": 0, "channels_over_prefetch": 0}
    order = np.lexsort((events.pop("kind"), events.pop("frame"), events.pop("ts"), chan))
    chan, delta, prefetch = chan[order], events.pop("delta")[order], events.pop("prefetch")[order]
    del order, events
    start = np.r_[True, chan[1:] != chan[:-1]]
    total = np.cumsum(delta, dtype=np.int64)
    base = np.maximum.accumulate(np.where(start, np.arange(len(chan)), 0))
    unacked = total - np.r_[0, total][base]  # the channel's running sum
    # the latest prefetch count of the channel (a qos without one keeps the one before)
    has = (prefetch >= 0) | start
    at = np.maximum.accumulate(np.where(has, np.arange(len(chan)), 0))
    latest = np.where(prefetch[at] >= 0, prefetch[at], -1)
    over = (latest > 0) & (unacked > latest)
    # (a channel without a capture or number is not counted)
    named = np.array([k[0] >= 0 and k[2] is not None for k in ids], dtype=bool)
    return {
        "max_unacked": int(unacked.max()),
        "channels_over_prefetch": int(len(np.unique(chan[over & named[chan]]))),
    }
