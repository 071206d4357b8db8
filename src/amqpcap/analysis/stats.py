"""The ``stats`` summary: a stable JSON-able dict, and its terminal rendering.

The dict is the ``amqpcap stats --json`` contract documented in
docs/analysis.md ("stats JSON"); keys are only ever added, never renamed.
"""
from __future__ import annotations

import math
import sys
import types

import numpy as np
import pandas as pd

from amqpcap.analysis._common import records
from amqpcap.analysis.errors import errors as errors_frame
from amqpcap.analysis.health import blocked, flow, heartbeat_gaps, heartbeat_source, unacked
from amqpcap.analysis.latency import all_latencies
from amqpcap.analysis.load import as_tables
from amqpcap.analysis.throughput import totals

__all__ = ["stats", "render_text", "latency_summary", "STATS_VERSION", "LATENCY_KINDS"]

STATS_VERSION = 1
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


def latency_summary(values) -> dict:
    """``count``, ``p50_ms``, ``p90_ms``, ``p99_ms``, ``max_ms`` (linear-interpolated
    percentiles, rounded to 1 µs; null when count is 0) of the finite values."""
    a = np.asarray(pd.Series(values, dtype="float64").dropna(), dtype=np.float64)
    a = a[np.isfinite(a)]
    if len(a) == 0:
        return {"count": 0, "p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None}
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"count": int(len(a)), "p50_ms": _num(p50), "p90_ms": _num(p90), "p99_ms": _num(p99), "max_ms": _num(a.max())}


def _counts(series) -> dict:
    return {str(k): int(v) for k, v in series.value_counts(dropna=True).items()}


def _latency(lat: dict) -> dict:
    out = {}
    r = lat["method_rtt"]
    ok = r[r["status"] == "ok"]
    out["method_rtt"] = latency_summary(ok["latency_ms"])
    out["method_rtt"].update(missing=int((r["status"] == "missing").sum()), errors=int((r["status"] == "error").sum()))
    out["method_rtt"]["by_method"] = {
        str(k): latency_summary(g["latency_ms"]) for k, g in ok.groupby("request_method", sort=True)
    }
    c = lat["confirm"]
    out["confirm"] = latency_summary(c.loc[c["outcome"].isin(["ack", "nack"]), "latency_ms"])
    out["confirm"].update(acked=int((c["outcome"] == "ack").sum()), nacked=int((c["outcome"] == "nack").sum()),
                          unconfirmed=int((c["outcome"] == "unconfirmed").sum()))
    a = lat["consumer_ack"]
    out["consumer_ack"] = latency_summary(a.loc[a["outcome"].isin(["ack", "nack", "reject"]), "latency_ms"])
    out["consumer_ack"].update(
        acked=int((a["outcome"] == "ack").sum()), nacked=int((a["outcome"] == "nack").sum()),
        rejected=int((a["outcome"] == "reject").sum()), unsettled=int((a["outcome"] == "unsettled").sum()),
        recovered=int((a["outcome"] == "recovered").sum()),
        redelivered=int(a["redelivered"].fillna(False).astype(bool).sum()))
    tr = lat["transit"]
    first = tr[tr["first"].fillna(False).astype(bool)] if len(tr) else tr
    out["transit"] = latency_summary(first["latency_ms"])
    out["transit"].update(deliveries=int(len(tr)), redeliveries=int(tr["redelivered"].fillna(False).astype(bool).sum()) if len(tr) else 0)
    rp = lat["rpc"]
    out["rpc"] = latency_summary(rp.loc[rp["status"].isin(["ok", "ok-delivery"]), "latency_ms"])
    out["rpc"]["missing"] = int((rp["status"] == "missing").sum())
    cs = lat["connection_setup"]
    out["connection_setup"] = latency_summary(cs.loc[cs["status"] == "ok", "latency_ms"])
    out["connection_setup"]["missing"] = int((cs["status"] == "missing").sum())
    return out


