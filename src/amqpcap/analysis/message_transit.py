"""Broker transit: a publish paired with the deliveries of the same message.

docs/analysis.md has the exact definitions.
"""

from __future__ import annotations

import bisect

import numpy as np
import pandas as pd

from amqpcap.analysis._common import (
    STR,
    TS_DTYPE,
    build,
    latency_ms,
    ns,
    records,
    sort_key,
    taken,
)
from amqpcap.analysis.pairing import (
    result_columns,
)
from amqpcap.analysis.tables import as_tables, load_section

# broker transit

TRANSIT_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "channel": "Int32",
    "request_method": STR,
    "request_frame": "Int64",
    "request_ts": TS_DTYPE,
    "response_capture": STR,
    "response_tcp_stream": "Int32",
    "response_channel": "Int32",
    "response_method": STR,
    "response_frame": "Int64",
    "response_ts": TS_DTYPE,
    "latency_ms": "float64",
    "match": STR,
    "message_id": STR,
    "exchange": STR,
    "routing_key": STR,
    "body_hash": STR,
    "consumer_tag": STR,
    "redelivered": "boolean",
    "delivery_index": "Int32",
    "first": "boolean",
    "same_connection": "boolean",
}

PUBLISH = ("basic.publish", "message.transfer", "transfer")  # ("transfer": AMQP 1.0)
DELIVER = ("basic.deliver", "basic.get-ok", "message.transfer", "transfer")


def transit(t, columns=None) -> pd.DataFrame:
    """Broker transit: a publish (c2s ``messages`` row) -> each delivery (s2c deliver /
    get-ok / 0-10 transfer) of the same message, on any connection.

    Same message: equal ``message_id`` when the publish has one (the delivery is
    matched to the latest such publish at or before it); otherwise equal
    exchange + routing key + body hash, matched in FIFO order (the k-th
    first-time delivery of that content to a consumer is the k-th publish of
    it; redeliveries go to the latest publish at or before them).  Both ends
    are timed at the packet that completed the content.  ``delivery_index``
    orders a publish's deliveries by time; ``first`` marks index 0, the
    transit time.  ``same_connection`` flags publish and delivery on one TCP
    conversation.  ``columns``: only these columns of the result.
    """
    want = result_columns(TRANSIT_COLS, columns)
    return _transit(as_tables(t), want)[want]


def _transit(t, want: list) -> pd.DataFrame:
    """:func:`transit`, building only the result columns ``want``."""
    msgs = t.messages
    if len(msgs) == 0:
        return build([], TRANSIT_COLS)
    # publishes and deliveries are positions in msgs (no frame of them is made); _pid / _did below
    # number them in table order
    direction, method = msgs["direction"], msgs["method"]
    pub_at = np.flatnonzero(((direction == "c2s") & method.isin(PUBLISH)).to_numpy(dtype=bool))
    del_at = np.flatnonzero(((direction == "s2c") & method.isin(DELIVER)).to_numpy(dtype=bool))
    if len(pub_at) == 0 or len(del_at) == 0:
        return build([], TRANSIT_COLS)
    ts = ns(msgs["ts"])
    p_ts, d_ts = ts[pub_at], ts[del_at]
    del ts
    mid = msgs["message_id"]
    codes = pd.factorize(mid, use_na_sentinel=True)[0]  # equal ids, equal codes (missing: -1)
    p_code, d_code = codes[pub_at], codes[del_at]
    p_has = (mid.notna() & (mid != "")).to_numpy(dtype=bool)[pub_at]  # an empty id is no id
    if not p_has.all() or "body_hash" in want:  # (body hashes: only for publishes without an id)
        msgs = _with_body_hash(t, msgs)
    has_hash = (  # (not read: not needed)
        msgs["body_hash"].notna().to_numpy(dtype=bool)
        if "body_hash" in msgs.columns
        else np.zeros(len(msgs), bool)
    )

    by_id = by_message_id(p_ts, d_ts, p_code, d_code, p_has, len(codes))
    del codes
    content = _by_content(msgs, pub_at, del_at, p_ts, d_ts, p_has, has_hash, by_id)

    pid = np.r_[by_id[:, 0], [p for p, _ in content]].astype(np.int64)
    did = np.r_[by_id[:, 1], [d for _, d in content]].astype(np.int64)
    match = np.array(["message_id"] * len(by_id) + ["content"] * len(content), dtype=object)
    n = len(pid)
    if n == 0:
        return build([], TRANSIT_COLS)
    # a publish's deliveries by time (then packet): delivery_index; the orders found on keys alone
    rf = msgs["frame_number"].astype("float64").fillna(0).to_numpy()[del_at[did]]
    o = np.lexsort((np.arange(n), rf, d_ts[did], pid))
    pid, did, match = pid[o], did[o], match[o]
    starts = np.r_[0, np.flatnonzero(np.diff(pid)) + 1]
    index = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    at = pub_at[pid]
    o = np.lexsort(
        (
            np.arange(n),
            index,
            sort_key(msgs["frame_number"], at),
            sort_key(msgs["tcp_stream"], at),
            sort_key(msgs["capture"], at),
        )
    )
    pid, did, match, index = pid[o], did[o], match[o], index[o]
    del o, starts, rf  # (millions of entries) freed before the result is built
    p_at, d_at = pub_at[pid], del_at[did]
    src = {  # result column -> (column of msgs, of the publish or of the delivery)
        "capture": ("capture", p_at),
        "tcp_stream": ("tcp_stream", p_at),
        "channel": ("channel", p_at),
        "request_method": ("method", p_at),
        "request_frame": ("frame_number", p_at),
        "request_ts": ("ts", p_at),
        "response_capture": ("capture", d_at),
        "response_tcp_stream": ("tcp_stream", d_at),
        "response_channel": ("channel", d_at),
        "response_method": ("method", d_at),
        "response_frame": ("frame_number", d_at),
        "response_ts": ("ts", d_at),
        "message_id": ("message_id", p_at),
        "exchange": ("exchange", p_at),
        "routing_key": ("routing_key", p_at),
        "body_hash": ("body_hash", p_at),
        "consumer_tag": ("consumer_tag", d_at),
        "redelivered": ("redelivered", d_at),
    }
    same = ["capture", "response_capture", "tcp_stream", "response_tcp_stream"]
    need = set(want) | (set(same) if "same_connection" in want else set())
    data = {name: taken(msgs[c], at, TRANSIT_COLS[name]) for name, (c, at) in src.items() if name in need}
    out = pd.DataFrame(data, index=pd.RangeIndex(n))
    computed = {
        "latency_ms": lambda: latency_ms(p_ts[pid], d_ts[did]),
        "match": lambda: pd.Series(match, dtype=STR),
        "delivery_index": lambda: pd.Series(index, dtype="Int32"),
        "first": lambda: pd.Series(index == 0, dtype="boolean"),
        "same_connection": lambda: (
            ((out[same[0]] == out[same[1]]) & (out[same[2]] == out[same[3]])).fillna(False).astype("boolean")
        ),
    }
    for name in want:
        if name in computed:
            out[name] = computed[name]()
    return out[want]


