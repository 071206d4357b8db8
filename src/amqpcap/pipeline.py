"""The whole data flow: capture -> packets -> TCP streams -> AMQP events -> Parquet.

``dissect()`` is what the CLI, ``amqpcap.load`` and the Spark job call; ``Dissector`` is one
capture's run, which the show and live commands drive too.  The per-packet loop is flows.py's
and stays free of per-packet objects beyond the tuples the capture stage yields.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time

from amqpcap import flows
from amqpcap.capture.reader import CaptureError, open_capture
from amqpcap.conversations import Conversations
from amqpcap.exitcodes import Exit
from amqpcap.output import CaptureOutput, link_type_text
from amqpcap.records.outofrange import OutOfRange
from amqpcap.records.writer import DatasetWriter, takes_deferred_digests
from amqpcap.values import DEFAULT_PORTS, Options, Summary

EXIT_LINKTYPE = Exit.LINKTYPE
GC_GEN0 = 50_000  # young allocations between cyclic collections while dissecting (default 700)
SWITCH_INTERVAL = 0.0002  # s: how long the Parquet thread waits for the GIL before asking (default 0.005)


@contextlib.contextmanager
def _hot_loop():
    """The interpreter tuned for the hot loop, its settings restored afterwards (library callers).

    The cyclic GC runs less often: every packet allocates short-lived objects, and the reference
    table buffer keeps up to ROW_GROUP row tuples (tracked) until it flushes (the compiled one
    keeps C buffers), so with gen 0 at 700 the collector ran 1,149 times on 200k small packets
    and took ~18% of the process time.  Rows hold no cycles; a higher gen-0 threshold still
    collects the few cycles there are, so memory stays bounded.

    The GIL is handed over sooner: the Parquet thread needs it twice a batch (to start the write
    and once the encoder lets go of it), and waits a switch interval before it asks this thread
    to let go.  This thread also releases it on its own, at every read of the capture (about
    every millisecond on small packets), and takes it straight back; a waiter that sees the GIL
    change hands within its interval does not ask, and waits another.  With the default 5 ms the
    Parquet thread spent more than half its time waiting (200k small packets: its batches 0.36 s
    of CPU in 0.83-1.05 s), and this thread waited for it in turn (110-190 ms).  0.2 ms is under
    the time between reads; the interval costs nothing while nobody waits."""
    old = gc.get_threshold()
    old_interval = sys.getswitchinterval()
    gc.set_threshold(max(old[0], GC_GEN0), *old[1:])
    sys.setswitchinterval(min(old_interval, SWITCH_INTERVAL))
    try:
        yield
    finally:
        gc.set_threshold(*old)
        sys.setswitchinterval(old_interval)


class UnreadableCaptures(CaptureError):
    """No input of a dissect could be read: ``errors`` holds each one's CaptureError (the first
    gives the message and the exit code)."""

    def __init__(self, errors: list) -> None:
        first = errors[0]
        super().__init__(first.path, first.reason, first.exit_code)
        self.errors = errors


class Dissector:
    """Dissects one capture into an open DatasetWriter: the packet loop (flows.py) over the
    conversations held (conversations.py), the rows into the capture's tables (output.py)."""

    def __init__(self, capture: str, writer: DatasetWriter, opts: Options) -> None:
        self.capture = capture
        self.writer = writer
        self.opts = opts
        # the messages table writes a body digest when its batch is made: hashing overlaps decoding
        self.deferred_digests = takes_deferred_digests(writer["messages"])
        self.on_conversation = None  # called with each new Conversation (amqpcap show's addresses)
        # first packet number -> tcp_stream, when a run sees part of a capture's conversations
        # (Spark: the whole capture's numbering); None: numbered in order of appearance
        self.stream_of = None
        self.conversations = None  # the run's conversations.Conversations
        # what the run did: packets read, their bytes on the wire, TCP conversations, AMQP
        # frames decoded, server port -> TCP conversations
        self.packets = self.bytes = self.nstreams = self.frames = 0
        self.server_ports: dict = {}

    def run(self, source, progress=None) -> None:
        out_of_range = OutOfRange(source)  # packets whose time no column holds
        note = getattr(self.writer, "note_out_of_range", None)  # every writer but a test's stand-in
        if note is not None:
            note(self.capture, out_of_range)
        output = CaptureOutput(self.capture, self.writer, out_of_range, self.deferred_digests)
        held = Conversations(self.opts, output, self.stream_of, self.on_conversation)
        self.conversations = held
        loop = flows.new_flows(held, output)
        load = getattr(self.writer, "load_arrow", None)  # a DatasetWriter (not show's sinks)
        with _hot_loop():
            self.packets = loop.run(source if load is None else loading_arrow(source, load), progress)
            for number, ts, kind, detail in getattr(source, "anomalies", ()):
                output.capture_anomaly(number, ts, kind, detail)
            held.finish_all()  # the conversations still open, and every connections row
        self.bytes, self.nstreams, self.frames = loop.bytes, held.count, held.frames
        self.server_ports = held.server_ports
        if output.unsupported and held.count == 0:
            names = ", ".join(link_type_text(lt) for lt in sorted(output.unsupported))
            raise CaptureError(self.capture, f"unsupported {names}", EXIT_LINKTYPE)

    def write_finished(self) -> None:
        """Write the connections rows of the conversations that have ended (live: at each segment)."""
        self.conversations.write_done()


