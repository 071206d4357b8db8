"""Local sessions' Python workers start from a daemon that imported amqpcap, and a task's
hand-off back to the driver imports nothing more (pandas least of all)."""

from __future__ import annotations


def test_local_workers_fork_from_the_amqpcap_daemon_and_tasks_leave_pandas_unimported(spark):
    from amqpcap.spark import job

    def probe(_item):
        import os
        import sys

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode()
        return parent, "amqpcap.spark.job" in sys.modules, "pandas" in sys.modules

    got = job.run_stage(spark, list(range(4)), probe)
    got += job.run_stage(spark, list(range(4)), probe)  # the workers' second round of tasks
    for parent, imported, pandas in got:
        assert "-m amqpcap.spark.daemon" in parent
        assert imported
        assert not pandas


def testone_row_holds_the_id_and_the_bytes():
    from amqpcap.spark import job

    ids, blobs = job.one_row(7, b"\x00abc")
    assert ids.to_pylist() == [7] and blobs.to_pylist() == [b"\x00abc"]
    ids, blobs = job.one_row(0, b"")
    assert ids.to_pylist() == [0] and blobs.to_pylist() == [b""]
