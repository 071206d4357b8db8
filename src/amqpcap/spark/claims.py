"""One queue of work items taken one at a time by the driver and by Spark tasks.

The driver takes items in its own threads (:meth:`Claims.take`); Spark tasks ask the driver
for theirs over a TCP connection (:meth:`Claims.serve`, :func:`claim`), so each item is computed
exactly once, by whoever is free first.  A task attempt that Spark retries gets back first the
items its failed attempt had taken (their results were lost with it).  A random token keeps
other processes from taking items.
"""

from __future__ import annotations

import json
import secrets
import socket
import socketserver
import threading

__all__ = ["Claims", "claim", "UNREACHABLE"]

DRIVER = "driver"


class Claims:
    """Items ``0 .. n-1``, handed out in order, each once (to a retried task attempt again)."""

    def __init__(self, n: int) -> None:
        self._lock = threading.Lock()
        self._pending = list(range(n))
        self._held: dict = {}  # partition -> (attempt, [items])
        self._redo: dict = {}  # partition -> items of its failed attempt, handed out first
        self.taken: dict = {}  # item -> DRIVER or (partition, attempt): who took it last
        self.tasks_began = threading.Event()  # a task asked for an item
        self.token = secrets.token_hex(16)
        self._server = None

    def left(self) -> int:
        """Items nobody has taken yet."""
        with self._lock:
            return len(self._pending)

    def take(self) -> int | None:
        """The next item for the driver (None: none left)."""
        with self._lock:
            if not self._pending:
                return None
            i = self._pending.pop(0)
            self.taken[i] = DRIVER
            return i

    def take_for_task(self, partition: int, attempt: int) -> int | None:
        """The next item for attempt ``attempt`` of the task of ``partition`` (None: none left)."""
        with self._lock:
            self.tasks_began.set()
            seen, items = self._held.get(partition, (attempt, []))
            if seen != attempt:  # that attempt failed: its items' results are gone with it
                self._redo[partition] = self._redo.get(partition, []) + items
                items = []
            redo = self._redo.get(partition)
            if redo:
                i = redo.pop(0)
            elif self._pending:
                i = self._pending.pop(0)
            else:
                self._held[partition] = (attempt, items)
                return None
            self._held[partition] = (attempt, items + [i])
            self.taken[i] = (partition, attempt)
            return i

    def serve(self, host: str) -> tuple:
        """Listen on ``host`` for tasks' requests; ``(host, port, token)`` for :func:`claim`."""
        claims = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                try:
                    ask = json.loads(self.rfile.readline(4096))
                    if ask.get("token") != claims.token:
                        return
                    i = claims.take_for_task(int(ask["partition"]), int(ask["attempt"]))
                except (ValueError, KeyError, TypeError):
                    return
                self.wfile.write(json.dumps({"item": i}).encode() + b"\n")

        server = socketserver.ThreadingTCPServer((host, 0), Handler, bind_and_activate=False)
        server.daemon_threads = True
        server.allow_reuse_address = True
        server.server_bind()
        server.server_activate()
        threading.Thread(target=server.serve_forever, name="amqpcap-claims", daemon=True).start()
        self._server = server
        return (host, server.server_address[1], self.token)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


#: What a task that cannot connect to the driver's queue raises (spark.errors turns it into the line).
UNREACHABLE = "a Spark task cannot reach the driver's stats queue"


def claim(
    address: tuple, partition: int, attempt: int, timeout: float = 60.0, connect: float = 15.0
) -> int | None:
    """The next item from the driver's :class:`Claims` at ``address`` (``serve``'s answer);
    ``connect``: seconds to wait for the connection (a firewall that drops it fails the task
    then, not after Spark's own timeouts)."""
    host, port, token = address
    ask = {"token": token, "partition": partition, "attempt": attempt}
    try:
        s = socket.create_connection((host, port), timeout=connect)
    except OSError as e:  # (refused, unroutable, timed out: the executor cannot reach spark.driver.host)
        raise ConnectionError(f"{UNREACHABLE} at {host}:{port} ({e.strerror or type(e).__name__})") from None
    with s:
        s.settimeout(timeout)
        s.sendall(json.dumps(ask).encode() + b"\n")
        answer = s.makefile("rb").readline(4096)
    if not answer:
        raise ConnectionError(f"the driver at {host}:{port} did not hand out a stats part")
    return json.loads(answer)["item"]
