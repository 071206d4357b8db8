"""A computation run in a forked child process while this one goes on: the second core of the
machine for independent parts of an analysis.  The child is a copy of this process (its imports
and what it has read are shared until written), computes the functions it is given (its steps)
one after the other and sends back each one's result, pickled, through a pipe, as soon as it has
it: the caller takes the first while the child computes the next; nothing else of it outlives it.

A ``multiprocessing`` process of the fork context, not a ``ProcessPoolExecutor``: the function is
a closure over this process' state, which a forked process inherits and an executor would have
to pickle."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle

__all__ = ["Forked", "Shared", "can_fork"]

_FORK = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def can_fork() -> bool:
    """Whether this platform forks (POSIX)."""
    return _FORK is not None


class Forked:
    """The functions ``steps`` computed one after the other in a forked child: :meth:`result`
    waits for the next one's value and returns it or raises its exception (the child's, pickled;
    a child that dies without a word: RuntimeError).  One call of :meth:`result` a step, in their
    order: the call for the last waits for the child too."""

    def __init__(self, *steps):
        self._read, write = _FORK.Pipe(duplex=False)
        self._process = _FORK.Process(target=_send, args=(steps, write), daemon=True)
        self._left = len(steps)
        # the objects made so far frozen for the fork: the child's collections then do not walk
        # (and so copy) every page of the parent's imports and data
        gc.freeze()
        try:
            self._process.start()
        finally:
            gc.unfreeze()
        write.close()

    def result(self):
        """The value of the child's next step (the child waited for after its last)."""
        if self._left == 0:
            raise RuntimeError("every step of the forked process has given its value")
        self._left -= 1
        ok = False
        try:
            ok, value = self._read.recv()
        except EOFError:
            raise RuntimeError("the forked analysis process ended without a result") from None
        finally:
            if self._left == 0 or not ok:
                self._left = 0
                self._read.close()
                self._process.join()
        if not ok:
            raise value
        return value


class Shared:
    """Work either of two processes takes, one item at a time, first come first served: this
    process and a :class:`Forked` child made after this (each iterates over it; what one takes
    the other does not).  A pipe of the items' indices, its writing end closed at once: a read of
    one byte from a pipe is atomic, and an empty one reads as its end (no waiting).  At most 256
    items; this process' reading end is closed once it reads the end."""

    def __init__(self, items):
        self.items = tuple(items)
        if len(self.items) > 256:
            raise ValueError("at most 256 items are shared")
        self._read, write = os.pipe()
        try:
            os.write(write, bytes(range(len(self.items))))
        finally:
            os.close(write)

    def __iter__(self):
        while self._read is not None:
            taken = os.read(self._read, 1)
            if not taken:
                os.close(self._read)
                self._read = None
                return
            yield self.items[taken[0]]


def _send(steps, conn) -> None:
    """The child's work: each of ``steps``' values in turn, or the exception of the first that
    fails, sent through ``conn``."""
    try:
        for step in steps:
            conn.send((True, step()))
    except BaseException as e:  # noqa: BLE001 (handed to the parent, raised there)
        conn.send((False, _picklable(e)))
    finally:
        conn.close()


def _picklable(e: BaseException) -> BaseException:
    """``e`` when it pickles, else a RuntimeError that names it."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(e).__name__}: {e}")
