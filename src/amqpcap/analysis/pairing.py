"""Shared parts of the latency pairings: scope methods, the result columns every pairing has, and
building a result frame from the positions a walk kept.

docs/analysis.md has the exact definitions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from amqpcap.analysis._common import (
    STR,
    TS_DTYPE,
    build,
    build_columns,
    codes_in,
    latency_ms,
    ns,
    numbering,
    object_frame,
    ordered,
    sort_key,
    taken,
)

# Methods that open a fresh channel / session scope: delivery tags, publish
# sequence numbers and 0-10 command ids restart after them.
SCOPE_OPEN = ("channel.open", "session.attach")
CLOSE = ("channel.close", "connection.close")
CLOSE_OK = ("channel.close-ok", "connection.close-ok")
BY_ID = ("session.completed", "execution.result", "execution.exception")


# the columns of a method row a pairing walks: where it is, what it is
METHOD_COLUMNS = ["capture", "tcp_stream", "channel", "direction", "method", "frame_number", "ts", "version"]
# confirms and consumer acks: those with the content's completion, the tag and multiple, in this order
SETTLE_COLUMNS = (
    METHOD_COLUMNS[:5] + ["_done_frame", "_done_ts"] + METHOD_COLUMNS[5:] + ["delivery_tag", "multiple"]
)


def with_content_completion(t, names, columns) -> pd.DataFrame:
    """The methods named ``names`` in wire order (``columns`` of them), plus ``_done_frame`` /
    ``_done_ts`` (ns): the packet that completed the content (from ``messages``, joined on stream
    and offset), else the method's own."""
    key = ["capture", "tcp_stream", "direction", "stream_offset"]
    cols = list(dict.fromkeys([c for c in columns if not c.startswith("_")] + key))
    m = ordered(t.methods, names, cols).reset_index(drop=True)
    done_frame = m["frame_number"].astype("Int64")
    done_ts = ns(m["ts"]) if len(m) else np.zeros(0, dtype=np.int64)
    msgs = t.messages
    if len(m) and len(msgs):
        named = msgs["method"].isin(names).to_numpy(dtype=bool)  # a content's row names its method
        at = _content_rows(m, msgs, np.flatnonzero(named))
        has = at >= 0
        done_frame = taken(msgs["frame_number"], at, "Int64").where(has, done_frame)
        if has.any():
            done_ts = np.where(has, ns(msgs["ts"])[np.maximum(at, 0)], done_ts)
    m["_done_frame"] = done_frame.to_numpy() if len(m) else pd.array([], dtype="Int64")
    m["_done_ts"] = done_ts
    return m


