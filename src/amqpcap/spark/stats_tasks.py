"""``amqpcap stats OUT --spark`` (``amqpcap.spark.stats``): the parts of the pandas ``stats`` as Spark tasks.

Each task runs some parts of :func:`amqpcap.analysis.summary.stats_parts` (the pandas path's own
code: its passes read the output's Parquet files with pyarrow, batch by batch) on the output
directory and returns their small results (counts, latency summaries, error groups, or the
Connections table's rows); the driver merges them and assembles the report with
:func:`~amqpcap.analysis.summary.stats_of_parts`, so the JSON and the text are the pandas
``stats``' by construction.  The JVM only schedules the tasks (``mapInArrow`` over a DataFrame
of work items, so Spark Connect and clusters run it too): no table row goes through it.  The
command computes the costliest part on the driver while its session starts
(:func:`start_on_driver`).

A task holds what the pandas ``stats`` holds of its part, so an output whose Parquet files
exceed :data:`PARTS_UP_TO` bytes goes to the per-conversation Spark jobs of
:mod:`amqpcap.spark.summary` instead, where no task holds a whole table's part.  Every executor
must see the output directory at the driver's path (a local run, or shared storage mounted
alike).
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import Future

__all__ = ["stats", "stats_and_connections", "start_on_driver", "TASKS", "PARTS_UP_TO"]

# The work items, costliest first (a free Spark slot takes the next one, so two slots end at
# about the same time): tuples of stats parts (analysis.summary.STATS_PARTS) computed by one
# task; health reads what consumer_ack found of unacked deliveries, so they share a task.
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


def output_bytes(out: str) -> int:
    """The bytes of the files of the output directory ``out``."""
    return sum(os.path.getsize(os.path.join(root, f)) for root, _d, files in os.walk(out) for f in files)


def part_task(item: tuple, *, out: str):
    """A task: the stats parts ``item`` of the output ``out`` (a dict), or its Connections table."""
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


def start_on_driver(out: str) -> Future | None:
    """The costliest part (``TASKS[0]``) of the output ``out``, computed in a thread of the driver
    while its session starts (the JVM's start is most of a small report's time; the part reads
    Parquet files only, so it shares no lock with the session); None when ``out`` goes to the
    per-conversation jobs.  The thread is a daemon: a run that ends early (Ctrl-C, a failed
    stage, no session) exits without waiting for it."""
    if output_bytes(out) > PARTS_UP_TO:
        return None
    fut: Future = Future()

    def run():
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(part_task(TASKS[0], out=out))
        except BaseException as e:  # handed to whoever waits on the result
            fut.set_exception(e)

    threading.Thread(target=run, name="amqpcap-stats", daemon=True).start()
    return fut


def stats_and_connections(
    spark, out: str, connections: bool = False, progress: bool = False, started: Future | None = None
) -> tuple:
    """(the ``stats --json`` dict of the dissect or spark output directory ``out``, its
    Connections table when ``connections`` else None); ``progress``: lines on stderr;
    ``started``: :func:`start_on_driver`'s part, left out of the tasks."""
    from amqpcap.analysis.summary import stats_of_parts
    from amqpcap.spark.job import Progress, run_stage

    if output_bytes(out) > PARTS_UP_TO:
        return _by_conversations(spark, out, connections, progress)
    items = [t for t in TASKS if (connections or t != (CONNECTIONS,)) and (started is None or t != TASKS[0])]
    prog = Progress(spark, progress, "stats")
    got = prog.stage("parts", lambda: run_stage(spark, items, functools.partial(part_task, out=out)))
    table = got.pop(items.index((CONNECTIONS,))) if connections else None
    if started is not None:
        got.append(started.result())
    return stats_of_parts(merged(got)), table


def _by_conversations(spark, out: str, connections: bool, progress: bool) -> tuple:
    from amqpcap.spark import summary

    result = summary.stats(spark, out, progress=progress)
    return result, summary.busiest_connections(spark, out) if connections else None


def stats(spark, out: str, progress: bool = False) -> dict:
    """The ``stats --json`` dict of the dissect (or spark) output directory ``out``;
    ``progress``: a line per step on stderr."""
    return stats_and_connections(spark, out, progress=progress)[0]
