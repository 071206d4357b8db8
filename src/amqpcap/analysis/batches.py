"""A dissect output's tables read a slice of rows at a time.

The computations of stats and the report that only add up (sums per time bucket, minima and
maxima, counts) read their columns record batch by record batch from the Parquet files: their
memory follows one batch and their buckets, not the size of the table.  Each batch comes as the
pandas frame a section load would hold for those rows (same dtypes, exact ns times).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from amqpcap.analysis.tables import CATEGORICAL_COLUMNS, POOL, arrow_to_pandas, table_files
from amqpcap.records import times

__all__ = ["BATCH_ROWS", "is_output_dir", "tables", "frames"]

BATCH_ROWS = 1 << 17  # rows per batch: a few MB of a frame of a few columns, tens with its transients


def is_output_dir(t) -> bool:
    """True when ``t`` is a dissect output directory (read batch by batch), not loaded tables."""
    return isinstance(t, (str, os.PathLike)) and os.path.isdir(t)


def tables(directory, name: str, columns: list[str], rows: int | None = None) -> Iterator[pa.Table]:
    """The ``columns`` of table ``name`` of dissect output ``directory`` (those a file has),
    ``rows`` (default :data:`BATCH_ROWS`) rows at a time in the files' order, as Arrow tables with
    exact ns times (the strings of :data:`~amqpcap.analysis.tables.CATEGORICAL_COLUMNS` as
    dictionaries); nothing when the table is absent or empty.  Row group after row group, no read
    ahead: memory follows one batch."""
    for path in table_files(directory, name):
        f = pq.ParquetFile(path, read_dictionary=[c for c in columns if c in CATEGORICAL_COLUMNS])
        have = f.schema_arrow.names
        want = [c for c in times.with_companions(columns, have) if c in have]
        for batch in f.iter_batches(batch_size=rows or BATCH_ROWS, columns=want, use_threads=False):
            if batch.num_rows:
                yield times.to_exact(pa.Table.from_batches([batch]), POOL)
        f.close()


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
