"""Parts of stats computed in a forked second process, and passes over files of many small row
groups: the same summary, the same hooks called, the child's failures raised in the caller."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from amqpcap.analysis import batches
from amqpcap.analysis.forked import Forked, TakenInTurn
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

    def counted(self, fn, **kw):
        seen.append(os.getpid())
        real(self, fn, **kw)

    monkeypatch.setattr(Forked, "__init__", counted)
    return seen


def test_stats_computes_aside_by_default_and_equals_one_process(out, forks):
    want = stats(out, aside=())
    assert forks == []
    assert stats(out) == want
    assert forks == [os.getpid()]


@pytest.mark.parametrize("small", [True, False])
def test_a_small_output_computes_errors_aside(out, monkeypatch, small):
    from amqpcap.analysis import summary

    want = stats(out, aside=())
    if not small:
        monkeypatch.setattr(summary, "SMALL_OUTPUT", 0)  # (the capture's tables: tens of kB)
    here = []
    real = summary._stats_parts

    def parts(src, parts, *args, **kw):
        here.append(parts)
        return real(src, parts, *args, **kw)

    monkeypatch.setattr(summary, "_stats_parts", parts)
    assert stats(out) == want
    aside = summary.SMALL_ASIDE if small else summary.ASIDE
    assert here == [tuple(p for p in STATS_PARTS if p not in aside)]  # (this process' parts)
    assert ("errors" in aside) == small


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


_ENDS_WHILE_THE_CHILD_RUNS = """
import signal, sys, time
from amqpcap.analysis.forked import Forked, TakenInTurn

def stopped(signum, frame):
    raise KeyboardInterrupt(signum)

signal.signal(signal.SIGTERM, stopped)  # as the CLI's handlers: a signal unwinds
import multiprocessing
f = Forked(lambda: time.sleep(60))
for child in multiprocessing.active_children():  # ended at once, as at an early exit
    child.terminate()
    child.join()
    print(child.exitcode, flush=True)
