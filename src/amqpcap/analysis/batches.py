"""A dissect output's tables read a slice of rows at a time, file by file, row group after row
group, in the order they were written (capture order), only the columns asked for: what a pass
over a big table holds is one batch and what it keeps, not the table.

Two shapes of batch:

* :func:`tables` / :func:`frames`: Arrow tables or pandas frames typed like a section load
  (exact ns times), for the computations that only add up (sums per time bucket, minima and
  maxima, counts);
* :func:`batches`: dicts of numpy arrays for the streamed pairings: time columns as int64 ns
  since the epoch (exact; missing: ``NAT``), integer columns as int64 (missing: -1 unless asked
  otherwise), booleans as bool (missing: False), strings as int32 codes into one list of values
  per column (missing: -1) that grows as batches bring new values.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from amqpcap.analysis._common import NAT
from amqpcap.analysis.tables import CATEGORICAL_COLUMNS, POOL, arrow_to_pandas, reading, table_files
from amqpcap.records import times
from amqpcap.records.schema import SCHEMAS

__all__ = [
    "BATCH_ROWS",
    "PASS_ROWS",
    "is_output_dir",
    "tables",
    "frames",
    "batches",
    "shared_reads",
    "Codes",
    "OutOfOrder",
    "WireOrder",
    "channel_ids",
    "plain_strings",
    "is_one_of",
]

BATCH_ROWS = 1 << 17  # rows per batch: a few MB of a frame of a few columns, tens with its transients
PASS_ROWS = 1 << 14  # rows per batch of a streamed pairing, whose per-row Python work holds more


class OutOfOrder(Exception):
    """A table's rows are not in wire order within a conversation: a streaming pass cannot be
    exact, the caller computes the whole-table way."""


def is_output_dir(t) -> bool:
    """True when ``t`` is a dissect output directory (read batch by batch), not loaded tables."""
    return isinstance(t, (str, os.PathLike)) and os.path.isdir(t)


# the columns the block of :func:`shared_reads` holds (None: each pass reads what it asks for)
_SHARED: _Shared | None = None
SHARED_BYTES = 32 << 20  # no column is shared once a process' shared columns hold this (0.1 GB: ~24 MB)


class _Shared:
    """The whole columns of table files a process' passes share: (path, column, read as a
    dictionary) -> column, those asked for once, their bytes, and each file's layout."""

    def __init__(self):
        self.columns: dict = {}
        self.asked: dict = {}  # column key -> the read (one file's pass) that first asked for it
        self.held = 0
        self.layouts: dict = {}  # path -> (group sizes, first rows, Arrow schema)

    def layout(self, f: pq.ParquetFile, path: str) -> tuple:
        if path not in self.layouts:
            sizes = [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)]
            self.layouts[path] = sizes, np.r_[0, np.cumsum(sizes)].tolist(), f.schema_arrow
        return self.layouts[path]


@contextlib.contextmanager
def shared_reads(share: bool = True):
    """While the block runs (``share``), a column of a table file that :func:`tables` /
    :func:`batches` are asked for a second time is read whole, once, and handed to every later
    pass that reads it (until they hold :data:`SHARED_BYTES`): the passes of a small output
    read the same columns of one table many times (the ``ts`` of methods by seven of stats'
    passes); a column one pass alone reads is read as before.  A big output's passes read row
    group after row group (``share`` False: memory follows one row group, not the table)."""
    global _SHARED
    if not share or _SHARED is not None:
        yield
        return
    _SHARED = _Shared()
    try:
        yield
    finally:
        _SHARED = None


