"""Connection health: heartbeat gaps, connection.blocked, channel.flow, unacked vs prefetch,
TCP zero-window periods (from connections.zero_windows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from amqpcap.analysis._common import (
    NAT,
    STR,
    TS_DTYPE,
    build,
    codes_in,
    latency_ms,
    ns,
    numbering,
    ordered,
    records,
    sort_key,
)
from amqpcap.analysis.acknowledgements import consumer_acks
from amqpcap.analysis.tables import as_tables

__all__ = [
    "heartbeat_gaps",
    "heartbeat_summary",
    "heartbeat_source",
    "silence_evidence",
    "gap_counts",
    "blocked",
    "flow",
    "unacked",
    "health",
]

GAP_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "direction": STR,
    "sender": STR,
    "heartbeat_s": "Int32",
    "start_frame": "Int64",
    "start_ts": TS_DTYPE,
    "end_frame": "Int64",
    "end_ts": TS_DTYPE,
    "gap_s": "float64",
    "intervals": "float64",
    "missed": "boolean",
    "open_ended": "boolean",
    "source": STR,
    "evidence": STR,
}

_DIRS = (("c2s", "client"), ("s2c", "server"))
# connections columns written by records/liveness.py, per direction
_LIVE = ("heartbeats", "silence_start_ts", "silence_end_ts", "last_frame_ts")
LIVENESS_COLUMNS = [f"{n}_{d}" for d, _ in _DIRS for n in _LIVE]


def activity(t) -> tuple[Activity, str]:
    """Every sign of life per conversation and direction (:class:`Activity`), and its source."""
    parts = []
    source = "methods"
    if t.has_frames or len(t.frames):
        parts.append(t.frames)
        source = "frames"
    parts += [t.methods, t.messages]
    return Activity([p for p in parts if len(p)]), source


class Activity:
    """The packets (``ts`` ns, ``frame_number``) of ``parts`` (frames, methods, messages) per
    conversation and direction.  Held as three int arrays over every row (filled part by part,
    32-bit where the values fit) and one argsort by a group number: a conversation's rows are
    sorted and deduplicated when it is checked, so no frame of every row is concatenated or
    sorted (hundreds of MB on a big capture)."""

    def __init__(self, parts: list):
        self.captures = numbering(parts, "capture")
        self.directions = numbering(parts, "direction")
        streams = [int(p["tcp_stream"].max()) for p in parts if p["tcp_stream"].notna().any()]
        self.width = 1 + max(streams, default=0)
        frames = [int(p["frame_number"].max()) for p in parts if p["frame_number"].notna().any()]
        groups = len(self.captures) * self.width * max(len(self.directions), 1)
        n = sum(len(p) for p in parts)
        gid = np.empty(n, dtype=_fitting(groups))
        self.ts = np.empty(n, dtype=np.int64)
        self.frame = np.empty(n, dtype=_fitting(max(frames, default=0) + 1))
        self.no_frame = np.iinfo(self.frame.dtype).max  # a missing frame number: sorts last
        lo = 0
        for p in parts:
            hi = lo + len(p)
            self._group_numbers(p, gid[lo:hi])
            self.ts[lo:hi] = ns(p["ts"])
            self.frame[lo:hi] = p["frame_number"].to_numpy(dtype=self.frame.dtype, na_value=self.no_frame)
            lo = hi
        # by group, the rows of each in concat order (rows in no group: group -1, never looked up)
        self.order = np.argsort(gid, kind="stable").astype(_fitting(n), copy=False)
        sorted_gid = gid[self.order]
        del gid
        starts = np.flatnonzero(np.r_[True, sorted_gid[1:] != sorted_gid[:-1]]) if n else []
        ends = np.r_[starts[1:], n] if n else []
        self.bounds = dict(zip(sorted_gid[starts].tolist(), zip(list(starts), list(ends))))

    def _group_numbers(self, p: pd.DataFrame, out: np.ndarray) -> None:
        """Each row's group into ``out``: (capture, tcp_stream, direction) as one int, -1 when one
        is missing."""
        cap = codes_in(p["capture"], self.captures)
        d = codes_in(p["direction"], self.directions)
        st = p["tcp_stream"].to_numpy(dtype=np.int32, na_value=-1)
        np.multiply(cap, self.width, out=out)
        out += st
        out *= max(len(self.directions), 1)
        out += d
        out[(cap < 0) | (st < 0) | (d < 0)] = -1

    def marks(self, capture, tcp_stream, direction) -> list:
        """(ts ns, frame number or None) of one conversation's direction, by time then frame,
        a frame once (the first of frames, methods, messages that recorded it)."""
        cap = int(self.captures.get_indexer([capture])[0])
        d = int(self.directions.get_indexer([direction])[0])
        if cap < 0 or d < 0 or tcp_stream is None or not 0 <= tcp_stream < self.width:
            return []
        key = (cap * self.width + tcp_stream) * len(self.directions) + d
        if key not in self.bounds:
            return []
        lo, hi = self.bounds[key]
        at = self.order[lo:hi]
        ts, frame = self.ts[at], self.frame[at]
        by_frame = np.argsort(frame, kind="stable")
        f = frame[by_frame]
        first = np.sort(by_frame[np.r_[True, f[1:] != f[:-1]]])  # of equal frames, the first row
        ts, frame = ts[first], frame[first]
        o = np.lexsort((frame, ts))
        return [(a, None if b == self.no_frame else b) for a, b in zip(ts[o].tolist(), frame[o].tolist())]


def _fitting(top: int):
    """int32 when every value is below ``top`` and fits, else int64."""
    return np.int32 if top < 2**31 - 1 else np.int64


def heartbeat_source(t) -> str:
    """Where the heartbeat analysis finds its signs of life: ``frames`` (the frames table: exact),
    ``liveness`` (the connections' per-direction heartbeat and silence columns, written by every
    dissect: exact for the longest silence, see :func:`heartbeat_gaps`) or ``methods`` (an output
    without either: silences are upper bounds, nothing can be called missed)."""
    t = as_tables(t)
    if t.has_frames or len(t.frames):
        return "frames"
    c = t.connections
    if len(c) and c["heartbeats_c2s"].notna().any():
        return "liveness"
    return "methods"


def heartbeat_gaps(t, *, late: float = 1.5, all_gaps: bool = False) -> pd.DataFrame:
    """Silences longer than the negotiated heartbeat interval, per conversation and direction.

    Any traffic counts as a sign of life (the spec: any octet resets the
    heartbeat timer).  Only conversations with a negotiated heartbeat > 0 are
    checked, from ``open_ts`` (else their first activity) to ``close_ts`` (else
    the conversation's last packet).  Listed: silences longer than ``late``
    intervals (default 1.5: a peer sending heartbeats at the interval shows gaps
    of one interval plus jitter, which are fine).  ``intervals`` = gap /
    heartbeat; ``missed``: the gap exceeds two intervals (where the spec lets
    the peer give up on the connection); ``open_ended``: the gap ran to the end.

    ``evidence`` says how much the row is worth:

    * ``frames``: the output has a ``frames`` table (``dissect --frames``); every
      frame, heartbeats included, is a sign of life: exact.
    * ``liveness``: no frames table, but the connection row records per direction
      the longest silence between two frames and the last frame
      (``silence_start_ts_*``, ``silence_end_ts_*``, ``last_frame_ts_*``): that
      silence and the silence after the last frame are exact (their
      ``start_frame`` / ``end_frame`` are null: the packets are not recorded).
      A gap between methods that is longer than the longest frame silence had
      frames in it (heartbeats): it is dropped when the longest silence is not
      late, else listed as ``unknown``.
    * ``unknown``: a gap between methods and contents whose heartbeat frames are
      not recorded: ``gap_s`` is an upper bound and ``missed`` is null (never
      reported as missed without evidence).

    ``source`` is :func:`heartbeat_source`.  ``all_gaps=True`` returns every gap
    between signs of life.
    """
    t = as_tables(t)
    c = t.connections
    c = c[c["heartbeat"].fillna(0) > 0] if len(c) else c
    rows: list[dict] = []
    if len(c) == 0:
        return build(rows, GAP_COLS)
    act, source = activity(t)
    source = heartbeat_source(t) if source != "frames" else source
    cols = ["capture", "tcp_stream", "heartbeat", "open_ts", "end_ts", "close_ts"] + LIVENESS_COLUMNS
    for r in records(c, cols):
        cap, st, hb, open_ts, end_ts, close_ts = r[:6]
        hb_ns = int(hb) * 1_000_000_000
        stop = close_ts if close_ts is not None else end_ts
        for i, (d, sender) in enumerate(_DIRS):
            found = silences(
                act, source, (cap, st, d), hb_ns, (open_ts, stop), r[6 + 4 * i : 10 + 4 * i], late, all_gaps
            )
            rows += [gap_row((cap, st, d, sender), ("heartbeat_s", hb), hb_ns, x, source) for x in found]
    return build(rows, GAP_COLS)


def gap_row(where, interval: tuple, interval_ns: int, silence: tuple, source: str) -> dict:
    """A :func:`heartbeat_gaps` row: ``where`` (capture, tcp_stream, direction, sender),
    ``interval`` (column, value) of the interval the silence is measured against, ``silence``
    as :func:`silences` gives it."""
    a, b, gap, start_frame, end_frame, trailing, evidence = silence
    return dict(
        zip(("capture", "tcp_stream", "direction", "sender"), where),
        **{interval[0]: interval[1]},
        start_frame=start_frame,
        start_ts=a,
        end_frame=end_frame,
        end_ts=b,
        gap_s=gap / 1e9,
        intervals=gap / interval_ns,
        missed=None if evidence == "unknown" else gap > 2 * interval_ns,
        open_ended=trailing,
        source=source,
        evidence=evidence,
    )


def silences(act, source, where, interval_ns, span, live_cols, late=1.5, all_gaps=False) -> list:
    """The silences of one conversation's direction ``where`` (capture, tcp_stream, direction)
    longer than ``late`` x ``interval_ns`` (every one with ``all_gaps``), between ``span``
    (from: open time, else the first sign of life; to: close, else the last packet): tuples
    (start ns, end ns, gap ns, start frame, end frame, open-ended, evidence), as
    :func:`heartbeat_gaps` lists them.  ``act``: :class:`Activity`; ``source``:
    :func:`heartbeat_source`; ``live_cols``: the direction's liveness columns (heartbeats,
    silence start, silence end, last frame)."""
    hbs, s0, s1, last = live_cols
    open_ts, stop = span
    threshold = 0 if all_gaps else late * interval_ns
    live = source != "frames" and hbs is not None
    marks = act.marks(*where)
    if live:  # the recorded frame times are signs of life too (one mark per instant, numbered if any)
        known = dict(marks)
        for x in (s0, s1, last):
            if x is not None and known.get(x) is None:
                known[x] = None
        marks = sorted(known.items())
    if not marks:
        return []
    start = open_ts if open_ts is not None else marks[0][0]
    marks = [m for m in marks if m[0] >= start]
    if not marks:
        return []
    open_end = stop is not None and stop > marks[-1][0]
    if open_end:
        marks.append((stop, None))
    longest = 0
    if live:  # the longest frame silence, the one after the last frame included
        longest = max(s1 - s0 if s0 is not None else 0, stop - last if (last and stop) else 0)
    mt = np.fromiter((m[0] for m in marks), dtype=np.int64, count=len(marks))
    gaps = np.diff(mt)
    out = []
    droppable = longest <= late * interval_ns and not all_gaps
    for k in np.nonzero(gaps > threshold)[0]:
        a, b, gap = int(mt[k]), int(mt[k + 1]), int(gaps[k])
        trailing = open_end and k == len(gaps) - 1
        evidence = silence_evidence(source, live, (a, b, trailing), (s0, s1, last), droppable)
        if evidence is None:
            continue
        out.append((a, b, gap, marks[k][1], marks[k + 1][1], trailing, evidence))
    return out


def silence_evidence(source: str, live: bool, silence: tuple, liveness: tuple, droppable: bool):
    """The ``evidence`` of a silence (start ns, end ns, open-ended) of :func:`silences`, ``liveness``
    the direction's (silence start, silence end, last frame); None: frames the tables do not show
    (heartbeats) broke it, when the longest frame silence was not late (``droppable``)."""
    a, b, trailing = silence
    s0, s1, last = liveness
    if source == "frames":
        return "frames"
    if not live:
        return "unknown"
    if (a, b) == (s0, s1) or (trailing and a == last):
        return "liveness"
    return None if droppable else "unknown"


def gap_counts(gaps: pd.DataFrame) -> dict:
    """``late`` (known), ``missed`` and ``unknown`` silences of a :func:`heartbeat_gaps` frame."""
    if len(gaps) == 0:
        return {"late": 0, "missed": 0, "unknown": 0}
    return {
        "late": int((gaps["evidence"] != "unknown").sum()),
        "missed": int(gaps["missed"].fillna(False).astype(bool).sum()),
        "unknown": int((gaps["evidence"] == "unknown").sum()),
    }


SUMMARY_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "direction": STR,
    "heartbeat_s": "Int32",
    "heartbeat_frames": "Int64",
    "max_gap_s": "float64",
    "late": "Int64",
    "missed": "Int64",
    "unknown": "Int64",
    "source": STR,
}


def heartbeat_summary(t) -> pd.DataFrame:
    """Per conversation (heartbeat > 0) and direction: heartbeat frames seen (``frames``
    table, else the connection's ``heartbeats_*`` column; null when neither was
    recorded), longest silence (null when not known exactly), gaps over 1.5
    intervals (``late``, known ones) and over two (``missed``), and gaps whose
    length is not known (``unknown``, see :func:`heartbeat_gaps`)."""
    t = as_tables(t)
    every = heartbeat_gaps(t, all_gaps=True)
    late = heartbeat_gaps(t)
    source = heartbeat_source(t)
    c = t.connections
    c = c[c["heartbeat"].fillna(0) > 0] if len(c) else c
    hbf = {}
    if source == "frames" and len(t.frames):
        f = t.frames[t.frames["type_name"] == "heartbeat"]
        hbf = f.groupby(["capture", "tcp_stream", "direction"], observed=True).size().to_dict()
    exact = every[every["evidence"] != "unknown"] if len(every) else every
    max_gap = {}
    if len(exact):
        max_gap = (
            exact.groupby(["capture", "tcp_stream", "direction"], observed=True)["gap_s"].max().to_dict()
        )
    rows = []
    for cap, st, hb, h_c2s, h_s2c in records(
        c, ["capture", "tcp_stream", "heartbeat", "heartbeats_c2s", "heartbeats_s2c"]
    ):
        for d, counted in (("c2s", h_c2s), ("s2c", h_s2c)):
            key = (cap, st, d)
            g = late
            if len(late):
                g = late[(late["capture"] == cap) & (late["tcp_stream"] == st) & (late["direction"] == d)]
            known = g[g["evidence"] != "unknown"] if len(g) else g
            rows.append(
                dict(
                    capture=cap,
                    tcp_stream=st,
                    direction=d,
                    heartbeat_s=hb,
                    heartbeat_frames=int(hbf.get(key, 0)) if source == "frames" else counted,
                    max_gap_s=max_gap.get(key),
                    late=int(len(known)),
                    missed=int(known["missed"].fillna(False).astype(bool).sum()) if len(known) else 0,
                    unknown=int(len(g) - len(known)),
                    source=source,
                )
            )
    return build(rows, SUMMARY_COLS)


BLOCKED_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "reason": STR,
    "blocked_frame": "Int64",
    "blocked_ts": TS_DTYPE,
    "unblocked_frame": "Int64",
    "unblocked_ts": TS_DTYPE,
    "duration_ms": "float64",
    "status": STR,
}


def blocked(t) -> pd.DataFrame:
    """connection.blocked -> the next connection.unblocked on the same conversation.

    ``status`` ``unblocked``, or ``still-blocked`` (NaN duration) when the
    capture or conversation ended first.  Repeated blocked notifications while
    blocked extend the same period (the first one is kept)."""
    t = as_tables(t)
    m = ordered(t.methods, ["connection.blocked", "connection.unblocked"])
    rows: list[dict] = []
    open_: dict = {}
    cols = ["capture", "tcp_stream", "method", "frame_number", "ts", "reason"]
    for cap, st, name, frame, ts, reason in records(m, cols):
        key = (cap, st)
        if name == "connection.blocked":
            if key not in open_:
                open_[key] = dict(
                    capture=cap, tcp_stream=st, reason=reason, blocked_frame=frame, blocked_ts=ts
                )
        elif key in open_:
            r = open_.pop(key)
            r.update(unblocked_frame=frame, unblocked_ts=ts, status="unblocked")
            rows.append(r)
    for r in open_.values():
        r["status"] = "still-blocked"
        rows.append(r)
    df = build(rows, BLOCKED_COLS)
    if len(df):
        df["duration_ms"] = latency_ms(
            [r["blocked_ts"] for r in rows],
            [NAT if r.get("unblocked_ts") is None else r["unblocked_ts"] for r in rows],
        )
        df = df.sort_values(["capture", "tcp_stream", "blocked_frame"], kind="stable").reset_index(drop=True)
    return df


FLOW_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "channel": "Int32",
    "direction": STR,
    "frame_number": "Int64",
    "ts": TS_DTYPE,
    "active": "boolean",
    "ok_frame": "Int64",
    "ok_ts": TS_DTYPE,
    "resumed_frame": "Int64",
    "resumed_ts": TS_DTYPE,
    "paused_ms": "float64",
}


def flow(t) -> pd.DataFrame:
    """One row per channel.flow request: who sent it, ``active``, its flow-ok, and for
    ``active == False`` the next channel.flow(active=True) from the same sender
    on the channel (``resumed_*``) and the pause length ``paused_ms`` (NaN if
    never resumed).  0-10 credit-based flow control (message.flow / stop) is
    not interpreted."""
    t = as_tables(t)
    m = ordered(t.methods, ["channel.flow", "channel.flow-ok"])
    rows: list[dict] = []
    pending_ok: dict = {}
    paused: dict = {}
    for cap, st, ch, d, name, frame, ts, active in records(
        m, ["capture", "tcp_stream", "channel", "direction", "method", "frame_number", "ts", "active"]
    ):
        active = bool(active)
        if name == "channel.flow":
            r = dict(
                capture=cap, tcp_stream=st, channel=ch, direction=d, frame_number=frame, ts=ts, active=active
            )
            rows.append(r)
            pending_ok.setdefault((cap, st, ch, d), []).append(r)
            key = (cap, st, ch, d)
            if not active:
                paused.setdefault(key, r)
            elif key in paused:
                p = paused.pop(key)
                p.update(resumed_frame=frame, resumed_ts=ts)
        else:  # flow-ok answers the peer's oldest unanswered flow
            peer = "s2c" if d == "c2s" else "c2s"
            lst = pending_ok.get((cap, st, ch, peer))
            if lst:
                r = lst.pop(0)
                r.update(ok_frame=frame, ok_ts=ts)
    df = build(rows, FLOW_COLS)
    if len(df):
        df["paused_ms"] = latency_ms(
            [r["ts"] if not r["active"] else NAT for r in rows],
            [NAT if r.get("resumed_ts") is None else r["resumed_ts"] for r in rows],
        )
    return df


_SETTLE, _QOS, _DELIVER = np.int8(0), np.int8(1), np.int8(2)  # unacked's events, in packet order
_EVENTS = np.array(["settle", "qos", "deliver"], dtype=object)


def _order_key(s: pd.Series) -> np.ndarray:
    """A key sorting like ``s.sort_values()``: a Categorical by its categories' order, missing
    values last."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes = s.cat.codes.to_numpy().astype(np.int64)
        return np.where(codes < 0, len(s.cat.categories), codes)
    return sort_key(s)


