"""A SparkSession set up for amqpcap (the CLI and ``python -m amqpcap.spark`` use it).

Library callers bring their own session; ``CONF`` lists what amqpcap relies on.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
import warnings
from urllib.parse import urlsplit

from amqpcap.spark.stages import no_rows, parallelism, result_schema
from amqpcap.spark.starting import Starting

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
    # no session extensions found on the classpath (ServiceLoader): pyspark's jars hold one,
    # Spark ML's function registration, which amqpcap does not use and which costs about 1 CPU s
    # of the JVM's start (Scala reflection); extensions named in spark.sql.extensions still load
    "spark.sql.extensions.test.loadFromCp": "false",
}
#: Local mode, workers running this interpreter: they fork from a daemon that imported
#: pyspark.worker and amqpcap already (``amqpcap.spark.daemon``).
DAEMON_CONF = {"spark.python.daemon.module": "amqpcap.spark.daemon"}
#: Local mode: the JVM maps the classes an earlier run loaded from an archive (class data
#: sharing) instead of reading and verifying them from Spark's jars again: a session started and
#: one small job run in 5.5 instead of 12 CPU s of the JVM.  The first run records the archive
#: as its JVM exits (~150 MB in the temp dir, one per pyspark, Java and flags), its session
#: having run one stage (``build``), so that the archive holds a job's classes too.
CLASS_ARCHIVE = True
#: What a recording holds, part of the archive's name: an archive recorded otherwise (a session
#: alone) is not mapped but recorded anew, and pruned as another's.
ARCHIVE_HOLDS = "a session and one stage"
#: Spark Connect: seconds to open a TCP connection to the server before giving up (the client
#: alone retries an unreachable server for ten minutes), and the client's retries of a call once
#: connected (~15 s of backoff in all: a server gone mid-job is an error, not a wait).
CONNECT_TIMEOUT = 10.0
CONNECT_RETRIES = {"max_retries": 5, "initial_backoff": 50, "backoff_multiplier": 4.0, "max_backoff": 10_000}


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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


_recording: dict = {}  # archive being recorded by this process's JVM -> its final name
#: Class archives of other pyspark / Java / flags (another venv, an upgrade) kept, the most
#: recently used first, and for how long unused (an archive is ~150 MB).
ARCHIVES_KEPT = 2
ARCHIVE_DAYS = 7.0
#: The quiet runs' logs (``spark-PID.log``) kept, newest first, and for how long.
LOGS_KEPT = 20
LOG_DAYS = 1.0


def scratch_dir() -> str:
    """``$TMPDIR/amqpcap-spark``: the class archives, the quiet runs' logs, Spark's local dir."""
    return os.path.join(tempfile.gettempdir(), "amqpcap-spark")


def prune(where: str, current: str | None, now: float | None = None) -> list[str]:
    """Remove from ``where`` the class archives other than ``current`` (a file name) beyond the
    :data:`ARCHIVES_KEPT` last used or unused for :data:`ARCHIVE_DAYS`, and the logs of runs
    that ended beyond the :data:`LOGS_KEPT` newest or older than :data:`LOG_DAYS`.  An archive's
    modification time is its last use (:func:`class_archive` touches it); a JVM that still maps
    a removed archive keeps its pages.  Returns the names removed."""
    now = time.time() if now is None else now
    archives, logs = [], []
    try:
        entries = list(os.scandir(where))
    except OSError:
        return []
    for e in entries:
        try:
            age = now - e.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if e.name.startswith("classes-") and e.name.endswith(".jsa") and e.name != current:
            archives.append((age, e.name))
        stem = e.name.removeprefix("spark-").removesuffix(".log")
        ours = e.name.startswith("spark-") and e.name.endswith(".log") and stem.isdigit()
        if ours and not _pid_alive(int(stem)):
            logs.append((age, e.name))
    gone = []
    for kept, limit, found in ((ARCHIVES_KEPT, ARCHIVE_DAYS, archives), (LOGS_KEPT, LOG_DAYS, logs)):
        for i, (age, name) in enumerate(sorted(found)):
            if i >= kept or age > limit * 86400:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(where, name))
                    gone.append(name)
    return gone


def class_archive() -> str:
    """The JVM flag that maps the class archive of this pyspark, Java and :data:`JVM_FLAGS`, or
    records it if there is none yet ('' if it cannot).  A recording is written by the JVM as it
    exits (after this process let go of it, see :func:`_keep_recording`) under a name of its
    own, and renamed into place only once that JVM ended well: a torn archive crashes the JVM
    that maps it."""
    try:
        import pyspark
    except ImportError:
        return ""
    java = (
        shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin"))
        if os.environ.get("JAVA_HOME")
        else None
    )
    java = os.path.realpath(java or shutil.which("java") or "")
    try:
        java_stamp = os.stat(java).st_mtime_ns
    except OSError:
        return ""
    key = hashlib.sha256(
        repr(
            (
                pyspark.__version__,
                os.path.dirname(pyspark.__file__),
                java,
                java_stamp,
                JVM_FLAGS,
                os.environ.get("SPARK_HOME"),
                os.environ.get("SPARK_CLASSPATH"),
                ARCHIVE_HOLDS,
            )
        ).encode()
    ).hexdigest()[:16]
    where = scratch_dir()
    final = os.path.join(where, f"classes-{key}.jsa")
    prune(where, os.path.basename(final))
    if os.path.exists(final):
        with contextlib.suppress(OSError):
            os.utime(final)  # its last use, for prune()
        return f"-XX:SharedArchiveFile={final}"
    try:
        os.makedirs(where, exist_ok=True)
        names = os.listdir(where)
    except OSError:
        return ""
    for name in names:  # recordings of runs that ended without renaming theirs
        stem, _, pid = name.rpartition(".tmp-")
        if stem.startswith("classes-") and pid.isdigit() and not _pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(where, name))
    tmp = f"{final}.tmp-{os.getpid()}"
    if tmp not in _recording:
        _recording[tmp] = final
        atexit.register(_keep_recording, tmp, final)
    return f"-XX:ArchiveClassesAtExit={tmp}"


def _keep_recording(tmp: str, final: str, timeout: float = 120.0) -> None:
    """At exit: let the JVM go (it exits when its stdin closes), wait for it to write the archive,
    and put the archive in place if the JVM ended well."""
    proc = _driver_jvm()
    _put_in_place(tmp, final, _end_jvm(proc, timeout) if proc is not None else None)


def _driver_jvm():
    """The driver JVM this process launched (pyspark's gateway process), or None (none started,
    a Spark Connect session, or a JVM spark-submit started)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    proc = getattr(SparkContext._gateway, "proc", None)
    return None if proc is None or proc.stdin is None else proc


