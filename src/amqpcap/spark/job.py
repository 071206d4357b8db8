"""The Spark dissect job: ``run(spark, inputs, out)``, on the DataFrame API only.

Every stage is ``spark.range(n, numPartitions=n).mapInArrow(...)`` over n work items (the
items travel with the function; each task takes its own): the same code on local mode, a
standalone or YARN cluster and Spark Connect.  Stages:

1. ``index`` (only for captures larger than the split size): a task per byte range indexes
   the records that start in it (``amqpcap.spark.ranges``) into the scratch directory.
2. ``dissect``: a task per bucket of a split capture's conversations, and a task per group
   of whole captures, runs amqpcap's own ``Dissector`` and writes Parquet with pyarrow into
   ``OUT.tmp-spark-<pid>/tasks/tNNNNN``.
3. ``renumber tcp_stream``: only if a split capture had a conversation the index could not
   foresee (a client port reused after a close): its parts are rewritten.

The driver reads no record: it lists and sizes the inputs, merges the index summaries
(O(ranges + conversations)), moves the parts to ``OUT.tmp-spark-<pid>/dataset`` and renames
that to ``OUT`` (object stores: moves the parts, then writes ``_SUCCESS``).  A failed or
interrupted job never leaves an ``OUT`` that looks complete.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from amqpcap.capture.reader import CaptureError, open_capture
from amqpcap.exitcodes import Exit
from amqpcap.pipeline import DEFAULT_PORTS, Dissector, Options
from amqpcap.records.writer import DatasetWriter, OutputExists
from amqpcap.spark import plan, ranges, storage
from amqpcap.spark.errors import TaskFailed, task_failure
from amqpcap.spark.plan import InputError
from amqpcap.spark.session import pandas_version_warning_off, warm
from amqpcap.spark.stages import is_connect, parallelism, result_schema
from amqpcap.spark.starting import Starting

DEFAULT_SPLIT_SIZE = 128 << 20
#: The GIL's switch interval while the driver's units run beside its session's start (``Ahead``).
SWITCH_INTERVAL = 0.0005


@dataclass
class RangeItem:
    capture: int
    loc: storage.Location
    part: int
    start: int
    end: int
    size: int


@dataclass
class Bucket:
    """One task's share of a split capture: its slots, and every range's index and base number."""

    capture: int
    name: str
    loc: storage.Location
    part: int
    slots: np.ndarray
    ranges: list  # [(index Location, base packet number)]
    firsts: np.ndarray
    ranks: np.ndarray
    size: int


@dataclass
class TaskResult:
    id: int
    rows: dict
    captures: int = 0
    packets: int = 0
    bytes: int = 0
    tcp_streams: int = 0
    frames: int = 0
    errors: list = field(default_factory=list)  # [(capture, one-line message, exit code)]
    split_of: int | None = None  # split bucket: the capture's index
    used: list | None = None  # split bucket: (first packet, tcp_stream given) per conversation


@dataclass
class SparkSummary:
    captures: int = 0
    packets: int = 0
    bytes: int = 0
    tcp_streams: int = 0
    frames: int = 0
    rows: dict = field(default_factory=dict)
    tasks: int = 0  # Spark tasks (the driver's units apart: driver_units)
    split: dict = field(default_factory=dict)  # capture -> number of buckets it was split into
    errors: list = field(default_factory=list)  # [(capture, message, exit code)], not-a-capture etc.
    seconds: float = 0.0
    task_seconds: float = 0.0  # the tasks' wall time, summed (index and dissect)
    task_cpu: float = 0.0  # the tasks' CPU time (their Python worker's, threads included), summed
    driver_units: int = 0  # ranges indexed and captures dissected by the driver while Spark started
    driver_seconds: float = 0.0  # their wall time
    driver_cpu: float = 0.0  # their CPU time
    # where the wall time went: every unit as (worker, start, wall, cpu), worker "driver" or the
    # Python worker's pid, start in epoch seconds; the driver's steps as (label, epoch seconds)
    spans: list = field(default_factory=list)
    marks: list = field(default_factory=list)


# -- executor side ----------------------------------------------------------------------------------


def index_task(item: RangeItem, *, scratch: storage.Location) -> ranges.RangeSummary:
    """Index one byte range into ``scratch/index``; the summary for the driver."""
    try:
        with ranges.open_capture_bytes(item.loc) as f:
            s, blob = ranges.index_range(f, item.capture, item.part, item.start, item.end, item.size)
    except ranges.Unsplittable as e:
        return ranges.RangeSummary(item.capture, item.part, error=str(e))
    storage.write_bytes(index_location(scratch, item.capture, item.part), blob)
    return s


def index_location(scratch: storage.Location, capture: int, part: int) -> storage.Location:
    return scratch.join("index", f"c{capture:05d}-r{part:05d}.idx")


def task_location(scratch: storage.Location, task_id: int) -> storage.Location:
    return scratch.join("tasks", f"t{task_id:05d}")


class _Counting:
    """A bucket's packet source that counts what it yields (its last number is no count)."""

    def __init__(self, source) -> None:
        self.source, self.count = source, 0
        self.anomalies = source.anomalies

    def batches(self):
        for b in self.source.batches():
            self.count += len(b)
            yield b

    def __iter__(self):
        for b in self.batches():
            yield from b


