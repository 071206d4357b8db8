"""A SparkSession set up for amqpcap (the CLI and ``python -m amqpcap.spark`` use it).

Library callers bring their own session; ``CONF`` lists what amqpcap relies on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import warnings

#: Settings amqpcap needs whatever the master.
CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",  # amqpcap prints its own progress lines
    # a worker runs task after task: amqpcap imported once, a capture mapped once (ranges.py)
    "spark.python.worker.reuse": "true",
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


@contextlib.contextmanager
def pandas_version_warning_off():
    """pyspark 4 warns that it does not fully support pandas 3 when a session starts and when
    pandas / Arrow functions run; amqpcap uses only the Arrow APIs (tested on pandas 3), so the
    warning would be noise on every run's stderr."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        yield


def default_master(given: str | None) -> str | None:
    """``given``, else ``local[*]`` -- unless spark-submit launched us: then its ``--master`` (None)."""
    if given:
        return given
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[*]"


def python_for_workers() -> None:
    """Workers must run this interpreter (the one with amqpcap and pyarrow), not the first on PATH."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def worker_arrow_pool() -> dict:
    """Local mode: the Python workers write Parquet with Arrow's jemalloc pool, as the dissect
    process does (``cli.ARROW_POOL``; they run this machine's pyarrow, so its build decides),
    unless ARROW_DEFAULT_MEMORY_POOL is set.  bench_spark, 200 MB in 20 files: 0.81 -> 0.75 s."""
    from amqpcap.cli import ARROW_POOL, arrow_pools

    pool = ARROW_POOL["dissect"]
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL") or pool not in arrow_pools():
        return {}
    return {"spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": pool}


@contextlib.contextmanager
def jvm_stderr_to(path: str | None):
    """While the JVM starts, file descriptor 2 points at ``path`` (None: left alone): the JVM,
    and the Python workers it forks, keep writing their chatter there, not on the terminal."""
    if path is None:
        yield
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def log_path() -> str:
    """Where a quiet run's JVM and Spark output goes."""
    return os.path.join(tempfile.gettempdir(), "amqpcap-spark", f"spark-{os.getpid()}.log")


def build(
    master: str | None = "local[*]",
    app: str = "amqpcap",
    conf: dict | None = None,
    quiet: bool = False,
    remote: str | None = None,
):
    """Get or create a SparkSession for ``master`` (None: the one spark-submit set) with :data:`CONF`
    (and :data:`LOCAL_CONF` in local mode), or a Spark Connect session for ``remote``
    (``sc://HOST:PORT``).  ``quiet``: the JVM's output goes to :func:`log_path`, Spark logs errors
    only (the command line)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise RuntimeError(
            "the Spark job needs pyspark: pip install 'amqpcap[spark]' (and Java 17+)"
        ) from None
    if quiet:
        # py4j logs an interrupted call through the root logger ("KeyboardInterrupt while
        # sending command"), which would configure itself onto stderr: a handler of its own
        # keeps such records off the terminal
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        root = logging.getLogger()
        if not root.handlers:
            root.addHandler(logging.NullHandler())
    if remote:
        b = SparkSession.builder.remote(remote)
        # a server's own settings cannot change from a client: the session's SQL ones only
        for k, v in {**CONF, **(conf or {})}.items():
            if k.startswith("spark.sql."):
                b = b.config(k, v)
        with pandas_version_warning_off():
            return b.getOrCreate()
    b = SparkSession.builder.appName(app)
    if master:
        b = b.master(master)
    settings = dict(CONF)
    if master and master.startswith("local"):
        python_for_workers()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update(LOCAL_CONF)
        settings["spark.local.dir"] = os.path.join(tempfile.gettempdir(), "amqpcap-spark")
        settings.update(worker_arrow_pool())
    if quiet:
        log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
        settings["spark.driver.extraJavaOptions"] = f"{JVM_FLAGS} -Dlog4j2.configurationFile=file:{log}"
    settings.update(conf or {})
    for k, v in settings.items():
        b = b.config(k, v)
    with pandas_version_warning_off(), jvm_stderr_to(log_path() if quiet else None):
        spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
