"""Throughput per time bucket: messages, body bytes, frames and wire bytes, per direction.

Frames and wire bytes come from the ``frames`` table when the output has one
(``dissect --frames``): exact, heartbeats included.  Without it they are
estimated from ``methods`` and ``messages``: one frame per method
(``frame_size`` + 8 bytes of framing, 12 for 0-10), one header frame per
content (framing only: its payload size is not recorded) and ``body_frames``
body frames (``body_size`` + framing); heartbeats are invisible.  The result's
``attrs["frames_source"]`` says which (``"frames"`` / ``"estimate"``).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from amqpcap.analysis import batches
from amqpcap.analysis._common import NAT, STR, filled, ns, ordered, str_series
from amqpcap.analysis.deliveries import CONSUMER_METHODS, CONSUMER_STATE_COLS, consumer_state
from amqpcap.analysis.tables import as_tables, empty_frame

__all__ = ["throughput", "totals", "totals_at", "message_queues", "covered_buckets", "BY"]

BY = {
    "connection": ["capture", "tcp_stream"],
    "channel": ["capture", "tcp_stream", "channel"],
    "exchange": ["exchange"],
    "routing_key": ["routing_key"],
    "queue": ["queue"],
    "total": [],
    None: [],
}

_VALUES = ["messages", "body_bytes", "frames", "wire_bytes"]


def _overhead(version: pd.Series) -> np.ndarray:
    """Framing bytes per frame: 12 for 0-10 (frame header), 8 for the others (header + frame-end)."""
    return np.where((version == "0-10").fillna(False).to_numpy(dtype=bool), 12, 8).astype(np.int64)


def message_queues(t) -> pd.DataFrame:
    """The ``messages`` table plus a ``queue`` column: for deliveries the queue of the
    consumer (consumer tag -> basic.consume / consume-ok, 0-10 message.subscribe),
    for get-ok the queue of the basic.get, for publishes to the default exchange
    the routing key; null otherwise."""
    t = as_tables(t)
    msgs = t.messages.copy()
    msgs["queue"] = str_series([None] * len(msgs))
    if len(msgs) == 0 or len(t.methods) == 0:
        return msgs
    key = ["capture", "tcp_stream", "direction", "stream_offset"]
    cols = list(dict.fromkeys(CONSUMER_STATE_COLS + key))
    m = ordered(t.methods, CONSUMER_METHODS, cols).reset_index(drop=True)
    dlv, _ = consumer_state(m)
    pos = dlv.at
    if len(pos):
        q = m.loc[pos, key].copy()
        q["_q"] = str_series(dlv.queue.tolist()).to_numpy()
        q = q.dropna(subset=["stream_offset"]).drop_duplicates(key)
        j = msgs[key].merge(q, on=key, how="left")
        msgs["queue"] = str_series(j["_q"].astype(object).where(j["_q"].notna(), None).tolist()).to_numpy()
    default = (msgs["direction"] == "c2s") & (filled(msgs["exchange"], "") == "") & msgs["queue"].isna()
    default &= msgs["method"].isin(["basic.publish", "message.transfer"])
    msgs.loc[default, "queue"] = msgs.loc[default, "routing_key"]
    return msgs


def _frame_counts(frames: pd.DataFrame) -> pd.DataFrame:
    """``frames`` (a copy, ``wire_size`` dropped) with each row's ``frames`` (1) and ``wire_bytes``."""
    f = frames.copy()
    f["frames"] = 1
    f["wire_bytes"] = f["wire_size"].fillna(0).astype("int64")
    return f.drop(columns="wire_size")


