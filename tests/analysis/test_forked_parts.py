"""Parts of stats computed in a forked second process, and passes over files of many small row
groups: the same summary, the same hooks called, the child's failures raised in the caller."""

import os
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from amqpcap.analysis import batches
from amqpcap.analysis.forked import Forked, Shared
from amqpcap.analysis.pairing import NotStreamed
from amqpcap.analysis.summary import STATS_PARTS, STREAMED, stats, stats_of_parts, stats_parts
from amqpcap.analysis.tables import dissect_cached, table_files

HERE = os.path.dirname(__file__)
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "..", "captures"))


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    cap = os.path.join(CAPTURES, "rabbitmq091_pika_full.pcap")
    return str(dissect_cached(cap, cache_dir=tmp_path_factory.mktemp("forked")))


def _hooked(out, aside):
    seen = {"latency": {}, "sections": [], "unacked": []}

    def on_latency(kind, values):
        seen["latency"][kind] = np.sort(np.asarray(values, dtype=float))

    got = stats_parts(
        out,
        STATS_PARTS,
        aside=aside,
        on_latency=on_latency,
        on_section=lambda section, load: seen["sections"].append(section),
        on_unacked=lambda un: seen["unacked"].append(len(un)),
    )
    return stats_of_parts(got), seen


@pytest.mark.parametrize(
    "aside", [("throughput", "confirm"), ("transit", "rpc", "consumer_ack", "health"), tuple(STATS_PARTS)]
)
def test_parts_computed_aside_give_the_summary_and_hooks_of_one_process(out, aside):
    want, want_seen = _hooked(out, ())
    got, seen = _hooked(out, aside)
    assert got == want
    assert seen["latency"].keys() == want_seen["latency"].keys() and len(seen["latency"]) >= 5
    for kind, values in want_seen["latency"].items():
        np.testing.assert_array_equal(seen["latency"][kind], values)
    assert sorted(seen["sections"]) == sorted(want_seen["sections"]) == sorted(STATS_PARTS)
    assert seen["unacked"] == want_seen["unacked"] and len(seen["unacked"]) == 1


@pytest.fixture
def forks(monkeypatch) -> list:
    """The pids of the processes that forked a :class:`Forked` child since the test began."""
    seen = []
    real = Forked.__init__

    def counted(self, *steps):
        seen.append(os.getpid())
        real(self, *steps)

    monkeypatch.setattr(Forked, "__init__", counted)
    return seen


def test_stats_computes_aside_by_default_and_equals_one_process(out, forks):
    want = stats(out, aside=())
    assert forks == []
    assert stats(out) == want
    assert forks == [os.getpid()]


def test_health_apart_from_consumer_acks_is_refused(out):
    with pytest.raises(ValueError, match="health"):
        stats_parts(out, STATS_PARTS, aside=("consumer_ack",))


def test_a_failure_in_the_forked_process_is_raised_in_the_caller():
    def fails():
        raise KeyError("no such column")

    with pytest.raises(KeyError, match="no such column"):
        Forked(fails).result()
    assert Forked(lambda: {"big": bytes(1 << 20)}).result() == {"big": bytes(1 << 20)}  # > a pipe's buffer


def test_a_forked_process_that_ends_without_a_result_or_with_one_that_cannot_be_sent_is_an_error():
    with pytest.raises(RuntimeError, match="without a result"):
        Forked(lambda: os._exit(3)).result()
    with pytest.raises(Exception, match="pickle"):
        Forked(lambda: lambda: None).result()  # (a function made in the child: not picklable)


def test_the_forked_process_sees_this_ones_state_and_leaves_no_process_behind():
    state = {"rows": list(range(1000))}
    child = Forked(lambda: (os.getpid(), sum(state["rows"])))
    pid, total = child.result()
    assert pid != os.getpid() and total == sum(range(1000))
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left


def test_each_steps_value_reaches_the_caller_while_the_forked_process_computes_the_next(tmp_path):
    flag = tmp_path / "first value received"

    def second():
        deadline = time.monotonic() + 30  # the caller makes the flag once it holds the first value
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return flag.exists()

    child = Forked(os.getpid, second)
    pid = child.result()
    assert pid != os.getpid()
    assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # still running: it waits for the flag
    flag.touch()
    assert child.result() is True
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # the last step's call waited for it
    with pytest.raises(RuntimeError, match="every step"):
        child.result()


