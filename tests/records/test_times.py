"""Time columns are stored as microsecond timestamps plus the ns past them, and read back exact."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixtures.compiled import built_or_skip
from hypothesis import example, given, settings
from hypothesis import strategies as st

import amqpcap
from amqpcap.capture.reader import open_capture
from amqpcap.pipeline import dissect
from amqpcap.records import schema, times
from amqpcap.records.schema import NANOS, SCHEMAS, STORED_SCHEMAS, TS

ROOT = Path(__file__).resolve().parents[2]
INT64 = st.integers(-(2**63), 2**63 - 1)
#: the same examples every run, and no time limit an example could exceed on a loaded machine
#: (hypothesis's default of 200 ms fails a run whose process was descheduled for a moment)
REPEATABLE = settings(deadline=None, derandomize=True)


def time_columns(table: str) -> list[str]:
    return [n for n, t, _ in schema.TABLES[table] if t is TS]


@REPEATABLE
@given(values=st.lists(INT64, max_size=50), cut=st.integers(0, 10))
def test_the_compiled_split_equals_the_python_one_floored_for_times_before_1970(values, cut):
    fastwriter = built_or_skip("fastwriter")
    data = pa.array(values, pa.int64()).buffers()[1] if values else pa.py_buffer(b"")
    count = max(0, len(values) - cut)
    us, rest = times.split_ns(data, count)
    c_us, c_rest = fastwriter.split_ns(data, count)
    assert bytes(us) == bytes(c_us) and bytes(rest) == bytes(c_rest)
    assert list(us) == [v // 1000 for v in values[:count]]
    assert all(0 <= r < 1000 for r in rest)
    assert [u * 1000 + r for u, r in zip(us, rest)] == values[:count]


def test_a_split_of_more_values_than_the_buffer_holds_is_refused():
    data = pa.array([1, 2], pa.int64()).buffers()[1]
    with pytest.raises(ValueError):
        times.split_ns(data, 3)
    fastwriter = built_or_skip("fastwriter")
    with pytest.raises(ValueError):
        fastwriter.split_ns(data, 3)


# the times a packet can have (what the int64 ns columns hold), and nulls
NS_TIMES = st.lists(st.one_of(st.none(), INT64), max_size=40)


@REPEATABLE
@given(values=NS_TIMES, start=st.integers(0, 5))
@example(values=[-(2**63), -1, None, 0, 999, 1000, 2**63 - 1], start=0)  # int64's ends, floors
@example(values=[None, -1001, None, 1_700_000_000_123_456_789], start=1)  # sliced past a null
def test_a_batch_stored_and_read_back_keeps_every_ns_and_null(values, start):
    table = "methods"
    rows = pa.array(values, type=pa.timestamp("ns", tz="UTC")).slice(min(start, len(values)))
    n = len(rows)
    logical = SCHEMAS[table]
    cols = [rows if f.name == "ts" else pa.nulls(n, f.type) for f in logical]
    batch = pa.RecordBatch.from_arrays(cols, schema=logical)
    stored = times.to_stored(batch, times.stored_schema(logical))
    assert stored.schema.equals(STORED_SCHEMAS[table], check_metadata=True)
    us, nanos = stored.column("ts"), stored.column("ts" + NANOS)
    assert us.type == pa.timestamp("us", tz="UTC") and nanos.type == pa.int16()
    assert us.is_null().to_pylist() == nanos.is_null().to_pylist() == rows.is_null().to_pylist()
    back = times.to_exact(pa.Table.from_batches([stored]))
    assert back.schema.equals(logical, check_metadata=True)
    assert back.column("ts").to_pylist() == rows.to_pylist()


def test_the_stored_schema_is_the_declared_one_each_time_column_followed_by_its_companion():
    for table, cols in schema.TABLES.items():
        assert times.stored_schema(SCHEMAS[table]).equals(STORED_SCHEMAS[table], check_metadata=True)
        names = STORED_SCHEMAS[table].names
        for c in time_columns(table):
            assert STORED_SCHEMAS[table].field(c).type == pa.timestamp("us", tz="UTC")
            assert names[names.index(c) + 1] == c + NANOS
        assert [n for n in names if not n.endswith(NANOS)] == [n for n, _, _ in cols]


def nano_copy(src: str, dst: Path) -> tuple[str, dict]:
    """A nanosecond pcap of capture ``src``, each packet's time moved by a few hundred ns (so
    the ns past the microsecond are not all 0); and the packets' times by frame number."""
    from fixtures import pcapgen

    pkts = [(ts + (n * 337) % 1000, lt, data, wl) for n, ts, lt, data, wl in open_capture(src)]
    dst.write_bytes(pcapgen.pcap_bytes(pkts, nano=True))
    return str(dst), {i + 1: p[0] for i, p in enumerate(pkts)}


@pytest.fixture(scope="module")
def nano_output(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nano")
    names = ["rabbitmq091_pika_full.pcap", "rabbitmq10_proton_outcomes.pcap"]
    caps, truth = [], {}
    for name in names:
        path, stamps = nano_copy(str(ROOT / "captures" / name), tmp / name)
        caps.append(path)
        truth.update({(path, n): ts for n, ts in stamps.items()})
    out = tmp / "out"
    dissect(caps, str(out), frames=True)
    return str(out), truth


def test_every_row_loads_with_the_exact_ns_of_its_packet(nano_output):
    out, truth = nano_output
    t = amqpcap.load(out)
    sub_us = 0
    for table in ("methods", "messages", "frames", "connections"):
        df = getattr(t, table)
        rows = df[df["frame_number"].notna()]
        assert len(rows), table
        for cap, frame, ts in zip(rows["capture"], rows["frame_number"], rows["ts"]):
            assert ts.value == truth[(cap, int(frame))], (table, frame)
            sub_us += ts.value % 1000 != 0
    assert sub_us > 100  # the ns past the microsecond were there to lose
    settled = t.messages[t.messages["settle_ts"].notna()]
    assert len(settled) and any(ts.value % 1000 for ts in settled["settle_ts"])


def test_the_files_hold_microsecond_timestamps_and_the_ns_past_them(nano_output):
    out, _ = nano_output
    t = amqpcap.load(out)
    for table in ("connections", "methods", "messages", "anomalies", "frames"):
        raw = pq.read_table(os.path.join(out, table))
        assert raw.schema.equals(STORED_SCHEMAS[table], check_metadata=True), table
        df = getattr(t, table)
        for c in time_columns(table):
            us, nanos = raw.column(c).cast(pa.int64()).to_pylist(), raw.column(c + NANOS).to_pylist()
            want = [None if pd.isna(v) else v.value for v in df[c]]
            assert [None if u is None else u * 1000 + k for u, k in zip(us, nanos)] == want, (table, c)


def test_a_dataset_written_with_ns_time_columns_still_loads(tmp_path, nano_output):
    """Outputs of earlier versions (``timestamp[ns, UTC]`` in Parquet) load the same."""
    out, _ = nano_output
    old = tmp_path / "old"
    for table in sorted(os.listdir(out)):
        (old / table).mkdir(parents=True)
        exact = times.to_exact(pq.read_table(os.path.join(out, table)))
        pq.write_table(exact, old / table / "part-00000.parquet")
        assert pq.read_table(old / table).schema.field("ts").type == pa.timestamp("ns", tz="UTC")
    a, b = amqpcap.load(out), amqpcap.load(str(old))
    for table in ("connections", "methods", "messages", "anomalies", "frames"):
        assert getattr(a, table).equals(getattr(b, table)), table
