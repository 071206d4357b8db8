"""`stats s3://bucket/out --spark`: an output on S3 (moto's server on loopback, the endpoint and
credentials from the AWS environment) gives the report `stats` gives of the same tables on disk,
whether the driver or the Spark tasks compute its parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_spark_storage import s3  # noqa: F401 (the fixture)

from amqpcap.analysis import stats as pandas_stats
from amqpcap.cli import main
from amqpcap.pipeline import dissect
from amqpcap.spark import cli as spark_cli
from amqpcap.spark import stats_tasks, storage
from amqpcap.spark.claims import DRIVER

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def on_s3(s3, tmp_path_factory):  # noqa: F811
    """(the output's URI on S3, the same output on disk)."""
    local = str(tmp_path_factory.mktemp("s3stats") / "out")
    dissect([str(p) for p in sorted((ROOT / "captures").glob("rabbitmq091*.pcap"))], local)
    uri = f"{s3}/stats/out"
    storage.upload_dir(local, storage.locate(uri))
    return uri, local


def test_stats_spark_of_an_output_on_s3_prints_the_pandas_json_and_text(spark, on_s3, capsys):
    uri, local = on_s3
    assert main(["stats", uri, "--spark", "--json"]) == 0
    assert capsys.readouterr().out.strip() == json.dumps(pandas_stats(local), default=str)
    assert main(["stats", uri, "--spark"]) == 0
    got = capsys.readouterr().out
    assert main(["stats", local]) == 0
    assert got == capsys.readouterr().out and "\nConnections" in got


def test_stats_spark_of_a_small_output_on_s3_is_computed_without_a_session(on_s3, monkeypatch, capsys):
    uri, local = on_s3
    monkeypatch.setattr(spark_cli, "_active_session", lambda a: None)
    monkeypatch.setattr(spark_cli, "_open_session", lambda a, app: pytest.fail("a session was opened"))
    assert main(["stats", uri, "--spark"]) == 0
    got = capsys.readouterr()
    assert main(["stats", local]) == 0
    assert got.out == capsys.readouterr().out and got.err == ""


def test_spark_tasks_read_the_output_on_s3(spark, on_s3, monkeypatch):
    uri, local = on_s3
    part_task, reports = stats_tasks.part_task, []

    def driver_part(item, *, out):  # the driver takes one item, the tasks the rest
        got = part_task(item, out=out)
        assert reports[0].claims.tasks_began.wait(300)
        return got

    monkeypatch.setattr(stats_tasks, "part_task", driver_part)
    report = stats_tasks.Report(uri)
    reports.append(report)
    report.start()
    report.finish(spark)
    assert sum(who != DRIVER for who in report.claims.taken.values()) >= 1
    assert json.dumps(report.result()[0], default=str) == json.dumps(pandas_stats(local), default=str)


def test_stats_spark_of_a_missing_s3_output_is_one_line(spark, s3, capsys):  # noqa: F811
    assert main(["stats", f"{s3}/no/such/out", "--spark", "--json"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"amqpcap: {s3}/no/such/out: ")


def test_stats_spark_of_an_s3_output_too_large_for_the_parts_is_one_line(on_s3, monkeypatch, capsys):
    uri, _local = on_s3
    monkeypatch.setattr(stats_tasks, "PARTS_UP_TO", 0)  # (Spark's own reader would not see s3://)
    monkeypatch.setattr(spark_cli, "_open_session", lambda a, app: pytest.fail("a session was opened"))
    assert main(["stats", uri, "--spark", "--json", "--spark-from", "0"]) == 3
    got = capsys.readouterr()
    assert got.out == "" and got.err.count("\n") == 1
    assert got.err.startswith(f"amqpcap: {uri}: stats --spark of an output over 0 GiB reads it with Spark's")
