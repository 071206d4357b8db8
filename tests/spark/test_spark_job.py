"""`amqpcap spark` writes the same dataset as `amqpcap dissect`: same layout, schema and rows."""

from __future__ import annotations

import glob
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from fixtures import pcapgen
from fixtures.compiled import on_the_other_side

import amqpcap
from amqpcap.capture.reader import open_capture
from amqpcap.pipeline import dissect
from amqpcap.records.schema import STORED_SCHEMAS
from amqpcap.records.writer import OutputExists
from amqpcap.spark import ranges, run, storage
from amqpcap.spark.starting import Starting

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
        assert g.schema.equals(STORED_SCHEMAS[table], check_metadata=True), table
        assert g.num_rows == w.num_rows, table
        assert g.equals(w), f"{table}: rows differ"
        for f in os.listdir(os.path.join(got, table)):
            assert f.startswith("part-") and f.endswith(".parquet"), f


def _conversations(path) -> int:
    """TCP conversations (unordered address/port pairs) in a capture, by amqpcap's parser."""
    from amqpcap.capture import link

    pairs = set()
    for _n, _ts, lt, data, _wl in open_capture(path):
        r = link.parse_packet(lt, data)
        if type(r) is link.Packet:
            pairs.add(frozenset([(r.src, r.sport), (r.dst, r.dport)]))
    return len(pairs)


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
    assert (
        len(t.connections)
        == s.rows["connections"]
        == pq.read_table(os.path.join(dissected, "connections")).num_rows
    )


def test_a_tiny_split_size_splits_by_conversation_and_packs_the_rest_into_tasks(spark, dissected, tmp_path):
    out = str(tmp_path / "out")
    s = run(spark, CAPTURES, out, frames=True, split_size=20_000)
    # every shipped capture above 20 kB is indexed by byte range; those with two or more
    # conversations are dissected by two tasks or more
    big = {c for c in CAPTURES if os.path.getsize(c) > 20_000}
    assert set(s.split) == big
    assert {c for c, n in s.split.items() if n > 1} == {c for c in big if _conversations(c) > 1}
    # the buckets, and the small captures (a few kB in all) packed into one task
    small = [c for c in CAPTURES if c not in big]
    assert s.tasks == sum(s.split.values()) + (1 if small else 0)
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
    """The merged packets as classic pcap, as pcapng whose interfaces use other timestamp
    resolutions and an offset, and as pcapng with a second (big-endian) section."""
    d = tmp_path_factory.mktemp("merged")
    pkts = _merged_packets()
    pcap = d / "merged.pcap"
    pcap.write_bytes(pcapgen.pcap_bytes(pkts))
    half = len(pkts) // 2
    paths = [str(pcap)]
    for sections in (1, 2):
        w = pcapgen.PcapNg("<")
        a, b = w.interface(1, tsresol=9), w.interface(1, tsresol=6, tsoffset=1_600_000_000)
        for i, (ts, _lt, data, wl) in enumerate(pkts[:half]):
            w.epb(a if i % 3 else b, ts, data, wl)
        if sections == 2:
            w.section(">")
            a = w.interface(1, tsresol=6, tsoffset=1_600_000_000)
        w.block(4, b"\x00" * 4)  # a name resolution block: no packet, no anomaly
        for ts, _lt, data, wl in pkts[half:]:
            w.epb(a, ts, data, wl)
        path = d / f"merged{sections}.pcapng"
        path.write_bytes(w.getvalue())
        paths.append(str(path))
    return paths


