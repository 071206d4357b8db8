"""AMQP 1.0 analysis: settlement latency, outcomes, error conditions, liveness.

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
  with ``condition`` and ``descriptions`` in place of code and texts (one row each of them:
  :func:`condition_rows`, the 1.0 rows of ``failures.errors``);
* :func:`idle_gaps`: silences against the idle-time-out each peer asked of the other in its
  open (the 1.0 heartbeat health);

Link credit (stalls, drain cycles) is in :mod:`amqpcap.analysis.amqp10_credit`; what lets the
transit and RPC pairings take 1.0 messages, alone or next to 0-9-1 ones, in
:mod:`amqpcap.analysis.amqp10_pairing`.
"""

from __future__ import annotations

import pandas as pd

from amqpcap.amqp.spec import v1_0 as SPEC
from amqpcap.analysis._common import ROW_KEYS, build, records
from amqpcap.analysis.amqp10_credit import CREDIT_COLUMNS, credit_summary
from amqpcap.analysis.connection_health import (
    GAP_COLS,
    LIVENESS_COLUMNS,
    activity,
    gap_row,
    heartbeat_source,
    silences,
)

_KEYS = ROW_KEYS
# stats' section of the 1.0 figures: (columns by table, methods by table), as summary.SECTIONS
SECTION = (
    {
        "connections": None,
        "methods": _KEYS
        + ["link_name", "delivery_id", "settled", "outcome", "condition", "reply_text", "code"]
        + [c for c in CREDIT_COLUMNS if c not in _KEYS + ["link_name"]],
        "messages": _KEYS + ["link_name", "delivery_id", "settled", "settle_ts", "outcome", "condition"],
        # (the liveness check's signs of life, when the output has them)
        "frames": ["capture", "tcp_stream", "frame_number", "ts", "direction"],
    },
    # (1.0 rows only: a 1.0 conversation has no other methods, its messages are transfers)
    {"methods": SPEC.METHODS, "messages": ("transfer",)},
)
OUTCOMES = ("accepted", "rejected", "released", "modified", "received")
KIND = "amqp-1.0"  # the ``kind`` of a 1.0 error (stats' ``errors`` entries, ``errors(t)`` rows)
_SASL_CODES = dict((int(v), n) for v, n in SPEC.CHOICES["sasl-code"])


def _v10(df: pd.DataFrame) -> pd.DataFrame:
    if len(df) == 0 or "version" not in df:
        return df.iloc[0:0]
    return df[df["version"].astype(object) == "1.0"]


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


CONDITION_COLUMNS = ["capture", "tcp_stream", "frame_number", "ts", "direction", "channel", "method"]


def condition_rows(methods: pd.DataFrame) -> pd.DataFrame:
    """The 1.0 ``methods`` rows that report an error (see the module docstring): those with a
    ``condition`` (close, end, detach, a rejected outcome) in time order, then the SASL outcomes
    other than ok, whose condition is ``sasl:`` and the code's name (``sasl:auth``);
    :data:`CONDITION_COLUMNS`, ``condition`` and ``reply_text`` (the error's description).
    What stats' 1.0 ``errors`` entries and the 1.0 rows of ``errors(t)`` are made of."""
    m = _v10(methods)
    if len(m) == 0:
        return pd.DataFrame(columns=CONDITION_COLUMNS + ["condition", "reply_text"])
    m = m.sort_values(["ts", "capture", "tcp_stream", "frame_number"], kind="stable")
    rows = m[m["condition"].notna()][CONDITION_COLUMNS + ["condition", "reply_text"]]
    rows = rows.astype({"method": object, "condition": object, "reply_text": object})
    sasl = m[(m["method"].astype(object) == "sasl.outcome") & m["code"].notna() & (m["code"] != 0)]
    if len(sasl):
        extra = sasl[CONDITION_COLUMNS + ["code"]].astype({"method": object})
        extra["condition"] = [f"sasl:{_SASL_CODES.get(int(c), int(c))}" for c in extra["code"]]
        extra["reply_text"] = None
        rows = pd.concat([rows, extra.drop(columns="code")], ignore_index=True)
    return rows


def condition_name(condition: str) -> str | None:
    """The specification's name of a 1.0 error ``condition`` (``amqp:not-found``: ``not-found``);
    None for one it does not define (a broker's own, ``sasl:...``)."""
    hit = SPEC.ERROR_CONDITIONS.get(condition)
    return hit[1] if hit else None


