"""`amqpcap spark` writes the same dataset as `amqpcap dissect`: same layout, schema and rows."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from fixtures import pcapgen

import amqpcap
from amqpcap.capture.reader import open_capture
from amqpcap.pipeline import dissect
from amqpcap.records.schema import SCHEMAS
from amqpcap.records.writer import OutputExists
from amqpcap.spark import run, split

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(glob.glob(str(ROOT / "captures" / "*.pcap")))
TABLES = ["connections", "methods", "messages", "anomalies", "frames"]


def read_sorted(out, table) -> pa.Table:
    """Every part of the table, rows sorted by every column (row order is not part of the contract)."""
    t = ds.dataset(os.path.join(out, table), format="parquet").to_table()
    # nested columns (methods.id_ranges) cannot be sort keys; the flat ones order every row
    keys = [(c, "ascending") for c in t.column_names if not pa.types.is_nested(t.schema.field(c).type)]
    return t.sort_by(keys).combine_chunks()


def assert_same_dataset(got, want, tables=TABLES):
    for table in tables:
        g, w = read_sorted(got, table), read_sorted(want, table)
        assert g.schema.equals(SCHEMAS[table], check_metadata=True), table
        assert g.num_rows == w.num_rows, table
        assert g.equals(w), f"{table}: rows differ"
        for f in os.listdir(os.path.join(got, table)):
            assert f.startswith("part-") and f.endswith(".parquet"), f


@pytest.fixture(scope="module")
def dissected(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("dissect") / "out")
    dissect(CAPTURES, out, frames=True)
    return out


def test_spark_writes_the_rows_dissect_writes_for_every_shipped_capture(spark, dissected, tmp_path):
    out = str(tmp_path / "out")
    s = run(spark, CAPTURES, out, frames=True)
    assert_same_dataset(out, dissected)
    assert s.captures == len(CAPTURES) and not s.errors and not s.split
    assert s.rows["methods"] == pq.ParquetDataset(os.path.join(dissected, "methods")).read().num_rows
    t = amqpcap.load(out)
    assert len(t.connections) == s.rows["connections"] == 47


def test_a_tiny_split_size_splits_by_conversation_and_packs_the_rest_into_tasks(spark, dissected, tmp_path):
    out = str(tmp_path / "out")
    s = run(spark, CAPTURES, out, frames=True, split_size=20_000)
    # every shipped capture above 20 kB with two or more conversations is split
    several = (
        "rabbitmq08_netamqp.pcap",
        "rabbitmq091_pika_throughput.pcap",
        "rabbitmq09_netamqp.pcap",
        "rabbitmq10_proton_frames512.pcap",
        "rabbitmq10_proton_outcomes.pcap",
        "rabbitmq10_rhea_frames512.pcap",
        "rabbitmq10_rhea_outcomes.pcap",
    )
    assert set(s.split) == {
        c for c in CAPTURES if os.path.getsize(c) > 20_000 and os.path.basename(c) in several
    }
    assert s.tasks > len(CAPTURES)
    assert len(os.listdir(os.path.join(out, "methods"))) > 1
    assert_same_dataset(out, dissected)


def _merged_packets():
    """Packets of several shipped captures, each shifted to start at the same instant: their
    conversations interleave (and client ports may collide, as on a busy host)."""
    names = [
        "rabbitmq091_pika_refused.pcap",
        "rabbitmq091_pika_throughput.pcap",
        "rabbitmq08_netamqp.pcap",
        "rabbitmq09_netamqp.pcap",
        "rabbitmq091_pika_full.pcap",
        "qpid010_basic.pcap",
    ]
    pkts = []
    for k, name in enumerate(names):
        src = list(open_capture(str(ROOT / "captures" / name)))
        t0 = src[0][1]
        pkts += [
            (ts - t0 + 1_700_000_000 * 10**9 + k * 1000, i, lt, data, wl)
            for i, (_n, ts, lt, data, wl) in enumerate(src)
        ]
    pkts.sort(key=lambda p: (p[0], p[1]))
    return [(ts, lt, data, wl) for ts, _i, lt, data, wl in pkts]


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    """The merged packets as classic pcap, and as pcapng with two sections (the second big-endian)
    whose interfaces use other timestamp resolutions and an offset."""
    d = tmp_path_factory.mktemp("merged")
    pkts = _merged_packets()
    pcap = d / "merged.pcap"
    pcap.write_bytes(pcapgen.pcap_bytes(pkts))
    w = pcapgen.PcapNg("<")
    half = len(pkts) // 2
    a, b = w.interface(1, tsresol=9), w.interface(1)
    for i, (ts, _lt, data, wl) in enumerate(pkts[:half]):
        w.epb(a if i % 3 else b, ts, data, wl)
    w.section(">")
    w.block(4, b"\x00" * 4)  # a name resolution block: no packet, no anomaly
    a = w.interface(1, tsresol=6, tsoffset=1_600_000_000)
    for ts, _lt, data, wl in pkts[half:]:
        w.epb(a, ts, data, wl)
    pcapng = d / "merged.pcapng"
    pcapng.write_bytes(w.getvalue())
    return [str(pcap), str(pcapng)]


def test_the_split_index_yields_exactly_the_packets_the_reader_yields(merged):
    for path in merged + CAPTURES:
        ix = split.index(path)
        assert ix is not None, path
        b = split.buckets(ix, path, 1)[0]
        assert list(split.BucketSource(b)) == list(open_capture(path)), path


def test_buckets_balance_conversations_by_bytes_and_keep_each_whole(merged):
    ix = split.index(merged[0])
    assert ix.nflows >= 12
    parts = split.buckets(ix, "m", 4)
    assert len(parts) == 4
    assert sorted(n for b in parts for n in b.number.tolist()) == ix.number.tolist()
    owner = {}
    for b in parts:
        for n in b.number.tolist():
            owner.setdefault(int(ix.flow[n - 1]), set()).add(b.part)
    assert all(len(v) == 1 for v in owner.values()), "a conversation was cut across buckets"
    sizes = sorted(b.size for b in parts)
    assert sizes[0] > 0 and all(list(b.number) == sorted(b.number) for b in parts)


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_one_capture_split_into_buckets_gives_the_single_process_rows(spark, merged, tmp_path, fmt):
    path = merged[0] if fmt == "pcap" else merged[1]
    want = str(tmp_path / "dissect")
    d = dissect([path], want, frames=True)
    out = str(tmp_path / "spark")
    s = run(spark, [path], out, frames=True, split_size=os.path.getsize(path) // 5 + 1)
    assert s.split == {path: 5} and s.tasks == 5
    assert s.tcp_streams == d.tcp_streams >= 12 and s.packets == d.packets
    assert_same_dataset(out, want)
    streams = pq.read_table(os.path.join(out, "connections"), columns=["tcp_stream"]).column(0).to_pylist()
    assert sorted(streams) == sorted(set(streams)) and max(streams) < d.tcp_streams


def test_an_unsplittable_capture_is_dissected_whole(spark, tmp_path):
    blob = (ROOT / "captures" / "rabbitmq091_pika_throughput.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(blob[:-100])  # ends inside a record: a truncated-file anomaly row
    assert split.index(str(cut)) is None
    out, want = str(tmp_path / "spark"), str(tmp_path / "dissect")
    s = run(spark, [str(cut)], out, split_size=10_000)
    dissect([str(cut)], want)
    assert not s.split and s.tasks == 1
    assert_same_dataset(out, want, TABLES[:4])
    kinds = pq.read_table(os.path.join(out, "anomalies"), columns=["kind"]).column(0).to_pylist()
    assert "truncated-file" in kinds


def test_a_capture_that_cannot_be_read_is_an_error_in_the_summary_not_a_failed_job(spark, tmp_path):
    bad = tmp_path / "notes.pcap"
    bad.write_text("not a capture\n")
    good = str(ROOT / "captures" / "rabbitmq091_pyamqp_basic.pcap")
    out = str(tmp_path / "out")
    s = run(spark, [good, str(bad), str(tmp_path / "missing.pcap")], out)
    codes = [(c, code) for c, _m, code in sorted(s.errors)]
    assert codes == [(str(tmp_path / "missing.pcap"), 3), (str(bad), 2)]
    assert s.captures == 1
    caps = set(pq.read_table(os.path.join(out, "methods"), columns=["capture"]).column(0).to_pylist())
    assert caps == {good}


def test_directories_expand_to_their_captures(spark, tmp_path):
    out = str(tmp_path / "out")
    s = run(spark, [str(ROOT / "captures")], out)
    assert s.captures == len(CAPTURES)
    caps = set(pq.read_table(os.path.join(out, "connections"), columns=["capture"]).column(0).to_pylist())
    assert caps == set(CAPTURES)


def test_output_is_atomic_existing_output_is_kept_and_a_failed_job_leaves_nothing(spark, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(OutputExists):
        run(spark, CAPTURES[:1], str(out))
    # fails inside the tasks; Spark hands the Python error back wrapped in its own exception type
    with pytest.raises(Exception, match="TypeError|ValueError"):
        run(spark, CAPTURES[:1], str(out), body_bytes="not a number", force=True)
    assert sorted(os.listdir(tmp_path)) == ["out"] and (out / "keep").exists()
    run(spark, CAPTURES[:1], str(out), force=True)
    assert sorted(os.listdir(out)) == ["anomalies", "connections", "messages", "methods"]
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_gzip_captures_are_a_task_each_and_small_ones_share_one_with_a_progress_line_per_stage(
    spark, tmp_path, capsys
):
    import gzip

    gz = tmp_path / "full.pcap.gz"
    gz.write_bytes(gzip.compress((ROOT / "captures" / "rabbitmq091_pika_full.pcap").read_bytes()))
    small = [
        str(ROOT / "captures" / n) for n in ("rabbitmq091_pika_blocked.pcap", "rabbitmq08_rejected.pcap")
    ]
    out, want = str(tmp_path / "spark"), str(tmp_path / "dissect")
    # the gzip capture is larger than the split size: never split
    s = run(spark, [str(gz)] + small, out, split_size=10_000, progress=True)
    dissect([str(gz)] + small, want)
    assert os.path.getsize(gz) > 10_000
    assert s.tasks == 2 and not s.split and s.captures == 3
    err = capsys.readouterr().err
    mb = sum(os.path.getsize(c) for c in [gz, *small]) / 1e6
    assert f"amqpcap spark: 3 captures, {mb:,.1f} MB\n" in err
    assert "amqpcap spark: dissect: 2/2 tasks done, " in err
    assert_same_dataset(out, want, TABLES[:4])