UNACKED_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "channel": "Int32",
    "ts": TS_DTYPE,
    "frame_number": "Int64",
    "event": STR,
    "unacked": "Int64",
    "prefetch_count": "Int32",
    "prefetch_global": "boolean",
    "over_prefetch": "boolean",
}


# the columns of a consumer_acks frame that unacked reads (a caller may keep just these)
UNACKED_ACK_COLS = [
    "capture",
    "tcp_stream",
    "channel",
    "request_ts",
    "request_frame",
    "response_frame",
    "response_ts",
]


def unacked(t, acks: pd.DataFrame | None = None) -> pd.DataFrame:
    """Unacknowledged deliveries per channel over time, against basic.qos prefetch.

    One row per change: ``event`` ``deliver`` (+1, at the packet completing the
    delivery) or ``settle`` (-n, at the ack / nack / reject / recover; one row
    per settling packet), ``qos`` (a basic.qos, unacked unchanged).
    ``unacked`` is the count after the event (deliveries from :func:`consumer_acks`,
    i.e. no-ack consumers excluded).  ``prefetch_count`` is the latest
    basic.qos prefetch-count on the channel (null before any, and 0 means no
    limit); ``over_prefetch`` is unacked > prefetch_count > 0.  With
    ``global = false`` RabbitMQ applies the count per consumer, so a channel
    with k consumers may hold k x prefetch: ``prefetch_global`` shows which.
    ``acks``: a :func:`consumer_acks` result (its :data:`UNACKED_ACK_COLS` are enough).
    """
    t = as_tables(t)
    acks = consumer_acks(t) if acks is None else acks
    ev = []
    keys = ["capture", "tcp_stream", "channel"]
    if len(acks):
        d = acks[keys + ["request_ts", "request_frame"]].rename(
            columns={"request_ts": "ts", "request_frame": "frame_number"}
        )
        d = d.assign(delta=1, _o=_DELIVER)
        s = acks[acks["response_frame"].notna()]
        s = (
            s.groupby(keys + ["response_frame", "response_ts"], dropna=False, observed=True)
            .size()
            .reset_index(name="n")
        )
        s = s.rename(columns={"response_ts": "ts", "response_frame": "frame_number"})
        s = s.assign(delta=-s["n"], _o=_SETTLE).drop(columns="n")
        ev += [d, s]
    m = t.methods
    q = m[(m["method"] == "basic.qos") & (m["direction"] == "c2s")] if len(m) else m
    if len(q):
        qq = q[keys + ["ts", "frame_number", "prefetch_count", "qos_global"]].rename(
            columns={"qos_global": "prefetch_global"}
        )
        qq = qq.assign(prefetch_global=qq["prefetch_global"].fillna(False), delta=0, _o=_QOS)
        ev.append(qq)
    if not ev:
        return build([], UNACKED_COLS)
    e = pd.concat(ev, ignore_index=True)
    if "prefetch_count" not in e.columns:
        e["prefetch_count"] = pd.NA
        e["prefetch_global"] = pd.NA
    e["_ts"] = ns(e["ts"])
    e = e.drop(columns="ts")
    # by channel, time, packet; within a packet: settle before qos before deliver (an ack and the
    # next delivery may share a packet); the order found on the keys, then one take of the rows
    by = [_order_key(e[c]) for c in ("capture", "tcp_stream", "channel")]
    order = np.lexsort([e["_o"].to_numpy(), _order_key(e["frame_number"]), e["_ts"].to_numpy()] + by[::-1])
    del by
    e = e.iloc[order].reset_index(drop=True)
    del order
    g = e.groupby(keys, sort=False, dropna=False, observed=True)
    e["unacked"] = g["delta"].cumsum()
    e["prefetch_count"] = g["prefetch_count"].ffill()
    e["prefetch_global"] = g["prefetch_global"].ffill()
    pc = e["prefetch_count"].astype("Int64")
    un = e["unacked"].astype("Int64")
    over = ((pc.fillna(0) > 0) & (un > pc)).fillna(False)
    out = pd.DataFrame(
        {
            "capture": e["capture"],
            "tcp_stream": e["tcp_stream"].astype("Int32"),
            "channel": e["channel"].astype("Int32"),
            "ts": pd.to_datetime(e["_ts"].to_numpy().view("datetime64[ns]"), utc=True),
            "frame_number": e["frame_number"].astype("Int64"),
            "event": _EVENTS[e["_o"].to_numpy()],
            "unacked": un,
            "prefetch_count": pc.astype("Int32"),
            "prefetch_global": e["prefetch_global"].astype("boolean"),
            "over_prefetch": over.astype("boolean"),
        }
    )
    # a Categorical capture (a lean load) stays one: a code per row, not the path's text per row
    keep = ("event",) if isinstance(out["capture"].dtype, pd.CategoricalDtype) else ("capture", "event")
    out = out.astype({k: v for k, v in UNACKED_COLS.items() if k in keep})
    return out.reset_index(drop=True)


