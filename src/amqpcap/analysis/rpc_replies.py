"""Application RPC: a request (reply_to set) paired with the reply carrying its correlation id.

docs/analysis.md has the exact definitions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from amqpcap.analysis import amqp10_pairing
from amqpcap.analysis._common import (
    STR,
    TS_DTYPE,
    build,
    isin,
    latency_ms,
    ns,
    ordered,
    taken,
)
from amqpcap.analysis.pairing import (
    result_columns,
)
from amqpcap.analysis.tables import as_tables

# application RPC

RPC_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "channel": "Int32",
    "request_method": STR,
    "request_direction": STR,
    "request_frame": "Int64",
    "request_ts": TS_DTYPE,
    "response_capture": STR,
    "response_tcp_stream": "Int32",
    "response_channel": "Int32",
    "response_method": STR,
    "response_direction": STR,
    "response_frame": "Int64",
    "response_ts": TS_DTYPE,
    "latency_ms": "float64",
    "status": STR,
    "correlation_id": STR,
    "reply_to": STR,
    "delivered_frame": "Int64",
    "delivered_ts": TS_DTYPE,
    "client_latency_ms": "float64",
}

_DIRECT_REPLY = "amq.rabbitmq.reply-to"


def reply_key(reply_to: str | None, version: str | None):
    """The address a request names for its reply (None: none): a 1.0 address's key, a 0-10
    ``exchange/key``'s key, RabbitMQ direct reply-to as its prefix."""
    if not reply_to:
        return None
    if version == "1.0":
        reply_to = amqp10_pairing.reply_key(reply_to)
    elif version == "0-10" and "/" in reply_to:
        reply_to = reply_to.split("/", 1)[1]
    if reply_to.startswith(_DIRECT_REPLY):
        return _DIRECT_REPLY
    return reply_to


def _text(s: pd.Series) -> np.ndarray:
    """Which values are a non-empty string (the truth of a str)."""
    return (s.notna() & (s != "")).to_numpy(dtype=bool)