def error_conditions(t) -> list[dict]:
    """stats' ``errors`` entries of 1.0 connections (see the module docstring), most frequent first."""
    rows = condition_rows(t.methods)
    out = []
    for (cond, method), g in rows.groupby(["condition", "method"], sort=False, dropna=False):
        descs = []
        for text, h in g.groupby(g["reply_text"].fillna(""), sort=False):
            descs.append({"description": text or None, "count": int(len(h)), **_first(h)})
        out.append(
            {
                "kind": KIND,
                "condition": cond,
                "name": condition_name(cond),
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


# heartbeat_gaps' columns, with the idle-time-out (ms) the silence answers to in place of heartbeat_s
IDLE_GAP_COLS = {
    ("idle_timeout_ms" if k == "heartbeat_s" else k): ("Int64" if k == "heartbeat_s" else v)
    for k, v in GAP_COLS.items()
}
# (direction, its sender, the connections column of the idle-time-out its silences answer to)
_IDLE = (("c2s", "client", "server_idle_timeout_ms"), ("s2c", "server", "client_idle_timeout_ms"))


def idle_gaps(t, *, late: float = 1.0, all_gaps: bool = False) -> pd.DataFrame:
    """Liveness of 1.0 connections: per direction, the silences longer than ``late`` x the
    idle-time-out the *receiving* peer asked for in its open (each peer states the longest
    silence it accepts from the other, and the specification asks it to state half its real
    limit, so a silence over one idle-time-out is late and over two (``missed``) is past the
    peer's limit).  Any frame, empty frames included, is a sign of life.  ``evidence``,
    ``source``, ``open_ended`` and ``all_gaps`` as for
    :func:`~amqpcap.analysis.connection_health.heartbeat_gaps`, with ``idle_timeout_ms`` in
    place of ``heartbeat_s`` and ``intervals`` = gap / idle-time-out."""
    c = t.connections
    if len(c) == 0 or "client_idle_timeout_ms" not in c:
        return build([], IDLE_GAP_COLS)
    c = c[(c["version"].astype(object) == "1.0").to_numpy(dtype=bool)]
    c = c[(c["client_idle_timeout_ms"].fillna(0) > 0) | (c["server_idle_timeout_ms"].fillna(0) > 0)]
    if len(c) == 0:
        return build([], IDLE_GAP_COLS)
    act, source = activity(t)
    source = heartbeat_source(t) if source != "frames" else source
    cols = ["capture", "tcp_stream", "open_ts", "end_ts", "close_ts"] + LIVENESS_COLUMNS
    cols += [col for _, _, col in _IDLE]
    rows = []
    for r in records(c, cols):
        cap, st, open_ts, end_ts, close_ts = r[:5]
        stop = close_ts if close_ts is not None else end_ts
        for i, (d, sender, _) in enumerate(_IDLE):
            idle = r[5 + len(LIVENESS_COLUMNS) + i]
            if not idle:
                continue
            step = int(idle) * 1_000_000
            live = r[5 + 4 * i : 9 + 4 * i]
            found = silences(act, source, (cap, st, d), step, (open_ts, stop), live, late, all_gaps)
            rows += [gap_row((cap, st, d, sender), ("idle_timeout_ms", idle), step, x, source) for x in found]
    return build(rows, IDLE_GAP_COLS)


def idle_summary(gaps: pd.DataFrame) -> dict:
    """The 1.0 share of stats' heartbeat health: ``heartbeat_late`` (known late silences),
    ``heartbeat_missed`` (of them, over two idle-time-outs), ``heartbeat_unknown``."""
    known = gaps[gaps["evidence"] != "unknown"] if len(gaps) else gaps
    return {
        "heartbeat_late": int(len(known)),
        "heartbeat_missed": int(known["missed"].fillna(False).astype(bool).sum()) if len(known) else 0,
        "heartbeat_unknown": int(len(gaps) - len(known)),
    }


def stats_part(t, summarise) -> dict:
    """The 1.0 figures of stats: ``settlement`` (latency), ``outcomes``, ``errors``, ``credit``
    (amqp10_credit.credit_summary) and ``liveness`` (:func:`idle_summary`)."""
    s = settlement(t)
    return {
        "settlement": settlement_summary(s, summarise),
        "outcomes": outcomes(s),
        "errors": error_conditions(t),
        "credit": credit_summary(t),
        "liveness": idle_summary(idle_gaps(t)),
    }


def with_health(health: dict, part: dict) -> dict:
    """stats' ``health`` with the 1.0 figures of ``part`` (:func:`stats_part`): silences against
    the idle-time-out counted with the heartbeat ones, and the link credit figures added."""
    out = dict(health)
    for k, v in part["liveness"].items():
        out[k] = out.get(k, 0) + v
    out.update(part["credit"])
    return out
