"""One local[2] SparkSession for the whole test session (JVM start is 5-30 s).

Without pyspark or Java the Spark tests skip and say why, unless AMQPCAP_REQUIRE_TOOLS
is set (scripts/test.sh sets it in CI, after installing both): then they fail.
"""

from __future__ import annotations

import os
import shutil

import pytest


def _missing(why: str):
    if os.environ.get("AMQPCAP_REQUIRE_TOOLS"):
        pytest.fail(f"{why} (AMQPCAP_REQUIRE_TOOLS set)")
    pytest.skip(f"{why}: run scripts/test.sh (installs the spark extra and a JRE)")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _missing("pyspark is not installed")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        _missing("java is not installed")
    from amqpcap.spark import session

    s = session.build(
        "local[2]",
        app="amqpcap-tests",
        conf={
            "spark.local.dir": str(tmp_path_factory.mktemp("spark-local")),
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
        },
    )
    yield s
    s.stop()


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    """The dissect output of the bundled rabbitmq091 captures (a module's own ``output`` replaces it)."""
    from pathlib import Path

    from amqpcap.pipeline import dissect

    captures = sorted((Path(__file__).resolve().parents[2] / "captures").glob("rabbitmq091*.pcap"))
    out = str(tmp_path_factory.mktemp("rabbitmq091") / "out")
    dissect([str(p) for p in captures], out)
    return out
