"""``amqpcap stats OUT --spark`` (``amqpcap.spark.stats``): the ``stats --json`` report, by Spark jobs.

The dict is the one :func:`amqpcap.analysis.stats` returns (docs/analysis.md),
computed without loading the tables into one process:

* pairings that need a conversation's state (method round trips, confirms,
  consumer acks, connection setup, errors, heartbeat gaps, blocked, flow,
  unacked vs prefetch) hash-partition the rows by (capture, tcp_stream) and
  call the pandas analysis functions once per partition (``mapInArrow``; a
  partition holds whole conversations);
* transit pairs publishes and deliveries across conversations: grouped by
  message id, then (for deliveries no publish matched by id) by exchange,
  routing key and body hash; RPC groups requests and replies by reply key and
  correlation id; each group runs the pandas pairing;
* counts, percentiles (Spark's ``percentile``: linear interpolation, as numpy,
  over latencies rounded to 1 µs), throughput buckets, span and the method /
  anomaly / version counts are Spark SQL aggregations.

Each group's rows are held by one task: a group is one conversation, one message
id or one content key, one RPC key.

Time columns are read as exact ns integers (``records.times.spark_exact``: the microsecond
timestamp and its ``_nanos`` companion).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from amqpcap.analysis import (
    amqp10,
    blocked,
    confirms,
    connection_setup,
    consumer_acks,
    flow,
    heartbeat_gaps,
    method_rtt,
    rpc,
    transit,
    unacked,
)
from amqpcap.analysis import errors as errors_frame
from amqpcap.analysis.failures import SUMMARY_COLS, order_error_summary
from amqpcap.analysis.summary import (
    BUSIEST_CONNECTIONS,
    SECTIONS,
    STATS_VERSION,
    TS_FAR_NS,
    TS_FLOOR_NS,
    error_groups,
    error_tables,
)
from amqpcap.analysis.tables import ANALYSIS_COLUMNS, TABLE_NAMES, Tables, arrow_to_pandas, empty_frame
from amqpcap.analysis.traffic import covered_buckets
from amqpcap.records.schema import SCHEMAS
from amqpcap.records.times import spark_exact
from amqpcap.spark.session import pandas_version_warning_off

__all__ = ["stats"]

# One row per pairing / error / health event of a group; aggregated with Spark SQL.
RESULT = (
    "kind string, status string, latency_ms double, method string, flag boolean, flag2 boolean, "
    "code int, name string, err_class string, value bigint, "
    # an error's reply text, failing method and where it happened (ts: ns since the epoch)
    "text string, failing string, capture string, tcp_stream int, frame bigint, ts bigint"
)
_RESULT_NAMES = [c.split()[0] for c in RESULT.split(", ")]
_PUBLISH = ("basic.publish", "message.transfer", "transfer")
_DELIVER = ("basic.deliver", "basic.get-ok", "message.transfer", "transfer")
_DIRECT_REPLY = "amq.rabbitmq.reply-to"


# --------------------------------------------------------------------------- executor side


# 0-10's list of {lower, upper}: Spark's conversion of a list of structs to Arrow costs tens of
# µs a row, null or not (most of the pairings' time), so it travels as text "l:u,l:u"
RANGES = "id_ranges"


def _ranges_as_text(F, df):
    """``df`` with its id_ranges (if any) as text (``_ranges_from_text`` reads it back)."""
    if RANGES not in df.columns:
        return df
    pair = F.transform(
        RANGES, lambda r: F.concat_ws(":", r["lower"].cast("string"), r["upper"].cast("string"))
    )
    return df.withColumn(RANGES, F.when(F.col(RANGES).isNotNull(), F.concat_ws(",", pair)))


def _ranges_from_text(col, type_) -> pa.Array:
    def one(v):
        if v is None:
            return None
        return [{"lower": int(a), "upper": int(b)} for a, b in (p.split(":") for p in v.split(",") if p)]

    return pa.array([one(v) for v in col.to_pylist()], type=type_)


def _tables(t: pa.Table, present: tuple, only=None) -> Tables:
    """The rows of one group (tagged ``_t`` with their table) as typed pandas Tables."""
    frames = {}
    for name in TABLE_NAMES:
        if only is not None and name not in only:
            frames[name] = empty_frame(name)
            continue
        sub = t.filter(pc.equal(t["_t"], name)) if "_t" in t.column_names else t
        cols = {f.name: sub[f.name] for f in SCHEMAS[name] if f.name in sub.column_names}
        if pa.types.is_string(cols.get(RANGES, pa.array([0])).type):
            cols[RANGES] = _ranges_from_text(cols[RANGES], SCHEMAS[name].field(RANGES).type)
        frames[name] = arrow_to_pandas(pa.table(cols), name)
    return Tables(**frames, source=None, present=present)


_RESULT_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("status", pa.string()),
        ("latency_ms", pa.float64()),
        ("method", pa.string()),
        ("flag", pa.bool_()),
        ("flag2", pa.bool_()),
        ("code", pa.int32()),
        ("name", pa.string()),
        ("err_class", pa.string()),
        ("value", pa.int64()),
        ("text", pa.string()),
        ("failing", pa.string()),
        ("capture", pa.string()),
        ("tcp_stream", pa.int32()),
        ("frame", pa.int64()),
        ("ts", pa.int64()),
    ]
)


def _out(rows: list[dict]) -> pa.Table:
    return pa.table({c: [r.get(c) for r in rows] for c in _RESULT_NAMES}, schema=_RESULT_SCHEMA)


def _val(v):
    """pandas scalar -> plain Python (NA / NaN -> None)."""
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return None
    return v.item() if hasattr(v, "item") else v


def _int(v):
    v = _val(v)
    return None if v is None else int(v)


def _column(values, type_) -> pa.Array:
    """A pandas column (or array) as Arrow of ``type_``, NA and NaN as null."""
    if isinstance(values, pd.Series):
        values = values.to_numpy(dtype=object, na_value=None)
    return pa.array(values, type=type_, from_pandas=True)


def _result(kind: str, n: int, **cols) -> pa.Table:
    """``n`` result rows of ``kind``: the given columns, null in the others."""
    arrays = [pa.array([kind] * n, pa.string())]
    for f in list(_RESULT_SCHEMA)[1:]:
        arrays.append(_column(cols[f.name], f.type) if f.name in cols else pa.nulls(n, f.type))
    return pa.Table.from_arrays(arrays, schema=_RESULT_SCHEMA)


def _latency_rows(
    kind: str, df: pd.DataFrame, status: str, method: str | None = None, flag: str | None = None
) -> pa.Table:
    cols = {"status": df[status], "latency_ms": df["latency_ms"]}
    if method:
        cols["method"] = df[method]
    if flag:
        cols["flag"] = df[flag]
    return _result(kind, len(df), **cols)


# the connection columns per_connection's sections read (analysis.summary.SECTIONS): the others
# would be null columns of every method and message row in the conversations' shuffle
_PER_CONNECTION_COLS = frozenset(
    c
    for section in ("light", "health", "confirm", "consumer_ack", "unacked")
    for c in SECTIONS[section][0]["connections"]
)


def per_connection(t: pa.Table, present: tuple) -> pa.Table:
    """Everything that needs one conversation's state, as result rows."""
    tb = _tables(t, present)
    acks = consumer_acks(tb)
    pairs = [
        _latency_rows("method_rtt", method_rtt(tb), "status", "request_method"),
        _latency_rows("confirm", confirms(tb), "outcome"),
        _latency_rows("consumer_ack", acks, "outcome", flag="redelivered"),
        _latency_rows("connection_setup", connection_setup(tb), "status"),
    ]
    rows = []
    err = errors_frame(error_tables(tb, tb))  # (the 1.0 errors: the amqp10 part's, as stats)
    ecols = err[
        [
            "kind",
            "code",
            "name",
            "class",
            "method",
            "failing_method",
            "text",
            "capture",
            "tcp_stream",
            "frame_number",
            "ts",
        ]
    ].astype(object)
    for kind, code, name, cls, method, failing, text, cap, st, frame, ts in ecols.itertuples(
        index=False, name=None
    ):
        rows.append(
            {
                "kind": "error",
                "status": _val(kind),
                "code": _int(code),
                "name": _val(name),
                "err_class": _val(cls),
                "method": _val(method),
                "failing": _val(failing),
                "text": _val(text),
                "capture": _val(cap),
                "tcp_stream": _int(st),
                "frame": _int(frame),
                "ts": None if pd.isna(ts) else pd.Timestamp(ts).value,
            }
        )
    gaps = heartbeat_gaps(tb)
    for missed, evidence in gaps[["missed", "evidence"]].astype(object).itertuples(index=False, name=None):
        rows.append({"kind": "heartbeat_gap", "flag": bool(_val(missed) or False), "status": _val(evidence)})
    bl = blocked(tb)
    for status, ms in bl[["status", "duration_ms"]].astype(object).itertuples(index=False, name=None):
        rows.append({"kind": "blocked", "status": _val(status), "latency_ms": _val(ms)})
    fl = flow(tb)
    for active in fl["active"].astype(object):
        rows.append({"kind": "flow", "flag": True if _val(active) is None else bool(active)})
    un = unacked(tb, acks=acks)
    if len(un):
        over = un["over_prefetch"].fillna(False).astype(bool)
        for (_ch,), g in un.assign(_over=over).groupby(["channel"], dropna=False, sort=False):
            mx = g["unacked"].max()
            rows.append({"kind": "unacked", "value": _val(mx), "flag": bool(g["_over"].any())})
    return pa.concat_tables(pairs + [_out(rows)])