def dissect_task(
    task: plan.Task, *, scratch: storage.Location, opts: Options, tables: list, threads: bool = False
) -> TaskResult:
    """Dissect one task's captures (or split bucket) into its own directory under ``scratch``:
    in the task's one thread (``one_thread``), or with ``threads`` as ``amqpcap dissect`` does,
    its Parquet and body digests in threads of their own (the driver's units while its session
    starts: the JVM starting leaves part of the other core idle)."""
    dest = task_location(scratch, task.id)
    local_dir = dest.path if dest.local else tempfile.mkdtemp(prefix="amqpcap-task-")
    # one file per table of a task: the job names the task's files parts of the dataset
    writer = DatasetWriter(
        os.path.join(local_dir, "t") if not dest.local else local_dir, tables, force=True, one_file=True
    )
    if not threads:
        one_thread(writer)
    res = TaskResult(task.id, {})
    name = None  # the capture being dissected: named in the one line of a failure
    try:
        if task.bucket is not None:
            name = task.bucket.name
            _dissect_bucket(task.bucket, writer, opts, res, threads)
        for c in task.captures:
            name = c.name
            _dissect_whole(c, writer, opts, res, threads)
        name = None
        res.rows = writer.close()
        if not dest.local:
            storage.upload_dir(os.path.join(local_dir, "t"), dest)
    except Exception as e:
        writer.abort()
        raise TaskFailed(task_failure(e, task.id, name)) from e
    except BaseException:
        writer.abort()
        raise
    finally:
        if not dest.local:
            shutil.rmtree(local_dir, ignore_errors=True)
    return res


def one_thread(writer: DatasetWriter) -> None:
    """A task encodes its Parquet in its own thread.  Spark gives a task one core (spark.task.cpus)
    and takes its parallelism from the tasks: dissect's Parquet thread, useful beside one process's
    packet loop, would contend with the other tasks for their cores (and its GIL hand-overs wait
    for a thread the scheduler has parked)."""
    for t in writer.tables.values():
        t.file.background = False


def dissector(name: str, writer: DatasetWriter, opts: Options, threads: bool = False) -> Dissector:
    """A ``Dissector`` that hashes message bodies in the task's thread (see ``one_thread``), or
    with ``threads`` as ``amqpcap dissect`` does (in a thread of their own, if the writer can)."""
    d = Dissector(name, writer, opts)
    if not threads:
        d.deferred_digests = False
    return d


def _dissect_bucket(b: Bucket, writer, opts: Options, res: TaskResult, threads: bool) -> None:
    d = dissector(b.name, writer, opts, threads)
    numbers = ranges.StreamNumbers(b.firsts, b.ranks)
    d.stream_of = numbers
    source = _Counting(ranges.BucketSource(b.loc, b.ranges, b.slots))
    d.run(source)
    res.split_of, res.used = b.capture, numbers.used
    res.packets, res.bytes = source.count, d.bytes
    res.tcp_streams, res.frames = d.nstreams, d.frames