def _index(path, parts, scratch):
    """Index ``path`` in ``parts`` byte ranges as the tasks do: summaries and index Locations."""
    size = os.path.getsize(path)
    edges = [size * k // parts for k in range(parts + 1)]
    sums, locs = [], []
    for k in range(parts):
        with ranges.open_capture_bytes(storage.locate(path)) as f:
            s, blob = ranges.index_range(f, 0, k, edges[k], edges[k + 1], size)
        loc = storage.locate(str(scratch / f"r{k}.idx"))
        storage.write_bytes(loc, blob)
        sums.append(s)
        locs.append(loc)
    return sums, locs


def test_byte_ranges_indexed_apart_yield_exactly_the_packets_the_reader_yields(merged, tmp_path):
    for i, path in enumerate(merged[:2] + CAPTURES):
        scratch = tmp_path / str(i)
        sums, locs = _index(path, 4, scratch)
        assert ranges.check(sums, os.path.getsize(path)) is None, path
        buckets, bases, _firsts, _ranks = ranges.plan_buckets(sums, 1)
        src = ranges.BucketSource(storage.locate(path), list(zip(locs, bases.tolist())), buckets[0])
        got = [r for b in src.batches() for r in b]
        assert got == list(open_capture(path)), path


def test_slots_go_to_buckets_balanced_by_bytes_each_conversation_in_one(merged, tmp_path):
    sums, locs = _index(merged[0], 3, tmp_path)
    buckets, bases, firsts, ranks = ranges.plan_buckets(sums, 4)
    assert len(buckets) == 4 and len(firsts) >= 12
    assert sorted(s for b in buckets for s in b.tolist()) == sorted(
        set(s for b in buckets for s in b.tolist())
    )
    load = np.sum([s.slot_bytes for s in sums], axis=0)
    per = sorted(int(load[b].sum()) for b in buckets)
    assert per[0] > 0 and per[-1] <= 2 * per[0] + int(load.max())
    # every packet read once, by the bucket of its slot, in file order within it
    seen = []
    for b in buckets:
        src = ranges.BucketSource(storage.locate(merged[0]), list(zip(locs, bases.tolist())), b)
        numbers = [r[0] for batch in src.batches() for r in batch]
        assert numbers == sorted(numbers)
        seen += numbers
    assert sorted(seen) == [r[0] for r in open_capture(merged[0])]


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_one_capture_split_into_buckets_gives_the_single_process_rows(spark, merged, tmp_path, fmt):
    path = merged[0] if fmt == "pcap" else merged[1]
    want = str(tmp_path / "dissect")
    d = dissect([path], want, frames=True)
    out = str(tmp_path / "spark")
    s = run(spark, [path], out, frames=True, split_size=os.path.getsize(path) // 5 + 1)
    # five byte ranges indexed; buckets: no more than two per core (local[2])
    assert s.split == {path: 4} and s.tasks == 4
    assert s.tcp_streams == d.tcp_streams >= 12 and s.packets == d.packets
    assert_same_dataset(out, want)
    streams = pq.read_table(os.path.join(out, "connections"), columns=["tcp_stream"]).column(0).to_pylist()
    assert sorted(streams) == sorted(set(streams)) and max(streams) < d.tcp_streams


def test_a_pcapng_with_a_second_section_is_dissected_whole_with_the_same_rows(spark, merged, tmp_path):
    path = merged[2]
    want, out = str(tmp_path / "dissect"), str(tmp_path / "spark")
    dissect([path], want, frames=True)
    s = run(spark, [path], out, frames=True, split_size=os.path.getsize(path) // 4 + 1)
    assert not s.split and s.tasks == 1
    assert_same_dataset(out, want)


def test_a_reused_client_port_is_renumbered_to_the_single_process_tcp_stream(spark, tmp_path):
    """Two conversations on the same address/port pair (the second opened after the first
    closed): one key in the index, two tcp_streams in dissect's numbering."""
    blob = (ROOT / "captures" / "rabbitmq091_pika_refused.pcap").read_bytes()
    pkts = [
        (ts, lt, data, wl)
        for _n, ts, lt, data, wl in open_capture(str(ROOT / "captures" / "rabbitmq091_pika_refused.pcap"))
    ]
    assert blob
    shift = pkts[-1][0] - pkts[0][0] + 10**9
    twice = pkts + [(ts + shift, lt, data, wl) for ts, lt, data, wl in pkts]
    other = [
        (ts, lt, data, wl)
        for _n, ts, lt, data, wl in open_capture(str(ROOT / "captures" / "rabbitmq09_netamqp.pcap"))
    ]
    allp = sorted(
        twice + [(ts - other[0][0] + pkts[0][0], lt, d, wl) for ts, lt, d, wl in other], key=lambda p: p[0]
    )
    path = tmp_path / "reused.pcap"
    path.write_bytes(pcapgen.pcap_bytes(allp))
    want, out = str(tmp_path / "dissect"), str(tmp_path / "spark")
    d = dissect([str(path)], want, frames=True)
    s = run(spark, [str(path)], out, frames=True, split_size=os.path.getsize(path) // 3 + 1)
    assert s.split and s.tcp_streams == d.tcp_streams
    assert_same_dataset(out, want)


def test_an_unsplittable_capture_is_dissected_whole(spark, tmp_path):
    blob = (ROOT / "captures" / "rabbitmq091_pika_throughput.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(blob[:-100])  # ends inside a record: a truncated-file anomaly row
    size = cut.stat().st_size
    with storage.open_input(storage.locate(str(cut))) as f, pytest.raises(ranges.Unsplittable):
        ranges.index_range(f, 0, 1, size // 2, size, size)
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


def _split(path, parts: int, scratch) -> tuple:
    """Index ``path`` in ``parts`` ranges, read it back in two buckets: (summaries, index bytes,
    every bucket's packets)."""
    sums, locs = _index(path, parts, scratch)
    blobs = [storage.read_bytes(loc) for loc in locs]
    buckets, bases, _firsts, _ranks = ranges.plan_buckets(sums, 2)
    packets = []
    for b in buckets:
        src = ranges.BucketSource(storage.locate(path), list(zip(locs, bases.tolist())), b)
        packets.append([p for batch in src.batches() for p in batch])
    return sums, blobs, packets


def _mixed_links(tmp_path) -> str:
    """Ethernet IPv4/TCP, an ARP frame, an IPv6 segment and a cut IPv4 header in one pcap: the
    compiled walk keys the first, leaves the rest to the link parser."""
    pkts = list(open_capture(CAPTURES[0]))[:40]
    eth = pkts[5][3]
    arp = eth[:12] + b"\x08\x06" + bytes(28)
    v6 = (
        eth[:12] + b"\x86\xdd" + bytes.fromhex("6000000000140640") + bytes(15) + b"\x01" + bytes(15) + b"\x02"
    )
    v6 += bytes.fromhex("d43116280000000100000000500220000000000000")[:20]
    cut = eth[:30]
    rows = [(ts, lt, d, wl) for _n, ts, lt, d, wl in pkts]
    rows[7:7] = [(rows[7][0], 1, arp, len(arp)), (rows[7][0], 1, v6, len(v6)), (rows[7][0], 1, cut, len(eth))]
    path = tmp_path / "mixed.pcap"
    path.write_bytes(pcapgen.pcap_bytes(rows))
    return str(path)


def _splits(paths, scratch) -> list:
    """_split of each capture in ``paths`` (3 ranges), by this process's implementations."""
    return [_split(path, 3, scratch / f"{i}-{ranges.compiled_in_use()}") for i, path in enumerate(paths)]


def test_compiled_index_and_buckets_equal_the_references_on_shipped_captures(tmp_path):
    """The compiled walks against the references, one side in a process of the other implementations."""
    paths = CAPTURES[:6] + [_mixed_links(tmp_path)]
    here = _splits(paths, tmp_path)
    there = on_the_other_side(_splits, paths, tmp_path)
    for path, a, b in zip(paths, here, there):
        ref, fast = (b, a) if ranges.compiled_in_use() else (a, b)
        assert ref[1] == fast[1], path  # the index files, byte for byte
        for a, b in zip(ref[0], fast[0]):
            assert (a.start, a.stop, a.packets) == (b.start, b.stop, b.packets)
            assert np.array_equal(a.slot_bytes, b.slot_bytes) and np.array_equal(a.keys, b.keys)
            assert np.array_equal(a.firsts, b.firsts)
        assert ref[2] == fast[2], path
        assert sorted(p for b in fast[2] for p in b) == list(open_capture(path)), path
        assert all(type(p[3]) is bytes for b in fast[2] for p in b)


def test_a_capture_rewritten_in_place_is_mapped_afresh_for_the_next_task(tmp_path):
    # a Python worker keeps its last mapping for the next task on the same capture: one that
    # changed since must not be read through the old mapping
    path = tmp_path / "c.pcap"
    first, second = CAPTURES[0], CAPTURES[1]
    path.write_bytes(open(first, "rb").read())
    loc = storage.locate(str(path))
    with ranges.open_capture_bytes(loc) as f:
        assert f.size() == os.path.getsize(first)
        kept = f
    with ranges.open_capture_bytes(loc) as f:
        assert f is kept  # unchanged: the same mapping
    os.remove(path)
    path.write_bytes(open(second, "rb").read())
    with ranges.open_capture_bytes(loc) as f:
        assert f is not kept and f.size() == os.path.getsize(second)
        assert bytes(f.read_at(64, 0)) == open(second, "rb").read(64)


class StartsAfter(Starting):
    """A session still starting for the driver's first ``polls`` looks, then up (``spark``), or
    failed (``error``): how many units the driver takes is then known in advance.  ``gate``: the
    start returns only once it is set (a session that never comes up while the job runs).
    ``ours``: a session started for the job (its workers are started before the driver stops),
    else one the caller had."""

    def __init__(self, spark, polls: int, error: BaseException | None = None, gate=None, ours=False) -> None:
        self.polls, self.looks = polls, 0
        self.due = threading.Event()  # (the start ends only when looked at once more: ``ready``
        # then says what done() says, as the driver's threads may look at either)

        def open_session():
            self.due.wait()
            if gate is not None:
                gate.wait()
            if error is not None:
                raise error
            return spark, ours

        super().__init__(open_session)

    def done(self) -> bool:
        self.looks += 1
        if self.looks <= self.polls:
            return False
        self.due.set()
        self.ready.wait()  # (up by then, whatever the thread's timing)
        return True

    def result(self):
        self.due.set()
        return super().result()


@pytest.mark.parametrize("polls", [3, 1000])
def test_captures_the_driver_dissects_while_its_session_starts_give_the_same_rows(
    spark, dissected, tmp_path, polls
):
    out = str(tmp_path / "out")
    s = run(StartsAfter(spark, polls), CAPTURES, out, frames=True)
    assert_same_dataset(out, dissected)
    ahead = min(polls, len(CAPTURES))
    assert s.driver_units == ahead and s.driver_cpu > 0
    assert s.captures == len(CAPTURES) and not s.errors
    # the rest packed into Spark tasks (none when the driver did all before the session was up)
    assert (s.task_seconds > 0) == (ahead < len(CAPTURES))
    assert len(os.listdir(os.path.join(out, "methods"))) >= 1
    assert not os.path.exists(f"{out}.tmp-spark-{os.getpid()}")


def test_the_driver_goes_on_taking_units_until_a_new_sessions_workers_are_up(
    spark, dissected, tmp_path, monkeypatch
):
    from amqpcap.spark import job

    warming, release = threading.Event(), threading.Event()

    def warm(session):  # workers that do not come up while the job runs
        assert session is spark
        warming.set()
        release.wait(120)

    monkeypatch.setattr(job, "warm", warm)
    out = str(tmp_path / "out")
    try:
        s = run(StartsAfter(spark, 2, ours=True), CAPTURES, out, frames=True)
    finally:
        release.set()
    # up after the driver's second capture, but its workers were still starting: the driver did all
    assert warming.is_set()
    assert s.driver_units == len(CAPTURES) and s.tasks == 0 and not s.errors
    assert_same_dataset(out, dissected)


def test_the_rest_goes_to_spark_as_soon_as_the_workers_are_up_while_the_drivers_unit_goes_on(
    spark, dissected, tmp_path, monkeypatch
):
    from amqpcap.spark import job

    up, staged, seen, switch = threading.Event(), threading.Event(), [], []
    before = sys.getswitchinterval()

    def warm(_session):  # the workers come up while the driver is in its second capture
        up.wait(60)

    def share(ahead, items, fn):
        def unit(item):
            switch.append(sys.getswitchinterval())  # (the session's py4j calls get the GIL soon)
            if len(seen) == 1:
                up.set()
                seen.append(staged.wait(60))  # the job's stage begins before this unit ends
            else:
                seen.append(None)
            return fn(item)

        return real_share(ahead, items, unit)

    def run_stage(*args, **kw):
        staged.set()
        return real_stage(*args, **kw)

    real_share, real_stage = job.Ahead.share, job.run_stage
    monkeypatch.setattr(job, "warm", warm)
    monkeypatch.setattr(job.Ahead, "share", share)
    monkeypatch.setattr(job, "run_stage", run_stage)
    out = str(tmp_path / "out")
    s = run(StartsAfter(spark, 1, ours=True), CAPTURES, out, frames=True)
    assert seen == [None, True]
    assert switch == [job.SWITCH_INTERVAL] * 2 and sys.getswitchinterval() == before
    assert s.driver_units == 2 and s.tasks >= 1 and s.captures == len(CAPTURES) and not s.errors
    assert_same_dataset(out, dissected)


def test_a_job_the_driver_finishes_before_its_session_is_up_does_not_wait_for_the_session(
    dissected, tmp_path
):
    out, gate = str(tmp_path / "out"), threading.Event()
    starting = StartsAfter(None, 10**6, RuntimeError("never up"), gate=gate)
    try:
        s = run(starting, CAPTURES, out, frames=True)
        assert not starting.ready.is_set()  # the session is still starting: nothing waited for it
    finally:
        gate.set()
    assert s.driver_units == len(CAPTURES) and s.tasks == 0 and not s.errors
    assert_same_dataset(out, dissected)
    with pytest.raises(RuntimeError, match="never up"):  # (its error is the caller's, not the job's)
        starting.result()


def test_ranges_the_driver_indexes_while_its_session_starts_join_those_of_the_tasks(spark, merged, tmp_path):
    path = merged[0]
    want = str(tmp_path / "dissect")
    d = dissect([path], want, frames=True)
    out = str(tmp_path / "spark")
    s = run(StartsAfter(spark, 2), [path], out, frames=True, split_size=os.path.getsize(path) // 5 + 1)
    # two of the five ranges indexed on the driver, three by tasks; then four buckets
    assert s.driver_units == 2 and s.split == {path: 4} and s.tasks == 4
    assert s.tcp_streams == d.tcp_streams and s.packets == d.packets
    assert_same_dataset(out, want)


def test_a_session_that_fails_to_start_fails_the_job_and_leaves_no_output(tmp_path):
    out = str(tmp_path / "out")
    err = RuntimeError("no JVM")
    with pytest.raises(RuntimeError, match="no JVM"):
        run(StartsAfter(None, 2, err), CAPTURES, out)
    assert not os.path.exists(out) and not os.path.exists(f"{out}.tmp-spark-{os.getpid()}")


THREADS_PROBE = """
import sys, threading
from amqpcap.pipeline import Options
from amqpcap.spark import job, plan, storage
from amqpcap.spark.plan import expand
scratch, tables, caps = storage.locate(sys.argv[1]), sys.argv[2].split(","), expand(sys.argv[3:])
def parquet_thread():
    return any(t.name == "amqpcap-parquet" for t in threading.enumerate())
for tid, threads in ((0, False), (1, True)):
    task = plan.Task(tid, captures=caps, size=sum(c.size for c in caps))
    job.dissect_task(task, scratch=scratch, opts=job.opts_of(64, True, (), False), tables=tables,
                     threads=threads)
    print(parquet_thread())
"""


def test_the_drivers_units_write_parquet_in_a_thread_as_dissect_does_and_tasks_in_their_own(tmp_path):
    """A Spark task writes its Parquet in its own thread (Spark gives it one core); the driver's
    units, run while the JVM starts on the other core, write theirs in the Parquet thread as
    ``amqpcap dissect`` does: the same rows either way."""
    import subprocess

    got = subprocess.run(
        [sys.executable, "-c", THREADS_PROBE, str(tmp_path), ",".join(TABLES), *CAPTURES[:3]],
        capture_output=True,
        text=True,
        check=True,
    )
    assert got.stdout.split() == ["False", "True"]
    want = str(tmp_path / "want")
    dissect(CAPTURES[:3], want, frames=True)
    for t in ("t00000", "t00001"):
        assert_same_dataset(str(tmp_path / "tasks" / t), want)


def test_the_driver_dissects_its_captures_with_dissects_threads(spark, dissected, tmp_path, monkeypatch):
    from amqpcap.spark import job

    fns = []
    real_share = job.Ahead.share

    def share(ahead, items, fn):
        fns.append(fn)
        return real_share(ahead, items, fn)

    monkeypatch.setattr(job.Ahead, "share", share)
    out = str(tmp_path / "out")
    s = run(StartsAfter(spark, 3), CAPTURES, out, frames=True)
    ranges_fn, captures_fn = fns
    assert captures_fn.keywords.get("threads") is True and "threads" not in ranges_fn.keywords
    assert s.driver_units == 3 and s.tasks >= 1
    assert_same_dataset(out, dissected)
