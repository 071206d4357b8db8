"""Consumers and the deliveries they receive: consumer state along the wire.

docs/analysis.md has the exact definitions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from amqpcap.analysis._common import (
    STR,
    TS_DTYPE,
    build,
    codes_in,
    ordered,
    records,
)
from amqpcap.analysis.pairing import (
    SCOPE_OPEN,
    object_values,
)
from amqpcap.analysis.settle import codes
from amqpcap.analysis.tables import as_tables

# consumers

CONSUMER_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "channel": "Int32",
    "consumer_tag": STR,
    "queue": STR,
    "no_ack": "boolean",
    "consume_frame": "Int64",
    "consume_ts": TS_DTYPE,
    "cancel_frame": "Int64",
    "cancel_ts": TS_DTYPE,
}


CONSUMER_METHODS = (
    "basic.consume",
    "basic.consume-ok",
    "message.subscribe",
    "basic.cancel",
    "message.cancel",
    "basic.get",
    "basic.deliver",
    "message.transfer",
    "basic.get-ok",
) + SCOPE_OPEN


# the columns consumer_state reads
CONSUMER_STATE_COLS = [
    "capture",
    "tcp_stream",
    "channel",
    "direction",
    "method",
    "frame_number",
    "ts",
    "queue",
    "consumer_tag",
    "no_ack",
    "no_wait",
    "accept_mode",
]


class Deliveries:
    """What :func:`consumer_state` found for the delivery rows (s2c deliver / get-ok / 0-10 transfer)
    of a methods frame: their positions ``at`` and, per position, ``queue``, ``no_ack`` (True,
    False or None: unknown) and ``consumer_tag`` (object arrays)."""

    def __init__(self, at, queue, no_ack, consumer_tag):
        self.at, self.queue, self.no_ack, self.consumer_tag = at, queue, no_ack, consumer_tag


_STATE_ONLY = ("basic.deliver", "message.transfer", "basic.get-ok")  # rows that read the state alone


def consumer_state(m: pd.DataFrame):
    """Walk the rows of ``m`` (wire order) that change the consumer state (consume, consume-ok,
    subscribe, cancel, get, channel reopening) and look up, for every delivery row (s2c deliver /
    get-ok / 0-10 transfer), its consumer's queue and no_ack.  Returns (:class:`Deliveries`,
    consumer table rows).  The walk visits the few state rows; the millions of deliveries are
    matched to the state they saw by key and position (array operations)."""
    consumers: list[dict] = []
    by_tag: dict = {}  # (cap, st, ch, tag) -> consumer row
    pending: dict = {}  # (cap, st, ch) -> [consumer row awaiting consume-ok]
    binds: list = []  # (position, (cap, st, ch, tag), consumer row index or -1: unbound)
    gets: list = []  # (position, (cap, st, ch), (queue, no_ack))
    method = m["method"] if len(m) else pd.Series([], dtype=object)
    state = method.isin(CONSUMER_METHODS) & ~method.isin(_STATE_ONLY)
    state_at = np.flatnonzero(state.to_numpy(dtype=bool))
    index: dict = {}  # id(consumer row) -> its index

    def bind(pos, k, row):
        by_tag[k] = row
        binds.append((pos, k, index[id(row)]))

    for pos, r in zip(state_at.tolist(), records(m, CONSUMER_STATE_COLS, rows=state_at)):
        cap, st, ch, d, name, frame, ts, queue, tag, no_ack, no_wait, accept_mode = r
        key = (cap, st, ch)
        if name in ("basic.consume", "message.subscribe") and d == "c2s":
            subscribe = name == "message.subscribe"
            # 0-10: consumer_tag holds the subscription's destination; accept-mode 1 (none): no acks
            row = dict(
                capture=cap,
                tcp_stream=st,
                channel=ch,
                consumer_tag=tag if subscribe else (tag or None),
                queue=queue,
                no_ack=accept_mode == 1 if subscribe else no_ack,
                consume_frame=frame,
                consume_ts=ts,
            )
            index[id(row)] = len(consumers)
            consumers.append(row)
            if subscribe or tag:
                bind(pos, key + (row["consumer_tag"],), row)
            if not subscribe and not no_wait:
                pending.setdefault(key, []).append(row)
        elif name == "basic.consume-ok" and d == "s2c":
            lst = pending.get(key)
            if lst:
                row = lst.pop(0)
                if tag:
                    row["consumer_tag"] = tag
                    bind(pos, key + (tag,), row)
        elif name in ("basic.cancel", "message.cancel") and tag:
            row = by_tag.get(key + (tag,))
            if row is not None and row.get("cancel_frame") is None:
                row["cancel_frame"] = frame
                row["cancel_ts"] = ts
        elif name == "basic.get" and d == "c2s":
            gets.append((pos, key, (queue, no_ack)))
        elif name in SCOPE_OPEN:
            for k in [k for k in by_tag if k[:3] == key]:
                by_tag.pop(k)
                binds.append((pos, k, -1))
            pending.pop(key, None)
    return _deliveries(m, consumers, binds, gets), consumers


def _key_codes(m: pd.DataFrame, rows: np.ndarray, cols: list, keys: list) -> tuple[np.ndarray, np.ndarray]:
    """One int64 per key: of the rows ``rows`` of ``m`` (columns ``cols``) and of the tuples
    ``keys``, equal for equal values (None equal to a missing value); a row value that no key
    has gets -1."""
    row_code = np.zeros(len(rows), dtype=np.int64)
    key_code = np.zeros(len(keys), dtype=np.int64)
    for i, c in enumerate(cols):
        values = pd.Index(sorted({k[i] for k in keys if k[i] is not None}, key=str), dtype=object)
        kc = np.array([-1 if k[i] is None else values.get_loc(k[i]) for k in keys], dtype=np.int64) + 1
        s = m[c].iloc[rows]
        rc = codes_in(s, values).astype(np.int64) + 1  # missing or unknown: 0
        rc[(rc == 0) & s.notna().to_numpy(dtype=bool)] = -1  # a value no key has
        width = len(values) + 1
        row_code = np.where((row_code < 0) | (rc < 0), -1, row_code * width + rc)
        key_code = key_code * width + kc
    return row_code, key_code


def _latest(key_code, key_pos, row_code, row_pos) -> np.ndarray:
    """For each row (code, position), the index of the latest key entry of the same code at an
    earlier position (-1: none).  Entries are in position order."""
    out = np.full(len(row_code), -1, dtype=np.int64)
    if len(key_code) == 0 or len(row_code) == 0:
        return out
    order = np.lexsort((key_pos, key_code))
    width = int(max(key_pos.max(), row_pos.max())) + 1
    flat = key_code[order] * width + key_pos[order]
    j = np.searchsorted(flat, row_code * width + row_pos, side="left") - 1
    ok = (row_code >= 0) & (j >= 0)
    ok[ok] = key_code[order[j[ok]]] == row_code[ok]
    out[ok] = order[j[ok]]
    return out


def _deliveries(m, consumers: list, binds: list, gets: list) -> Deliveries:
    """:class:`Deliveries` of ``m`` from the state walk's logs (see :func:`consumer_state`)."""
    s2c = (m["direction"] == "s2c").fillna(False).to_numpy(dtype=bool) if len(m) else np.zeros(0, dtype=bool)
    method = m["method"] if len(m) else pd.Series([], dtype=object)
    transfer = (method == "message.transfer").fillna(False).to_numpy(dtype=bool) & s2c
    deliver = ((method == "basic.deliver").fillna(False).to_numpy(dtype=bool) & s2c) | transfer
    get_ok = (method == "basic.get-ok").fillna(False).to_numpy(dtype=bool) & s2c
    at = np.flatnonzero(deliver | get_ok)
    n = len(at)
    queue = np.full(n, None, dtype=object)
    no_ack = np.full(n, None, dtype=object)
    ctag = np.full(n, None, dtype=object)
    if n == 0:
        return Deliveries(at, queue, no_ack, ctag)
    is_dl, is_get = deliver[at], get_ok[at]
    tags = m["consumer_tag"].iloc[at]
    has_tag = tags.notna().to_numpy(dtype=bool) & is_dl
    ctag[is_dl] = tags.astype(object).to_numpy()[is_dl]
    ctag[is_dl & ~has_tag] = None
    # deliveries: the consumer bound to (channel, tag) when the delivery came
    cols = ["capture", "tcp_stream", "channel", "consumer_tag"]
    found = np.full(n, -1, dtype=np.int64)
    dl = np.flatnonzero(has_tag)
    if binds and len(dl):
        row_code, key_code = _key_codes(m, at[dl], cols, [b[1] for b in binds])
        hit = _latest(key_code, np.array([b[0] for b in binds], dtype=np.int64), row_code, at[dl])
        values = np.array([-1] + [b[2] for b in binds], dtype=np.int64)
        found[dl] = values[hit + 1]
    miss = has_tag & (found < 0)
    if miss.any():  # no consumer on the delivery's channel: one with its tag on the connection
        found[miss] = _any_channel(m, at[miss], binds)
    row_queue = np.array([c["queue"] for c in consumers] + [None], dtype=object)
    row_no_ack = np.array([c["no_ack"] for c in consumers] + [None], dtype=object)
    queue[is_dl] = row_queue[found[is_dl]]  # (-1: the appended None)
    no_ack[is_dl] = row_no_ack[found[is_dl]]
    mode = m["accept_mode"].iloc[at]
    set_mode = transfer[at] & mode.notna().to_numpy(dtype=bool)  # 0-10: the transfer's accept-mode
    no_ack[set_mode] = (mode.to_numpy(dtype=object)[set_mode] == 1).tolist()
    # get-ok: the channel's latest basic.get
    g = np.flatnonzero(is_get)
    if gets and len(g):
        row_code, key_code = _key_codes(m, at[g], cols[:3], [x[1] for x in gets])
        hit = _latest(key_code, np.array([x[0] for x in gets], dtype=np.int64), row_code, at[g])
        got = [gets[i][2] if i >= 0 else (None, None) for i in hit.tolist()]
        queue[g] = [q for q, _ in got]
        no_ack[g] = [a for _, a in got]
    return Deliveries(at, queue, no_ack, ctag)


