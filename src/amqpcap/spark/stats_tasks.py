"""``amqpcap stats OUT --spark`` (``amqpcap.spark.stats``): the parts of the pandas ``stats`` as Spark tasks.

Each work item is some parts of :func:`amqpcap.analysis.summary.stats_parts` (the pandas path's
own code: its passes read the output's Parquet files with pyarrow, batch by batch) or the
Connections table; its result is small (counts, latency summaries, error groups, the table's
rows).  The driver merges them and assembles the report with
:func:`~amqpcap.analysis.summary.stats_of_parts`, so the JSON and the text are the pandas
``stats``' by construction.

The items form one queue (:class:`~amqpcap.spark.claims.Claims`), costliest first.  The driver
takes items from the start, while its session starts (the JVM's start is most of a small
report's time); once the session is up, Spark tasks (``mapInArrow`` over a DataFrame of one row
per task, so clusters run it too) take items beside it, each item computed exactly once by
whoever is free first.  When the driver is done before the session is up, the report needs no
Spark at all (the command gives the session up).  Over Spark Connect, whose executors need not
reach the client, the items left when the session is up are dealt out one a task instead.

A task holds what the pandas ``stats`` holds of its part, so an output whose Parquet files
exceed :data:`PARTS_UP_TO` bytes goes to the per-conversation Spark jobs of
:mod:`amqpcap.spark.summary` instead, where no task holds a whole table's part.  An output on
shared storage (``s3://...``, see :mod:`amqpcap.spark.storage`) is copied to a local temporary
directory by each process that takes an item (tables are a few percent of the captures' bytes);
a local path must be seen by every executor at the driver's path.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import tempfile
import threading
import time

__all__ = ["stats", "stats_and_connections", "without_spark", "Report", "TASKS", "PARTS_UP_TO", "SPARK_FROM"]

# The work items, costliest first (whoever is free takes the next one, so all end at about the
# same time): tuples of stats parts (analysis.summary.STATS_PARTS) computed by one taker;
# health reads what consumer_ack found of unacked deliveries, so they share an item.
# CONNECTIONS: the busiest connections of the text report.
CONNECTIONS = "connections"
TASKS = (
    ("throughput",),
    ("consumer_ack", "health"),
    ("confirm",),
    (CONNECTIONS,),
    ("rpc",),
    ("errors",),
    ("transit",),
    ("method_rtt",),
    ("connection_setup",),
    ("span",),
    ("counts", "amqp10"),
)

# Parquet bytes of an output beyond which stats --spark runs the per-conversation jobs (a part's
# task would hold about what the pandas stats holds: several times these bytes at the peak)
PARTS_UP_TO = 2 << 30

# Bytes of an output's files from which ``stats --spark`` starts a session (``--spark-from``):
# below, the pandas stats (two processes) is computed instead: a local session on two cores was
# slower than it at each size measured (docs/spark.md, "When Spark pays")
SPARK_FROM = PARTS_UP_TO


def output_bytes(out: str) -> int:
    """The bytes of the files of the output directory ``out`` (a path or a storage URI)."""
    if "://" in out:
        from amqpcap.spark import storage

        return sum(f.size for f in storage.listing(storage.locate(out)))
    return sum(os.path.getsize(os.path.join(root, f)) for root, _d, files in os.walk(out) for f in files)


@contextlib.contextmanager
def local_output(out: str):
    """A local directory holding the output ``out``: ``out`` itself when it is a path, else a
    temporary copy of the files at the URI (removed on exit)."""
    if "://" not in out:
        yield out
        return
    from amqpcap.spark import storage

    tmp = tempfile.mkdtemp(prefix="amqpcap-stats-")
    try:
        loc = storage.locate(out)
        if loc.local:
            yield loc.path
            return
        storage.fetch(loc, tmp)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class Fetched:
    """The local directory of ``out`` (:func:`local_output`), copied at the first :meth:`path`."""

    def __init__(self, out: str, stack: contextlib.ExitStack) -> None:
        self.out, self.stack, self.dir = out, stack, None

    def path(self) -> str:
        if self.dir is None:
            self.dir = self.stack.enter_context(local_output(self.out))
        return self.dir


def without_spark(out: str, connections: bool = False) -> tuple:
    """(the ``stats --json`` dict of the output ``out``, its Connections table when
    ``connections`` else None) computed as the pandas ``stats`` computes them, without Spark."""
    from amqpcap.analysis import stats
    from amqpcap.analysis.summary import BUSIEST_CONNECTIONS, connections_table

    with local_output(out) as local:
        result = stats(local)
        return result, connections_table(local, BUSIEST_CONNECTIONS) if connections else None


def part_task(item: tuple, *, out: str):
    """A work item: the stats parts ``item`` of the local output ``out`` (a dict), or its
    Connections table."""
    from amqpcap.analysis.summary import BUSIEST_CONNECTIONS, connections_table, stats_parts

    if item == (CONNECTIONS,):
        return connections_table(out, BUSIEST_CONNECTIONS)
    return stats_parts(out, item)


def merged(parts: list) -> dict:
    """The dicts of :func:`~amqpcap.analysis.summary.stats_parts` of disjoint parts, as one."""
    got: dict = {"latency": {}}
    for p in parts:
        got["latency"].update(p["latency"])
        got.update({k: v for k, v in p.items() if k != "latency"})
    return got


def _task_body(items: list, out: str, address, dealt, env: dict):
    """mapInArrow body of a task: the items it takes from the driver at ``address``
    (:func:`~amqpcap.spark.claims.claim`), or with ``dealt`` (no address) the one item
    ``dealt[partition]``; each as a row ``(item, pickled (result, (wall, cpu)))``."""

    def body(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        from amqpcap.spark import storage
        from amqpcap.spark.claims import claim
        from amqpcap.spark.job import one_row
        from amqpcap.spark.stats_tasks import part_task as compute  # (the executor's module)

        if any(os.environ.get(k) != v for k, v in env.items()):
            os.environ.update(env)
            storage.forget()
        for _ in batches:  # (the partition's one row says nothing more)
            pass
        ctx = TaskContext.get()
        part, attempt = ctx.partitionId(), ctx.attemptNumber()
        schema = pa.schema([("id", pa.int64()), ("result", pa.binary())])
        with contextlib.ExitStack() as stack:
            local = Fetched(out, stack)
            while True:
                i = claim(address, part, attempt) if address else (dealt[part] if dealt else None)
                if i is None:
                    return
                t0, c0 = time.perf_counter(), time.process_time()
                res = compute(items[i], out=local.path())
                took = (time.perf_counter() - t0, time.process_time() - c0)
                got = pickle.dumps((res, took), protocol=pickle.HIGHEST_PROTOCOL)
                yield pa.RecordBatch.from_arrays(one_row(i, got), schema=schema)
                if not address:
                    return

    return body


class Report:
    """One ``stats --spark`` report of the output ``out``: its work items (the Connections table's
    too when ``connections``) taken by the driver's thread (:meth:`start`) and, once a session is
    up, by Spark tasks (:meth:`finish`)."""

    def __init__(self, out: str, connections: bool = False) -> None:
        from amqpcap.spark.claims import Claims

        self.out = out
        self.items = [t for t in TASKS if connections or t != (CONNECTIONS,)]
        self.claims = Claims(len(self.items))
        self.results: dict = {}
        self.by_driver = 0
        self.error: BaseException | None = None
        self._cond = threading.Condition()
        self.thread: threading.Thread | None = None

    def start(self) -> Report:
        """The driver takes items in a daemon thread (a run that ends early, e.g. Ctrl-C or no
        session, does not wait for it) until none is left: while the session starts, and
        beside the tasks after (it has no start of its own to pay)."""
        self.thread = threading.Thread(target=self._drive, name="amqpcap-stats", daemon=True)
        self.thread.start()
        return self

    def _drive(self) -> None:
        try:
            with contextlib.ExitStack() as stack:
                local = Fetched(self.out, stack)
                for i in iter(self.claims.take, None):
                    got = part_task(self.items[i], out=local.path())
                    with self._cond:
                        self.results[i] = got
                        self.by_driver += 1
                        self._cond.notify_all()
        except BaseException as e:  # handed to whoever waits for the results
            with self._cond:
                self.error = e
                self._cond.notify_all()

    def _over(self) -> bool:
        return self.error is not None or len(self.results) == len(self.items)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every item is computed (False: ``timeout`` seconds passed first; the
        driver's error raised)."""
        with self._cond:
            self._cond.wait_for(self._over, timeout)
            if self.error is not None:
                raise self.error
            return len(self.results) == len(self.items)

    def finish(self, spark, progress: bool = False) -> None:
        """The items left, as Spark tasks of ``spark``; returns when every item is computed."""
        from amqpcap.spark.job import Progress, storage_env
        from amqpcap.spark.session import pandas_version_warning_off
        from amqpcap.spark.stages import is_connect, parallelism, result_schema

        prog = Progress(spark, progress, "stats")
        if self.by_driver:
            prog.line(f"{self.by_driver} of {len(self.items)} parts computed while Spark started")
        address = dealt = None
        if is_connect(spark):  # (its executors need not reach this process)
            dealt = [i for i in iter(self.claims.take, None)]
            n = len(dealt)
        else:
            n = min(self.claims.left(), parallelism(spark))
            if n:
                host = spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")
                address = self.claims.serve(host)
        try:
            if n:
                body = _task_body(self.items, self.out, address, dealt, storage_env())
                with pandas_version_warning_off():
                    df = spark.range(0, n, 1, numPartitions=n).mapInArrow(body, result_schema())
                    rows = prog.stage("parts", df.collect)
                with self._cond:
                    for r in rows:
                        self.results[r["id"]] = pickle.loads(r["result"])[0]
                    self._cond.notify_all()
        finally:
            self.claims.close()
        self.wait()

    def result(self) -> tuple:
        """(the ``stats --json`` dict, the Connections table or None), once every item is computed."""
        from amqpcap.analysis.summary import stats_of_parts

        self.wait()
        got = [self.results[i] for i in range(len(self.items))]
        table = got.pop(self.items.index((CONNECTIONS,))) if (CONNECTIONS,) in self.items else None
        return stats_of_parts(merged(got)), table


def stats_and_connections(spark, out: str, connections: bool = False, progress: bool = False) -> tuple:
    """(the ``stats --json`` dict of the dissect or spark output directory ``out``, its
    Connections table when ``connections`` else None); ``progress``: lines on stderr."""
    if output_bytes(out) > PARTS_UP_TO:
        return _by_conversations(spark, out, connections, progress)
    report = Report(out, connections).start()
    report.finish(spark, progress)
    return report.result()


def _by_conversations(spark, out: str, connections: bool, progress: bool) -> tuple:
    from amqpcap.spark import summary

    result = summary.stats(spark, out, progress=progress)
    return result, summary.busiest_connections(spark, out) if connections else None


def stats(spark, out: str, progress: bool = False) -> dict:
    """The ``stats --json`` dict of the dissect (or spark) output directory ``out``;
    ``progress``: a line per step on stderr."""
    return stats_and_connections(spark, out, progress=progress)[0]