def _read_groups(
    f: pq.ParquetFile, path: str, groups: list, want: list, dictionaries: set, asker=None
) -> pa.Table:
    """Row groups ``groups`` (ascending) of ``f`` (file ``path``), columns ``want``: read, or
    sliced from the shared columns (:func:`shared_reads`; ``asker``: the pass over the file)."""
    shared = _SHARED
    key = {c: (path, c, c in dictionaries) for c in want}
    if shared is not None:
        fresh = [c for c in want if key[c] not in shared.columns]
        again = [c for c in fresh if shared.asked.setdefault(key[c], asker) is not asker]
        if again and shared.held < SHARED_BYTES:
            with reading(path):
                whole = f.read_row_groups(range(f.metadata.num_row_groups), columns=again, use_threads=False)
            for c in again:
                shared.columns[key[c]] = whole.column(c)
                shared.held += whole.column(c).nbytes
    held = [] if shared is None else [c for c in want if key[c] in shared.columns]
    read = [c for c in want if c not in held]
    if read:
        with reading(path):
            got = f.read_row_groups(groups, columns=read, use_threads=False)
        if not held:
            return got
    sizes, starts, schema = shared.layout(f, path)
    cols = []
    for c in want:
        if c in held:
            whole = shared.columns[key[c]]
            cols.append(
                pa.chunked_array(
                    [x for g in groups for x in whole.slice(starts[g], sizes[g]).chunks], whole.type
                )
            )
        else:
            cols.append(got.column(c))
    fields = [schema.field(c).with_type(col.type) for c, col in zip(want, cols)]
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=schema.metadata))


def _file_batches(path: str, columns: list[str], rows: int, dictionaries=(), methods=None) -> Iterator[tuple]:
    """(record batch, the file's column names) of ``columns`` (those the file has, with their
    time companions) of one Parquet file, ``rows`` at a time, no read ahead; only the rows whose
    ``method`` is one of ``methods`` (None: all), the row groups with none of them not read but
    for their ``method`` column."""
    with reading(path):
        f = pq.ParquetFile(path, read_dictionary=[c for c in columns if c in dictionaries])
    have = f.schema_arrow.names
    want = [c for c in times.with_companions(columns, have) if c in have]
    dicts = {c for c in want if c in dictionaries}
    asker = object()  # (this pass over the file, for the shared reads)
    try:  # a few row groups at a time: the reader's iterator holds more the more groups it has read
        for first, end in _group_runs(f.metadata, rows):
            groups = (
                list(range(first, end))
                if methods is None
                else _having(f, path, first, end, methods, dicts, asker)
            )
            if not groups:
                continue
            group = _read_groups(f, path, groups, want, dicts, asker)
            if len(groups) > 1 or _SHARED is not None:  # small groups as one batch: a pass's work
                group = group.combine_chunks()  # per batch is paid once (shared slices: one chunk)
            for batch in group.to_batches(max_chunksize=rows):
                if methods is not None:
                    batch = batch.filter(pa.array(is_one_of(batch.column("method"), methods)))
                if batch.num_rows:
                    yield batch, have
            del group
    finally:
        f.close()


def _having(f: pq.ParquetFile, path: str, first: int, end: int, methods, dictionaries: set, asker) -> list:
    """The row groups of ``first`` .. ``end`` with a row whose ``method`` is one of ``methods``."""
    column = _read_groups(f, path, list(range(first, end)), ["method"], dictionaries, asker).column("method")
    found = is_one_of(column, methods)
    ends = np.cumsum([f.metadata.row_group(i).num_rows for i in range(first, end)])
    upto = np.r_[0, np.cumsum(found, dtype=np.int64)]  # rows found before each row
    hits = upto[ends] - upto[np.r_[0, ends[:-1]]]
    return [first + i for i in np.flatnonzero(hits).tolist()]


def _group_runs(metadata, rows: int) -> Iterator[tuple[int, int]]:
    """(first, end) of runs of consecutive row groups of about ``rows`` rows together (a group
    larger than that alone)."""
    first, count = 0, 0
    for i in range(metadata.num_row_groups):
        n = metadata.row_group(i).num_rows
        if i > first and count + n > rows:
            yield first, i
            first, count = i, 0
        count += n
    if metadata.num_row_groups > first:
        yield first, metadata.num_row_groups


