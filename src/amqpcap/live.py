"""``amqpcap live``: AMQP methods as they happen on an interface, through scapy's capture.

    amqpcap live -i IFACE [-f BPF] [--ports 5673] [--absolute] [show's filters]
                 [-o OUT [--rotate 60s|100MB] [--force]]

Packets come from scapy's packet socket (``conf.L2listen``; on the loopback
interface ``conf.L2socket``, which drops the outgoing copy of each packet as
libpcap does) as raw bytes and go through the same ``Dissector`` as a capture
file; method and anomaly rows are printed in ``amqpcap show``'s format, filtered by show's
options (``--stream``, ``--channel``, ``--method``, ...; ``amqpcap.filters``: the segments
keep every row).

With ``-o OUT`` the rows are also written as Parquet segments, the layout of
``amqpcap dissect``: ``OUT/<table>/part-NNNNN.parquet``.  A segment is written
under ``OUT/.segments/`` and renamed into its table directory when it is
complete, so a reader of ``OUT`` (``amqpcap stats``, Spark) never sees a
partial file.  ``--rotate 60s`` starts a new segment every 60 seconds (also
``m``, ``h``), ``--rotate 100MB`` after 100 MB of captured packets (also ``KB``,
``GB``).  The connection row of a conversation is written in the segment in
which the conversation ended.

Ctrl-C (SIGINT) or SIGTERM stops the capture after the current packet: open
conversations are finished (their rows written), the last segment is closed; Ctrl-C is the
way to end a capture (exit 0), SIGTERM exits 143 as the exit-code table says.

Exit codes (amqpcap.exitcodes): 77 no privilege to capture (run as root or give
the interpreter CAP_NET_RAW), 66 no such interface / the interface cannot be
captured on, 64 bad usage (also an invalid BPF filter), 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import signal
import sys
import threading
import time

from amqpcap import filters
from amqpcap.capture.reader import TS_MAX, TS_MIN
from amqpcap.cli import add_command, port_list
from amqpcap.exitcodes import Exit
from amqpcap.records.outofrange import KIND

RECV_SIZE = 1 << 18  # larger than any loopback frame (MTU 65536 + link header)
POLL_SECONDS = 0.2  # how often an idle capture checks Ctrl-C and the rotation clock

_UNITS = {"s": 1, "m": 60, "h": 3600, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9}


class Rotation:
    """When a new segment starts: after ``seconds`` or after ``nbytes`` of captured packets."""

    def __init__(self, seconds: float | None = None, nbytes: int | None = None) -> None:
        self.seconds = seconds
        self.nbytes = nbytes

    @classmethod
    def parse(cls, text: str) -> Rotation:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*", text)
        unit = m.group(2).lower() if m else None
        if unit not in _UNITS or float(m.group(1)) <= 0:
            raise argparse.ArgumentTypeError(f"not a rotation: {text!r} (e.g. 60s, 5m, 1h, 100MB)")
        value = float(m.group(1)) * _UNITS[unit]
        return cls(seconds=value) if unit in ("s", "m", "h") else cls(nbytes=int(value))

    def due(self, started: float, now: float, nbytes: int) -> bool:
        return (self.seconds is not None and now - started >= self.seconds) or (
            self.nbytes is not None and nbytes >= self.nbytes
        )


def register(subparsers) -> None:
    """Add the ``live`` subcommand to the CLI's subparsers."""
    p = add_command(
        subparsers,
        "live",
        "print AMQP methods as they happen on an interface (and write rolling Parquet segments)",
        (
            "amqpcap live -i lo -f 'tcp port 5672'",
            "amqpcap live -i eth0 --method basic.publish --method basic.deliver",
            "amqpcap live -i eth0 -o segments --rotate 5m",
        ),
        run,
    )
    p.description += (
        ".\n\nLines are show's, filtered by its options (the segments keep every row).\n"
        "Ctrl-C stops the capture (exit 0), SIGTERM too (exit 143): open conversations\n"
        "are finished and the last segment is closed; nothing written is removed."
    )
    p.add_argument("-i", "--interface", required=True, help="interface to capture on, e.g. eth0 or lo")
    p.add_argument("-f", "--filter", default="tcp", help="BPF filter (default: tcp)")
    p.add_argument("--ports", type=port_list, default=[], help="extra TCP ports to treat as AMQP")
    p.add_argument(
        "--absolute",
        action="store_true",
        help="absolute UTC times instead of seconds since the first packet captured",
    )
    filters.add_arguments(p)
    p.add_argument("-o", "--out", help="also write Parquet segments to this directory")
    p.add_argument("--rotate", type=Rotation.parse, help="start a new segment every 60s / 5m / 1h or 100MB")
    p.add_argument(
        "--body-bytes", type=int, default=64, metavar="N", help="bytes of each body kept (default 64)"
    )
    p.add_argument("--keep-secrets", action="store_true", help="keep passwords (off by default)")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")


