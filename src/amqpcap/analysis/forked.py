"""A computation run in a forked child process while this one goes on: the second core of the
machine for independent parts of an analysis.  The child is a copy of this process (its imports
and what it has read are shared until written), computes one function and sends back its
result, pickled, through a pipe; nothing else of it outlives it.  A generator function's child
sends each value as it yields it: the caller takes the first ones while the child computes the
next.  With an inbox, the caller sends the child values it computes meanwhile (:meth:`send`), which
the child takes when it needs them (the function's argument, ``receive()``).

A ``multiprocessing`` process of the fork context, not a ``ProcessPoolExecutor``: the function is
a closure over this process' state, which a forked process inherits and an executor would have
to pickle."""

from __future__ import annotations

import functools
import gc
import inspect
import multiprocessing
import pickle
import signal
import threading
from multiprocessing.reduction import ForkingPickler

__all__ = ["Forked", "TakenInTurn", "can_fork"]

_FORK = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if _FORK is not None else ()


def can_fork() -> bool:
    """Whether this platform forks (POSIX)."""
    return _FORK is not None


class TakenInTurn:
    """The indices of ``n`` items that this process and a child forked after it (:class:`Forked`)
    both may compute, each taken once, one at a time: this one from the front (:meth:`first`),
    the child from the back (:meth:`last`).  Whichever is free first takes the next: the two
    end at about the same time, however busy each was before (e.g. on a loaded machine)."""

    def __init__(self, n: int):
        self._ends = _FORK.RawArray("i", [0, n])  # (shared memory: the front's next, the back's end)
        self._lock = _FORK.Lock()

    def first(self) -> int | None:
        """The front's next item (None: every item taken)."""
        with self._lock:
            at, end = self._ends
            if at >= end:
                return None
            self._ends[0] = at + 1
            return at

    def last(self) -> int | None:
        """The back's next item (None: every item taken)."""
        with self._lock:
            at, end = self._ends
            if at >= end:
                return None
            self._ends[1] = end - 1
            return end - 1


class Forked:
    """``fn()`` computed in a forked child; :meth:`result` waits for it and returns its value or
    raises its exception (the child's, pickled; a child that dies without a word: RuntimeError).
    Of a generator function, :meth:`result` with ``last=False`` returns the next value it yields
    and leaves the child running; the last call, the next value, then waits for the child.
    ``inbox``: ``fn(receive)`` is computed, ``receive()`` the next value :meth:`send` sent (in
    order; EOFError once this process closed its end, e.g. it failed)."""

    def __init__(self, fn, *, inbox: bool = False):
        self._read, write = _FORK.Pipe(duplex=False)
        self._inbox = self._sending = None
        args = (fn, write)
        if inbox:
            receive, self._inbox = _FORK.Pipe(duplex=False)
            args = (functools.partial(fn, receive.recv), write, receive, self._inbox)
        self._process = _FORK.Process(target=_send, args=args, daemon=True)
        # the objects made so far frozen for the fork: the child's collections then do not walk
        # (and so copy) every page of the parent's imports and data
        gc.freeze()
        # signals held back across the fork: the child answers none before it has put its own
        # dispositions in place (``_send``); this process gets any that came meanwhile after
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            self._process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            gc.unfreeze()
        write.close()
        if inbox:
            receive.close()

    def send(self, value) -> None:
        """``value`` sent to the child, the next its ``receive()`` returns: pickled here, written
        by a thread of this process (this one goes on while the child is still busy and the pipe
        full; values sent one after the other, in order).  A child that has ended already (with
        its result or its error) is not waited for."""
        data = ForkingPickler.dumps(value)
        previous = self._sending
        self._sending = threading.Thread(target=_write, args=(self._inbox, data, previous), daemon=True)
        self._sending.start()

    def stop(self) -> None:
        """The child ended (SIGTERM: it leaves quietly, its work dropped) and waited for: of a
        caller that fails before it sent what the child waits for."""
        self._process.terminate()
        self._process.join()
        self._read.close()
        self._close_inbox()

    def _close_inbox(self) -> None:
        if self._sending is not None:  # (its writes end: read, or the child gone)
            self._sending.join()
        if self._inbox is not None:
            self._inbox.close()

    def result(self, *, last: bool = True):
        """The child's next value; ``last``: its last one, the child then waited for."""
        ok = False
        try:
            ok, value = self._read.recv()
        except EOFError:
            raise RuntimeError("the forked analysis process ended without a result") from None
        finally:
            if last or not ok:
                self._read.close()
                self._process.join()
                self._close_inbox()
        if not ok:
            raise value
        return value


def _write(inbox, data: bytes, previous) -> None:
    """:meth:`Forked.send`'s thread: ``data`` written to the child once ``previous`` (the thread
    of the value sent before) is done."""
    if previous is not None:
        previous.join()
    try:
        inbox.send_bytes(data)
    except OSError:  # the child is gone (BrokenPipeError): result() tells why
        pass


def _send(fn, conn, inbox=None, theirs=None) -> None:
    """The child's work: ``fn()``'s result (a generator function's: each value it yields), or its
    exception, sent through ``conn``.  Signals are the caller's to answer: the child leaves a
    Ctrl-C (sent to the whole process group) to it and ends quietly when it ends the child
    (SIGTERM, as ``multiprocessing`` does to a daemon process at exit), not by the caller's
    handlers it inherited, which would unwind it and print its traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    if theirs is not None:  # the caller's end of the inbox: EOF once the caller closes its own
        theirs.close()
    try:
        value = fn()
        for each in value if inspect.isgenerator(value) else (value,):
            conn.send((True, each))
    except BaseException as e:  # noqa: BLE001 (handed to the parent, raised there)
        conn.send((False, _picklable(e)))
    finally:
        conn.close()
        if inbox is not None:
            inbox.close()


def _picklable(e: BaseException) -> BaseException:
    """``e`` when it pickles, else a RuntimeError that names it."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(e).__name__}: {e}")
