"""What stats and the report load per section, on real captures: the rows of one version only,
the connections columns a section reads, the row count from the metadata; and the step line of
a timeline with more points than a figure can show drawn as its envelope."""

import os
import shutil

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import amqpcap
from amqpcap.analysis import stats
from amqpcap.analysis.report import step_envelope
from amqpcap.analysis.summary import SECTIONS, connections_table, section_tables
from amqpcap.analysis.tables import count_rows, dissect_cached

HERE = os.path.dirname(__file__)
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "..", "captures"))
MIXED = "rabbitmq10_proton_pika.pcap"  # a 1.0 publisher and a 0-9-1 consumer
MANY = "rabbitmq091_pika_full.pcap"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    return {n: str(dissect_cached(os.path.join(CAPTURES, n), cache_dir=cache)) for n in (MIXED, MANY)}


def test_the_1_0_section_loads_the_1_0_rows_and_no_other(outputs):
    full = amqpcap.load(outputs[MIXED], columns="compact")
    t = section_tables(outputs[MIXED], "amqp10")
    for name in ("connections", "methods", "messages"):
        whole = getattr(full, name)
        want = whole[whole["version"].astype(object) == "1.0"]
        got = getattr(t, name)
        assert len(want) and len(want) < len(whole)  # (the capture has both versions)
        assert len(got) == len(want)
        assert set(got["version"].astype(object)) == {"1.0"}
        assert list(got["frame_number"]) == list(want["frame_number"])


def test_stats_from_the_sections_equal_stats_from_every_column(outputs):
    for out in outputs.values():
        assert stats(out) == stats(amqpcap.load(out))


def test_a_pairing_section_reads_only_the_connection_keys(outputs):
    t = section_tables(outputs[MANY], "transit")
    assert list(t.connections.columns) == ["capture", "tcp_stream", "version"]
    assert len(t.connections) == len(amqpcap.load(outputs[MANY]).connections)


def test_the_busiest_connections_are_those_of_the_whole_table_sorted(outputs):
    t = amqpcap.load(outputs[MANY])
    whole = connections_table(t)
    for limit in (1, 2, 5):
        top = connections_table(t, limit)
        pd.testing.assert_frame_equal(top, whole.head(limit))
        assert top.attrs["total"] == len(t.connections)


def test_row_counts_come_from_the_metadata(outputs, tmp_path):
    t = amqpcap.load(outputs[MANY])
    for name in ("connections", "methods", "messages", "anomalies"):
        assert count_rows(outputs[MANY], name) == len(getattr(t, name))
    assert count_rows(outputs[MANY], "frames") == 0  # (not dissected with --frames)
    assert count_rows(tmp_path, "connections") == 0


def test_row_counts_add_up_every_file_of_a_table(outputs, tmp_path):
    messages = pq.read_table(os.path.join(outputs[MANY], "messages"))
    for k, (start, stop) in enumerate([(0, 3), (3, 3), (3, len(messages))]):  # (one file empty)
        os.makedirs(tmp_path / "messages" / f"part={k}")
        pq.write_table(messages.slice(start, stop - start), tmp_path / "messages" / f"part={k}" / "0.parquet")
    assert count_rows(tmp_path, "messages") == len(messages) > 3


def test_a_short_step_line_is_drawn_whole():
    x = np.arange(10.0)
    y = np.cumsum(np.where(x % 3 == 0, 1, -1))
    gx, gy = step_envelope(x, y, most=10)
    assert list(gx) == list(x) and list(gy) == list(y)


def test_a_step_line_is_drawn_without_its_repeated_values_but_keeps_its_end_and_gaps():
    x = np.arange(10.0)
    y = np.array([1, 1, 2, 2, 2, np.nan, np.nan, 3, 3, 3])
    gx, gy = step_envelope(x, y)
    assert list(gx) == [0, 2, 5, 7, 9]
    np.testing.assert_array_equal(gy, [1, 2, np.nan, 3, 3])
    back = np.array([0.0, 2, 1, 3])  # (x not ascending: drawn as it is)
    assert step_envelope(back, np.ones(4))[0] is back


def test_a_long_step_line_keeps_its_ends_and_each_span_extremes():
    rng = np.random.default_rng(5)
    x = np.sort(rng.uniform(0, 100, 100_000))
    y = np.cumsum(rng.choice([-1, 1], len(x)))
    gx, gy = step_envelope(x, y, most=400)
    assert len(gx) <= 400 and np.all(np.diff(gx) >= 0)
    assert (gx[0], gy[0], gx[-1], gy[-1]) == (x[0], y[0], x[-1], y[-1])
    assert gy.max() == y.max() and gy.min() == y.min()
    # each kept point is a point of the line
    at = np.searchsorted(x, gx)
    assert np.array_equal(x[at], gx) and np.array_equal(y[at], gy)
    # every span of x keeps its highest and lowest value
    bins = np.minimum(((x - x[0]) / (x[-1] - x[0]) * 100).astype(int), 99)
    gbins = np.minimum(((gx - x[0]) / (x[-1] - x[0]) * 100).astype(int), 99)
    for b in range(100):
        assert gy[gbins == b].max() == y[bins == b].max()
        assert gy[gbins == b].min() == y[bins == b].min()