def _content_rows(m: pd.DataFrame, msgs: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For each row of ``m``, the position in ``msgs`` of the first of its ``rows`` on the same
    conversation, direction and ``stream_offset`` (-1: none, or a key is missing).  The four keys
    are one int per row (a merge on the four columns takes hundreds of MB on a big capture)."""
    parts = [m, msgs]
    caps, dirs = numbering(parts, "capture"), numbering(parts, "direction")
    streams = 1 + max((int(p["tcp_stream"].max()) for p in parts if p["tcp_stream"].notna().any()), default=0)
    offsets = 1 + max(
        (int(p["stream_offset"].max()) for p in parts if p["stream_offset"].notna().any()), default=0
    )
    wide = len(caps) * streams * max(len(dirs), 1) * offsets >= 2**62  # (then two int keys, not one)

    def keys(df: pd.DataFrame):
        cap, d = codes_in(df["capture"], caps).astype(np.int64), codes_in(df["direction"], dirs)
        st = df["tcp_stream"].to_numpy(dtype=np.int64, na_value=-1)
        off = df["stream_offset"].to_numpy(dtype=np.int64, na_value=-1)
        missing = (cap < 0) | (d < 0) | (st < 0) | (off < 0)
        group = (cap * streams + st) * max(len(dirs), 1) + d
        k = pd.MultiIndex.from_arrays([group, off]) if wide else pd.Index(group * offsets + off)
        return k, missing

    columns = ["capture", "tcp_stream", "direction", "stream_offset"]
    right, missing = keys(msgs[columns].iloc[rows])
    first = np.flatnonzero(~missing)
    first = first[~right[first].duplicated(keep="first")]
    left, gone = keys(m[columns])
    at = right[first].get_indexer(left)
    return np.where((at >= 0) & ~gone, rows[first[np.maximum(at, 0)]] if len(first) else -1, -1)


BASE_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "channel": "Int32",
    "version": STR,
    "request_method": STR,
    "request_direction": STR,
    "request_frame": "Int64",
    "request_ts": TS_DTYPE,
    "response_method": STR,
    "response_frame": "Int64",
    "response_ts": TS_DTYPE,
    "latency_ms": "float64",
}


def needed_sources(src: dict, wanted, sort_by: list) -> dict:
    """The entries of ``src`` (see :func:`taken_frame`) that building the ``wanted`` columns
    (None: all) reads: the others (lists of millions of values) can be freed first."""
    if wanted is None:
        return src
    keep = set(wanted) | set(sort_by) | {"request_ts", "response_ts"}
    return {k: v for k, v in src.items() if k in keep}


def sources(m: pd.DataFrame, src: dict) -> pd.DataFrame:
    """Just the columns of ``m`` that ``src`` (see :func:`taken_frame`) takes: a walk's other
    columns are freed before its result is built."""
    return m[list(dict.fromkeys(v[0] for v in src.values() if isinstance(v, tuple)))]


def result_columns(columns: dict, wanted) -> list:
    """The result columns to build: all of ``columns``, or those named in ``wanted``, in order."""
    return list(columns) if wanted is None else [c for c in columns if c in set(wanted)]


def taken_frame(m: pd.DataFrame, src: dict, columns: dict, sort_by: list, wanted=None) -> pd.DataFrame:
    """The result frame from a walk that kept positions: ``src`` maps a result column to
    (column of ``m``, positions; -1 missing) or to its values (``request_ts`` is always taken);
    then ``latency_ms``.  Rows in the
    order of ``df.sort_values(sort_by, kind="stable")``, found on the keys alone, so the frame
    is built once, already in order (not built, sorted and copied).  ``wanted``: only these
    columns (see :func:`result_columns`)."""
    keys = []
    for name in reversed(sort_by):
        v = src[name]
        keys.append(sort_key(m[v[0]], v[1]) if isinstance(v, tuple) else sort_key(pd.Series(v)))
    n = len(src["request_ts"][1])
    order = np.lexsort([np.arange(n)] + keys) if keys else np.arange(n)
    del keys
    want = result_columns(columns, wanted)
    data = {}
    for name in want:
        v, dtype = src.get(name), columns[name]
        if isinstance(v, tuple):
            data[name] = taken(m[v[0]], np.asarray(v[1], dtype=np.int64)[order], dtype)
        elif isinstance(v, np.ndarray) and v.dtype != object:  # numbers, none missing
            data[name] = pd.Series(v[order]).astype(dtype)
        elif v is not None:
            data[name] = pd.Series(np.asarray(v, dtype=object)[order], dtype=dtype)
    df = pd.DataFrame(data, index=pd.RangeIndex(n))
    if "latency_ms" in want:
        ends = [data.get(k) for k in ("request_ts", "response_ts")]
        for i, k in enumerate(("request_ts", "response_ts")):
            if ends[i] is None:  # (a column not wanted: taken for the latency alone)
                ends[i] = taken(m[src[k][0]], np.asarray(src[k][1], dtype=np.int64)[order], columns[k])
        df["latency_ms"] = latency_ms(ns(ends[0]), ns(ends[1]))
    return df[want]


def finish(rows, columns, fields=None) -> pd.DataFrame:
    """The result frame: ``rows`` are dicts, or tuples in the order of ``fields`` (a tuple per pair
    is a fraction of a dict's memory on big captures)."""
    if fields is not None and rows:
        df = build_columns(object_frame(rows, list(fields)), columns)
    else:
        df = build(rows, columns)
    if len(df):
        df["latency_ms"] = latency_ms(ns(df["request_ts"]), ns(df["response_ts"]))
    return df


PAIR_FIELDS = (
    "capture",
    "tcp_stream",
    "channel",
    "version",
    "request_method",
    "request_direction",
    "request_frame",
    "request_ts",
    "response_method",
    "response_frame",
    "response_ts",
    "delivery_tag",
    "outcome",
    "multiple",
)


def settled_pair(p, r, tags, outcomes, multiples) -> dict:
    """The columns a confirm and a consumer ack share: where each comes from (a column at the
    request's positions ``p`` or the response's ``r``, or the pairing's own array)."""
    return {
        "capture": ("capture", p),
        "tcp_stream": ("tcp_stream", p),
        "channel": ("channel", p),
        "version": ("version", p),
        "request_method": ("method", p),
        "request_direction": ("direction", p),
        "request_frame": ("_done_frame", p),
        "request_ts": ("_done_ts", p),
        "response_method": ("method", r),
        "response_frame": ("frame_number", r),
        "response_ts": ("ts", r),
        "delivery_tag": tags,
        "outcome": outcomes,
        "multiple": multiples,
    }


def scope_end(chan: np.ndarray, g: np.ndarray, pos: np.ndarray, big: int) -> np.ndarray:
    """By scope number: the position of the row that opened the next scope of its channel (``big``:
    none, the scope lasted to the end)."""
    end = np.full(int(g.max()) + 1 if len(g) else 0, big)
    order = np.lexsort((pos, chan))  # a channel's scopes one after the other
    gs, cs = g[order], chan[order]
    starts = np.flatnonzero(gs[1:] != gs[:-1]) + 1
    starts = starts[cs[starts] == cs[starts - 1]]  # a scope that follows one of its channel
    end[gs[starts - 1]] = pos[order][starts]
    return end


def object_values(s: pd.Series, at: np.ndarray) -> np.ndarray:
    """The values of ``s`` at positions ``at`` as Python objects, None for missing."""
    v = s.iloc[at]
    return np.asarray(v.astype(object).where(v.notna(), None), dtype=object)


class NotStreamed(Exception):
    """Tables whose pairing a streamed pass does not cover (e.g. contents matched by their body):
    the caller computes the whole-table way."""
