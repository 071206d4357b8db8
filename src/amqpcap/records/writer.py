"""Streaming Parquet output: one dataset directory per table, written atomically.

``DatasetWriter(out)`` writes into ``<out>.tmp-<pid>/<table>/part-00000.parquet`` (then
``part-00001.parquet``, ... every PART_GROUPS row groups) in row groups and renames the temporary
directory to ``out`` in ``close()``, so an interrupted run never leaves a dataset that looks
complete.

A table's rows wait in a ``TableBuffer`` until ROW_GROUP of them make a record batch.  Two
implementations, chosen once at import by compiled.py like the row builders:
``TableBufferReference`` here keeps the row tuples and converts them with ``pa.array`` at
flush; the compiled one (fastwriter.pyx, optional) appends every value to typed column buffers
as the row arrives and wraps them in Arrow arrays at flush (no ``pa.array``: no per-value
conversion at flush, and pyarrow does not import pandas).  Both write the same tables.

pyarrow is imported where it is used: the compiled buffers build a table's rows without it.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import queue
import threading

from amqpcap import compiled
from amqpcap.amqp import digests
from amqpcap.records import schema as declared  # declared.SCHEMAS: made (pyarrow imported) on first use
from amqpcap.records.arrow_libraries import ArrowLibraries
from amqpcap.records.outofrange import null_times
from amqpcap.records.schema import dictionary_columns

TYPE_CHECKING = False  # typing's, without importing typing (nothing else the dissect runs needs it)
if TYPE_CHECKING:
    import pyarrow as pa

# Rows per record batch: smaller batches lower peak RSS (200k small packets: 122 MB at 8192, 142 MB
# at 16384) and let a mid-sized capture's batches be encoded while it is read rather than at close.
ROW_GROUP = 8192
# Batches held and written together as one Parquet row group, up to GROUP_ROWS rows or GROUP_BYTES
# of Arrow data (what the held batches cost in RSS): a reader holds every row group's column chunk
# metadata while a file is open (~50 kB a group of the methods table: 8192-row groups made the
# 4 GB bench capture's methods footer cost ~89 MB at every open: 34 MB at 65536 / 8 MB), and the
# files come out ~1-7% smaller.  24 MB of batches would cost dissect +73 MB peak RSS (8 MB: +14).
# A file's first FIRST_GROUPS groups are FIRST_GROUP_ROWS and each next one twice the last, up to
# GROUP_ROWS: a small table is encoded in the Parquet thread while the capture is still read, not
# all at close (the last group is always encoded at close: two of 8192 rows rather than 8192 then
# 16384 leave a 42 MB capture's methods 1,214 rows to encode there, not 9,406).
FIRST_GROUP_ROWS = ROW_GROUP
FIRST_GROUPS = 2
GROUP_ROWS = 1 << 16
GROUP_BYTES = 8 << 20
# Row groups per file of a dissect output: a reader holds every row group's metadata while a file is
# open (~65 kB a group of the methods table), so a big table in files of PART_GROUPS groups (about
# a million rows) costs a reader one file's footer, whatever the capture's size.
PART_GROUPS = 16
QUEUED = 2  # row groups in the Parquet thread at most, every table (one written, one waiting)
# Parquet encoding and compression (~12% of a small-packet dissect) in a thread of its own: 12% faster
# on 2 cores (bench_dissect small), +2 MB peak RSS.
BACKGROUND = True


class OutputExists(Exception):
    """``out`` exists and ``force`` was not given (exit code ``Exit.OUTPUT_EXISTS``)."""


class Job:
    """A batch handed to the Parquet thread.  ``done()`` once it is written (or failed);
    ``exception()`` waits for that and returns what the write raised (None); ``result()`` waits
    and raises it.  (concurrent.futures would do, and costs ~10 ms of every start to import.)"""

    __slots__ = ("write", "batch", "error", "finished")

    def __init__(self, write, batch: pa.RecordBatch) -> None:
        self.write, self.batch, self.error = write, batch, None
        self.finished = threading.Event()

    def run(self) -> None:
        try:
            self.write(self.batch)
        except BaseException as e:  # raised in the caller (result), whatever it is
            self.error = e
        finally:
            self.write = self.batch = None  # the batch's memory goes back once it is written
            self.finished.set()

    def done(self) -> bool:
        return self.finished.is_set()

    def exception(self) -> BaseException | None:
        self.finished.wait()
        return self.error

    def result(self) -> None:
        error = self.exception()
        if error is not None:
            raise error


def _parquet_thread(jobs: queue.SimpleQueue) -> None:
    while True:
        jobs.get().run()


_jobs: queue.SimpleQueue | None = None  # the Parquet thread's, shared by every table (started on demand)
_jobs_pid = 0  # the process that started it (a forked child starts its own)
_inflight: collections.deque = collections.deque()  # batches handed to it, every table, oldest first


def _in_background(write, batch) -> Job:
    """``write(batch)`` in the Parquet thread, once fewer than QUEUED batches are in flight."""
    global _jobs, _jobs_pid
    if _jobs is None or _jobs_pid != os.getpid():
        _jobs, _jobs_pid = queue.SimpleQueue(), os.getpid()
        # a daemon: idle between dissections, and nothing is left to it once a file is closed
        threading.Thread(target=_parquet_thread, args=(_jobs,), name="amqpcap-parquet", daemon=True).start()
        _inflight.clear()
    while len(_inflight) >= QUEUED:
        _inflight[0].exception()  # waits; the table that wrote it raises its error
        _inflight.popleft()
    job = Job(write, batch)
    _jobs.put(job)
    _inflight.append(job)
    return job


# What pq.ParquetWriter passes its engine by default, spelled out (the same file, byte for byte:
# tests/records compares the two).
ENGINE_DEFAULTS = dict(
    version="2.6", write_statistics=True, writer_engine_version="V2", data_page_version="1.0"
)


class EngineWriter:
    """``pq.ParquetWriter``'s ``write_batch`` and ``close`` over its engine."""

    __slots__ = ("engine",)

    def __init__(self, engine) -> None:
        self.engine = engine

    def write_table(self, table: pa.Table, row_group_size: int) -> None:
        self.engine.write_table(table, row_group_size)

    def close(self) -> None:
        self.engine.close()


