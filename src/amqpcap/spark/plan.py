"""Which captures go into which Spark task (driver side, no Spark needed).

Many files: captures are packed into about two tasks a core, balanced by bytes,
largest first (longest-processing-time rule: each capture, in decreasing size,
joins the task with the fewest bytes so far), so the long ones start first and
the cores end together; a task count that is a multiple of the cores leaves no
core a round of its own at the end.  Each task is a Spark task's fixed cost
(scheduling, its hand-over to a Python worker, its Parquet files), paid once
for all its captures.  gzip captures are one task each (they cannot be
split and their size on disk understates their work).  A plain capture larger
than the split size is split by TCP conversation (``amqpcap.spark.ranges``).
"""

from __future__ import annotations

import fnmatch
import glob
import heapq
import os
import posixpath
import stat
from dataclasses import dataclass, field

from amqpcap.spark import storage

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp", ".pcap.gz", ".pcapng.gz", ".cap.gz")
MIN_TASK_BYTES = 8 << 20  # below this a task is mostly Spark overhead (0.05-0.1 s per task)


class InputError(Exception):
    """An input path names nothing that can be read (one-line message)."""


@dataclass
class Capture:
    name: str  # the ``capture`` column: the path or URI as given (or as found in a directory)
    loc: storage.Location
    size: int
    gzip: bool
    splittable: bool = False  # pcap or pcapng, uncompressed: byte ranges can be indexed
    pipe: bool = False  # standard input or a FIFO: the driver reads it once and hands it on

    @property
    def path(self) -> str:
        return self.loc.path


@dataclass
class Task:
    """One Spark task: whole captures, or one bucket of a split capture."""

    id: int
    captures: list = field(default_factory=list)  # [Capture]
    bucket: object = None  # job.Bucket, for a split capture
    size: int = 0


def _glob_chars(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def expand(inputs) -> list[Capture]:
    """Files as given (whatever their name: they are recognised by content in the tasks);
    directories (recursively) and globs to the captures they hold, by file name.  Paths or
    URIs (``amqpcap.spark.storage``); the driver lists and sizes them, reading no record."""
    out: list[Capture] = []
    seen: set = set()

    def add(name: str, loc: storage.Location, size: int) -> None:
        if (loc.uri if not loc.local else loc.path) in seen:
            return
        seen.add(loc.uri if not loc.local else loc.path)
        head = storage.head(loc, 4) if size else b""
        gz = head[:2] == b"\x1f\x8b"
        from amqpcap.spark.ranges import splittable_format

        out.append(Capture(name, loc, size, gz, splittable_format(head)))

    for given in inputs:
        given = os.fspath(given)
        if _is_pipe(given):
            path = "/dev/stdin" if given == "-" else os.path.abspath(given)
            out.append(Capture(given, storage.Location(given, path), 0, False, pipe=True))
            continue
        try:
            loc = storage.locate(given)
        except storage.StorageError as e:
            raise InputError(str(e)) from None
        found = _found(given, loc)
        if found is None:
            add(given, loc, 0)  # a missing file becomes that capture's error, as in dissect
        else:
            for name, floc, size in found:
                add(name, floc, size)
    return out


def _is_pipe(given: str) -> bool:
    """``-`` (standard input), or a local path that is a FIFO or a character device."""
    if given == "-":
        return True
    if "://" in given:
        return False
    try:
        mode = os.stat(given).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def spool(c: Capture, dest: storage.Location) -> Capture:
    """Copy a pipe's bytes (read once, here on the driver) to ``dest``: the Capture tasks read."""
    import sys

    src = sys.stdin.buffer if c.name == "-" else open(c.loc.path, "rb")  # noqa: SIM115
    size, head = 0, b""
    try:
        f = dest.fs()
        f.create_dir(posixpath.dirname(dest.path), recursive=True)
        with f.open_output_stream(dest.path) as out:
            while True:
                chunk = src.read(8 << 20)
                if not chunk:
                    break
                if not head:
                    head = chunk[:4]
                out.write(chunk)
                size += len(chunk)
    finally:
        if src is not sys.stdin.buffer:
            src.close()
    from amqpcap.spark.ranges import splittable_format

    return Capture(c.name, dest, size, head[:2] == b"\x1f\x8b", splittable_format(head))


def _found(given: str, loc: storage.Location):
    """[(name, Location, size)] that ``given`` names; None for a file that is not there."""
    try:
        info = storage.info(loc)
    except storage.StorageError as e:
        raise InputError(str(e)) from None
    kind = info.type.name
    if kind == "File":
        return [(given, loc, info.size)]
    if kind == "Directory":
        files = [f for f in storage.listing(loc) if f.base_name.lower().endswith(CAPTURE_SUFFIXES)]
        if not files:
            raise InputError(f"{given}: directory holds no captures ({', '.join(CAPTURE_SUFFIXES)})")
        root = loc.path.rstrip("/")
        return [(given.rstrip("/") + f.path[len(root) :], _child(loc, f.path), f.size) for f in files]
    if _glob_chars(given):
        if loc.local:
            paths = sorted(glob.glob(loc.path, recursive=True))
            hits = [(p, storage.locate(p), os.path.getsize(p)) for p in paths if os.path.isfile(p)]
        else:
            parent = storage.Location(given.rsplit("/", 1)[0], posixpath.dirname(loc.path))
            hits = [
                (given.rsplit("/", 1)[0] + "/" + f.base_name, _child(parent, f.path), f.size)
                for f in storage.listing(parent)
                if fnmatch.fnmatch(f.path, loc.path)
            ]
        if not hits:
            raise InputError(f"{given}: no file matches")
        return hits
    return None


def _child(root: storage.Location, path: str) -> storage.Location:
    """The Location of ``path`` (on root's file system) found under ``root``."""
    rel = path[len(root.path.rstrip("/")) :].lstrip("/")
    return root.join(*rel.split("/"))


def pack(captures: list[Capture], n: int) -> list[list[Capture]]:
    """Pack plain captures into ``n`` groups balanced by bytes (LPT rule); gzip ones alone.

    Returns the groups largest first."""
    plain = sorted((c for c in captures if not c.gzip), key=lambda c: (-c.size, c.name))
    groups: list[list] = [[c] for c in captures if c.gzip]
    n = max(1, n) if plain else 0
    heap = [(0, i) for i in range(n)]
    bins: list[list] = [[] for _ in range(n)]
    for c in plain:
        size, i = heapq.heappop(heap)
        bins[i].append(c)
        heapq.heappush(heap, (size + c.size, i))
    groups += [b for b in bins if b]
    groups.sort(key=lambda g: -sum(c.size for c in g))
    return groups


def task_count(total: int, parallelism: int) -> int:
    """Tasks for ``total`` bytes of whole captures: two a core, fewer when a task would hold
    less than MIN_TASK_BYTES, rounded up to a multiple of the cores."""
    par = max(parallelism, 1)
    n = min(2 * par, max(1, -(-total // MIN_TASK_BYTES)))
    return -(-n // par) * par if n > 1 else 1


def parse_size(text: str) -> int:
    """``64M``, ``1G``, ``500k``, ``1048576`` -> bytes (powers of 1024)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    if t and t[-1] in "KMGT":
        mult = 1024 ** ("KMGT".index(t[-1]) + 1)
        t = t[:-1]
    try:
        v = float(t)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (e.g. 64M, 1G)") from None
    if v <= 0:
        raise ValueError(f"size must be > 0: {text!r}")
    return int(v * mult)
