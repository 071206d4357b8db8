"""AMQP 1.0 analysis: settlement latency, outcomes and error conditions.

A 1.0 delivery's messages row carries its settlement (``settled``, ``settle_ts``, ``outcome``,
``condition``); its first transfer's methods row (same capture, stream, direction and stream
offset) carries when it began and whether it was sent settled.  From them:

* :func:`settlement`: one row per delivery: link, outcome, sent settled or not, the first
  transfer's time, the settlement's, and the latency between them (ms) for the deliveries a
  disposition settled;
* :func:`outcomes`: counts of accepted, rejected, released, modified, received, pre-settled
  and unsettled deliveries, by direction;
* :func:`error_conditions`: every error condition of close, end, detach and rejected outcomes,
  and SASL outcomes other than ok, grouped like the other versions' errors (stats ``errors``),
  with ``condition`` and ``descriptions`` in place of code and texts.
"""

from __future__ import annotations

import pandas as pd

from amqpcap.amqp.spec import v1_0 as SPEC
from amqpcap.analysis._common import ROW_KEYS
from amqpcap.records.rows_1_0 import exchange_key

_KEYS = ROW_KEYS
# stats' section of the 1.0 figures: (columns by table, methods by table), as summary.SECTIONS
SECTION = (
    {
        "connections": None,
        "methods": _KEYS
        + ["link_name", "delivery_id", "settled", "outcome", "condition", "reply_text", "code"],
        "messages": _KEYS + ["link_name", "delivery_id", "settled", "settle_ts", "outcome", "condition"],
    },
    {},
)
OUTCOMES = ("accepted", "rejected", "released", "modified", "received")
_SASL_CODES = dict((int(v), n) for v, n in SPEC.CHOICES["sasl-code"])


def _v10(df: pd.DataFrame) -> pd.DataFrame:
    if len(df) == 0 or "version" not in df:
        return df.iloc[0:0]
    return df[df["version"].astype(object) == "1.0"]


def reply_key(reply_to: str) -> str:
    """The routing key a 1.0 reply-to address names (``/queue/Q`` -> ``Q``, ``/exchange/E/K`` ->
    ``K``: what a reply's messages row carries), else the address itself.  A 0-9-1 responder
    publishing to ``Q`` and a 1.0 one sending to ``/queue/Q`` both answer ``/queue/Q``."""
    key = exchange_key(reply_to)[1]
    return key if key else reply_to


def with_request_ids(msgs: pd.DataFrame) -> pd.DataFrame:
    """``msgs`` with each 1.0 request that has a reply-to but no correlation-id given its
    message-id as ``correlation_id``: a 1.0 reply names its request by the request's message-id
    (the specification's request-response pattern), or by the request's correlation-id when it
    has one.  Other rows unchanged; ``msgs`` itself when no row needs it."""
    if len(msgs) == 0 or not {"version", "message_id", "reply_to", "correlation_id"} <= set(msgs.columns):
        return msgs
    corr = msgs["correlation_id"]
    fill = (
        (msgs["version"].astype(object) == "1.0")
        & msgs["reply_to"].notna()
        & (msgs["reply_to"].astype(object) != "")
        & (corr.isna() | (corr.astype(object) == ""))
        & msgs["message_id"].notna()
    ).to_numpy(dtype=bool)
    if not fill.any():
        return msgs
    ids = corr.astype(object).to_numpy(copy=True)
    ids[fill] = msgs["message_id"].astype(object).to_numpy()[fill]
    return msgs.assign(correlation_id=pd.Series(ids, index=msgs.index, dtype=corr.dtype))


def settlement(t) -> pd.DataFrame:
    """One row per 1.0 delivery (see the module docstring)."""
    msgs = _v10(t.messages)
    cols = [
        "capture",
        "tcp_stream",
        "direction",
        "channel",
        "link_name",
        "delivery_id",
        "outcome",
        "condition",
    ]
    cols += ["presettled", "settled", "first_ts", "settle_ts", "latency_ms"]
    if len(msgs) == 0:
        return pd.DataFrame(columns=cols)
    key = ["capture", "tcp_stream", "direction", "stream_offset"]
    tr = _v10(t.methods)
    tr = tr[tr["method"].astype(object) == "transfer"][key + ["ts", "settled"]]
    tr = tr.rename(columns={"ts": "first_ts", "settled": "presettled"})
    m = msgs[key + cols[3:8] + ["settled", "settle_ts"]].astype({k: object for k in key[:3]})
    out = m.merge(tr.astype({k: object for k in key[:3]}), on=key, how="left")
    out["presettled"] = out["presettled"].astype(object).eq(True)
    by_disposition = out["settled"].astype(object).eq(True) & ~out["presettled"]
    lat = (out["settle_ts"] - out["first_ts"]).dt.total_seconds() * 1000.0
    out["latency_ms"] = lat.where(by_disposition)
    return out[cols].reset_index(drop=True)


