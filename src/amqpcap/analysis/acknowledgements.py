"""Consumer acknowledgements: each delivery paired with the ack, nack, reject or recover that
settled it.

docs/analysis.md has the exact definitions.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pandas as pd

from amqpcap.analysis._common import (
    STR,
    covered,
    records,
)
from amqpcap.analysis.deliveries import (
    CONSUMER_METHODS,
    CONSUMER_STATE_COLS,
    Deliveries,
    consumer_state,
)
from amqpcap.analysis.pairing import (
    BASE_COLS,
    PAIR_FIELDS,
    SCOPE_OPEN,
    SETTLE_COLUMNS,
    finish,
    needed_sources,
    object_values,
    result_columns,
    scope_end,
    settled_pair,
    sources,
    taken_frame,
    with_content_completion,
)
from amqpcap.analysis.settle import ALL, first_settlement, scopes
from amqpcap.analysis.tables import as_tables

# consumer acks

ACK_COLS = dict(
    BASE_COLS,
    delivery_tag="Int64",
    outcome=STR,
    multiple="boolean",
    requeue="boolean",
    redelivered="boolean",
    consumer_tag=STR,
    queue=STR,
    exchange=STR,
    routing_key=STR,
)

_ACK_FIELDS = PAIR_FIELDS + ("requeue", "redelivered", "consumer_tag", "queue", "exchange", "routing_key")
_SETTLE = {
    "basic.ack": "ack",
    "basic.nack": "nack",
    "basic.reject": "reject",
    "message.accept": "ack",
    "message.release": "nack",
    "message.reject": "reject",
}


# the methods consumer_acks reads (of ``methods``, and of ``messages`` for content timing)
ACK_METHODS = CONSUMER_METHODS + tuple(_SETTLE) + ("basic.recover", "basic.recover-async")


def consumer_acks(t, columns=None) -> pd.DataFrame:
    """basic.deliver / basic.get-ok (s2c) -> the basic.ack / nack / reject (c2s) covering
    its delivery tag on the same channel.

    ``multiple`` (ack, nack) covers every outstanding tag <= the tag; tag 0 with
    ``multiple`` covers all outstanding.  Deliveries to no-ack consumers (and
    get-ok answering a no-ack get) are left out.  ``outcome``: ``ack``,
    ``nack``, ``reject``, ``recovered`` (basic.recover before any settlement)
    or ``unsettled`` (NaN latency).  0-10: message.transfer (s2c) to a
    subscription with accept-mode explicit -> message.accept (``ack``) /
    message.release (``nack``) / message.reject (``reject``) whose ``transfers``
    set covers the transfer's command id; ``delivery_tag`` holds that command id.
    The delivery is timed at the packet that completed its content.  ``columns``: only these
    columns of the result.
    """
    t = as_tables(t)
    cols = SETTLE_COLUMNS + [
        "requeue",
        "redelivered",
        "consumer_tag",
        "exchange",
        "routing_key",
        "command_id",
        "id_ranges",
    ]
    m = with_content_completion(t, ACK_METHODS, cols + CONSUMER_STATE_COLS)
    if len(m) == 0:
        return finish([], ACK_COLS)[result_columns(ACK_COLS, columns)]
    dlv, _ = consumer_state(m)
    chan, g = scopes(m, m["method"].isin(SCOPE_OPEN).to_numpy(dtype=bool))
    # 0-10 channels settle by command id sets: walked; the others by tag: array operations
    odd = (m["version"] == "0-10").fillna(False) | m["method"].isin(_BY_COMMAND)
    walked = np.isin(chan, chan[odd.to_numpy(dtype=bool)])
    got = _ack_pairs(m, dlv, ~walked, chan, g)
    if walked.any():
        more = _ack_walk(m, dlv, walked)
        got = {k: np.concatenate([got[k], more[k]]) for k in got}
    if not len(got["at"]):
        return finish([], ACK_COLS)[result_columns(ACK_COLS, columns)]
    p, r = got["at"], got["resp"]
    src = {
        **settled_pair(p, r, got["tag"], got["outcome"], got["multiple"]),
        "requeue": got["requeue"],
        "redelivered": ("redelivered", p),
        "consumer_tag": got["ctag"],
        "queue": got["queue"],
        "exchange": ("exchange", p),
        "routing_key": ("routing_key", p),
    }
    sort_by = ["capture", "tcp_stream", "channel", "request_frame"]
    src = needed_sources(src, columns, sort_by)
    del got, dlv
    m = sources(m, src)
    return taken_frame(m, src, ACK_COLS, sort_by, columns)


_BY_COMMAND = ("message.transfer", "message.subscribe", "message.accept", "message.release", "message.reject")


def _ack_pairs(m: pd.DataFrame, dlv: Deliveries, rows: np.ndarray, chan: np.ndarray, g: np.ndarray) -> dict:
    """:func:`consumer_acks` of the rows of ``m`` in ``rows`` (0-8 / 0-9 / 0-9-1 channels: settled by
    tag, ``multiple``, recover) as array operations (:mod:`.settle`): the walk's ``got`` arrays
    (positions of the delivery and of its settlement, tag, outcome, multiple, requeue, consumer tag,
    queue), in the order a walk settles them; ``chan``, ``g``: the rows' channels and scopes."""
    method = m["method"]
    c2s = (m["direction"] == "c2s").fillna(False).to_numpy(dtype=bool)
    tag = m["delivery_tag"].to_numpy(dtype=np.int64, na_value=-1)
    has_tag = m["delivery_tag"].notna().to_numpy(dtype=bool)
    basic = method.isin(("basic.deliver", "basic.get-ok")).to_numpy(dtype=bool)
    keep = rows[dlv.at] & basic[dlv.at] & has_tag[dlv.at] & (dlv.no_ack != True)  # noqa: E712 (None: kept)
    at, queue = dlv.at[keep], dlv.queue[keep]
    kind = np.full(len(m), -1, dtype=np.int8)  # the settling methods: _OUTCOMES' index
    for i, name in enumerate(_OUTCOMES):
        kind[(method == name).fillna(False).to_numpy(dtype=bool)] = i
    recover = kind >= 3
    ev = np.flatnonzero(rows & c2s & (kind >= 0) & (has_tag | recover))
    multiple = (m["multiple"].fillna(False).to_numpy(dtype=bool) & (kind != 2))[ev] | recover[ev]
    ev_tag = np.where(multiple & ((tag[ev] == 0) | recover[ev]), ALL, tag[ev])
    by, replaced = first_settlement(
        {"g": g[at], "tag": tag[at], "pos": at}, {"g": g[ev], "tag": ev_tag, "pos": ev, "multiple": multiple}
    )
    big = np.iinfo(np.int64).max
    first = np.full(int(g.max()) + 1, big)  # a channel's outstanding set is made by its first delivery
    np.minimum.at(first, g[at], at)
    slot = _slots(g, tag, at, replaced)
    live = ~replaced
    at, queue, by, slot = at[live], queue[live], by[live], slot[live]
    done = by >= 0
    resp = np.full(len(at), -1, dtype=np.int64)
    resp[done] = ev[by[done]]
    k = np.full(len(at), len(_OUTCOMES), dtype=np.int64)
    k[done] = kind[resp[done]]
    outcome = np.array([*_OUTCOMES.values(), "unsettled"], dtype=object)[k]
    mult = np.full(len(at), None, dtype=object)
    flag = done.copy()
    flag[done] = k[done] <= 1  # ack, nack: multiple or not; reject, recover: None
    mult[flag] = multiple[by[flag]].tolist()
    requeue = np.full(len(at), None, dtype=object)
    settled_by_tag = done & (k <= 2)
    requeue[settled_by_tag] = object_values(m["requeue"], resp[settled_by_tag])
    # the walk's order: by the settling packet, the unsettled when their channel was reopened or at
    # the end by the channel's first delivery; the deliveries of one packet by their tag's first
    # delivery (a redelivered tag keeps its place)
    when = np.where(done, resp, scope_end(chan, g, np.arange(len(m), dtype=np.int64), big)[g[at]])
    order = np.lexsort((slot, np.where(when == big, first[g[at]], 0), when))
    return {
        "at": at[order],
        "resp": resp[order],
        "tag": tag[at][order],
        "outcome": outcome[order],
        "multiple": mult[order],
        "requeue": requeue[order],
        "ctag": object_values(m["consumer_tag"], at[order]),
        "queue": queue[order],
    }