def _regrouped(src: str, dst, rows_per_group: int, files: int) -> list:
    """``src``'s tables copied to ``dst`` with methods rewritten as ``files`` part files of
    ``rows_per_group`` rows a row group; returns the methods files' paths."""
    for name in ("connections", "messages", "anomalies"):
        shutil.copytree(os.path.join(src, name), os.path.join(dst, name))
    methods = ds.dataset(os.path.join(src, "methods"), format="parquet").to_table()
    os.makedirs(os.path.join(dst, "methods"))
    paths, step = [], -(-methods.num_rows // files)
    for i in range(files):
        paths.append(os.path.join(dst, "methods", f"part-{i:05d}.parquet"))
        pq.write_table(methods.slice(i * step, step), paths[-1], row_group_size=rows_per_group)
    return paths


def _spoil_groups_without(path: str, names: tuple, keep=("method",)) -> int:
    """Overwrites with 0xFF every column chunk but ``keep``'s of each row group of ``path`` that
    holds no method of ``names``: reading one of them fails.  Returns the row groups spoiled."""
    f = pq.ParquetFile(path)
    spoiled = []
    for g in range(f.num_row_groups):
        if set(f.read_row_group(g, columns=["method"]).column(0).to_pylist()) & set(names):
            continue
        for c in range(f.metadata.num_columns):
            chunk = f.metadata.row_group(g).column(c)
            if chunk.path_in_schema not in keep:
                start = chunk.dictionary_page_offset or chunk.data_page_offset
                spoiled.append((start, chunk.total_compressed_size))
    with open(path, "r+b") as out:
        for start, size in spoiled:
            out.seek(start)
            out.write(b"\xff" * size)
    return len(spoiled)


def test_a_method_section_reads_only_the_row_groups_holding_its_methods(outputs, tmp_path):
    names = SECTIONS["timeline"][1]["methods"]
    paths = _regrouped(outputs[MANY], tmp_path, rows_per_group=16, files=3)
    whole = amqpcap.load(str(tmp_path), columns="compact").methods
    want = whole[whole["method"].astype(object).isin(names)].reset_index(drop=True)
    assert 0 < len(want) < len(whole)
    assert sum(_spoil_groups_without(p, names) for p in paths)  # (some groups hold none)
    got = section_tables(str(tmp_path), "timeline").methods  # (a spoiled group read: an error)
    assert len(got) == len(want)
    for c in got.columns:
        assert got[c].astype(object).tolist() == want[c].astype(object).tolist(), c


@pytest.mark.parametrize("section", ["light", "errors", "consumer_ack", "messages"])
def test_a_small_tables_columns_read_in_one_scan_equal_those_read_two_a_scan(outputs, monkeypatch, section):
    from amqpcap.analysis import tables

    scans = []
    real = tables._read_exact
    monkeypatch.setattr(tables, "_read_exact", lambda *a, **k: scans.append(1) or real(*a, **k))
    one = tables.load_section(outputs[MANY], *SECTIONS[section])
    in_one = len(scans)
    monkeypatch.setattr(tables, "SMALL_TABLE", 0)  # every table read two columns a scan
    two = tables.load_section(outputs[MANY], *SECTIONS[section])
    assert len(scans) - in_one > in_one  # (fewer scans of the small tables)
    for name in ("connections", "methods", "messages", "anomalies"):
        pd.testing.assert_frame_equal(getattr(one, name), getattr(two, name))


def test_a_step_line_over_part_of_its_axis_keeps_the_extremes_of_the_axis_spans_it_crosses():
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(60, 70, 100_000))  # a tenth of the axis 0..100
    y = np.cumsum(rng.choice([-1, 1], len(x)))
    gx, gy = step_envelope(x, y, most=4000, axis=(0, 100))
    assert len(gx) <= 400 + 4 and np.all(np.diff(gx) >= 0)  # (1,000 spans: a tenth of them and one)
    assert (gx[0], gy[0], gx[-1], gy[-1]) == (x[0], y[0], x[-1], y[-1])
    at = np.searchsorted(x, gx)
    assert np.array_equal(x[at], gx) and np.array_equal(y[at], gy)  # each kept point is one of the line
    bins, gbins = (np.minimum((v / 100 * 1000).astype(int), 999) for v in (x, gx))
    for b in np.unique(bins):
        assert gy[gbins == b].max() == y[bins == b].max()
        assert gy[gbins == b].min() == y[bins == b].min()
    short = np.sort(rng.uniform(60, 61, 300))  # more points than its 11 spans have room for
    assert len(step_envelope(short, np.arange(300.0), most=4000, axis=(0, 100))[0]) <= 44
    assert len(step_envelope(short, np.arange(300.0), most=4000)[0]) == 300  # (its own axis)