def _errors(err: pd.DataFrame) -> list[dict]:
    if len(err) == 0:
        return []
    e = err[["kind", "code", "name", "class", "method"]].astype(object)
    e = e.where(e.notna(), None)
    groups: dict = {}
    for kind, code, name, cls, method in e.itertuples(index=False, name=None):
        k = (kind, None if code is None else int(code), name, cls, method)
        groups[k] = groups.get(k, 0) + 1
    items = [{"code": k[1], "name": k[2], "class": k[3], "method": k[4], "kind": k[0], "count": n}
             for k, n in groups.items()]
    items.sort(key=lambda d: (-d["count"], d["code"] if d["code"] is not None else 10**9, d["kind"] or "", d["method"] or ""))
    return items


def _rate(series: pd.Series, seconds: float) -> dict:
    if len(series) == 0 or seconds <= 0:
        return {"mean": None, "peak": None}
    return {"mean": _num(series.sum() / (len(series) * seconds)), "peak": _num(series.max() / seconds)}


def _throughput(t, bucket: str) -> dict:
    tot = totals(t, bucket=bucket)
    bucket_s = pd.Timedelta(bucket).total_seconds()
    out = {"bucket_s": bucket_s, "buckets": int(len(tot)), "frames_source": tot.attrs.get("frames_source")}
    for v in ("messages", "body_bytes", "frames", "wire_bytes"):
        out[v] = int(tot[v].sum()) if len(tot) else 0
    names = {"messages": "msgs_per_s", "body_bytes": "body_bytes_per_s", "frames": "frames_per_s",
             "wire_bytes": "wire_bytes_per_s"}
    for v, n in names.items():
        out[n] = _rate(tot[v] if len(tot) else pd.Series([], dtype="int64"), bucket_s)
    for d in ("c2s", "s2c"):
        sub = {}
        for v, n in names.items():
            col = f"{v}_{d}"
            s = tot[col] if len(tot) and col in tot.columns else pd.Series([], dtype="int64")
            sub[v] = int(s.sum())
            sub[n] = _rate(s, bucket_s)
        out[d] = sub
    return out


def _span(t) -> dict:
    ts = []
    for df, cols in ((t.connections, ["ts", "end_ts"]), (t.methods, ["ts"]), (t.messages, ["ts"]), (t.frames, ["ts"])):
        for c in cols:
            if len(df) and df[c].notna().any():
                ts += [df[c].min(), df[c].max()]
    if not ts:
        return {"start": None, "end": None, "duration_s": None}
    lo, hi = min(ts), max(ts)
    return {"start": lo.isoformat(), "end": hi.isoformat(), "duration_s": _num((hi - lo).total_seconds(), 6)}


def _health(t, acks) -> dict:
    gaps = heartbeat_gaps(t)
    bl = blocked(t)
    fl = flow(t)
    un = unacked(t, acks=acks)
    over = un[un["over_prefetch"].fillna(False).astype(bool)] if len(un) else un
    return {
        "heartbeat_late": int((gaps["evidence"] != "unknown").sum()) if len(gaps) else 0,
        "heartbeat_missed": int(gaps["missed"].fillna(False).astype(bool).sum()) if len(gaps) else 0,
        "heartbeat_source": heartbeat_source(t),
        "blocked": int(len(bl)),
        "blocked_ms_total": _num(bl["duration_ms"].sum()) if len(bl) else 0.0,
        "still_blocked": int((bl["status"] == "still-blocked").sum()) if len(bl) else 0,
        "flow_pauses": int((~fl["active"].fillna(True).astype(bool)).sum()) if len(fl) else 0,
        "max_unacked": int(un["unacked"].max()) if len(un) and un["unacked"].notna().any() else 0,
        "channels_over_prefetch": int(over.groupby(["capture", "tcp_stream", "channel"]).ngroups) if len(over) else 0,
        "heartbeat_unknown": int((gaps["evidence"] == "unknown").sum()) if len(gaps) else 0,
    }


