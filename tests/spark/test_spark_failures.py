"""`amqpcap spark` fails like dissect fails: each cause is one line naming it and the fix, with its
documented exit code, no traceback, and nothing left of the output. Every cause is made for real:
nothing listens where the master or the Spark Connect server should be, the output is on a full
filesystem (a small tmpfs in a mount namespace of its own), the Python workers get less memory
than they need (spark.executor.pyspark.memory), a task raises, a standalone worker's executor is
killed mid-job."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = str(ROOT / "captures")


def _spark(args, env=None, timeout=600, prefix=()):
    return subprocess.run(
        [*prefix, sys.executable, "-m", "amqpcap.spark", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tools():
    """pyspark and Java, as the Spark tests' conftest requires them."""
    pytest.importorskip("pyspark")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        pytest.skip("java is not installed")


def _one_line(p, pattern: str, code: int) -> None:
    assert p.returncode == code, p.stderr
    assert re.fullmatch(f"amqpcap: {pattern}\n", p.stderr), p.stderr


@pytest.mark.parametrize(
    "where, line",
    [
        ("--remote sc://127.0.0.1:{port}", "cannot reach the Spark Connect server: check --remote .*"),
        ("--master spark://127.0.0.1:{port}", "cannot reach the Spark master: check --master .*"),
    ],
)
def test_nothing_listening_at_the_master_or_connect_server_is_one_line_and_exit_7_in_seconds(
    tools, tmp_path, where, line
):
    t0 = time.monotonic()
    opts = where.format(port=_free_port()).split()
    p = _spark([CAPTURES, "-o", str(tmp_path / "out"), *opts], timeout=300)
    _one_line(p, line, 7)
    assert time.monotonic() - t0 < 60  # Spark alone retries for minutes
    assert os.listdir(tmp_path) == []


def test_a_full_disk_under_the_output_is_one_line_exit_3_and_leaves_nothing(tools, tmp_path):
    """The output on a 48 KiB tmpfs (the dataset needs several times that): the tasks' Parquet
    writes fail with ENOSPC. The mount lives in a namespace of the run's own, so the listing of
    what is left is made inside it."""
    if not shutil.which("unshare"):
        pytest.fail("unshare (util-linux) is needed to mount a small filesystem")
    small = tmp_path / "small"
    small.mkdir()
    script = 'mount -t tmpfs -o size=48k tmpfs "$0" || exit 99; "$@"; rc=$?; ls -A "$0"; exit $rc'
    p = _spark(
        [CAPTURES, "-o", str(small / "out"), "--master", "local[2]"],
        prefix=["unshare", "--mount", "--map-root-user", "sh", "-c", script, str(small)],
    )
    assert p.returncode != 99, "cannot mount a tmpfs in a user and mount namespace here"
    _one_line(p, r"no space left on device \(output, scratch or spark.local.dir\): .*", 3)
    assert p.stdout == ""  # no summary, and nothing left on the full filesystem


def test_python_workers_out_of_memory_are_one_line_and_exit_7(tools, tmp_path):
    p = _spark(
        [CAPTURES, "-o", str(tmp_path / "out"), "--master", "local[2]"]
        + ["--conf", "spark.executor.pyspark.memory=200m"]
    )
    _one_line(p, r"a task ran out of memory: give executors more \(.*spark.executor.pyspark.memory.*", 7)
    assert os.listdir(tmp_path) == []


def test_a_task_error_is_one_line_naming_the_capture_and_the_task(tools, tmp_path):
    """A dissection that raises (planted in the workers through sitecustomize): one line, with
    the capture, the task, the error's type and message."""
    plant = tmp_path / "plant"
    plant.mkdir()
    (plant / "sitecustomize.py").write_text(
        "import os\n"
        "if os.environ.get('FAIL_CAPTURE'):\n"
        "    import amqpcap.pipeline as p\n"
        "    run = p.Dissector.run\n"
        "    def failing(self, source, progress=None):\n"
        "        if self.capture.endswith(os.environ['FAIL_CAPTURE']):\n"
        "            raise ValueError('decoder state broken')\n"
        "        return run(self, source, progress)\n"
        "    p.Dissector.run = failing\n"
    )
    cap = ROOT / "captures" / "rabbitmq091_pyamqp_basic.pcap"
    assert cap.exists()
    env = dict(os.environ, PYTHONPATH=str(plant), FAIL_CAPTURE="rabbitmq091_pyamqp_basic.pcap")
    p = _spark([str(cap), "-o", str(tmp_path / "out"), "--master", "local[2]"], env=env)
    _one_line(
        p,
        r"a Spark task failed: \S*rabbitmq091_pyamqp_basic.pcap, task \d+: ValueError: decoder state broken",
        7,
    )
    assert sorted(os.listdir(tmp_path)) == ["plant"]