def per_transit_group(t: pa.Table, match: str) -> pa.Table:
    """Publishes and deliveries of whole message-id (or content key) groups: the pandas transit pairing."""
    tb = _tables(t, (), only=("messages",))
    tr = transit(tb)
    tr = tr[tr["match"] == match]
    flag2 = tr["redelivered"].astype("boolean").fillna(False)
    return _result("transit", len(tr), latency_ms=tr["latency_ms"], flag=tr["first"], flag2=flag2)


_IDENTITY = ["capture", "tcp_stream", "direction", "frame_number", "stream_offset"]


def per_rpc_group(t: pa.Table) -> pa.Table:
    """Requests and reply candidates of whole (reply key, correlation id) groups: the pandas RPC pairing.

    A message is in a group as a request (``_req``) and / or as a reply candidate. A request
    (``_is_request``: so in the whole output) is never a reply, so one that is here only as a
    candidate (its own group is elsewhere) is left out: each request is paired, and counted,
    in its own group alone. A candidate that is not a request loses its reply_to, so the
    pairing does not take it for one; an s2c message that is no request keeps it in its own
    group, where the c2s request with its key is too."""
    t = t.drop_columns([c for c in ("_k",) if c in t.column_names])
    t = _dedupe_roles(t)
    here = pc.or_(t["_req"], pc.invert(t["_is_request"]))
    t = t.filter(here)
    reply_to = pc.if_else(t["_req"], t["reply_to"], pa.nulls(len(t), pa.string()))
    t = t.set_column(t.schema.get_field_index("reply_to"), "reply_to", reply_to)
    r = rpc(_tables(t, (), only=("messages",)), columns=["status", "latency_ms"])
    return _result("rpc", len(r), status=r["status"], latency_ms=r["latency_ms"])


