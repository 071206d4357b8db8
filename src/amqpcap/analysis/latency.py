"""Latency pairings: one row per matched pair, ``latency_ms`` in milliseconds.

Every result frame has the keys to find both packets: ``capture``,
``tcp_stream``, ``channel``, ``request_frame`` / ``response_frame`` (packet
numbers, Wireshark ``frame.number``), ``request_ts`` / ``response_ts``,
``request_method`` / ``response_method``, and ``status`` / ``outcome``.
Unmatched requests are rows too, with NaN latency.  docs/analysis.md has the
exact definitions.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict

import numpy as np
import pandas as pd

from amqpcap.analysis import amqp10_pairing
from amqpcap.analysis._common import (
    STR,
    TS_DTYPE,
    build,
    build_columns,
    codes_in,
    covered,
    isin,
    latency_ms,
    ns,
    numbering,
    object_frame,
    ordered,
    records,
    sort_key,
    spec_by_name,
    taken,
)
from amqpcap.analysis.settle import ALL, codes, first_settlement, scopes
from amqpcap.analysis.tables import as_tables, load_section

__all__ = [
    "method_rtt",
    "confirms",
    "consumer_acks",
    "transit",
    "rpc",
    "connection_setup",
    "consumers",
    "all_latencies",
]

# Methods that open a fresh channel / session scope: delivery tags, publish
# sequence numbers and 0-10 command ids restart after them.
_SCOPE_OPEN = ("channel.open", "session.attach")
_CLOSE = ("channel.close", "connection.close")
_CLOSE_OK = ("channel.close-ok", "connection.close-ok")
_BY_ID = ("session.completed", "execution.result", "execution.exception")


def _with_content_completion(t, names, columns) -> pd.DataFrame:
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


_BASE_COLS = {
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


def _needed(src: dict, wanted, sort_by: list) -> dict:
    """The entries of ``src`` (see :func:`_taken_frame`) that building the ``wanted`` columns
    (None: all) reads: the others (lists of millions of values) can be freed first."""
    if wanted is None:
        return src
    keep = set(wanted) | set(sort_by) | {"request_ts", "response_ts"}
    return {k: v for k, v in src.items() if k in keep}


def _sources(m: pd.DataFrame, src: dict) -> pd.DataFrame:
    """Just the columns of ``m`` that ``src`` (see :func:`_taken_frame`) takes: a walk's other
    columns are freed before its result is built."""
    return m[list(dict.fromkeys(v[0] for v in src.values() if isinstance(v, tuple)))]


def _wanted(columns: dict, wanted) -> list:
    """The result columns to build: all of ``columns``, or those named in ``wanted``, in order."""
    return list(columns) if wanted is None else [c for c in columns if c in set(wanted)]


def _taken_frame(m: pd.DataFrame, src: dict, columns: dict, sort_by: list, wanted=None) -> pd.DataFrame:
    """The result frame from a walk that kept positions: ``src`` maps a result column to
    (column of ``m``, positions; -1 missing) or to its values (``request_ts`` is always taken);
    then ``latency_ms``.  Rows in the
    order of ``df.sort_values(sort_by, kind="stable")``, found on the keys alone, so the frame
    is built once, already in order (not built, sorted and copied).  ``wanted``: only these
    columns (see :func:`_wanted`)."""
    keys = []
    for name in reversed(sort_by):
        v = src[name]
        keys.append(sort_key(m[v[0]], v[1]) if isinstance(v, tuple) else sort_key(pd.Series(v)))
    n = len(src["request_ts"][1])
    order = np.lexsort([np.arange(n)] + keys) if keys else np.arange(n)
    del keys
    want = _wanted(columns, wanted)
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


def _finish(rows, columns, fields=None) -> pd.DataFrame:
    """The result frame: ``rows`` are dicts, or tuples in the order of ``fields`` (a tuple per pair
    is a fraction of a dict's memory on big captures)."""
    if fields is not None and rows:
        df = build_columns(object_frame(rows, list(fields)), columns)
    else:
        df = build(rows, columns)
    if len(df):
        df["latency_ms"] = latency_ms(ns(df["request_ts"]), ns(df["response_ts"]))
    return df


# --------------------------------------------------------------------------- method round trips

RTT_COLS = dict(_BASE_COLS, status=STR, command_id="Int64")


def method_rtt(t) -> pd.DataFrame:
    """Synchronous request -> response on the same conversation and channel.

    Responses come from the specification tables (``MethodSpec.responses``).
    Asynchronous methods (deliver, ack, publish, ...) may interleave and are
    ignored.  ``status``: ``ok`` (a listed response), ``error`` (the peer
    closed the channel / connection instead; the response is that close),
    ``missing`` (no response before the channel was closed or the capture
    ended; NaN latency).  Requests sent with ``no-wait`` expect no response
    and are left out.  0-10: execution.sync -> the first session.completed
    from the peer whose command set covers the sync's command id; any command
    -> execution.result (``ok``) / execution.exception (``error``) whose
    ``answers_command_id`` is its command id.
    """
    t = as_tables(t)
    m = t.methods
    cols = [
        "capture",
        "tcp_stream",
        "channel",
        "direction",
        "method",
        "frame_number",
        "ts",
        "version",
        "command_id",
        "answers_command_id",
        "id_ranges",
        "no_wait",
        "synchronous",
    ]
    if len(m):  # 0-8 / 0-9 / 0-9-1: only requests, their responses and closes matter (not publishes, ...)
        relevant = set(_CLOSE + _CLOSE_OK + _SCOPE_OPEN)
        for v in m["version"].dropna().unique():
            for name, spec in spec_by_name(v).items():
                if getattr(spec, "responses", ()):
                    relevant.add(name)
                    relevant.update(spec.responses)
        is_010 = (m["version"] == "0-10").fillna(False).to_numpy(dtype=bool)
        m = ordered(m, columns=cols, rows=is_010 | m["method"].isin(relevant).to_numpy(dtype=bool))
    rows: list[dict] = []
    if len(m) == 0:
        return _finish(rows, RTT_COLS)

    state: dict = {}  # (capture, stream) -> {channel: [pending request dicts]}
    commands: dict = {}  # (capture, stream, channel, direction) -> {command_id: request dict} (0-10)

    def emit(req, resp, status):
        req["done"] = True
        rows.append(
            dict(
                capture=req["capture"],
                tcp_stream=req["tcp_stream"],
                channel=req["channel"],
                version=req["version"],
                request_method=req["method"],
                request_direction=req["direction"],
                request_frame=req["frame"],
                request_ts=req["ts"],
                response_method=resp[4] if resp else None,
                response_frame=resp[5] if resp else None,
                response_ts=resp[6] if resp else None,
                status=status,
                command_id=req.get("command_id"),
            )
        )

    def flush(pend: list, status="missing"):
        for req in pend:
            if not req["done"]:
                emit(req, None, status)
        pend.clear()

    for r in records(m, cols):
        cap, st, ch, d, name, frame, ts, version, cmd, answers, id_ranges, no_wait, synchronous = r
        conn = state.setdefault((cap, st), {})
        pend = conn.setdefault(ch, [])
        specs = spec_by_name(version)
        matched = False

        # 1. a response listed by the spec for the oldest pending request of the peer
        # (0-10 results and completions are matched by command id below, never by name)
        for i, req in enumerate(pend if name not in _BY_ID else ()):
            if req["direction"] != d and name in req["responses"]:
                emit(req, r, "ok")
                del pend[i]
                matched = True
                break

        # 2. 0-10 specials
        if name == "session.completed":
            for req in list(pend):
                if (
                    req["sync"]
                    and req["direction"] != d
                    and req.get("command_id") is not None
                    and covered(req["command_id"], id_ranges)
                ):
                    emit(req, r, "ok")
                    pend.remove(req)
        elif name in ("execution.result", "execution.exception") and answers is not None:
            peer = "s2c" if d == "c2s" else "c2s"
            req = commands.get((cap, st, ch, peer), {}).pop(answers, None)
            if req is not None and not req["done"]:
                emit(req, r, "ok" if name == "execution.result" else "error")
                if req in pend:
                    pend.remove(req)
                matched = True

        # 3. the peer closed instead of answering
        if not matched and name in _CLOSE:
            targets = [pend] if name == "channel.close" else list(conn.values())
            for lst in targets:
                for req in list(lst):
                    if req["direction"] != d:
                        emit(req, r, "error")
                        lst.remove(req)

        # 4. a close-ok ends the channel (connection): whatever is left got no answer
        if name == "channel.close-ok":
            flush(pend)
        elif name == "connection.close-ok":
            for lst in conn.values():
                flush(lst)
        elif name in _SCOPE_OPEN:
            flush(pend)

        # 5. is this a request?
        spec = specs.get(name)
        responses = tuple(spec.responses) if spec is not None else ()
        result = getattr(spec, "result", None)
        # 0-10: execution.sync, and any command sent with the sync flag, is answered by session.completed
        is_sync = name == "execution.sync" or (
            version == "0-10" and cmd is not None and bool(synchronous) and not responses and result is None
        )
        is_request = bool(responses or is_sync or result is not None) and name not in _CLOSE_OK
        if is_request and no_wait:
            continue
        # a request waits for its response; any other 0-10 command may still get an
        # execution.result: it is remembered by command id (not reported if unanswered)
        if is_request or (cmd is not None and version == "0-10"):
            req = dict(
                capture=cap,
                tcp_stream=st,
                channel=ch,
                direction=d,
                method=name,
                frame=frame,
                ts=ts,
                version=version,
                responses=frozenset(responses if is_request else ()),
                sync=is_request and is_sync,
                command_id=cmd,
                done=False,
            )
            if is_request:
                pend.append(req)
            if cmd is not None:
                commands.setdefault((cap, st, ch, d), {})[cmd] = req

    for conn in state.values():
        for lst in conn.values():
            flush(lst)
    df = _finish(rows, RTT_COLS)
    return df.sort_values(["capture", "tcp_stream", "request_frame"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- publisher confirms

CONFIRM_COLS = dict(
    _BASE_COLS, delivery_tag="Int64", outcome=STR, multiple="boolean", exchange=STR, routing_key=STR
)
_PAIR_FIELDS = (
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
_CONFIRM_FIELDS = _PAIR_FIELDS + ("exchange", "routing_key")


# the methods confirms reads (of ``methods``, and of ``messages`` for content timing)
CONFIRM_METHODS = ("confirm.select", "basic.publish", "basic.ack", "basic.nack") + _SCOPE_OPEN


def confirms(t, columns=None) -> pd.DataFrame:
    """Publisher confirms: after confirm.select on a channel, the n-th basic.publish (c2s)
    -> the basic.ack / basic.nack (s2c) whose delivery-tag covers n.

    ``multiple`` covers every outstanding n <= tag; tag 0 with ``multiple`` covers
    every outstanding publish.  ``delivery_tag`` is n.  ``outcome``: ``ack``,
    ``nack`` or ``unconfirmed`` (never settled before the channel was reopened
    or the capture ended; NaN latency).  The publish is timed at the packet that
    completed its content (``request_frame``).  ``columns``: only these columns of the result
    (a caller that summarises it reads a few; a big capture's full frame is hundreds of MB).
    """
    t = as_tables(t)
    cols = [
        "capture",
        "tcp_stream",
        "channel",
        "direction",
        "method",
        "_done_frame",
        "_done_ts",
        "frame_number",
        "ts",
        "version",
        "delivery_tag",
        "multiple",
        "exchange",
        "routing_key",
    ]
    m = _with_content_completion(t, CONFIRM_METHODS, cols)
    if len(m) == 0:
        return _finish([], CONFIRM_COLS)[_wanted(CONFIRM_COLS, columns)]
    p, r, tags, outcomes, multiples = _confirm_pairs(m)
    if not len(p):
        return _finish([], CONFIRM_COLS)[_wanted(CONFIRM_COLS, columns)]
    src = {
        **_settled_pair(p, r, tags, outcomes, multiples),
        "exchange": ("exchange", p),
        "routing_key": ("routing_key", p),
    }
    sort_by = ["capture", "tcp_stream", "channel", "request_frame", "delivery_tag"]
    src = _needed(src, columns, sort_by)
    outcomes = multiples = tags = None  # (freed: src holds what is still read)
    m = _sources(m, src)
    return _taken_frame(m, src, CONFIRM_COLS, sort_by, columns)


def _settled_pair(p, r, tags, outcomes, multiples) -> dict:
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


def _confirm_pairs(m: pd.DataFrame):
    """The publishes of ``m`` (wire order) counted on a channel in confirm mode (after a c2s
    confirm.select; a reopened channel starts over) and their basic.ack / nack (s2c): positions
    in ``m`` of each publish and of its settlement (-1: unconfirmed), its sequence number, outcome
    and ``multiple``, in the order a walk of ``m`` settles them (see :mod:`.settle`)."""
    method, direction = m["method"], m["direction"]
    c2s = (direction == "c2s").fillna(False).to_numpy(dtype=bool)
    s2c = (direction == "s2c").fillna(False).to_numpy(dtype=bool)
    chan, g = scopes(m, method.isin(_SCOPE_OPEN).to_numpy(dtype=bool))
    pos = np.arange(len(m), dtype=np.int64)
    select = (method == "confirm.select").fillna(False).to_numpy(dtype=bool) & c2s
    big = np.iinfo(np.int64).max
    on_from = np.full(int(g.max()) + 1 if len(g) else 0, big)
    np.minimum.at(on_from, g[select], pos[select])  # a scope's first confirm.select
    publish = (method == "basic.publish").fillna(False).to_numpy(dtype=bool)
    pub = np.flatnonzero(publish & c2s & (pos > on_from[g]))
    n = _ranks(g[pub])
    tag = m["delivery_tag"].to_numpy(dtype=np.int64, na_value=-1)
    has_tag = m["delivery_tag"].notna().to_numpy(dtype=bool)
    is_ack = (method == "basic.ack").fillna(False).to_numpy(dtype=bool)
    ack = np.flatnonzero(method.isin(("basic.ack", "basic.nack")).to_numpy(dtype=bool) & s2c & has_tag)
    multiple = m["multiple"].fillna(False).to_numpy(dtype=bool)[ack]
    by = first_settlement(
        {"g": g[pub], "tag": n, "pos": pub},
        {
            "g": g[ack],
            "tag": np.where(multiple & (tag[ack] == 0), ALL, tag[ack]),
            "pos": ack,
            "multiple": multiple,
        },
    )[0]
    done = by >= 0
    resp = np.full(len(pub), -1, dtype=np.int64)
    resp[done] = ack[by[done]]
    outcome = np.full(len(pub), "unconfirmed", dtype=object)
    outcome[done] = np.where(is_ack[resp[done]], "ack", "nack")
    mult = np.full(len(pub), None, dtype=object)
    mult[done] = multiple[by[done]].tolist()
    # the walk's order: by the settling packet; the unconfirmed when their channel was reopened, or
    # at the end by their channel's confirm.select
    when = np.where(done, resp, _scope_end(chan, g, pos, big)[g[pub]])
    order = np.lexsort((pub, np.where(when == big, on_from[g[pub]], 0), when))
    return pub[order], resp[order], n[order], outcome[order], mult[order]


def _ranks(g: np.ndarray) -> np.ndarray:
    """1, 2, 3 ... within each run of equal numbers of ``g`` (in order)."""
    return pd.Series(np.ones(len(g), dtype=np.int64)).groupby(g).cumsum().to_numpy()


def _scope_end(chan: np.ndarray, g: np.ndarray, pos: np.ndarray, big: int) -> np.ndarray:
    """By scope number: the position of the row that opened the next scope of its channel (``big``:
    none, the scope lasted to the end)."""
    end = np.full(int(g.max()) + 1 if len(g) else 0, big)
    order = np.lexsort((pos, chan))  # a channel's scopes one after the other
    gs, cs = g[order], chan[order]
    starts = np.flatnonzero(gs[1:] != gs[:-1]) + 1
    starts = starts[cs[starts] == cs[starts - 1]]  # a scope that follows one of its channel
    end[gs[starts - 1]] = pos[order][starts]
    return end


# --------------------------------------------------------------------------- consumers

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
) + _SCOPE_OPEN


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
        elif name in _SCOPE_OPEN:
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
    values = [_objects(m[c], rows[first]) for c in cols]
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


# --------------------------------------------------------------------------- consumer acks

ACK_COLS = dict(
    _BASE_COLS,
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

_ACK_FIELDS = _PAIR_FIELDS + ("requeue", "redelivered", "consumer_tag", "queue", "exchange", "routing_key")
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
    cols = [
        "capture",
        "tcp_stream",
        "channel",
        "direction",
        "method",
        "_done_frame",
        "_done_ts",
        "frame_number",
        "ts",
        "version",
        "delivery_tag",
        "multiple",
        "requeue",
        "redelivered",
        "consumer_tag",
        "exchange",
        "routing_key",
        "command_id",
        "id_ranges",
    ]
    m = _with_content_completion(t, ACK_METHODS, cols + CONSUMER_STATE_COLS)
    if len(m) == 0:
        return _finish([], ACK_COLS)[_wanted(ACK_COLS, columns)]
    dlv, _ = consumer_state(m)
    chan, g = scopes(m, m["method"].isin(_SCOPE_OPEN).to_numpy(dtype=bool))
    # 0-10 channels settle by command id sets: walked; the others by tag: array operations
    odd = (m["version"] == "0-10").fillna(False) | m["method"].isin(_BY_COMMAND)
    walked = np.isin(chan, chan[odd.to_numpy(dtype=bool)])
    got = _ack_pairs(m, dlv, ~walked, chan, g)
    if walked.any():
        more = _ack_walk(m, dlv, walked)
        got = {k: np.concatenate([got[k], more[k]]) for k in got}
    if not len(got["at"]):
        return _finish([], ACK_COLS)[_wanted(ACK_COLS, columns)]
    p, r = got["at"], got["resp"]
    src = {
        **_settled_pair(p, r, got["tag"], got["outcome"], got["multiple"]),
        "requeue": got["requeue"],
        "redelivered": ("redelivered", p),
        "consumer_tag": got["ctag"],
        "queue": got["queue"],
        "exchange": ("exchange", p),
        "routing_key": ("routing_key", p),
    }
    sort_by = ["capture", "tcp_stream", "channel", "request_frame"]
    src = _needed(src, columns, sort_by)
    del got, dlv
    m = _sources(m, src)
    return _taken_frame(m, src, ACK_COLS, sort_by, columns)


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
    requeue[settled_by_tag] = _objects(m["requeue"], resp[settled_by_tag])
    # the walk's order: by the settling packet, the unsettled when their channel was reopened or at
    # the end by the channel's first delivery; the deliveries of one packet by their tag's first
    # delivery (a redelivered tag keeps its place)
    when = np.where(done, resp, _scope_end(chan, g, np.arange(len(m), dtype=np.int64), big)[g[at]])
    order = np.lexsort((slot, np.where(when == big, first[g[at]], 0), when))
    return {
        "at": at[order],
        "resp": resp[order],
        "tag": tag[at][order],
        "outcome": outcome[order],
        "multiple": mult[order],
        "requeue": requeue[order],
        "ctag": _objects(m["consumer_tag"], at[order]),
        "queue": queue[order],
    }


_OUTCOMES = {
    "basic.ack": "ack",
    "basic.nack": "nack",
    "basic.reject": "reject",
    "basic.recover": "recovered",
    "basic.recover-async": "recovered",
}


def _objects(s: pd.Series, at: np.ndarray) -> np.ndarray:
    """The values of ``s`` at positions ``at`` as Python objects, None for missing."""
    v = s.iloc[at]
    return np.asarray(v.astype(object).where(v.notna(), None), dtype=object)


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
        if name in _SCOPE_OPEN:
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


# --------------------------------------------------------------------------- broker transit

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

_PUBLISH = ("basic.publish", "message.transfer", "transfer")  # ("transfer": AMQP 1.0)
_DELIVER = ("basic.deliver", "basic.get-ok", "message.transfer", "transfer")


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
    want = _wanted(TRANSIT_COLS, columns)
    return _transit(as_tables(t), want)[want]


def _transit(t, want: list) -> pd.DataFrame:
    """:func:`transit`, building only the result columns ``want``."""
    msgs = t.messages
    if len(msgs) == 0:
        return build([], TRANSIT_COLS)
    # publishes and deliveries are positions in msgs (no frame of them is made); _pid / _did below
    # number them in table order
    direction, method = msgs["direction"], msgs["method"]
    pub_at = np.flatnonzero(((direction == "c2s") & method.isin(_PUBLISH)).to_numpy(dtype=bool))
    del_at = np.flatnonzero(((direction == "s2c") & method.isin(_DELIVER)).to_numpy(dtype=bool))
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

    # 1. message id: the latest publish with that id at or before the delivery (a join, not a walk)
    pidx = np.flatnonzero(p_has)
    pidx = pidx[np.lexsort((pidx, p_ts[pidx]))]
    published = np.zeros(len(codes) + 1, dtype=bool)  # by code; index -1 (missing) stays False
    published[p_code[pidx]] = True
    del codes
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

    # 2. content: exchange + routing key + body hash, FIFO per consumer (publishes without an id)
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
    del P, D, by_c, c_ts

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


def _with_body_hash(t, msgs: pd.DataFrame) -> pd.DataFrame:
    """``msgs`` with its ``body_hash`` column: read from the dissect output when the section was
    loaded without it (its strings are the biggest of a load; most publishes carry an id)."""
    if "body_hash" in msgs.columns or t.source is None:
        return msgs

    hashes = load_section(t.source, {"messages": ["body_hash"]}).messages["body_hash"]
    return msgs.assign(body_hash=hashes.to_numpy()) if len(hashes) == len(msgs) else msgs


# --------------------------------------------------------------------------- application RPC

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


def _reply_key(reply_to: str | None, version: str | None):
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
    """:func:`_reply_key` of every row (object array, shared strings), computed once per distinct
    (reply_to, version)."""
    rc, ru = pd.factorize(reply_to, use_na_sentinel=True)
    vc, vu = pd.factorize(version, use_na_sentinel=True) if version is not None else (rc * 0 - 1, [])
    ru, vu = list(ru) + [None], list(vu) + [None]  # code -1 (missing): None
    combo = (rc + 1) * len(vu) + (vc + 1)
    uniq, inv = np.unique(combo, return_inverse=True)
    keys = [_reply_key(ru[u // len(vu) - 1], vu[u % len(vu) - 1]) for u in uniq.tolist()]
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
    want = _wanted(RPC_COLS, columns)
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
    c2s_req = c2s & has_corr & has_rt
    is_req = c2s_req | (s2c & has_corr & has_rt & ~np.isin(req_k, req_k[c2s_req]))
    is_rep = ~is_req & has_corr & has_rk
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
    # the walk's keys (millions of entries on a big capture) freed before the result is built
    del corr, has_corr, has_rt, has_rk, req_key, rep_key, names, req_k, rep_k, replies, used
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


# --------------------------------------------------------------------------- connection setup

SETUP_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "channel": "Int32",
    "version": STR,
    "client_ip": STR,
    "client_port": "Int32",
    "server_ip": STR,
    "server_port": "Int32",
    "request_method": STR,
    "request_frame": "Int64",
    "request_ts": TS_DTYPE,
    "response_method": STR,
    "response_frame": "Int64",
    "response_ts": TS_DTYPE,
    "latency_ms": "float64",
    "status": STR,
}


def connection_setup(t) -> pd.DataFrame:
    """TCP SYN (``connections.syn_ts``) -> connection.open-ok (``open_ts``), one row per
    conversation whose SYN was captured.  ``status`` ``ok`` or ``missing``
    (never opened: NaN latency).  ``request_frame`` is the conversation's first
    packet (the SYN), ``response_frame`` the first connection.open-ok packet."""
    t = as_tables(t)
    c = t.connections
    if len(c) == 0:
        return build([], SETUP_COLS)
    c = c[c["syn_ts"].notna()]
    m = t.methods
    ok = (
        m[m["method"] == "connection.open-ok"]
        .groupby(["capture", "tcp_stream"], sort=False, observed=True)["frame_number"]
        .min()
    )
    okmap = ok.to_dict()
    rows = []
    cols = [
        "capture",
        "tcp_stream",
        "version",
        "client_ip",
        "client_port",
        "server_ip",
        "server_port",
        "frame_number",
        "syn_ts",
        "open_ts",
    ]
    for cap, st, v, cip, cport, sip, sport, frame, syn, opn in records(c, cols):
        rows.append(
            dict(
                capture=cap,
                tcp_stream=st,
                channel=0,
                version=v,
                client_ip=cip,
                client_port=cport,
                server_ip=sip,
                server_port=sport,
                request_method="tcp.syn",
                request_frame=frame,
                request_ts=syn,
                response_method="connection.open-ok" if opn is not None else None,
                response_frame=okmap.get((cap, st)) if opn is not None else None,
                response_ts=opn,
                status="ok" if opn is not None else "missing",
            )
        )
    return _finish(rows, SETUP_COLS)


# every latency kind, keyed as in the stats JSON, and its pairing
LATENCY_FUNCTIONS = {
    "method_rtt": method_rtt,
    "confirm": confirms,
    "consumer_ack": consumer_acks,
    "transit": transit,
    "rpc": rpc,
    "connection_setup": connection_setup,
}


def all_latencies(t) -> dict[str, pd.DataFrame]:
    """Every latency kind, keyed as in the stats JSON."""
    t = as_tables(t)
    return {kind: pairing(t) for kind, pairing in LATENCY_FUNCTIONS.items()}
