"""A cluster that loses every executor mid-job: the job is cancelled rather than left waiting.

Spark reschedules the tasks of a lost executor and waits, without end, for a worker to run them;
with the only worker gone the job never finishes.  ``Executors`` watches a cluster session (not
local mode, where the driver runs the tasks, nor Spark Connect, which has no SparkContext): once
executors have run and none has been left for ``spark.amqpcap.executorLossTimeout`` seconds
(default LOSS_TIMEOUT), it cancels the jobs, and ``lost`` tells the caller why they failed.
"""

from __future__ import annotations

import threading
import time

LOSS_TIMEOUT = 60.0  # s: time for a worker to come back (a restarted one registers in seconds)
POLL = 2.0


class Executors:
    """``start()`` before a job, ``close()`` after it; ``lost`` once it cancelled the job."""

    def __init__(self, spark) -> None:
        self.sc = getattr(spark, "_sc", None)  # None for Spark Connect
        self.lost = False
        self.stop = threading.Event()
        self.thread = None
        self.timeout = LOSS_TIMEOUT
        if self.sc is not None:
            conf = self.sc.getConf().get("spark.amqpcap.executorLossTimeout", str(LOSS_TIMEOUT))
            self.timeout = float(conf)

    def start(self) -> Executors:
        if self.sc is not None and not self.sc.master.startswith("local"):
            self.thread = threading.Thread(target=self._watch, name="amqpcap-executors", daemon=True)
            self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def executors(self) -> int:
        """Executors registered with the driver (the driver's own block manager not counted)."""
        return self.sc._jsc.sc().getExecutorMemoryStatus().size() - 1

    def _watch(self) -> None:
        seen, none_since = False, None
        while not self.stop.wait(POLL):
            try:
                n = self.executors()
            except Exception:  # the context is stopping: nothing left to watch
                return
            if n > 0:
                seen, none_since = True, None
            elif seen:
                none_since = none_since or time.monotonic()
                if time.monotonic() - none_since >= self.timeout:
                    self.lost = True
                    self.sc.cancelAllJobs()
                    return