# --------------------------------------------------------------------------- driver side


def _whole_partition(fn, *args):
    """mapInArrow function: ``fn`` on all rows of a partition at once.  Partitions are hashed
    by the group key, so each holds whole groups, and one pandas call serves many groups
    (per-group calls cost tens of ms each)."""

    def apply(batches):
        batches = list(batches)
        if not batches or not sum(b.num_rows for b in batches):
            return
        yield from fn(pa.Table.from_batches(batches), *args).to_batches()

    return apply


def _grouped(df, keys, parts: int, fn, *args):
    return df.repartition(parts, *keys).mapInArrow(_whole_partition(fn, *args), RESULT)


PARTITION_BYTES = 16 << 20  # Parquet bytes per pairing partition (several times that in pandas memory)


def _partitions(spark, out: str) -> int:
    size = sum(os.path.getsize(os.path.join(root, f)) for root, _d, files in os.walk(out) for f in files)
    return max(2 * spark.sparkContext.defaultParallelism, -(-size // PARTITION_BYTES))


def _read(spark, out: str, name: str, place: bool = False):
    """Table ``name`` of ``out`` (None if absent), times as exact ns; ``place``: with each row's
    ``_file`` and ``_row`` (the order ``amqpcap.load`` reads the rows in)."""
    path = os.path.join(out, name)
    if not os.path.isdir(path):
        return None
    df = spark.read.parquet(path)
    if place:
        df = df.select("*", df["_metadata.file_path"].alias("_file"), df["_metadata.row_index"].alias("_row"))
    return spark_exact(df)


def _lean(df, name: str):
    """``df`` (table ``name``) with only the columns the analysis reads (``ANALYSIS_COLUMNS``)."""
    want = set(ANALYSIS_COLUMNS[name])
    return df.select(*[c for c in df.columns if c in want])


# what the Connections table of the text report shows of a connection (summary.connection_rows)
_CONNECTION_COLS = [
    "capture",
    "tcp_stream",
    "client_ip",
    "client_port",
    "server_ip",
    "server_port",
    "version",
    "server_product",
    "connection_name",
    "ts",
    "end_ts",
    "bytes_c2s",
    "bytes_s2c",
    "close_reply_code",
    "closed_by",
    "close_frame",
    "rst_by",
    "rst_frame",
]


def busiest_connections(spark, out: str, limit: int = BUSIEST_CONNECTIONS) -> pd.DataFrame:
    """The Connections table of ``amqpcap stats`` (:func:`amqpcap.analysis.summary.connections_table`)
    for the output ``out``: methods and messages counted per connection by Spark, the busiest
    ``limit`` collected (ties in the order the library reads the rows)."""
    from pyspark.sql import functions as F

    from amqpcap.analysis.summary import connection_rows

    keys = ["capture", "tcp_stream"]
    conn = _read(spark, out, "connections", place=True)
    j = conn.select(*_CONNECTION_COLS, "_file", "_row")
    for name in ("methods", "messages"):
        counts = _read(spark, out, name).groupBy(*keys).agg(F.count(F.lit(1)).alias(name))
        j = j.join(counts, on=keys, how="left")
    j = j.fillna(0, subset=["methods", "messages"])
    order = [F.desc("messages"), F.desc("methods"), F.asc("_file"), F.asc("_row")]
    with pandas_version_warning_off():
        top = j.orderBy(*order).limit(limit).toArrow()
    c = arrow_to_pandas(top.select(_CONNECTION_COLS), "connections", _CONNECTION_COLS)
    return connection_rows(c, top["methods"].to_numpy(), top["messages"].to_numpy(), limit, conn.count())


def _num(x, nd=3):
    return None if x is None else round(float(x), nd)


def _summary(row) -> dict:
    """count / p50 / p90 / p99 / max from an aggregated row (nulls when count is 0)."""
    if not row or not row["n"]:
        return {"count": 0, "p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None}
    p = row["p"]
    return {
        "count": int(row["n"]),
        "p50_ms": _num(p[0]),
        "p90_ms": _num(p[1]),
        "p99_ms": _num(p[2]),
        "max_ms": _num(row["mx"]),
    }


def _lat_agg(F):
    # Spark's exact percentile keeps a count per distinct value: rounded to the 1 µs the report
    # shows, the values stay few whatever the row count, and the result moves by < 1 µs.
    finite = F.when(~F.isnan("latency_ms"), F.round("latency_ms", 3))
    pcts = F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99))
    return [F.count(finite).alias("n"), F.percentile(finite, pcts).alias("p"), F.max(finite).alias("mx")]


# which result rows each latency summary is over (stats.py: the settled / first ones)
_SUMMARISED = {
    "method_rtt": ("ok",),
    "confirm": ("ack", "nack"),
    "consumer_ack": ("ack", "nack", "reject"),
    "rpc": ("ok", "ok-delivery"),
    "connection_setup": ("ok",),
}


def _summaries(res, F) -> dict:
    """One job: the latency summary of every kind (plus one for method_rtt by method)."""
    sel = F.lit(None).cast("string")
    for kind, statuses in _SUMMARISED.items():
        sel = F.when((F.col("kind") == kind) & F.col("status").isin(*statuses), F.lit(kind)).otherwise(sel)
    sel = F.when((F.col("kind") == "transit") & F.col("flag"), F.lit("transit")).otherwise(sel)
    rows = (
        res.withColumn("_sel", sel)
        .filter(F.col("_sel").isNotNull())
        .groupBy("_sel")
        .agg(*_lat_agg(F))
        .collect()
    )
    out = {k: _summary(None) for k in list(_SUMMARISED) + ["transit"]}
    out.update({r["_sel"]: _summary(r) for r in rows})
    by_method = (
        res.filter((F.col("kind") == "method_rtt") & (F.col("status") == "ok"))
        .groupBy("method")
        .agg(*_lat_agg(F))
        .collect()
    )
    by_method.sort(key=lambda r: str(r["method"]))
    out["by_method"] = {str(r["method"]): _summary(r) for r in by_method}
    return out


def _tally(res, F) -> dict:
    """One job: result rows counted by every field the report distinguishes, with the
    blocked durations summed and the largest unacked count."""
    keys = ["kind", "status", "flag", "flag2", "code", "name", "err_class", "method"]
    method = F.when(F.col("kind") == "error", F.col("method"))  # request methods are not counted here
    rows = (
        res.withColumn("method", method)
        .groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.when(~F.isnan("latency_ms"), F.col("latency_ms"))).alias("ms"),
            F.max("value").alias("mx"),
        )
        .collect()
    )
    return [r.asDict() for r in rows]