def settlement_summary(s: pd.DataFrame, summarise) -> dict:
    """stats' ``latency.settlement``: ``summarise`` (summary.latency_summary) of the deliveries a
    disposition settled, and the same ``by_outcome`` and ``by_link``."""
    ok = s[s["latency_ms"].notna()]
    out = summarise(ok["latency_ms"])
    out["by_outcome"] = {str(k): summarise(g["latency_ms"]) for k, g in ok.groupby("outcome", dropna=True)}
    out["by_link"] = {str(k): summarise(g["latency_ms"]) for k, g in ok.groupby("link_name", dropna=True)}
    return out


def outcomes(s: pd.DataFrame) -> dict:
    """stats' ``outcomes``: by direction (``c2s``: the client's deliveries), the count of each
    outcome, ``pre-settled`` (sent settled) and ``unsettled`` (not settled in the capture)."""
    out = {}
    for d, g in s.groupby("direction", dropna=True):
        counts = {o: int((g["outcome"] == o).sum()) for o in OUTCOMES}
        counts["pre-settled"] = int(g["presettled"].sum())
        counts["unsettled"] = int((~g["settled"].astype(object).eq(True)).sum())
        out[str(d)] = counts
    return out


def _first(g: pd.DataFrame) -> dict:
    r = g.iloc[0]
    return {
        "first_capture": r["capture"],
        "first_tcp_stream": int(r["tcp_stream"]),
        "first_frame": int(r["frame_number"]),
    }


def error_conditions(t) -> list[dict]:
    """stats' ``errors`` entries of 1.0 connections (see the module docstring), most frequent first."""
    m = _v10(t.methods)
    if len(m) == 0:
        return []
    m = m.sort_values(["ts", "capture", "tcp_stream", "frame_number"], kind="stable")
    rows = m[m["condition"].notna()][
        ["capture", "tcp_stream", "frame_number", "method", "condition", "reply_text"]
    ]
    rows = rows.astype({"method": object, "condition": object, "reply_text": object})
    sasl = m[(m["method"].astype(object) == "sasl.outcome") & m["code"].notna() & (m["code"] != 0)]
    if len(sasl):
        extra = sasl[["capture", "tcp_stream", "frame_number", "method", "code"]].astype({"method": object})
        extra["condition"] = [f"sasl:{_SASL_CODES.get(int(c), int(c))}" for c in extra["code"]]
        extra["reply_text"] = None
        rows = pd.concat([rows, extra.drop(columns="code")], ignore_index=True)
    out = []
    for (cond, method), g in rows.groupby(["condition", "method"], sort=False, dropna=False):
        descs = []
        for text, h in g.groupby(g["reply_text"].fillna(""), sort=False):
            descs.append({"description": text or None, "count": int(len(h)), **_first(h)})
        hit = SPEC.ERROR_CONDITIONS.get(cond)
        out.append(
            {
                "kind": "amqp-1.0",
                "condition": cond,
                "name": hit[1] if hit else None,
                "method": method,
                "code": None,
                "class": None,
                "failing_method": None,
                "count": int(len(g)),
                **_first(g),
                "descriptions": descs,
                "texts": [
                    {"text": d["description"], **{k: v for k, v in d.items() if k != "description"}}
                    for d in descs
                ],
            }
        )
    out.sort(key=lambda d: (-d["count"], d["condition"], d["method"]))
    return out


def stats_part(t, summarise) -> dict:
    """The 1.0 figures of stats: ``settlement`` (latency), ``outcomes`` and ``errors``."""
    s = settlement(t)
    return {
        "settlement": settlement_summary(s, summarise),
        "outcomes": outcomes(s),
        "errors": error_conditions(t),
    }
