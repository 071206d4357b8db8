"""AMQP 1.0 link credit: zero-credit stalls and drain cycles, from the methods rows.

A link's sender may send only while it holds credit.  The receiver grants it by ``flow``
(``link_credit`` counted from its ``delivery_count``: the sender's credit is the receiver's
delivery-count + link-credit - the sender's own delivery-count), each delivery the sender
begins uses one, and the sender's own ``flow`` states its view (``link_credit``,
``delivery_count``) and how many messages it has waiting (``available``).

* :func:`credit_stalls`: one row per period a link held zero credit: from its attach (no
  credit granted yet), from the transfer that used the last credit, from a drain that ended
  with credit 0, or from a receiver's flow granting none, to the receiver's flow that gave
  credit again (``resumed``), else the link's detach, its session's end or the
  connection's end (``ended``).  ``backlog``: the largest ``available`` the sender reported
  in the period or in its answer to the flow that ended it (before its next transfer); a
  period with a backlog is a stall (``stalled``): the link could not take messages the
  sender had.  Without a reported ``available`` the backlog is unknown (null).
* :func:`drains`: one row per receiver flow with ``drain`` set (a drain cycle): what the
  receiver asked (``credit``), what the sender had (``available``, from its answer), the
  deliveries sent meanwhile, and how it ended: ``drained`` (a sender flow with link-credit
  0), ``used`` (the deliveries used up the credit), ``cancelled`` (a receiver flow without
  drain), ``ended`` (the link, session or connection ended first).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from amqpcap.analysis._common import ROW_KEYS, STR, TS_DTYPE, build, records

# the methods columns the credit walk reads (stats' section loads them)
_LINK_STATE = ["role", "more", "link_credit", "delivery_count", "drain", "available"]
CREDIT_COLUMNS = ROW_KEYS + ["link_name"] + _LINK_STATE

STALL_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "link_name": STR,
    "sender": STR,
    "cause": STR,
    "start_frame": "Int64",
    "start_ts": TS_DTYPE,
    "end_frame": "Int64",
    "end_ts": TS_DTYPE,
    "duration_ms": "float64",
    "status": STR,
    "backlog": "Int64",
    "stalled": "boolean",
}

DRAIN_COLS = {
    "capture": STR,
    "tcp_stream": "Int32",
    "link_name": STR,
    "sender": STR,
    "request_frame": "Int64",
    "request_ts": TS_DTYPE,
    "credit": "Int64",
    "available": "Int64",
    "deliveries": "Int64",
    "end_frame": "Int64",
    "end_ts": TS_DTYPE,
    "duration_ms": "float64",
    "status": STR,
}

_SERIAL = 1 << 32
_LINK_ROWS = ("attach", "flow", "transfer", "detach")


def _serial_diff(a: int, b: int) -> int:
    """a - b in RFC 1982 serial arithmetic (delivery counts are 32-bit serial numbers)."""
    d = (a - b) % _SERIAL
    return d - _SERIAL if d >= _SERIAL // 2 else d


def _v10_methods(t) -> pd.DataFrame:
    m = t.methods
    if len(m) == 0 or "version" not in m or "link_name" not in m:
        return m.iloc[0:0]
    m = m[(m["version"].astype(object) == "1.0").to_numpy(dtype=bool)]
    return m.sort_values(["capture", "tcp_stream", "ts", "frame_number", "stream_offset"], kind="stable")


def _ends(m: pd.DataFrame, conn: pd.DataFrame) -> tuple[dict, dict]:
    """Per (capture, tcp_stream): the session ends [(ts, frame, direction, channel)], and the
    connection's end (ts ns, frame or None): its close, else its last packet."""
    ends: dict = {}
    e = m[m["method"].astype(object) == "end"]
    for cap, st, ts, fr, d, ch in zip(
        e["capture"], e["tcp_stream"], e["ts"], e["frame_number"], e["direction"], e["channel"]
    ):
        ends.setdefault((cap, st), []).append((ts.value, _opt(fr), d, _opt(ch)))
    last: dict = {}
    if len(conn):
        for cap, st, close, end in zip(conn["capture"], conn["tcp_stream"], conn["close_ts"], conn["end_ts"]):
            stop = close if not pd.isna(close) else end
            if not pd.isna(stop):
                last[(cap, st)] = (stop.value, None)
    return ends, last


def _opt(v):
    return None if pd.isna(v) else int(v)


