"""stats' heartbeat counts (late, missed, unknown silences) in one pass over the row groups of a
dissect output: per conversation and direction only the first and last stamp of each table and
the silences longer than the connection's threshold, not every packet's stamp.

A silence of all signs of life together (frames, methods, messages, the liveness instants) is
a silence of each table alone, so the long silences of the union are the intersections of each
table's long silences (and the spans before its first and after its last stamp) that are still
long: the same silences :func:`~amqpcap.analysis.connection_health.heartbeat_gaps` lists from
every stamp.  Tables whose stamps go back in time within a conversation, or rows without a
stamp or frame number, raise :class:`~amqpcap.analysis.batches.OutOfOrder`: the caller then
computes from the loaded tables.
"""

from __future__ import annotations

import numpy as np

from amqpcap.analysis import batches
from amqpcap.analysis._common import NAT, records
from amqpcap.analysis.batches import Codes, OutOfOrder
from amqpcap.analysis.connection_health import LIVENESS_COLUMNS, heartbeat_source, silence_evidence

__all__ = ["heartbeat_counts"]

_INF = float("inf")
_DIRECTIONS = {"c2s": 0, "s2c": 1}


def heartbeat_counts(directory, conns, late: float = 1.5) -> dict:
    """``heartbeat_late``, ``heartbeat_missed``, ``heartbeat_unknown`` and ``heartbeat_source`` of
    dissect output ``directory`` (counted as stats counts the rows of ``heartbeat_gaps``);
    ``conns``: its connections (``heartbeat``, ``open_ts``, ``end_ts``, ``close_ts`` and the
    liveness columns) loaded as :class:`~amqpcap.analysis.tables.Tables`."""
    source = heartbeat_source(conns)
    c = conns.connections
    c = c[c["heartbeat"].fillna(0) > 0] if len(c) else c
    out = {"late": 0, "missed": 0, "unknown": 0}
    if len(c) == 0:
        return out
    cols = ["capture", "tcp_stream", "heartbeat", "open_ts", "end_ts", "close_ts"] + LIVENESS_COLUMNS
    rows = list(records(c, cols))
    conv: dict = {}  # (capture, tcp_stream) -> conversation number
    for r in rows:
        if r[1] is not None:
            conv.setdefault((r[0], r[1]), len(conv))
    threshold = np.full(2 * len(conv), np.inf)  # per conversation and direction: the smallest
    for r in rows:
        if (r[0], r[1]) in conv:
            k = 2 * conv[(r[0], r[1])]
            threshold[k : k + 2] = np.minimum(threshold[k : k + 2], late * int(r[2]) * 1_000_000_000)
    names = (["frames"] if source == "frames" else []) + ["methods", "messages"]
    seen = [_Stamps(directory, name, conv, threshold) for name in names]
    for r in rows:
        hb_ns = int(r[2]) * 1_000_000_000
        stop = r[5] if r[5] is not None else r[4]
        if r[1] is None:
            continue
        for i in _DIRECTIONS.values():
            gid = 2 * conv[(r[0], r[1])] + i
            live = r[6 + 4 * i : 10 + 4 * i]
            for evidence, gap in _silences(seen, gid, source, hb_ns, (r[3], stop), live, late):
                if evidence == "unknown":
                    out["unknown"] += 1
                else:
                    out["late"] += 1
                    out["missed"] += int(gap > 2 * hb_ns)
    return out


