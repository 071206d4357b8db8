"""Time columns between the rows (exact ns) and Parquet (microseconds plus the ns past them).

The row builders and the library's frames hold a time as ``timestamp[ns, UTC]``.  Parquet's
TIMESTAMP(NANOS) is refused by Spark (and the readers built on it: Glue, Databricks ...), so the
files hold each time column X as ``timestamp[us, UTC]``, floored, and ``X_nanos`` (int16, 0 ..
999) beside it (records/schema.py: ``stored``).  ``to_stored`` is how both table buffers' batches
are written; ``to_exact`` is how every reader of the library gets the exact ns back.

The split runs on the column's buffer: in C (fastwriter.split_ns) where the table buffer is
compiled, else ``split_ns`` here.  Neither uses numpy or pyarrow.compute, which the dissect
process leaves out (cli.WITHOUT_NUMPY; compute adds ~40 ms to every start).
"""

from __future__ import annotations

from array import array

import pyarrow as pa

from amqpcap import compiled
from amqpcap.records.schema import NANOS, nanos_doc

NS = pa.timestamp("ns", tz="UTC")
US = pa.timestamp("us", tz="UTC")


def _is_exact(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) and t.unit == "ns"


def stored_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` (a table's rows) as Parquet holds it: every ns time column as a microsecond
    one followed by its ``_nanos`` companion (metadata kept; ``schema.STORED_SCHEMAS`` for the
    declared tables)."""
    fields = []
    for f in schema:
        if _is_exact(f.type):
            fields += [
                f.with_type(US),
                pa.field(f.name + NANOS, pa.int16(), metadata={"doc": nanos_doc(f.name)}),
            ]
        else:
            fields.append(f)
    return pa.schema(fields, metadata=schema.metadata)


def split_ns(data, count: int) -> tuple:
    """The first ``count`` int64 ns of ``data`` (a buffer) as (microseconds, floored; the 0 ..
    999 ns past them), two buffers of int64 and int16 (fastwriter.split_ns is the same in C)."""
    ns = memoryview(data).cast("B")[: count * 8].cast("q")
    if len(ns) != count:
        raise ValueError(f"{count} int64 values do not fit a buffer of {memoryview(data).nbytes} bytes")
    return array("q", [x // 1000 for x in ns]), array("h", [x % 1000 for x in ns])


def _split(a: pa.Array) -> tuple[pa.Array, pa.Array]:
    """A ns time array as (microseconds floored, the 0 .. 999 ns past them); nulls where ``a``'s."""
    validity, data = a.buffers()
    n, off, nulls = len(a), a.offset, a.null_count
    kernel = compiled.select("fastwriter")
    us, rest = (kernel.split_ns if kernel is not None else split_ns)(data, off + n)
    return (
        pa.Array.from_buffers(US, n, [validity, pa.py_buffer(us)], nulls, off),
        pa.Array.from_buffers(pa.int16(), n, [validity, pa.py_buffer(rest)], nulls, off),
    )


def to_stored(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (a table's rows) as Parquet holds it; ``schema``: its ``stored_schema``."""
    if not any(_is_exact(t) for t in batch.schema.types):
        return batch
    arrays = []
    for f, col in zip(batch.schema, batch.columns):
        if _is_exact(f.type):
            arrays += _split(col)
        else:
            arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def with_companions(columns: list[str], available) -> list[str]:
    """``columns`` (of a table's rows) plus the ``_nanos`` companions ``available`` (the
    file's column names) holds for them: what to read to get those columns exact."""
    have = set(available)
    out = []
    for c in columns:
        out.append(c)
        if c + NANOS in have and c + NANOS not in columns:
            out.append(c + NANOS)
    return out


def to_exact(table: pa.Table, memory_pool=None) -> pa.Table:
    """``table`` (a Table or RecordBatch) read from Parquet with its time columns exact: each
    ``timestamp`` column with a ``_nanos`` companion becomes ``timestamp[ns, UTC]`` plus those
    ns, the companion dropped; a time column without one (a file written with ns times) is
    cast to ns."""
    import pyarrow.compute as pc

    names = table.column_names
    for i, f in enumerate(table.schema):
        if not pa.types.is_timestamp(f.type) or (f.type.unit == "ns" and f.name + NANOS not in names):
            continue
        col = table.column(i)
        if f.name + NANOS in names:
            ns = pc.multiply(col.cast(pa.int64()), 1000, memory_pool=memory_pool)
            nanos = pc.fill_null(table.column(f.name + NANOS), 0).cast(pa.int64())
            col = pc.add(ns, nanos, memory_pool=memory_pool).cast(NS)
        else:
            col = col.cast(pa.timestamp("ns", tz=f.type.tz or "UTC"))
        table = table.set_column(i, f.with_type(col.type), col)
    drop = [n for n in names if n.endswith(NANOS) and n[: -len(NANOS)] in names]
    return table.drop_columns(drop) if drop else table


def spark_exact(df):
    """A Spark DataFrame read from the tables with each time column as exact ns since the epoch
    (bigint: ``unix_micros(X) * 1000 + X_nanos``), the companions dropped: what ``stats --spark``
    computes on, as the library does on ``to_exact``'s ns."""
    from pyspark.sql import functions as F

    names = set(df.columns)
    cols = []
    for c in df.columns:
        if c.endswith(NANOS) and c[: -len(NANOS)] in names:
            continue
        if c + NANOS in names:
            nanos = F.coalesce(F.col(c + NANOS).cast("long"), F.lit(0))
            cols.append((F.unix_micros(F.col(c)) * 1000 + nanos).alias(c))
        else:
            cols.append(F.col(c))
    return df.select(*cols)
