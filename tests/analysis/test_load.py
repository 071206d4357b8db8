"""amqpcap.load: typed tables from a dissect output directory, and the capture cache."""

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tables import Capture, at

import amqpcap
from amqpcap.analysis.tables import CATEGORICAL_COLUMNS, Tables, cache_key, empty_frame, load, load_section
from amqpcap.records.schema import SCHEMAS

CAPTURES = os.path.join(os.path.dirname(__file__), "..", "..", "captures")


def _write(out, t, names=("connections", "methods", "messages", "anomalies")):
    for name in names:
        df = getattr(t, name)
        os.makedirs(out / name, exist_ok=True)
        table = pa.Table.from_pandas(df, schema=SCHEMAS[name], preserve_index=False)
        pq.write_table(table, out / name / "part-0.parquet")


def test_load_directory_types_and_missing_frames(tmp_path):
    c = Capture()
    c.connection(heartbeat=5, syn_ts=at(-1))
    c.method(0, "c2s", "basic.qos", channel=1, prefetch_count=3)
    c.method(1, "c2s", "basic.publish", channel=1, exchange="x", routing_key="k", body=b"hi")
    _write(tmp_path, c.tables())
    t = amqpcap.load(tmp_path)
    assert isinstance(t, Tables) and not t.has_frames
    assert (len(t.connections), len(t.methods), len(t.messages), len(t.anomalies), len(t.frames)) == (
        1,
        2,
        1,
        0,
        0,
    )
    assert list(t.frames.columns) == [f.name for f in SCHEMAS["frames"]]
    assert str(t.methods["ts"].dtype) == "datetime64[ns, UTC]"
    assert str(t.connections["syn_ts"].dtype) == "datetime64[ns, UTC]"
    assert str(t.methods["prefetch_count"].dtype) == "Int32"
    assert str(t.methods["delivery_tag"].dtype) == "Int64" and t.methods["delivery_tag"].isna().all()
    assert str(t.methods["multiple"].dtype) == "boolean"
    assert t.methods["prefetch_count"].tolist()[0] == 3
    assert t.messages["body"].tolist() == [b"hi"]
    assert t.methods["ts"].tolist()[0] == pd.Timestamp("2024-05-01T12:00:00", tz="UTC")


def test_load_reads_several_files_and_missing_columns(tmp_path):
    c = Capture()
    c.method(0, "c2s", "basic.qos", channel=1, prefetch_count=3)
    _write(tmp_path, c.tables())
    # a second part written by an older writer without some columns
    pq.write_table(
        pa.table({"capture": ["b.pcap"], "tcp_stream": pa.array([4], pa.int32()), "method": ["basic.ack"]}),
        tmp_path / "methods" / "part-1.parquet",
    )
    t = load(tmp_path)
    assert sorted(t.methods["method"]) == ["basic.ack", "basic.qos"]
    assert t.methods["tcp_stream"].tolist() == [0, 4]


def test_not_a_dissect_output(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path)
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.pcap")


def test_empty_frame_columns():
    df = empty_frame("connections")
    assert list(df.columns) == SCHEMAS["connections"].names and len(df) == 0


def test_each_empty_frame_is_a_frame_of_its_own():
    cols = ["capture", "method", "ts"]
    first = empty_frame("methods", cols, CATEGORICAL_COLUMNS, True)
    first["extra"] = pd.Series([], dtype="int64")
    first.attrs["x"] = 1
    again = empty_frame("methods", cols, CATEGORICAL_COLUMNS, True)
    assert list(again.columns) == cols and again.attrs == {} and again is not first
    assert again.dtypes.equals(first.dtypes[cols])
    assert isinstance(again["capture"].dtype, pd.CategoricalDtype)  # (typed as the load types it)


def test_capture_is_dissected_once_into_the_cache(tmp_path, monkeypatch):
    cap = tmp_path / "x.pcap"
    cap.write_bytes(b"not really a capture")
    calls = []

    def fake_dissect(captures, out, *, force=False, **opts):
        calls.append((captures, opts, force))
        c = Capture(capture=captures[0])
        c.method(0, "c2s", "basic.qos", channel=1)
        _write(__import__("pathlib").Path(out), c.tables())

    import amqpcap.pipeline

    monkeypatch.setattr(amqpcap.pipeline, "dissect", fake_dissect)
    t1 = load(cap, cache_dir=tmp_path / "cache", body_bytes=16)
    t2 = load(cap, cache_dir=tmp_path / "cache", body_bytes=16)
    assert len(calls) == 1 and calls[0][0] == [str(cap)] and calls[0][1] == {"body_bytes": 16} and calls[0][2]
    assert t1.methods["capture"].tolist() == [str(cap)] == t2.methods["capture"].tolist()
    assert t1.source == str(tmp_path / "cache" / cache_key(cap, body_bytes=16))
    load(cap, cache_dir=tmp_path / "cache", body_bytes=32)  # other options: another entry
    assert len(calls) == 2
    cap.write_bytes(b"changed content")
    load(cap, cache_dir=tmp_path / "cache", body_bytes=16)  # other content: another entry
    assert len(calls) == 3
    assert len([p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]) == 3


