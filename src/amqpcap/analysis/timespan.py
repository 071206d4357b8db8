"""The time span of a dissect output and its time outliers, read a batch at a time.

What :func:`amqpcap.analysis.summary.span_summary` and ``time_outliers`` compute from loaded
tables, from the ``ts`` columns of an output directory instead: minima and maxima as the batches
go by.  A row is an outlier when stamped before a floor or far from its capture's median stamp;
a capture whose stamps all lie within that distance of each other (and above the floor) has
none, whatever its median: the common case, decided from its minimum and maximum alone.  Else
the median is found exactly by narrowing passes over the ``ts`` column (a count per range of
values, then the values of one range: about a millisecond of packets), never every stamp at once.
Memory follows a batch and the span's coarse ranges, not the table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from amqpcap.analysis import batches

__all__ = ["first_ts", "span_parts", "span", "outliers"]

# the stamped tables whose rows can be time outliers (connections: their span only)
_ROW_TABLES = ("methods", "messages", "frames")
_ROW_COLS = ["capture", "tcp_stream", "frame_number", "ts"]
_MARGIN = 1_000_000  # ns
_SHIFTS = (40, 20)  # the narrowing passes: ranges of 2**40 ns (18 min), then 2**20 ns (1 ms)


def _ns(col) -> tuple[np.ndarray, np.ndarray]:
    """A time column's values as int64 ns (0 where missing) and where they are present."""
    ok = pc.is_valid(col).to_numpy(zero_copy_only=False)
    v = pc.fill_null(col.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    return v, ok


def _captures(col) -> tuple[np.ndarray, list]:
    """Each row's capture as a code into the returned names (a missing capture counts as "")."""
    col = pc.fill_null(col.cast(pa.string()), "")
    enc = pc.dictionary_encode(col).combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False), enc.dictionary.to_pylist()


def _stamps(directory, cols=("capture", "ts")):
    """(batch, capture codes, their names, stamps as int64 ns, stamped mask) of the rows of
    methods, messages and frames, table after table, batch after batch."""
    for name in _ROW_TABLES:
        for table in batches.tables(directory, name, list(cols)):
            codes, names = _captures(table.column("capture"))
            v, ok = _ns(table.column("ts"))
            yield table, codes, names, v, ok


def span_parts(directory) -> tuple[list, int | None]:
    """The minimum and maximum of every ``ts`` / ``end_ts`` column of the output (those
    :func:`span` gives), and the first packet's time (ns, None when nothing is stamped: the
    report's time origin)."""
    return _ends(directory, [("connections", ["ts", "end_ts"])] + [(name, ["ts"]) for name in _ROW_TABLES])


def span(directory, floor_ns: int, far_ns: int) -> tuple[list, pd.DataFrame | None]:
    """What :func:`~amqpcap.analysis.summary.span_summary` takes from an output: the minimum and
    maximum of the connections' ``ts`` / ``end_ts`` and those of each capture's stamps in the
    row tables (ns; their least and greatest are :func:`span_parts`'), and the rows of
    :func:`outliers` (None when nothing is stamped), the row tables' stamps read once for both."""
    extent = _extent(directory)
    ends = _ends(directory, [("connections", ["ts", "end_ts"])])[0]
    ends += [int(x) for _, lo, hi in extent.values() for x in (lo, hi)]
    return ends, (outliers(directory, floor_ns, far_ns, extent) if ends else None)


def _ends(directory, columns: list) -> tuple[list, int | None]:
    """:func:`span_parts` of the ``columns`` ((table, [column, ...]), ...)."""
    ts, first = [], None
    for name, cols in columns:
        for c in cols:
            lo = hi = None
            for table in batches.tables(directory, name, [c]):
                mm = pc.min_max(table.column(c).cast(pa.int64()))
                if mm["min"].is_valid:
                    lo = mm["min"].as_py() if lo is None else min(lo, mm["min"].as_py())
                    hi = mm["max"].as_py() if hi is None else max(hi, mm["max"].as_py())
            if lo is not None:
                ts += [lo, hi]
                if c == "ts":
                    first = lo if first is None else min(first, lo)
    return ts, first