def _end_jvm(proc, timeout: float) -> int | None:
    """Close the JVM's standard input (pyspark's gateway exits then) and wait: its exit status."""
    try:
        proc.stdin.close()
        return proc.wait(timeout)
    except Exception:  # (not ended in time: no archive then; the next run records one)
        return None


def _put_in_place(tmp: str, final: str, status: int | None) -> None:
    try:
        if status == 0 and os.path.exists(tmp):
            os.replace(tmp, final)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.remove(tmp)


def let_go(timeout: float = 120.0) -> bool:
    """End the driver JVM this process launched as the process's own exit would: its standard
    input closed, pyspark's gateway exits and the JVM's shutdown hook stops the SparkContext (its
    executors and Python workers with it), the work ``spark.stop()`` has the JVM do.  Only a JVM
    recording the class archive is waited for (the archive is then put in place); any other
    ends on its own after the process left (about 0.5 s: the output is committed by then).  For
    a process that ends next (the ``amqpcap`` command, which then leaves without tearing the
    interpreter down), instead of ``spark.stop()``: that also shuts pyspark's accumulator server
    down, which polls for it every 0.5 s (0.6-0.8 s measured), and the interpreter's teardown
    would follow.  The session is unusable afterwards.  The driver's pyspark threads may report
    the connections the JVM closes: standard error points at the run's log (:func:`log_path`)
    from here on.  False: no JVM of this process to end."""
    proc = _driver_jvm()
    if proc is None:
        return False
    sys.stderr.flush()
    with contextlib.suppress(OSError):
        os.makedirs(scratch_dir(), exist_ok=True)
        fd = os.open(log_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 2)
        os.close(fd)
    if not _recording:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        return True
    status = _end_jvm(proc, timeout)
    for tmp, final in _recording.items():
        _put_in_place(tmp, final, status)
    _recording.clear()
    atexit.unregister(_keep_recording)
    return True