"""


def test_a_forked_process_ended_by_its_caller_leaves_quietly_whatever_handlers_it_inherited():
    r = subprocess.run([sys.executable, "-c", _ENDS_WHILE_THE_CHILD_RUNS], capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout == f"{-signal.SIGTERM}\n"
    assert r.stderr == ""


def test_a_generators_values_reach_the_caller_while_the_forked_process_computes_the_next(tmp_path):
    flag = tmp_path / "first value received"

    def steps():
        yield os.getpid()
        deadline = time.monotonic() + 30  # the caller makes the flag once it holds the first value
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        yield flag.exists()

    child = Forked(steps)
    pid = child.result(last=False)
    assert pid != os.getpid()
    assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # still running: it waits for the flag
    flag.touch()
    assert child.result() is True
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # the last value's call waited for it


def test_a_forked_generators_failure_after_its_first_value_is_raised_by_the_next_call():
    def steps():
        yield 1
        raise KeyError("second step")

    child = Forked(steps)
    assert child.result(last=False) == 1
    with pytest.raises(KeyError, match="second step"):
        child.result()


def test_a_forked_process_takes_the_values_sent_to_its_inbox_in_order_while_the_caller_goes_on(tmp_path):
    flag = tmp_path / "every value sent"

    def takes(receive):
        deadline = time.monotonic() + 30  # the caller makes the flag once its sends returned
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return flag.exists(), [receive() for _ in range(3)]

    child = Forked(takes, inbox=True)
    big = bytes(4 << 20)  # (> a pipe's buffer: a send written here would wait for the child)
    for value in (1, big, "three"):
        child.send(value)
    flag.touch()
    assert child.result() == (True, [1, big, "three"])


def test_a_report_failing_before_its_figures_have_their_data_leaves_no_process(out, tmp_path, monkeypatch):
    import multiprocessing

    from amqpcap.analysis import report

    def fails(*a, **kw):
        raise KeyError("a part failed")

    monkeypatch.setattr(report, "stats_parts", fails)  # (this process' parts: after the fork)
    with pytest.raises(KeyError, match="a part failed"):
        report.write_report(out, tmp_path / "r")
    assert multiprocessing.active_children() == []


def test_the_reports_own_process_never_imports_matplotlib_its_forked_one_draws_every_figure(out, tmp_path):
    code = (
        "import sys\n"
        "from amqpcap.analysis import write_report\n"
        f"write_report({out!r}, {str(tmp_path / 'r')!r})\n"
        "assert 'matplotlib' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    for name in ("throughput", "latency", "errors", "timeline", "unacked"):
        assert (tmp_path / "r" / f"{name}.png").read_bytes().startswith(b"\x89PNG")


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


def test_the_figures_process_draws_with_matplotlibs_objects_frozen_and_this_ones_collector_untouched(
    out, tmp_path
):
    code = (
        "import gc, sys\n"
        "from amqpcap.analysis import report\n"
        "real = report.fig_errors\n"
        "def fig_errors(*a, **kw):  # (in the figures' process, matplotlib imported)\n"
        "    print('walked', sum(len(gc.get_objects(g)) for g in range(3)), flush=True)\n"
        "    return real(*a, **kw)\n"
        "report.fig_errors = fig_errors\n"
        f"report.write_report({out!r}, {str(tmp_path / 'r')!r})\n"
        "print('frozen here', gc.get_freeze_count())\n"
    )
    got = subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=300, capture_output=True, text=True
    )
    lines = dict(line.rsplit(" ", 1) for line in got.stdout.splitlines())
    assert int(lines["walked"]) < 20_000  # (matplotlib's import: ~70k objects)
    assert lines["frozen here"] == "0"


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


@pytest.mark.parametrize("small", [True, False], ids=["small", "larger"])
def test_the_report_forks_one_process_and_equals_the_report_of_the_loaded_tables(
    out, tmp_path, forks, monkeypatch, small
):
    from amqpcap.analysis import load, summary, write_report

    want = open(write_report(load(out), tmp_path / "loaded"), encoding="utf-8").read()
    assert forks == []
    if not small:  # (stats' aside parts computed by the figures' process, the unacked figure here)
        monkeypatch.setattr(summary, "SMALL_OUTPUT", 0)
    got = open(write_report(out, tmp_path / "dir"), encoding="utf-8").read()
    assert forks == [os.getpid()]  # (stats' parts aside computed in the report's one child)
    assert got == want and got.count("data:image/png;base64,") == 5


def test_items_taken_in_turn_are_each_taken_once_the_front_here_the_back_by_the_child():
    either = TakenInTurn(7)
    here = [either.first(), either.first()]

    def back():
        taken = []
        while (i := either.last()) is not None:
            taken.append(i)
        return taken

    theirs = Forked(back).result()
    assert here == [0, 1] and theirs == [6, 5, 4, 3, 2]
    assert either.first() is None and either.last() is None


@pytest.mark.parametrize("side", ["first", "last"], ids=["figures process", "own process"])
def test_the_pairings_taken_by_either_process_give_the_report_of_the_loaded_tables(
    out, tmp_path, monkeypatch, side
):
    from amqpcap.analysis import load, report, write_report

    want = open(write_report(load(out), tmp_path / "loaded"), encoding="utf-8").read()
    taken = []

    class OneSide(TakenInTurn):  # (the other side takes every pairing)
        def first(self):
            i = None if side == "first" else super().first()
            taken.append(i)
            return i

        def last(self):
            return None if side == "last" else super().last()

    monkeypatch.setattr(report, "TakenInTurn", OneSide)
    got = open(write_report(out, tmp_path / "dir"), encoding="utf-8").read()
    assert taken == ([None] if side == "first" else [*range(len(report.EITHER)), None])
    assert got == want and got.count("data:image/png;base64,") == 5


def test_a_small_outputs_report_computes_the_errors_part_in_its_own_process_first(out, tmp_path, monkeypatch):
    from amqpcap.analysis import report

    calls = tmp_path / "calls"
    real = report.stats_parts

    def recorded(src, parts, **kw):  # (both processes append to the file)
        with open(calls, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {','.join(parts)}\n")
        return real(src, parts, **kw)

    monkeypatch.setattr(report, "stats_parts", recorded)
    report.write_report(out, tmp_path / "r")
    lines = [line.split() for line in calls.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == [str(os.getpid()), "errors"]
    assert all(parts != "errors" for pid, parts in lines[1:])


def test_the_pairings_taken_in_turn_are_the_reports_own_pairings():
    from amqpcap.analysis.report import EITHER, OWN_ORDER

    assert sorted(EITHER) == sorted(OWN_ORDER[1])


def test_the_reports_own_order_of_stats_parts_has_each_part_once():
    from amqpcap.analysis.report import OWN_ORDER

    order = [p for group in OWN_ORDER for p in group]
    assert sorted(order) == sorted(STATS_PARTS) and len(set(order)) == len(order)


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


@pytest.mark.parametrize("command", ["report", "stats"])
def test_stats_and_report_import_without_collections_and_compute_with_them(out, tmp_path, command):
    """cli.QUIET_START: the imports run with the cyclic GC off; once they are done it is back on
    at the interpreter's threshold, the imports' objects frozen (no collection walks them)."""
    probe = (
        "import gc, sys; from amqpcap import cli\n"
        "sys.argv = ['amqpcap'] + sys.argv[1:]\n"
        "first = gc.get_threshold()[0]\n"
        "lean = cli.lean\n"
        "def lean_probe(command):\n"
        "    lean(command); print('start', gc.get_threshold()[0])\n"
        "cli.lean = lean_probe\n"
        "import amqpcap.analysis as A, amqpcap.analysis.report as R\n"
        "def probed(real):\n"
        "    def run(*a, **kw):\n"
        "        print('run', gc.get_threshold()[0] == first, gc.get_freeze_count() > 10000)\n"
        "        return real(*a, **kw)\n"
        "    return run\n"
        "R.write_report = probed(R.write_report); A.stats = probed(A.stats)\n"
        "cli.console()\n"
    )
    args = [command, out] + (["-o", str(tmp_path / "report")] if command == "report" else ["--json"])
    p = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "start 0\n" in p.stdout and "run True True\n" in p.stdout


def test_stats_and_report_import_numpy_with_one_blas_thread_unless_told_otherwise():
    """cli.ONE_BLAS_THREAD: a stats or report process is set up (cli.lean, before numpy's import)
    for OpenBLAS to start one thread, no pool beside it; OPENBLAS_NUM_THREADS given wins; other
    commands leave it alone."""
    probe = (
        "import os, sys; from amqpcap import cli\n"
        "cli.lean(sys.argv[1]); print('blas', os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def blas(command, **given):
        p = subprocess.run(
            [sys.executable, "-c", probe, command],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, **given},
        )
        assert p.returncode == 0, p.stderr
        return p.stdout.split()[-1]

    assert blas("report") == "1" and blas("stats") == "1"
    assert blas("report", OPENBLAS_NUM_THREADS="4") == "4"
    assert blas("dissect") == "None"  # (no numpy at all)