def parquet_engine():
    """pyarrow.parquet.ParquetWriter's engine class (``pyarrow._parquet``'s), or None."""
    try:
        from pyarrow._parquet import ParquetWriter
    except ImportError:  # pragma: no cover - every pyarrow this project supports has it
        return None
    return ParquetWriter


def open_parquet(path: str, schema: pa.Schema, reference: bool = False):
    """A Parquet writer of ``path`` for ``schema`` (zstd, the schema's dictionary columns).

    ``pyarrow.parquet.ParquetWriter``'s engine (``pyarrow._parquet``) opened on the path: the
    same file, without importing ``pyarrow.parquet``, which brings pyarrow's filesystem layer
    with it (~25 ms of every dissect's start, a tenth of a 40 MB capture's run).
    ``pq.ParquetWriter`` itself with ``reference``, or where the engine takes other options."""
    options = dict(compression="zstd", use_dictionary=dictionary_columns(schema))
    engine = None if reference else parquet_engine()
    if engine is not None:
        try:
            return EngineWriter(engine(path, schema, **ENGINE_DEFAULTS, **options))
        except TypeError:  # a pyarrow whose engine has other parameters
            pass
    import pyarrow.parquet as pq

    return pq.ParquetWriter(path, schema, **options)


@contextlib.contextmanager
def named(path: str):
    """An OSError raised inside without a file name gets ``path`` (pyarrow's I/O errors name
    none: a full disk is then an output that cannot be written, exit 3, not an internal error)."""
    try:
        yield
    except OSError as e:
        if e.filename is not None or not e.errno:
            raise
        raise OSError(e.errno, os.strerror(e.errno), path) from e


