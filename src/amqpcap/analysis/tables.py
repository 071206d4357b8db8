"""Load a dissect output (or a capture, dissected to a cache) as pandas tables.

``load(path)`` returns a :class:`Tables` with one pandas DataFrame per table
(``connections``, ``methods``, ``messages``, ``anomalies``, ``frames``), typed
from :mod:`amqpcap.records.schema`:

* timestamps are ``datetime64[ns, UTC]``;
* integers are pandas nullable integers (``Int8`` .. ``Int64``), booleans are
  nullable ``boolean`` (missing values are ``pd.NA``);
* strings use the pandas default string dtype of the installed pandas
  (``object`` in pandas 2, ``str`` in pandas 3); binary columns hold ``bytes``.

A table that is absent from the output (``frames`` unless dissected with
``--frames``) is an empty frame with the right columns and dtypes.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from amqpcap.analysis._common import release_memory
from amqpcap.records import times
from amqpcap.records.schema import SCHEMAS, STORED_SCHEMAS

TABLE_NAMES = ("connections", "methods", "messages", "anomalies", "frames")


class UnreadableTable(Exception):
    """A Parquet file of a dissect output that cannot be read: cut, damaged, not Parquet, or not
    readable by this user.  ``path``: the file; ``reason``: the first line of pyarrow's error."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)  # (pickles: a forked analysis process sends it back)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: a table cannot be read ({self.reason})"


@contextlib.contextmanager
def reading(path):
    """The read seam: a pyarrow open, footer or row-group read of ``path`` under it that fails
    (``ArrowInvalid``: not Parquet, cut; ``OSError``: a damaged page, no permission) raises
    :class:`UnreadableTable`.  Only reads go under it: an error of what is computed on the rows
    is a bug and stays one."""
    try:
        yield
    except (pa.ArrowInvalid, OSError) as e:
        text = str(e).strip()
        first = text.splitlines()[0] if text else type(e).__name__
        first = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in first)  # (a thrift byte)
        raise UnreadableTable(os.fspath(path), first) from None


def read_through(path, items):
    """``items`` (a reader's iterator over ``path``) with each step taken under :func:`reading`
    and what the caller does with an item outside it."""
    it = iter(items)
    while True:
        with reading(path):
            item = next(it, reading)  # (``reading``: a sentinel no reader yields)
        if item is reading:
            return
        yield item


_INT_DTYPES = {
    pa.int8(): pd.Int8Dtype(),
    pa.int16(): pd.Int16Dtype(),
    pa.int32(): pd.Int32Dtype(),
    pa.int64(): pd.Int64Dtype(),
    pa.uint8(): pd.UInt8Dtype(),
    pa.uint16(): pd.UInt16Dtype(),
    pa.uint32(): pd.UInt32Dtype(),
    pa.uint64(): pd.UInt64Dtype(),
    pa.bool_(): pd.BooleanDtype(),
}


@dataclass(frozen=True)
class Tables:
    """The tables of one dissect output, as pandas DataFrames."""

    connections: pd.DataFrame
    methods: pd.DataFrame
    messages: pd.DataFrame
    anomalies: pd.DataFrame
    frames: pd.DataFrame
    source: str | None = None  # directory the tables were read from
    present: tuple = field(default=())  # names of the tables found on disk

    @property
    def has_frames(self) -> bool:
        """True when the ``frames`` table was written (``dissect --frames``)."""
        return "frames" in self.present

    def __repr__(self) -> str:  # pragma: no cover - cosmetic
        sizes = ", ".join(
            f"{f.name}={len(getattr(self, f.name))}" for f in fields(self) if f.name in TABLE_NAMES
        )
        return f"Tables({self.source!r}: {sizes})"


