"""stats' RPC and transit figures from one pass over a dissect output's messages (batches forced
to a few rows), method round trips and connection setup from a load of just the rows they can
involve: the same summaries as the pairings of the loaded tables, and the loaded way when the
pass does not cover the tables (publishes paired by content, 0-10 commands)."""

import errno
import os
import tempfile

import numpy as np
import pyarrow as pa
import pytest
from tables import Capture
from test_streamed_confirms import dissected, write_output

import amqpcap
from amqpcap.analysis import growing, rpc, stats, streamed_rpc, streamed_transit, transit
from amqpcap.analysis.pairing import NotStreamed
from amqpcap.analysis.summary import STREAMED, latency_summary, stats_source

CAPTURES = sorted(
    n
    for n in os.listdir(os.path.join(os.path.dirname(__file__), "..", "..", "captures"))
    if n.endswith((".pcap", ".pcapng"))
)


def rpc_of_frame(t) -> dict:
    r = rpc(t)
    out = latency_summary(r.loc[r["status"].isin(["ok", "ok-delivery"]), "latency_ms"])
    out["missing"] = int((r["status"] == "missing").sum())
    return out


def transit_of_frame(t) -> dict:
    tr = transit(t)
    out = latency_summary(tr.loc[tr["first"].fillna(False).astype(bool), "latency_ms"] if len(tr) else [])
    out.update(deliveries=len(tr), redeliveries=int(tr["redelivered"].fillna(False).astype(bool).sum()))
    return out


def summary(fn, out) -> dict:
    values, counts = fn(out)
    return {**latency_summary(values), **counts}


@pytest.fixture(autouse=True)
def few_rows_a_batch(monkeypatch):
    monkeypatch.setattr(streamed_rpc, "PASS_ROWS", 7)
    monkeypatch.setattr(streamed_rpc, "BATCH_ROWS", 7)
    monkeypatch.setattr(streamed_transit, "WRITE_ROWS", 7)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return dissected(tmp_path_factory, CAPTURES)


def test_streamed_rpc_equals_the_pairing_of_the_loaded_tables_on_every_shipped_capture(outputs):
    answered = 0
    for out in outputs:
        want = rpc_of_frame(amqpcap.load(out))
        assert summary(streamed_rpc.streamed_rpc, out) == want, out
        answered += want["count"]
    assert answered  # (some capture has answered requests)


def test_streamed_transit_equals_the_pairing_of_the_loaded_tables_where_it_streams(outputs):
    streamed = 0
    for out in outputs:
        want = transit_of_frame(amqpcap.load(out))
        try:
            got = summary(streamed_transit.streamed_transit, out)
        except NotStreamed:
            continue
        assert got == want, out
        streamed += want["deliveries"] > 0
    assert streamed


def rpc_capture() -> Capture:
    """Requests answered by the responder's publish, by a delivery only (direct reply-to), on a
    second capture, never; a reply before its request; an id reused after its request was answered."""
    c = Capture()
    req = dict(routing_key="rpc_queue", reply_to="amq.gen-reply")
    rep = dict(routing_key="amq.gen-reply")
    c.method(0, "c2s", "basic.publish", body=b"q1", correlation_id="1", **req)
    c.method(1, "s2c", "basic.deliver", stream=1, body=b"q1", correlation_id="1", **req)
    c.method(4, "c2s", "basic.publish", stream=1, body=b"r1", correlation_id="1", **rep)
    c.method(5, "s2c", "basic.deliver", body=b"r1", correlation_id="1", **rep)
    c.method(6, "s2c", "basic.deliver", body=b"early", correlation_id="4", **rep)  # before its request
    c.method(7, "c2s", "basic.publish", body=b"q4", correlation_id="4", **req)
    c.method(10, "c2s", "basic.publish", body=b"q2", correlation_id="2",
             routing_key="rpc_queue", reply_to="amq.rabbitmq.reply-to")  # fmt: skip
    c.method(13, "s2c", "basic.deliver", body=b"r2", correlation_id="2",
             routing_key="amq.rabbitmq.reply-to.g1")  # fmt: skip
    c.method(20, "c2s", "basic.publish", body=b"q3", correlation_id="3", **req)  # never answered
    c.method(30, "c2s", "basic.publish", body=b"q1b", correlation_id="1", **req)  # id reused
    c.method(32.5, "c2s", "basic.publish", stream=1, body=b"r1b", correlation_id="1", **rep)
    return c