class _Stamps:
    """One table's signs of life per conversation direction: first and last stamp, and the
    silences longer than the direction's ``threshold`` (start, end), from one pass over it."""

    def __init__(self, directory, name: str, conv: dict, threshold: np.ndarray):
        n = len(threshold)
        self.first = np.full(n, NAT, dtype=np.int64)
        self.last = np.full(n, NAT, dtype=np.int64)
        found = []
        caps, dirs = Codes(), Codes()
        lookup: dict = {}  # capture code -> conversation number by tcp_stream
        cols = ["capture", "tcp_stream", "direction", "frame_number", "ts"]
        # (array work alone, no Python per row: batches of BATCH_ROWS, each batch's fixed cost paid
        # fewer times than at PASS_ROWS)
        strings = {"capture": caps, "direction": dirs}
        for b in batches.batches(directory, name, cols, strings, rows=batches.BATCH_ROWS):
            gid = self._groups(b, caps, dirs, conv, lookup)
            at = np.flatnonzero(gid >= 0)
            if len(at) == 0:
                continue
            if np.any(b["frame_number"][at] < 0) or np.any(b["ts"][at] == NAT):
                raise OutOfOrder("a sign of life without a frame number or a stamp")
            o = at[np.argsort(gid[at], kind="stable")]
            g, ts = gid[o], b["ts"][o]
            same = g[1:] == g[:-1]
            step = np.diff(ts)
            if np.any(same & (step < 0)):
                raise OutOfOrder("stamps back in time within a conversation")
            heads = np.r_[True, ~same]
            tails = np.r_[~same, True]
            gh, th = g[heads], ts[heads]
            prev = self.last[gh]
            had = prev != NAT
            if np.any(had & (th < prev)):
                raise OutOfOrder("stamps back in time within a conversation")
            across = had & ((th - prev) > threshold[gh])
            within = same & (step > threshold[g[1:]])
            found.append((gh[across], prev[across], th[across]))
            found.append((g[1:][within], ts[:-1][within], ts[1:][within]))
            self.first[gh[~had]] = th[~had]
            self.last[g[tails]] = ts[tails]
        self.gaps: dict = {}
        if found:
            g, a, b = (np.concatenate(x).tolist() for x in zip(*found))
            for k, lo, hi in sorted(zip(g, a, b)):
                self.gaps.setdefault(k, []).append((lo, hi))

    def free(self, gid: int) -> list | None:
        """The spans of ``gid`` this table shows no sign of life in that may hold a long silence
        (None: no row of it)."""
        if self.first[gid] == NAT:
            return None
        return [(-_INF, int(self.first[gid])), *self.gaps.get(gid, []), (int(self.last[gid]), _INF)]

    @staticmethod
    def _groups(b: dict, caps: Codes, dirs: Codes, conv: dict, lookup: dict) -> np.ndarray:
        """Each row's conversation direction number (-1: none checked)."""
        for code in range(len(lookup), len(caps.values)):
            cap = caps.values[code]
            streams = [st for (c, st) in conv if c == cap]
            arr = np.full(max(streams, default=-1) + 1, -1, dtype=np.int64)
            for st in streams:
                arr[st] = conv[(cap, st)]
            lookup[code] = arr
        d = np.array([_DIRECTIONS.get(v, -1) for v in dirs.values] + [-1], dtype=np.int64)[b["direction"]]
        out = np.full(len(d), -1, dtype=np.int64)
        st = b["tcp_stream"]
        for code in np.unique(b["capture"]).tolist():
            if code < 0:
                continue
            arr = lookup[code]
            rows = (b["capture"] == code) & (st >= 0) & (st < len(arr))
            out[rows] = arr[st[rows]]
        out[(out < 0) | (d < 0)] = -1
        return np.where(out >= 0, 2 * out + d, -1)


def _intersect(x: list, y: list) -> list:
    """The overlaps of two ascending lists of disjoint open spans."""
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        lo, hi = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if lo < hi:
            out.append((lo, hi))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def _silences(seen: list, gid: int, source: str, interval_ns: int, span: tuple, live_cols, late: float):
    """(evidence, gap ns) of each silence ``heartbeat_gaps`` lists for one direction (see
    :func:`~amqpcap.analysis.connection_health.silences`, whose rules these are)."""
    hbs, s0, s1, last = live_cols
    open_ts, stop = span
    live = source != "frames" and hbs is not None
    spans = [f for f in (s.free(gid) for s in seen) if f is not None]
    points = sorted({x for x in (s0, s1, last) if x is not None}) if live else []
    if points:
        spans.append(list(zip([-_INF] + points, points + [_INF])))
    if not spans:
        return []
    free = spans[0]
    for f in spans[1:]:
        free = _intersect(free, f)
    lowest, highest = free[0][1], free[-1][0]  # the first and the last sign of life
    start = open_ts if open_ts is not None else lowest
    if highest < start:
        return []
    threshold = late * interval_ns
    found = [(int(a), int(b), False) for a, b in free if a != -_INF and b != _INF and a >= start]
    if stop is not None and stop > highest:
        found.append((int(highest), stop, True))
    longest = 0
    if live:  # the longest frame silence, the one after the last frame included
        longest = max(s1 - s0 if s0 is not None else 0, stop - last if (last and stop) else 0)
    out = []
    for a, b, trailing in found:
        gap = b - a
        evidence = silence_evidence(source, live, (a, b, trailing), (s0, s1, last), longest <= threshold)
        if gap > threshold and evidence is not None:
            out.append((evidence, gap))
    return out