# The columns the analysis (every function of amqpcap.analysis, stats and the report) reads;
# ``load(..., columns="analysis")`` reads only these, leaving out the JSON / binary columns
# (arguments, properties, headers, body) that are most of a big output's memory.
ANALYSIS_COLUMNS: dict[str, list[str]] = {
    "methods": [
        "capture",
        "tcp_stream",
        "frame_number",
        "ts",
        "direction",
        "channel",
        "stream_offset",
        "method",
        "version",
        "synchronous",
        "frame_size",
        "exchange",
        "routing_key",
        "queue",
        "consumer_tag",
        "delivery_tag",
        "multiple",
        "requeue",
        "redelivered",
        "no_ack",
        "reply_code",
        "reply_text",
        "reply_name",
        "failing_method",
        "prefetch_count",
        "command_id",
        "answers_command_id",
        "no_wait",
        "active",
        "qos_global",
        "reason",
        "accept_mode",
        "id_ranges",
        "code",
        "text",
        # AMQP 1.0
        "link_name",
        "delivery_id",
        "settled",
        "outcome",
        "condition",
        "role",
        "more",
        "link_credit",
        "delivery_count",
        "drain",
        "available",
    ],
    "messages": [
        "capture",
        "tcp_stream",
        "frame_number",
        "ts",
        "direction",
        "channel",
        "stream_offset",
        "method",
        "version",
        "exchange",
        "routing_key",
        "consumer_tag",
        "delivery_tag",
        "redelivered",
        "correlation_id",
        "reply_to",
        "message_id",
        "body_size",
        "body_received",
        "body_frames",
        "body_hash",
        # AMQP 1.0
        "link_name",
        "delivery_id",
        "settled",
        "settle_ts",
        "outcome",
        "condition",
    ],
}


# With ``columns="analysis"``, these string columns (a handful of distinct values in millions of
# rows) are loaded as pandas Categorical with sorted categories: a code per row instead of a string.
CATEGORICAL_COLUMNS = frozenset(
    {
        "capture",
        "direction",
        "method",
        "version",
        "exchange",
        "routing_key",
        "queue",
        "consumer_tag",
        "reply_to",
        "reply_text",
        "reply_name",
        "failing_method",
        "reason",
        "text",
        # connections: one distinct value for many conversations (a server, a client host, a header)
        "client_ip",
        "server_ip",
        "client_header",
        "server_header",
        "client_version",
        "negotiation",
        "closed_by",
        "rst_by",
        "server_product",
    }
)


# With ``columns="compact"`` (what ``amqpcap stats`` and ``report`` load), these string columns,
# nearly one distinct value per message and only ever compared for equality (pairing publishes to
# deliveries, RPC requests to replies), are integer codes instead of strings: ``Int32``, equal
# strings <-> equal codes within the table, null for a missing value (and, for the two ids, for
# an empty one: the analysis treats an empty id as none).  A code per row, no string kept.
CODE_COLUMNS = frozenset({"message_id", "correlation_id", "body_hash"})
_EMPTY_IS_NULL = frozenset({"message_id", "correlation_id"})
# coded with one dictionary when read together: an AMQP 1.0 reply names its request by the
# request's message-id in its correlation-id (analysis.amqp10_pairing)
SHARED_CODES = ("message_id", "correlation_id")

_LEAN_MODES = ("analysis", "compact")


def _columns(name: str, columns) -> list[str]:
    """The columns of table ``name`` to read: all, or those of ``columns`` (a mapping, "analysis"
    or "compact")."""
    if columns is None:
        return [f.name for f in SCHEMAS[name]]
    if isinstance(columns, str):
        if columns not in _LEAN_MODES:
            raise ValueError(
                f'columns: None, "analysis", "compact" or {{table: [column, ...]}}, not {columns!r}'
            )
        columns = ANALYSIS_COLUMNS
    want = columns.get(name)
    names = [f.name for f in SCHEMAS[name]]
    return names if want is None else [n for n in names if n in want]