class LoadingArrow:
    """``source``'s batches, with ``load`` (the writer's ``load_arrow``) called once the packet
    loop has taken the first one and another follows: the codecs of the capture's first
    conversations are imported by then, and the extension modules they import (the AMQP 1.0
    codec's) do not wait for the dynamic loader while it loads pyarrow's libraries
    (records/arrow_libraries.py).  A capture of one batch or none leaves them to pyarrow's
    import at close: nothing is left to overlap.  A source without batches (live, scapy
    packets) has it called at once."""

    __slots__ = ("source", "load")

    def __init__(self, source, load) -> None:
        self.source, self.load = source, load

    def batches(self):
        batches = getattr(self.source, "batches", None)
        if batches is None:
            self.load()
            yield self.source
            return
        yield from self.loading(batches())

    def loading(self, pieces):
        """The batches (or chunks) ``pieces``, ``load`` called before the second is handed on."""
        pieces = iter(pieces)
        first = next(pieces, None)
        if first is None:
            return
        yield first
        second = next(pieces, None)
        if second is None:
            return
        self.load()
        yield second
        yield from pieces


class LoadingChunks(LoadingArrow):
    """LoadingArrow of a source with ``chunks()`` (the reader's records located in its read
    buffer, which the packet loop takes rather than its batches)."""

    __slots__ = ()

    def chunks(self):
        return self.loading(self.source.chunks())


def loading_arrow(source, load) -> LoadingArrow:
    """``source`` with ``load`` called as LoadingArrow says: its chunks if it has them."""
    return (LoadingChunks if getattr(source, "chunks", None) is not None else LoadingArrow)(source, load)


def _progress_printer(path: str):
    start = time.monotonic()

    def show(packets: int, nbytes: int) -> None:
        el = max(time.monotonic() - start, 1e-6)
        sys.stderr.write(
            f"\r{os.path.basename(path)}: {packets:,} packets, {nbytes / 1e6:,.1f} MB "
            f"({nbytes / 1e6 / el:,.1f} MB/s)   "
        )
        sys.stderr.flush()

    return show


def dissect(
    captures,
    out: str,
    *,
    body_bytes: int = 64,
    frames: bool = False,
    ports=(),
    keep_secrets: bool = False,
    force: bool = False,
    progress: bool = False,
) -> Summary:
    """Dissect ``captures`` into the Parquet dataset directory ``out``.

    An input that cannot be read (not a capture, unreadable, unsupported link type) is left
    out and named in ``Summary.errors``; the others are written.  Raises CaptureError when
    none can be read (UnreadableCaptures, with each one's error, for several inputs) and
    OutputExists.
    """
    if isinstance(captures, (str, os.PathLike)):
        captures = [captures]
    opts = Options(
        body_bytes=body_bytes,
        frames=frames,
        ports=DEFAULT_PORTS | frozenset(ports),
        keep_secrets=keep_secrets,
    )
    sources: list = []
    summary = Summary()
    try:
        for c in captures:  # every input opened (and recognised) before anything is written
            try:
                sources.append((str(c), open_capture(c)))
            except CaptureError as e:
                summary.errors.append(e)
        if not sources:
            _unreadable(summary.errors)
        tables = ["connections", "methods", "messages", "anomalies"] + (["frames"] if frames else [])
        writer = DatasetWriter(out, tables, force=force)
        t0 = time.monotonic()
        try:
            for name, source in sources:
                try:
                    _run_one(name, source, writer, opts, progress, summary)
                except CaptureError as e:  # (its rows so far are what it had: an anomaly)
                    summary.errors.append(e)
            if not summary.captures:
                _unreadable(summary.errors)
            summary.rows = writer.close()
        except BaseException:
            writer.abort()
            raise
    finally:
        for _name, source in sources:
            source.close()  # a pipe or FIFO stays open until read; let the other end know
    summary.seconds = time.monotonic() - t0
    return summary


def _unreadable(errors: list):
    raise errors[0] if len(errors) == 1 else UnreadableCaptures(errors)


def _run_one(name, source, writer, opts, progress, summary) -> None:
    d = Dissector(name, writer, opts)
    show = _progress_printer(name) if progress else None
    d.run(source, show)
    if show:
        sys.stderr.write("\n")
    summary.captures += 1
    summary.packets += d.packets
    summary.bytes += d.bytes
    summary.tcp_streams += d.nstreams
    summary.frames += d.frames
    for port, n in d.server_ports.items():
        summary.server_ports[port] = summary.server_ports.get(port, 0) + n


__all__ = ["dissect", "Options", "Summary", "CaptureError", "UnreadableCaptures"]
