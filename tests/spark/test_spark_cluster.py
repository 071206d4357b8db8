"""`amqpcap spark` where Spark runs: a standalone cluster (a master and two workers started
from pyspark's own bin/spark-class) and a Spark Connect server (pyspark's spark-submit), both
on loopback, one of each for the module, stopped at the end."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
from test_spark_job import CAPTURES, assert_same_dataset

from amqpcap.pipeline import dissect

ROOT = Path(__file__).resolve().parents[2]
TABLES = ["connections", "methods", "messages", "anomalies"]


def _spark_home() -> str:
    """pyspark's directory; without pyspark or Java a skip, a failure in CI (AMQPCAP_REQUIRE_TOOLS)."""
    missing = pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip
    try:
        import pyspark
    except ImportError:
        missing("pyspark is not installed")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        missing("java is not installed")
    return os.path.dirname(pyspark.__file__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra) -> dict:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    env.update(SPARK_HOME=_spark_home(), **extra)
    return env


def _wait_for(what: str, check, procs, timeout: float = 180) -> None:
    t0 = time.monotonic()
    while not check():
        if any(p.poll() is not None for p in procs):
            raise RuntimeError(f"{what}: a process exited")
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{what}: not up after {timeout} s")
        time.sleep(0.5)


def _stop(procs) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    """spark://127.0.0.1:PORT with two one-core workers."""
    home = _spark_home()
    d = tmp_path_factory.mktemp("standalone")
    port = _free_port()
    cls = os.path.join(home, "bin", "spark-class")
    logs = [open(d / f"{n}.log", "w") for n in ("master", "worker1", "worker2")]  # noqa: SIM115
    env = _env(SPARK_LOG_DIR=str(d), SPARK_WORKER_DIR=str(d / "work"))
    procs = [
        subprocess.Popen(
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
            + ["--webui-port", str(_free_port())],
            env=env,
            stdout=logs[0],
            stderr=subprocess.STDOUT,
        )
    ]
    url = f"spark://127.0.0.1:{port}"
    try:
        for i in (1, 2):
            procs.append(
                subprocess.Popen(
                    [cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
                    + ["--cores", "1", "--memory", "1g", "--webui-port", str(_free_port())],
                    env=env,
                    stdout=logs[i],
                    stderr=subprocess.STDOUT,
                )
            )
        _wait_for(
            "standalone cluster",
            lambda: (d / "master.log").read_text().count("Registering worker") >= 2,
            procs,
        )
        yield url
    finally:
        _stop(procs)
        for f in logs:
            f.close()


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """sc://127.0.0.1:PORT: a Spark Connect server in local[2] mode."""
    home = _spark_home()
    pytest.importorskip("grpc", reason="the spark extra installs Spark Connect's client")
    d = tmp_path_factory.mktemp("connect")
    port = _free_port()
    log = open(d / "server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [os.path.join(home, "bin", "spark-submit"), "--class"]
        + ["org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]"]
        + ["--conf", f"spark.connect.grpc.binding.port={port}"]
        + ["--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false"]
        + ["spark-internal"],
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for(
            "connect server", lambda: "Spark Connect server started" in (d / "server.log").read_text(), [proc]
        )
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop([proc])
        log.close()


@pytest.fixture(scope="module")
def dissected(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("dissect") / "out")
    dissect(CAPTURES, out)
    return out


def _spark(args, env=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "amqpcap.spark", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_a_standalone_cluster_writes_what_dissect_writes(master, dissected, tmp_path):
    out = tmp_path / "out"
    p = _spark([*CAPTURES, "-o", str(out), "--master", master, "--split-size", "200k"], env=_env())
    assert p.returncode == 0, p.stderr
    assert "split by conversation" in p.stdout
    assert p.stderr == ""  # no JVM or Spark chatter
    assert_same_dataset(str(out), dissected, TABLES)


def test_executors_without_amqpcap_are_one_line_and_exit_7(master, tmp_path):
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # the same Python, without amqpcap or pyarrow
    p = _spark(
        [CAPTURES[0], "-o", str(tmp_path / "out"), "--master", master],
        env=_env(PYSPARK_PYTHON=str(bare / "bin" / "python")),
    )
    assert p.returncode == 7, p.stderr
    assert re.fullmatch(r"amqpcap: executors cannot import amqpcap: .*PYSPARK_PYTHON.*\n", p.stderr), p.stderr
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob("out.tmp-spark-*"))


def test_spark_connect_writes_what_dissect_writes(connect_server, dissected, tmp_path):
    out = tmp_path / "out"
    p = _spark([*CAPTURES, "-o", str(out), "--remote", connect_server, "--split-size", "200k"], env=_env())
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert_same_dataset(str(out), dissected, TABLES)


def test_the_library_entry_takes_a_spark_connect_session(connect_server, dissected, tmp_path):
    code = (
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "from amqpcap.spark import run\n"
        f"spark = SparkSession.builder.remote({connect_server!r}).getOrCreate()\n"
        f"s = run(spark, {CAPTURES!r}, {str(tmp_path / 'out')!r}, split_size=100_000)\n"
        "print(s.captures, len(s.split))\n"
        "spark.stop()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=_env())
    assert p.returncode == 0, p.stderr
    captures, split = map(int, p.stdout.split())
    assert captures == len(CAPTURES) and split >= 4
    assert_same_dataset(str(tmp_path / "out"), dissected, TABLES)


def _stats(args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "amqpcap.cli", "stats", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.mark.parametrize("where", ["standalone", "connect"])
def test_stats_spark_on_a_cluster_prints_the_json_of_the_pandas_stats(where, request, dissected):
    url = request.getfixturevalue("master" if where == "standalone" else "connect_server")
    p = _stats(
        [
            dissected,
            "--spark",
            "--spark-from",
            "0",
            "--json",
            "--master" if where == "standalone" else "--remote",
            url,
        ],
        _env(),
    )
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    want = _stats([dissected, "--json"])
    assert want.returncode == 0 and p.stdout == want.stdout