def _frames_events(t, msgs: pd.DataFrame, attrs: list) -> pd.DataFrame:
    """One event per frame, attributed to the message its method frame started (``attrs``: the
    message attributes wanted)."""
    f = _frame_counts(
        t.frames[["capture", "tcp_stream", "channel", "direction", "ts", "stream_offset", "wire_size"]]
    )
    if not attrs:
        f["messages"] = 0
        f["body_bytes"] = 0
        return f.drop(columns="stream_offset")
    # anchor: every method frame (methods table) by stream offset, with its message's attributes
    m = t.methods[["capture", "tcp_stream", "channel", "direction", "stream_offset"]].dropna(
        subset=["stream_offset"]
    )
    key = ["capture", "tcp_stream", "direction", "stream_offset"]
    wanted = attrs  # only these: ``msgs`` has a queue column only when grouping by queue
    known = msgs[key + wanted].dropna(subset=["stream_offset"]).drop_duplicates(key)
    anchors = m.merge(known, on=key, how="left")
    for c in wanted:
        f[c] = str_series([None] * len(f)).to_numpy()
    if len(anchors) and len(f):
        by = ["capture", "tcp_stream", "direction", "channel"]
        fa = f.dropna(subset=["stream_offset"]).copy()
        fa["_off"] = fa["stream_offset"].astype("int64")
        an = anchors.copy()
        an["_off"] = an["stream_offset"].astype("int64")
        for c in ("tcp_stream", "channel"):
            fa[c] = fa[c].fillna(-1).astype("int64")
            an[c] = an[c].fillna(-1).astype("int64")
        for c in ("capture", "direction"):  # merge_asof wants one key dtype (Categoricals may differ)
            fa[c] = fa[c].astype(STR)
            an[c] = an[c].astype(STR)
        fa["_row"] = fa.index
        fa = fa.sort_values("_off", kind="stable")
        an = an.sort_values("_off", kind="stable")
        j = pd.merge_asof(
            fa.drop(columns=wanted),
            an[by + ["_off"] + wanted],
            on="_off",
            by=by,
            direction="backward",
        )
        j = j.set_index("_row")
        for c in wanted:
            f.loc[j.index, c] = j[c].astype(object).where(j[c].notna(), None)
    f["messages"] = 0
    f["body_bytes"] = 0
    return f.drop(columns=["stream_offset"])


def _estimated_events(methods: pd.DataFrame, msgs: pd.DataFrame, attrs: list, keep: list) -> pd.DataFrame:
    """One event per method frame of ``methods`` (``frame_size`` + framing), with its message's
    ``attrs``."""
    key = ["capture", "tcp_stream", "direction", "stream_offset"]
    m = methods[list(dict.fromkeys(keep + key + ["frame_size", "version"]))]
    if attrs:  # a method frame carries its message's exchange / routing key / queue
        a = msgs[key + attrs].dropna(subset=["stream_offset"]).drop_duplicates(key)
        m = m.merge(a, on=key, how="left")
    else:
        m = m.copy()
    over = _overhead(m["version"])
    m["frames"] = 1
    m["wire_bytes"] = m["frame_size"].fillna(0).astype("int64").to_numpy() + over
    m["messages"] = 0
    m["body_bytes"] = 0
    return m[keep + attrs + _VALUES]


def throughput(t, bucket: str = "1s", by: str | None = "connection") -> pd.DataFrame:
    """Messages, body bytes, frames and wire bytes per ``bucket`` (a pandas frequency
    string: ``"1s"``, ``"100ms"``, ``"1min"``), per direction, grouped ``by``
    ``connection`` (capture, tcp_stream), ``channel`` (capture, tcp_stream, channel),
    ``exchange``, ``routing_key``, ``queue`` or ``"total"`` / None.

    Columns: ``bucket`` (start of the bucket, UTC), the ``by`` keys, ``direction``,
    ``messages``, ``body_bytes``, ``frames``, ``wire_bytes``; only non-empty
    buckets appear.  A message counts in the bucket of the packet that completed
    it, with its declared ``body_size``.  Frames of a content (method, header,
    body) carry that message's exchange / routing key / queue; other frames
    have none (null group) when grouping by those.  Queue: see
    :func:`message_queues`.
    """
    return _throughputs(t, [bucket], by)[0]


def _throughputs(t, buckets: list, by: str | None) -> list:
    """:func:`throughput` per bucket of ``buckets``, from one pass over the tables."""
    if by not in BY:
        raise ValueError(f"by must be one of {[k for k in BY if k]}, not {by!r}")
    keys = BY[by]
    attrs = [k for k in ("exchange", "routing_key", "queue") if k in keys]  # message attributes grouped by
    # the columns an event needs: its group, direction and time (capture: the span of each capture)
    keep = list(dict.fromkeys(["capture"] + [k for k in keys if k not in attrs] + ["direction", "ts"]))
    if batches.is_output_dir(t) and not attrs:  # sums of rows alone: the tables read a batch at a time
        source = "frames" if _has_frames(t) else "estimate"
        key_types = empty_frame("messages", [k for k in keys + ["direction"] if k in _MESSAGE_KEYS])
        return _summed(_batch_events(t, keep, source), keys, key_types, source, buckets)
    t = as_tables(t)
    msgs = message_queues(t) if "queue" in keys else t.messages
    frames_source = "frames" if (t.has_frames or len(t.frames)) else "estimate"
    return _summed(_events(t, msgs, attrs, keep, frames_source), keys, t.messages, frames_source, buckets)