def first_ts(directory) -> pd.Timestamp | None:
    """The time of the output's first packet (``ts`` of every table), None when nothing is stamped."""
    first = span_parts(directory)[1]
    return None if first is None else pd.Timestamp(first, tz="UTC")


def _extent(directory) -> dict:
    """Per capture: (stamped rows, first stamp, last stamp)."""
    out: dict = {}
    for _, codes, names, v, ok in _stamps(directory):
        for i, cap in enumerate(names):
            sel = v[ok & (codes == i)]
            if len(sel):
                n, lo, hi = out.get(cap, (0, sel.min(), sel.max()))
                out[cap] = (n + len(sel), min(lo, sel.min()), max(hi, sel.max()))
    return out


def _medians(directory, count: dict) -> dict:
    """The median stamp of each capture of ``count`` (capture -> stamped rows), as ``np.median``
    of its stamps as float64 gives it, found by narrowing passes."""
    # the ranks wanted (the middle one, or the two middle ones), each narrowed to
    # (shift, prefix, rank among the values of that prefix)
    want = {(cap, k): (None, None, k) for cap, n in count.items() for k in {(n - 1) // 2, n // 2}}

    def values(key, codes, names, v, ok):
        if key[0] not in names:
            return v[:0]
        sel = v[ok & (codes == names.index(key[0]))]
        prev, prefix, _ = want[key]
        return sel if prev is None else sel[(sel >> prev) == prefix]

    for shift in _SHIFTS:
        hist: dict = {key: {} for key in want}
        for _, codes, names, v, ok in _stamps(directory):
            for key in want:
                b, n = np.unique(values(key, codes, names, v, ok) >> shift, return_counts=True)
                h = hist[key]
                for x, m in zip(b.tolist(), n.tolist()):
                    h[x] = h.get(x, 0) + m
        for key, (_, _, rank) in list(want.items()):
            for x in sorted(hist[key]):
                if rank < hist[key][x]:
                    want[key] = (shift, x, rank)
                    break
                rank -= hist[key][x]
    found: dict = {key: [] for key in want}
    for _, codes, names, v, ok in _stamps(directory):
        for key in want:
            found[key].append(values(key, codes, names, v, ok))
    out = {}
    for cap, n in count.items():
        mid = [np.sort(np.concatenate(found[(cap, k)]))[want[(cap, k)][2]] for k in ((n - 1) // 2, n // 2)]
        out[cap] = np.median(np.array(mid, dtype=np.int64).astype(np.float64))
    return out


def outliers(directory, floor_ns: int, far_ns: int, extent: dict | None = None) -> pd.DataFrame:
    """``time_outliers`` of an output directory: the rows (``capture``, ``tcp_stream``,
    ``frame_number``, ``ts``) of methods, messages and frames stamped before ``floor_ns`` or more
    than ``far_ns`` from their capture's median, a packet once, in capture and packet order.
    ``extent``: the output's per capture (stamped rows, first, last stamp), when known."""
    extent = _extent(directory) if extent is None else extent
    # (a margin for the float arithmetic of the median test: ns stamps as float64 are rounded)
    odd_caps = {cap: n for cap, (n, lo, hi) in extent.items() if lo < floor_ns or hi - lo > far_ns - _MARGIN}
    parts = []
    if odd_caps:
        med = _medians(directory, odd_caps)
        for table, codes, names, v, ok in _stamps(directory, _ROW_COLS):
            bad = np.zeros(len(v), dtype=bool)
            for i, cap in enumerate(names):
                if cap in med:
                    bad |= ok & (codes == i) & ((v < floor_ns) | (np.abs(v - med[cap]) > far_ns))
            if bad.any():
                parts.append(table.filter(pa.array(bad)).select(_ROW_COLS).to_pandas())
    if not parts:
        return pd.DataFrame({c: [] for c in _ROW_COLS})
    odd = pd.concat(parts, ignore_index=True).drop_duplicates(["capture", "frame_number"])
    return odd.sort_values(["capture", "frame_number"], kind="stable").reset_index(drop=True)