def _keys(reply_to: pd.Series, version: pd.Series | None) -> np.ndarray:
    """:func:`reply_key` of every row (object array, shared strings), computed once per distinct
    (reply_to, version)."""
    rc, ru = pd.factorize(reply_to, use_na_sentinel=True)
    vc, vu = pd.factorize(version, use_na_sentinel=True) if version is not None else (rc * 0 - 1, [])
    ru, vu = list(ru) + [None], list(vu) + [None]  # code -1 (missing): None
    combo = (rc + 1) * len(vu) + (vc + 1)
    uniq, inv = np.unique(combo, return_inverse=True)
    keys = [reply_key(ru[u // len(vu) - 1], vu[u % len(vu) - 1]) for u in uniq.tolist()]
    return np.array(keys + [None], dtype=object)[inv.reshape(-1)]


def rpc(t, columns=None) -> pd.DataFrame:
    """Application RPC: a request (a message with reply_to and correlation_id) -> the reply
    (the next message after it whose routing key is that reply_to and whose
    correlation_id is the same).

    Requests are publishes (c2s); a delivery (s2c) of a request counts only when
    its publish was not captured.  The reply is the responder's publish (c2s)
    when captured (``status`` ``ok``), else its delivery to the requester
    (``ok-delivery``); ``missing`` when neither was seen (NaN latency).
    ``delivered_*`` / ``client_latency_ms``: the reply's delivery (s2c), i.e.
    the round trip the requesting client sees.  RabbitMQ direct reply-to
    (``amq.rabbitmq.reply-to``, rewritten to ``amq.rabbitmq.reply-to.<id>``) is
    matched by prefix; 0-10 ``exchange/key`` reply_to is matched on its key.  ``columns``: only
    these columns of the result.
    """
    want = result_columns(RPC_COLS, columns)
    return _rpc(as_tables(t), want)[want]


def _rpc(t, want: list) -> pd.DataFrame:
    """:func:`rpc`, building only the result columns ``want``."""
    msgs = amqp10_pairing.with_request_ids(t.messages)
    if len(msgs) == 0:
        return build([], RPC_COLS)
    cols = [
        "capture",
        "tcp_stream",
        "channel",
        "method",
        "direction",
        "frame_number",
        "ts",
        "correlation_id",
        "reply_to",
        "routing_key",
        "version",
    ]
    # requests carry reply_to and a correlation id; replies carry one of the requests' ids
    ids = msgs.loc[msgs["reply_to"].notna(), "correlation_id"].dropna().unique()
    R = ordered(msgs, rows=isin(msgs["correlation_id"], ids), columns=cols)
    if len(R) == 0:
        return build([], RPC_COLS)
    # by time, then packet (stable: wire order among equals)
    R = R.iloc[np.lexsort((R["frame_number"].fillna(0).to_numpy(dtype=np.int64), ns(R["ts"])))]
    R = R.reset_index(drop=True)
    # positions in R throughout; keys as integer codes: (reply key, correlation id) of a request,
    # (key of its routing key, correlation id) of a reply candidate; only requests that have a
    # candidate are walked in Python, the others are missing
    c2s = (R["direction"] == "c2s").to_numpy(dtype=bool)
    s2c = (R["direction"] == "s2c").to_numpy(dtype=bool)
    corr = pd.factorize(R["correlation_id"], use_na_sentinel=True)[0]
    has_corr, has_rt, has_rk = (_text(R[c]) for c in ("correlation_id", "reply_to", "routing_key"))
    req_key = _keys(R["reply_to"], R["version"])
    rep_key = _keys(R["routing_key"], None)
    names = pd.factorize(np.concatenate([req_key, rep_key]), use_na_sentinel=True)[0] + 1
    width = int(corr.max()) + 2
    req_k = names[: len(R)] * width + corr + 1  # one int per (key, correlation id)
    rep_k = names[len(R) :] * width + corr + 1
    asks, answers = has_corr & has_rt, has_corr & has_rk
    req_at, resp_at, dlv_at, status = pair_replies(c2s, s2c, asks, answers, req_k, rep_k)
    # the walk's keys (millions of entries on a big capture) freed before the result is built
    del corr, has_corr, has_rt, has_rk, req_key, rep_key, names, req_k, rep_k
    src = {  # result column -> (R column, positions)
        "capture": ("capture", req_at),
        "tcp_stream": ("tcp_stream", req_at),
        "channel": ("channel", req_at),
        "request_method": ("method", req_at),
        "request_direction": ("direction", req_at),
        "request_frame": ("frame_number", req_at),
        "request_ts": ("ts", req_at),
        "response_capture": ("capture", resp_at),
        "response_tcp_stream": ("tcp_stream", resp_at),
        "response_channel": ("channel", resp_at),
        "response_method": ("method", resp_at),
        "response_direction": ("direction", resp_at),
        "response_frame": ("frame_number", resp_at),
        "response_ts": ("ts", resp_at),
        "correlation_id": ("correlation_id", req_at),
        "reply_to": ("reply_to", req_at),
        "delivered_frame": ("frame_number", dlv_at),
        "delivered_ts": ("ts", dlv_at),
    }
    ends = {"latency_ms": ("request_ts", "response_ts"), "client_latency_ms": ("request_ts", "delivered_ts")}
    need = set(want).union(*(ends[k] for k in ends if k in want))
    data = {}
    for name, dtype in RPC_COLS.items():
        if name in src and name in need:
            col, at = src[name]
            data[name] = taken(R[col], at, dtype)
        elif name == "status" and name in need:
            data[name] = pd.Series(status, dtype=STR)
    df = pd.DataFrame(data, index=pd.RangeIndex(len(req_at)))
    for name, (a, b) in ends.items():
        if name in want:
            df[name] = latency_ms(ns(df[a]), ns(df[b]))
    return df[want]


def pair_replies(c2s, s2c, asks, answers, req_k, rep_k) -> tuple:
    """The walk of :func:`rpc` over rows in its order (by time, then packet): ``asks`` / ``answers``
    mark the rows with a correlation id and a reply-to / a routing key, ``req_k`` / ``rep_k`` one
    int per (reply key, correlation id) of each.  Returns the requests' positions, those of their
    responses and of the reply's delivery (-1: none) and their statuses (object array)."""
    c2s_req = c2s & asks
    is_req = c2s_req | (s2c & asks & ~np.isin(req_k, req_k[c2s_req]))
    is_rep = ~is_req & answers
    req_at = np.flatnonzero(is_req)
    resp_at = np.full(len(req_at), -1, dtype=np.int64)
    dlv_at = np.full(len(req_at), -1, dtype=np.int64)
    status = np.full(len(req_at), "missing", dtype=object)
    replies: dict = {}  # (key, direction) -> [position]
    for i in np.flatnonzero(is_rep & np.isin(rep_k, req_k[is_req])).tolist():
        replies.setdefault((int(rep_k[i]), bool(c2s[i]), bool(s2c[i])), []).append(i)
    used: set = set()
    for n in np.flatnonzero(np.isin(req_k[req_at], rep_k[is_rep])).tolist():
        i, k = int(req_at[n]), int(req_k[req_at[n]])
        pub = next((x for x in replies.get((k, True, False), ()) if x > i and x not in used), None)
        dlv = next((x for x in replies.get((k, False, True), ()) if x > i and x not in used), None)
        used.update(x for x in (pub, dlv) if x is not None)
        resp = pub if pub is not None else dlv
        resp_at[n] = -1 if resp is None else resp
        dlv_at[n] = -1 if dlv is None else dlv
        status[n] = "ok" if pub is not None else ("ok-delivery" if dlv is not None else "missing")
    return req_at, resp_at, dlv_at, status
