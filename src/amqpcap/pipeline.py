"""The whole data flow: capture -> packets -> TCP streams -> AMQP events -> Parquet.

``dissect()`` is what the CLI, ``amqpcap.load`` and the Spark job call.  The
per-packet loop lives in ``Dissector.run`` and stays free of per-packet
objects beyond the tuples the capture stage yields.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from array import array
from dataclasses import dataclass, field

from amqpcap import compiled
from amqpcap.amqp.decoder import ConnectionDecoder
from amqpcap.amqp.events import Anomaly, Frame, Heartbeat
from amqpcap.capture import link as _link
from amqpcap.capture.link import TCP_ACK as ACK
from amqpcap.capture.link import TCP_FIN as FIN
from amqpcap.capture.link import TCP_RST as RST
from amqpcap.capture.link import TCP_SYN as SYN
from amqpcap.capture.link import Packet
from amqpcap.capture.reader import CaptureError, open_capture
from amqpcap.conversation import Conversation
from amqpcap.exitcodes import Exit
from amqpcap.records import rows as R
from amqpcap.records.outofrange import FRAME_OF, OutOfRange
from amqpcap.records.writer import DatasetWriter, takes_deferred_digests
from amqpcap.tcp import reassembly as _reassembly

DEFAULT_PORTS = frozenset({5672, 5671})  # 5671: AMQPS, reported as TLS
EXIT_LINKTYPE = Exit.LINKTYPE
# Memory is bounded by the conversations held, not by those seen.  A conversation is held while
# it is open, and once closed (FIN both ways, or RST) for its late packets until it is swept.
# When more than MAX_HELD are held, a sweep ends and forgets, in capture time (as Zeek's
# tcp_close_delay and tcp_inactivity_timeout): closed ones quiet for CLOSE_LINGER_NS, open ones
# quiet for IDLE_TIMEOUT_NS (connections.closed_by "idle"); and if still more than half of
# MAX_HELD are held, the open ones quiet longest (closed_by "evicted", as Suricata's flow memcap
# evicts).  A later packet of a conversation ended so starts a new one, decoded mid-stream.  A
# capture that never holds MAX_HELD conversations is never swept.
MAX_HELD = 10_000
CLOSE_LINGER_NS = 5 * 1_000_000_000
IDLE_TIMEOUT_NS = 300 * 1_000_000_000
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


@dataclass
class Options:
    """How a capture is dissected (the dissect command's options)."""

    body_bytes: int = 64
    frames: bool = False
    ports: frozenset = DEFAULT_PORTS
    keep_secrets: bool = False


@dataclass
class Summary:
    """What a dissect did: counts, rows per table, time (the command's summary line)."""

    captures: int = 0
    packets: int = 0
    tcp_streams: int = 0
    rows: dict = field(default_factory=dict)
    seconds: float = 0.0
    bytes: int = 0
    frames: int = 0  # AMQP frames decoded (whether or not the frames table is written)
    server_ports: dict = field(default_factory=dict)  # server port -> TCP conversations, all captures
    errors: list = field(default_factory=list)  # CaptureError of each input that could not be read


class UnreadableCaptures(CaptureError):
    """No input of a dissect could be read: ``errors`` holds each one's CaptureError (the first
    gives the message and the exit code)."""

    def __init__(self, errors: list) -> None:
        first = errors[0]
        super().__init__(first.path, first.reason, first.exit_code)
        self.errors = errors


def _link_type_text(linktype: int) -> str:
    """A link type as the messages name it; a negative one is a record that came without one (a
    scapy packet whose first layer scapy does not know as a link layer, e.g. Raw)."""
    if linktype < 0:
        return "link type: none (a packet without a link layer, e.g. scapy's Raw)"
    return f"link type {linktype} ({_link.LINKTYPE_NAMES.get(linktype, 'unknown')})"


class Dissector:
    """Dissects one capture into an open DatasetWriter."""

    def __init__(self, capture: str, writer: DatasetWriter, opts: Options) -> None:
        self.capture = capture
        self.w = writer
        self.opts = opts
        self.flows: dict = {}
        self.nstreams = 0
        self.packets = 0
        self.bytes = 0
        self.t_conn = writer["connections"]
        self.t_methods = writer["methods"]
        self.t_messages = writer["messages"]
        self.t_anom = writer["anomalies"]
        self.t_frames = writer.tables.get("frames")
        # the messages table writes a body digest when its batch is made: hashing overlaps decoding
        self.deferred_digests = takes_deferred_digests(self.t_messages)
        self.frames = 0
        self.done: list = []  # finished conversations whose connection row is not written yet
        self.held = 0  # conversations in flows (two entries each)
        self.sweep_at = MAX_HELD
        self.server_ports: dict = {}  # server port -> TCP conversations (for "try --ports")
        self.on_conversation = None  # called with each new Conversation (amqpcap show's addresses)
        # first packet number of each tcp_stream (Spark renumbers split captures)
        self.stream_starts = array("q")  # (8 bytes a conversation, not a list's 36)
        # first packet number -> tcp_stream, when a run sees part of a capture's conversations
        # (Spark: the whole capture's numbering); None: numbered in order of appearance
        self.stream_of = None
        self._unsupported: set = set()  # link types reported as unsupported
        self.out_of_range = OutOfRange(None)  # packets whose time no column holds (run: the source's)
        self._last_progress = 0.0

    # -- the hot loop --------------------------------------------------------------------

    def run(self, source, progress=None) -> None:
        self.out_of_range = OutOfRange(source)
        note = getattr(self.w, "note_out_of_range", None)  # every writer but a test's stand-in
        if note is not None:
            note(self.capture, self.out_of_range)
        with _hot_loop():
            self._run(source, progress)

    def _run(self, source, progress) -> None:
        self._last_progress = time.monotonic()
        if _compiled_loop is not None:
            number = _compiled_loop(self, source, progress, _link.parse_packet)
        else:
            number = 0
            packet = self.handle_record
            for number, ts, linktype, data, wirelen in source:
                packet(number, ts, linktype, data, wirelen, progress)
        self.packets = number
        for kind_number, kind_ts, kind, detail in getattr(source, "anomalies", ()):
            self._capture_anomaly(kind_number, kind_ts, kind, detail)
        seen = set()
        for conv, _d in list(self.flows.values()):
            if id(conv) not in seen:
                seen.add(id(conv))
                if not conv.closed and not conv.ignored:
                    self._finish(conv, conv.last_packet, conv.last_ts)
        self._write_done()
        unsupported = self._unsupported
        if unsupported and self.nstreams == 0:
            names = ", ".join(_link_type_text(lt) for lt in sorted(unsupported))
            raise CaptureError(self.capture, f"unsupported {names}", EXIT_LINKTYPE)

    def handle_record(self, number, ts, linktype, data, wirelen, progress) -> None:
        """One packet record: the loop body (fastpipeline.pyx is this loop in C)."""
        self.bytes += wirelen
        try:
            r = _link.parse_packet(linktype, data)
        except _link.UnsupportedLinkType:
            self.unsupported_link(number, ts, linktype)
        else:
            self.handle_parsed(number, ts, r)
        if progress is not None and not number & 0x3FFF:
            self.tick(number, progress)

    def unsupported_link(self, number, ts, linktype) -> None:
        if linktype not in self._unsupported:
            self._unsupported.add(linktype)
            self._capture_anomaly(
                number,
                ts,
                "unsupported-link-type",
                f"{_link_type_text(linktype)} is not supported; its packets are skipped",
            )

    def handle_parsed(self, number, ts, r) -> None:
        """A parsed packet (fastpipeline.pyx: the common TCP segment in C, every other one here)."""
        if type(r) is not Packet:
            if r is not None:  # link.Malformed: why the IP/TCP packet cannot be used
                self._capture_anomaly(number, ts, "malformed-packet", r)
            return
        ipv, src, dst, sport, dport, seq, ack, flags, win, payload, missing = r
        flows = self.flows
        entry = flows.get((src, sport, dst, dport))
        if entry is None or (entry[0].closed and flags & SYN and not flags & ACK):
            conv = self._new_conversation(ipv, src, sport, dst, dport, flags, payload, number, ts)
            entry = flows[(src, sport, dst, dport)]
        conv, d = entry
        conv.packets[d] += 1
        conv.last_ts = ts
        conv.last_packet = number
        if conv.closed or conv.ignored:
            return
        if (win == 0 and not flags & (SYN | RST)) or conv.zw_open is not None:
            self._zero_window(conv, d, win, flags, number, ts)
        streams = conv.streams
        if flags & SYN:
            streams[d].syn(seq)
            if not flags & ACK and conv.syn_ts is None:
                conv.syn_ts = ts
        if flags & ACK:
            streams[d ^ 1].ack(ack, number, ts)
        if payload or missing:
            streams[d].segment(seq, payload, missing, number, ts)
            if missing:
                self._stream_anomaly(
                    conv,
                    d,
                    number,
                    ts,
                    "truncated-packet",
                    f"{missing} bytes of TCP payload cut by the snapshot length",
                    missing,
                )
        dec = conv.decoder
        if dec.events:
            self._emit(conv, dec.pop_events())
        if dec.undecoded and not dec.is_amqp:
            self.ignore_conversation(conv)
            return
        if flags & (FIN | RST):
            if flags & FIN or flags & ACK:
                # Bytes before a FIN (or an acknowledging RST) were sent: a hole there is loss.
                streams[d].fin(seq + len(payload) + missing, not flags & FIN)
            side = "client" if d == 0 else "server"
            if flags & RST:
                conv.rst = True
                conv.rst_by, conv.rst_frame = side, number
                if conv.closed_by is None:
                    conv.closed_by, conv.close_frame = side + "-rst", number
                self._finish(conv, number, ts)
            else:
                conv.fin[d] = True
                if conv.closed_by is None and not conv.fin[d ^ 1]:
                    conv.closed_by, conv.close_frame = side + "-fin", number
                if conv.fin[d ^ 1]:
                    self._finish(conv, number, ts)

    def tick(self, number, progress) -> None:
        """Every 16,384th packet: the progress line, at most twice a second."""
        now = time.monotonic()
        if now - self._last_progress > 0.5:
            self._last_progress = now
            progress(number, self.bytes)

    # -- conversations ---------------------------------------------------------------------

    def _new_conversation(self, ipv, src, sport, dst, dport, flags, payload, number, ts):
        ports = self.opts.ports
        if flags & SYN and not flags & ACK:
            client_is_src, how = True, "syn"
        elif flags & SYN and flags & ACK:
            client_is_src, how = False, "syn"
        elif dport in ports and sport not in ports:
            client_is_src, how = True, "port"
        elif sport in ports and dport not in ports:
            client_is_src, how = False, "port"
        elif payload[:4] == b"AMQP":
            client_is_src, how = True, "header"
        else:
            client_is_src, how = sport > dport, "guess"
        a, b = (src, sport), (dst, dport)
        client, server = (a, b) if client_is_src else (b, a)
        stream = self.nstreams if self.stream_of is None else self.stream_of(number)
        conv = Conversation(stream, ipv, client, server, how, number, ts)
        self.nstreams += 1
        self.stream_starts.append(number)
        conv.decoder = ConnectionDecoder(
            body_bytes=self.opts.body_bytes,
            keep_secrets=self.opts.keep_secrets,
            amqp_port=server[1] in ports,
            tally=conv.live.frames_seen,
            frame_events=self.t_frames is not None,
            deferred_digests=self.deferred_digests,
            # (with the frames table every frame is an event: nothing would go past the list)
            row_sink=None
            if self.t_frames is not None
            else R.row_sink(self.capture, conv.stream, self.t_methods, self.t_messages),
        )
        new_stream = _reassembly.new_stream
        conv.streams = (new_stream(0, conv.decoder), new_stream(1, conv.decoder))
        self.server_ports[server[1]] = self.server_ports.get(server[1], 0) + 1
        if self.on_conversation is not None:
            self.on_conversation(conv)
        if (client[0], client[1], server[0], server[1]) in self.flows:
            self.held -= 1  # a new SYN on a closed conversation's addresses: it is let go
        self.flows[(client[0], client[1], server[0], server[1])] = (conv, 0)
        self.flows[(server[0], server[1], client[0], client[1])] = (conv, 1)
        self.held += 1
        if self.held > self.sweep_at:
            self._sweep(ts)
        return conv

    def _sweep(self, now) -> None:
        """Bound the conversations held (see MAX_HELD); the next sweep when twice as many as
        are left are held (linear time however many conversations a capture has)."""
        held = {id(c): c for c, _ in self.flows.values()}.values()
        gone, closed, open_ = [], [], []
        for c in held:
            quiet = now - c.last_ts
            if c.closed:
                (gone if quiet > CLOSE_LINGER_NS else closed).append(c)
            elif quiet > IDLE_TIMEOUT_NS:
                self._end_quiet(c, "idle")
                gone.append(c)
            else:
                open_.append(c)
        over = len(held) - len(gone) - MAX_HELD // 2
        if over > 0:
            # closed ones first (only their late packets are lost), then the quietest open ones
            order = lambda c: (c.last_ts, c.stream)  # noqa: E731
            for c in (sorted(closed, key=order) + sorted(open_, key=order))[:over]:
                if not c.closed:
                    self._end_quiet(c, "evicted")
                gone.append(c)
        self._forget(gone)
        self.sweep_at = max(MAX_HELD, 2 * self.held)

    def _end_quiet(self, conv, why) -> None:
        """End an open conversation amqpcap stops following (``why``: its connections.closed_by)."""
        if conv.ignored:  # not AMQP: nothing to finish or write
            conv.closed = True
            return
        conv.closed_by = conv.closed_by or why
        self._finish(conv, conv.last_packet, conv.last_ts)

    def _forget(self, convs) -> None:
        """Drop ``convs`` (finished) from the flows, and write the rows of every finished
        conversation no longer held."""
        flows = self.flows
        for c in convs:
            del flows[(*c.client, *c.server)]
            del flows[(*c.server, *c.client)]
        self.held -= len(convs)
        let_go = [c for c in self.done if flows.get((*c.client, *c.server), (None,))[0] is not c]
        if let_go:
            self._write_rows(let_go)
            self.done = [c for c in self.done if c.row is not None]

    def _zero_window(self, conv, d, win, flags, number, ts) -> None:
        """Track periods in which side ``d`` advertises a zero receive window."""
        if conv.zw_open is None:
            conv.zw_open = [None, None]
        if conv.zero_windows is None:
            conv.zero_windows = []
        opened = conv.zw_open[d]
        if win == 0 and not flags & (SYN | RST):
            if opened is None:
                conv.zw_open[d] = len(conv.zero_windows)
                conv.zero_windows.append([R.DIRS[d], number, ts, None, None])
        elif opened is not None:
            conv.zero_windows[opened][3:] = [number, ts]
            conv.zw_open[d] = None
            if conv.zw_open[d ^ 1] is None:
                conv.zw_open = None  # no period open: the conversation's packets are common again

    def write_finished(self) -> None:
        """Write the connection rows of the conversations that have ended (live: at each segment)."""
        self._write_done()

    def _write_done(self) -> None:
        self._write_rows(self.done)
        self.done = []

    def _write_rows(self, convs) -> None:
        for conv in sorted(convs, key=lambda c: c.stream):
            row = conv.row
            # packets after the closing FIN/RST still count; zero-window periods may close later
            row.update(
                end_ts=conv.last_ts,
                packets_c2s=conv.packets[0],
                packets_s2c=conv.packets[1],
                zero_windows=R.connection_json(conv.zero_windows) if conv.zero_windows else None,
                **conv.live.columns(),
            )
            if self.out_of_range.numbers():
                _null_times(row, conv, self.out_of_range)
            self.t_conn.append(R.connection_row(row))
            conv.row = None

    def ignore_conversation(self, conv) -> None:
        conv.ignored = True
        conv.decoder = None
        conv.streams = None

    def _finish(self, conv, number, ts) -> None:
        dec = conv.decoder
        for s in conv.streams:
            s.close(number, ts)
        dec.finish(number, ts)
        self._emit(conv, dec.pop_events())
        conv.closed = True
        self.frames += sum(conv.live.frames)
        if dec.is_amqp or dec.tls:
            # The row is written at the end (or when the flow is reused or pruned), so the
            # packets after the closing FIN/RST still count.
            conv.row = conv.connection_row(self.capture)
            self.done.append(conv)
        conv.decoder = None
        conv.streams = None

    # -- rows ------------------------------------------------------------------------------

    def _emit(self, conv, events) -> None:
        # methods and messages (almost every event) in one call; the rest in order (the compiled
        # loop makes the same two calls)
        rest = R.append_rows(
            events, self.capture, conv.stream, conv.decoder.version, self.t_methods, self.t_messages
        )
        if rest:
            self.emit_rest(conv, rest)

    def emit_rest(self, conv, rest) -> None:
        """The events ``rows.append_rows`` left: frames, anomalies, heartbeats, AMQP 1.0's."""
        st, cap = conv.stream, self.capture
        ta, tf = self.t_anom, self.t_frames
        version = conv.decoder.version
        if version == "1.0":  # its performatives' and deliveries' rows in one call
            from amqpcap.records.rows_1_0 import append_rows

            rest = append_rows(rest, cap, st, version, self.t_methods, self.t_messages)
        for d, e in rest:
            t = type(e)
            if t is Frame:  # only with the frames table (the decoder's tally counts every frame)
                tf.append(R.frame_row(cap, st, d, e))
            elif t is Anomaly:
                conv.anomalies += 1
                ta.append(R.anomaly_row(cap, st, d, e))  # decoder anomalies are AMQP-layer
            elif t is Heartbeat:
                conv.live.heartbeat(d)
            # ProtocolHeader events have no table of their own: headers are connection facts.

    def _stream_anomaly(self, conv, d, number, ts, kind, detail, skipped=0) -> None:
        conv.anomalies += 1
        e = Anomaly(packet=number, ts=ts, offset=None, kind=kind, detail=str(detail), skipped=skipped)
        self.t_anom.append(R.anomaly_row(self.capture, conv.stream, d, e, "tcp"))

    def _capture_anomaly(self, number, ts, kind, detail) -> None:
        e = Anomaly(packet=number, ts=ts, offset=None, kind=kind, detail=str(detail))
        self.t_anom.append(R.anomaly_row(self.capture, None, None, e, "capture"))


def _null_times(row: dict, conv, out_of_range: OutOfRange) -> None:
    """A connection row's times that are a packet's whose own time was out of range: null."""
    for t, f in FRAME_OF.items():
        if row[f] in out_of_range:
            row[t] = None
    if conv.last_packet in out_of_range:
        row["end_ts"] = None


# The per-packet loop, chosen once at import: Dissector.handle_record for every packet, or the
# compiled loop (fastpipeline.pyx) that runs the common packet in C and hands every other one to it.
_fast = compiled.select("fastpipeline")
_compiled_loop = _fast.run if _fast is not None else None


def compiled_in_use() -> bool:
    """True if packets go through the compiled loop."""
    return _fast is not None


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
