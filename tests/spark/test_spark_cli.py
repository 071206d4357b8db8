"""`amqpcap spark` / `python -m amqpcap.spark` on the command line: output, summary, exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from test_spark_job import assert_same_dataset

from amqpcap.cli import main
from amqpcap.pipeline import dissect

ROOT = Path(__file__).resolve().parents[2]


def test_python_m_amqpcap_spark_writes_what_dissect_writes_and_exits_with_the_bad_ones_code(spark, tmp_path):
    good = str(ROOT / "captures" / "rabbitmq091_pika_refused.pcap")
    bad = tmp_path / "empty.pcap"
    bad.write_bytes(b"")
    out = tmp_path / "out"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "amqpcap.spark",
            good,
            str(bad),
            "-o",
            str(out),
            "--master",
            "local[1]",
            "--split-size",
            "4k",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2, p.stderr
    assert f"amqpcap: {bad}: empty file, not a capture" in p.stderr.splitlines()
    assert "Traceback" not in p.stderr
    assert "1 capture(s), 1 split by conversation" in p.stdout
    dissect([good], str(tmp_path / "want"))
    assert_same_dataset(str(out), str(tmp_path / "want"), ["connections", "methods", "messages", "anomalies"])


def test_spark_refuses_an_existing_output_and_bad_sizes_like_dissect_before_starting_spark(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(SystemExit) as e:
        main(["spark", str(ROOT / "captures"), "-o", str(out), "--split-size", "lots"])
    assert e.value.code == 64 and "not a size: 'lots'" in capsys.readouterr().err
    assert main(["spark", str(ROOT / "captures"), "-o", str(out)]) == 5
    assert capsys.readouterr().err == f"amqpcap: output {out} exists (use --force to replace it)\n"
    assert os.listdir(out) == []


def test_local_workers_write_parquet_with_the_pool_the_dissect_process_uses(spark, monkeypatch):
    from amqpcap import cli
    from amqpcap.spark import session

    def worker_pool(_):
        import os

        import pyarrow as pa

        return pa.default_memory_pool().backend_name, os.environ.get("ARROW_DEFAULT_MEMORY_POOL")

    backend, chosen = spark.sparkContext.parallelize([0], 1).map(worker_pool).collect()[0]
    if "jemalloc" in cli.arrow_pools() and not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        assert (backend, chosen) == ("jemalloc", "jemalloc")
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "system")
    assert session.worker_arrow_pool() == {}  # the user's choice: nothing set for the workers


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the processes through /proc")
@pytest.mark.parametrize(
    "sig, code, line",
    [
        ("SIGTERM", 143, "amqpcap: stopped by SIGTERM (partial output removed)\n"),
        ("SIGINT", 130, "amqpcap: interrupted (partial output removed)\n"),
    ],
)
def test_a_signal_during_the_job_is_one_line_its_exit_code_and_leaves_no_output(tmp_path, sig, code, line):
    import signal
    import time

    out = tmp_path / "out"
    mark = uuid.uuid4().hex  # (in the environment of every process it starts: the JVM, its workers)
    p = subprocess.Popen(
        [sys.executable, "-m", "amqpcap.spark", str(ROOT / "captures"), "-o", str(out)]
        + ["--master", "local[2]", "--split-size", "100k"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AMQPCAP_TEST_RUN": mark},
    )
    t0 = time.monotonic()
    while not list(tmp_path.glob("out.tmp-spark-*/*")):  # the tasks have started writing
        assert p.poll() is None and time.monotonic() - t0 < 300, p.communicate()
        time.sleep(0.2)
    p.send_signal(getattr(signal, sig))
    _out, err = p.communicate(timeout=120)
    assert p.returncode == code, err
    assert err == line
    # every process of the run gone (a task still running could still write): then nothing is left
    assert_no_process_left(mark, within=60)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the launching JVM through /proc")
def test_spark_done_on_the_driver_before_its_session_is_up_is_quiet_and_leaves_no_jvm(
    tmp_path,
):
    exe = os.path.join(os.path.dirname(sys.executable), "amqpcap")
    mark = uuid.uuid4().hex  # (in the environment of every process it starts)
    out = str(tmp_path / "out")
    cmd = [exe, "spark", str(ROOT / "captures" / "netamqp09_offline.pcap"), "-o", out, "--master", "local[1]"]
    env = {**os.environ, "AMQPCAP_TEST_RUN": mark}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    assert "0 task(s) (+1 on the driver while Spark started)" in p.stdout and p.stderr == ""
    want = str(tmp_path / "dissect")
    dissect([str(ROOT / "captures" / "netamqp09_offline.pcap")], want)
    assert_same_dataset(out, want, ["connections", "methods", "messages", "anomalies"])
    assert_no_process_left(mark)


def assert_no_process_left(mark: str, within: float = 10) -> None:
    """Every process started with ``AMQPCAP_TEST_RUN=mark`` in its environment is gone (within
    ``within`` seconds)."""
    from test_spark_stats_queue import processes_with

    deadline = time.monotonic() + within
    while processes_with(f"AMQPCAP_TEST_RUN={mark}".encode()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(f"AMQPCAP_TEST_RUN={mark}".encode()) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the processes through /proc")
def test_spark_command_ends_its_jvm_as_it_leaves_quietly_with_the_class_archive_it_recorded_in_place(
    tmp_path,
):
    """``amqpcap spark`` does not stop its session before it leaves (``session.let_go``): the JVM
    it ends as it leaves stops it, no process of the run is left, nothing reaches stderr (pyspark's
    threads see the JVM's connections close), and the first run's class archive is in place."""
    exe = os.path.join(os.path.dirname(sys.executable), "amqpcap")
    mark = uuid.uuid4().hex  # (in the environment of every process it starts)
    capture = str(ROOT / "captures" / "rabbitmq091_pika_full.pcap")
    out = str(tmp_path / "out")
    cmd = [exe, "spark", capture, "-o", out, "--master", "local[2]", "--split-size", "64k"]
    env = {**os.environ, "AMQPCAP_TEST_RUN": mark, "TMPDIR": str(tmp_path)}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert "1 split by conversation, 1 task(s)" in p.stdout  # (a Spark task ran: the session was up)
    want = str(tmp_path / "dissect")
    dissect([capture], want)
    assert_same_dataset(out, want, ["connections", "methods", "messages", "anomalies"])
    assert_no_process_left(mark)
    archives = [f.name for f in (tmp_path / "amqpcap-spark").iterdir() if f.name.startswith("classes-")]
    assert len(archives) == 1 and archives[0].endswith(".jsa"), archives
