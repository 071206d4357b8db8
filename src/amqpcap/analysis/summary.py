"""The ``stats`` summary: a stable JSON-able dict, and its terminal rendering.

The dict is the ``amqpcap stats --json`` contract documented in
docs/analysis.md ("stats JSON"); keys are only ever added, never renamed.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from amqpcap.analysis import amqp10, batches, timespan
from amqpcap.analysis._common import (
    CONN_KEYS,
    MMAP_THRESHOLD,
    ROW_KEYS,
    SMALL_MMAP_THRESHOLD,
    codes_in,
    filled,
    malloc_pool,
    ns,
    numbering,
    release_memory,
    si,
)
from amqpcap.analysis.batches import OutOfOrder, is_output_dir
from amqpcap.analysis.connection_health import (
    LIVENESS_COLUMNS,
    UNACKED_ACK_COLS,
    blocked,
    flow,
    gap_counts,
    heartbeat_gaps,
    heartbeat_source,
    unacked,
)
from amqpcap.analysis.failures import ERROR_METHODS, error_summary
from amqpcap.analysis.forked import Forked, can_fork
from amqpcap.analysis.latency import ACK_METHODS, CONFIRM_METHODS, LATENCY_FUNCTIONS
from amqpcap.analysis.pairing import NotStreamed
from amqpcap.analysis.round_trips import method_rtt_of_output, section_rows
from amqpcap.analysis.streamed_acks import streamed_acks
from amqpcap.analysis.streamed_confirms import streamed_confirms
from amqpcap.analysis.streamed_health import heartbeat_counts
from amqpcap.analysis.streamed_rpc import streamed_rpc
from amqpcap.analysis.streamed_transit import streamed_transit
from amqpcap.analysis.tables import Tables, as_tables, load_section, output_bytes
from amqpcap.analysis.traffic import totals

__all__ = [
    "stats",
    "render_text",
    "latency_summary",
    "connections_table",
    "connection_cells",
    "time_outliers",
    "span_summary",
    "error_groups",
    "throughput_cells",
    "throughput_summary",
    "stats_parts",
    "stats_of_parts",
    "STATS_PARTS",
    "STATS_VERSION",
    "LATENCY_KINDS",
    "TS_FLOOR_NS",
    "TS_FAR_NS",
    "BUSIEST_CONNECTIONS",
]

STATS_VERSION = 1
# the rows of the text report's Connections table (the busiest connections)
BUSIEST_CONNECTIONS = 15
LATENCY_KINDS = ("method_rtt", "confirm", "consumer_ack", "transit", "rpc", "connection_setup")


def _num(x, nd=3):
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    if math.isnan(f) or math.isinf(f):
        return None
    return round(f, nd)


def latency_summary(values, consume: bool = False) -> dict:
    """``count``, ``p50_ms``, ``p90_ms``, ``p99_ms``, ``max_ms`` (linear-interpolated
    percentiles, rounded to 1 µs; null when count is 0) of the finite values.  ``consume``: a
    float64 array ``values`` may be reordered in place (no copy of it is made)."""
    if isinstance(values, np.ndarray) and values.dtype == np.float64:
        a = values
    else:
        a = np.asarray(pd.Series(values, dtype="float64").dropna(), dtype=np.float64)
        consume = False  # (the series' own array, perhaps)
    # (all finite when the extremes are: NaN is the max of an array holding one; no mask per value)
    if len(a) and not (np.isfinite(a.max()) and np.isfinite(a.min())):
        a, consume = a[np.isfinite(a)], True
    if len(a) == 0:
        return {"count": 0, "p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None}
    top = a.max()
    p50, p90, p99 = np.percentile(a, [50, 90, 99], overwrite_input=consume)
    return {
        "count": int(len(a)),
        "p50_ms": _num(p50),
        "p90_ms": _num(p90),
        "p99_ms": _num(p99),
        "max_ms": _num(top),
    }


def _counts(series) -> dict:
    # (a Categorical counts its unused categories too, as 0: left out)
    return {str(k): int(v) for k, v in series.value_counts(dropna=True).items() if v}


def _rtt_summary(r: pd.DataFrame) -> dict:
    ok = r[r["status"] == "ok"]
    out = latency_summary(ok["latency_ms"])
    out.update(missing=int((r["status"] == "missing").sum()), errors=int((r["status"] == "error").sum()))
    out["by_method"] = {
        str(k): latency_summary(g["latency_ms"])
        for k, g in ok.groupby("request_method", sort=True, observed=True)
    }
    return out


def _confirm_summary(c: pd.DataFrame) -> dict:
    out = latency_summary(c.loc[c["outcome"].isin(["ack", "nack"]), "latency_ms"])
    out.update(
        acked=int((c["outcome"] == "ack").sum()),
        nacked=int((c["outcome"] == "nack").sum()),
        unconfirmed=int((c["outcome"] == "unconfirmed").sum()),
    )
    return out


def _ack_summary(a: pd.DataFrame) -> dict:
    out = latency_summary(a.loc[a["outcome"].isin(["ack", "nack", "reject"]), "latency_ms"])
    out.update(
        acked=int((a["outcome"] == "ack").sum()),
        nacked=int((a["outcome"] == "nack").sum()),
        rejected=int((a["outcome"] == "reject").sum()),
        unsettled=int((a["outcome"] == "unsettled").sum()),
        recovered=int((a["outcome"] == "recovered").sum()),
        redelivered=int(a["redelivered"].fillna(False).astype(bool).sum()),
    )
    return out


def _transit_summary(tr: pd.DataFrame) -> dict:
    first = tr[tr["first"].fillna(False).astype(bool)] if len(tr) else tr
    out = latency_summary(first["latency_ms"])
    out.update(
        deliveries=int(len(tr)),
        redeliveries=int(tr["redelivered"].fillna(False).astype(bool).sum()) if len(tr) else 0,
    )
    return out


def _rpc_summary(rp: pd.DataFrame) -> dict:
    out = latency_summary(rp.loc[rp["status"].isin(["ok", "ok-delivery"]), "latency_ms"])
    out["missing"] = int((rp["status"] == "missing").sum())
    return out


def _setup_summary(cs: pd.DataFrame) -> dict:
    values, counts, _ = _setup_parts(cs)
    return {**latency_summary(values), **counts}


# stats' ``latency``: kind -> the summary of its pairing (LATENCY_FUNCTIONS)
_SUMMARIES = {
    "method_rtt": _rtt_summary,
    "confirm": _confirm_summary,
    "consumer_ack": _ack_summary,
    "transit": _transit_summary,
    "rpc": _rpc_summary,
    "connection_setup": _setup_summary,
}


# The columns of a pairing that its summary, unacked and the report read: stats builds just these
# (a big capture's full transit or consumer-ack frame is several times their size).
LATENCY_COLUMNS = {
    "confirm": ["outcome", "latency_ms"],
    "consumer_ack": ["outcome", "latency_ms", "redelivered"] + UNACKED_ACK_COLS,
    "transit": ["first", "latency_ms", "redelivered"],
    "rpc": ["status", "latency_ms"],
}


def _pairing(kind: str, t) -> pd.DataFrame:
    """The pairing of latency ``kind`` (just its :data:`LATENCY_COLUMNS` when it has some)."""
    if kind in LATENCY_COLUMNS:
        return LATENCY_FUNCTIONS[kind](t, columns=LATENCY_COLUMNS[kind])
    return LATENCY_FUNCTIONS[kind](t)


def _pairing_step(kind: str, got: dict, latencies: dict | None, on_latency):
    """The stats step of latency ``kind``: its pairing computed (or taken from ``latencies``),
    summarised into ``got["latency"]`` and dropped; consumer acks also give unacked's health."""

    def step(t):
        df = latencies[kind] if latencies is not None else _pairing(kind, t)
        if on_latency is not None:
            on_latency(kind, df)
        got["latency"][kind] = _SUMMARIES[kind](df)
        if kind == "consumer_ack":  # unacked reads the consumer_ack section too (one load for both)
            release_memory()  # what the pairing freed, given back before unacked runs
            got["unacked"] = _unacked_health(unacked(t, acks=df[UNACKED_ACK_COLS]))  # (no copy)

    return step


