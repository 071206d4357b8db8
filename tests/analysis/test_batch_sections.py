"""The sections of stats and the report that read a dissect output a batch at a time (throughput
buckets, the time span and its outliers, the report's time origin, the Connections table) give
what they give on the loaded tables, on real captures, with batches small enough that every
table takes several."""

import functools
import os
import shutil
import struct

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from test_streamed_acks import random_consumer_traffic

import amqpcap
from amqpcap.analysis import batches, report
from amqpcap.analysis.connection_health import unacked
from amqpcap.analysis.report import total_unacked, write_report
from amqpcap.analysis.summary import connections_table, span_summary, stats, time_outliers
from amqpcap.analysis.tables import dissect_cached, table_files
from amqpcap.analysis.timespan import first_ts
from amqpcap.analysis.traffic import throughput, totals, totals_at
from amqpcap.pipeline import dissect

HERE = os.path.dirname(__file__)
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "..", "captures"))
FULL = "rabbitmq091_pika_full.pcap"
OLD = "netamqp09_offline.pcap"


def _epoch_copy(src: str, dst: str, k: int) -> None:
    """A copy of pcap ``src`` whose ``k``-th packet is stamped 1970-01-01T00:00:00Z."""
    data = bytearray(open(src, "rb").read())
    assert struct.unpack_from("<I", data, 0)[0] == 0xA1B2C3D4
    pos = 24
    for _ in range(k - 1):
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    struct.pack_into("<II", data, pos, 0, 0)
    open(dst, "wb").write(data)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch")
    epoch = str(tmp / "epoch.pcap")
    _epoch_copy(os.path.join(CAPTURES, FULL), epoch, 20)
    out = {
        "plain": str(dissect_cached(os.path.join(CAPTURES, FULL), cache_dir=tmp / "c1")),
        "frames": str(dissect_cached(os.path.join(CAPTURES, FULL), cache_dir=tmp / "c2", frames=True)),
        "epoch": str(dissect_cached(epoch, cache_dir=tmp / "c3")),
    }
    both = tmp / "both"
    dissect([os.path.join(CAPTURES, FULL), os.path.join(CAPTURES, OLD)], str(both))
    out["two captures"] = str(both)
    return out


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(batches, "BATCH_ROWS", 7)  # every table in several batches


@pytest.mark.parametrize("name", ["plain", "frames", "epoch", "two captures"])
def test_buckets_of_the_batches_equal_those_of_the_loaded_tables(outputs, name):
    out = outputs[name]
    loaded = amqpcap.load(out)
    for bucket in ("1s", "100ms"):
        got, want = totals(out, bucket), totals(loaded, bucket)
        pd.testing.assert_frame_equal(got, want)
        assert got.attrs == want.attrs and got.attrs["buckets"] > 0
    for by in ("connection", "channel", "total"):
        pd.testing.assert_frame_equal(throughput(out, "1s", by), throughput(loaded, "1s", by))


def _with_nulls(out: str, table: str, dst) -> str:
    """A copy of dissect output ``out`` whose ``table`` has rows without a time (every 5th), without
    a direction (every 7th) and without a capture (every 11th)."""
    shutil.copytree(out, dst)
    for path in table_files(str(dst), table):
        t = pq.read_table(path)
        rows = np.arange(t.num_rows)
        for column, every in (("ts", 5), ("direction", 7), ("capture", 11)):
            i = t.schema.get_field_index(column)
            t = t.set_column(i, t.field(i), pc.if_else(pa.array(rows % every == 3), None, t.column(i)))
        pq.write_table(t, path)
    return str(dst)


@pytest.mark.parametrize("table", ["messages", "methods", "frames"])
def test_buckets_of_rows_without_a_time_direction_or_capture_equal_those_of_the_loaded_tables(
    outputs, table, tmp_path
):
    out = _with_nulls(outputs["frames" if table == "frames" else "two captures"], table, tmp_path / "n")
    loaded = amqpcap.load(out)
    assert getattr(loaded, table)["ts"].isna().any() and getattr(loaded, table)["direction"].isna().any()
    for got, want in zip(totals_at(out, ["1s", "100ms"]), totals_at(loaded, ["1s", "100ms"])):
        pd.testing.assert_frame_equal(got, want)
        assert got.attrs == want.attrs and got.attrs["buckets"] > 0


@pytest.mark.parametrize("name", ["plain", "frames", "epoch", "two captures"])
def test_buckets_of_several_widths_in_one_pass_equal_each_width_alone(outputs, name):
    out = outputs[name]
    for t in (out, amqpcap.load(out)):
        widths = ["1s", "100ms", "5s"]
        for got, bucket in zip(totals_at(t, widths), widths):
            want = totals(t, bucket)
            pd.testing.assert_frame_equal(got, want)
            assert got.attrs == want.attrs and got.attrs["buckets"] > 0


