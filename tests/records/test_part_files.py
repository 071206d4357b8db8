"""A table written as several files of a few row groups each (what a big dissect makes): every
reader gives the rows of one file, in order, and the analysis the same summary."""

from __future__ import annotations

import errno
import os
import threading
import time

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from fixtures.compiled import CAPTURES

import amqpcap
from amqpcap.analysis.summary import stats
from amqpcap.analysis.tables import table_files
from amqpcap.pipeline import dissect
from amqpcap.records import writer


def batch_of(values: list) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"x": v} for v in values], schema=pa.schema([("x", pa.int64())]))


@pytest.mark.parametrize("background", [False, True])
def test_a_file_is_begun_every_part_groups_row_groups_none_left_empty(tmp_path, monkeypatch, background):
    monkeypatch.setattr(writer, "FIRST_GROUP_ROWS", 10)
    monkeypatch.setattr(writer, "GROUP_ROWS", 10)  # a batch a row group
    for batches, files in ((7, [2, 2, 2, 1]), (6, [2, 2, 2])):
        path = tmp_path / f"{background}-{batches}"
        f = writer.ParquetFile(str(path), background, part_groups=2)
        for i in range(batches):
            f.write(batch_of(list(range(i * 10, i * 10 + 10))))
        f.close()
        names = sorted(os.listdir(path))
        assert names == [f"part-{i:05d}.parquet" for i in range(len(files))]
        assert [pq.ParquetFile(path / n).metadata.num_row_groups for n in names] == files
        assert pq.read_table(path).column("x").to_pylist() == list(range(batches * 10))


def test_a_row_group_that_fails_names_its_own_file_after_the_writer_moved_to_the_next(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "FIRST_GROUP_ROWS", 10)
    monkeypatch.setattr(writer, "GROUP_ROWS", 10)  # a batch a row group
    monkeypatch.setattr(writer, "QUEUED", 8)  # every group in the thread before the failure is seen
    opened = writer.open_parquet
    written = []
    go = threading.Event()

    class SecondGroupFails:
        def __init__(self, inner):
            self.inner = inner

        def write_table(self, table, rows):
            written.append(rows)
            if len(written) == 2:  # the second row group of part-00000, once every group is queued
                go.wait(10)
                raise OSError(errno.ENOSPC, "No space left on device")  # no file name: pyarrow's way
            self.inner.write_table(table, rows)

        def close(self):
            self.inner.close()

    monkeypatch.setattr(writer, "open_parquet", lambda path, schema: SecondGroupFails(opened(path, schema)))
    f = writer.ParquetFile(str(tmp_path / "t"), True, part_groups=2)
    for i in range(4):
        f.write(batch_of(list(range(i * 10, i * 10 + 10))))
    go.set()
    while f.writing():  # the Parquet thread goes on to part-00001 meanwhile
        time.sleep(0.01)
    with pytest.raises(OSError) as e:
        f.close()
    assert e.value.errno == errno.ENOSPC
    assert e.value.filename == str(tmp_path / "t" / "part-00000.parquet")
    assert sorted(os.listdir(tmp_path / "t")) == ["part-00000.parquet", "part-00001.parquet"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """(several files a table, one file a table): the shipped captures dissected both ways, with
    row groups of a few hundred rows."""
    tmp = tmp_path_factory.mktemp("parts")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writer, "ROW_GROUP", 200)
        mp.setattr(writer, "FIRST_GROUP_ROWS", 200)
        mp.setattr(writer, "GROUP_ROWS", 400)
        mp.setattr(writer, "PART_GROUPS", 2)
        dissect(CAPTURES, str(tmp / "parts"), frames=True)
        mp.setattr(writer, "PART_GROUPS", None)
        dissect(CAPTURES, str(tmp / "one"), frames=True)
    return str(tmp / "parts"), str(tmp / "one")


def test_every_reader_gives_the_rows_of_one_file_from_several(outputs):
    parts, one = outputs
    assert len(table_files(parts, "frames")) > 3 and len(table_files(parts, "methods")) > 3
    for name in ("connections", "methods", "messages", "frames", "anomalies"):
        assert len(table_files(one, name)) == 1
        want = pq.read_table(os.path.join(one, name))
        assert pq.read_table(os.path.join(parts, name)).equals(want), name
        assert ds.dataset(os.path.join(parts, name), format="parquet").to_table().equals(want), name
        pd.testing.assert_frame_equal(
            pd.read_parquet(os.path.join(parts, name)), pd.read_parquet(os.path.join(one, name))
        )
    got, want = amqpcap.load(parts), amqpcap.load(one)
    for name in ("connections", "methods", "messages", "frames"):
        pd.testing.assert_frame_equal(getattr(got, name), getattr(want, name))


def test_stats_of_several_files_a_table_equals_stats_of_one(outputs):
    parts, one = outputs
    assert stats(parts) == stats(one)