def tables(
    directory, name: str, columns: list[str], rows: int | None = None, methods=None
) -> Iterator[pa.Table]:
    """The ``columns`` of table ``name`` of dissect output ``directory`` (those a file has),
    ``rows`` (default :data:`BATCH_ROWS`) rows at a time in the files' order, as Arrow tables with
    exact ns times (the strings of :data:`~amqpcap.analysis.tables.CATEGORICAL_COLUMNS` as
    dictionaries), only the rows whose ``method`` is one of ``methods`` (None: all); nothing when
    the table is absent or empty.  Row group after row group, no read ahead: memory follows one
    row group."""
    for path in table_files(directory, name):
        for batch, _ in _file_batches(path, columns, rows or BATCH_ROWS, CATEGORICAL_COLUMNS, methods):
            yield times.to_exact(pa.Table.from_batches([batch]), POOL)


def frames(
    directory,
    name: str,
    columns: list[str],
    *,
    categorical=CATEGORICAL_COLUMNS,
    compact: bool = True,
    rows: int | None = None,
) -> Iterator[pd.DataFrame]:
    """:func:`tables` as pandas frames typed like a section load's (``columns="compact"``; or as
    :func:`~amqpcap.analysis.tables.arrow_to_pandas` makes them with ``categorical`` and
    ``compact``)."""
    for table in tables(directory, name, columns, rows):
        yield arrow_to_pandas(table, name, columns, categorical, compact)
        del table


class Codes:
    """Strings of one column over every batch as int32 codes into :attr:`values`."""

    def __init__(self):
        self.values: list = []
        self.index: dict = {}

    def encode(self, col: pa.Array) -> np.ndarray:
        enc = pc.dictionary_encode(col) if not pa.types.is_dictionary(col.type) else col
        local = enc.dictionary.to_pylist()
        table = np.array([self._code(v) for v in local] + [-1], dtype=np.int32)
        idx = enc.indices.fill_null(len(local)).to_numpy(zero_copy_only=False)
        return table[idx]

    def _code(self, v) -> int:
        code = self.index.get(v)
        if code is None:
            code = self.index[v] = len(self.values)
            self.values.append(v)
        return code


def plain_strings(col: pa.Array) -> pa.Array:
    """A string column as plain strings (a dictionary column decoded)."""
    return col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col


def is_one_of(col, values) -> np.ndarray:
    """Which values of a string column (plain or dictionary: decided per dictionary entry) are
    one of ``values`` (a null is not)."""
    value_set = pa.array(list(values), pa.string())
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_dictionary(col.type):
        found = pc.is_in(col.dictionary.cast(pa.string()), value_set=value_set)
        return pc.fill_null(found.take(col.indices), False).to_numpy(zero_copy_only=False)
    return pc.fill_null(pc.is_in(col, value_set=value_set), False).to_numpy(zero_copy_only=False)


def _numpy(col: pa.Array, codes: Codes | None) -> np.ndarray:
    t = col.type
    if codes is not None:
        return codes.encode(col)
    if pa.types.is_timestamp(t):
        return col.cast(pa.int64()).fill_null(NAT).to_numpy(zero_copy_only=False)
    if pa.types.is_boolean(t):
        return col.fill_null(False).to_numpy(zero_copy_only=False)
    if pa.types.is_integer(t):
        return col.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)
    raise TypeError(f"{t}: not a column a streaming pass reads")


def batches(
    directory,
    name: str,
    columns: list[str],
    strings: dict,
    methods=None,
    nulls: tuple = (),
    rows: int | None = None,
) -> Iterator[dict]:
    """The ``columns`` of table ``name`` ``rows`` rows at a time (see the module doc), only the rows
    whose ``method`` is one of ``methods`` (None: all).  ``strings``: column -> :class:`Codes`
    for each string column.  ``nulls``: integer columns also given as ``<name>_valid`` masks.
    ``rows``: default :data:`PASS_ROWS`."""
    # (the coded strings read as Parquet's dictionaries: no plain string decoded, none encoded again)
    dictionaries = set(strings) | ({"method"} if methods is not None else set())
    for path in table_files(directory, name):
        for batch, have in _file_batches(path, columns, rows or PASS_ROWS, dictionaries, methods):
            batch = times.to_exact(batch)
            out = {}
            for c in columns:
                col = batch.column(c) if c in have else pa.nulls(batch.num_rows, SCHEMAS[name].field(c).type)
                if c in nulls:
                    out[c + "_valid"] = col.is_valid().to_numpy(zero_copy_only=False)
                out[c] = _numpy(col, strings.get(c))
            yield out


