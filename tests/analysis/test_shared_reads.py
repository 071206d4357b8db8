"""The passes over a dissect output read a column of a table file once while their reads are
shared (a small output's stats), and a pass keeping some methods' rows reads the other columns
only of the row groups that hold one: the same rows and the same stats either way."""

import os

import pyarrow.parquet as pq
import pytest

from amqpcap.analysis import batches, summary
from amqpcap.analysis.summary import stats
from amqpcap.analysis.tables import dissect_cached, table_files

HERE = os.path.dirname(__file__)
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "..", "captures"))
FULL = "rabbitmq091_pika_full.pcap"


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """A dissect output of a real capture whose table files are in row groups of 5 rows."""
    tmp = tmp_path_factory.mktemp("shared")
    out = str(dissect_cached(os.path.join(CAPTURES, FULL), cache_dir=tmp / "c"))
    for name in os.listdir(out):
        for path in table_files(out, name):
            table = pq.read_table(path)
            pq.write_table(table, path + ".tmp", row_group_size=5)
            os.replace(path + ".tmp", path)
    assert pq.ParquetFile(table_files(out, "methods")[0]).metadata.num_row_groups > 10
    return out


@pytest.fixture
def reads(monkeypatch):
    """Every Parquet read of row groups: (file name, groups, columns)."""
    seen = []
    read = pq.ParquetFile.read_row_groups

    def recorded(self, row_groups, columns=None, **kw):
        seen.append((list(row_groups), tuple(columns)))
        return read(self, row_groups, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", recorded)
    return seen


def test_stats_of_a_small_output_are_the_same_with_and_without_shared_reads(grouped, monkeypatch):
    shared = stats(grouped)
    monkeypatch.setattr(summary, "SMALL_OUTPUT", 0)  # no output is small: each pass reads its own
    assert stats(grouped) == shared


def test_each_column_of_a_file_is_read_once_while_reads_are_shared(grouped, reads):
    cols = ["capture", "tcp_stream", "ts"]
    alone = [t.to_pydict() for t in batches.tables(grouped, "methods", cols)]
    reads.clear()
    with batches.shared_reads():
        first = [t.to_pydict() for t in batches.tables(grouped, "methods", cols)]
        again = [t.to_pydict() for t in batches.tables(grouped, "methods", ["ts", "channel"], rows=3)]
        coded = list(batches.batches(grouped, "methods", ["capture", "ts"], {"capture": batches.Codes()}))
    assert first == alone and again and coded
    read_columns = [c for _, columns in reads for c in columns]
    assert sorted(read_columns) == sorted(set(read_columns))  # (ts with its ts_nanos companion)
    assert {"capture", "tcp_stream", "ts", "channel"} <= set(read_columns)


@pytest.mark.parametrize("share", [False, True], ids=["own reads", "shared reads"])
def test_a_pass_keeping_some_methods_reads_only_the_row_groups_holding_them(grouped, reads, share):
    names = ("connection.open", "connection.open-ok")
    cols = ["frame_number", "method", "channel"]
    rows = [r for t in batches.tables(grouped, "methods", cols) for r in t.to_pylist()]
    want = [r for r in rows if r["method"] in names]
    holding = {i // 5 for i, r in enumerate(rows) if r["method"] in names}  # (groups of 5 rows)
    reads.clear()
    with batches.shared_reads(share):
        got = [r for t in batches.tables(grouped, "methods", cols, methods=names) for r in t.to_pylist()]
    assert got == want and want
    groups = [g for groups, columns in reads if "frame_number" in columns for g in groups]
    total = pq.ParquetFile(table_files(grouped, "methods")[0]).metadata.num_row_groups
    assert len(holding) < total
    # (shared: each column read whole, once, for the passes after it)
    assert sorted(groups) == (list(range(total)) if share else sorted(holding))
