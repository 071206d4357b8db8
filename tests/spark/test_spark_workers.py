"""Local sessions' Python workers start from a daemon that imported amqpcap, and a task's
hand-off back to the driver imports nothing more (pandas least of all)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_local_workers_fork_from_the_amqpcap_daemon_with_the_job_imported(spark):
    from amqpcap.spark import job

    def probe(_item):
        import os
        import sys

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode()
        return parent, "amqpcap.spark.job" in sys.modules

    got = job.run_stage(spark, list(range(4)), probe)
    got += job.run_stage(spark, list(range(4)), probe)  # the workers' second round of tasks
    for parent, imported in got:
        assert "-m amqpcap.spark.daemon" in parent
        assert imported


def test_a_task_result_row_is_built_without_importing_pandas():
    # the test session's workers are shared with tests that use pandas: a fresh process
    code = "import sys; from amqpcap.spark import job; job.one_row(3, b'x'); print('pandas' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False"]


def test_one_row_holds_the_id_and_the_bytes():
    from amqpcap.spark import job

    ids, blobs = job.one_row(7, b"\x00abc")
    assert ids.to_pylist() == [7] and blobs.to_pylist() == [b"\x00abc"]
    ids, blobs = job.one_row(0, b"")
    assert ids.to_pylist() == [0] and blobs.to_pylist() == [b""]


def test_the_worker_daemon_has_pyarrow_and_its_parquet_writer_loaded_before_any_task(spark):
    from amqpcap.spark import job

    def parent_maps(_item):
        import os

        with open(f"/proc/{os.getppid()}/maps") as f:
            return f.read()

    for maps in job.run_stage(spark, list(range(2)), parent_maps):
        assert "libarrow.so" in maps and "_parquet." in maps


def test_warming_a_session_runs_one_empty_task_a_core_and_returns_nothing(spark):
    from amqpcap.spark import session

    sc = spark.sparkContext
    group = f"warm-{os.getpid()}"
    sc.setJobGroup(group, "warm")
    try:
        assert session.warm(spark) is None
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    assert len(jobs) == 1
    stages = [tracker.getStageInfo(s) for s in tracker.getJobInfo(jobs[0]).stageIds]
    assert [(s.numTasks, s.numCompletedTasks) for s in stages] == [(sc.defaultParallelism,) * 2]