def _latency(summ: dict, tally: list) -> dict:
    def n(kind, status=None, flag=None, flag2=None):
        return sum(
            r["n"]
            for r in tally
            if r["kind"] == kind
            and (status is None or r["status"] == status)
            and (flag is None or r["flag"] == flag)
            and (flag2 is None or r["flag2"] == flag2)
        )

    return {
        "method_rtt": dict(
            summ["method_rtt"],
            missing=n("method_rtt", "missing"),
            errors=n("method_rtt", "error"),
            by_method=summ["by_method"],
        ),
        "confirm": dict(
            summ["confirm"],
            acked=n("confirm", "ack"),
            nacked=n("confirm", "nack"),
            unconfirmed=n("confirm", "unconfirmed"),
        ),
        "consumer_ack": dict(
            summ["consumer_ack"],
            acked=n("consumer_ack", "ack"),
            nacked=n("consumer_ack", "nack"),
            rejected=n("consumer_ack", "reject"),
            unsettled=n("consumer_ack", "unsettled"),
            recovered=n("consumer_ack", "recovered"),
            redelivered=n("consumer_ack", flag=True),
        ),
        "transit": dict(summ["transit"], deliveries=n("transit"), redeliveries=n("transit", flag2=True)),
        "rpc": dict(summ["rpc"], missing=n("rpc", "missing")),
        "connection_setup": dict(summ["connection_setup"], missing=n("connection_setup", "missing")),
    }


def _errors(res, F) -> list[dict]:
    """Each distinct error (with its reply text) counted and located by Spark, then grouped as
    the pandas report groups them (:func:`amqpcap.analysis.summary.error_groups`)."""
    keys = ["status", "code", "name", "err_class", "method", "failing", "text"]
    # first occurrence: errors() orders by capture, then time, then stream
    first = F.min(F.struct("capture", "ts", "tcp_stream", "frame")).alias("first")
    rows = (
        res.filter(F.col("kind") == "error").groupBy(*keys).agg(F.count(F.lit(1)).alias("n"), first).collect()
    )
    items = []
    for r in rows:
        f = r["first"]
        items.append(
            {
                "kind": r["status"],
                "code": r["code"],
                "name": r["name"],
                "class": r["err_class"],
                "method": r["method"],
                "failing_method": r["failing"],
                "text": r["text"],
                "count": int(r["n"]),
                "first_capture": f["capture"],
                "first_tcp_stream": f["tcp_stream"],
                "first_frame": f["frame"],
                "first_ts": None if f["ts"] is None else pd.Timestamp(f["ts"], tz="UTC"),
            }
        )
    if not items:
        return []
    items.sort(
        key=lambda d: tuple(
            (d[k] is None, d[k]) for k in ("first_capture", "first_ts", "first_tcp_stream", "first_frame")
        )
    )
    summary = pd.DataFrame(items, columns=list(SUMMARY_COLS)).astype({"code": "Int32", "count": "Int64"})
    return error_groups(order_error_summary(summary))


def _health(tally: list, source: str) -> dict:
    def rows(kind):
        return [r for r in tally if r["kind"] == kind]

    gaps, bl, fl, un = rows("heartbeat_gap"), rows("blocked"), rows("flow"), rows("unacked")
    n_blocked = sum(r["n"] for r in bl)
    maxes = [r["mx"] for r in un if r["mx"] is not None]
    return {
        "heartbeat_late": sum(r["n"] for r in gaps if r["status"] != "unknown"),
        "heartbeat_missed": sum(r["n"] for r in gaps if r["flag"]),
        "heartbeat_source": source,
        "blocked": n_blocked,
        "blocked_ms_total": _num(sum(r["ms"] or 0.0 for r in bl)) if n_blocked else 0.0,
        "still_blocked": sum(r["n"] for r in bl if r["status"] == "still-blocked"),
        "flow_pauses": sum(r["n"] for r in fl if r["flag"] is False),
        "max_unacked": int(max(maxes)) if maxes else 0,
        "channels_over_prefetch": sum(r["n"] for r in un if r["flag"]),
        "heartbeat_unknown": sum(r["n"] for r in gaps if r["status"] == "unknown"),
    }


