"""A SparkSession set up for amqpcap (the CLI and ``python -m amqpcap.spark`` use it).

Library callers bring their own session; ``CONF`` lists what amqpcap relies on.
"""
from __future__ import annotations

import os
import sys
import tempfile

#: Settings amqpcap needs whatever the master.
CONF = {
    # the tables keep ``timestamp[ns, UTC]``: Spark reads those as exact ns bigints
    "spark.sql.legacy.parquet.nanosAsLong": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",  # amqpcap prints its own progress lines
}
#: JIT level 1 and the serial GC roughly halve the JVM start in local mode.
JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: Local mode only: no web UI, bound to loopback, scratch space in the temp dir.
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.extraJavaOptions": JVM_FLAGS,
    "spark.executor.extraJavaOptions": JVM_FLAGS,
}


def python_for_workers() -> None:
    """Workers must run this interpreter (the one with amqpcap and pyarrow), not the first on PATH."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def build(master: str = "local[*]", app: str = "amqpcap", conf: dict | None = None):
    """Get or create a SparkSession for ``master`` with :data:`CONF` (and :data:`LOCAL_CONF` in local mode)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise RuntimeError("the Spark job needs pyspark: pip install 'amqpcap[spark]' (and Java 17+)") from None
    python_for_workers()
    b = SparkSession.builder.master(master).appName(app)
    settings = dict(CONF)
    if master.startswith("local"):
        settings.update(LOCAL_CONF)
        settings["spark.local.dir"] = os.path.join(tempfile.gettempdir(), "amqpcap-spark")
    settings.update(conf or {})
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