def transit_capture(with_id: bool = True) -> Capture:
    """Publishes delivered once, twice (a redelivery), never; a delivery before any publish of its
    id; ids reused (a delivery goes to the latest publish before it)."""
    c = Capture()
    pub = dict(exchange="x", routing_key="k")
    c.method(0, "s2c", "basic.deliver", stream=1, body=b"m0", message_id="a", **pub)  # nothing before
    c.method(1, "c2s", "basic.publish", body=b"m1", message_id="a", **pub)
    c.method(2, "c2s", "basic.publish", body=b"m2", message_id="b", **pub)
    c.method(3, "c2s", "basic.publish", body=b"m3", message_id="c" if with_id else None, **pub)
    c.method(4.5, "s2c", "basic.deliver", stream=1, body=b"m2", message_id="b", **pub)
    c.method(5, "s2c", "basic.deliver", stream=1, body=b"m1", message_id="a", **pub)
    c.method(9, "s2c", "basic.deliver", stream=2, body=b"m1", message_id="a", redelivered=True, **pub)
    c.method(10, "c2s", "basic.publish", body=b"m4", message_id="a", **pub)
    c.method(12.25, "s2c", "basic.deliver", stream=1, body=b"m4", message_id="a", **pub)
    c.method(13, "s2c", "basic.deliver", stream=1, body=b"m3", message_id="c" if with_id else None, **pub)
    return c


def test_streamed_transit_follows_the_pairing_rules(tmp_path):
    c = transit_capture()
    want = transit_of_frame(c.tables())
    assert want["deliveries"] == 5 and want["redeliveries"] == 1 and want["count"] == 4
    assert summary(streamed_transit.streamed_transit, write_output(c, tmp_path)) == want


def test_publishes_without_an_id_are_not_streamed_and_stats_pairs_the_loaded_tables(tmp_path):
    c = transit_capture(with_id=False)
    out = write_output(c, tmp_path)
    with pytest.raises(NotStreamed):
        streamed_transit.streamed_transit(out)
    want = transit_of_frame(c.tables())
    assert want["count"] == 4  # (the publish without an id paired by its content)
    assert stats(out)["latency"]["transit"] == want


def test_method_rtt_and_connection_setup_of_the_rows_they_involve_equal_the_loaded_pairing(outputs):
    streamed = 0
    for out in outputs:
        whole = stats(amqpcap.load(out))["latency"]
        for kind in ("method_rtt", "connection_setup"):
            try:
                values, counts, _ = STREAMED[kind](stats_source(out))
            except NotStreamed:
                versions = amqpcap.load(out).methods["version"].astype(str).tolist()
                assert kind == "method_rtt" and "0-10" in versions
                continue
            got = {**latency_summary(values), **counts}
            assert got == whole[kind], (out, kind)
            streamed += got["count"] > 0
    assert streamed


def late_reply_capture() -> Capture:
    """Many requests never answered, then replies to an early request and to a delivered request
    whose publish was not captured, many batches after them."""
    c = Capture()
    req = dict(routing_key="rpc_queue", reply_to="amq.gen-reply")
    rep = dict(routing_key="amq.gen-reply")
    c.method(0, "c2s", "basic.publish", body=b"q", correlation_id="early", **req)
    c.method(0.5, "s2c", "basic.deliver", stream=1, body=b"q", correlation_id="seen-delivered", **req)
    for i in range(60):
        c.method(1 + i, "c2s", "basic.publish", body=b"q", correlation_id=f"n{i}", **req)
    c.method(70, "c2s", "basic.publish", stream=1, body=b"r", correlation_id="early", **rep)
    c.method(71, "c2s", "basic.publish", stream=1, body=b"r", correlation_id="seen-delivered", **rep)
    c.method(72, "s2c", "basic.deliver", body=b"r", correlation_id="n7", **rep)
    return c