def test_a_failure_of_a_later_step_is_raised_by_its_call_and_the_steps_after_it_are_not_run(tmp_path):
    def second():
        raise KeyError("second step")

    def third():
        (tmp_path / "third").touch()

    child = Forked(lambda: 1, second, third)
    assert child.result() == 1
    with pytest.raises(KeyError, match="second step"):
        child.result()
    assert not (tmp_path / "third").exists()


def test_shared_items_are_each_taken_by_one_of_the_two_processes_and_all_of_them_are_taken():
    items = [("a", i) for i in range(200)]
    shared = Shared(items)
    child = Forked(lambda: [next(iter(shared)), next(iter(shared))])  # (the child takes two)
    there = child.result()
    here = list(shared)
    assert there == items[:2] and here == items[2:]  # each item once, in order, none lost
    assert list(Shared(())) == []


def _small_groups(out: str, dst, rows: int) -> str:
    """A copy of the output ``out`` whose Parquet files have row groups of ``rows`` rows."""
    for root, _dirs, files in os.walk(out):
        for f in files:
            src = os.path.join(root, f)
            target = os.path.join(dst, os.path.relpath(src, out))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if f.endswith(".parquet"):
                pq.write_table(pq.read_table(src), target, row_group_size=rows)
            else:
                with open(src, "rb") as a, open(target, "wb") as b:
                    b.write(a.read())
    return str(dst)


def test_small_row_groups_are_read_together_in_file_order(out, tmp_path, monkeypatch):
    small = _small_groups(out, tmp_path / "small", 3)
    (path,) = table_files(small, "methods")
    assert pq.ParquetFile(path).num_row_groups > 20
    monkeypatch.setattr(batches, "BATCH_ROWS", 50)
    cols = ["frame_number", "ts", "method", "channel"]
    got = list(batches.tables(small, "methods", cols))
    assert all(len(b) <= 50 for b in got) and max(len(b) for b in got) > 3  # groups joined
    assert len(got) < pq.ParquetFile(path).num_row_groups
    want = list(batches.tables(out, "methods", cols))
    joined, whole = pa.concat_tables(got), pa.concat_tables(want)
    assert joined.column("frame_number").to_pylist() == whole.column("frame_number").to_pylist()
    assert joined.column("method").to_pylist() == whole.column("method").to_pylist()
    assert stats(small) == stats(out)


def test_the_report_forks_one_process_and_equals_the_report_of_the_loaded_tables(out, tmp_path, forks):
    from amqpcap.analysis import load, write_report

    want = open(write_report(load(out), tmp_path / "loaded"), encoding="utf-8").read()
    assert forks == []
    got = open(write_report(out, tmp_path / "dir"), encoding="utf-8").read()
    assert forks == [os.getpid()]  # (stats' parts aside computed in the report's one child)
    assert got == want and got.count("data:image/png;base64,") == 5


def test_the_reports_forked_process_draws_no_figure_and_never_loads_matplotlib(out, tmp_path):
    seen = tmp_path / "child.txt"
    script = (
        "import os, sys\n"
        "import amqpcap.analysis.report as R\n"
        "real = R._their_totals\n"
        "def spy(*a):\n"
        "    open(sys.argv[3], 'w').write(repr(('matplotlib' in sys.modules, os.getpid())))\n"
        "    return real(*a)\n"
        "R._their_totals = spy\n"
        "R.write_report(sys.argv[1], sys.argv[2])\n"
        "print(os.getpid(), 'matplotlib' in sys.modules)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, out, str(tmp_path / "report"), str(seen)],
        capture_output=True,
        text=True,
        check=True,
    )
    pid, drew = run.stdout.split()
    loaded, child = eval(seen.read_text())  # noqa: S307 (the repr the script wrote)
    assert (loaded, drew) == (False, "True") and child != int(pid)
    assert len(list((tmp_path / "report").glob("*.png"))) == 5


def test_a_latency_hook_changes_no_summary_and_is_handed_every_value_of_each_pass(out):
    got, seen = _hooked(out, ())
    assert got == stats_of_parts(stats_parts(out, STATS_PARTS))
    passed = 0
    for kind in ("confirm", "consumer_ack", "transit", "rpc"):
        try:
            values = np.sort(np.asarray(STREAMED[kind](out)[0], dtype=float))
        except NotStreamed:  # (publishes without a message id: transit of the loaded section)
            continue
        np.testing.assert_array_equal(seen["latency"][kind], values)
        passed += len(values) > 0
    assert passed >= 2
