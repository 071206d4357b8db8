"""Spark's Python worker daemon for local sessions, with what every task needs imported before
it forks the workers (``spark.python.daemon.module``, set by ``session.build`` in local mode).

pyspark's own daemon imports pyspark's core only; each worker it forks then imports
``pyspark.worker`` and, with the first task's function, pyarrow, numpy and amqpcap: about
0.6 CPU s a worker, paid by every core's worker (pyarrow is not among amqpcap's imports: the
writer imports it when it first writes, so it is named here).  Imported here, the workers share them (the
fork copies the pages only as they change; ``gc.freeze`` keeps the collector from touching them).
Not used on clusters: an executor without amqpcap must fail as a task (``errors.py`` names the
fix), not as a daemon that never starts.
"""

import gc
import os

# tasks do no linear algebra: no BLAS thread pool started before the fork
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pyarrow.ipc  # noqa: E402, F401  (the workers' Arrow stream, the tasks' results)
import pyarrow.parquet  # noqa: E402, F401  (the tasks' writers)
import pyspark.worker  # noqa: E402, F401
from pyspark.daemon import manager  # noqa: E402

import amqpcap.spark.job  # noqa: E402, F401

if __name__ == "__main__":
    gc.freeze()
    manager()