def _rtt_parts(r: pd.DataFrame) -> tuple:
    """:func:`_rtt_summary` as :data:`STREAMED` gives it: the latencies, the other figures."""
    s = _rtt_summary(r)
    return r.loc[r["status"] == "ok", "latency_ms"], {k: s[k] for k in ("missing", "errors", "by_method")}, {}


def _setup_parts(cs: pd.DataFrame) -> tuple:
    """:func:`_setup_summary` as :data:`STREAMED` gives it: the latencies, the other figures."""
    return cs.loc[cs["status"] == "ok", "latency_ms"], {"missing": int((cs["status"] == "missing").sum())}, {}


# the pairings stats computes in a pass over a dissect output's tables, not from a section's frames:
# kind -> directory -> (latencies, the counts of its summary, what else of stats it gives)
STREAMED = {
    "confirm": lambda out: (*streamed_confirms(out), {}),
    "rpc": lambda out: (*streamed_rpc(out), {}),
    "transit": lambda out: (*streamed_transit(out), {}),
    "method_rtt": lambda out: _rtt_parts(method_rtt_of_output(out, SECTIONS["method_rtt"][0])),
    "connection_setup": lambda out: _setup_parts(
        LATENCY_FUNCTIONS["connection_setup"](section_rows(out, *SECTIONS["connection_setup"]))
    ),
    "consumer_ack": lambda out, **kw: (lambda v, c, h: (v, c, {"unacked": h}))(*streamed_acks(out, **kw)),
}


class _StreamedStep:
    """The stats step of latency ``kind`` in one pass over the tables of the dissect output ``src``
    (:data:`STREAMED`), no section loaded; the way of :func:`_pairing_step` when they are not in
    wire order (``tables``: the :class:`Sections` to load from then)."""

    def __init__(self, kind: str, got: dict, src, tables, on_latency=None, **kw):
        self.kind, self.got, self.src, self.tables = kind, got, src, tables
        self.on_latency = on_latency  # (handed the matched latencies, or the frame when loaded)
        self.kw = kw  # (consumer acks: ``on_timeline``)

    def __call__(self) -> None:
        try:
            values, counts, more = STREAMED[self.kind](self.src, **self.kw)
        except (OutOfOrder, NotStreamed):
            _pairing_step(self.kind, self.got, None, self.on_latency)(self.tables(self.kind))
            return
        # the percentiles taken in place first, then the values (reordered) handed on: no copy of them
        # (a float64 array of the pass is this step's alone; the percentiles do not depend on the order)
        self.got["latency"][self.kind] = {**latency_summary(values, True), **counts}
        if self.on_latency is not None:
            self.on_latency(self.kind, values)
        self.got.update(more)


# What each computation of stats and the report reads: ({table: columns (None: all)}, {table: the
# methods whose rows it reads}).  On a dissect output directory each is loaded for its computation
# alone (load_section) and dropped after.  The wire-order keys are always there (``ordered``).
_KEYS = ROW_KEYS
_TS = ["capture", "tcp_stream", "frame_number", "ts"]
# The connections columns a section reads (a capture of a million conversations makes a frame
# of every column most of a section's memory): the pairings read none but the keys.
_CONN = CONN_KEYS + ["version"]
_CONN_LIGHT = _CONN + (
    "frame_number ts end_ts client_ip client_port server_ip server_port connection_name syn_ts open_ts "
    "negotiation client_version client_header server_header rst closed_by rst_by rst_frame bytes_c2s "
    "bytes_s2c server_product close_reply_code close_frame".split()  # (and the report's connections table)
)
_CONN_HEALTH = _CONN + "heartbeat open_ts end_ts close_ts zero_windows".split() + LIVENESS_COLUMNS
_CONN_TEXT = _CONN + (
    "ts end_ts client_ip client_port server_ip server_port server_product connection_name bytes_c2s "
    "bytes_s2c close_reply_code closed_by close_frame rst_by rst_frame".split()
)
# the methods of the report's timeline: channel (0-10: session) lifetimes, connection.blocked
TIMELINE_METHODS = (
    "channel.open", "channel.close-ok", "session.attach", "session.detached", "connection.blocked",
    "connection.unblocked",
)  # fmt: skip