# -- output ------------------------------------------------------------------------------------


class _SegmentTable:
    """One table's rows: the current segment's file, renamed into the table directory on rotation."""

    def __init__(self, name: str, out: str) -> None:
        self.name = name
        self.out = out
        self.rows = 0
        self.current = None
        self.segment = -1
        self.out_of_range: dict = {}  # the SegmentWriter's: capture -> outofrange.OutOfRange

    def start(self, segment: int) -> None:
        from amqpcap.records.writer import TableBuffer

        self.segment = segment
        tmp = os.path.join(self.out, ".segments", f"{self.name}-{segment:05d}")
        self.current = TableBuffer(self.name, tmp, out_of_range=self.out_of_range)

    def append(self, row) -> None:
        self.current.append(row)

    def finish(self) -> None:
        t = self.current
        t.close()
        self.rows += t.rows
        done = os.path.join(self.out, self.name, f"part-{self.segment:05d}.parquet")
        os.replace(os.path.join(t.path, "part-00000.parquet"), done)  # atomic: readers see all or nothing
        shutil.rmtree(t.path, ignore_errors=True)


class SegmentWriter:
    """Stands in for DatasetWriter: rolling segments in ``out`` (layout of ``amqpcap dissect``)."""

    def __init__(self, out: str, tables, *, force: bool = False) -> None:
        from amqpcap.records.writer import OutputExists

        self.out = os.path.abspath(out)
        if os.path.exists(self.out):
            if not force:
                raise OutputExists(f"output {out} exists (use --force to replace it)")
            shutil.rmtree(self.out)
        try:
            os.mkdir(self.out)  # the check again, atomically: another run may have made it since
        except FileExistsError:
            raise OutputExists(f"output {out} was created by another run meanwhile") from None
        for name in tables:
            os.makedirs(os.path.join(self.out, name))
        self.tables = {name: _SegmentTable(name, self.out) for name in tables}
        self.segments = 0
        self.out_of_range: dict = {}
        for t in self.tables.values():
            t.out_of_range = self.out_of_range
            t.start(0)

    def __getitem__(self, name: str):
        return self.tables[name]

    def note_out_of_range(self, capture: str, found) -> None:
        """As DatasetWriter's: the rows of ``capture`` whose packet is in ``found`` get a null time."""
        self.out_of_range[capture] = found

    def rotate(self) -> None:
        for t in self.tables.values():
            t.finish()
        self.segments += 1
        for t in self.tables.values():
            t.start(self.segments)

    def close(self) -> dict:
        for t in self.tables.values():
            t.finish()
        self.segments += 1
        shutil.rmtree(os.path.join(self.out, ".segments"), ignore_errors=True)
        return {name: t.rows for name, t in self.tables.items()}


class _Tee:
    def __init__(self, *tables) -> None:
        self.tables = tables

    def append(self, row) -> None:
        for t in self.tables:
            t.append(row)


class _LiveSink:
    """The Dissector's writer: prints like ``show`` and, with ``-o``, writes segments."""

    def __init__(self, show, segments: SegmentWriter | None) -> None:
        self.tables = {
            name: (_Tee(show[name], segments[name]) if segments else show[name])
            for name in ("connections", "methods", "messages", "anomalies")
        }
        self.sinks = [show] + ([segments] if segments else [])

    def __getitem__(self, name: str):
        return self.tables[name]

    def note_out_of_range(self, capture: str, found) -> None:
        for sink in self.sinks:
            sink.note_out_of_range(capture, found)


# -- capture -----------------------------------------------------------------------------------


class LiveSource:
    """Packets from a scapy socket as ``(number, ts_ns, linktype, data, wirelen)``, until ``stop``.

    ``tick(nbytes)`` is called between packets and when idle (rotation); the Dissector is then
    between two packets, so its state is consistent."""

    def __init__(self, sock, stop: threading.Event, tick=None) -> None:
        self.sock = sock
        self.stop = stop
        self.tick = tick
        self.anomalies: list = []
        self.packets = 0
        self.bytes = 0

    def __iter__(self):
        from scapy.config import conf

        sock, stop, tick = self.sock, self.stop, self.tick
        linktypes = conf.l2types.layer2num
        fd = sock.fileno()
        last = 0
        while not stop.is_set():
            if tick is not None:
                tick(self.bytes)
            try:
                ready, _, _ = select.select([fd], [], [], POLL_SECONDS)
            except InterruptedError:
                continue
            if not ready:
                continue
            cls, data, ts = sock.recv_raw(RECV_SIZE)
            if data is None:
                continue  # the outgoing copy of a loopback packet
            self.packets += 1
            self.bytes += len(data)
            ts_ns = int((ts if ts is not None else time.time()) * 1e9)
            if not TS_MIN <= ts_ns <= TS_MAX:  # a clock past 2262: the previous time, the row's null
                detail = f"packet time {ts!r} is outside what a timestamp holds"
                self.anomalies.append((self.packets, last, KIND, detail))
                ts_ns = last
            last = ts_ns
            yield self.packets, ts_ns, linktypes.get(cls, -1), data, len(data)


