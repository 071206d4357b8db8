"""Which captures go into which Spark task (driver side, no Spark needed).

Many files: captures are packed into tasks of about ``target`` bytes, largest
first (longest-processing-time rule: each capture, in decreasing size, joins
the task with the fewest bytes so far), so every task does seconds of work and
the long ones start first.  gzip captures are one task each (they cannot be
split and their size on disk understates their work).  A plain capture larger
than the split size is split by TCP conversation (``amqpcap.spark.split``).
"""

from __future__ import annotations

import glob
import heapq
import os
from dataclasses import dataclass, field

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp", ".pcap.gz", ".pcapng.gz", ".cap.gz")
MIN_TASK_BYTES = 8 << 20  # below this a task is mostly Spark overhead (0.05-0.1 s per task)


class InputError(Exception):
    """An input path names nothing that can be read (one-line message)."""


@dataclass
class Capture:
    name: str  # the ``capture`` column: the path as given (or as found in a directory)
    path: str  # local path to open
    size: int
    gzip: bool


@dataclass
class Task:
    """One Spark task: whole captures, or one bucket of a split capture."""

    id: int
    captures: list = field(default_factory=list)  # [Capture]
    bucket: object = None  # split.Bucket, for a split capture
    size: int = 0


def local_path(uri: str) -> str:
    """``file://`` URIs and plain paths to a local path; other schemes are refused (documented)."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if "://" in uri:
        raise InputError(
            f"{uri}: only local paths and file:// URIs are supported "
            "(mount other storage where every executor sees the same path)"
        )
    return uri


def _is_gzip(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def expand(inputs) -> list[Capture]:
    """Files as given (whatever their name: they are recognised by content in the tasks);
    directories (recursively) and globs to the captures they hold, by file name."""
    out: list[Capture] = []
    seen: set = set()

    def add(name: str, path: str) -> None:
        if path in seen:
            return
        seen.add(path)
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0  # unreadable: the task reports it as that capture's error
        out.append(Capture(name, path, size, _is_gzip(path)))

    for given in inputs:
        given = os.fspath(given)
        path = local_path(given)
        if os.path.isdir(path):
            found = []
            for root, dirs, files in os.walk(path):
                dirs.sort()
                found += [
                    os.path.join(root, f) for f in sorted(files) if f.lower().endswith(CAPTURE_SUFFIXES)
                ]
            if not found:
                raise InputError(f"{given}: directory holds no captures ({', '.join(CAPTURE_SUFFIXES)})")
            for p in found:
                name = given.rstrip("/") + p[len(path.rstrip("/")) :] if given != path else p
                add(name, p)
        elif any(ch in path for ch in "*?[") and not os.path.exists(path):
            found = sorted(glob.glob(path, recursive=True))
            if not found:
                raise InputError(f"{given}: no file matches")
            for p in found:
                add(p, p)
        else:
            add(given, path)  # a missing file becomes that capture's error, as in dissect
    return out


def pack(captures: list[Capture], target: int) -> list[list[Capture]]:
    """Pack plain captures into groups of about ``target`` bytes (LPT rule); gzip ones alone.

    Returns the groups largest first."""
    plain = sorted((c for c in captures if not c.gzip), key=lambda c: (-c.size, c.name))
    groups: list[list] = [[c] for c in captures if c.gzip]
    total = sum(c.size for c in plain)
    n = max(1, -(-total // max(target, 1))) if plain else 0
    heap = [(0, i) for i in range(n)]
    bins: list[list] = [[] for _ in range(n)]
    for c in plain:
        size, i = heapq.heappop(heap)
        bins[i].append(c)
        heapq.heappush(heap, (size + c.size, i))
    groups += [b for b in bins if b]
    groups.sort(key=lambda g: -sum(c.size for c in g))
    return groups


def task_target(total: int, parallelism: int, split_size: int) -> int:
    """Bytes per task: enough tasks to keep every core busy (about two each), each at
    least MIN_TASK_BYTES, none above the split size."""
    return max(min(split_size, -(-total // max(2 * parallelism, 1))), min(MIN_TASK_BYTES, split_size))


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