def stats(t, *, bucket: str = "1s", latencies: dict | None = None) -> dict:
    """The stats summary of a dissect output (Tables, directory or capture): a JSON-able dict.

    Top-level keys: ``stats_version``, ``captures``, ``connections``, ``versions``,
    ``span``, ``latency`` (one entry per kind in :data:`LATENCY_KINDS`),
    ``errors``, ``throughput``, ``methods``, ``anomalies``, ``health``.
    See docs/analysis.md for every field.  ``latencies``: a precomputed
    :func:`amqpcap.analysis.all_latencies` result, to avoid computing it twice.
    """
    t = as_tables(t)
    lat = latencies if latencies is not None else all_latencies(t)
    c = t.connections
    return {
        "stats_version": STATS_VERSION,
        "captures": sorted(set(c["capture"].dropna().astype(str)) | set(t.methods["capture"].dropna().astype(str))),
        "connections": int(len(c)),
        "versions": _counts(c["version"]) if len(c) else {},
        "span": _span(t),
        "latency": _latency(lat),
        "errors": _errors(errors_frame(t)),
        "throughput": _throughput(t, bucket),
        "methods": dict(sorted(_counts(t.methods["method"]).items(), key=lambda kv: (-kv[1], kv[0]))),
        "anomalies": dict(sorted(_counts(t.anomalies["kind"]).items(), key=lambda kv: (-kv[1], kv[0]))),
        "health": _health(t, lat["consumer_ack"]),
    }


# --------------------------------------------------------------------------- text rendering


def table(headers, rows, align=None) -> str:
    """A plain fixed-width text table (right-aligned numbers)."""
    rows = [["" if v is None else str(v) for v in r] for r in rows]
    headers = [str(h) for h in headers]
    if align is None:
        align = ["r" if rows and all(_isnum(r[i]) for r in rows) else "l" for i in range(len(headers))]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def fmt(cells):
        return "  ".join(c.rjust(w[i]) if align[i] == "r" else c.ljust(w[i]) for i, c in enumerate(cells)).rstrip()

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


def _ms(v):
    return "-" if v is None else f"{v:,.3f}"


def _si(v, unit=""):
    if v is None:
        return "-"
    for div, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.2f} {p}{unit}"
    return f"{v:.2f} {unit}".rstrip()


def _connection_rows(t, limit):
    c = t.connections
    if len(c) == 0:
        return [], 0
    msgs = t.messages.groupby(["capture", "tcp_stream"]).size().to_dict() if len(t.messages) else {}
    meth = t.methods.groupby(["capture", "tcp_stream"]).size().to_dict() if len(t.methods) else {}
    cols = ["capture", "tcp_stream", "client_ip", "client_port", "server_ip", "server_port", "version",
            "server_product", "connection_name", "ts", "end_ts", "closed_by", "close_reply_code", "bytes_c2s", "bytes_s2c"]
    rows = []
    for r in records(c, cols):
        cap, st, cip, cp, sip, sp, ver, prod, name, ts, end, by, code, b1, b2 = r
        dur = (end - ts) / 1e9 if (end is not None and ts is not None) else None
        rows.append([st, f"{cip}:{cp}", f"{sip}:{sp}", ver or "-", prod or "-", name or "", meth.get((cap, st), 0),
                     msgs.get((cap, st), 0), f"{dur:.3f}" if dur is not None else "-", (b1 or 0) + (b2 or 0),
                     (by or "open") + (f" {code}" if code not in (None, 200) else "")])
    rows.sort(key=lambda r: -(r[7] * 1_000_000 + r[6]))
    return rows[:limit], len(rows)