@pytest.mark.parametrize(
    "capture, answered, missing",
    [(rpc_capture, 3, 2), (late_reply_capture, 3, 59)],
    ids=["rules", "replies-many-batches-after-their-requests"],
)
def test_streamed_rpc_follows_the_pairing_rules(tmp_path, capture, answered, missing):
    c = capture()
    want = rpc_of_frame(c.tables())
    assert want["count"] == answered and want["missing"] == missing
    assert summary(streamed_rpc.streamed_rpc, write_output(c, tmp_path)) == want


@pytest.mark.parametrize("capture", [rpc_capture, late_reply_capture])
def test_streamed_rpc_with_colliding_id_hashes_still_pairs_exactly(tmp_path, monkeypatch, capture):
    monkeypatch.setattr(growing, "HASH_MASK", np.uint64(1))  # two hash values: most ids collide
    c = capture()
    assert summary(streamed_rpc.streamed_rpc, write_output(c, tmp_path)) == rpc_of_frame(c.tables())


def test_streamed_transit_over_many_partitions_with_colliding_hashes_equals_the_loaded_pairing(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(streamed_transit, "PART_ROWS", 2)  # a partition file per two message rows
    monkeypatch.setattr(growing, "HASH_MASK", np.uint64(3))  # ids share the files they hash to
    c = transit_capture()
    for i in range(30):  # more ids than hash values
        c.method(
            20 + i, "c2s", "basic.publish", body=b"p", message_id=f"id{i}", exchange="x", routing_key="k"
        )
        c.method(20.5 + i, "s2c", "basic.deliver", stream=1, body=b"p", message_id=f"id{i}", exchange="x",
                 routing_key="k", redelivered=i % 3 == 0)  # fmt: skip
    want = transit_of_frame(c.tables())
    assert want["deliveries"] == 35 and want["redeliveries"] == 11
    assert summary(streamed_transit.streamed_transit, write_output(c, tmp_path)) == want


def test_growing_columns_and_strings_keep_every_value_across_many_appends():
    cols, strs = growing.Columns({"a": np.int64, "b": bool}, capacity=1), growing.Strings()
    want_a, want_s = [], []
    for i in range(300):
        a = np.arange(i % 7) + 10 * i
        cols.append({"a": a, "b": a % 2 == 0})
        words = [f"w{i}-{j}" * (j + 1) for j in range(i % 5)]
        strs.append(pa.array(words, pa.string()).slice(0))
        want_a.extend(a.tolist())
        want_s.extend(words)
    assert cols["a"].tolist() == want_a and cols["b"].tolist() == [x % 2 == 0 for x in want_a]
    assert len(cols) == len(want_a) and strs.array().to_pylist() == want_s


def test_chunks_keep_every_value_in_order_across_appends_larger_and_smaller_than_a_chunk():
    chunks, want = growing.Chunks(np.float64, chunk=8), []
    for i in range(60):
        values = np.arange(i % 19, dtype=np.float64) + 100 * i  # 0 .. 18 values: within and across chunks
        chunks.append(values)
        want.extend(values.tolist())
    assert len(chunks) == len(want)
    assert all(len(c) == 8 for c in chunks.full)  # (full chunks never grown)
    assert chunks.take().tolist() == want
    assert len(chunks) == 0 and chunks.take().tolist() == []


def test_latency_summary_of_an_array_it_may_reorder_equals_that_of_a_copy_and_leaves_others_alone():
    values = np.random.default_rng(5).exponential(3.0, 10_001)
    want = latency_summary(values.tolist())
    kept = values.copy()
    assert latency_summary(values) == want and np.array_equal(values, kept)  # not reordered
    assert latency_summary(values, consume=True) == want  # (reordered in place: the same figures)
    assert not np.array_equal(values, kept) and np.array_equal(np.sort(values), np.sort(kept))
    assert want["count"] == 10_001 and want["max_ms"] == round(float(kept.max()), 3)
    with_gaps = np.r_[kept, np.nan, np.inf, -np.inf]
    assert latency_summary(with_gaps, consume=True) == want and np.isnan(with_gaps[-3])


@pytest.mark.parametrize("odd", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("at", [0, 57, -1])
def test_latency_summary_leaves_out_a_single_non_finite_value_wherever_it_is(odd, at):
    values = np.random.default_rng(7).exponential(3.0, 101)
    want = latency_summary(values.tolist())
    with_odd = np.insert(values, at if at >= 0 else len(values), odd)
    assert latency_summary(with_odd.copy(), consume=True) == want
    assert latency_summary(with_odd) == want


def test_hash_set_answers_membership_of_the_values_added_over_batches():
    s = growing.HashSet()
    for start in range(0, 1000, 100):
        s.add(np.arange(start, start + 50, dtype=np.uint64) * np.uint64(2654435761))
    probe = np.arange(0, 1000, dtype=np.uint64) * np.uint64(2654435761)
    assert s.contains(probe).tolist() == [(i % 100) < 50 for i in range(1000)]
    assert len(s) == 500


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    """The folder ``tempfile`` puts temporary files in, for one test."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_the_transit_pass_leaves_no_temporary_files_after_success_or_not_streaming(tmp_path, temp_root):
    assert summary(streamed_transit.streamed_transit, write_output(transit_capture(), tmp_path / "a"))
    assert os.listdir(temp_root) == []
    with pytest.raises(NotStreamed):
        streamed_transit.streamed_transit(write_output(transit_capture(with_id=False), tmp_path / "b"))
    assert os.listdir(temp_root) == []


def test_a_full_temporary_folder_is_an_error_naming_it(tmp_path, temp_root, monkeypatch):
    out = write_output(transit_capture(), tmp_path / "out")

    def full(rows, writers):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(streamed_transit, "_write", full)
    with pytest.raises(OSError) as e:
        streamed_transit.streamed_transit(out)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(temp_root)
    assert os.listdir(temp_root) == []
    # (an OSError naming a file: the command line's one line and exit 3)
    assert "No space left on device (temporary files of the transit pass)" in str(e.value)


class _Writer:
    """A partition file's writer that notes its close; the first one's close fails."""

    closed: list = []

    def __init__(self, path, schema):
        self.real = pa.ipc.RecordBatchStreamWriter(path, schema)

    def write_table(self, t):
        self.real.write_table(t)

    def close(self):
        self.real.close()
        _Writer.closed.append(self)
        if len(_Writer.closed) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")


def test_partition_writers_are_all_closed_when_opening_or_closing_one_fails(tmp_path, temp_root, monkeypatch):
    out = write_output(transit_capture(), tmp_path / "out")
    monkeypatch.setattr(streamed_transit, "PART_ROWS", 2)  # ten message rows: five files
    monkeypatch.setattr(_Writer, "closed", [])
    monkeypatch.setattr(pa.ipc, "new_stream", _Writer)
    with pytest.raises(OSError, match="No space left"):  # the first close fails
        streamed_transit.streamed_transit(out)
    assert len(_Writer.closed) == 5
    made: list = []

    def two_then_no_more_files(path, schema):
        if len(made) == 2:
            raise OSError(errno.EMFILE, "Too many open files")
        made.append(_Writer(path, schema))
        return made[-1]

    _Writer.closed.clear()
    monkeypatch.setattr(pa.ipc, "new_stream", two_then_no_more_files)
    with pytest.raises(OSError):  # (the first close fails too)
        streamed_transit.streamed_transit(out)
    assert len(made) == 2 and sorted(map(id, _Writer.closed)) == sorted(map(id, made))
    assert os.listdir(temp_root) == []


def test_partitions_are_capped_and_pair_alike(tmp_path, monkeypatch):
    monkeypatch.setattr(streamed_transit, "PART_ROWS", 1)
    monkeypatch.setattr(streamed_transit, "MAX_PARTS", 3)
    files = []
    real = streamed_transit._partition
    monkeypatch.setattr(streamed_transit, "_partition", lambda *a: files.append(a[2]) or real(*a))
    c = transit_capture()
    assert summary(streamed_transit.streamed_transit, write_output(c, tmp_path)) == transit_of_frame(
        c.tables()
    )
    assert files == [3]