SECTIONS: dict = {
    "method_rtt": (
        {"connections": _CONN, "methods": _KEYS + ["command_id", "answers_command_id", "id_ranges", "no_wait",
         "synchronous"]},
        {},
    ),
    "confirm": (
        {"connections": _CONN, "methods": _KEYS + ["delivery_tag", "multiple", "exchange", "routing_key"],
         "messages": _KEYS},
        {"methods": CONFIRM_METHODS, "messages": CONFIRM_METHODS},
    ),
    "consumer_ack": (  # and unacked (basic.qos)
        {"connections": _CONN, "methods": _KEYS + ["delivery_tag", "multiple", "requeue", "redelivered",
         "consumer_tag", "exchange", "routing_key", "command_id", "id_ranges", "queue", "no_ack", "no_wait",
         "accept_mode", "prefetch_count", "qos_global"], "messages": _KEYS},
        {"methods": ACK_METHODS + ("basic.qos",), "messages": ACK_METHODS},
    ),
    "unacked": (
        {"connections": _CONN, "methods": _KEYS + ["prefetch_count", "qos_global"]},
        {"methods": ("basic.qos",)},
    ),
    "transit": (
        {"connections": _CONN, "messages": _KEYS + ["message_id", "exchange", "routing_key", "consumer_tag",
         "redelivered"]},
        {},
    ),
    "rpc": ({"connections": _CONN, "messages": _KEYS + ["correlation_id", "reply_to", "routing_key"]}, {}),
    "connection_setup": (
        {"connections": _CONN_LIGHT, "methods": _KEYS}, {"methods": ("connection.open-ok",)}
    ),
    "span": ({"connections": _CONN_LIGHT, "methods": _TS, "messages": _TS, "frames": _TS}, {}),
    "errors": (
        {"connections": _CONN_LIGHT, "methods": _KEYS + ["reply_code", "reply_text", "reply_name",
         "failing_method", "command_id", "answers_command_id", "code", "text"], "anomalies": None},
        {"methods": ERROR_METHODS},  # (with 0-10 rows: the light group's, see error_tables)
    ),
    "throughput": (
        {"connections": _CONN, "methods": _KEYS + ["frame_size"],
         "messages": _KEYS + ["body_size", "body_received", "body_frames"], "frames": None},
        {},
    ),
    "health": (
        {"connections": _CONN_HEALTH, "methods": _KEYS + ["reason", "active"],
         "messages": _TS + ["direction"], "frames": None},
        {},
    ),
    "counts": (
        {"connections": ["capture", "version"], "methods": ["capture", "method"], "anomalies": ["kind"]}, {}
    ),
    # the light computations together: one load for all of them (their columns are few)
    "light": (
        {"connections": _CONN_LIGHT, "methods": _KEYS + ["command_id", "answers_command_id", "id_ranges",
         "no_wait", "synchronous", "reply_code", "reply_text", "reply_name", "failing_method", "code", "text",
         "reason"],
         "anomalies": None},
        {},
    ),
    # transit and rpc: one load of messages for both (body hashes read by transit if it needs them)
    "messages": (
        {"connections": _CONN, "messages": _KEYS + ["message_id", "exchange", "routing_key", "consumer_tag",
         "redelivered", "correlation_id", "reply_to"]},
        {},
    ),
    # the report's connections timeline
    "timeline": ({"connections": _CONN_LIGHT, "methods": _KEYS + ["reason"]}, {"methods": TIMELINE_METHODS}),
    "amqp10": amqp10.SECTION,  # AMQP 1.0: settlement, outcomes, error conditions
}  # fmt: skip


# sections computed from the load of a larger one (a superset of their columns and rows)
GROUPS = {
    **dict.fromkeys(("method_rtt", "connection_setup"), "light"),
    **dict.fromkeys(("transit", "rpc"), "messages"),
}


# sections that read the rows of some versions only (the 1.0 figures: on a capture of other
# versions, no row is loaded)
VERSIONS = {"amqp10": {"connections": ("1.0",), "methods": ("1.0",), "messages": ("1.0",)}}


# sections that read a dissect output directory batch by batch themselves (amqpcap.analysis.batches):
# they are handed the directory, no load
BATCH_SECTIONS = frozenset({"throughput", "span", "text", "health", "counts"})


def error_tables(t, src):
    """The tables errors are found in: ``t``, the errors section of ``src`` (its failure methods'
    rows), unless they are of 0-10, whose execution.exception names the command it answers by id:
    then every method's (the light group's).  Without the 1.0 methods: stats has their errors
    from the amqp10 section (``amqp10.error_conditions``), once."""
    if not isinstance(src, Tables) and (t.methods["version"] == "0-10").any():
        t = load_section(src, *SECTIONS["light"])
    v10 = (t.methods["version"] == "1.0").to_numpy(dtype=bool)
    return dataclasses.replace(t, methods=t.methods[~v10]) if v10.any() else t


def section_tables(src, section: str):
    """The tables ``section`` (of :data:`SECTIONS`) reads: ``src`` itself when it is loaded
    ``Tables``; for a dissect output directory, just its group's columns and rows (a
    :data:`BATCH_SECTIONS` section: the directory)."""
    if isinstance(src, Tables):
        return src
    group = GROUPS.get(section, section)
    if group in BATCH_SECTIONS:
        return src
    columns, names = SECTIONS[group]
    return load_section(src, columns, names, VERSIONS.get(group))


class Sections:
    """Tables for one section after another (:func:`section_tables`): a group's load serves its
    sections in a row, and is dropped before the next group's is read."""

    def __init__(self, src):
        self.src, self.group, self.tables = src, None, None

    def __call__(self, section: str):
        group = GROUPS.get(section, section)
        if group in BATCH_SECTIONS and not isinstance(self.src, Tables):  # (the group loaded stays)
            return self.src
        if group != self.group:
            self.group = self.tables = None
            release_memory()
            self.tables, self.group = section_tables(self.src, section), group
        return self.tables

    def close(self) -> None:
        self.group = self.tables = None
        release_memory()


def stats_source(t):
    """What stats computes from: ``t`` when loaded, a dissect output directory as such (each
    section loads what it reads), else (a capture) ``load(t)``."""
    if isinstance(t, Tables):
        return t
    if isinstance(t, (str, os.PathLike)) and os.path.isdir(t):
        return os.fspath(t)
    return as_tables(t)


def error_groups(summary: pd.DataFrame) -> list[dict]:
    """stats' ``errors``: :func:`~amqpcap.analysis.failures.error_summary` rows grouped by everything
    but the text, each group
    with its distinct reply ``texts`` and where it first happened."""
    if len(summary) == 0:
        return []
    keys = ["kind", "code", "name", "class", "method", "failing_method"]
    e = summary.astype(object).where(summary.notna(), None)
    groups: dict = {}
    for r in e.to_dict("records"):
        k = tuple(r[c] for c in keys)
        where = {
            "first_capture": r["first_capture"],
            "first_tcp_stream": _int(r["first_tcp_stream"]),
            "first_frame": _int(r["first_frame"]),
        }
        g = groups.get(k)
        if g is None:
            g = groups[k] = {
                "code": _int(r["code"]),
                "name": r["name"],
                "class": r["class"],
                "method": r["method"],
                "kind": r["kind"],
                "count": 0,
                "failing_method": r["failing_method"],
                **where,
                "_ts": r["first_ts"],
                "texts": [],
            }
        elif r["first_ts"] is not None and (g["_ts"] is None or r["first_ts"] < g["_ts"]):
            g.update(where, _ts=r["first_ts"])
        g["count"] += int(r["count"])
        g["texts"].append({"text": r["text"], "count": int(r["count"]), **where})
    items = list(groups.values())
    for g in items:
        del g["_ts"]
    items.sort(
        key=lambda d: (
            -d["count"],
            d["code"] if d["code"] is not None else 10**9,
            d["kind"] or "",
            d["method"] or "",
            d["failing_method"] or "",
        )
    )
    return items