def render_text(s: dict, t=None, *, limit: int = 15) -> str:
    """Terminal tables for a :func:`stats` dict (and, when ``t`` is given, the
    busiest connections): connections, method counts, latency percentiles,
    top errors, throughput, health, anomalies."""
    out = []
    span = s.get("span", {})
    out.append(f"amqpcap stats: {', '.join(s.get('captures', [])) or '-'}")
    out.append(f"  {s['connections']} connection(s); versions: "
               + (", ".join(f"{k} x{v}" for k, v in s.get("versions", {}).items()) or "-")
               + (f"; span {span['duration_s']:.3f} s" if span.get("duration_s") is not None else ""))
    if t is not None:
        t = as_tables(t)
        rows, n = _connection_rows(t, limit)
        if rows:
            out.append("")
            out.append(f"Connections (busiest {len(rows)} of {n})" if n > len(rows) else "Connections")
            out.append(table(["stream", "client", "server", "version", "server product", "name", "methods", "msgs",
                              "duration s", "bytes", "closed"], rows,
                             align=["r", "l", "l", "l", "l", "l", "r", "r", "r", "r", "l"]))
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
    for kind in LATENCY_KINDS:
        d = s["latency"].get(kind, {})
        extra = []
        for k in ("missing", "errors", "acked", "nacked", "unconfirmed", "rejected", "unsettled", "redeliveries"):
            if k in d and d[k]:
                extra.append(f"{k}={d[k]}")
        lrows.append([kind, d.get("count", 0), _ms(d.get("p50_ms")), _ms(d.get("p90_ms")), _ms(d.get("p99_ms")),
                      _ms(d.get("max_ms")), " ".join(extra)])
    out.append(table(["kind", "count", "p50", "p90", "p99", "max", ""], lrows, align=["l", "r", "r", "r", "r", "r", "l"]))
    by_m = s["latency"].get("method_rtt", {}).get("by_method", {})
    if by_m:
        items = sorted(by_m.items(), key=lambda kv: -kv[1]["count"])[:limit]
        out.append("")
        out.append("Method round trips by request (ms)")
        out.append(table(["request", "count", "p50", "p90", "p99", "max"],
                         [[k, d["count"], _ms(d["p50_ms"]), _ms(d["p90_ms"]), _ms(d["p99_ms"]), _ms(d["max_ms"])]
                          for k, d in items], align=["l", "r", "r", "r", "r", "r"]))
    out.append("")
    errs = s.get("errors", [])
    if errs:
        more = f" (top {limit} of {len(errs)})" if len(errs) > limit else ""
        out.append(f"Errors{more}")
        out.append(table(["count", "code", "name", "class", "method", "kind"],
                         [[e["count"], e["code"] if e["code"] is not None else "-", e["name"] or "-", e["class"] or "-",
                           e["method"] or "-", e["kind"]] for e in errs[:limit]],
                         align=["r", "r", "l", "l", "l", "l"]))
    else:
        out.append("Errors: none")
    tp = s.get("throughput", {})
    out.append("")
    out.append(f"Throughput (bucket {tp.get('bucket_s')} s, frames from {tp.get('frames_source')})")
    trow = []
    for label, key in (("all", None), ("client->server", "c2s"), ("server->client", "s2c")):
        d = tp if key is None else tp.get(key, {})
        trow.append([label, f"{d.get('messages', 0):,}", _si(d["msgs_per_s"]["mean"]), _si(d["msgs_per_s"]["peak"]),
                     _si(d["body_bytes_per_s"]["mean"], "B"), _si(d["body_bytes_per_s"]["peak"], "B"),
                     _si(d["wire_bytes_per_s"]["mean"], "B"), _si(d["wire_bytes_per_s"]["peak"], "B")])
    out.append(table(["direction", "messages", "msg/s mean", "msg/s peak", "body B/s mean", "body B/s peak",
                      "wire B/s mean", "wire B/s peak"], trow, align=["l"] + ["r"] * 7))
    h = s.get("health")
    if h:
        out.append("")
        out.append("Health: " + ", ".join(f"{k}={v}" for k, v in h.items()))
    an = s.get("anomalies", {})
    out.append("")
    out.append("Anomalies: " + (", ".join(f"{k}={v}" for k, v in an.items()) if an else "none"))
    return "\n".join(out) + "\n"


class _CallableModule(types.ModuleType):
    """``amqpcap.analysis.stats`` is both this module (``stats.stats``, ``stats.render_text``)
    and callable as the function: ``amqpcap.analysis.stats(t)``."""

    def __call__(self, *args, **kwargs):
        return stats(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