def _throughput(F, msgs, methods, frames, bucket_s: float = 1.0) -> dict:
    """``totals`` with 1 s buckets: frames and wire bytes exact from ``frames`` when present,
    else estimated from methods and messages (see amqpcap.analysis.throughput)."""
    bucket_ns = int(bucket_s * 1e9)
    over = F.when(F.col("version") == "0-10", F.lit(12)).otherwise(F.lit(8)).cast("long")
    size = F.coalesce(F.col("body_size"), F.col("body_received"), F.lit(0)).cast("long")
    bf = F.coalesce(F.col("body_frames").cast("long"), F.lit(0))
    zero = F.lit(0).cast("long")
    ev_cols = ["capture", "ts", "direction", "messages", "body_bytes", "frames", "wire_bytes"]
    one = F.lit(1).cast("long")
    if frames is not None:
        mev = msgs.select(
            "capture",
            "ts",
            "direction",
            one.alias("messages"),
            size.alias("body_bytes"),
            zero.alias("frames"),
            zero.alias("wire_bytes"),
        )
        fev = frames.select(
            "capture",
            "ts",
            "direction",
            zero.alias("messages"),
            zero.alias("body_bytes"),
            F.lit(1).cast("long").alias("frames"),
            F.coalesce(F.col("wire_size"), F.lit(0)).cast("long").alias("wire_bytes"),
        )
        source = "frames"
    else:
        mev = msgs.select(
            "capture",
            "ts",
            "direction",
            one.alias("messages"),
            size.alias("body_bytes"),
            (1 + bf).alias("frames"),
            (over * (1 + bf) + size).alias("wire_bytes"),
        )
        fev = methods.select(
            "capture",
            "ts",
            "direction",
            zero.alias("messages"),
            zero.alias("body_bytes"),
            F.lit(1).cast("long").alias("frames"),
            (F.coalesce("frame_size", F.lit(0)).cast("long") + over).alias("wire_bytes"),
        )
        source = "estimate"
    ev = mev.select(*ev_cols).unionByName(fev.select(*ev_cols)).filter(F.col("ts").isNotNull())
    ev = ev.withColumn("b", F.floor(F.col("ts") / F.lit(bucket_ns)).cast("long"))
    values = ["messages", "body_bytes", "frames", "wire_bytes"]
    rates = {
        "messages": "msgs_per_s",
        "body_bytes": "body_bytes_per_s",
        "frames": "frames_per_s",
        "wire_bytes": "wire_bytes_per_s",
    }
    per = ev.groupBy("capture", "b", "direction").agg(*[F.sum(v).alias(v) for v in values])
    per.cache()
    # a rate's denominator: each capture's first to last bucket, overlaps once (totals' buckets)
    spans = per.groupBy("capture").agg(F.min("b").alias("lo"), F.max("b").alias("hi")).collect()
    nb = covered_buckets((int(r["lo"]), int(r["hi"])) for r in spans)
    per = per.groupBy("b", "direction").agg(*[F.sum(v).alias(v) for v in values])
    both = per.groupBy("b").agg(*[F.sum(v).alias(v) for v in values])
    aggs = [F.sum(v).alias(f"s_{v}") for v in values] + [F.max(v).alias(f"m_{v}") for v in values]
    tot = both.agg(*aggs).collect()[0]
    dirs = {r["direction"]: r for r in per.groupBy("direction").agg(*aggs).collect()}
    per.unpersist()

    def rate(s, m):
        if nb == 0 or bucket_s <= 0:
            return {"mean": None, "peak": None}
        return {"mean": _num(s / (nb * bucket_s)), "peak": _num(m / bucket_s)}

    out = {"bucket_s": bucket_s, "buckets": nb, "frames_source": source}
    for v in values:
        out[v] = int(tot[f"s_{v}"] or 0)
    for v, name in rates.items():
        out[name] = rate(tot[f"s_{v}"] or 0, tot[f"m_{v}"] or 0)
    for d in ("c2s", "s2c"):
        r = dirs.get(d)
        sub = {}
        for v, name in rates.items():
            s = int(r[f"s_{v}"] or 0) if r else 0
            # a bucket without traffic in this direction counts as 0 (totals fills the range)
            m = max(int(r[f"m_{v}"] or 0), 0) if r else 0
            sub[v] = s
            sub[name] = rate(s, m)
        out[d] = sub
    return out