def _int(v):
    return None if v is None else int(v)


def _rate(series: pd.Series, seconds: float, buckets: int) -> dict:
    if len(series) == 0 or seconds <= 0 or buckets <= 0:
        return {"mean": None, "peak": None}
    return {"mean": _num(series.sum() / (buckets * seconds)), "peak": _num(series.max() / seconds)}


def _throughput(t, bucket: str) -> dict:
    return throughput_summary(totals(t, bucket=bucket), bucket)


def throughput_summary(tot: pd.DataFrame, bucket: str) -> dict:
    """stats' ``throughput`` of the :func:`~amqpcap.analysis.traffic.totals` frame ``tot`` (per
    ``bucket``)."""
    n = tot.attrs.get("buckets", 0)
    bucket_s = pd.Timedelta(bucket).total_seconds()
    out = {"bucket_s": bucket_s, "buckets": int(n), "frames_source": tot.attrs.get("frames_source")}
    for v in ("messages", "body_bytes", "frames", "wire_bytes"):
        out[v] = int(tot[v].sum()) if len(tot) else 0
    names = {
        "messages": "msgs_per_s",
        "body_bytes": "body_bytes_per_s",
        "frames": "frames_per_s",
        "wire_bytes": "wire_bytes_per_s",
    }
    for v, name in names.items():
        out[name] = _rate(tot[v] if len(tot) else pd.Series([], dtype="int64"), bucket_s, n)
    for d in ("c2s", "s2c"):
        sub = {}
        for v, name in names.items():
            col = f"{v}_{d}"
            s = tot[col] if len(tot) and col in tot.columns else pd.Series([], dtype="int64")
            sub[v] = int(s.sum())
            sub[name] = _rate(s, bucket_s, n)
        out[d] = sub
    return out


def span_summary(t) -> dict:
    """stats' ``span``: first and last packet time, duration, time outliers (of loaded tables, or
    of a dissect output directory read a batch at a time)."""
    if is_output_dir(t):
        ends, odd = timespan.span(t, TS_FLOOR_NS, TS_FAR_NS)
        ts = [pd.Timestamp(v, tz="UTC") for v in ends]
    else:
        ts, odd = _span_ends(t), None
    if not ts:
        return {"start": None, "end": None, "duration_s": None}
    lo, hi = min(ts), max(ts)
    out = {"start": lo.isoformat(), "end": hi.isoformat(), "duration_s": _num((hi - lo).total_seconds(), 6)}
    odd = time_outliers(t) if odd is None else odd
    out["time_outliers"] = int(len(odd))
    out["first_time_outlier"] = (
        None
        if len(odd) == 0
        else {
            "capture": odd["capture"].iloc[0],
            "tcp_stream": _int(_none(odd["tcp_stream"].iloc[0])),
            "frame_number": _int(_none(odd["frame_number"].iloc[0])),
            "ts": odd["ts"].iloc[0].isoformat(),
        }
    )
    return out


def span_duration(t) -> float | None:
    """stats' ``span`` ``duration_s`` alone (no time outliers looked for)."""
    ts = _span_ends(t)
    return _num((max(ts) - min(ts)).total_seconds(), 6) if ts else None


def _span_ends(t) -> list:
    """The minimum and maximum (Timestamps) of every ``ts`` / ``end_ts`` column of the tables."""
    if is_output_dir(t):
        return [pd.Timestamp(v, tz="UTC") for v in timespan.span_parts(t)[0]]
    ts = []
    for df, cols in (
        (t.connections, ["ts", "end_ts"]),
        (t.methods, ["ts"]),
        (t.messages, ["ts"]),
        (t.frames, ["ts"]),
    ):
        for c in cols:
            if len(df) and df[c].notna().any():
                ts += [df[c].min(), df[c].max()]
    return ts


def _none(v):
    return None if pd.isna(v) else v


# time_outliers: stamped before 1990, or more than a year from its capture's median
TS_FLOOR_NS = pd.Timestamp("1990-01-01", tz="UTC").value
TS_FAR_NS = pd.Timedelta(days=365).value


def time_outliers(t) -> pd.DataFrame:
    """Rows (``methods``, ``messages``, ``frames``) whose packet timestamp cannot be right: before
    1990 (a zero or near-zero clock) or more than a year from the median timestamp of their
    capture.  They stay in every computation (memory does not depend on them); stats reports
    them under ``span``.  Columns: ``capture``, ``tcp_stream``, ``frame_number``, ``ts``, in
    capture and packet order, one row per packet."""
    t = as_tables(t)
    cols = ["capture", "tcp_stream", "frame_number", "ts"]
    parts = [df[cols] for df in (t.methods, t.messages, t.frames) if len(df)]
    if not parts:
        return pd.DataFrame({c: [] for c in cols})
    # each part's stamps as int arrays, the rows far from their capture's median taken from it:
    # no concatenation of every row of the three tables
    caps = [filled(p["capture"], "") for p in parts]  # (a missing capture counts as "")
    index = numbering([c.to_frame() for c in caps], "capture")
    codes = [codes_in(c, index) for c in caps]
    stamps = [ns(p["ts"]) for p in parts]
    stamped = [p["ts"].notna().to_numpy(dtype=bool) for p in parts]
    med = np.zeros(len(index))
    for i in range(len(index)):
        v = np.concatenate([v[ok & (c == i)] for v, ok, c in zip(stamps, stamped, codes)])
        med[i] = np.median(v.astype(np.float64)) if len(v) else 0.0
    odd = [
        p[ok & ((v < TS_FLOOR_NS) | (np.abs(v - med[c]) > TS_FAR_NS))]
        for p, v, ok, c in zip(parts, stamps, stamped, codes)
    ]
    odd = pd.concat(odd, ignore_index=True).drop_duplicates(["capture", "frame_number"])
    return odd.sort_values(["capture", "frame_number"], kind="stable").reset_index(drop=True)


