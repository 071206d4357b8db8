"""A dissect output's table read a row group at a time, in the order it was written (capture
order), a few columns at a time: what a streaming pass over a big table holds is one batch, not
the table.

Each batch is a dict of numpy arrays: time columns as int64 ns since the epoch (exact; missing:
``NAT``), integer columns as int64 (missing: -1 unless asked otherwise), booleans as bool
(missing: False), strings as int32 codes into one list of values per column (missing: -1) that
grows as batches bring new values.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from amqpcap.analysis._common import NAT
from amqpcap.records import times
from amqpcap.records.schema import SCHEMAS

__all__ = ["table_files", "batches", "OutOfOrder", "WireOrder"]

BATCH_ROWS = 1 << 14


class OutOfOrder(Exception):
    """A table's rows are not in wire order within a conversation: a streaming pass cannot be
    exact, the caller computes the whole-table way."""


def table_files(directory, name: str) -> list[str] | None:
    """The Parquet files of table ``name`` of a dissect output in the order they were written
    (None: no such table)."""
    p = Path(directory) / name
    if p.is_dir():
        return [str(x) for x in sorted(p.rglob("*.parquet")) if not x.name.startswith((".", "_"))]
    f = p.with_suffix(".parquet")
    return [str(f)] if f.is_file() else None


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
    directory, name: str, columns: list[str], strings: dict, methods=None, nulls: tuple = ()
) -> Iterator[dict]:
    """The ``columns`` of table ``name`` a row group at a time (see the module doc), only the rows
    whose ``method`` is one of ``methods`` (None: all).  ``strings``: column -> :class:`Codes`
    for each string column.  ``nulls``: integer columns also given as ``<name>_valid`` masks."""
    files = table_files(directory, name) or []
    for path in files:
        f = pq.ParquetFile(path)
        have = set(f.schema_arrow.names)
        read = times.with_companions([c for c in columns if c in have], have)
        for batch in f.iter_batches(batch_size=BATCH_ROWS, columns=read, use_threads=False):
            if methods is not None:
                batch = batch.filter(pc.is_in(batch.column("method"), value_set=pa.array(list(methods))))
                if batch.num_rows == 0:
                    continue
            batch = times.to_exact(batch)
            out = {}
            for c in columns:
                col = batch.column(c) if c in have else pa.nulls(batch.num_rows, SCHEMAS[name].field(c).type)
                if c in nulls:
                    out[c + "_valid"] = col.is_valid().to_numpy(zero_copy_only=False)
                out[c] = _numpy(col, strings.get(c))
            yield out


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