def _span(F, dfs, packets) -> dict:
    """``span``: first and last timestamp of every table, and the packets stamped far from the
    rest of their capture (``packets``: methods, messages and frames; see
    :func:`amqpcap.analysis.summary.time_outliers`)."""
    cols = [df.select(F.col(c).alias("ts")) for df, cs in dfs if df is not None for c in cs]
    u = cols[0]
    for c in cols[1:]:
        u = u.unionByName(c)
    r = u.agg(F.min("ts").alias("lo"), F.max("ts").alias("hi")).collect()[0]
    lo, hi = r["lo"], r["hi"]
    if lo is None:
        return {"start": None, "end": None, "duration_s": None}
    a, b = pd.Timestamp(lo, tz="UTC"), pd.Timestamp(hi, tz="UTC")
    out = {"start": a.isoformat(), "end": b.isoformat(), "duration_s": round((hi - lo) / 1e9, 6)}
    keys = ["capture", "tcp_stream", "frame_number", "ts"]
    p = packets[0].select(*keys)
    for df in packets[1:]:
        if df is not None:
            p = p.unionByName(df.select(*keys))
    p = p.filter(F.col("ts").isNotNull())
    # the median only places a one-year threshold: an approximate one is exact enough, and its
    # memory does not grow with the rows as the exact percentile's does
    med = p.groupBy("capture").agg(F.percentile_approx("ts", 0.5, 10000).alias("_med"))
    p = p.join(med.withColumnRenamed("capture", "_cap"), p["capture"].eqNullSafe(F.col("_cap")))
    odd = p.filter(
        (F.col("ts") < F.lit(TS_FLOOR_NS)) | (F.abs(F.col("ts") - F.col("_med")) > F.lit(TS_FAR_NS))
    ).dropDuplicates(["capture", "frame_number"])
    odd.cache()
    n = odd.count()
    out["time_outliers"] = int(n)
    out["first_time_outlier"] = None
    if n:
        f = odd.orderBy(F.asc_nulls_last("capture"), F.asc_nulls_last("frame_number")).first()
        out["first_time_outlier"] = {
            "capture": f["capture"],
            "tcp_stream": f["tcp_stream"],
            "frame_number": f["frame_number"],
            "ts": pd.Timestamp(f["ts"], tz="UTC").isoformat(),
        }
    odd.unpersist()
    return out


def _ordered_counts(pairs) -> dict:
    """{value: count} of (value, count) pairs (a value's counts added, None left out), largest
    count first, ties by value."""
    out: dict = {}
    for k, n in pairs:
        if k is not None:
            out[str(k)] = out.get(str(k), 0) + int(n)
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _counts(df, col, F) -> dict:
    return _ordered_counts((r[col], r["count"]) for r in df.groupBy(col).count().collect())


def _percent_decoded(F, col, pattern):
    """The group of ``pattern`` in ``col``, percent-decoded as urllib.parse.unquote does (RabbitMQ
    4's /queues/, /exchanges/ addresses): '+' stays '+', a malformed escape stays as it is."""
    raw = f"regexp_extract({col}, '{pattern}', 1)"
    return F.expr(f"coalesce(try_url_decode(replace({raw}, '+', '%2B')), {raw})")


def _reply_key(F, col, version=None):
    """SQL twin of the RPC reply key: 0-10 ``exchange/key`` -> key; 1.0 ``/queue/Q`` -> ``Q``,
    ``/exchange/E/K`` -> ``K`` (analysis.amqp10_pairing.reply_key); direct reply-to -> its prefix."""
    c = F.col(col)
    if version is not None:
        queue = F.regexp_extract(c, r"^/(?:queue|amq/queue)/([^/]+)$", 1)
        v2_queue = _percent_decoded(F, col, "^/queues/([^/]+)$")
        v2_key = _percent_decoded(F, col, "^/exchanges/[^/]+/([^/]+)$")
        key = F.regexp_extract(c, r"^/exchange/[^/]+/(.+)$", 1)
        topic = F.regexp_extract(c, r"^/topic/([^/]+)$", 1)
        c = (
            F.when(
                (F.col(version) == "0-10") & F.col(col).contains("/"),
                F.expr(f"substr({col}, instr({col}, '/') + 1)"),
            )
            .when((F.col(version) == "1.0") & (v2_queue != ""), v2_queue)
            .when((F.col(version) == "1.0") & (queue != ""), queue)
            .when((F.col(version) == "1.0") & (v2_key != ""), v2_key)
            .when((F.col(version) == "1.0") & (key != ""), key)
            .when((F.col(version) == "1.0") & (topic != ""), topic)
            .otherwise(F.col(col))
        )
    return F.when(c.startswith(_DIRECT_REPLY), F.lit(_DIRECT_REPLY)).otherwise(c)


def _identity(F):
    """A message's identity as one non-null value (joins never match nulls)."""
    return F.concat_ws("|", *[F.coalesce(F.col(c).cast("string"), F.lit("-")) for c in _IDENTITY])


def _dedupe_roles(t: pa.Table) -> pa.Table:
    """One row per message (it may be here for two groups), ``_req`` if any of its rows has it."""
    seen: dict = {}
    keep = []
    req = t["_req"].to_pylist()
    for i, k in enumerate(zip(*(t[c].to_pylist() for c in _IDENTITY))):
        j = seen.get(k)
        if j is None:
            seen[k] = len(keep)
            keep.append([i, req[i]])
        elif req[i]:
            keep[j][1] = True
    out = t.take([i for i, _ in keep])
    req = pa.array([r for _, r in keep], pa.bool_())
    return out.set_column(out.schema.get_field_index("_req"), "_req", req)


