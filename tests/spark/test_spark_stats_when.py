"""When `stats --spark` starts Spark at all (by the output's size, before any JVM starts), and
the line a cluster user gets when Spark tasks cannot reach the driver's queue of stats parts."""

from __future__ import annotations

import json
import socket

import pytest

from amqpcap.analysis import stats as pandas_stats
from amqpcap.cli import main
from amqpcap.exitcodes import Exit
from amqpcap.spark import cli as spark_cli
from amqpcap.spark import errors
from amqpcap.spark.claims import UNREACHABLE, Claims, claim
from amqpcap.spark.stats_tasks import SPARK_FROM, output_bytes


@pytest.fixture
def no_session_here(monkeypatch):
    """No active session (as on the command line); opening one is recorded and refused."""
    opened = []

    def refused(a, app):
        opened.append(app)
        raise RuntimeError("no session in this test")

    monkeypatch.setattr(spark_cli, "_active_session", lambda a: None)
    monkeypatch.setattr(spark_cli, "_open_session", refused)
    return opened


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # (nothing listens there now)
    return port


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_an_output_under_spark_from_is_computed_without_a_session_as_stats_computes_it(
    output, no_session_here, json_flag, capsys
):
    size = output_bytes(output)
    assert main(["stats", output, "--spark", "--spark-from", str(size + 1), *json_flag]) == 0
    got = capsys.readouterr()
    assert main(["stats", output, *json_flag]) == 0
    assert got.out == capsys.readouterr().out  # byte for byte, the Connections table included
    assert no_session_here == [] and got.err == ""


def test_the_default_spark_from_keeps_a_small_output_off_spark(output, no_session_here, capsys):
    assert output_bytes(output) < SPARK_FROM
    assert main(["stats", output, "--spark", "--json"]) == 0
    assert capsys.readouterr().out.strip() == json.dumps(pandas_stats(output), default=str)
    assert no_session_here == []


def test_an_output_at_spark_from_starts_a_session(output, no_session_here, capsys):
    size = output_bytes(output)
    assert main(["stats", output, "--spark", "--spark-from", str(size)]) == Exit.SPARK
    assert no_session_here == ["amqpcap stats"]
    assert "no session in this test" in capsys.readouterr().err
    assert main(["stats", output, "--spark", "--spark-from", "0"]) == Exit.SPARK  # 0: always
    assert len(no_session_here) == 2


def test_a_task_that_cannot_connect_to_the_driver_raises_the_unreachable_error():
    port = closed_port()
    with pytest.raises(ConnectionError) as got:
        claim(("127.0.0.1", port, "token"), 0, 0)
    assert str(got.value).startswith(f"{UNREACHABLE} at 127.0.0.1:{port} (")
    line, code = errors.explain(RuntimeError(f"PythonException: ConnectionError: {got.value}"))
    assert code == Exit.SPARK and "spark.driver.host" in line and "firewall" in line


def test_stats_spark_tasks_pointed_at_a_closed_port_fail_with_one_line_naming_the_fix(
    spark, output, monkeypatch, capsys
):
    port = closed_port()
    # the tasks are handed a port nothing listens on, as executors that cannot reach the
    # driver's host meet it
    monkeypatch.setattr(Claims, "serve", lambda self, host: (host, port, self.token))
    assert main(["stats", output, "--spark", "--json"]) == Exit.SPARK
    got = capsys.readouterr()
    assert got.out == ""
    assert got.err.splitlines() == [
        "amqpcap: Spark tasks cannot reach the driver to take stats parts: set --conf "
        "spark.driver.host=ADDRESS (one of the driver's addresses the executors reach) and let "
        "executors connect to the driver's ports (firewall)"
    ]