def log_path() -> str:
    """Where a quiet run's JVM and Spark output goes."""
    return os.path.join(scratch_dir(), f"spark-{os.getpid()}.log")


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
        reach(remote)
        b = SparkSession.builder.remote(remote)
        # a server's own settings cannot change from a client: the session's SQL ones only
        for k, v in {**CONF, **(conf or {})}.items():
            if k.startswith("spark.sql."):
                b = b.config(k, v)
        with pandas_version_warning_off():
            spark = b.getOrCreate()
        _bounded_retries(spark)
        return spark
    b = SparkSession.builder.appName(app)
    if master and master.startswith("spark://"):
        reach(master)
    if master:
        b = b.master(master)
    settings = dict(CONF)
    if master and master.startswith("local"):
        python_for_workers()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update(LOCAL_CONF)
        if os.environ.get("PYSPARK_PYTHON") == sys.executable:  # not another Python set by the user
            settings.update(DAEMON_CONF)
        settings["spark.local.dir"] = scratch_dir()
        settings.update(worker_arrow_pool())
        archive = class_archive() if CLASS_ARCHIVE else ""
        # the JVM logs to stdout by default (the archive's warnings as it is recorded): to stderr
        flags = f"{JVM_FLAGS} -Xlog:disable -Xlog:all=warning:stderr {archive}".strip()
        settings["spark.driver.extraJavaOptions"] = flags
    else:
        flags, archive = JVM_FLAGS, ""
    if quiet:
        log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
        settings["spark.driver.extraJavaOptions"] = f"{flags} -Dlog4j2.configurationFile=file:{log}"
    settings.update(conf or {})
    for k, v in settings.items():
        b = b.config(k, v)
    with pandas_version_warning_off(), jvm_stderr_to(log_path() if quiet else None):
        spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if archive.startswith("-XX:ArchiveClassesAtExit="):
        # a recording session runs one stage before it is handed over: the archive then holds
        # the classes every job loads (a query planned and run, the executor, the Python runner)
        # and not only the session's, whatever the recording run goes on to do (its input may be
        # done on the driver before any stage of its own runs)
        warm(spark)
    return spark


def start(
    master: str | None = "local[*]", app: str = "amqpcap", conf: dict | None = None, quiet: bool = False
) -> Starting:
    """:func:`build` in a thread: a :class:`~amqpcap.spark.starting.Starting` of the
    ``(session, True)`` pair.  The caller works meanwhile (``job.run`` dissects on the driver
    until the session is up and, see :func:`warm`, its workers started) and ends it with
    ``give_up`` (which stops the session, or ends the JVM still launching when the work needed
    none) before it writes to stderr."""
    return Starting(lambda: (build(master, app=app, conf=conf, quiet=quiet), True))


def warm(spark) -> None:
    """Run a stage of one empty task a core: the first stage of a session plans and compiles its
    query and starts the Python worker daemon and a worker a core (about 2.5 CPU s, most of it
    one process after the other), which a caller working on the driver meanwhile hides; later
    stages find them up (workers are reused, ``CONF``)."""
    n = parallelism(spark)
    with pandas_version_warning_off():
        spark.range(0, n, 1, numPartitions=n).mapInArrow(no_rows, result_schema()).collect()


class Unreachable(ConnectionError):
    """The Spark master or Spark Connect server named does not accept a connection."""


DEFAULT_PORTS = {"sc": 15002, "spark": 7077}


def reach(url: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Raise Unreachable unless ``url`` (``sc://HOST[:PORT][/;params]``, or
    ``spark://HOST[:PORT][,HOST[:PORT]...]``) has a host that accepts a TCP connection within
    ``timeout`` seconds: Spark itself would retry for minutes before saying so."""
    scheme, _, rest = url.partition("://")
    why = "not a HOST:PORT"
    for hostport in rest.split("/")[0].split(";")[0].split(","):
        try:
            where = urlsplit(f"//{hostport}")
            host, port = where.hostname or "localhost", where.port or DEFAULT_PORTS[scheme]
        except ValueError:
            continue
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return
        except OSError as e:
            why = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
    raise Unreachable(f"cannot connect to {url}: {why}")


def _bounded_retries(spark) -> None:
    """The session's client retries a failing call for seconds, not ten minutes."""
    client = getattr(spark, "client", None)
    try:
        from pyspark.sql.connect.client.retries import DefaultPolicy
    except ImportError:  # pragma: no cover - a pyspark without that module: its own policy stays
        return
    if client is not None and hasattr(client, "set_retry_policies"):
        client.set_retry_policies([DefaultPolicy(**CONNECT_RETRIES)])