class _Link:
    """The credit walk of one link (its attach, flow, transfer and detach rows in wire order)."""

    def __init__(self, key, rows):
        self.key, self.rows = key, rows
        self.sender = self._sender_direction()
        self.stalls: list = []
        self.drain_rows: list = []

    def _sender_direction(self):
        for r in self.rows:
            if r["method"] == "transfer":
                return r["direction"]
            if r["method"] == "attach" and r["role"] in ("sender", "receiver"):
                d = r["direction"]
                return d if r["role"] == "sender" else ("s2c" if d == "c2s" else "c2s")
        return None

    def walk(self, session_ends, conn_end):
        if self.sender is None:
            return
        channels = {r["direction"]: r["channel"] for r in self.rows}
        end = self._end(session_ends, conn_end, channels)
        credit, snd_count, initial = 0, None, 0
        more = False
        stall = None  # the open zero-credit period: dict
        drain = None  # the open drain cycle: dict
        answer_wanted = False  # the sender's next flow answers the flow that ended a stall
        rows = [r for r in self.rows if r["ts"] <= end[0]]
        for r in rows:
            name, ts, fr, mine = (
                r["method"],
                r["ts"],
                r["frame_number"],
                r["direction"] == self.sender,
            )
            if name == "attach":
                if mine and r["delivery_count"] is not None:
                    initial = r["delivery_count"]
                    snd_count = initial if snd_count is None else snd_count
                if stall is None and credit == 0 and not self.stalls:
                    stall = self._open(ts, fr, "attach")
            elif name == "transfer" and mine:
                if not more:  # a delivery begins: it uses one credit
                    snd_count = (initial if snd_count is None else snd_count) + 1
                    credit = max(credit - 1, 0)
                    if drain is not None:
                        drain["deliveries"] += 1
                    answer_wanted = False
                    if credit == 0 and stall is None:
                        if drain is not None:
                            drain = self._close_drain(drain, ts, fr, "used")
                        stall = self._open(ts, fr, "exhausted")
                more = r["more"] is True
            elif name == "flow" and r["link_credit"] is not None:
                lc = r["link_credit"]
                if mine:  # the sender's view and backlog
                    if r["delivery_count"] is not None:
                        snd_count = r["delivery_count"]
                    credit = lc
                    avail = r["available"]
                    if drain is not None and drain["available"] is None:
                        drain["available"] = avail
                    if drain is not None and lc == 0:
                        drain = self._close_drain(drain, ts, fr, "drained")
                        if stall is None:
                            stall = self._open(ts, fr, "drained")
                    if avail is not None:
                        if stall is not None:
                            stall["backlog"] = max(stall["backlog"] or 0, avail)
                        elif answer_wanted and self.stalls:
                            last = self.stalls[-1]
                            last["backlog"] = max(last["backlog"] or 0, avail)
                    answer_wanted = False
                else:  # the receiver grants credit
                    dc = r["delivery_count"] if r["delivery_count"] is not None else initial
                    sc = initial if snd_count is None else snd_count
                    credit = max(_serial_diff(dc + lc, sc), 0)
                    if drain is not None and r["drain"] is not True:
                        drain = self._close_drain(drain, ts, fr, "cancelled")
                    if r["drain"] is True and drain is None:
                        drain = self._open_drain(ts, fr, lc)
                    if credit > 0 and stall is not None:
                        self._close(stall, ts, fr, "resumed")
                        stall, answer_wanted = None, True
                    elif credit == 0 and stall is None:
                        stall = self._open(ts, fr, "zeroed")
        if stall is not None:
            self._close(stall, end[0], end[1], "ended")
        if drain is not None:
            self._close_drain(drain, end[0], end[1], "ended")

    def _end(self, session_ends, conn_end, channels):
        """(ts ns, frame) where the link stopped: its first detach, its session's first end after
        its attach, else the connection's end (else its last row)."""
        start = self.rows[0]["ts"]
        cands = [(r["ts"], r["frame_number"]) for r in self.rows if r["method"] == "detach"]
        cands += [(ts, fr) for ts, fr, d, ch in session_ends if ts >= start and channels.get(d) == ch]
        if cands:
            return min(cands, key=lambda x: x[0])
        if conn_end is not None:
            return conn_end
        last = self.rows[-1]
        return last["ts"], last["frame_number"]

    def _open(self, ts, fr, cause):
        s = {"cause": cause, "start_ts": ts, "start_frame": fr, "backlog": None}
        self.stalls.append(s)
        return s

    @staticmethod
    def _close(s, ts, fr, status):
        s.update(end_ts=ts, end_frame=fr, status=status)

    def _open_drain(self, ts, fr, credit):
        d = {"request_ts": ts, "request_frame": fr, "credit": credit, "available": None, "deliveries": 0}
        self.drain_rows.append(d)
        return d

    @staticmethod
    def _close_drain(d, ts, fr, status):
        d.update(end_ts=ts, end_frame=fr, status=status)
        return None


