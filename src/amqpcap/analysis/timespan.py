"""The time span of a dissect output and its time outliers, read a batch at a time.

What :func:`amqpcap.analysis.summary.span_summary` and ``time_outliers`` compute from loaded
tables, from the ``ts`` columns of an output directory instead: minima and maxima as the batches
go by, each capture's median stamp found exactly by narrowing passes over the ``ts`` column (a
count per range of values, then the values of one range: about a millisecond of packets), never
every stamp at once.  Memory follows a batch and the span's coarse ranges, not the table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from amqpcap.analysis import batches
from amqpcap.analysis._common import filled, ns

__all__ = ["first_ts", "span_parts", "outliers"]

# the stamped tables whose rows can be time outliers (connections: their span only)
_ROW_TABLES = ("methods", "messages", "frames")
_ROW_COLS = ["capture", "tcp_stream", "frame_number", "ts"]
_SHIFTS = (40, 20)  # the narrowing passes: ranges of 2**40 ns (18 min), then 2**20 ns (1 ms)


def _stamps(directory, cols=_ROW_COLS):
    """(batch frame, its capture names ("" when missing), stamps as int64 ns, stamped mask) of the
    rows of methods, messages and frames, table after table, batch after batch."""
    for name in _ROW_TABLES:
        for df in batches.frames(directory, name, cols):
            yield (
                df,
                filled(df["capture"], "").astype(str).to_numpy(),
                ns(df["ts"]),
                df["ts"].notna().to_numpy(),
            )


def span_parts(directory) -> tuple[list, int | None]:
    """The minimum and maximum of every ``ts`` / ``end_ts`` column of the output (the list
    :func:`~amqpcap.analysis.summary.span_summary` takes its start and end from, as ns), and the
    first packet's time (ns, None when nothing is stamped: the report's time origin)."""
    ts, first = [], None
    for name, cols in (
        ("connections", ["ts", "end_ts"]),
        ("methods", ["ts"]),
        ("messages", ["ts"]),
        ("frames", ["ts"]),
    ):
        for c in cols:
            lo = hi = None
            for df in batches.frames(directory, name, [c]):
                v = ns(df[c])[df[c].notna().to_numpy()]
                if len(v):
                    lo = v.min() if lo is None else min(lo, v.min())
                    hi = v.max() if hi is None else max(hi, v.max())
            if lo is not None:
                ts += [int(lo), int(hi)]
                if c == "ts":
                    first = int(lo) if first is None else min(first, int(lo))
    return ts, first


def first_ts(directory) -> pd.Timestamp | None:
    """The time of the output's first packet (``ts`` of every table), None when nothing is stamped."""
    first = span_parts(directory)[1]
    return None if first is None else pd.Timestamp(first, tz="UTC")


def _medians(directory) -> dict:
    """Each capture's median stamp (float ns, as ``np.median`` of its stamps as float64 gives it)."""
    count: dict = {}
    for _, caps, _v, ok in _stamps(directory, ["capture", "ts"]):
        for cap, n in zip(*np.unique(caps[ok], return_counts=True)):
            count[cap] = count.get(cap, 0) + int(n)
    # per capture the ranks wanted (the middle one, or the two middle ones), each narrowed to
    # (shift, prefix, rank within the values of that prefix)
    want = {(cap, k): (None, None, k) for cap, n in count.items() for k in {(n - 1) // 2, n // 2}}
    for shift in _SHIFTS:
        hist: dict = {}
        for _, caps, v, ok in _stamps(directory, ["capture", "ts"]):
            for key, (prev, prefix, _) in want.items():
                sel = v[ok & (caps == key[0])]
                if prev is not None:
                    sel = sel[(sel >> prev) == prefix]
                b, n = np.unique(sel >> shift, return_counts=True)
                h = hist.setdefault(key, {})
                for x, m in zip(b.tolist(), n.tolist()):
                    h[x] = h.get(x, 0) + m
        for key, (_, _, rank) in list(want.items()):
            for x in sorted(hist[key]):
                if rank < hist[key][x]:
                    want[key] = (shift, x, rank)
                    break
                rank -= hist[key][x]
    values: dict = {key: [] for key in want}
    for _, caps, v, ok in _stamps(directory, ["capture", "ts"]):
        for key, (prev, prefix, _) in want.items():
            sel = v[ok & (caps == key[0])]
            values[key].append(sel[(sel >> prev) == prefix])
    out = {}
    for cap, n in count.items():
        mid = [np.sort(np.concatenate(values[(cap, k)]))[want[(cap, k)][2]] for k in ((n - 1) // 2, n // 2)]
        out[cap] = np.median(np.array(mid, dtype=np.int64).astype(np.float64))
    return out


def outliers(directory, floor_ns: int, far_ns: int) -> pd.DataFrame:
    """``time_outliers`` of an output directory: the rows (``capture``, ``tcp_stream``,
    ``frame_number``, ``ts``) of methods, messages and frames stamped before ``floor_ns`` or more
    than ``far_ns`` from their capture's median, a packet once, in capture and packet order."""
    med = _medians(directory)
    odd = []
    for df, caps, v, ok in _stamps(directory):
        m = np.array([med.get(c, 0.0) for c in caps], dtype=np.float64) if len(set(med)) > 1 else None
        centre = m if m is not None else (next(iter(med.values())) if med else 0.0)
        bad = ok & ((v < floor_ns) | (np.abs(v - centre) > far_ns))
        if bad.any():
            odd.append(df[bad])
    if not odd:
        return pd.DataFrame({c: [] for c in _ROW_COLS})
    odd = pd.concat(odd, ignore_index=True).drop_duplicates(["capture", "frame_number"])
    return odd.sort_values(["capture", "frame_number"], kind="stable").reset_index(drop=True)