def _open_socket(iface: str, bpf: str):
    import scapy.arch  # noqa: F401  (sets conf.L2socket / L2listen for this platform)
    import scapy.layers.l2  # noqa: F401  (link-layer classes <-> DLT numbers)
    from scapy.config import conf
    from scapy.error import Scapy_Exception

    # On loopback every packet passes the packet socket twice (out and in); L2socket drops the
    # outgoing copy, as libpcap does there.
    factory = conf.L2socket if iface == conf.loopback_name else conf.L2listen
    no_privilege = (
        Exit.NO_PRIVILEGE,
        f"no privilege to capture on {iface} (run as root or give the interpreter CAP_NET_RAW)",
    )
    try:
        return factory(iface=iface, filter=bpf), None
    except PermissionError:
        return None, no_privilege
    except Scapy_Exception as e:
        return None, (Exit.USAGE, f"cannot capture on {iface} with filter {bpf!r}: {e}")
    except (OSError, ValueError) as e:
        if isinstance(e, OSError) and e.errno == 1:
            return None, no_privilege
        return None, (Exit.NO_INTERFACE, f"cannot capture on {iface}: {getattr(e, 'strerror', None) or e}")


def run(a) -> int:
    """The ``live`` subcommand (``a``: parsed arguments)."""
    from amqpcap.pipeline import DEFAULT_PORTS, Dissector, Options
    from amqpcap.show import ShowSink

    if a.rotate is not None and not a.out:
        print("amqpcap: --rotate needs -o OUT", file=sys.stderr)
        return Exit.USAGE
    if a.out and os.path.exists(a.out) and not a.force:
        from amqpcap.records.writer import OutputExists

        raise OutputExists(f"output {a.out} exists (use --force to replace it)")  # before capturing
    sock, err = _open_socket(a.interface, a.filter)
    if err:
        print(f"amqpcap: {err[1]}", file=sys.stderr)
        return err[0]
    try:
        sys.stdout.reconfigure(line_buffering=True)  # lines as they happen, also into a pipe
    except (AttributeError, ValueError):
        pass
    segments = (
        SegmentWriter(a.out, ["connections", "methods", "messages", "anomalies"], force=a.force)
        if a.out
        else None
    )
    opts = Options(
        body_bytes=a.body_bytes, ports=DEFAULT_PORTS | frozenset(a.ports), keep_secrets=a.keep_secrets
    )
    # show's text format and filters: the methods and anomalies asked for, as they happen
    shown = argparse.Namespace(
        stream=a.stream,
        channel=a.channel,
        method=a.method,
        exchange=a.exchange,
        queue=a.queue,
        routing_key=a.routing_key,
        absolute=a.absolute,
        frames=False,
        keep_secrets=a.keep_secrets,
        fmt="text",
    )
    sink = ShowSink(shown)
    dissector = Dissector(f"live:{a.interface}", _LiveSink(sink, segments), opts)
    dissector.on_conversation = sink.conversation  # the stream header line names the addresses
    stop = threading.Event()
    state = {"started": time.monotonic(), "bytes": 0}

    def tick(nbytes: int) -> None:
        now = time.monotonic()
        if a.rotate is not None and a.rotate.due(state["started"], now, nbytes - state["bytes"]):
            dissector.write_finished()  # connection rows of the conversations that ended
            segments.rotate()
            state["started"], state["bytes"] = now, nbytes

    def on_signal(signum, frame):
        state["signal"] = signum
        stop.set()
        signal.signal(signum, signal.SIG_DFL)  # a second Ctrl-C ends at once

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    source = LiveSource(sock, stop, tick if segments else None)
    print(f"amqpcap: capturing on {a.interface} ({a.filter}); Ctrl-C stops", file=sys.stderr)
    try:
        dissector.run(sink.first_packet(source))
        rows = segments.close() if segments else None
    except BaseException:
        if segments:
            segments.close()
        raise
    finally:
        sock.close()
        for s, h in old.items():
            signal.signal(s, h)
    msg = f"amqpcap: {source.packets:,} packets, {dissector.nstreams} tcp streams"
    if rows is not None:
        msg += (
            f"; connections {rows['connections']:,} methods {rows['methods']:,} messages "
            f"{rows['messages']:,} anomalies {rows['anomalies']:,} in {segments.segments} segment(s) "
            f"under {a.out}/"
        )
    print(msg, file=sys.stderr)
    return Exit.TERMINATED if state.get("signal") == signal.SIGTERM else Exit.OK
