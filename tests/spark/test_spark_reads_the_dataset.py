"""A stock ``spark.read.parquet`` reads what ``dissect`` and ``spark`` write: every time column a
Spark TIMESTAMP equal to pyarrow's to the microsecond, the ns past it in its ``_nanos`` column."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixtures import pcapgen

import amqpcap
from amqpcap.capture.reader import open_capture
from amqpcap.pipeline import dissect
from amqpcap.records import schema
from amqpcap.records.schema import NANOS, TS
from amqpcap.spark import run

ROOT = Path(__file__).resolve().parents[2]
TABLES = ["connections", "methods", "messages", "anomalies", "frames"]
# the columns that tell rows apart, where a table has them
KEYS = ["capture", "tcp_stream", "frame_number", "direction", "stream_offset", "kind", "frame_type"]


def time_columns(table: str) -> list[str]:
    return [n for n, t, _ in schema.TABLES[table] if t is TS]


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """Real captures (0-9-1 and 1.0, settlement included) as nanosecond pcaps whose packet times
    are moved by a few hundred ns: the ns past the microsecond are there to lose; the last one
    also cut inside a packet."""
    tmp = tmp_path_factory.mktemp("nano")
    paths = []
    for name in ("rabbitmq091_pika_full.pcap", "rabbitmq10_proton_outcomes.pcap"):
        pkts = [
            (ts + (n * 337) % 1000, lt, d, wl)
            for n, ts, lt, d, wl in open_capture(str(ROOT / "captures" / name))
        ]
        (tmp / name).write_bytes(pcapgen.pcap_bytes(pkts, nano=True))
        paths.append(str(tmp / name))
    cut = tmp / "cut.pcap"  # a conversation cut short: anomaly rows with their times
    cut.write_bytes((tmp / name).read_bytes()[: -(len(pkts[-1][2]) + 40)])
    paths.append(str(cut))
    return paths


@pytest.fixture(scope="module", params=["dissect", "spark"])
def written(request, captures, tmp_path_factory, spark):
    out = str(tmp_path_factory.mktemp(request.param) / "out")
    if request.param == "dissect":
        dissect(captures, out, frames=True)
    else:
        run(spark, captures, out, frames=True)
    return out


def test_a_stock_spark_reads_every_table_with_timestamp_time_columns_equal_to_pyarrow(spark, written):
    from pyspark.sql import functions as F

    assert spark.conf.get("spark.sql.legacy.parquet.nanosAsLong", "false") == "false"
    for table in TABLES:
        path = os.path.join(written, table)
        df = spark.read.parquet(path)
        times = time_columns(table)
        types = dict(df.dtypes)
        assert all(types[c] == "timestamp" and types[c + NANOS] == "smallint" for c in times), types
        keys = [k for k in KEYS if k in types]
        cols = keys + [x for c in times for x in (F.unix_micros(c).alias(c), F.col(c + NANOS))]
        got = [tuple(r) for r in df.select(*cols).collect()]
        raw = pq.read_table(path)
        columns = [raw.column(k).to_pylist() for k in keys]
        for c in times:
            columns += [raw.column(c).cast(pa.int64()).to_pylist(), raw.column(c + NANOS).to_pylist()]
        want = list(zip(*columns))
        assert len(got) == raw.num_rows > 0, table
        assert sorted(got, key=_order) == sorted(want, key=_order), table


def _order(row: tuple) -> tuple:
    return tuple((v is None, 0 if v is None else v) for v in row)


def test_the_ns_spark_and_the_library_read_are_the_packets_own(spark, written, captures):
    """``amqpcap.load`` gives every row its packet's exact ns; Spark's ``unix_micros(ts) * 1000 +
    ts_nanos`` gives the same."""
    from pyspark.sql import functions as F

    truth = {}
    for path in captures:
        truth.update({(path, n): ts for n, ts, *_ in open_capture(path)})
    t = amqpcap.load(written)
    sub_us = 0
    for table in ("methods", "messages", "frames"):
        df = getattr(t, table)
        for cap, frame, ts in zip(df["capture"], df["frame_number"], df["ts"]):
            assert ts.value == truth[(cap, int(frame))], (table, frame)
            sub_us += ts.value % 1000 != 0
        s = spark.read.parquet(os.path.join(written, table))
        ns = s.select("capture", "frame_number", (F.unix_micros("ts") * 1000 + F.col("ts_nanos")).alias("ns"))
        assert {(r[0], r[1], r[2]) for r in ns.collect()} == {
            (c, int(f), v.value) for c, f, v in zip(df["capture"], df["frame_number"], df["ts"])
        }, table
    assert sub_us > 100
