"""A Spark session started in a thread, so the driver works while the JVM starts, and given up
(the JVM being launched ended) when the work is done before it is up."""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["Starting"]

# what the command lines of the processes launching the driver's JVM hold (pyspark runs
# bin/spark-submit, which execs bin/spark-class, which execs java ... SparkSubmit)
LAUNCHER_MARKS = (b"spark-submit", b"spark-class", b"org.apache.spark.deploy.SparkSubmit")


def launching_jvms() -> list:
    """The child processes of this one that launch a Spark driver JVM (Linux: /proc; elsewhere
    none is found and a given-up session is stopped once it is up)."""
    me, found = os.getpid(), []
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if any(m in cmd for m in LAUNCHER_MARKS):
            found.append(pid)
    return found


class Starting:
    """``open_session()`` (a ``(session, ours)`` pair) run in a daemon thread; :attr:`ready` is
    set when it returned or raised.  Whoever started it ends it with :meth:`give_up`, before
    writing to stderr: a quiet start points the process's stderr at the JVM's log meanwhile
    (``session.jvm_stderr_to``)."""

    def __init__(self, open_session) -> None:
        self._before = set(launching_jvms())  # (a session of this process already up stays so)
        self.ready = threading.Event()
        self._got = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(open_session,), name="amqpcap-session", daemon=True
        )
        self._thread.start()

    def _run(self, open_session) -> None:
        try:
            self._got = open_session()
        except BaseException as e:  # (raised by result())
            self._error = e
        finally:
            self.ready.set()

    def done(self) -> bool:
        """Whether the session is up or failed to start (the driver's work goes on until then)."""
        return self.ready.is_set()

    @property
    def error(self) -> BaseException | None:
        """The error the start raised (None: up, or still starting)."""
        return self._error if self.ready.is_set() else None

    def result(self):
        """The ``(session, ours)`` pair, once up (its error raised)."""
        self.ready.wait()
        if self._error is not None:
            raise self._error
        return self._got

    def give_up(self, stop, wait: float = 30.0) -> None:
        """Done with the session: one that is up, or came up anyway, is handed to
        ``stop(session, ours)``; a JVM still launching (the work was done before it was up) is
        sent SIGTERM (pyspark then removes what it made and raises in the thread, silently)."""
        if not self.ready.is_set():
            for pid in set(launching_jvms()) - self._before:
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
        self._thread.join(wait)
        if self.ready.is_set() and self._error is None and self._got is not None:
            stop(*self._got)