def arrow_to_pandas(
    table: pa.Table, name: str, columns: list[str] | None = None, categorical=frozenset(), compact=False
) -> pd.DataFrame:
    """Convert an Arrow table of schema ``SCHEMAS[name]`` (or of its ``columns``) to a typed DataFrame;
    the string columns named in ``categorical`` become pandas Categorical (sorted categories).
    ``compact``: the :data:`CODE_COLUMNS` become integer codes, and a column with no value at all
    takes no memory (see :func:`_compact`)."""
    full = SCHEMAS[name]
    schema = full if columns is None else pa.schema([full.field(c) for c in columns], metadata=full.metadata)
    # Conform: add missing columns as nulls, order and cast as the schema says.
    shared = [c for c in SHARED_CODES if compact and c in table.column_names]
    coded = _shared_codes([table.column(c).cast(pa.string()) for c in shared]) if len(shared) > 1 else []
    coded = dict(zip(shared, coded))
    cols = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            if col.type != f.type and not (f.name in categorical and pa.types.is_dictionary(col.type)):
                col = col.cast(f.type)
        else:
            col = pa.nulls(len(table), type=f.type)
        if f.name in categorical and pa.types.is_string(f.type):
            col = pc.dictionary_encode(col, memory_pool=POOL if compact else None)
        elif f.name in coded:
            col = coded.pop(f.name)
        elif compact and f.name in CODE_COLUMNS:
            col = _codes(col, empty_is_null=f.name in _EMPTY_IS_NULL)
        cols.append(col)
    del table
    table = pa.Table.from_arrays(
        cols, schema=pa.schema([pa.field(f.name, c.type) for f, c in zip(schema, cols)])
    )
    del cols
    # self_destruct: each Arrow column is freed once converted (no second copy of the whole table)
    df = table.to_pandas(
        types_mapper=_INT_DTYPES.get,
        ignore_metadata=True,
        self_destruct=True,
        split_blocks=True,
        memory_pool=POOL if compact else None,
    )
    del table
    for c in df.columns:  # (categories most often in order already: no reorder, ~0.3 ms of pandas a column)
        if c in categorical and isinstance(df[c].dtype, pd.CategoricalDtype):
            cats = df[c].cat.categories
            if not cats.is_monotonic_increasing:
                df[c] = df[c].cat.reorder_categories(sorted(cats))  # sorts like strings
    for f in schema:  # timestamps: always ns, UTC
        if pa.types.is_timestamp(f.type):
            s = df[f.name]
            if not isinstance(s.dtype, pd.DatetimeTZDtype):
                s = pd.to_datetime(s, utc=True)
            df[f.name] = s.astype("datetime64[ns, UTC]")
    return _compact(df) if compact else df


def _codes(col: pa.ChunkedArray, empty_is_null: bool) -> pa.ChunkedArray:
    """int32 codes of a string column: equal strings, equal codes (one dictionary for every chunk:
    Arrow's dictionary_encode of a chunked array shares it); null for null (and "" when
    ``empty_is_null``)."""
    enc = pc.dictionary_encode(col, memory_pool=POOL)
    idx = pa.chunked_array([c.indices for c in enc.chunks], type=pa.int32())
    if empty_is_null and enc.num_chunks:
        empty = pc.index(enc.chunk(0).dictionary, "").as_py()
        if empty >= 0:
            idx = pc.if_else(pc.equal(idx, empty), pa.scalar(None, pa.int32()), idx, memory_pool=POOL)
    return idx


def _shared_codes(cols: list) -> list:
    """:func:`_codes` of the id columns ``cols`` (empty as null) with one dictionary for all of
    them: a string has the same code in each."""
    lengths = [len(c) for c in cols]
    idx = _codes(pa.chunked_array([k for c in cols for k in c.chunks], type=pa.string()), empty_is_null=True)
    flat = idx.combine_chunks() if idx.num_chunks != 1 else idx.chunk(0)
    out, at = [], 0
    for n in lengths:
        out.append(pa.chunked_array([flat.slice(at, n)], type=pa.int32()))
        at += n
    return out