class ParquetFile:
    """``<path>/part-00000.parquet``, opened at the first batch, with its schema (an empty table
    still gets its file: readers find the schema); with ``part_groups``, the next file
    (``part-00001.parquet``, ...) is opened every ``part_groups`` row groups.

    With ``background``, batches are encoded and compressed in the Parquet thread (the writer
    releases the GIL; one thread for every table, QUEUED batches in flight at most): an
    error there is raised by the next ``write`` of this file or by ``close``, which waits for
    its batches."""

    __slots__ = (
        "path",
        "writer",
        "stored",
        "background",
        "pending",
        "out_of_range",
        "held",
        "held_text",
        "held_rows",
        "held_bytes",
        "group_rows",
        "groups",
        "part_groups",
        "part",
        "part_written",
    )

    def __init__(
        self,
        path: str,
        background: bool = False,
        part_groups: int | None = None,
        out_of_range: dict | None = None,
    ) -> None:
        self.path = path
        self.writer = None
        self.stored = None  # the file's schema: the batches' with their time columns split (times.py)
        self.background = background
        self.pending: list[Job] = []  # this file's row groups in the Parquet thread
        # capture -> outofrange.OutOfRange: its rows' times to null (the dataset's, shared)
        self.out_of_range: dict = {} if out_of_range is None else out_of_range
        self.held: list = []  # batches of the next row group (group_rows, GROUP_BYTES)
        self.held_text: list = []  # their fastwriter.DeferredText: written before they are read
        self.held_rows = self.held_bytes = 0
        self.group_rows = min(FIRST_GROUP_ROWS, GROUP_ROWS)  # this file's next row group, in rows
        self.groups = 0  # row groups begun (held batches handed on)
        self.part_groups = part_groups  # row groups per file (None: one file)
        self.part = 0  # the file written: part-<part>.parquet
        self.part_written = 0  # its row groups

    def write(self, batch: pa.RecordBatch, text=None) -> None:
        """Write ``batch`` (a table's rows: exact ns times), its time columns stored as
        ``times.to_stored`` splits them: held until its row group is full, then written (in the
        Parquet thread, with ``background``).  ``text``: the fastwriter.DeferredText that
        completes the batch's text columns, written there first."""
        if self.out_of_range:
            batch = null_times(batch, self.out_of_range)
        with named(self.file):
            if self.writer is None:
                from amqpcap.records import times  # pyarrow's, with the first batch

                os.makedirs(self.path, exist_ok=True)
                self.stored = times.stored_schema(batch.schema)
                self.writer = open_parquet(self.file, self.stored)
            if not batch.num_rows:
                return
            self.held.append(batch)
            if text is not None:
                self.held_text.append(text)
            self.held_rows += batch.num_rows
            self.held_bytes += batch.nbytes
            if self.held_rows >= self.group_rows or self.held_bytes >= GROUP_BYTES:
                self.groups += 1
                if self.groups >= FIRST_GROUPS:
                    self.group_rows = min(2 * self.group_rows, GROUP_ROWS)
                self.write_held()

    def write_held(self) -> None:
        """The held batches written as one row group (in the Parquet thread, with ``background``)."""
        group = (self.held, self.held_text)
        self.held, self.held_text, self.held_rows, self.held_bytes = [], [], 0, 0
        if not group[0]:
            return
        if not self.background:
            self._settle(wait=True)  # its row groups still in the Parquet thread go first
            self._write_stored(group)
            return
        self._settle(wait=False)
        self.pending.append(_in_background(self._write_stored, group))

    def _write_stored(self, group: tuple) -> None:
        """``group``: (the batches of a row group, the DeferredText of their text columns)."""
        import pyarrow as pa

        from amqpcap.records import times

        batches, texts = group
        for text in texts:  # a body digest is waited for (or hashed) here, not by the dissect's thread
            text.write()
        texts.clear()
        stored = pa.Table.from_batches([times.to_stored(b, self.stored) for b in batches], self.stored)
        batches.clear()  # the exact-time batches go as soon as they are split
        # each step named here, in the thread that moves to the next part: an error names its file
        if self.part_groups and self.part_written >= self.part_groups:  # the next file, when a group comes
            with named(self.file):
                self.writer.close()
            self.part, self.part_written = self.part + 1, 0
            with named(self.file):
                self.writer = open_parquet(self.file, self.stored)
        with named(self.file):
            self.writer.write_table(stored, stored.num_rows)
        self.part_written += 1

    @property
    def file(self) -> str:
        return os.path.join(self.path, f"part-{self.part:05d}.parquet")

    def writing(self) -> bool:
        """True while the Parquet thread has a row group of this file not yet written."""
        return any(not job.done() for job in self.pending)

    def _settle(self, wait: bool) -> None:
        """Forget this file's written batches (all of them: ``wait``), raising the first error."""
        while self.pending and (wait or self.pending[0].done()):
            self.pending.pop(0).result()

    def close(self) -> None:
        with named(self.file):
            try:
                self.write_held()
                self._settle(wait=True)
            finally:
                for job in self.pending:  # the file is closed after its last group, whatever happened
                    job.exception()
                if self.writer is not None:
                    self.writer.close()

    def abort(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Written:
    """The Parquet side both table buffers share: ``file`` (a ParquetFile) is closed after the
    last ``flush``; ``abort`` drops it."""

    __slots__ = ()

    def close(self) -> None:
        self.flush()
        self.file.close()

    def abort(self) -> None:
        self.file.abort()


class TableBufferReference(Written):
    """Row tuples of one table; converted and written as a record batch every ROW_GROUP rows."""

    __slots__ = ("name", "schema", "struct", "pending", "path", "file", "rows")

    def __init__(self, name: str, path: str, part_groups: int | None = None, out_of_range=None) -> None:
        import pyarrow as pa

        self.name = name
        self.schema = declared.SCHEMAS[name]
        self.struct = pa.struct(list(self.schema))  # a row as one struct value: see flush
        self.pending: list = []  # row tuples; converted column by column at flush
        self.path = path
        self.file = ParquetFile(path, BACKGROUND, part_groups, out_of_range)
        self.rows = 0

    def append(self, row: tuple) -> None:
        """``row``: a tuple in schema column order."""
        self.pending.append(row)
        if len(self.pending) >= ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        n = len(self.pending)
        if not n and self.file.writer is not None:
            return
        import pyarrow as pa

        # Arrow converts the row tuples as one struct array, in C++: 2-3x faster than transposing
        # them into column lists in Python and converting each (54 -> 20 ms per 16k method rows).
        rows = pa.array(self.pending, type=self.struct)
        self.file.write(pa.RecordBatch.from_arrays(rows.flatten(), schema=self.schema))
        self.rows += n
        self.pending = []


_compiled_class = None


def compiled_table_buffer():
    """The compiled TableBuffer class (fastwriter must be built): ``fastwriter.Columns`` (rows
    into column buffers, in C) with the Parquet side of ``TableBufferReference``."""
    global _compiled_class
    if _compiled_class is None:
        from amqpcap.records import fastwriter

        # the compiled walker's body digests may come before its hashing thread is done with them
        capsule = digests.deferred_text()
        if capsule is not None:
            fastwriter.defer_text(capsule)

        class TableBufferCompiled(fastwriter.Columns, Written):
            __slots__ = ("name", "path", "file", "rows")

            def __init__(self, name: str, path: str, part_groups=None, out_of_range=None) -> None:
                super().__init__(name, ROW_GROUP)  # append: fastwriter's, in C
                self.name = name
                self.path = path
                self.file = ParquetFile(path, BACKGROUND, part_groups, out_of_range)
                self.rows = 0

            def flush(self) -> None:
                n = self.pending
                if not n and self.file.writer is not None:
                    return
                self.file.write(*self.take_later())  # deferred digests written where it is encoded
                self.rows += n

        _compiled_class = TableBufferCompiled
    return _compiled_class


def takes_deferred_digests(table) -> bool:
    """True if ``table`` takes a body digest the compiled walker's hashing thread is still on
    (``Content.body_hash`` of a decoder with ``deferred_digests``): a compiled table buffer,
    which writes its text when the batch is made."""
    if _compiled_class is None or not isinstance(table, _compiled_class):
        return False
    from amqpcap.records import fastwriter

    return fastwriter.defers_text()


def pending_rows(table) -> int:
    """Rows of ``table`` (either buffer) not yet handed to its file."""
    pending = table.pending
    return pending if isinstance(pending, int) else len(pending)


def release_memory() -> None:
    """The compiled buffers' pooled memory freed (every batch written: nothing refers to it)."""
    if TableBuffer is not TableBufferReference:
        from amqpcap.records import fastwriter

        fastwriter.release_pool()


def compiled_in_use() -> bool:
    """True if ``TableBuffer`` (what DatasetWriter uses) is the compiled one."""
    return TableBuffer is not TableBufferReference


# what DatasetWriter buffers tables with, chosen once at import
TableBuffer = compiled_table_buffer() if compiled.select("fastwriter") is not None else TableBufferReference


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, someone else's
        return False
    return False


def sweep_stale(out: str) -> None:
    """Remove ``OUT.tmp-PID`` and ``OUT.old-PID`` left by runs into ``out`` that were killed
    (their PID is gone)."""
    parent, base = os.path.split(out)
    try:
        names = os.listdir(parent or ".")
    except OSError:
        return
    for name in names:
        stem, sep, pid = name.rpartition("-")
        if sep and stem in (f"{base}.tmp", f"{base}.old") and pid.isdigit() and _pid_gone(int(pid)):
            import shutil

            path = os.path.join(parent, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)


# What a rename onto an existing OUT fails with: a non-empty directory, a file.
_TAKEN = (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR)


class DatasetWriter:
    """Tables written under ``OUT.tmp-PID`` and renamed to ``OUT`` when complete.  The rename
    never replaces what another run put there meanwhile unless ``force``; runs racing with
    ``force`` each install a complete dataset in turn, the last one stays.  A table's rows go to a
    new file every PART_GROUPS row groups (``one_file``: one file a table)."""

    def __init__(self, out: str, tables, *, force: bool = False, one_file: bool = False) -> None:
        self.out = os.path.abspath(out)
        self.force = force
        if os.path.exists(self.out) and not force:
            raise OutputExists(f"output {out} exists (use --force to replace it)")
        sweep_stale(self.out)
        self.tmp = f"{self.out}.tmp-{os.getpid()}"
        if os.path.exists(self.tmp):
            import shutil  # where it is needed: not at every start (~1.9 ms with its imports)

            shutil.rmtree(self.tmp)
        try:
            os.makedirs(self.tmp)
        except OSError as e:  # named as the user wrote it, not as its temporary twin
            raise type(e)(e.errno, e.strerror, out) from None
        # pyarrow for the batches to come: its libraries loaded in a thread once asked
        # (load_arrow), imported at the first batch or at close
        self.arrow = ArrowLibraries()

        self.out_of_range: dict = {}  # shared by every table's file (note_out_of_range)
        part_groups = None if one_file else PART_GROUPS
        self.tables = {
            name: TableBuffer(name, os.path.join(self.tmp, name), part_groups, self.out_of_range)
            for name in tables
        }

    def __getitem__(self, name: str) -> TableBuffer:
        return self.tables[name]

    def load_arrow(self) -> None:
        """pyarrow's libraries loaded in a thread of their own from now on, beside the work that
        fills the tables (arrow_libraries.py; the dissect's loop asks once it is under way)."""
        self.arrow.start()

    def note_out_of_range(self, capture: str, found) -> None:
        """The rows of ``capture`` whose packet is in ``found`` (an outofrange.OutOfRange) are
        written with a null time."""
        self.out_of_range[capture] = found

    def close(self) -> dict[str, int]:
        # Every table's last batch written before any file waits for its own (closed one by
        # one, the small tables waited behind the large ones' batches).  The Parquet thread
        # takes the largest, its last row group handed on at once (held, it would wait for its
        # file's close, after the others'); this thread, which would only wait, writes the others
        # meanwhile (a table's batch still in the thread first: ParquetFile.write waits for it),
        # those with none in flight first, and closes them before it waits for the largest.
        self.arrow.wait()
        tables = list(self.tables.values())
        largest = max(tables, key=lambda t: pending_rows(t) + t.file.held_rows)
        largest.flush()
        largest.file.write_held()
        mine = sorted((t for t in tables if t is not largest), key=lambda t: t.file.writing())
        for t in mine:
            t.file.background = False
            t.flush()
        for t in mine:
            t.close()
        largest.close()
        release_memory()
        self._install()
        return {name: t.rows for name, t in self.tables.items()}

    def _install(self) -> None:
        """Rename the finished ``tmp`` to ``out``: the check for an existing ``out`` is the
        rename itself (it fails on a non-empty directory or a file), so nothing another run
        put there since the start is replaced without ``force``."""
        old = f"{self.out}.old-{os.getpid()}"
        for _ in range(100):  # other --force runs may take OUT between our two renames
            try:
                os.rename(self.tmp, self.out)
                return
            except OSError as e:
                if e.errno not in _TAKEN:
                    raise
                if not self.force:
                    raise OutputExists(
                        f"output {self.out} was created by another run meanwhile (use --force to replace it)"
                    ) from None
            try:
                os.rename(self.out, old)
            except FileNotFoundError:  # another run moved it aside first: try again
                continue
            if os.path.isdir(old) and not os.path.islink(old):
                import shutil

                shutil.rmtree(old, ignore_errors=True)
            else:  # --force over a file (or a link): rmtree would leave it behind
                os.remove(old)
        raise OutputExists(f"output {self.out} is being replaced by other runs; not written")

    def abort(self) -> None:
        import shutil

        self.arrow.wait()
        for t in self.tables.values():
            t.abort()
        shutil.rmtree(self.tmp, ignore_errors=True)