ZERO_WINDOW_COLS = [
    "capture",
    "tcp_stream",
    "direction",
    "start_frame",
    "end_frame",
    "start_ts",
    "end_ts",
    "duration_ms",
    "reopened",
]


def zero_windows(t) -> pd.DataFrame:
    """One row per period in which a side advertised a zero TCP receive window.

    ``direction`` is the side that advertised it (``s2c``: the broker could not take
    more; ``c2s``: the client stopped reading).  A period still open at the end of the
    capture has ``reopened`` False and lasts until the conversation's last packet.
    """
    import json

    t = as_tables(t)
    c = t.connections
    rows = []
    if "zero_windows" in c.columns:
        for cap, st, zw, end in zip(c["capture"], c["tcp_stream"], c["zero_windows"], c["end_ts"]):
            if not isinstance(zw, str):
                continue
            for d, f0, t0, f1, t1 in json.loads(zw):
                start = pd.Timestamp(t0, tz="UTC")
                stop = pd.Timestamp(t1, tz="UTC") if t1 is not None else end
                rows.append(
                    dict(
                        capture=cap,
                        tcp_stream=st,
                        direction=d,
                        start_frame=f0,
                        end_frame=f1,
                        start_ts=start,
                        end_ts=stop,
                        duration_ms=(stop - start).value / 1e6,
                        reopened=t1 is not None,
                    )
                )
    return pd.DataFrame(rows, columns=ZERO_WINDOW_COLS)


def health(t) -> dict[str, pd.DataFrame]:
    """All health frames: ``heartbeat_gaps``, ``heartbeat_summary``, ``blocked``, ``flow``, ``unacked``,
    ``zero_windows``."""
    t = as_tables(t)
    return {
        "heartbeat_gaps": heartbeat_gaps(t),
        "heartbeat_summary": heartbeat_summary(t),
        "blocked": blocked(t),
        "flow": flow(t),
        "unacked": unacked(t),
        "zero_windows": zero_windows(t),
    }