def _unacked_health(un: pd.DataFrame) -> dict:
    over = un[un["over_prefetch"].fillna(False).astype(bool)] if len(un) else un
    return {
        "max_unacked": int(un["unacked"].max()) if len(un) and un["unacked"].notna().any() else 0,
        "channels_over_prefetch": int(
            over.groupby(["capture", "tcp_stream", "channel"], observed=True).ngroups
        )
        if len(over)
        else 0,
    }


# the methods blocked and flow read
_HEALTH_METHODS = ("connection.blocked", "connection.unblocked", "channel.flow", "channel.flow-ok")


def _health(t, unacked_health: dict) -> dict:
    """stats' ``health``; of a dissect output directory, the heartbeat silences found in a pass
    over its tables (:mod:`~amqpcap.analysis.streamed_health`) and blocked / flow from their
    methods' rows alone."""
    if is_output_dir(t):
        events = load_section(t, {"methods": _KEYS + ["reason", "active"]}, {"methods": _HEALTH_METHODS})
        conns = load_section(t, {"connections": _CONN_HEALTH})
        try:
            beats = heartbeat_counts(t, conns)
        except OutOfOrder:
            beats = gap_counts(heartbeat_gaps(load_section(t, *SECTIONS["health"])))
        source = heartbeat_source(conns)
    else:
        events, beats, source = t, gap_counts(heartbeat_gaps(t)), heartbeat_source(t)
    bl = blocked(events)
    fl = flow(events)
    return {
        "heartbeat_late": beats["late"],
        "heartbeat_missed": beats["missed"],
        "heartbeat_source": source,
        "blocked": int(len(bl)),
        "blocked_ms_total": _num(bl["duration_ms"].sum()) if len(bl) else 0.0,
        "still_blocked": int((bl["status"] == "still-blocked").sum()) if len(bl) else 0,
        "flow_pauses": int((~fl["active"].fillna(True).astype(bool)).sum()) if len(fl) else 0,
        **unacked_health,
        "heartbeat_unknown": beats["unknown"],
    }


# the parts of stats, in the order they are computed (:func:`stats_parts`); health reads what
# consumer_ack found of unacked deliveries, so it comes after it
STATS_PARTS = (
    "transit", "rpc", "method_rtt", "connection_setup", "span", "errors", "counts", "confirm", "consumer_ack",
    "throughput", "health", "amqp10",
)  # fmt: skip


def stats(t, **options) -> dict:
    """The stats summary of a dissect output (Tables, directory or capture): a JSON-able dict.

    Top-level keys: ``stats_version``, ``captures``, ``connections``, ``versions``,
    ``span``, ``latency`` (one entry per kind in :data:`LATENCY_KINDS`),
    ``errors``, ``throughput``, ``methods``, ``anomalies``, ``health``.
    See docs/analysis.md for every field.  ``options`` (:func:`stats_parts`' keywords):
    ``bucket``, the throughput bucket ("1s"); ``latencies``: a precomputed
    :func:`amqpcap.analysis.all_latencies` result, to avoid computing it twice.  Without it each
    pairing is computed, summarised and dropped before the next; ``on_latency(kind, frame)``, when
    given, is called with each (e.g. to keep what a caller needs of it); of a dissect output
    directory, a pairing computed in a pass over its tables (:data:`STREAMED`) hands it the matched
    pairs' latencies (an array, in no particular order: summarised in place first) instead.
    ``on_section(section, tables)``, when given, is called after each section (:data:`SECTIONS`)
    with a function giving the tables it read (the report draws figures from them: on a directory
    they are loaded once for both, and only when asked for).  ``on_unacked``, when given, is
    handed the unacked counts over time of a consumer-ack pass over a directory's tables (see
    :func:`~amqpcap.analysis.streamed_acks.streamed_acks`); a pairing of loaded tables hands
    ``on_latency`` its frame instead.  ``aside``: the parts computed in a forked process
    (default :data:`ASIDE`, of a small output :data:`SMALL_ASIDE`; ``()``: all in this one), see
    :func:`stats_parts`.
    """
    return stats_of_parts(stats_parts(t, STATS_PARTS, **{"aside": _aside(t), **options}))


# the parts stats computes in a second process while this one computes the others (of a dissect
# output directory): about half of the CPU each (consumer acks and health, the costliest, stay here)
ASIDE = ("transit", "rpc", "confirm", "throughput")
# and of a small output (SMALL_OUTPUT), the errors too: the parts left here are then mostly fixed
# costs (loads of few rows, frames of no row), those aside passes over rows (0.1 GB capture: 0.95 s
# of CPU here against 0.66 s aside with ASIDE; 0.85 / 0.85 with this); at 1 GB the parts aside are
# the longer already (8.7 s against 6.8 s)
SMALL_ASIDE = ("transit", "rpc", "errors", "confirm", "throughput")


# the Parquet bytes of a dissect output under which it is small (SMALL_ASIDE): a capture of about
# 0.2 GB (0.1 GB: 17 MB of tables)
SMALL_OUTPUT = 32 << 20


def _aside(t) -> tuple:
    """:func:`stats`' parts computed aside by default for ``t``."""
    return SMALL_ASIDE if small_output(t) else ASIDE


# the Parquet bytes of a dissect output under which its passes keep arrays under 4 MiB on the
# heap (SMALL_MMAP_THRESHOLD): a 1.5 GB capture of small messages (1 GB: 171 MB of tables; 4 GB:
# 684 MB, whose peak then grows by ~40 MB)
SMALL_MMAP_OUTPUT = 256 << 20


def pool_threshold(src) -> int:
    """:func:`~amqpcap.analysis._common.malloc_pool`'s mmap threshold for the passes over ``src``:
    higher for an output under :data:`SMALL_MMAP_OUTPUT` (see ``_common.MMAP_THRESHOLD``)."""
    return SMALL_MMAP_THRESHOLD if small_output(src, SMALL_MMAP_OUTPUT) else MMAP_THRESHOLD


def small_output(src, under: int | None = None) -> bool:
    """Whether ``src`` is a dissect output directory of under ``under`` (default
    :data:`SMALL_OUTPUT`) bytes of tables."""
    return is_output_dir(src) and output_bytes(src) < (SMALL_OUTPUT if under is None else under)