def _transit_rows(F, msgs, parts: int):
    m = msgs.drop("body")
    pubs = m.filter((F.col("direction") == "c2s") & F.col("method").isin(*_PUBLISH))
    dels = m.filter((F.col("direction") == "s2c") & F.col("method").isin(*_DELIVER))
    has_id = F.col("message_id").isNotNull() & (F.col("message_id") != "")
    has_hash = F.col("body_hash").isNotNull() & (F.col("body_hash") != "")
    id_pubs, id_dels = pubs.filter(has_id), dels.filter(has_id)
    by_id = _grouped(id_pubs.unionByName(id_dels), ["message_id"], parts, per_transit_group, "message_id")
    p = id_pubs.select(F.col("message_id").alias("_mid"), F.col("ts").alias("_pts"))
    on = (id_dels["message_id"] == p["_mid"]) & (p["_pts"] <= id_dels["ts"])
    matched = id_dels.join(p, on, "left_semi").select(_identity(F).alias("_id"))
    free_dels = (
        dels.filter(has_hash).withColumn("_id", _identity(F)).join(matched, "_id", "left_anti").drop("_id")
    )
    c_pubs = pubs.filter(~has_id & has_hash)
    ckey = [F.coalesce("exchange", F.lit("")), F.coalesce("routing_key", F.lit("")), "body_hash"]
    content = _grouped(c_pubs.unionByName(free_dels), ckey, parts, per_transit_group, "content")
    return by_id.unionByName(content)


def _rpc_rows(F, msgs, parts: int):
    m = msgs.drop("body")
    # a 1.0 request without a correlation-id is named by its message-id (amqp10_pairing.with_request_ids)
    no_corr = F.col("correlation_id").isNull() | (F.col("correlation_id") == "")
    fill = (F.col("version") == "1.0") & (F.col("reply_to").isNotNull()) & (F.col("reply_to") != "") & no_corr
    m = m.withColumn("correlation_id", F.when(fill, F.col("message_id")).otherwise(F.col("correlation_id")))
    m = m.filter(F.col("correlation_id").isNotNull() & (F.col("correlation_id") != ""))
    has_rt = F.col("reply_to").isNotNull() & (F.col("reply_to") != "")
    m = m.withColumn("_kreq", F.when(has_rt, _reply_key(F, "reply_to", "version")))
    m = m.withColumn(
        "_krep",
        F.when(F.col("routing_key").isNotNull() & (F.col("routing_key") != ""), _reply_key(F, "routing_key")),
    )
    c2s_keys = (
        m.filter((F.col("direction") == "c2s") & has_rt)
        .select(F.col("_kreq").alias("_k"), F.col("correlation_id").alias("_c"))
        .distinct()
    )
    # an s2c message with reply_to is a request only when no c2s request has its key (rpc())
    m = m.join(
        c2s_keys.withColumn("_c2s", F.lit(True)),
        (F.col("_kreq") == F.col("_k")) & (F.col("correlation_id") == F.col("_c")),
        "left",
    )
    m = m.withColumn("_is_request", has_rt & ((F.col("direction") == "c2s") | F.col("_c2s").isNull()))
    m = m.drop("_k", "_c", "_c2s")
    req = m.filter(has_rt).withColumn("_k", F.col("_kreq")).withColumn("_req", F.lit(True))
    rep = (
        m.filter(F.col("_krep").isNotNull()).withColumn("_k", F.col("_krep")).withColumn("_req", F.lit(False))
    )
    # a message in one group for both roles is two rows there: per_rpc_group merges them
    both = req.unionByName(rep).drop("_kreq", "_krep")
    return _grouped(both, ["_k", "correlation_id"], parts, per_rpc_group)


def stats(spark, out: str, progress: bool = False) -> dict:
    """The ``stats --json`` dict of the dissect (or spark) output directory ``out``;
    ``progress``: a line per step on stderr."""
    with pandas_version_warning_off(), _shuffle_partitions(spark, _partitions(spark, out)):
        return _stats(spark, out, _Steps(progress))


@contextlib.contextmanager
def _shuffle_partitions(spark, n: int):
    """Spark's grouping and joins shuffle into ``n`` partitions (the session's setting restored
    afterwards): its default, 200, makes each of the report's twenty-odd aggregations 200 tasks
    on tables a few partitions hold, most of ``stats --spark``'s time on tables pandas can hold."""
    key = "spark.sql.shuffle.partitions"
    old = spark.conf.get(key, None)
    spark.conf.set(key, str(n))
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


