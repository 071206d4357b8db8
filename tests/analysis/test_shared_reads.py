"""While the passes over a dissect output share their reads (a small output's stats), a column
of a table file asked for by a second pass is read whole once and shared with every later one;
a pass keeping some methods' rows reads the other columns only of the row groups that hold one:
the same rows and the same stats either way."""

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


def test_a_column_asked_for_again_is_read_whole_once_then_shared(grouped, reads):
    def passes():
        yield [t.to_pydict() for t in batches.tables(grouped, "methods", ["capture", "tcp_stream", "ts"])]
        yield [t.to_pydict() for t in batches.tables(grouped, "methods", ["ts", "channel"], rows=3)]
        codes = batches.Codes()
        yield [
            {k: v.tolist() for k, v in b.items()}
            for b in batches.batches(grouped, "methods", ["capture"], {"capture": codes})
        ]
        yield [t.to_pydict() for t in batches.tables(grouped, "methods", ["capture", "ts", "channel"])]

    alone = list(passes())
    reads.clear()
    got, seen = [], []
    with batches.shared_reads():
        for rows in passes():
            got.append(rows)
            seen.append(list(reads))
            reads.clear()
    assert got == alone
    total = list(range(pq.ParquetFile(table_files(grouped, "methods")[0]).metadata.num_row_groups))

    def read(n):  # the columns pass n read
        return {c for _, columns in seen[n] for c in columns}

    def whole(n, column):  # pass n read the column once, every group of it
        return [groups for groups, columns in seen[n] if column in columns] == [total]

    assert read(0) == {"capture", "tcp_stream", "ts", "ts_nanos"}  # asked once: read as asked
    assert read(1) == {"channel", "ts", "ts_nanos"} and whole(1, "ts")  # ts asked again
    assert not whole(1, "channel")  # (asked once, read by groups)
    assert read(2) == {"capture"} and whole(2, "capture")
    assert read(3) == {"channel"} and whole(3, "channel")  # capture and ts shared


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
    assert len(holding) < total and sorted(groups) == sorted(holding)


def test_the_reports_own_passes_share_their_reads_from_the_first_to_the_last(grouped, tmp_path, monkeypatch):
    from amqpcap.analysis import report

    whole: dict = {}  # (file, column) -> how often this process' parts read every row group of it
    read = pq.ParquetFile.read_row_groups
    parts: list = []  # (set once the parts begin: their first is the throughput totals)

    def recorded(self, row_groups, columns=None, **kw):
        groups = list(row_groups)
        if parts and len(groups) == self.metadata.num_row_groups:
            for c in columns:
                key = (self.metadata.num_rows, self.schema_arrow.names[0], c)
                whole[key] = whole.get(key, 0) + 1
        return read(self, row_groups, columns=columns, **kw)

    totals_at = report.totals_at
    monkeypatch.setattr(report, "totals_at", lambda *a: (parts.append(1), totals_at(*a))[1])
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", recorded)
    report.write_report(grouped, tmp_path / "r")  # (the figures' process: its own reads, not seen here)
    # read by the first pass that asks for it (its groups: here every one), then once for all others
    assert parts and whole and max(whole.values()) <= 2, sorted(k for k, n in whole.items() if n > 2)