_MESSAGE_KEYS = ("capture", "tcp_stream", "channel", "direction", "exchange", "routing_key")


def _summed(events, keys: list, key_types: pd.DataFrame, frames_source: str, buckets: list) -> list:
    """:func:`throughput` of the event tables ``events`` per bucket of ``buckets`` (each table summed
    once per bucket and the small sums added: no two tables exist at once, nor their
    concatenation); ``key_types``: a frame whose columns give the empty result's key dtypes."""
    group = ["bucket"] + keys + ["direction"]
    sums: list = [[] for _ in buckets]
    spans: list = [[] for _ in buckets]
    for ev in events:
        if len(ev):
            for c in _VALUES:
                ev[c] = ev[c].astype("int64")
            ts = pd.to_datetime(ev["ts"], utc=True)
            for i, bucket in enumerate(buckets):
                ev["bucket"] = ts.dt.floor(bucket)
                sums[i].append(ev.groupby(group, dropna=False, sort=False, observed=True)[_VALUES].sum())
                spans[i].append(_capture_spans(ev, bucket))
            del ts
        del ev
    return [_total(s, p, keys, key_types, frames_source, b) for s, p, b in zip(sums, spans, buckets)]


def _total(sums: list, spans: list, keys: list, key_types, frames_source: str, bucket: str) -> pd.DataFrame:
    """The :func:`throughput` frame of the per-table ``sums`` and capture ``spans`` of one bucket."""
    out_cols = ["bucket"] + keys + ["direction"] + _VALUES
    group = ["bucket"] + keys + ["direction"]
    if not sums:
        df = pd.DataFrame({c: pd.Series([], dtype="int64") for c in out_cols})
        df["bucket"] = pd.Series([], dtype="datetime64[ns, UTC]")
        for k in keys + ["direction"]:
            df[k] = pd.Series([], dtype=key_types[k].dtype if k in key_types.columns else STR)
        df.attrs["frames_source"] = frames_source
        df.attrs["bucket"] = bucket
        return df
    g = pd.concat(sums) if len(sums) > 1 else sums[0]
    g = g.groupby(level=list(range(len(group))), dropna=False, sort=True, observed=True).sum().reset_index()
    for k in ("tcp_stream", "channel"):
        if k in g.columns:
            g[k] = g[k].astype("Int32")
    g = g[out_cols]
    g.attrs["frames_source"] = frames_source
    g.attrs["bucket"] = bucket
    span = pd.concat(spans).groupby(level=0, sort=False, observed=True).agg({"min": "min", "max": "max"})
    g.attrs["buckets"] = covered_buckets(span.itertuples(index=False, name=None))
    return g


def _has_frames(directory) -> bool:
    """The output has a ``frames`` table (``dissect --frames``), as :class:`Tables` tells."""
    p = os.path.join(directory, "frames")
    return os.path.isdir(p) or os.path.isfile(p + ".parquet")


_MESSAGE_COLUMNS = ["body_size", "body_received", "body_frames", "version"]
_FRAME_COLUMNS = ["capture", "tcp_stream", "channel", "direction", "ts", "wire_size"]


def _batch_events(directory, keep: list, frames_source: str):
    """:func:`_events` without message attributes, of a dissect output read a batch at a time (the
    columns as a full load types them): memory follows a batch, not a table."""
    read = dict(categorical=frozenset(), compact=False)
    msg_cols = list(dict.fromkeys(keep + _MESSAGE_COLUMNS))
    for m in batches.frames(directory, "messages", msg_cols, **read):
        yield _message_events(m, [], keep, frames_source)
    if frames_source == "frames":
        for f in batches.frames(directory, "frames", _FRAME_COLUMNS, **read):
            f = _frame_counts(f)
            f["messages"] = 0
            f["body_bytes"] = 0
            yield f[keep + _VALUES]
    else:
        cols = list(
            dict.fromkeys(keep + ["tcp_stream", "direction", "stream_offset", "frame_size", "version"])
        )
        for m in batches.frames(directory, "methods", cols, **read):
            yield _estimated_events(m, None, [], keep)


