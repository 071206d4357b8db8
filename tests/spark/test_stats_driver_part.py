"""The driver's part of ``stats --spark`` never holds the process open."""

import threading

import pytest

from amqpcap.spark import stats_tasks


def test_driver_part_runs_in_a_daemon_thread_and_hands_back_its_result(tmp_path, monkeypatch):
    release = threading.Event()
    seen = {}

    def part(item, *, out):
        seen["thread"] = threading.current_thread()
        release.wait(10)
        return {"item": item, "out": out}

    monkeypatch.setattr(stats_tasks, "part_task", part)
    fut = stats_tasks.start_on_driver(str(tmp_path))
    for _ in range(200):
        if "thread" in seen:
            break
        threading.Event().wait(0.01)
    # a daemon thread: an early exit (Ctrl-C, a failed stage) does not wait for the part
    assert seen["thread"].daemon
    assert not fut.done()
    release.set()
    assert fut.result(10) == {"item": stats_tasks.TASKS[0], "out": str(tmp_path)}


def test_driver_part_error_reaches_the_waiter(tmp_path, monkeypatch):
    def part(item, *, out):
        raise ValueError("bad part")

    monkeypatch.setattr(stats_tasks, "part_task", part)
    with pytest.raises(ValueError, match="bad part"):
        stats_tasks.start_on_driver(str(tmp_path)).result(10)