def _compact(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every nullable column that holds no value at all (on one AMQP version's traffic,
    the other versions' columns: 0-10 command ids, 0-9 reason ...) replaced by an equal column of
    zero-stride arrays: millions of rows of nothing cost nothing; likewise the missing-value mask
    of a nullable column with no missing value.  The arrays are read-only; pandas copies a column
    before it writes into it."""
    n = len(df)
    for c in df.columns if n else ():
        s = df[c]
        missing = s.isna()
        if isinstance(s.array, (pd.arrays.IntegerArray, pd.arrays.BooleanArray)):
            if missing.all():
                values = np.broadcast_to(np.zeros(1, dtype=s.dtype.numpy_dtype), n)
            elif not missing.any():
                values = s.to_numpy(dtype=s.dtype.numpy_dtype)
            else:
                continue
            arr = type(s.array)(values, np.broadcast_to(missing.iloc[0], n))
        elif s.dtype == object and missing.all():
            arr = np.broadcast_to(np.array([None], dtype=object), n)
        else:
            continue
        df[c] = pd.Series(arr, index=df.index, copy=False)
    return df


def empty_frame(
    name: str, columns: list[str] | None = None, categorical=frozenset(), compact=False
) -> pd.DataFrame:
    """An empty DataFrame with the columns and dtypes of table ``name``."""
    return _empty_frame(
        name, None if columns is None else tuple(columns), frozenset(categorical), compact
    ).copy()


@functools.lru_cache(maxsize=64)
def _empty_frame(name: str, columns: tuple | None, categorical: frozenset, compact: bool) -> pd.DataFrame:
    """:func:`empty_frame`, made once per shape (a section load makes one for each table it does
    not read: 5-50 ms of pandas' dtype checks each, ~30 of them in a stats run); callers get a
    copy (0.2 ms)."""
    return arrow_to_pandas(
        SCHEMAS[name].empty_table(), name, None if columns is None else list(columns), categorical, compact
    )


def _categorical(columns) -> frozenset:
    return CATEGORICAL_COLUMNS if isinstance(columns, str) and columns in _LEAN_MODES else frozenset()


def _compact_mode(columns) -> bool:
    return isinstance(columns, str) and columns == "compact"


def _dataset(files: list[str], name: str, categorical) -> ds.Dataset:
    """The Parquet files of table ``name`` (as stored: see :func:`_read_exact`); the string columns
    in ``categorical`` are read as dictionaries (as Parquet stores them: no string per row is
    ever made)."""
    schema = STORED_SCHEMAS[name]
    dict_cols = [f.name for f in schema if f.name in categorical and pa.types.is_string(f.type)]
    if not dict_cols:
        return ds.dataset(files, format="parquet", schema=schema)
    schema = pa.schema(
        [pa.field(f.name, pa.dictionary(pa.int32(), f.type)) if f.name in dict_cols else f for f in schema]
    )
    fmt = ds.ParquetFileFormat(read_options={"dictionary_columns": dict_cols})
    return ds.dataset(files, format=fmt, schema=schema)


def _read_exact(dataset: ds.Dataset, columns: list[str] | None = None, keep=None, **kw) -> pa.Table:
    """``columns`` (all: None) of ``dataset`` with exact ns times: the one place the library
    reads the tables' stored time columns (``records/times.py``), whatever reads them after.
    ``keep``: a mask of the rows to keep, applied batch by batch (what is held is the rows kept
    and one batch, not the whole column)."""
    if columns is not None:
        columns = times.with_companions(columns, dataset.schema.names)
    if keep is None:
        table = dataset.to_table(columns=columns, **kw)
    else:
        parts, at = [], 0
        for batch in dataset.to_batches(columns=columns, batch_readahead=0, fragment_readahead=0, **kw):
            parts.append(batch.filter(keep.slice(at, batch.num_rows)))
            at += batch.num_rows
        table = pa.Table.from_batches(parts) if parts else dataset.to_table(columns=columns, **kw)
    return times.to_exact(table, kw.get("memory_pool"))


def _kept_rows(dataset: ds.Dataset, names, versions) -> pa.Array | None:
    """The mask of the rows whose ``method`` is one of ``names`` and ``version`` one of
    ``versions`` (None: no such condition; None when neither), read batch by batch: a bit a row
    is held, not the columns.  A file at a time, in the dataset's order: one file's footer held,
    not every file's (a dataset scan keeps each fragment's: about 1 MB a file of ``messages``)."""
    conditions = [
        (c, pa.array(list(v), pa.string()))
        for c, v in (("method", names), ("version", versions))
        if v is not None
    ]
    if not conditions:
        return None
    parts = []
    cols = [c for c, _ in conditions]
    for path in dataset.files:
        with reading(path):
            f = pq.ParquetFile(path, read_dictionary=cols, memory_map=False, pre_buffer=False)
        if not all(c in f.schema_arrow.names for c in cols):  # (no such column: no row kept)
            parts.append(pa.array(np.zeros(f.metadata.num_rows, dtype=bool)))
            continue
        for batch in read_through(path, f.iter_batches(columns=cols, use_threads=False)):
            these = None
            for i, (_, values) in enumerate(conditions):
                hit = _is_in(pa.chunked_array([batch.column(i)]), values)
                these = hit if these is None else pc.and_(these, hit)
            parts.extend(these.chunks)
        del f
    return pa.chunked_array(parts, type=pa.bool_()).combine_chunks() if parts else pa.array([], pa.bool_())


def _read_compact(
    dataset: ds.Dataset, name: str, cols: list[str], categorical, names=None, versions=None
) -> pd.DataFrame:
    """``columns="compact"``: the table read and converted a few columns at a time, memory given
    back in between, so the peak is the frame plus one group's Arrow data, not plus the whole
    table's (and a :data:`CODE_COLUMNS` column's strings never sit beside anything else).
    ``names``: only the rows whose ``method`` is one of them; ``versions``: whose ``version``."""
    keep = _kept_rows(dataset, names, versions)  # (found once, each group's read filtered by it)
    if keep is not None and not pc.any(keep).as_py():  # no row wanted: no column read
        return empty_frame(name, cols, categorical, True)
    stored = sum(os.path.getsize(f) for f in dataset.files)  # (the table's, not the groups kept)
    if keep is not None:
        dataset, keep = _groups_kept(dataset, keep)
    ids = [c for c in SHARED_CODES if c in cols]  # read together: one dictionary (SHARED_CODES)
    groups = ([ids] if ids else []) + [[c] for c in cols if c in CODE_COLUMNS and c not in ids]
    rest = [c for c in cols if c not in CODE_COLUMNS]
    size = _GROUP if stored >= SMALL_TABLE else len(rest) or 1
    groups += [rest[i : i + size] for i in range(0, len(rest), size)]
    if not groups:
        n = dataset.count_rows() if keep is None else pc.sum(keep).as_py() or 0
        return pd.DataFrame(index=pd.RangeIndex(n))
    df = None
    for group in groups:
        table = _read_exact(dataset, group, memory_pool=POOL, use_threads=False, keep=keep)
        part = arrow_to_pandas(table, name, group, categorical, True)
        del table
        if df is None:
            df = part
        else:
            for c in group:
                df[c] = part[c]  # no copy (copy on write)
        del part
        release_memory(collect=False)  # (no reference cycles here: a collection would cost, not free)
    return df[cols]


_GROUP = 2  # columns per read of a compact load (the conversion transient follows it)
# the Parquet bytes of a table under which a compact load reads its other columns in one scan: a scan
# has a fixed cost (a section of 0.1 GB capture's tables: 30-60% of its load), and the transient of
# a table this small is small beside the process
SMALL_TABLE = 16 << 20


def _groups_kept(dataset: ds.Dataset, keep: pa.ChunkedArray) -> tuple[ds.Dataset, pa.Array]:
    """``dataset`` narrowed to its row groups that hold a row of ``keep`` (a mask over all its
    rows, in read order) and the mask of those groups' rows: the columns of a group with no row
    wanted are never read (a few error methods in millions of rows: about half the groups)."""
    pieces, sizes = [], []
    for fragment in dataset.get_fragments():
        with reading(fragment.path):
            meta = fragment.metadata
            groups = fragment.split_by_row_group()
        for i, piece in enumerate(groups):
            pieces.append(piece)
            sizes.append(meta.row_group(i).num_rows)
    flat = pc.fill_null(keep, False).combine_chunks() if isinstance(keep, pa.ChunkedArray) else keep
    if sum(sizes) != len(flat) or not sizes:  # (not the layout read: every group kept)
        return dataset, flat
    starts = np.cumsum([0] + sizes[:-1])
    rows = np.flatnonzero(flat.to_numpy(zero_copy_only=False))  # (few: the rows wanted)
    hits = np.unique(np.searchsorted(starts, rows, side="right") - 1)
    if len(hits) == len(sizes):
        return dataset, flat
    kept = ds.FileSystemDataset([pieces[i] for i in hits], dataset.schema, dataset.format, dataset.filesystem)
    return kept, pa.concat_arrays([flat.slice(starts[i], sizes[i]) for i in hits])


def _is_in(col: pa.ChunkedArray, values: pa.Array) -> pa.ChunkedArray:
    """``pc.is_in(col, values)``; of a dictionary column, decided once per dictionary entry (Arrow's
    is_in of a dictionary array looks at every row's string)."""
    if not pa.types.is_dictionary(col.type):
        return pc.is_in(col, value_set=values)
    chunks = []
    for c in col.chunks:
        entry = pc.fill_null(pc.is_in(c.dictionary, value_set=values), False)
        chunks.append(pc.if_else(c.is_null(), False, pc.take(entry, c.indices)))
    return pa.chunked_array(chunks, type=pa.bool_())


# Arrow memory of the lean loads comes from malloc, not Arrow's default pool (mimalloc / jemalloc):
# those keep the freed buffers of the conversion (a few hundred MB on a big output) mapped, where
# malloc gives them back (``release_memory``); the columns pandas keeps are Arrow buffers too.
POOL = pa.system_memory_pool()


def read_table(directory: str | os.PathLike, name: str, columns=None) -> pd.DataFrame | None:
    """Read the Parquet dataset ``directory/name`` (None if absent); ``columns`` as for :func:`load`."""
    return _read_table(
        directory, name, _columns(name, columns), _categorical(columns), _compact_mode(columns)
    )


def _read_table(
    directory, name: str, cols: list[str], cat, compact: bool, names=None, versions=None
) -> pd.DataFrame | None:
    """:func:`read_table` of the columns ``cols`` (``cat``: those made Categorical; ``compact``: as
    ``columns="compact"``; ``names``, ``versions``: a compact read keeps only the rows of these
    methods, of these versions)."""
    p = Path(directory) / name
    candidates = [p, p.with_suffix(".parquet")]
    for c in candidates:
        if c.is_dir():
            files = [x for x in c.rglob("*.parquet") if not x.name.startswith((".", "_"))]
            if not files:
                return empty_frame(name, cols, cat, compact)
            paths = [str(x) for x in sorted(files)]
            try:  # the schema fills columns a file lacks with nulls
                if compact:
                    return _read_compact(_dataset(paths, name, cat), name, cols, cat, names, versions)
                table = _read_exact(_dataset(paths, name, cat), cols)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError):
                # files of other schemas, promoted one by one; or one that cannot be read, named
                table = pa.concat_tables([_read_file(x) for x in paths], promote_options="permissive")
            return arrow_to_pandas(table, name, cols, cat, compact)
        if c.is_file():
            return arrow_to_pandas(_read_file(str(c)), name, cols, cat, compact)
    return None


def _read_file(path: str) -> pa.Table:
    """Every column of one Parquet file, as stored, with exact ns times (:func:`_read_exact`)."""
    with reading(path):
        table = ds.dataset(path, format="parquet").to_table()
    return times.to_exact(table)


def table_files(directory: str | os.PathLike, name: str) -> list[str]:
    """The Parquet files of table ``name`` of a dissect output, in the order :func:`read_table`
    reads them (none when the table is absent)."""
    p = Path(directory) / name
    if p.is_dir():
        return [str(x) for x in sorted(x for x in p.rglob("*.parquet") if not x.name.startswith((".", "_")))]
    return [str(p.with_suffix(".parquet"))] if p.with_suffix(".parquet").is_file() else []


def output_bytes(directory: str | os.PathLike) -> int:
    """The bytes of the Parquet files of every table of a dissect output."""
    return sum(os.path.getsize(f) for name in TABLE_NAMES for f in table_files(directory, name))


def count_rows(directory: str | os.PathLike, name: str) -> int:
    """The number of rows of table ``name`` of a dissect output (0 if absent), from the Parquet
    metadata: no column is read.  Each file's footer is read in turn on this thread (a dataset's
    count scans the footers on the thread pools, whose freed heap stays resident, more the more
    files and row groups the table has)."""
    n = 0
    for f in table_files(directory, name):
        with reading(f):
            n += pq.read_metadata(f).num_rows
    return n


def load_dir(directory: str | os.PathLike, columns=None) -> Tables:
    """Read a dissect output directory (``columns`` as for :func:`load`)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: not a dissect output directory")
    frames = {}
    present = []
    # compact: messages first, its big string columns turned to codes while little else is in memory
    first = "messages" if _compact_mode(columns) else None
    for name in sorted(TABLE_NAMES, key=lambda n: n != first):
        df = read_table(directory, name, columns)
        if df is None:
            if name != "frames":
                raise FileNotFoundError(errno.ENOENT, f"no {name}/ table (not a dissect output?)", directory)
            df = empty_frame(name, _columns(name, columns), _categorical(columns), _compact_mode(columns))
        else:
            present.append(name)
        frames[name] = df
    release_memory()  # the Arrow tables are converted: give their memory back
    present = tuple(n for n in TABLE_NAMES if n in present)
    return Tables(**frames, source=str(directory), present=present)


def load_section(
    directory: str | os.PathLike, columns: dict, names: dict | None = None, versions: dict | None = None
) -> Tables:
    """The tables of a dissect output as ``columns="compact"`` loads them, but only what one
    computation reads: the ``columns`` of each table named (``{table: [column, ...]}``; ``None``:
    its analysis columns; a table not named is empty) and, for a table in ``names``, only the
    rows whose ``method`` is one of ``names[table]`` (a superset of what the computation selects
    by method name); likewise ``versions[table]``, the versions whose rows are read.  ``stats``
    and the report load each section of a big output this way and drop it before the next:
    memory follows one computation's columns, not every column."""
    directory = Path(directory)
    frames, present = {}, []
    for name in sorted(TABLE_NAMES, key=lambda n: n != "messages"):
        cols = _columns(name, "compact")
        want = columns.get(name)  # (a table not named: no rows, every column)
        cols = cols if want is None else [c for c in cols if c in want]
        p = directory / name
        if p.is_dir() or p.with_suffix(".parquet").is_file():
            present.append(name)
        elif name != "frames":
            raise FileNotFoundError(errno.ENOENT, f"no {name}/ table (not a dissect output?)", directory)
        df = None
        if name in columns:
            df = _read_table(
                directory,
                name,
                cols,
                CATEGORICAL_COLUMNS,
                True,
                (names or {}).get(name),
                (versions or {}).get(name),
            )
        frames[name] = df if df is not None else empty_frame(name, cols, CATEGORICAL_COLUMNS, True)
    release_memory()
    present = tuple(n for n in TABLE_NAMES if n in present)
    return Tables(**frames, source=str(directory), present=present)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "amqpcap"


def cache_key(capture: str | os.PathLike, **dissect_opts) -> str:
    """sha256 of the capture's content and the dissect options."""
    h = hashlib.sha256()
    with open(capture, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    opts = {k: (list(v) if isinstance(v, (tuple, set)) else v) for k, v in sorted(dissect_opts.items())}
    h.update(b"\0amqpcap-options\0")
    h.update(json.dumps(opts, sort_keys=True, default=str).encode())
    h.update(b"\0amqpcap-code\0" + _code_fingerprint().encode())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """sha256 of amqpcap's own source: a dissection cached by another version of the
    decoder or the schema (even one between releases) is never reused."""
    import amqpcap

    h = hashlib.sha256(amqpcap.__version__.encode())
    root = Path(amqpcap.__file__).parent
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


_DONE = ".amqpcap-complete"


def dissect_cached(
    capture: str | os.PathLike, *, cache_dir=None, progress: bool = False, **dissect_opts
) -> Path:
    """Dissect ``capture`` into ``cache_dir/<key>`` (reused when complete) and return that directory.

    ``progress`` (stderr progress line) is not part of the cache key."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    out = root / cache_key(capture, **dissect_opts)
    if (out / _DONE).exists():
        return out
    from amqpcap.pipeline import dissect  # late import: the pipeline is heavy

    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        extra = {"progress": True} if progress else {}
        dissect([str(capture)], str(tmp / "out"), force=True, **extra, **dissect_opts)
        (tmp / "out" / _DONE).write_text(str(capture) + "\n")
        if out.exists():  # an incomplete earlier attempt
            shutil.rmtree(out, ignore_errors=True)
        try:
            os.replace(tmp / "out", out)
        except OSError:
            if not (out / _DONE).exists():  # lost a race with nobody: re-raise
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def load(path, *, cache_dir=None, columns=None, **dissect_opts) -> Tables:
    """Load a dissect output directory, or dissect a capture file to a cache and load that.

    ``columns``: None (every column), ``"analysis"`` (only the columns the
    analysis functions, ``stats`` and the report read: :data:`ANALYSIS_COLUMNS`;
    a fraction of the memory on big outputs) or ``{table: [column, ...]}``
    (tables not named: every column).  Columns left out are absent from the
    DataFrames.  ``dissect_opts`` (``body_bytes``, ``frames``, ``ports``,
    ``keep_secrets``) are passed to :func:`amqpcap.pipeline.dissect` and are part
    of the cache key; they are ignored when ``path`` is a directory.
    """
    if isinstance(path, Tables):
        return path
    p = Path(path)
    if p.is_dir():
        return load_dir(p, columns)
    if not p.exists():
        raise FileNotFoundError(str(p))
    return load_dir(dissect_cached(p, cache_dir=cache_dir, **dissect_opts), columns)


def as_tables(t) -> Tables:
    """Accept a :class:`Tables` or anything :func:`load` accepts."""
    return t if isinstance(t, Tables) else load(t)


def from_frames(**frames) -> Tables:
    """Build :class:`Tables` from DataFrames (missing tables empty); for tests and notebooks."""
    out = {}
    present = []
    for name in TABLE_NAMES:
        df = frames.get(name)
        if df is None:
            df = empty_frame(name)
        else:
            present.append(name)
        out[name] = df
    return Tables(**out, source=None, present=tuple(present))