def test_a_section_load_keeps_the_rows_of_its_methods_and_versions_across_files_and_row_groups(tmp_path):
    c = Capture()
    names = ["basic.publish", "basic.ack", "channel.close", "basic.qos", "channel.open"]
    for i in range(60):
        c.method(i, "c2s", names[i % 5], channel=1 + i % 3, delivery_tag=i, reply_code=i)
    t = c.tables()
    _write(tmp_path, t, ("connections", "messages", "anomalies"))
    methods = t.methods.assign(version=["0-9-1", "0-8"] * 30)
    os.makedirs(tmp_path / "methods")
    for k, start in enumerate(range(0, 60, 25)):  # three files of row groups of 4 rows: many batches
        part = pa.Table.from_pandas(
            methods.iloc[start : start + 25], schema=SCHEMAS["methods"], preserve_index=False
        )
        pq.write_table(part, tmp_path / "methods" / f"part-{k}.parquet", row_group_size=4)
    cols = ["capture", "tcp_stream", "frame_number", "ts", "method", "delivery_tag", "reply_code", "version"]
    wanted = ("basic.ack", "channel.close")
    got = load_section(tmp_path, {"methods": cols}, {"methods": wanted}, {"methods": ("0-9-1",)}).methods
    full = amqpcap.load(tmp_path).methods
    want = full[full["method"].isin(wanted) & (full["version"] == "0-9-1")]
    assert (
        got["delivery_tag"].tolist()
        == want["delivery_tag"].tolist()
        == [i for i in range(0, 60, 2) if i % 5 in (1, 2)]
    )
    assert (
        got["ts"].tolist() == want["ts"].tolist()
        and got["reply_code"].tolist() == want["reply_code"].tolist()
    )
    assert len(load_section(tmp_path, {"methods": cols}, {"methods": ("basic.get",)}).methods) == 0


def _damaged_dissect(tmp_path, table: str, how: str):
    """A dissect output of a shipped capture with ``table``'s file cut (``footer``) or with its
    pages overwritten and its footer whole (``pages``); the damaged file."""
    from amqpcap.pipeline import dissect

    out = tmp_path / "out"
    dissect([os.path.join(CAPTURES, "rabbitmq091_pika_full.pcap")], str(out))
    (part,) = (out / table).glob("*.parquet")
    data = part.read_bytes()
    if how == "footer":
        data = data[:-40]
    else:
        end = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
        data = data[:4] + b"\xff" * (end - 4) + data[end:]
    part.write_bytes(data)
    return out, part


@pytest.mark.parametrize("how", ["footer", "pages"])
@pytest.mark.parametrize("table", ["methods", "messages"])
def test_a_damaged_table_file_raises_unreadable_table_naming_it_from_load_stats_and_a_count(
    tmp_path, how, table
):
    import pickle

    from amqpcap.analysis import stats
    from amqpcap.analysis.tables import UnreadableTable, count_rows

    out, part = _damaged_dissect(tmp_path, table, how)
    for read in (lambda: load(out), lambda: load(out, columns="compact"), lambda: stats(out)):
        with pytest.raises(UnreadableTable) as e:  # (stats: raised in a forked part too)
            read()
        assert e.value.path == str(part) and e.value.reason
        assert str(e.value).startswith(f"{part}: a table cannot be read (")
    if how == "footer":
        with pytest.raises(UnreadableTable):
            count_rows(out, table)
    else:  # the footer is whole: the count reads nothing else
        assert count_rows(out, table) > 0
    again = pickle.loads(pickle.dumps(UnreadableTable(str(part), "why")))
    assert (again.path, again.reason) == (str(part), "why")


def test_an_arrow_error_of_what_is_computed_on_a_read_is_not_an_unreadable_table():
    from amqpcap.analysis.tables import UnreadableTable, read_through

    def rows():
        yield 1
        yield 2

    got = []
    with pytest.raises(pa.ArrowInvalid):  # the caller's error, outside the read seam
        for x in read_through("t.parquet", rows()):
            got.append(x)
            raise pa.ArrowInvalid("computed")
    assert got == [1]

    def broken():
        yield 1
        raise OSError("ZSTD decompression failed")

    with pytest.raises(UnreadableTable, match=r"^t\.parquet: a table cannot be read \(ZSTD"):
        list(read_through("t.parquet", broken()))
