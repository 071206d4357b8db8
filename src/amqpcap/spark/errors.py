"""What went wrong on Spark, in one line a cluster user can act on, with its exit code.

Spark hands a failure back as a Java or Python exception whose text holds the whole story
(executor stack traces, the Python worker's traceback); ``explain`` finds the cause in it.
"""

from __future__ import annotations

import re

from amqpcap.exitcodes import Exit

#: What a job cancelled by watch.Executors failed of (no executor left to run its tasks).
EXECUTORS_LOST = "every executor was lost and none came back"

#: (pattern in the failure's text, the line, exit code); the first that matches wins.
CAUSES = (
    (
        r"No module named '?(amqpcap|pyarrow|numpy)",
        "executors cannot import amqpcap: give them a Python that has it (PYSPARK_PYTHON="
        "/path/to/venv/bin/python on every worker, or a packed venv: --archives venv.tar.gz#env "
        "with PYSPARK_PYTHON=./env/bin/python)",
        Exit.SPARK,
    ),
    (
        r"cannot reach the driver's stats queue",  # (claims.UNREACHABLE)
        "Spark tasks cannot reach the driver to take stats parts: set --conf spark.driver.host="
        "ADDRESS (one of the driver's addresses the executors reach) and let executors connect "
        "to the driver's ports (firewall)",
        Exit.SPARK,
    ),
    (
        r"No space left on device|Errno 28|ENOSPC|Disk quota exceeded",
        "no space left on device (output, scratch or spark.local.dir): free space or write elsewhere",
        Exit.UNREADABLE,
    ),
    (
        r"OutOfMemoryError|Java heap space|exceeding memory limits|Container killed .* memory"
        r"|MemoryError|Cannot allocate memory|failed to map segment from shared object",
        "a task ran out of memory: give executors more (--conf spark.executor.memory=4g, and "
        "spark.executor.pyspark.memory if set; local mode: --conf spark.driver.memory=4g) or "
        "lower --split-size",
        Exit.SPARK,
    ),
    (
        r"All masters are unresponsive|Failed to connect to master|Could not connect to spark://"
        r"|Master .* unresponsive|Invalid master URL|Could not parse Master URL|cannot connect to spark://",
        "cannot reach the Spark master: check --master (spark://HOST:PORT) and that the master runs",
        Exit.SPARK,
    ),
    (
        r"StatusCode.UNAVAILABLE|failed to connect to all addresses|Connection refused.*sc://"
        r"|SparkConnectGrpcException|cannot connect to sc://",
        "cannot reach the Spark Connect server: check --remote (sc://HOST:PORT) and that it runs",
        Exit.SPARK,
    ),
    (
        r"ExecutorLostFailure|Executor heartbeat timed out|Lost executor|worker lost|Worker .* lost"
        r"|Python worker exited unexpectedly|SparkContext was shut down|every executor was lost",
        "a Spark worker died during the job (see the worker's log); run it again, or give it more "
        "memory (--conf spark.executor.memory=4g)",
        Exit.SPARK,
    ),
)

_PY_ERROR = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception)): (.*)$", re.M)
_TASK_FAILED = re.compile(r"TaskFailed: (.*)$", re.M)


class TaskFailed(Exception):
    """A task's error, its text one line naming the capture and the task (``task_failure``)."""


def task_failure(e: BaseException, task: int, capture: str | None) -> str:
    """``CAPTURE, task N: Type: first line of the message`` (the driver's line for it)."""
    text = _text(e).strip()
    msg = text.splitlines()[0] if text else ""
    where = f"{capture}, task {task}" if capture else f"task {task}"
    return f"{where}: {type(e).__name__}" + (f": {msg[:300]}" if msg else "")


def _text(e: BaseException) -> str:
    """``str(e)``, or "" when it fails (a PySpark exception's text asks the JVM, which may be gone)."""
    try:
        return str(e)
    except Exception:
        return ""


_SPARK_MODULES = ("pyspark", "py4j")


def _from_spark(e: BaseException) -> bool:
    """Whether ``e`` is Spark's: a PySpark / py4j type, or raised in their code (a bare
    ``KeyError`` of py4j's protocol when the connection to the JVM broke mid-answer)."""
    if type(e).__module__.startswith(_SPARK_MODULES):
        return True
    tb = e.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith(_SPARK_MODULES):
            return True
        tb = tb.tb_next
    return False


def explain(e: BaseException) -> tuple[str, int] | None:
    """``(one line, exit code)`` for a failure Spark reported; None if it is not one."""
    text = f"{type(e).__name__}: {_text(e)}"
    for pattern, line, code in CAUSES:
        if re.search(pattern, text):
            return line, code
    if isinstance(e, TaskFailed):  # a task the driver ran itself while its session started
        return f"a task failed on the driver: {_text(e)}", Exit.SPARK
    if type(e).__module__.startswith(_SPARK_MODULES):
        named = _TASK_FAILED.findall(text)
        if named:
            return f"a Spark task failed: {named[-1].strip()}", Exit.SPARK
        found = _PY_ERROR.findall(text)
        last = f"{found[-1][0]}: {found[-1][1]}" if found else text.strip().splitlines()[0]
        return f"a Spark task failed: {last[:300]}", Exit.SPARK
    if _from_spark(e):
        first = text.strip().splitlines()[0]
        return (
            f"Spark failed ({first[:200]} in PySpark's link to the JVM; a Spark Python worker or "
            "the JVM may have died: see Spark's log)",
            Exit.SPARK,
        )
    return None
