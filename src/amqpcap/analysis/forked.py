"""A computation run in a forked child process while this one goes on: the second core of the
machine for independent parts of an analysis.  The child is a copy of this process (its imports
and what it has read are shared until written), computes one function and sends back its
result, pickled, through a pipe; nothing else of it outlives it."""

from __future__ import annotations

import os
import pickle
import sys

__all__ = ["Forked", "can_fork"]


def can_fork() -> bool:
    """Whether this platform forks (POSIX)."""
    return hasattr(os, "fork")


class Forked:
    """``fn()`` computed in a forked child; :meth:`result` waits for it and returns its value or
    raises its exception (the child's, pickled; a child that dies without a word: RuntimeError)."""

    def __init__(self, fn):
        sys.stdout.flush()
        sys.stderr.flush()
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: compute, write, leave without running the parent's exit code
            os.close(read)
            code = 0
            try:
                try:
                    data = pickle.dumps((True, fn()), pickle.HIGHEST_PROTOCOL)
                except BaseException as e:  # noqa: BLE001 (handed to the parent, raised there)
                    data = pickle.dumps((False, _picklable(e)), pickle.HIGHEST_PROTOCOL)
                with os.fdopen(write, "wb") as f:
                    f.write(data)
            except BaseException:  # noqa: BLE001 (no pipe left to report on: the exit code says it)
                code = 1
            finally:
                os._exit(code)
        os.close(write)
        self.read = read

    def result(self):
        with os.fdopen(self.read, "rb") as f:
            data = f.read()  # (read before waiting: a result larger than the pipe's buffer)
        os.waitpid(self.pid, 0)
        if not data:
            raise RuntimeError("the forked analysis process ended without a result")
        ok, value = pickle.loads(data)
        if not ok:
            raise value
        return value


def _picklable(e: BaseException) -> BaseException:
    """``e`` when it pickles, else a RuntimeError that names it."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(e).__name__}: {e}")
