"""`stats --spark`'s work items come from one queue: the driver takes them while its session
starts, Spark tasks take what is left, each item computed once; a session not needed is given up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from amqpcap.analysis import stats as pandas_stats
from amqpcap.cli import main
from amqpcap.spark import cli as spark_cli
from amqpcap.spark import stats_tasks
from amqpcap.spark.claims import DRIVER, Claims, claim
from amqpcap.spark.starting import Starting, launching_jvms


def _pandas_json(out: str) -> str:
    return json.dumps(pandas_stats(out), default=str)


def test_each_item_is_handed_out_once_and_a_retried_attempt_gets_its_items_back():
    c = Claims(5)
    assert c.take() == 0
    addr = c.serve("127.0.0.1")
    try:
        assert claim(addr, 0, 0) == 1
        assert claim(addr, 1, 0) == 2
        assert claim(addr, 0, 0) == 3
        # attempt 1 of partition 0: what attempt 0 took (its results are lost) comes back first
        assert [claim(addr, 0, 1), claim(addr, 0, 1), claim(addr, 0, 1)] == [1, 3, 4]
        assert claim(addr, 1, 0) is None and c.take() is None
        assert c.taken == {0: DRIVER, 1: (0, 1), 2: (1, 0), 3: (0, 1), 4: (0, 1)}
        assert c.tasks_began.is_set()
    finally:
        c.close()


def test_a_request_without_the_token_takes_nothing():
    c = Claims(2)
    host, port, _token = c.serve("127.0.0.1")
    try:
        with pytest.raises(ConnectionError):
            claim((host, port, "not-the-token"), 0, 0)
        assert c.left() == 2
    finally:
        c.close()


def test_driver_and_tasks_share_the_items_each_computed_once_and_the_json_is_the_pandas_one(
    spark, output, monkeypatch
):
    part_task, reports = stats_tasks.part_task, []

    def driver_part(item, *, out):  # (the driver's only: tasks run the module's own)
        got = part_task(item, out=out)
        assert reports[0].claims.tasks_began.wait(300)  # a slow driver: the tasks take the rest
        return got

    monkeypatch.setattr(stats_tasks, "part_task", driver_part)
    report = stats_tasks.Report(output)
    reports.append(report)
    report.start()
    for _ in range(6000):  # the driver has taken the costliest item before the session is used
        if report.claims.taken:
            break
        time.sleep(0.01)
    report.finish(spark)
    takers = report.claims.taken
    assert sorted(takers) == list(range(len(report.items)))  # every item, once each
    assert takers[0] == DRIVER and report.by_driver == sum(who == DRIVER for who in takers.values())
    assert sorted(who for who in takers.values() if who != DRIVER) and len(takers) > 2
    result, table = report.result()
    assert table is None
    assert json.dumps(result, default=str) == _pandas_json(output)


def test_driver_thread_is_a_daemon_and_its_error_reaches_the_waiter(tmp_path, monkeypatch):
    seen = {}

    def part(item, *, out):
        seen["thread"] = threading.current_thread()
        raise ValueError("bad part")

    monkeypatch.setattr(stats_tasks, "part_task", part)
    report = stats_tasks.Report(str(tmp_path)).start()
    with pytest.raises(ValueError, match="bad part"):
        report.wait(10)
    assert seen["thread"].daemon  # an early exit (Ctrl-C, a failed stage) does not wait for it


def test_stats_spark_prints_the_report_before_giving_up_a_session_still_starting(output, monkeypatch, capsys):
    printed, stopped = threading.Event(), []
    print_stats = spark_cli._print_stats

    def printing(*args):
        code = print_stats(*args)
        printed.set()
        return code

    def slow_session(a, app):  # a session that comes up only after the report is out
        assert printed.wait(300)
        raise RuntimeError("given up")

    monkeypatch.setattr(spark_cli, "_print_stats", printing)
    monkeypatch.setattr(spark_cli, "_open_session", slow_session)
    # (the tests' own session, active in this thread, would be used at once instead)
    monkeypatch.setattr(spark_cli, "_active_session", lambda a: None)
    monkeypatch.setattr(spark_cli, "_stop", lambda *a: stopped.append(a))
    assert main(["stats", output, "--spark", "--spark-from", "0", "--json"]) == 0
    captured = capsys.readouterr()
    assert not stopped
    assert captured.out.strip() == _pandas_json(output) and captured.err == ""


def test_giving_up_a_session_ends_the_jvm_being_launched(tmp_path):
    launched = []

    def open_session():  # as pyspark launches bin/spark-submit and waits for its port
        p = subprocess.Popen(["bash", "-c", "exec -a spark-submit sleep 120"])
        launched.append(p)
        p.wait()
        raise RuntimeError("Java gateway process exited before sending its port number")

    before = set(launching_jvms())  # (the JVM of a session other tests started stays up)
    s = Starting(open_session)
    for _ in range(500):
        if launched and set(launching_jvms()) - before:
            break
        time.sleep(0.01)
    assert set(launching_jvms()) - before == {launched[0].pid}
    s.give_up(lambda *a: pytest.fail("no session came up"), wait=10)
    assert launched[0].poll() is not None and set(launching_jvms()) == before
    with pytest.raises(RuntimeError, match="Java gateway"):
        s.result()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the launching JVM through /proc")
def test_stats_spark_from_the_command_line_prints_the_pandas_json_and_leaves_no_jvm(output):
    exe = os.path.join(os.path.dirname(sys.executable), "amqpcap")
    mark = f"AMQPCAP_TEST_RUN={uuid.uuid4().hex}"  # (in the environment of every process it starts)
    cmd = [exe, "stats", output, "--spark", "--spark-from", "0", "--json", "--master", "local[2]"]
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == _pandas_json(output)
    assert p.stderr == ""
    for _ in range(100):
        if not processes_with(mark.encode()):
            break
        time.sleep(0.1)
    assert processes_with(mark.encode()) == []


def processes_with(mark: bytes) -> list:
    found = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if mark in f.read():
                    found.append(int(d))
        except (OSError, ValueError):
            continue
    return found