def _dissect_whole(c: plan.Capture, writer, opts: Options, res: TaskResult, threads: bool) -> None:
    local, fetched = c.loc.path, None
    try:
        if not c.loc.local:
            fd, fetched = tempfile.mkstemp(prefix="amqpcap-capture-")
            os.close(fd)
            try:
                storage.fetch(c.loc, fetched)
            except OSError as e:
                msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                res.errors.append((c.name, f"{c.name}: cannot be read ({msg})", Exit.UNREADABLE))
                return
            local = fetched
        d = dissector(c.name, writer, opts, threads)
        d.run(open_capture(local))
    except CaptureError as e:  # that capture's error; what it yielded before stays
        res.errors.append((c.name, str(e).replace(local, c.name, 1), e.exit_code))
        return
    finally:
        if fetched:
            os.remove(fetched)
    res.captures += 1
    res.packets += d.packets
    res.bytes += d.bytes
    res.tcp_streams += d.nstreams
    res.frames += d.frames


def renumber_task(item, *, tables: list) -> int:
    """Rewrite one split bucket's parts with ``tcp_stream`` mapped through (given -> final)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    dest, given, final = item
    fs = dest.fs()
    for t in tables:
        path = dest.join(t, "part-00000.parquet").path
        tab = pq.read_table(path, filesystem=fs)
        i = tab.schema.get_field_index("tcp_stream")
        col = tab.column(i)
        idx = pc.index_in(col, value_set=pa.array(given, pa.int32()))
        new = pc.if_else(pc.is_null(idx), col, pc.take(pa.array(final, pa.int32()), idx))
        tab = tab.set_column(i, tab.schema.field(i), new)
        pq.write_table(tab, path, filesystem=fs, compression="zstd")
    return len(given)


# -- driver side ------------------------------------------------------------------------------------


class Progress:
    """One line per stage on stderr (``amqpcap COMMAND: ...``); with a SparkContext,
    ``done/total tasks`` refreshed in place."""

    def __init__(self, spark, enabled: bool, command: str = "spark") -> None:
        self.sc = None if spark is None or is_connect(spark) else spark.sparkContext
        self.enabled = enabled
        self.prefix = f"amqpcap {command}: "

    def line(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write(f"{self.prefix}{text}\n")
            sys.stderr.flush()

    def stage(self, label: str, func):
        """Run ``func()`` as Spark job group ``label``, showing its task count."""
        sc = self.sc
        t0 = time.monotonic()
        if sc is None:
            got = func()
            self.line(f"{label}: done, {time.monotonic() - t0:,.1f} s")
            return got
        group = f"amqpcap-{label}-{os.getpid()}-{time.monotonic_ns()}"
        sc.setJobGroup(group, f"amqpcap {label}", interruptOnCancel=True)
        stop = threading.Event()

        def show(final=False, finished=False):
            tr = sc.statusTracker()
            done = total = 0
            for jid in tr.getJobIdsForGroup(group):
                job = tr.getJobInfo(jid)
                for sid in job.stageIds if job else ():
                    st = tr.getStageInfo(sid)
                    if st:
                        done, total = done + st.numCompletedTasks, total + st.numTasks
            if finished:  # (the tracker may not have counted the last task's end yet)
                done = total
            if final or total:
                sys.stderr.write(
                    f"\r{self.prefix}{label}: {done}/{total} tasks done, "
                    f"{time.monotonic() - t0:,.1f} s" + ("\n" if final else "")
                )
                sys.stderr.flush()

        def poll():
            while not stop.wait(0.5):
                show()

        th = threading.Thread(target=poll, daemon=True) if self.enabled else None
        if th:
            th.start()
        finished = False
        try:
            got = func()
            finished = True
            return got
        finally:
            stop.set()
            try:
                if th:
                    th.join()
                    show(final=True, finished=finished)
                sc.setLocalProperty("spark.jobGroup.id", None)
            except Exception:
                if finished:
                    raise
                # func's error says what failed; the JVM's may be gone with it


def storage_env() -> dict:
    """The driver's AWS settings, for the tasks (their own environment may lack them)."""
    return {k: v for k, v in os.environ.items() if k.startswith("AWS_")}


