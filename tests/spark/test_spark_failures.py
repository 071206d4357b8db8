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
    """pyspark and Java, as the Spark tests' conftest requires them: a skip without them, a
    failure in CI (AMQPCAP_REQUIRE_TOOLS, set by scripts/test.sh, which installs both)."""
    missing = pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip
    try:
        import pyspark  # noqa: F401
    except ImportError:
        missing("pyspark is not installed")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        missing("java is not installed")


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
def test_nothing_listening_at_the_master_or_connect_server_is_one_line_and_exit_7(
    tools, tmp_path, where, line
):
    opts = where.format(port=_free_port()).split()
    p = _spark([CAPTURES, "-o", str(tmp_path / "out"), *opts], timeout=300)
    _one_line(p, line, 7)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["remote", "master"])
def test_an_unreachable_master_or_connect_server_is_refused_before_spark_is_asked_for_a_session(
    tools, monkeypatch, where
):
    """Nothing listening: the session is never asked for (Spark alone would retry the master
    for minutes, the Connect client an unreachable server for ten), and nothing else is
    waited for."""
    from pyspark.sql import SparkSession

    from amqpcap.spark import session

    asked = []
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", lambda self: asked.append(self))
    url = {"remote": "sc://127.0.0.1:{port}", "master": "spark://127.0.0.1:{port}"}[where]
    url = url.format(port=_free_port())
    with pytest.raises(session.Unreachable, match=f"cannot connect to {re.escape(url)}: "):
        session.build(**({"remote": url} if where == "remote" else {"master": url}))
    assert asked == []


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
    # (captures split by conversation: their buckets are tasks, whatever the driver does meanwhile)
    p = _spark(
        [CAPTURES, "-o", str(tmp_path / "out"), "--master", "local[2]", "--split-size", "100k"]
        + ["--conf", "spark.executor.pyspark.memory=200m"]
    )
    _one_line(p, r"a task ran out of memory: give executors more \(.*spark.executor.pyspark.memory.*", 7)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "split, who",
    [
        # split by conversation: its buckets are Spark tasks
        (["--split-size", "4k"], "a Spark task failed"),
        # whole and small: the driver dissects it while its session starts (or a task, if later)
        ([], "a (?:Spark task failed|task failed on the driver)"),
    ],
)
def test_a_task_error_is_one_line_naming_the_capture_and_the_task(tools, tmp_path, split, who):
    """A dissection that raises (planted in the driver and the workers through sitecustomize):
    one line, with the capture, the task, the error's type and message."""
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
    p = _spark([str(cap), "-o", str(tmp_path / "out"), "--master", "local[2]", *split], env=env)
    _one_line(
        p,
        who + r": \S*rabbitmq091_pyamqp_basic.pcap, task \d+: ValueError: decoder state broken",
        7,
    )
    assert sorted(os.listdir(tmp_path)) == ["plant"]


def _executors_under(work: Path) -> list[int]:
    """PIDs of the processes running in an application directory of the worker's ``work``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd.startswith(str(work) + os.sep):
            found.append(int(pid))
    return found


@pytest.fixture
def one_worker(tools, tmp_path):
    """spark://127.0.0.1:PORT with one one-core worker: (url, worker process, its work dir)."""
    import pyspark

    cls = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
    d = tmp_path / "cluster"
    d.mkdir()
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    env.update(SPARK_LOG_DIR=str(d), SPARK_WORKER_DIR=str(d / "work"))
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    log = open(d / "master.log", "w")  # noqa: SIM115
    procs = [
        subprocess.Popen(
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
            + ["--webui-port", str(_free_port())],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            [cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
            + ["--cores", "1", "--memory", "1g", "--webui-port", str(_free_port())],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    try:
        t0 = time.monotonic()
        while "Registering worker" not in (d / "master.log").read_text():
            assert all(p.poll() is None for p in procs) and time.monotonic() - t0 < 240, "cluster not up"
            time.sleep(0.5)
        yield url, procs[1], d / "work"
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for pid in _executors_under(d / "work"):
            os.kill(pid, 9)
        log.close()


def test_a_worker_killed_mid_job_is_one_line_exit_7_and_leaves_nothing(one_worker, tmp_path):
    url, worker, work = one_worker
    out = tmp_path / "out"
    p = subprocess.Popen(
        [sys.executable, "-m", "amqpcap.spark", CAPTURES, "-o", str(out), "--master", url]
        + ["--split-size", "100k", "--conf", "spark.amqpcap.executorLossTimeout=5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
    )
    try:
        t0 = time.monotonic()
        while not (list(tmp_path.glob("out.tmp-spark-*/*")) and _executors_under(work)):  # the job runs
            assert p.poll() is None and time.monotonic() - t0 < 300, p.communicate()
            time.sleep(0.2)
        worker.kill()  # the only worker, then its executor and the executor's Python workers
        for pid in _executors_under(work):
            os.kill(pid, 9)
        _out, err = p.communicate(timeout=300)
    finally:
        p.kill()
    assert p.returncode == 7, err
    assert re.fullmatch(r"amqpcap: a Spark worker died during the job .*\n", err), err
    assert sorted(os.listdir(tmp_path)) == ["cluster"]
