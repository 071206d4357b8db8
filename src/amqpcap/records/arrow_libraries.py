"""pyarrow's shared libraries loaded ahead of its import, in a thread of their own.

A dissect imports pyarrow only to write its first batch (writer.py).  Most of that import is the
dynamic loader's work on pyarrow's extension files and the Arrow C++ libraries they link, done
with the GIL held when an import does it; done here first, it runs beside the packet loop.

The loading holds the dynamic loader's lock from start to end (~13 ms): an extension module the
packet loop imports meanwhile waits for it.  The loop imports some at a conversation's first
bytes (the AMQP 1.0 codec: fast10, and ``_hashlib`` with OpenSSL's libcrypto, ``_decimal``,
``_uuid`` for its types).  Started with the writer, the loading would hold a 1.0 capture's loop
there for up to its ~13 ms (bench_dissect's bulk10 on the 2-core machine at load ~20: the first
1.0 conversation's codec import took 99 ms of wall time with the loading under way, 34 ms
without, ~10 ms of CPU either way; medians of 10 runs).  So the dissect starts it once its loop
has taken the capture's first chunk of packets, whose conversations have chosen their codecs by
then (``pipeline.LoadingArrow``); a capture of one chunk or none has nothing left to overlap it
with, and leaves the loading to pyarrow's import at close.
"""

from __future__ import annotations

import os
import sys
import threading

# pyarrow's extension modules a dissect imports (DatasetWriter's), each file with the Arrow C++
# libraries it links: ~90 MB for the dynamic loader to map and relocate, ~46 M instructions
# (callgrind; ~13 ms), with the GIL held when an import opens them.
ARROW_EXTENSIONS = ("pyarrow.lib", "pyarrow._parquet")


class ArrowLibraries:
    """The files of ARROW_EXTENSIONS opened by the dynamic loader in a thread of their own, with
    the flags an import opens them with: dlopen with the GIL let go (``fastwriter.open_libraries``,
    or through ctypes without the compiled writer), so the loading runs beside the packet loop,
    on the other core.  The import of pyarrow, at the first batch, then finds them loaded and
    runs only the modules' Python side.  Nothing once pyarrow is imported (a notebook, a Spark
    task).

    ``start()`` starts the thread (once; made, it has not).  ``wait()`` returns once the thread
    is done, at once if it never started (the writer's close and abort wait for it: no thread
    holds the loader's lock when the process forks or the interpreter exits)."""

    __slots__ = ("done", "started")

    def __init__(self) -> None:
        self.done = threading.Lock()
        self.started = False

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        if "pyarrow.lib" in sys.modules:
            return
        paths = [path for path in map(extension_file, ARROW_EXTENSIONS) if path is not None]
        if paths:
            from amqpcap import compiled

            built = compiled.select("fastwriter")  # the writer's: chosen when it was imported
            opener = open_with_ctypes if built is None else built.open_libraries
            self.done.acquire()
            args = (opener, paths, sys.getdlopenflags())
            threading.Thread(target=self._open, args=args, daemon=True).start()

    def _open(self, opener, paths: list, flags: int) -> None:
        try:
            opener(paths, flags)
        finally:
            self.done.release()

    def wait(self) -> None:
        with self.done:
            pass


def open_with_ctypes(paths: list, flags: int) -> None:
    """``fastwriter.open_libraries`` through ctypes (its foreign calls let go of the GIL): each
    file opened with ``flags``, never closed; one that does not open (or no ctypes, no dlopen)
    is left to the import."""
    try:
        import ctypes

        dlopen = ctypes.CDLL(None).dlopen
        dlopen.restype = ctypes.c_void_p
        dlopen.argtypes = (ctypes.c_char_p, ctypes.c_int)
        for path in paths:
            dlopen(path, flags)
    except (ImportError, OSError, AttributeError):
        pass


def extension_file(name: str) -> bytes | None:
    """The file of extension module ``name`` (``package.module``), found without importing the
    package; None if there is none."""
    import importlib.machinery
    import importlib.util

    package, _, leaf = name.rpartition(".")
    try:
        where = importlib.util.find_spec(package).submodule_search_locations
    except (ImportError, AttributeError, ValueError):
        return None
    for folder in where or ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, leaf + suffix)
            if os.path.isfile(path):
                return os.fsencode(path)
    return None