def _use_env(env: dict) -> None:
    if any(os.environ.get(k) != v for k, v in env.items()):
        os.environ.update(env)
        storage.forget()


def _call_items(items, fn, batches, env=None):
    """mapInArrow body: every id of the partition's batches -> ``(fn(items[id]), (wall, cpu))``,
    pickled (the task's seconds, for the per-core throughput the bench reports)."""
    import pyarrow as pa

    _use_env(env or {})
    schema = pa.schema([("id", pa.int64()), ("result", pa.binary())])
    for b in batches:
        for i in b.column(0).to_pylist():
            t0, c0, at = time.perf_counter(), time.process_time(), time.time()
            res = fn(items[i])
            took = (time.perf_counter() - t0, time.process_time() - c0, at, os.getpid())
            got = pickle.dumps((res, took), protocol=pickle.HIGHEST_PROTOCOL)
            yield pa.RecordBatch.from_arrays(one_row(i, got), schema=schema)


def one_row(i: int, got: bytes) -> list:
    """``[int64 [i], binary [got]]`` built from buffers: ``pa.array`` on a list imports pandas
    (to ask whether the list is a pandas object), 0.3 CPU s in every Python worker."""
    import pyarrow as pa

    ids = pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(np.array([i], np.int64))])
    offsets = pa.py_buffer(np.array([0, len(got)], np.int32))
    return [ids, pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(got)])]


def run_stage(spark, items: list, fn, seconds: list | None = None) -> list:
    """``[fn(item) for item in items]``, one Spark task per item (in order: largest first);
    each task's ``(wall, cpu)`` seconds appended to ``seconds``."""
    n = len(items)
    if not n:
        return []

    env = storage_env()

    def call(batches):
        return _call_items(items, fn, batches, env)

    with pandas_version_warning_off():
        df = spark.range(0, n, 1, numPartitions=n).mapInArrow(call, result_schema())
    with pandas_version_warning_off():
        rows = df.collect()
    got = [None] * n
    for r in rows:
        got[r["id"]], took = pickle.loads(r["result"])
        if seconds is not None:
            seconds.append(took)
    return got