def stats_parts(
    t,
    parts=STATS_PARTS,
    *,
    bucket: str = "1s",
    latencies: dict | None = None,
    on_latency=None,
    on_section=None,
    on_unacked=None,
    aside=(),
) -> dict:
    """The ``parts`` (of :data:`STATS_PARTS`, in its order; health needs consumer_ack) of
    :func:`stats`, each computed as :func:`stats` computes it, as a dict :func:`stats_of_parts`
    turns into the summary: ``{"latency": {kind: summary}, part: result, ...}``.  Parts computed
    apart (e.g. by several processes) give the same summary once their dicts are merged.
    ``aside``: those of ``parts`` computed by a forked child process while this one computes the
    others (of a dissect output directory, on a system that forks; else here, in order); its
    ``on_latency`` / ``on_unacked`` calls are made here once it is done, then ``on_section``'s."""
    src = stats_source(t)
    aside = (
        tuple(p for p in STATS_PARTS if p in aside and p in parts)
        if isinstance(src, str) and can_fork()
        else ()
    )
    if "health" in parts and ("health" in aside) != ("consumer_ack" in aside):
        raise ValueError("health and consumer_ack are computed on one side (health reads unacked)")
    if not aside:
        return _stats_parts(src, parts, bucket, latencies, on_latency, on_section, on_unacked)
    hooks = {"on_latency": on_latency, "on_unacked": on_unacked}
    calls: list = []  # the child's hook calls (name, arguments), made here after it
    recorded = {k: None if fn is None else functools.partial(_record, calls, k) for k, fn in hooks.items()}
    child = Forked(lambda: (_stats_parts(src, aside, bucket, latencies, **recorded), calls))
    here = tuple(p for p in parts if p not in aside)
    got = _stats_parts(src, here, bucket, latencies, on_latency, on_section, on_unacked)
    theirs, calls = child.result()
    for name, args in calls:
        hooks[name](*args)
    got["latency"].update(theirs.pop("latency"))
    got.update(theirs)
    if on_section is not None:
        tables = Sections(src)
        for section in aside:
            on_section(section, lambda: tables(section))  # noqa: B023 (called right away)
        tables.close()
    return got


def _record(calls: list, name: str, *args) -> None:
    calls.append((name, args))


def _stats_parts(src, parts, bucket, latencies, on_latency=None, on_section=None, on_unacked=None) -> dict:
    """:func:`stats_parts` in this process."""
    got: dict = {"latency": {}}

    def put(key, fn):
        return lambda t: got.__setitem__(key, fn(t))

    stream = latencies is None and isinstance(src, str)
    tables = Sections(src)

    def pairing(kind):
        if stream and kind in STREAMED:
            kw = {"on_timeline": on_unacked} if kind == "consumer_ack" and on_unacked is not None else {}
            return _StreamedStep(kind, got, src, tables, on_latency, **kw)
        return _pairing_step(kind, got, latencies, on_latency)

    # section -> step, computed one after the other in STATS_PARTS' order, memory given back in
    # between; the sections of one group (GROUPS) in a row, on one load; transit and rpc first,
    # while the process is fresh: turning body hashes to codes is the biggest transient of a load
    steps = {
        "span": put("span", span_summary),
        "errors": put("errors", lambda t: error_groups(error_summary(error_tables(t, src)))),
        "counts": put("counts", _counts_part),
        "throughput": put("throughput", lambda t: _throughput(t, bucket)),
        "health": put("health", lambda t: _health(t, got["unacked"])),
        "amqp10": put("amqp10", lambda t: amqp10.stats_part(t, latency_summary)),
    }
    with malloc_pool(pool_threshold(src), keep=small_output(src)), batches.shared_reads(small_output(src)):
        for section in (p for p in STATS_PARTS if p in parts):
            step = steps[section] if section in steps else pairing(section)
            if isinstance(step, _StreamedStep):
                step()
            else:
                step(tables(section))
            if on_section is not None:
                on_section(section, lambda: tables(section))  # noqa: B023 (called right away)
            release_memory()
        tables.close()
    return got


def stats_of_parts(got: dict) -> dict:
    """The :func:`stats` summary of the dict of every part (:func:`stats_parts`)."""
    counts = got["counts"]
    return {
        "stats_version": STATS_VERSION,
        "captures": counts["captures"],
        "connections": counts["connections"],
        "versions": counts["versions"],
        "span": got["span"],
        "latency": {
            **{kind: got["latency"][kind] for kind in LATENCY_FUNCTIONS},
            "settlement": got["amqp10"]["settlement"],
        },
        "outcomes": got["amqp10"]["outcomes"],
        "errors": sorted(got["errors"] + got["amqp10"]["errors"], key=lambda e: -e["count"]),
        "throughput": got["throughput"],
        "methods": counts["methods"],
        "anomalies": counts["anomalies"],
        "health": amqp10.with_health(got["health"], got["amqp10"]),
    }


