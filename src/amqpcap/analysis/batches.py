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

from amqpcap.analysis.tables import CATEGORICAL_COLUMNS, POOL, arrow_to_pandas, table_dataset
from amqpcap.records import times

__all__ = ["BATCH_ROWS", "is_output_dir", "frames"]

BATCH_ROWS = 1 << 19  # rows per batch: a few tens of MB of a frame of a few columns


def is_output_dir(t) -> bool:
    """True when ``t`` is a dissect output directory (read batch by batch), not loaded tables."""
    return isinstance(t, (str, os.PathLike)) and os.path.isdir(t)


def frames(
    directory,
    name: str,
    columns: list[str],
    *,
    categorical=CATEGORICAL_COLUMNS,
    compact: bool = True,
    rows: int = BATCH_ROWS,
) -> Iterator[pd.DataFrame]:
    """The ``columns`` of table ``name`` of dissect output ``directory``, ``rows`` rows at a time, in
    the files' order, each slice as a frame typed like a section load's (``columns="compact"``; or
    as :func:`~amqpcap.analysis.tables.arrow_to_pandas` makes it with ``categorical`` and
    ``compact``); nothing when the table is absent or empty."""
    dataset = table_dataset(directory, name)
    if dataset is None:
        return
    want = times.with_companions(columns, dataset.schema.names)
    for batch in dataset.to_batches(columns=want, batch_size=rows, use_threads=False, memory_pool=POOL):
        if batch.num_rows == 0:
            continue
        table = times.to_exact(pa.Table.from_batches([batch]), POOL)
        del batch
        yield arrow_to_pandas(table, name, columns, categorical, compact)
        del table