CHUNK_ROWS = 1 << 20  # events made and summed a slice of rows at a time: memory follows the slice


def _events(t, msgs: pd.DataFrame, attrs: list, keep: list, frames_source: str):
    """The event tables of :func:`throughput`, one after the other: the messages', then the frames'
    (or their estimate from ``methods``), a slice of :data:`CHUNK_ROWS` rows at a time (sums add up)."""
    for lo in range(0, len(msgs), CHUNK_ROWS):
        yield _message_events(msgs.iloc[lo : lo + CHUNK_ROWS], attrs, keep, frames_source)
    if frames_source == "frames":
        yield _frames_events(t, msgs, attrs)[keep + attrs + _VALUES]
    else:
        for lo in range(0, len(t.methods), CHUNK_ROWS):
            yield _estimated_events(t.methods.iloc[lo : lo + CHUNK_ROWS], msgs, attrs, keep)


def _message_events(msgs: pd.DataFrame, attrs: list, keep: list, frames_source: str) -> pd.DataFrame:
    """One event per message of ``msgs``: its body bytes and, without a frames table, the
    estimate of its header and body frames."""
    mev = msgs[keep + attrs].copy()
    mev["messages"] = 1
    size = msgs["body_size"].fillna(msgs["body_received"]).fillna(0).astype("int64")
    mev["body_bytes"] = size.to_numpy()
    if frames_source == "frames":
        mev["frames"] = 0
        mev["wire_bytes"] = 0
    else:
        over = _overhead(msgs["version"])
        bf = msgs["body_frames"].fillna(0).astype("int64").to_numpy()
        mev["frames"] = 1 + bf  # header + body frames (the method frame comes from methods)
        mev["wire_bytes"] = over * (1 + bf) + size.to_numpy()
    return mev