def by_message_id(p_ts, d_ts, p_code, d_code, p_has, n_codes: int) -> np.ndarray:
    """Pairs (publish, delivery) by message id: the latest publish with that id at or before the
    delivery (a join, not a walk); ``p_code`` / ``d_code``: the ids as codes (-1: none)."""
    pidx = np.flatnonzero(p_has)
    pidx = pidx[np.lexsort((pidx, p_ts[pidx]))]
    published = np.zeros(n_codes + 1, dtype=bool)  # by code; index -1 (missing) stays False
    published[p_code[pidx]] = True
    didx = np.flatnonzero(published[d_code])
    by_id = np.zeros((0, 2), dtype=np.int64)
    if len(didx):
        j = pd.merge_asof(
            pd.DataFrame({"_ts": d_ts[didx], "_did": didx, "_id": d_code[didx]}).sort_values(
                "_ts", kind="stable"
            ),
            pd.DataFrame({"_ts": p_ts[pidx], "_pid": pidx, "_id": p_code[pidx]}),
            on="_ts",
            by="_id",
            direction="backward",
        )
        j = j[j["_pid"].notna()]
        by_id = np.c_[j["_pid"].to_numpy(dtype=np.int64), j["_did"].to_numpy(dtype=np.int64)]
        del j

    return by_id


def _by_content(msgs, pub_at, del_at, p_ts, d_ts, p_has, has_hash, by_id) -> list:
    """Pairs (publish, delivery) by content: exchange + routing key + body hash, FIFO per consumer,
    for the publishes without an id and the deliveries ``by_id`` did not pair."""
    used = np.zeros(len(del_at), dtype=bool)
    used[by_id[:, 1]] = True
    psel = np.flatnonzero(~p_has & has_hash[pub_at])
    P = (
        list(
            records(
                msgs.iloc[pub_at[psel]][["exchange", "routing_key", "body_hash"]].assign(
                    _ts=p_ts[psel], _pid=psel
                ),
                ["_ts", "_pid", "exchange", "routing_key", "body_hash"],
            )
        )
        if len(psel)
        else []
    )
    dsel = np.flatnonzero(~used & has_hash[del_at]) if P else np.zeros(0, dtype=np.int64)
    dcols = ["exchange", "routing_key", "body_hash", "capture", "tcp_stream", "channel"]
    D = (
        list(
            records(
                msgs.iloc[del_at[dsel]][dcols + ["consumer_tag", "redelivered"]].assign(
                    _ts=d_ts[dsel], _did=dsel
                ),
                ["_ts", "_did"] + dcols + ["consumer_tag", "redelivered"],
            )
        )
        if len(dsel)
        else []
    )

    def ckey(x):
        return (x[2] or "", x[3] or "", x[4])

    by_c: dict = {}
    for p in P:
        by_c.setdefault(ckey(p), []).append(p)
    c_ts = {}
    for k, lst in by_c.items():
        lst.sort(key=lambda p: (p[0], p[1]))
        c_ts[k] = [p[0] for p in lst]
    seen_rank: dict = {}
    content: list = []
    for dl in sorted(D, key=lambda x: (x[0], x[1])):
        lst = by_c.get(ckey(dl))
        if not lst:
            continue
        n_before = bisect.bisect_right(c_ts[ckey(dl)], dl[0])
        if not n_before:
            continue
        latest = lst[n_before - 1]
        if not dl[9]:  # first-time delivery: FIFO rank per consumer
            ck = (dl[5], dl[6], dl[7], dl[8], ckey(dl))
            k = seen_rank.get(ck, 0)
            seen_rank[ck] = k + 1
            p = lst[k] if k < n_before else latest
        else:
            p = latest
        content.append((p[1], dl[1]))

    return content


def _with_body_hash(t, msgs: pd.DataFrame) -> pd.DataFrame:
    """``msgs`` with its ``body_hash`` column: read from the dissect output when the section was
    loaded without it (its strings are the biggest of a load; most publishes carry an id)."""
    if "body_hash" in msgs.columns or t.source is None:
        return msgs

    hashes = load_section(t.source, {"messages": ["body_hash"]}).messages["body_hash"]
    return msgs.assign(body_hash=hashes.to_numpy()) if len(hashes) == len(msgs) else msgs