class _Steps:
    """``amqpcap stats: STEP: done, N s`` on stderr, a line per step (when enabled)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.t0 = time.monotonic()

    def done(self, step: str) -> None:
        if self.enabled:
            now = time.monotonic()
            sys.stderr.write(f"amqpcap stats: {step}: done, {now - self.t0:,.1f} s\n")
            self.t0 = now
            sys.stderr.flush()


def _amqp10(F, conn, methods, msgs, frames, has_v10: bool) -> dict:
    """AMQP 1.0's figures (analysis/amqp10.py: settlement latency, outcomes, error conditions,
    link credit, idle-time-out liveness), computed by the pandas analysis on the rows of the 1.0
    connections alone (``has_v10``: the output has some), collected (their columns only)."""
    from amqpcap.analysis.summary import latency_summary

    if not has_v10:  # the figures of no rows: no Spark job
        present = ("connections", "methods", "messages") + (("frames",) if frames is not None else ())
        tables = Tables(**{n: empty_frame(n) for n in TABLE_NAMES}, source=None, present=present)
        return amqp10.stats_part(tables, latency_summary)
    v10 = conn.filter(F.col("version") == "1.0")
    keys = v10.select("capture", "tcp_stream")
    got = {"connections": v10}
    for name, df in (("methods", methods), ("messages", msgs), ("frames", frames)):
        if df is not None:
            cols = amqp10.SECTION[0][name] or [f.name for f in SCHEMAS[name]]
            got[name] = df.join(keys, ["capture", "tcp_stream"], "left_semi").select(*cols)
    pdfs = {}
    for name, df in got.items():
        pdf = df.toPandas()
        for f in SCHEMAS[name]:  # time columns read as ns (spark_exact)
            if (
                pa.types.is_timestamp(f.type)
                and f.name in pdf
                and not isinstance(pdf[f.name].dtype, pd.DatetimeTZDtype)
            ):
                pdf[f.name] = pd.to_datetime(pdf[f.name], unit="ns", utc=True)
        pdfs[name] = pdf
    present = tuple(n for n in TABLE_NAMES if n in pdfs)
    tables = Tables(**{n: pdfs.get(n, empty_frame(n)) for n in TABLE_NAMES}, source=None, present=present)
    return amqp10.stats_part(tables, latency_summary)


def _stats(spark, out: str, steps: _Steps) -> dict:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.session.timeZone", "UTC")
    conn, methods, msgs = (_read(spark, out, n) for n in ("connections", "methods", "messages"))
    anomalies, frames = _read(spark, out, "anomalies"), _read(spark, out, "frames")
    if conn is None or methods is None or msgs is None or anomalies is None:
        raise FileNotFoundError(f"{out}: not a dissect output directory")
    # every step but the 1.0 figures reads the analysis columns only (the JSON and binary ones,
    # arguments, properties, headers, body, would be most of the rows shuffled and converted to
    # Arrow), each table read from Parquet once, kept for the twenty-odd jobs that follow
    full_methods, full_msgs = methods, msgs
    methods = _ranges_as_text(F, _lean(methods, "methods"))
    msgs = _lean(msgs, "messages")
    kept = [df.persist(StorageLevel.MEMORY_AND_DISK) for df in (conn, methods, msgs)]
    try:
        return _computed(
            spark, F, out, (conn, methods, msgs, anomalies, frames), full_methods, full_msgs, steps
        )
    finally:
        for df in kept:
            df.unpersist()


def _computed(spark, F, out: str, tables, full_methods, full_msgs, steps: _Steps) -> dict:
    """:func:`stats` of the read ``tables`` (connections, methods and messages with the
    analysis columns only, anomalies, frames or None); ``full_*``: every column, for the 1.0 figures."""
    conn, methods, msgs, anomalies, frames = tables
    present = tuple(n for n in TABLE_NAMES if os.path.isdir(os.path.join(out, n)))
    has_frames = frames is not None
    parts = [
        conn.select(*[c for c in conn.columns if c in _PER_CONNECTION_COLS]).withColumn(
            "_t", F.lit("connections")
        ),
        methods.withColumn("_t", F.lit("methods")),
        msgs.withColumn("_t", F.lit("messages")),
    ]
    if has_frames:
        parts.append(frames.withColumn("_t", F.lit("frames")))
    u = parts[0]
    for p in parts[1:]:
        u = u.unionByName(p, allowMissingColumns=True)
    u = u.filter(F.col("tcp_stream").isNotNull())
    parts = _partitions(spark, out)
    res = (
        _grouped(u, ["capture", "tcp_stream"], parts, per_connection, present)
        .unionByName(_transit_rows(F, msgs, parts))
        .unionByName(_rpc_rows(F, msgs, parts))
    )
    res.cache()
    tally = _tally(res, F)
    steps.done("pairings")
    # one job a table: connections by capture and version, methods by capture and name
    hb = F.count("heartbeats_c2s").alias("hb")
    conn_rows = conn.groupBy("capture", "version").agg(F.count(F.lit(1)).alias("n"), hb).collect()
    method_rows = methods.groupBy("capture", "method").count().collect()
    caps = {r["capture"] for r in conn_rows + method_rows if r["capture"] is not None}
    versions = _ordered_counts((r["version"], r["n"]) for r in conn_rows)
    result = {
        "stats_version": STATS_VERSION,
        "captures": sorted(caps),
        "connections": sum(int(r["n"]) for r in conn_rows),
        "versions": versions,
        "span": _span(
            F,
            [(conn, ["ts", "end_ts"]), (methods, ["ts"]), (msgs, ["ts"]), (frames, ["ts"])],
            [methods, msgs, frames],
        ),
    }
    steps.done("span")
    result["latency"] = _latency(_summaries(res, F), tally)
    result["errors"] = _errors(res, F)
    steps.done("latency and errors")
    result["throughput"] = _throughput(F, msgs, methods, frames)
    steps.done("throughput")
    result["methods"] = _ordered_counts((r["method"], r["count"]) for r in method_rows)
    result["anomalies"] = _counts(anomalies, "kind", F)
    hb_source = "frames" if has_frames else ("liveness" if any(r["hb"] for r in conn_rows) else "methods")
    result["health"] = _health(tally, hb_source)
    v10 = _amqp10(F, conn, full_methods, full_msgs, frames, "1.0" in versions)
    result["latency"]["settlement"] = v10["settlement"]
    result["outcomes"] = v10["outcomes"]
    result["errors"] = sorted(result["errors"] + v10["errors"], key=lambda e: -e["count"])
    result["health"] = amqp10.with_health(result["health"], v10)
    res.unpersist()
    steps.done("counts, health and AMQP 1.0")
    return result