def _capture_spans(ev: pd.DataFrame, bucket: str) -> pd.DataFrame:
    """Each capture's first and last non-empty bucket number (``min``, ``max``), for the buckets
    from each capture's first to its last, overlapping captures counted once: two captures
    recorded years apart do not make the years between them part of a mean."""
    width = pd.Timedelta(bucket).value
    k = pd.Series(ns(ev["bucket"]) // width, index=ev.index)
    span = k.groupby(filled(ev["capture"], ""), sort=False, observed=True).agg(["min", "max"])
    span.index = span.index.astype(object)  # (the captures of two event tables, added up)
    return span


def covered_buckets(ranges) -> int:
    """The number of buckets in the union of inclusive (first, last) bucket number ranges
    (one per capture): a rate's denominator in :func:`totals` and ``stats --spark``."""
    total, end = 0, None
    for lo, hi in sorted(ranges):
        if end is None or lo > end:
            total += hi - lo + 1
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return int(total)


def totals(t, bucket: str = "1s") -> pd.DataFrame:
    """Both directions summed and per direction, per bucket: columns ``bucket``, ``messages``,
    ``body_bytes``, ``frames``, ``wire_bytes`` and the same with ``_c2s`` / ``_s2c`` suffixes.

    Rows: every non-empty bucket and, around each run of empty ones, the empty
    bucket right after the traffic stopped and the one right before it resumed
    (zeros), so a line or step plot drops to zero across a pause; the buckets in
    between are left out, so memory follows the traffic, never the time span (two
    captures years apart, a packet stamped 1970).  ``attrs["buckets"]``: the number
    of buckets from each capture's first non-empty one to its last (overlaps once),
    a rate's denominator."""
    return totals_at(t, [bucket])[0]


def totals_at(t, buckets: list) -> list:
    """:func:`totals` per bucket of ``buckets`` (pandas frequency strings), from one pass over the
    tables: e.g. the stats' 1 s buckets and a plot's."""
    # Of an output, numpy sums per (bucket, direction) of the timed and directed rows, the only
    # rows _wide keeps.  throughput() of an output stays the frames' groupby: its groups are any
    # of BY's keys (strings, nullable channels), and it keeps the rows without a time or a
    # direction as groups of their own; tests/analysis/test_batch_sections.py checks that both
    # ways give the same totals.
    if batches.is_output_dir(t):
        tps = _output_totals(t, list(buckets), "frames" if _has_frames(t) else "estimate")
    else:
        tps = _throughputs(t, list(buckets), "total")
    return [_wide(tp, b) for tp, b in zip(tps, buckets)]


def _output_totals(directory, buckets: list, frames_source: str) -> list:
    """Per bucket of ``buckets``, the rows of ``throughput(directory, bucket, by="total")`` that
    :func:`_wide` keeps (those with a time and a direction), with its ``attrs``: summed from the
    columns of each batch as numpy arrays (no frame of events per batch, no grouping of one), the
    sums of the batches added up at the end."""
    widths = [pd.Timedelta(b).value for b in buckets]
    sums: list = [[] for _ in widths]  # per width, (bucket numbers, direction codes, sums) a batch
    spans: dict = {}  # capture code -> [first, last] time (ns; a missing time NAT)
    captures, directions = batches.Codes(), batches.Codes()
    for ts, capture, direction, values in _column_events(directory, frames_source):
        _extend_spans(spans, captures.encode(capture), ts)
        d = directions.encode(direction)
        ok = (ts != NAT) & (d >= 0)
        ts, d, values = ts[ok], d[ok], values[:, ok]
        for per_batch, width in zip(sums, widths):
            per_batch.append(_grouped(ts // width, d, values))
    # each capture's span (a missing name: "", as ``_capture_spans`` fills it)
    named: dict = {}
    for code, (lo, hi) in spans.items():
        have = named.setdefault("" if code < 0 else captures.values[code], [lo, hi])
        have[0], have[1] = min(have[0], lo), max(have[1], hi)
    return [
        _total_rows(per_batch, width, directions.values, named.values(), frames_source, bucket)
        for per_batch, width, bucket in zip(sums, widths, buckets)
    ]


def _extend_spans(spans: dict, capture: np.ndarray, ts: np.ndarray) -> None:
    """``spans`` (capture code -> [first, last] time) extended by a batch's rows."""
    order = np.argsort(capture, kind="stable")
    capture, ts = capture[order], ts[order]
    at = np.flatnonzero(np.r_[True, capture[1:] != capture[:-1]]) if len(ts) else []
    for c, lo, hi in zip(capture[at].tolist(), np.minimum.reduceat(ts, at), np.maximum.reduceat(ts, at)):
        span = spans.setdefault(c, [int(lo), int(hi)])
        span[0], span[1] = min(span[0], int(lo)), max(span[1], int(hi))


def _total_rows(per_batch: list, width: int, directions: list, spans, frames_source: str, bucket: str):
    """The rows of a ``throughput(..., by="total")`` frame :func:`_wide` reads, in its order, of
    the sums of each batch (bucket numbers of ``width`` ns, direction codes into ``directions``)
    and the captures' ``spans`` ([first, last] time: a time's bucket number is floored, so the
    first and last bucket numbers are those of the first and last times)."""
    if per_batch:
        b, d, v = _grouped(*(np.concatenate(x, axis=-1) for x in zip(*per_batch)))
    else:
        b, d, v = np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros((len(_VALUES), 0), np.int64)
    names = np.array(directions, dtype=object)[d]
    order = np.lexsort((names.astype(str), b))
    tp = pd.DataFrame({"bucket": pd.to_datetime((b[order] * width).view("datetime64[ns]"), utc=True)})
    tp["direction"] = names[order]
    for i, c in enumerate(_VALUES):
        tp[c] = v[i, order]
    numbers = ((lo // width, hi // width) for lo, hi in spans)
    tp.attrs = {"frames_source": frames_source, "bucket": bucket, "buckets": covered_buckets(numbers)}
    return tp


def _grouped(b: np.ndarray, d: np.ndarray, values: np.ndarray) -> tuple:
    """The columns of ``values`` (a row a value, a column a row of ``b``) summed per (``b``,
    ``d``): (b, d, sums), each pair once, in order.  The pairs numbered from ``b``'s smallest
    bucket (a batch's rows a few buckets apart), else from its distinct buckets, and summed by
    ``np.add.at`` on int64, exact (no sort of the rows)."""
    kinds = int(d.max()) + 1 if len(d) else 1
    lo = int(b.min()) if len(b) else 0
    span = int(b.max()) - lo + 1 if len(b) else 0
    if span <= 2 * len(b):
        first, number = np.arange(lo, lo + span, dtype=np.int64), b - lo
    else:  # (times far apart: a packet stamped 1970 among today's)
        first, number = np.unique(b, return_inverse=True)
    pair = number * kinds + d
    rows = np.bincount(pair, minlength=len(first) * kinds)
    sums = np.zeros((len(values), len(rows)), dtype=np.int64)
    for total, column in zip(sums, values):
        np.add.at(total, pair, column)
    at = np.flatnonzero(rows)
    return first[at // kinds], (at % kinds).astype(d.dtype), sums[:, at]


def _column(table, name: str, type_) -> pa.ChunkedArray | pa.Array:
    """Column ``name`` of ``table`` (all null when its files lack it, as a load gives it)."""
    return table.column(name) if name in table.column_names else pa.nulls(table.num_rows, type_)


def _int64(col) -> np.ndarray:
    """An integer column as int64, a missing value 0."""
    return pc.fill_null(col, 0).cast(pa.int64()).to_numpy()


def _column_events(directory, frames_source: str):
    """The events of :func:`_batch_events` as columns, a batch at a time: (ts as int64 ns, NAT
    when missing; capture, direction: Arrow string columns; the ``_VALUES`` as the rows of an
    int64 array, a column an event)."""
    read = ["capture", "direction", "ts"]
    for m in batches.tables(directory, "messages", read + _MESSAGE_COLUMNS):
        size = pc.coalesce(_column(m, "body_size", pa.int64()), _column(m, "body_received", pa.int64()))
        size = _int64(size)
        values = np.zeros((len(_VALUES), m.num_rows), dtype=np.int64)
        values[0] = 1
        values[1] = size
        if frames_source != "frames":
            body_frames = _int64(_column(m, "body_frames", pa.int32()))
            values[2] = 1 + body_frames
            values[3] = _framing(m) * (1 + body_frames) + size
        yield _ns(m), *_strings(m), values
    name, size = ("frames", "wire_size") if frames_source == "frames" else ("methods", "frame_size")
    for f in batches.tables(directory, name, read + [size] + (["version"] if name == "methods" else [])):
        values = np.zeros((len(_VALUES), f.num_rows), dtype=np.int64)
        values[2] = 1
        values[3] = _int64(_column(f, size, pa.int64())) + (_framing(f) if name == "methods" else 0)
        yield _ns(f), *_strings(f), values


def _strings(table) -> tuple:
    return table.column("capture").combine_chunks(), table.column("direction").combine_chunks()


def _ns(table) -> np.ndarray:
    return pc.fill_null(table.column("ts").cast(pa.int64()), NAT).to_numpy()


def _framing(table) -> np.ndarray:
    """:func:`_overhead` of a table's ``version`` column."""
    return np.where(batches.is_one_of(_column(table, "version", pa.string()), ["0-10"]), 12, 8)


def _wide(tp: pd.DataFrame, bucket: str) -> pd.DataFrame:
    """:func:`totals` of the ``throughput(..., by="total")`` frame ``tp``."""
    tp = tp[tp["bucket"].notna()] if len(tp) else tp  # rows without a time are in no bucket
    if len(tp) == 0:
        out = pd.DataFrame(columns=["bucket"] + _VALUES)
        out.attrs = {"buckets": 0}
        return out
    wide = tp.pivot_table(
        index="bucket", columns="direction", values=_VALUES, aggfunc="sum", fill_value=0, observed=True
    )
    wide.columns = [f"{v}_{d}" for v, d in wide.columns]
    width = pd.Timedelta(bucket).value
    k = (ns(wide.index.to_series()) - ns(wide.index[:1].to_series())[0]) // width  # bucket numbers, sorted
    step = np.diff(k)
    edges = np.concatenate([k[:-1][step > 1] + 1, k[1:][step > 1] - 1])  # zero buckets bracketing the gaps
    if len(edges):
        idx = np.union1d(k, edges)
        first = wide.index[0]
        wide = wide.reindex(pd.DatetimeIndex(first + pd.to_timedelta(idx * width, unit="ns")), fill_value=0)
    for v in _VALUES:
        for d in ("c2s", "s2c"):
            if f"{v}_{d}" not in wide.columns:
                wide[f"{v}_{d}"] = 0
        wide[v] = wide[f"{v}_c2s"] + wide[f"{v}_s2c"]
    wide.index.name = "bucket"
    out = wide.reset_index()
    out.attrs = dict(tp.attrs)  # "buckets": the captures' spans (see _capture_spans)
    return out