def _links(t) -> list:
    """Every 1.0 link of ``t`` walked (:class:`_Link`)."""
    m = _v10_methods(t)
    if len(m) == 0:
        return []
    ends, conn_ends = _ends(m, t.connections)
    m = m[m["method"].astype(object).isin(_LINK_ROWS) & m["link_name"].notna()]
    cols = ["capture", "tcp_stream", "ts", "frame_number", "direction", "channel", "method", "link_name"]
    cols += _LINK_STATE
    by_link: dict = {}  # (capture, tcp_stream, link_name) -> its rows in wire order
    for r in records(m, cols):  # (plain values: ts as int ns, a missing value as None)
        by_link.setdefault(r[:2] + r[7:8], []).append(dict(zip(cols, r)))
    out = []
    for key in sorted(by_link, key=lambda k: tuple("" if v is None else v for v in k)):
        for rows in _lifetimes(by_link.pop(key)):
            link = _Link(key, rows)
            link.walk(ends.get(key[:2], []), conn_ends.get(key[:2]))
            out.append(link)
    return out


def _lifetimes(rows: list) -> list:
    """The rows of one link name cut into the link's lifetimes: a name attached again (an attach
    from a side that has attached it already) is a new link."""
    out, attached = [], set()
    for r in rows:
        if r["method"] == "attach":
            if r["direction"] in attached or not out:
                out.append([])
                attached = set()
            attached.add(r["direction"])
        elif not out:
            out.append([])
        out[-1].append(r)
    return out


def _frame(rows: list, cols: dict) -> pd.DataFrame:
    df = build(rows, cols)
    for a, b in (("start_ts", "end_ts"), ("request_ts", "end_ts")):
        if a in df and b in df:
            df["duration_ms"] = (df[b] - df[a]).dt.total_seconds() * 1000.0
    return df


def credit_stalls(t, links=None) -> pd.DataFrame:
    """Zero-credit periods of every 1.0 link (see the module docstring), in link and time order.
    Columns: ``capture``, ``tcp_stream``, ``link_name``, ``sender`` (the direction of the
    link's transfers), ``cause``, ``start_frame``, ``start_ts``, ``end_frame``, ``end_ts``,
    ``duration_ms``, ``status``, ``backlog``, ``stalled``."""
    rows = []
    for link in _links(t) if links is None else links:
        cap, st, name = link.key
        for s in link.stalls:
            rows.append(
                dict(
                    capture=cap,
                    tcp_stream=st,
                    link_name=name,
                    sender=link.sender,
                    **s,
                    stalled=None if s["backlog"] is None else s["backlog"] > 0,
                )
            )
    return _frame(rows, STALL_COLS)


def drains(t, links=None) -> pd.DataFrame:
    """Drain cycles of every 1.0 link (see the module docstring).  Columns: ``capture``,
    ``tcp_stream``, ``link_name``, ``sender``, ``request_frame``, ``request_ts``, ``credit``,
    ``available``, ``deliveries``, ``end_frame``, ``end_ts``, ``duration_ms``, ``status``."""
    rows = []
    for link in _links(t) if links is None else links:
        cap, st, name = link.key
        rows += [
            dict(capture=cap, tcp_stream=st, link_name=name, sender=link.sender, **d) for d in link.drain_rows
        ]
    return _frame(rows, DRAIN_COLS)


def credit_summary(t) -> dict:
    """stats' credit figures (``health``): ``credit_stalls`` (zero-credit periods with a backlog),
    ``credit_stall_ms_total`` / ``credit_stall_ms_max`` (their durations), ``credit_stalls_open``
    (of them, still stalled when the link ended), ``drain_cycles``, ``drains_incomplete``
    (cycles that ended with the link, not drained, used up or cancelled)."""
    links = _links(t)
    s, d = credit_stalls(t, links), drains(t, links)
    st = s[s["stalled"].fillna(False).astype(bool)] if len(s) else s
    ms = st["duration_ms"].dropna() if len(st) else pd.Series([], dtype="float64")
    return {
        "credit_stalls": int(len(st)),
        "credit_stall_ms_total": round(float(ms.sum()), 3) if len(ms) else 0.0,
        "credit_stall_ms_max": round(float(np.max(ms)), 3) if len(ms) else None,
        "credit_stalls_open": int((st["status"] == "ended").sum()) if len(st) else 0,
        "drain_cycles": int(len(d)),
        "drains_incomplete": int((d["status"] == "ended").sum()) if len(d) else 0,
    }
