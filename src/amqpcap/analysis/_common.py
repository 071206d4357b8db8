"""Small helpers shared by the analysis modules (not public API)."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import weakref
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

NAT = np.iinfo(np.int64).min  # pandas' iNaT

CONN_KEYS = ["capture", "tcp_stream"]
# the columns every section of stats loads with a method or message row: its place and name
ROW_KEYS = [
    "capture",
    "tcp_stream",
    "frame_number",
    "stream_offset",
    "ts",
    "direction",
    "channel",
    "method",
    "version",
]
CONTENT_REQUEST = ("basic.publish",)  # c2s content methods
DELIVERY_METHODS = ("basic.deliver", "basic.get-ok")


def ns(series: pd.Series) -> np.ndarray:
    """A tz-aware timestamp column as int64 ns since the epoch (NaT -> NAT)."""
    if len(series) == 0:
        return np.zeros(0, dtype=np.int64)
    s = pd.to_datetime(series, utc=True)
    return s.dt.tz_localize(None).to_numpy(dtype="datetime64[ns]").view("i8")


def to_ts(values) -> pd.Series:
    """int ns (None/NaN/NAT for missing) -> datetime64[ns, UTC] Series."""
    arr = np.array([NAT if v is None or v != v else v for v in values], dtype=np.int64)
    return pd.Series(pd.to_datetime(arr.view("datetime64[ns]"), utc=True)).astype("datetime64[ns, UTC]")


COLLECT_ABOVE = 512 << 20  # resident bytes above which release_memory runs a full collection


def _resident() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def release_memory(collect: bool = True) -> None:
    """Give freed memory back to the system between big computations: Arrow's pool keeps freed
    blocks, and glibc keeps freed heap pages, so RSS would creep up step after step.  A collection
    first (``collect``): pandas frames in reference cycles (hundreds of MB of columns) wait for the
    collector.  Only when the process is big (COLLECT_ABOVE): a full collection walks every object
    of the process, seconds in a long-lived one (a notebook, the test suite: stats calls this
    about 25 times), and frees little when the frames are small.  Inside ``malloc_pool(...,
    keep=True)`` nothing is given back (the next computation reuses those pages)."""
    if collect:
        rss = _resident()
        if rss is None or rss > COLLECT_ABOVE:
            gc.collect()
    if not _POOLS[-1][1]:
        _give_back()


def _give_back() -> None:
    pa.default_memory_pool().release_unused()  # (of malloc's pool: malloc_trim)
    if _malloc_trim is not None:
        _malloc_trim(0)


# The mmap threshold and ``keep`` of the innermost malloc_pool block (the first: glibc's own).
_POOLS = [(128 << 10, False)]


@contextlib.contextmanager
def malloc_pool(mmap_threshold: int | None = None, keep: bool = False):
    """Arrow memory from malloc while the block runs, not from Arrow's default pool (mimalloc /
    jemalloc): those keep what a big computation frees mapped (hundreds of MB of RSS after a few
    sections of stats), malloc gives it back (:func:`release_memory`).  A buffer is freed to the
    pool it came from, whenever that is.  And glibc maps every block of ``mmap_threshold`` bytes
    (default MMAP_THRESHOLD) or
    more on its own while the block runs: a freed big array is given back at once, where its
    dynamic threshold (raised up to 32 MB as big blocks are freed) puts arrays of millions of
    rows on the heap, whose freed pages stay resident between live blocks (~80 MB of a stats or
    report peak on a 1 GB capture).  After the block the threshold is the enclosing block's, or
    glibc's default (but fixed: glibc has no call to make it dynamic again).

    ``keep`` (a small output's passes, :data:`KEEP_TRIM_THRESHOLD`): what the block frees stays
    with malloc until it ends, for the next computation to reuse, rather than given back between
    computations (:func:`release_memory`) or whenever the heap's top is free; at its end it is
    given back."""
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    _POOLS.append((MMAP_THRESHOLD if mmap_threshold is None else mmap_threshold, keep))
    _malloc_settings(*_POOLS[-1])
    try:
        yield
    finally:
        pa.set_memory_pool(previous)
        _POOLS.pop()
        _malloc_settings(*_POOLS[-1])
        if keep and not _POOLS[-1][1]:
            _give_back()


# A block mapped on its own is a page fault per 4 KB each time it is made and filled.  Above
# 256 KB every array of a big output's passes is mapped and given back at once, which keeps
# their peak bounded (stats of a 4 GB capture: 353 MB, against 392 MB at 4 MB).  Those of an
# output under summary.SMALL_MMAP_OUTPUT stay on the heap below SMALL_MMAP_THRESHOLD: at 256 KB
# its batches' and small loads' arrays are a fixed cost of faults (stats of a 0.1 GB capture:
# 200,000 faults, 0.3-0.4 s of its 2.6 s of CPU; of 1 GB: 16.5 -> 13.2 s of CPU at 4 MB).
MMAP_THRESHOLD = 256 << 10
SMALL_MMAP_THRESHOLD = 4 << 20


def _libc():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return None


_LIBC = _libc()
_malloc_trim = getattr(_LIBC, "malloc_trim", None)
_mallopt = getattr(_LIBC, "mallopt", None)


def _malloc_settings(mmap_threshold: int, keep: bool) -> None:
    if _mallopt is not None:
        _mallopt(-3, mmap_threshold)  # M_MMAP_THRESHOLD
        _mallopt(-1, KEEP_TRIM_THRESHOLD if keep else TRIM_THRESHOLD)  # M_TRIM_THRESHOLD


# The free bytes at the heap's top above which glibc gives them back at a free(): its default
# (fixed once the mmap threshold is set), and a kept pool's (malloc_pool ``keep``).  Memory given
# back is faulted in anew, a page at a time, when the next computation takes it: the passes and
# figures of a 0.1 GB capture's report made ~100,000 faults that way in its first process (0.2-0.25
# s of its ~1.8 s of CPU), ~50,000 with their freed memory kept (peak RSS ~10 MB more).
TRIM_THRESHOLD = 128 << 10
KEEP_TRIM_THRESHOLD = 1 << 30


@contextlib.contextmanager
def temp_files(what: str):
    """An OSError of temporary files (a full or unwritable temporary folder) as one naming the
    folder they go to (Python's ``tempfile`` choice: ``TMPDIR``, else ``/tmp`` and the like) and
    ``what`` they are, which the command line reports in one line."""
    try:
        yield
    except OSError as e:
        import tempfile

        root = tempfile.tempdir or os.environ.get("TMPDIR") or "/tmp"
        why = e.strerror or str(e) or type(e).__name__
        raise OSError(e.errno, f"{why} (temporary files of {what})", root) from e


def filled(s: pd.Series, value) -> pd.Series:
    """``s.fillna(value)``, also for a Categorical column (``load(columns="analysis")``) that
    does not have ``value`` among its categories."""
    if isinstance(s.dtype, pd.CategoricalDtype) and value not in s.cat.categories and s.hasnans:
        s = s.cat.add_categories([value])
    return s.fillna(value)


def isin(s: pd.Series, values) -> np.ndarray:
    """``s.isin(values).to_numpy()`` for many string values: pandas' Arrow-string ``isin`` turns
    each value into an Arrow scalar first (seconds for 10^5 values); this hands them over at once."""
    if isinstance(s.dtype, pd.StringDtype) and s.dtype.storage == "pyarrow" and len(s):
        arr = pa.array(s.array)
        vals = pd.Series(values, dtype=object).dropna().to_numpy(dtype=object)
        found = pc.is_in(arr, value_set=pa.array(vals, type=pa.large_string()).cast(arr.type))
        return found.to_numpy(zero_copy_only=False).astype(bool, copy=False)
    return s.isin(values).to_numpy(dtype=bool)


def taken(s: pd.Series, positions: np.ndarray, dtype) -> pd.Series:
    """The values of ``s`` at ``positions`` (-1: missing), as ``dtype``; one take, no objects.
    An int64 ``s`` taken as a timestamp dtype holds ns since the epoch; a Categorical ``s``
    taken as a string stays Categorical."""
    at = np.asarray(positions, dtype=np.int64)
    if str(dtype).startswith("datetime64") and s.dtype == np.int64:
        v = s.to_numpy()[at]
        v[at < 0] = NAT
        return pd.Series(pd.to_datetime(v.view("datetime64[ns]"), utc=True)).astype(dtype)
    a = pd.Series(s.array.take(at, allow_fill=True), copy=False)
    if dtype == STR and isinstance(s.dtype, pd.CategoricalDtype):
        return a  # a Categorical string column stays one (a code per row, not a string)
    return a.astype(dtype)


def latency_ms(req_ns, resp_ns) -> np.ndarray:
    req = np.asarray(req_ns, dtype=np.int64)
    resp = np.asarray(resp_ns, dtype=np.int64)
    out = (resp - req).astype(np.float64) / 1e6
    out[(req == NAT) | (resp == NAT)] = np.nan
    return out


def records(df: pd.DataFrame, cols: list[str], chunk: int = 1 << 16, rows=None) -> Iterator[tuple]:
    """Rows of ``df[cols]`` as plain tuples, missing values as None; ``rows``: only the rows at
    these positions (ascending), without a copy of them.

    Timestamp columns (``ts``) come out as int ns.  Python objects are made ``chunk`` rows at a
    time (not a column of objects per column at once), and equal strings are one object, so
    walking a big table and keeping some of its values costs a fraction of the table's objects.
    """
    n = len(df) if rows is None else len(rows)
    if n == 0:
        return iter(())
    sources = [_source(df[c]) for c in cols]

    def part(lo):  # the rows of one chunk: a slice, or positions
        return slice(lo, lo + chunk) if rows is None else rows[lo : lo + chunk]

    return (row for lo in range(0, n, chunk) for row in zip(*(get(part(lo)) for get in sources)))


def _source(s: pd.Series):
    """A function (rows: a slice or positions) -> the object array of those rows of ``s`` (see
    :func:`records`)."""
    if isinstance(s.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_any_dtype(s.dtype):
        v = ns(s)

        def get(rows):
            a = v[rows].astype(object)
            a[a == NAT] = None
            return a

    elif isinstance(s.dtype, pd.CategoricalDtype):  # its own small codes, not int64 ones
        codes = s.cat.codes.to_numpy()
        objs = np.append(np.asarray(s.cat.categories, dtype=object), None)  # code -1 (missing): None

        def get(rows):
            return objs[codes[rows]]

    elif isinstance(s.dtype, pd.StringDtype):
        codes, uniques = pd.factorize(s, use_na_sentinel=True)
        objs = np.append(np.asarray(uniques, dtype=object), None)  # code -1 (missing): None

        def get(rows):
            return objs[codes[rows]]

    else:

        def get(rows):
            a = np.array(s.iloc[rows].astype(object).to_numpy(), dtype=object, copy=True)
            a[pd.isna(a)] = None
            return a

    return get


_ORDERS: dict = {}  # id(df) -> (weakref to df, its wire-order positions): a big table is sorted once


def ordered(df: pd.DataFrame, names=None, columns=None, rows=None) -> pd.DataFrame:
    """Rows in wire order: per conversation, by packet number then stream offset.

    ``names``: keep only the rows whose ``method`` is one of them; ``rows``: only those of this
    boolean mask; ``columns``: only these columns.  The result is a copy of just that part (one
    take).  The wire order of a whole table is computed once while the table lives (an int array,
    not a sorted copy of the table); a selection of under half the rows, when the table's order is
    not known yet, is ordered alone (its keys, not the whole table's)."""
    if len(df) == 0:
        return df if columns is None else df[columns]
    keep = None
    if names is not None:
        keep = df["method"].isin(names).to_numpy(dtype=bool)
    if rows is not None:
        r = np.asarray(rows, dtype=bool)
        keep = r if keep is None else keep & r
    pos = _known_order(df)
    if pos is None and keep is not None and np.count_nonzero(keep) < len(df) // 2:
        pos = _wire_order(df, np.flatnonzero(keep))
    else:
        pos = _order(df) if pos is None else pos
        if keep is not None:
            pos = pos[keep[pos]]
    if columns is None:
        return df.iloc[pos]
    return df.iloc[pos, [df.columns.get_loc(c) for c in columns]]


def _known_order(df: pd.DataFrame) -> np.ndarray | None:
    hit = _ORDERS.get(id(df))
    return hit[1] if hit is not None and hit[0]() is df else None


def _order(df: pd.DataFrame) -> np.ndarray:
    """The wire order of the whole of ``df``, kept while ``df`` lives."""
    hit = _known_order(df)
    if hit is not None:
        return hit
    order = _wire_order(df, np.arange(len(df)))
    try:
        ref = weakref.ref(df, lambda _r, k=id(df): _ORDERS.pop(k, None))  # noqa: B008 (bound now)
    except TypeError:
        return order
    _ORDERS[id(df)] = (ref, order)
    return order


def _wire_order(df: pd.DataFrame, at: np.ndarray) -> np.ndarray:
    """The positions ``at`` (ascending) of ``df`` in wire order (ties: by position)."""
    keys = [k for k in ("capture", "tcp_stream", "frame_number", "stream_offset") if k in df.columns]
    whole = len(at) == len(df)  # (then no copy of each key column)
    cols = [df[k] if whole else df[k].iloc[at] for k in keys]
    packed = _packed(cols)
    if packed is not None:  # one int64 key, one stable sort
        return at[np.argsort(packed, kind="stable")]
    return at[np.lexsort([at] + [_sort_key(c) for c in reversed(cols)])]


def _packed(cols: list) -> np.ndarray | None:
    """The sort keys of ``cols`` (first most significant; missing values first, as :func:`_sort_key`)
    packed into one int64 per row, when integer columns' ranges fit in 62 bits; else None."""
    out, bits = None, 0
    for c in cols:
        if pd.api.types.is_integer_dtype(c.dtype):
            v = c.to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).min)
            has = v != np.iinfo(np.int64).min
            lo = int(v[has].min()) if has.any() else 0
            k = np.where(has, v - lo + 1, 0)  # missing: 0, first
        elif pd.api.types.is_numeric_dtype(c.dtype) or pd.api.types.is_bool_dtype(c.dtype):
            return None
        else:
            k = _sort_key(c).astype(np.int64) + 1  # codes; missing (-1) first
        width = int(k.max()) + 1 if len(k) else 1
        bits += width.bit_length()
        if bits > 62:
            return None
        out = k if out is None else out * width + k
    return out


def sort_key(s: pd.Series, positions=None) -> np.ndarray:
    """A numpy key sorting the values of ``s`` (at ``positions``; -1: missing) like
    ``sort_values``: missing values last."""
    if pd.api.types.is_numeric_dtype(s.dtype) and not isinstance(s.dtype, pd.CategoricalDtype):
        v = s.astype("float64").fillna(np.inf).to_numpy()
        fill = np.inf
    elif isinstance(s.dtype, pd.CategoricalDtype):  # by the categories' text, whatever their order
        cats = np.asarray(s.cat.categories, dtype=object)
        rank = np.empty(len(cats), dtype=np.int64)
        rank[np.argsort(cats, kind="stable")] = np.arange(len(cats))
        codes = s.cat.codes.to_numpy()
        v = np.where(codes < 0, len(cats), rank[np.maximum(codes, 0)] if len(cats) else 0)
        fill = len(cats)
    else:
        v, uniques = pd.factorize(s, sort=True, use_na_sentinel=True)
        v = np.where(v < 0, len(uniques), v)
        fill = len(uniques)
    if positions is None:
        return v
    at = np.asarray(positions, dtype=np.int64)
    out = v[at]
    out[at < 0] = fill
    return out


def _sort_key(s: pd.Series) -> np.ndarray:
    """A numpy key sorting like ``s`` with missing values first."""
    if pd.api.types.is_numeric_dtype(s.dtype):
        return s.astype("float64").fillna(-np.inf).to_numpy()
    codes, _ = pd.factorize(s, sort=True, use_na_sentinel=True)
    return codes  # -1 (missing) sorts first


def numbering(parts: list, column: str) -> pd.Index:
    """The distinct values of ``column`` over the frames ``parts``, sorted: their positions number
    them (:func:`codes_in`), the same in every part."""
    values = set()
    for p in parts:
        values.update(p[column].dropna().unique().tolist())
    return pd.Index(sorted(values), dtype=object)


def codes_in(s: pd.Series, index: pd.Index) -> np.ndarray:
    """Each value's position in ``index`` (int32; -1 for a missing value); a Categorical by
    its categories' positions (no string per row)."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        of_cat = np.append(index.get_indexer(s.cat.categories.astype(object)), -1).astype(np.int32)
        return of_cat[s.cat.codes.to_numpy()]  # code -1 (missing) -> the appended -1
    return index.get_indexer(s.astype(object)).astype(np.int32)


def si(v, unit: str = "") -> str:
    """``v`` with a k / M / G prefix (never milli: rates under 1 read as decimals), 2 decimals."""
    if v is None:
        return "-"
    for div, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.2f} {p}{unit}"
    return f"{v:.2f} {unit}".rstrip()


def covered(n: int, id_ranges) -> bool:
    """``n`` lies in a 0-10 sequence set (the ``id_ranges`` column: ``{"lower", "upper"}`` items, or null)."""
    if id_ranges is None:
        return False
    return any(r["lower"] <= n <= r["upper"] for r in id_ranges)


@functools.cache
def spec_by_name(version: str | None) -> dict:
    """``{"class.method": MethodSpec}`` for ``version`` ({} when tables are unavailable)."""
    if not version:
        return {}
    try:
        from amqpcap.amqp import spec

        mod = spec.get(version)
    except Exception:
        return {}
    table = getattr(mod, "METHODS", None)
    if table:
        return {ms.name: ms for ms in table.values()}
    # 0-10 tables: controls and commands (OpSpec, with ``result`` for commands answered by execution.result)
    return dict(getattr(mod, "OPS_BY_NAME", {}) or {})


@functools.cache
def spec_module(version: str | None):
    try:
        from amqpcap.amqp import spec

        return spec.get(version or "0-9-1")
    except Exception:
        return None


def code_info(version: str | None, code, table: str | None = None):
    """(name, soft/hard) of a reply code; ``table`` names a specific code table (0-10)."""
    if code is None or code is pd.NA:
        return None
    try:
        code = int(code)
    except (TypeError, ValueError):
        return None
    if table:
        mod = spec_module(version)
        t = getattr(mod, table, None) if mod is not None else None
        if t and code in t:
            return tuple(t[code])
    try:
        from amqpcap.amqp import spec

        info = spec.reply_code_info(version, code)
    except Exception:
        info = None
    if not info:
        info = _EXTRA_CODES.get(code)
    return tuple(info) if info else None


# Codes brokers send that the 0-9-1 specification text does not list
# (RabbitMQ: 312 NO_ROUTE on basic.return of an unroutable mandatory publish).
_EXTRA_CODES = {312: ("no-route", "soft")}


def empty(columns: dict) -> pd.DataFrame:
    """Empty DataFrame from {name: dtype}."""
    return pd.DataFrame({k: pd.Series([], dtype=v) for k, v in columns.items()})


def build(rows: list[dict], columns: dict) -> pd.DataFrame:
    """DataFrame from row dicts with dtypes from {name: dtype}; ``*_ts`` int ns columns become timestamps."""
    if not rows:
        return empty(columns)
    names = list(columns)
    return build_columns(object_frame([tuple(r.get(n) for n in names) for r in rows], names), columns)


def object_frame(rows: list[tuple], names: list[str]) -> pd.DataFrame:
    """Tuples -> one object column per name, values untouched (no int -> float inference, which
    would round ns timestamps)."""
    cols = list(zip(*rows)) if rows else [()] * len(names)
    return pd.DataFrame({n: np.array(c, dtype=object) for n, c in zip(names, cols)}, copy=False)


def build_columns(raw: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """``raw`` (object columns, missing as None / NaN) typed as {name: dtype}; columns absent from
    ``raw`` are null."""
    data = {}
    for name, dtype in columns.items():
        col = raw[name] if name in raw.columns else pd.Series([None] * len(raw), dtype=object)
        if str(dtype).startswith("datetime64"):
            v = col.to_numpy(dtype=object)
            data[name] = to_ts(v)
        elif dtype == "float64":
            data[name] = pd.to_numeric(col, errors="coerce").astype("float64")
        elif dtype == STR:
            data[name] = str_series(col.to_numpy(dtype=object))
        else:
            vals = col.to_numpy(dtype=object, copy=True)
            vals[pd.isna(vals)] = None
            data[name] = pd.Series(vals, dtype=dtype)
    return pd.DataFrame(data)


def str_series(vals) -> pd.Series:
    """Strings with None for missing, in the installed pandas' default string dtype."""
    s = pd.Series(list(vals), dtype=object)
    s[s.isna()] = None
    if _STR_IS_STRING:
        s = s.astype("str")
    return s


TS_DTYPE = "datetime64[ns, UTC]"
STR = "str"
_STR_IS_STRING = str(pd.Series([], dtype="str").dtype) != "object"