def channel_ids(ids: dict, cap, stream, channel, has_channel) -> np.ndarray:
    """A number per channel (capture code, TCP stream, channel or -1), the same in every batch:
    ``ids`` (key -> number) grows as batches bring new channels."""
    ch = np.where(has_channel, channel, -1).astype(np.int64) + 1  # (0 .. 65536)
    cap = cap.astype(np.int64) + 1
    if len(cap) and (cap.max() >= 1 << 14 or stream.max() >= 1 << 31 or stream.min() < -1):
        raise OutOfOrder("channel keys too wide for one number")
    # one int64 a row, numbered by hashing (a batch holds few channels)
    local, uniq = pd.factorize((cap << 48) | ((stream + 1) << 17) | ch)
    parts = ((uniq >> 48) - 1, ((uniq >> 17) & ((1 << 31) - 1)) - 1, (uniq & ((1 << 17) - 1)) - 1)
    keys = zip(*(p.tolist() for p in parts))
    number = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)
    return number[local]


class WireOrder:
    """Checks that a table's rows come in wire order within each conversation (packet number,
    then stream offset), batch after batch: raises :class:`OutOfOrder` when not.  The latest
    row of each conversation is held in arrays by TCP stream (16 bytes a conversation)."""

    def __init__(self):
        self.frame: dict = {}  # capture code -> latest frame number by tcp_stream
        self.offset: dict = {}  # capture code -> latest stream offset by tcp_stream

    def check(self, cap: np.ndarray, stream: np.ndarray, frame: np.ndarray, offset: np.ndarray) -> None:
        if len(cap) == 0:
            return
        o = np.lexsort((np.arange(len(cap)), stream, cap))
        c, t, f, s = cap[o], stream[o], frame[o], offset[o]
        same = (c[1:] == c[:-1]) & (t[1:] == t[:-1])
        back = (f[1:] < f[:-1]) | ((f[1:] == f[:-1]) & (s[1:] < s[:-1]))
        if np.any(same & back):
            raise OutOfOrder("rows out of wire order within a conversation")
        first = np.r_[True, ~same]
        last = np.r_[~same, True]
        for code in np.unique(c).tolist():
            at = c == code
            st_first, st_last = t[first & at], t[last & at]
            if len(st_first) and st_first.min() < 0:
                raise OutOfOrder("a row without a TCP stream")
            frames, offsets = self._arrays(code, int(t[at].max()) + 1)
            pf, ps = frames[st_first], offsets[st_first]
            nf, ns_ = f[first & at], s[first & at]
            if np.any((nf < pf) | ((nf == pf) & (ns_ < ps))):
                raise OutOfOrder("rows out of wire order within a conversation")
            frames[st_last], offsets[st_last] = f[last & at], s[last & at]

    def _arrays(self, code: int, size: int) -> tuple:
        frames = self.frame.get(code)
        if frames is None or len(frames) < size:
            grow = max(size, 2 * len(frames) if frames is not None else 0)
            old_f, old_s = frames, self.offset.get(code)
            frames = np.full(grow, np.iinfo(np.int64).min)
            offsets = np.full(grow, np.iinfo(np.int64).min)
            if old_f is not None:
                frames[: len(old_f)], offsets[: len(old_s)] = old_f, old_s
            self.frame[code], self.offset[code] = frames, offsets
        return frames, self.offset[code]