def _counts_part(t) -> dict:
    """stats' captures, connection and version counts, method and anomaly counts (of a dissect
    output directory, the methods and anomalies counted a batch at a time)."""
    if is_output_dir(t):
        c = load_section(t, {"connections": SECTIONS["counts"][0]["connections"]}).connections
        captures, methods = _batch_counts(t, "methods", "method")
        anomalies = _batch_counts(t, "anomalies", "kind", captures=False)[1]
    else:
        c = t.connections
        captures = {str(x) for x in t.methods["capture"].dropna().unique()}
        methods, anomalies = _counts(t.methods["method"]), _counts(t.anomalies["kind"])
    return {
        "captures": sorted(captures | {str(x) for x in c["capture"].dropna().unique()}),
        "connections": int(len(c)),
        "versions": _counts(c["version"]) if len(c) else {},
        "methods": dict(sorted(methods.items(), key=lambda kv: (-kv[1], kv[0]))),
        "anomalies": dict(sorted(anomalies.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def _batch_counts(directory, name: str, column: str, captures: bool = True) -> tuple[set, dict]:
    """The captures of table ``name`` and the rows per value of its ``column``, a batch at a time."""
    seen, counts = set(), {}
    for b in batches.tables(directory, name, ["capture", column] if captures else [column]):
        if captures:
            seen.update(str(x) for x in pc.unique(b.column("capture")).to_pylist() if x is not None)
        for v in pc.value_counts(b.column(column)).to_pylist():
            if v["values"] is not None:
                counts[str(v["values"])] = counts.get(str(v["values"]), 0) + v["counts"]
    return seen, counts


# --------------------------------------------------------------------------- text rendering


def table(headers, rows, align=None) -> str:
    """A plain fixed-width text table (right-aligned numbers)."""
    rows = [["" if v is None else str(v) for v in r] for r in rows]
    headers = [str(h) for h in headers]
    if align is None:
        align = ["r" if rows and all(_isnum(r[i]) for r in rows) else "l" for i in range(len(headers))]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def fmt(cells):
        return "  ".join(
            c.rjust(w[i]) if align[i] == "r" else c.ljust(w[i]) for i, c in enumerate(cells)
        ).rstrip()

    lines = [fmt(headers), "  ".join("-" * x for x in w)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def _isnum(s: str) -> bool:
    if s in ("", "-"):
        return True
    try:
        float(s.replace(",", ""))
        return True
    except ValueError:
        return False


def _opt(v):
    return "-" if v is None else v


def _ms(v):
    return "-" if v is None else f"{v:,.3f}"


CONNECTION_COLS = [
    "capture",
    "tcp_stream",
    "client",
    "server",
    "version",
    "server_product",
    "connection_name",
    "methods",
    "messages",
    "duration_s",
    "bytes",
    "closed",
]


def connections_table(t, limit: int | None = None) -> pd.DataFrame:
    """One row per connection, busiest first (messages, then methods): ``capture``, ``tcp_stream``,
    ``client`` / ``server`` (``ip:port``), ``version``, ``server_product``, ``connection_name``,
    ``methods``, ``messages``, ``duration_s``, ``bytes`` (both directions), ``closed`` (``closed_by``,
    with the reply code when not 200 and the closing packet's frame number, then a reset that
    followed, e.g. ``client-fin #40, server-rst #41``; ``open`` when never closed).
    ``limit``: the busiest ``limit``; ``attrs["total"]`` is the number of connections.  Of a
    dissect output directory the methods and messages are counted a batch at a time."""
    streamed = is_output_dir(t)
    if streamed:
        directory, t = t, load_section(t, {"connections": _CONN_TEXT})
    t = as_tables(t)
    c = t.connections
    keys = ["capture", "tcp_stream"]
    n = len(c)
    counts = {}
    for name, df in (("methods", t.methods), ("messages", t.messages)):
        if streamed:
            per = _row_counts(directory, name, keys)
        else:
            per = df.groupby(keys, dropna=False, observed=True).size().reset_index() if len(df) else None
        counts[name] = (
            c[keys]
            .merge(per.set_axis([*keys, name], axis=1), on=keys, how="left")[name]
            .fillna(0)
            .astype("int64")
            .to_numpy()
            if per is not None
            else np.zeros(n, dtype=np.int64)
        )
    return connection_rows(c, counts["methods"], counts["messages"], limit)


def _row_counts(directory, name: str, keys: list) -> pd.DataFrame | None:
    """The rows of table ``name`` per ``keys`` (string keys plain), as a frame of the keys and the
    count (None: no row), counted a batch at a time by Arrow's grouping of the columns (no frame
    of a batch)."""
    parts = [
        pa.table([batches.plain_strings(t.column(k).combine_chunks()) for k in keys], names=keys)
        .group_by(keys)
        .aggregate([([], "count_all")])
        for t in batches.tables(directory, name, keys)
    ]
    if not parts:
        return None
    both = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if len(parts) > 1:
        both = both.group_by(keys).aggregate([("count_all", "sum")])
    return both.to_pandas()


def connection_rows(c: pd.DataFrame, methods, messages, limit: int | None = None, total: int | None = None):
    """:func:`connections_table` of the connection rows ``c`` and each one's ``methods`` and
    ``messages`` counts (arrays in ``c``'s order); ``total``: the number of connections, if ``c``
    holds only some (``stats --spark`` counts with Spark and hands over the busiest)."""
    keys = ["capture", "tcp_stream"]
    out = c[keys].copy()
    n = len(c) if total is None else total
    out["methods"] = np.asarray(methods, dtype=np.int64)
    out["messages"] = np.asarray(messages, dtype=np.int64)
    # busiest first; the text columns made for the rows shown only (a million conversations: a
    # few strings, not millions)
    order = (
        out.reset_index(drop=True).sort_values(["messages", "methods"], ascending=False, kind="stable").index
    )
    order = order.to_numpy()[:limit] if limit is not None else order.to_numpy()
    c = c.iloc[order].reset_index(drop=True)
    out = out.iloc[order].reset_index(drop=True)
    out["client"] = c["client_ip"].astype(str) + ":" + c["client_port"].astype(str)
    out["server"] = c["server_ip"].astype(str) + ":" + c["server_port"].astype(str)
    out["version"] = c["version"]
    out["server_product"] = c["server_product"]
    out["connection_name"] = c["connection_name"]
    out["duration_s"] = (c["end_ts"] - c["ts"]).dt.total_seconds().astype("float64")
    out["bytes"] = (c["bytes_c2s"].fillna(0) + c["bytes_s2c"].fillna(0)).astype("int64")
    code = c["close_reply_code"]
    suffix = (" " + code.astype(str)).where(code.notna() & (code != 200), "")
    out["closed"] = (
        c["closed_by"].fillna("open").astype(str)
        + suffix.astype(str)
        + _frame_ref(c["close_frame"])
        + _later_reset(c)
    )
    out = out[CONNECTION_COLS]
    out.attrs["total"] = n
    return out


def _frame_ref(frames: pd.Series) -> pd.Series:
    """`` #N`` (Wireshark's frame.number) where ``frames`` has one, else ``""``."""
    return (" #" + frames.astype("string")).fillna("").astype(str)


def _later_reset(c: pd.DataFrame) -> pd.Series:
    """``, server-rst #N`` where a reset other than the closing packet followed the close."""
    other = c["rst_by"].notna() & (c["rst_frame"] != c["close_frame"]).fillna(True)
    text = ", " + c["rst_by"].astype("string") + "-rst" + _frame_ref(c["rst_frame"])
    return text.where(other, "").fillna("").astype(str)


def connection_cells(df: pd.DataFrame, with_capture: bool) -> tuple[list, list]:
    """Headers and display rows of :func:`connections_table` for the text and HTML tables."""
    heads = (["capture"] if with_capture else []) + [
        "stream",
        "client",
        "server",
        "version",
        "server product",
        "name",
        "methods",
        "msgs",
        "duration s",
        "bytes",
        "closed",
    ]
    rows = []
    for r in df.itertuples(index=False):
        dur = r.duration_s
        rows.append(
            ([r.capture] if with_capture else [])
            + [
                r.tcp_stream,
                r.client,
                r.server,
                r.version if isinstance(r.version, str) else "-",
                r.server_product if isinstance(r.server_product, str) else "-",
                r.connection_name if isinstance(r.connection_name, str) else "",
                r.methods,
                r.messages,
                "-" if pd.isna(dur) else f"{dur:.3f}",
                r.bytes,
                r.closed,
            ]
        )
    return heads, rows


THROUGHPUT_HEADS = ["direction", "messages", "msg/s mean", "msg/s peak", "body B/s mean", "body B/s peak",
                    "wire B/s mean", "wire B/s peak"]  # fmt: skip


def throughput_cells(tp: dict, arrow: str) -> tuple[list, list]:
    """Headers and display rows of the stats ``throughput`` dict for the text and HTML tables: all,
    client ``arrow`` server, server ``arrow`` client."""
    rows = []
    for label, key in (("all", None), (f"client {arrow} server", "c2s"), (f"server {arrow} client", "s2c")):
        d = tp if key is None else tp.get(key, {})
        rates = [(d[k]["mean"], d[k]["peak"], unit) for k, unit in
                 (("msgs_per_s", ""), ("body_bytes_per_s", "B"), ("wire_bytes_per_s", "B"))]  # fmt: skip
        rows.append([label, f"{d.get('messages', 0):,}"] + [si(v, u) for m, p, u in rates for v in (m, p)])
    return THROUGHPUT_HEADS, rows


def frames_note(source) -> str:
    """What the frames and wire bytes of a throughput were counted from (``frames_source``)."""
    if source == "frames":
        return "frames and wire bytes counted in the frames table"
    if source == "estimate":
        return "frames and wire bytes estimated from methods and messages; dissect --frames counts them"
    return "no frames counted"


def render_text(
    s: dict, t=None, *, limit: int = BUSIEST_CONNECTIONS, connections: pd.DataFrame | None = None
) -> str:
    """Terminal tables for a :func:`stats` dict (and, when ``t`` is given, the
    busiest connections; or ``connections``, their :func:`connections_table` made elsewhere):
    connections, method counts, latency percentiles, top errors, throughput, health, anomalies."""
    out = []
    span = s.get("span", {})
    out.append(f"amqpcap stats: {', '.join(s.get('captures', [])) or '-'}")
    out.append(
        f"  {s['connections']} connection(s); versions: "
        + (", ".join(f"{k} x{v}" for k, v in s.get("versions", {}).items()) or "-")
        + (f"; span {span['duration_s']:.3f} s" if span.get("duration_s") is not None else "")
    )
    if span.get("time_outliers"):
        f = span["first_time_outlier"]
        out.append(
            f"  warning: {span['time_outliers']} packet(s) stamped far from the rest of their capture "
            f"(before 1990 or a year from its median; the span and rates include them): first "
            f"frame {f['frame_number']} of {f['capture']}, stream {f['tcp_stream']}, at {f['ts']}"
        )
    if t is not None or connections is not None:
        ct = (
            connections
            if connections is not None
            else connections_table(t if is_output_dir(t) else as_tables(t), limit)
        )
        n = ct.attrs["total"]
        if len(ct):
            several = len(s.get("captures", [])) > 1  # a capture column tells their conversations apart
            heads, rows = connection_cells(ct, several)
            out.append("")
            out.append(f"Connections (busiest {len(rows)} of {n})" if n > len(rows) else "Connections")
            align = (["l"] if several else []) + ["r", "l", "l", "l", "l", "l", "r", "r", "r", "r", "l"]
            out.append(table(heads, rows, align=align))
    meths = s.get("methods", {})
    if meths:
        out.append("")
        items = list(meths.items())
        more = f" (top {limit} of {len(items)})" if len(items) > limit else ""
        out.append(f"Methods{more}")
        out.append(table(["method", "count"], [[k, f"{v:,}"] for k, v in items[:limit]]))
    out.append("")
    out.append("Latency (ms)")
    lrows = []
    for kind in LATENCY_KINDS + ("settlement",):  # settlement: AMQP 1.0
        d = s["latency"].get(kind, {})
        extra = []
        for k in (
            "missing",
            "errors",
            "acked",
            "nacked",
            "unconfirmed",
            "rejected",
            "unsettled",
            "redeliveries",
        ):
            if k in d and d[k]:
                extra.append(f"{k}={d[k]}")
        lrows.append(
            [
                kind,
                d.get("count", 0),
                _ms(d.get("p50_ms")),
                _ms(d.get("p90_ms")),
                _ms(d.get("p99_ms")),
                _ms(d.get("max_ms")),
                " ".join(extra),
            ]
        )
    out.append(
        table(
            ["kind", "count", "p50", "p90", "p99", "max", "counts"],
            lrows,
            align=["l", "r", "r", "r", "r", "r", "l"],
        )
    )
    by_m = s["latency"].get("method_rtt", {}).get("by_method", {})
    if by_m:
        items = sorted(by_m.items(), key=lambda kv: -kv[1]["count"])[:limit]
        out.append("")
        out.append("Method round trips by request (ms)")
        out.append(
            table(
                ["request", "count", "p50", "p90", "p99", "max"],
                [
                    [k, d["count"], _ms(d["p50_ms"]), _ms(d["p90_ms"]), _ms(d["p99_ms"]), _ms(d["max_ms"])]
                    for k, d in items
                ],
                align=["l", "r", "r", "r", "r", "r"],
            )
        )
    out.append("")
    errs = s.get("errors", [])
    if errs:
        more = f" (top {limit} of {len(errs)})" if len(errs) > limit else ""
        several = len(s.get("captures", [])) > 1
        out.append(f"Errors{more} (first: Wireshark frame.number of the first occurrence)")
        erows = []
        for e in errs[:limit]:
            for x in e.get("texts") or [dict(e, text=None)]:
                erows.append(
                    [
                        x["count"],
                        e["code"] if e["code"] is not None else "-",
                        e["name"] or "-",
                        e["class"] or "-",
                        e["method"] or "-",
                        e.get("failing_method") or "-",
                        e["kind"],
                    ]
                    + ([x.get("first_capture") or "-"] if several else [])
                    + [_opt(x.get("first_tcp_stream")), _opt(x.get("first_frame")), x.get("text") or ""]
                )
        out.append(
            table(
                ["count", "code", "name", "class", "method", "on", "kind"]
                + (["capture"] if several else [])
                + ["stream", "first", "reply text"],
                erows,
                align=["r", "r", "l", "l", "l", "l", "l"] + (["l"] if several else []) + ["r", "r", "l"],
            )
        )
    else:
        out.append("Errors: none")
    tp = s.get("throughput", {})
    out.append("")
    out.append(f"Throughput (bucket {tp.get('bucket_s')} s; {frames_note(tp.get('frames_source'))})")
    heads, trow = throughput_cells(tp, "->")
    out.append(table(heads, trow, align=["l"] + ["r"] * 7))
    h = s.get("health")
    if h:
        out.append("")
        out.append("Health: " + ", ".join(f"{k}={v}" for k, v in h.items()))
    an = s.get("anomalies", {})
    out.append("")
    out.append("Anomalies: " + (", ".join(f"{k}={v}" for k, v in an.items()) if an else "none"))
    return "\n".join(out) + "\n"