@pytest.mark.parametrize("name", ["plain", "frames", "epoch", "two captures"])
def test_span_of_the_batches_equals_that_of_the_loaded_tables(outputs, name):
    out = outputs[name]
    loaded = amqpcap.load(out)
    assert span_summary(out) == span_summary(loaded)
    tables = (loaded.connections, loaded.methods, loaded.messages, loaded.frames)
    assert first_ts(out) == min(df["ts"].min() for df in tables if len(df) and df["ts"].notna().any())


def test_a_packet_stamped_1970_is_found_by_the_batches(outputs):
    out = outputs["epoch"]
    got = span_summary(out)
    odd = time_outliers(amqpcap.load(out))
    assert got["time_outliers"] == len(odd) == 1
    assert got["first_time_outlier"]["frame_number"] == int(odd["frame_number"].iloc[0]) == 20
    assert got["first_time_outlier"]["ts"].startswith("1970-01-01")


def test_connections_table_of_the_batches_equals_that_of_the_loaded_tables(outputs):
    for name in ("plain", "two captures"):
        out = outputs[name]
        got, want = connections_table(out), connections_table(amqpcap.load(out))
        assert got.attrs["total"] == want.attrs["total"] == len(got) == (2 if name == "two captures" else 1)
        pd.testing.assert_frame_equal(got.astype(object), want.astype(object))
        assert (got["methods"] > 0).all() and got["messages"].sum() > 0


def test_stats_of_a_directory_equal_stats_of_the_loaded_tables(outputs):
    for out in outputs.values():
        assert stats(out) == stats(amqpcap.load(out))


def test_an_output_without_frames_files_reads_as_empty(outputs, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(outputs["plain"], out)
    shutil.rmtree(out / "messages")
    (out / "messages").mkdir()
    assert list(batches.frames(str(out), "messages", ["ts"])) == []


@pytest.mark.parametrize("chunk", [3, 1 << 16], ids=["rows-in-chunks-of-3", "rows-in-one-chunk"])
def test_the_total_unacked_line_is_the_sum_of_each_channels_latest_count(chunk, monkeypatch):
    monkeypatch.setattr(report, "_changes", functools.partial(report._changes, chunk=chunk))
    un = unacked(random_consumer_traffic(0).tables())
    assert len(un) and un.groupby(["capture", "tcp_stream", "channel"], observed=True).ngroups >= 5
    t0n = int(un["ts"].min().value)
    x, y = total_unacked(un, t0n)
    assert len(x) == len(y) == len(un) and (x[1:] >= x[:-1]).all()
    # after each event in time order: the latest count of every channel, added up
    order = np.argsort(un["ts"].to_numpy(), kind="stable")
    latest: dict = {}
    for i, k in enumerate(order):
        r = un.iloc[k]
        latest[(r["capture"], r["tcp_stream"], r["channel"])] = int(r["unacked"])
        assert y[i] == sum(latest.values())
        assert x[i] == (r["ts"].value - t0n) / 1e9


# errors of 0-10 (execution.exception names its command by id), of closes and refusals
ERRORS = ["qpid010_basic.pcap", "rabbitmq08_rejected.pcap", "rabbitmq08_amqplib.pcap"]


@pytest.mark.parametrize("name", ERRORS)
def test_errors_and_counts_of_a_directory_equal_those_of_the_loaded_tables(name, tmp_path):
    out = str(dissect_cached(os.path.join(CAPTURES, name), cache_dir=tmp_path))
    got, want = stats(out), stats(amqpcap.load(out))
    assert got == want
    assert got["errors"] and got["captures"]


@pytest.mark.parametrize("name", ["plain", "frames"])
def test_report_of_a_directory_equals_that_of_the_loaded_tables(outputs, name, tmp_path):
    # (the page inlines every figure: one page, every file)
    out = outputs[name]
    got = open(write_report(out, tmp_path / "dir"), encoding="utf-8").read()
    want = open(write_report(amqpcap.load(out), tmp_path / "loaded"), encoding="utf-8").read()
    assert got == want and got.count("data:image/png;base64,") == 5


def test_a_report_given_the_stats_equals_the_report_that_computes_them(outputs, tmp_path):
    out = outputs["plain"]
    given = open(write_report(out, tmp_path / "given", stats=stats(out)), encoding="utf-8").read()
    computed = open(write_report(out, tmp_path / "computed"), encoding="utf-8").read()
    assert given == computed and given.count("data:image/png;base64,") == 5