def _ranges_of(caps, split_size: int) -> list:
    items = []
    for ci, c in enumerate(caps):
        if c.gzip or not c.splittable or c.size <= split_size:
            continue
        parts = -(-c.size // split_size)
        edges = [c.size * k // parts for k in range(parts + 1)]
        items += [RangeItem(ci, c.loc, k, edges[k], edges[k + 1], c.size) for k in range(parts)]
    return items


def _split_plan(caps, summaries, scratch, parallel: int, split_size: int, prog) -> tuple[list, set]:
    """Buckets of every capture whose ranges tile it; the set of captures to dissect whole."""
    by_cap: dict = {}
    for s in summaries:
        by_cap.setdefault(s.capture, []).append(s)
    buckets, whole = [], set()
    for ci, sums in sorted(by_cap.items()):
        sums.sort(key=lambda s: s.part)
        c = caps[ci]
        why = ranges.check(sums, c.size)
        if why:
            prog.line(f"{c.name}: {c.size / 1e6:,.1f} MB dissected whole ({why})")
            whole.add(ci)
            continue
        # every bucket maps the whole capture (its packets are spread over it): no more buckets
        # than keep the cores busy
        parts = max(1, min(-(-c.size // split_size), 2 * parallel))
        slot_sets, bases, firsts, ranks = ranges.plan_buckets(sums, parts)
        idx = [(index_location(scratch, ci, s.part), int(b)) for s, b in zip(sums, bases) if s.packets]
        load = np.sum([s.slot_bytes for s in sums], axis=0)
        for k, slots in enumerate(slot_sets):
            size = int(load[slots].sum())
            buckets.append(Bucket(ci, c.name, c.loc, k, slots, idx, firsts, ranks, size))
        prog.line(
            f"{c.name}: {c.size / 1e6:,.1f} MB, {sum(s.packets for s in sums):,} packets, "
            f"{len(firsts):,} conversations -> {len(slot_sets)} tasks"
        )
    return buckets, whole


def _renumber_items(results, scratch) -> list:
    """(task directory, given, final) for every split bucket whose numbers were not final."""
    by_cap: dict = {}
    for r in results:
        if r.split_of is not None:
            by_cap.setdefault(r.split_of, []).append(r)
    items = []
    for rs in by_cap.values():
        starts = sorted(n for r in rs for n, _ in r.used)
        final = {n: i for i, n in enumerate(starts)}
        for r in rs:
            given = [g for _, g in r.used]
            want = [final[n] for n, _ in r.used]
            if given != want:
                items.append((task_location(scratch, r.id), given, want))
    return items


def scratch_for(out: storage.Location, pid: int | None = None) -> storage.Location:
    """The job's scratch directory: beside ``out``, named for the driver's process."""
    pid = os.getpid() if pid is None else pid
    return storage.Location(f"{out.uri}.tmp-spark-{pid}", f"{out.path}.tmp-spark-{pid}")


def remove_scratch(out: str) -> None:
    """Remove this driver's scratch directory (after the session stopped: tasks that were still
    running when the job gave up may have written into it meanwhile)."""
    try:
        storage.remove_tree(scratch_for(storage.locate(out)))
    except storage.StorageError:
        pass


def _cancel(spark) -> None:
    """Stop the job's tasks (a signal or an error on the driver): they must not write on."""
    try:
        if is_connect(spark):
            spark.interruptAll()
        else:
            spark.sparkContext.cancelAllJobs()
    except Exception:  # the session is going down already
        pass


def _commit(scratch: storage.Location, out: storage.Location, tables: list, results: list) -> None:
    parts = []  # (task's part, the dataset's name for it)
    for t in tables:
        keep = [r for r in results if r.rows.get(t)] or results[:1]  # empty parts only if nothing else
        parts += [
            (task_location(scratch, r.id).join(t, "part-00000.parquet"), (t, f"part-{r.id:05d}.parquet"))
            for r in keep
        ]
    if out.local:  # renames, then the directory renamed into place: atomic
        final = scratch.join("dataset")
        for src, (t, name) in parts:
            os.makedirs(os.path.join(final.path, t), exist_ok=True)
            os.rename(src.path, os.path.join(final.path, t, name))
        if os.path.exists(out.path):
            old = f"{out.path}.old-{os.getpid()}"
            os.rename(out.path, old)
            os.rename(final.path, out.path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(final.path, out.path)
        return
    # object stores have no directory rename: the parts copied into place, then _SUCCESS (readers
    # of a dataset on S3 take it as complete once _SUCCESS is there, as Hadoop and Spark do)
    storage.remove_tree(out)
    fs = out.fs()
    for src, (t, name) in parts:
        fs.copy_file(src.path, out.join(t, name).path)
    storage.write_bytes(out.join("_SUCCESS"), b"")


class Ahead:
    """The driver's share of the work while its session starts (``run`` given a ``Starting``):
    units of the executors' own work (a range to index, a whole capture of at most the
    split size to dissect), each taken only while the session is not up yet, or is up but its
    Python workers are still starting (``session.warm``, run in a thread once the session is
    up).  The share is thus bounded by the session's start time (a few seconds of one core,
    while the JVM starting keeps the other busy), whatever the input's size; the rest goes to
    the tasks.  The units run in a thread of the driver (:meth:`share`), so the job's stage
    for the rest starts as soon as the workers are up, beside the unit the driver has in hand."""

    def __init__(self, pending: Starting | None) -> None:
        self.pending = pending
        self.units = 0
        self.took: list = []  # (wall, cpu, start, "driver") per unit
        self.up = False  # the session is there (or failed to start)
        self.warmed = threading.Event()  # its workers are up
        self.lock = threading.Lock()  # (waiting() and the claims, from the driver's two threads)
        self.shares: list = []
        self._running = 0  # units' threads running, and the switch interval they replaced
        self._switch = 0.0

    def waiting(self) -> bool:
        if self.pending is None:
            return False
        if not self.up:
            if not self.pending.done():
                return True
            self.up = True
            if self.pending.error is not None:
                self.warmed.set()
                return False
            spark, ours = self.pending.result()
            if not ours:  # a session the caller had: its workers may be up long since
                self.warmed.set()
                return False
            threading.Thread(target=self._warm, args=(spark,), name="amqpcap-warm", daemon=True).start()
        return not self.warmed.is_set()

    def _warm(self, spark) -> None:
        try:
            warm(spark)
        except Exception:  # (a session given up meanwhile; the job's own stages report the rest)
            pass
        finally:
            self.warmed.set()

    def unit_thread(self, starts: bool) -> None:
        """A thread of units starts (``starts``) or ends.  While one runs, the interpreter hands
        the GIL over every :data:`SWITCH_INTERVAL` s rather than 5 ms: the session starting
        beside it (and the workers' start, the job's first stage) is a thread making a few
        hundred py4j calls one after the other, each of which waits, once the JVM answered, for
        the units' thread to let go of the GIL."""
        with self.lock:
            self._running += 1 if starts else -1
            if starts and self._running == 1:
                self._switch = sys.getswitchinterval()
                sys.setswitchinterval(SWITCH_INTERVAL)
            elif not starts and self._running == 0:
                sys.setswitchinterval(self._switch)

    def share(self, items: list, fn) -> Share:
        """``fn(item)`` for the first items, in a thread, while the session starts."""
        self.shares.append(Share(self, items, fn))
        return self.shares[-1]

    def stop(self) -> None:
        """No unit taken any more; the ones in hand ended (a job that failed: their results and
        errors are dropped)."""
        for share in self.shares:
            with contextlib.suppress(BaseException):
                share.join()


class Share:
    """The driver's units of ``items`` (``Ahead.share``): a thread takes them in order, each
    only while the session is not up with its workers; :meth:`decide` returns the number it
    took once that is settled (all taken, or the session ready: the unit in hand goes on while
    the caller hands the rest to Spark), :meth:`join` their results once done."""

    def __init__(self, ahead: Ahead, items: list, fn) -> None:
        self.ahead, self.items, self.fn = ahead, items, fn
        self.claimed = 0
        self.closed = ahead.pending is None or not items
        self.results: list = []
        self.error: BaseException | None = None
        self.ended = threading.Event()
        self._thread = None
        if self.closed:
            self.ended.set()
        else:
            self._thread = threading.Thread(target=self._run, name="amqpcap-driver-units", daemon=True)
            self._thread.start()

    def _claim(self) -> bool:
        with self.ahead.lock:
            if not self.closed and not self.ahead.waiting():
                self.closed = True
            if self.closed:
                return False
            self.claimed += 1
            return True

    def _run(self) -> None:
        self.ahead.unit_thread(True)
        try:
            for item in self.items:
                if not self._claim():
                    break
                t0, c0, at = time.perf_counter(), time.process_time(), time.time()
                self.results.append(self.fn(item))
                self.ahead.took.append((time.perf_counter() - t0, time.process_time() - c0, at, "driver"))
        except BaseException as e:  # (raised by join)
            self.error = e
        finally:
            with self.ahead.lock:
                self.closed = True
            self.ahead.unit_thread(False)
            self.ended.set()

    def decide(self) -> int:
        """Wait until the driver's share is settled: the number of items it took (the first ones).
        The session's workers are started from here too (``Ahead.waiting``) as soon as it is up,
        not once the unit in hand ends."""
        pending = self.ahead.pending
        while not self.ended.wait(0.01):
            if pending.ready.is_set():
                with self.ahead.lock:
                    if not self.ahead.waiting():
                        self.closed = True
                        break
        with self.ahead.lock:
            self.closed = True
        if self.error is not None:  # (a unit failed: the job fails now, not after the stages)
            self.join()
        return self.claimed

    def join(self) -> list:
        """The results of the items taken (waiting for the one in hand); its error raised."""
        with self.ahead.lock:
            self.closed = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self.ahead.units += len(self.results)
        if self.error is not None:
            raise self.error
        return self.results


def _session_of(spark):
    """The session (waited for, if it is still starting)."""
    return spark.result()[0] if isinstance(spark, Starting) else spark


def _on_driver(c: plan.Capture, split_size: int) -> bool:
    """Whether the driver may dissect the whole capture ``c`` while its session starts: local,
    plain (its work is about its size) and no larger than a task's share."""
    return c.loc.local and not c.gzip and not c.pipe and c.size <= split_size


def run(
    spark,
    inputs,
    out,
    *,
    split_size: int = DEFAULT_SPLIT_SIZE,
    body_bytes: int = 64,
    frames: bool = False,
    ports=(),
    keep_secrets: bool = False,
    force: bool = False,
    progress: bool = False,
) -> SparkSummary:
    """Dissect ``inputs`` (capture files, directories, globs; local paths or URIs such as
    ``s3://bucket/dir``) on ``spark`` (a classic or a Spark Connect session, or a ``Starting``:
    ``session.start``; the driver then indexes ranges and dissects small captures itself until
    it is up, see ``Ahead``, and does not wait for it if that was all the work; the caller ends
    it with ``give_up``) into the dataset directory ``out`` (a path or URI): the layout, schema
    and rows of ``amqpcap dissect``.

    Captures larger than ``split_size`` bytes (uncompressed) are split across tasks by TCP
    conversation.  A capture that cannot be read is reported in ``SparkSummary.errors``; the job
    goes on.  Raises ``InputError`` (nothing to read) or ``OutputExists``.
    """
    t0 = time.monotonic()
    pending = spark if isinstance(spark, Starting) else None
    opts = opts_of(body_bytes, frames, ports, keep_secrets)
    s = _run(spark, pending, inputs, out, split_size, frames, force, progress, opts)
    s.seconds = time.monotonic() - t0
    return s


def opts_of(body_bytes: int, frames: bool, ports, keep_secrets: bool) -> Options:
    return Options(
        body_bytes=body_bytes,
        frames=frames,
        ports=DEFAULT_PORTS | frozenset(ports),
        keep_secrets=keep_secrets,
    )


def _run(spark, pending, inputs, out, split_size, frames, force, progress, opts) -> SparkSummary:
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    try:
        out_loc = storage.locate(os.fspath(out))
        if storage.exists(out_loc) and not force:
            raise OutputExists(f"output {out} exists (use --force to replace it)")
    except storage.StorageError as e:
        raise InputError(str(e)) from None
    caps = plan.expand(inputs)
    if not caps:
        raise InputError("no input captures")
    first_line = f"{len(caps):,} captures, {sum(c.size for c in caps) / 1e6:,.1f} MB" + (
        " and pipes" if any(c.pipe for c in caps) else ""
    )
    tables = ["connections", "methods", "messages", "anomalies"] + (["frames"] if frames else [])
    scratch = scratch_for(out_loc)
    storage.remove_tree(scratch)
    ahead = Ahead(pending)
    results: list = []
    tasks: list = []
    marks = [("planned", time.time())]
    try:
        for i, c in enumerate(caps):
            if c.pipe:
                caps[i] = plan.spool(c, scratch.join("inputs", f"p{i:05d}.cap"))
        range_items = _ranges_of(caps, split_size)
        # while the session starts: the ranges' index first (the buckets' plan needs it), then
        # whole captures, each a task of its own on the driver (ids 0, 1, ...)
        ranges_ahead = ahead.share(range_items, partial(index_task, scratch=scratch))
        nranges = ranges_ahead.decide()
        split_cands = {r.capture for r in range_items}
        mine = [c for i, c in enumerate(caps) if i not in split_cands and _on_driver(c, split_size)]
        job = partial(dissect_task, scratch=scratch, opts=opts, tables=tables)
        mine_items = [plan.Task(k, captures=[c], size=c.size) for k, c in enumerate(mine)]
        caps_ahead = ahead.share(mine_items, partial(job, threads=True))
        ncaps = caps_ahead.decide()
        done = {id(c) for c in mine[:ncaps]}
        # all done on the driver: the session is not waited for (the caller gives it up), and no
        # progress line is written (a quiet start points stderr at the JVM's log meanwhile)
        spark = None if not range_items and len(done) == len(caps) else _session_of(spark)
        marks.append(("session up", time.time()))
        prog = Progress(spark, progress and spark is not None)
        prog.line(first_line)
        if nranges or ncaps:
            prog.line(
                f"while Spark started, on the driver: {nranges} of {len(range_items)} ranges "
                f"indexed, {ncaps} captures dissected"
            )
        par = parallelism(spark) if spark is not None else 1
        took: list = []
        left = range_items[nranges:]
        summaries = []
        if left:
            summaries = prog.stage(
                "index", lambda: run_stage(spark, left, partial(index_task, scratch=scratch), took)
            )
            marks.append(("indexed", time.time()))
        summaries = ranges_ahead.join() + summaries
        buckets, whole = _split_plan(caps, summaries, scratch, par, split_size, prog)
        split_caps = {b.capture for b in buckets}
        rest = [c for i, c in enumerate(caps) if i not in split_caps and id(c) not in done]
        groups = plan.pack(rest, plan.task_count(sum(c.size for c in rest if not c.gzip), par))
        tasks = [plan.Task(0, bucket=b, size=b.size) for b in buckets]
        tasks += [plan.Task(0, captures=g, size=sum(c.size for c in g)) for g in groups]
        tasks.sort(key=lambda t: -t.size)
        for i, t in enumerate(tasks):
            t.id = ncaps + i
        staged = []
        if tasks:
            marks.append(("planned tasks", time.time()))
            staged = prog.stage("dissect", lambda: run_stage(spark, tasks, job, took))
            marks.append(("dissected", time.time()))
        results = caps_ahead.join() + staged
        renumber = _renumber_items(results, scratch)
        if renumber:
            prog.stage(
                "renumber tcp_stream",
                lambda: run_stage(spark, renumber, partial(renumber_task, tables=tables)),
            )
        _commit(scratch, out_loc, tables, results)
        marks.append(("committed", time.time()))
    except BaseException:
        if spark is not None and not isinstance(spark, Starting):
            _cancel(spark)
        ahead.stop()  # (the driver's unit in hand ends first: it must not write after the removal)
        raise
    finally:
        storage.remove_tree(scratch)
    marks.append(("scratch removed", time.time()))
    s = _summary(caps, results, len(tasks), took, ahead)
    s.marks = marks
    return s


def _summary(caps, results: list, ntasks: int, took: list, ahead: Ahead) -> SparkSummary:
    s = SparkSummary(tasks=ntasks, task_seconds=sum(t[0] for t in took), task_cpu=sum(t[1] for t in took))
    s.driver_units = ahead.units
    s.driver_seconds = sum(t[0] for t in ahead.took)
    s.driver_cpu = sum(t[1] for t in ahead.took)
    s.spans = [(t[3], t[2], t[0], t[1]) for t in ahead.took + took]
    for r in results:
        s.captures += r.captures
        s.packets += r.packets
        s.bytes += r.bytes
        s.tcp_streams += r.tcp_streams
        s.frames += r.frames
        s.errors += r.errors
        for t, n in r.rows.items():
            s.rows[t] = s.rows.get(t, 0) + n
        if r.split_of is not None:
            name = caps[r.split_of].name
            s.split[name] = s.split.get(name, 0) + 1
    s.captures += len(s.split)
    return s


__all__ = ["run", "SparkSummary", "InputError", "OutputExists", "DEFAULT_SPLIT_SIZE"]
