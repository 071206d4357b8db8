"""Why the compiled parts: what each does against the library it stands in for, in-process.

    python bench/bench_parts.py                  # writes its block of docs/performance.md
    python bench/bench_parts.py --no-doc         # prints it only

Each line times the same work both ways in this process (``timeit``, the best of 5 repeats, the
two ways alternating): the JSON text of a method's arguments and of a message's properties
(``rows.to_json``, the reference encoder, against ``fastrows.json_text``); a body's SHA-256
(``hashlib`` against ``fast09.Sha256``, OpenSSL's through the libcrypto hashlib loaded); 16 x
1 MiB bodies in 4-128 KiB pieces hashed off the calling thread (``hashlib`` on a worker thread
fed through a queue against ``Sha256.update(queued=True)``, its hashing thread): the caller's
CPU and the wall time until every digest is known; and the rows of a dissect of a real
capture (methods, messages) made into a record batch (the reference table buffer's
``pa.array`` of the row tuples as one struct array, against ``fastwriter.Columns``), a row.
Every compiled part must be built (``amqpcap --version``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import queue
import random
import resource
import sys
import threading
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, HERE)

import pyarrow as pa  # noqa: E402

from amqpcap import compiled  # noqa: E402
from amqpcap.amqp import fast09  # noqa: E402
from amqpcap.records import fastrows, fastwriter, rows  # noqa: E402
from amqpcap.records.schema import SCHEMAS  # noqa: E402

# the rows batched: bench_dissect's capture of small packets (built by it), else a shipped one
SMALL = os.path.join(HERE, "data", "small_200000.pcap")
CAPTURE = (
    SMALL
    if os.path.exists(SMALL)
    else os.path.join(HERE, "..", "captures", "rabbitmq091_pika_throughput.pcap")
)
ARGUMENTS = {
    "ticket": 0,
    "exchange": "amq.direct",
    "routing_key": "work",
    "mandatory": False,
    "immediate": False,
}
PROPERTIES = {
    "content_type": "application/json",
    "delivery_mode": 2,
    "message_id": "7f3c2a9e-5d41-4b8e-9a61-0c2f4e8d1b7a",
    "timestamp": 1714564800,
    "headers": {"x-retry": 3, "x-origin": {"host": "web-1", "pid": 4242}, "x-tags": ["a", "b"]},
}


def best_us(fn, number: int) -> float:
    """The best of 5 repeats of ``number`` calls, in microseconds a call."""
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def pair(a, b, number: int) -> tuple[float, float]:
    """``a`` and ``b`` timed in turn, five rounds: the best of each (us a call)."""
    ta, tb = [], []
    for _ in range(5):
        ta.append(best_us(a, number))
        tb.append(best_us(b, number))
    return min(ta), min(tb)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime


def pieces(seed: int = 1) -> list[list[bytes]]:
    """16 bodies of 1 MiB, each in pieces of 4-128 KiB."""
    rnd = random.Random(seed)
    out = []
    for _ in range(16):
        body, parts, at = rnd.randbytes(1 << 20), [], 0
        while at < len(body):
            n = rnd.randint(4, 128) << 10
            parts.append(body[at : at + n])
            at += n
        out.append(parts)
    return out


def hashed_off_thread_hashlib(bodies) -> tuple[float, float]:
    """(the caller's CPU, wall) of hashlib on one worker thread fed through a queue (ms)."""
    q: queue.Queue = queue.Queue()
    digests = []

    def worker():
        h = None
        while True:
            item = q.get()
            if item is None:
                return
            if item is True:
                digests.append(h.hexdigest())
                h = None
                continue
            h = h or hashlib.sha256()
            h.update(item)

    t = threading.Thread(target=worker)
    t.start()
    w0, c0 = time.perf_counter(), cpu()
    for parts in bodies:
        for p in parts:
            q.put(bytearray(p))  # (a copy, as the ring copies a piece)
        q.put(True)
    c1 = cpu()
    q.put(None)
    t.join()
    return (c1 - c0) * 1e3, (time.perf_counter() - w0) * 1e3


def hashed_off_thread_compiled(bodies) -> tuple[float, float]:
    """(the caller's CPU, wall) of ``Sha256.update(queued=True)`` (ms)."""
    w0, c0 = time.perf_counter(), cpu()
    hs = []
    for parts in bodies:
        h = fast09.Sha256()
        for p in parts:
            h.update(p, queued=True)
        hs.append(h)
    c1 = cpu()
    [h.hexdigest() for h in hs]
    return (c1 - c0) * 1e3, (time.perf_counter() - w0) * 1e3


class _Keep:
    """A table that keeps its row tuples."""

    def __init__(self) -> None:
        self.kept: list = []
        self.rows = 0

    def append(self, row) -> None:
        self.kept.append(row)
        self.rows += 1


class _Sink:
    def __init__(self) -> None:
        self.tables = {name: _Keep() for name in ("connections", "methods", "messages", "anomalies")}

    def __getitem__(self, name):
        return self.tables[name]


def dissect_rows(capture: str, limit: int) -> dict:
    """The first ``limit`` methods and messages row tuples of a dissect of ``capture``."""
    from amqpcap.capture.reader import open_capture
    from amqpcap.pipeline import DEFAULT_PORTS, Dissector, Options

    sink = _Sink()
    d = Dissector(capture, sink, Options(body_bytes=64, ports=DEFAULT_PORTS))
    with open_capture(capture) as source:
        d.run(source)
    return {name: sink.tables[name].kept[:limit] for name in ("methods", "messages")}


def batch_reference(name: str, table_rows: list) -> None:
    schema = SCHEMAS[name]
    struct = pa.array(table_rows, type=pa.struct(list(schema)))
    pa.RecordBatch.from_arrays(struct.flatten(), schema=schema)


def batch_compiled(name: str, table_rows: list) -> None:
    cols = fastwriter.Columns(name, len(table_rows) + 1)
    for r in table_rows:
        cols.append(r)
    cols.take()


def measure(capture: str, limit: int) -> list[tuple[str, str, str]]:
    lines = []
    a, b = pair(lambda: rows.to_json(ARGUMENTS), lambda: fastrows.json_text(ARGUMENTS), 20000)
    lines.append(
        (
            "JSON of a method's arguments (5 fields)",
            f"`rows.to_json`: {a:.2f} us",
            f"`fastrows.json_text`: {b:.2f} us",
        )
    )
    a, b = pair(lambda: rows.to_json(PROPERTIES), lambda: fastrows.json_text(PROPERTIES), 20000)
    lines.append(("JSON of a message's properties (5 fields, nested headers)", f"{a:.2f} us", f"{b:.2f} us"))
    for size in (100, 1000, 16 << 10):
        body = os.urandom(size)

        def lib(body=body):
            hashlib.sha256(body).hexdigest()

        def ours(body=body):
            h = fast09.Sha256()
            h.update(body)
            h.hexdigest()

        a, b = pair(lib, ours, 20000 if size < 4096 else 2000)
        what = f"SHA-256 of a {size:,} B body" if size < 4096 else "SHA-256 of a 16 KiB body"
        first = ("`hashlib`: " if size == 100 else "") + f"{a:.2f} us"
        lines.append((what, first, ("`fast09.Sha256`: " if size == 100 else "") + f"{b:.2f} us"))
    bodies = pieces()
    runs_lib, runs_ours = [], []
    for _ in range(5):
        runs_lib.append(hashed_off_thread_hashlib(bodies))
        runs_ours.append(hashed_off_thread_compiled(bodies))

    def span(runs):
        c = sorted(r[0] for r in runs)
        w = sorted(r[1] for r in runs)
        return f"{c[0]:.1f}-{c[-1]:.1f} ms / {w[0]:.0f}-{w[-1]:.0f} ms"

    lines.append(
        (
            "SHA-256 of 16 x 1 MiB bodies in 4-128 KiB pieces, off the caller's thread: "
            "its CPU / wall (5 runs)",
            f"`hashlib` on one worker thread: {span(runs_lib)}",
            f"`Sha256.update(queued=True)`, its hashing thread: {span(runs_ours)}",
        )
    )
    got = dissect_rows(capture, limit)
    ref, comp = [], []
    for name in ("methods", "messages"):
        tr = got[name]
        a, b = pair(
            lambda tr=tr, name=name: batch_reference(name, tr),
            lambda tr=tr, name=name: batch_compiled(name, tr),
            1,
        )
        ref.append(a / max(len(tr), 1))
        comp.append(b / max(len(tr), 1))
    n = min(len(got["methods"]), len(got["messages"]))
    lines.append(
        (
            f"{n:,} rows of a dissect of {os.path.basename(capture)} into a record batch "
            "(methods / messages), a row",
            f"`pa.array` of the row tuples as one struct array: {ref[0]:.2f} / {ref[1]:.2f} us",
            f"`fastwriter.Columns`: {comp[0]:.2f} / {comp[1]:.2f} us",
        )
    )
    return lines


def block(lines) -> str:
    from perfdoc import machine

    out = [
        "## Why the compiled parts",
        "",
        "`python bench/bench_parts.py`: each compiled part against the library it stands in for, "
        "the same work timed both ways in one process (`timeit`, best of 5 repeats, the two ways "
        f"alternating). {machine()}.",
        "",
        "| what | library | compiled |",
        "| --- | --- | --- |",
    ]
    out += [f"| {w} | {a} | {b} |" for w, a, b in lines]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", default=CAPTURE, help="the capture whose rows are batched")
    ap.add_argument("--rows", type=int, default=20000, help="rows of each table batched (at most)")
    ap.add_argument("--no-doc", action="store_true", help="print the block, do not write it")
    a = ap.parse_args()
    missing = [p for p in ("fast09", "fastrows", "fastwriter") if compiled.select(p) is None]
    if missing:
        print(f"bench_parts: not compiled: {', '.join(missing)} (amqpcap --version)", file=sys.stderr)
        return 1
    text = block(measure(a.capture, a.rows))
    print(text)
    if not a.no_doc:
        from perfdoc import write_block

        write_block("bench_parts", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