_OUTCOMES = {
    "basic.ack": "ack",
    "basic.nack": "nack",
    "basic.reject": "reject",
    "basic.recover": "recovered",
    "basic.recover-async": "recovered",
}


def _slots(g: np.ndarray, tag: np.ndarray, at: np.ndarray, replaced: np.ndarray) -> np.ndarray:
    """Each item's place in its channel's outstanding set: its position, or that of the item it
    replaced (a tag delivered again while outstanding keeps the first one's place)."""
    order = np.lexsort((at, tag[at], g[at]))
    gs, ts = g[at][order], tag[at][order]
    new = np.r_[True, (gs[1:] != gs[:-1]) | (ts[1:] != ts[:-1]) | ~replaced[order][:-1]]
    start = np.maximum.accumulate(np.where(new, np.arange(len(order)), 0))
    out = np.empty(len(at), dtype=np.int64)
    out[order] = at[order][start]
    return out


def _ack_walk(m: pd.DataFrame, dlv: Deliveries, rows: np.ndarray) -> dict:
    """:func:`consumer_acks` of the rows of ``m`` in ``rows`` by a walk (0-10: a message.accept /
    release / reject settles the transfers whose command ids its id sets cover)."""
    info = dict(zip(dlv.at.tolist(), zip(dlv.queue, dlv.no_ack, dlv.consumer_tag)))
    chans: dict = {}  # (cap, st, ch) -> OrderedDict(tag -> (position, consumer tag, queue))
    got: dict = {k: [] for k in ("at", "resp", "tag", "outcome", "multiple", "requeue", "ctag", "queue")}

    def settle(tag, dl, resp, outcome, multiple, requeue):
        for k, v in zip(got, (dl[0], resp, tag, outcome, multiple, requeue, dl[1], dl[2])):
            got[k].append(v)

    walk = [
        "capture",
        "tcp_stream",
        "channel",
        "direction",
        "method",
        "delivery_tag",
        "multiple",
        "requeue",
        "consumer_tag",
        "command_id",
        "id_ranges",
    ]
    at = np.flatnonzero(rows)
    for pos, (cap, st, ch, d, name, tag, multiple, requeue, ctag, cmd, id_ranges) in zip(
        at.tolist(), records(m, walk, rows=at)
    ):
        key = (cap, st, ch)
        if name in SCOPE_OPEN:
            for k, dl in chans.pop(key, {}).items():
                settle(k, dl, -1, "unsettled", None, None)
            continue
        if d == "s2c" and name in ("basic.deliver", "basic.get-ok", "message.transfer"):
            q, no_ack, dest = info.get(pos) or (None, None, None)
            if no_ack:
                continue
            if name == "message.transfer":  # 0-10: settled by command id
                tag = cmd
                ctag = ctag or dest
            if tag is None:
                continue
            chans.setdefault(key, OrderedDict())[tag] = (pos, ctag, q)
            continue
        if d != "c2s":
            continue
        out = chans.get(key)
        if not out:
            continue
        outcome = _SETTLE.get(name)
        if outcome is not None and name.startswith("basic."):
            if tag is None:
                continue
            if multiple and name != "basic.reject":
                for k in [k for k in out if tag == 0 or k <= tag]:
                    settle(k, out.pop(k), pos, outcome, True, requeue)
            elif tag in out:
                settle(tag, out.pop(tag), pos, outcome, False if name != "basic.reject" else None, requeue)
        elif outcome is not None:  # 0-10 accept / release / reject
            for k in [k for k in out if covered(k, id_ranges)]:
                settle(k, out.pop(k), pos, outcome, None, None)
        elif name in ("basic.recover", "basic.recover-async"):
            for k in list(out):
                settle(k, out.pop(k), pos, "recovered", None, None)
    for out in chans.values():
        for k, dl in out.items():
            settle(k, dl, -1, "unsettled", None, None)
    ints = ("at", "resp", "tag")
    return {k: np.array(v, dtype=np.int64 if k in ints else object) for k, v in got.items()}