def _any_channel(m, rows: np.ndarray, binds: list) -> np.ndarray:
    """The consumer row index of each delivery at ``rows`` whose channel has no consumer of its tag:
    the first consumer bound to that tag on its connection at the time (-1: none)."""
    out = np.full(len(rows), -1, dtype=np.int64)
    if not binds or not len(rows):
        return out
    # the deliveries between two binds see the same state: one look-up per (state, connection, tag)
    when = np.searchsorted(np.array([b[0] for b in binds], dtype=np.int64), rows, side="left")
    cols = ("capture", "tcp_stream", "consumer_tag")
    asked = np.c_[when, np.column_stack([codes(m[c].iloc[rows]) for c in cols])]
    combos, first, inverse = np.unique(asked, axis=0, return_index=True, return_inverse=True)
    values = [object_values(m[c], rows[first]) for c in cols]
    found = np.full(len(combos), -1, dtype=np.int64)
    by_tag: dict = {}
    b = 0
    for i in range(len(combos)):  # (by state: combos are sorted)
        while b < combos[i, 0]:
            _, k, ix = binds[b]
            if ix < 0:
                by_tag.pop(k, None)
            else:
                by_tag[k] = ix
            b += 1
        cap, st, tag = (v[i] for v in values)
        found[i] = next((v for k, v in by_tag.items() if k[0] == cap and k[1] == st and k[3] == tag), -1)
    out[:] = found[inverse.reshape(-1)]
    return out


def consumers(t) -> pd.DataFrame:
    """One row per basic.consume (0-10 message.subscribe): consumer tag (server-assigned
    ones taken from consume-ok), queue, no_ack (0-10: accept-mode none), consume and cancel packets."""
    t = as_tables(t)
    _, rows = consumer_state(ordered(t.methods, CONSUMER_METHODS, CONSUMER_STATE_COLS))
    return build(rows, CONSUMER_COLS)
