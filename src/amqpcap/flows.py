# cython: annotation_typing=False
"""The packet loop: every record of a capture to its TCP conversation.

A record is parsed (capture/link.py), its TCP segment looked up in the flow table by its
addresses, and given to its conversation: the packet counts, the handshake, the acknowledgement,
the payload into that direction's stream, the decoder's events out as rows, and the FIN or RST
that ends it.  What happens when a conversation begins or ends, and which are held, is
``conversations.Conversations``'; which row an event makes is ``output.CaptureOutput``'s.

This is the hot loop, so it is compiled (compiled.py's part "fastflows": this module built by
Cython with the types of fastflows.pxd, ``Conversation`` a C class whose fields the loop reads
without a lookup) unless pure Python is asked for; the two are the same code.
"""

from __future__ import annotations

import time

from amqpcap import compiled
from amqpcap.capture import link
from amqpcap.capture.link import Packet, UnsupportedLinkType, format_addr
from amqpcap.records import liveness
from amqpcap.records.rows import DIRS, connection_facts

# True in this module built by Cython as compiled.py's part "fastflows" (with fastflows.pxd's
# types), which is imported under the part's name (no import of Cython's shadow module: it loads typing)
COMPILED = __name__ == compiled.PARTS["fastflows"].module

# (C ints in the compiled module: the flag tests of every packet are C operations)
SYN, FIN, RST, ACK = link.TCP_SYN, link.TCP_FIN, link.TCP_RST, link.TCP_ACK
PROGRESS_EVERY = 0x3FFF  # the progress callback is considered every 16,384 packets


class Conversation:
    """What the dissector keeps of one TCP conversation while it is held."""

    __slots__ = (
        "stream",
        "ip_version",
        "client",
        "server",
        "dir_source",
        "decoder",
        "streams",
        "packets",
        "first_packet",
        "first_ts",
        "last_ts",
        "last_packet",
        "syn_ts",
        "rst",
        "rst_by",
        "rst_frame",
        "fin",
        "closed",
        "closed_by",
        "close_frame",
        "anomalies",
        "ignored",
        "row",
        "zw_open",
        "zero_windows",
        "live",
    )

    def __init__(self, stream, ip_version, client, server, dir_source, packet, ts):
        self.stream = stream
        self.ip_version = ip_version
        self.client = client  # (packed addr, port)
        self.server = server
        self.dir_source = dir_source
        self.decoder = None
        self.streams = None
        self.packets = [0, 0]
        self.first_packet = packet
        self.first_ts = ts
        self.last_ts = ts
        self.last_packet = packet
        self.syn_ts = None
        self.rst = False
        self.rst_by = None  # "client" / "server": the first RST's sender, and its packet
        self.rst_frame = None
        self.fin = [False, False]
        self.closed = False
        self.closed_by = None
        self.close_frame = None  # the packet closed_by names
        self.anomalies = 0
        self.ignored = False
        self.row = None
        # per direction: the index in zero_windows of the period open, or None; None while
        # neither direction has one open (the common packet then skips the zero-window check)
        self.zw_open = None
        self.zero_windows = None  # list of closed/open periods, created on the first one
        # frames, heartbeats and silences per direction (heartbeat health without --frames),
        # reported by the decoder itself
        self.live = liveness.Liveness()  # the compiled one with the compiled row builders

    def ignore(self) -> None:
        """Not AMQP: its packets are counted, nothing more is decoded or written."""
        self.ignored = True
        self.decoder = None
        self.streams = None

    def connection_row(self, capture: str) -> dict:
        """Its connections row by column name (end_ts, packet counts and zero_windows are
        filled in when it is written)."""
        s0, s1 = self.streams
        fmt = format_addr
        row = connection_facts(self.decoder.facts)
        row.update(
            capture=capture,
            tcp_stream=self.stream,
            frame_number=self.first_packet,
            ts=self.first_ts,
            client_ip=fmt(self.ip_version, self.client[0]),
            client_port=self.client[1],
            server_ip=fmt(self.ip_version, self.server[0]),
            server_port=self.server[1],
            ip_version=self.ip_version,
            direction_source=self.dir_source,
            syn_ts=self.syn_ts,
            closed_by=row["closed_by"] or self.closed_by,
            close_frame=row["close_frame"] if row["closed_by"] else self.close_frame,
            bytes_c2s=s0.delivered,
            bytes_s2c=s1.delivered,
            frames_c2s=self.live.frames[0],
            frames_s2c=self.live.frames[1],
            gaps=s0.gaps + s1.gaps,
            gap_bytes=s0.gap_bytes + s1.gap_bytes,
            anomalies=self.anomalies,
            rst=self.rst,
            rst_by=self.rst_by,
            rst_frame=self.rst_frame,
            end_ts=None,
            packets_c2s=None,
            packets_s2c=None,
            zero_windows=None,
        )
        return row


class Flows:
    """The packet loop over one capture's flow table (``conversations.table``: both directions'
    addresses of every conversation held -> the conversation and the direction)."""

    def __init__(self, conversations, output) -> None:
        self.conversations = conversations  # opens, finishes and lets go of conversations
        self.output = output  # the capture's tables
        self.table = conversations.table
        self.parse = link.parse_located
        self.bytes = 0  # captured packets' bytes on the wire
        self.shown = time.monotonic()  # when progress was last reported

    def run(self, source, progress) -> int:
        """Every record ``(number, ts, linktype, data, wirelen)`` of ``source``; the number of
        the last.  A source with ``chunks()`` (the reader's records located in its read buffer)
        is taken a chunk at a time, each packet read where it lies; else one with ``batches()``
        (lists of records) a list at a time: its generator resumes once a list, not once a
        packet."""
        number = 0
        chunks = getattr(source, "chunks", None)
        if chunks is not None:
            for buf, located in chunks():
                for record in located:
                    number, ts, linktype, start, caplen, wirelen = record
                    self.record(number, ts, linktype, buf, start, caplen, wirelen, progress)
            return number
        batches = getattr(source, "batches", None)
        for batch in batches() if batches is not None else (source,):
            for record in batch:
                number, ts, linktype, data, wirelen = record
                self.record(number, ts, linktype, data, 0, len(data), wirelen, progress)
        return number

    def record(self, number, ts, linktype, buf, start, caplen, wirelen, progress) -> None:
        """One packet record, its bytes the ``caplen`` at ``buf[start]``."""
        self.bytes += wirelen
        try:
            parsed = self.parse(linktype, buf, start, caplen)
        except UnsupportedLinkType:
            self.output.unsupported_link(number, ts, linktype)
        else:
            self.packet(number, ts, parsed)
        if progress is not None and not number & PROGRESS_EVERY:
            now = time.monotonic()
            if now - self.shown > 0.5:  # at most twice a second
                self.shown = now
                progress(number, self.bytes)

    def packet(self, number, ts, r) -> None:
        """A parsed packet ``r``: a link.Packet (a TCP segment), None (not TCP), or a
        link.Malformed (why the IP/TCP packet cannot be used)."""
        if type(r) is not Packet:
            if r is not None:
                self.output.capture_anomaly(number, ts, "malformed-packet", r)
            return
        if COMPILED:  # a named tuple's fields read as a tuple's, in C (fastflows.pxd)
            fields = as_tuple(r)  # noqa: F821
        else:
            fields = r
        ipv, src, dst, sport, dport, seq, ack, flags, win, payload, missing = fields
        entry = self.table.get((src, sport, dst, dport))
        if entry is None or (flags & SYN and not flags & ACK and entry[0].closed):
            entry = self.conversations.open(ipv, src, sport, dst, dport, flags, payload, number, ts)
        conv, d = entry
        conv.packets[d] += 1
        conv.last_ts = ts
        conv.last_packet = number
        if conv.closed or conv.ignored:
            return
        if (win == 0 and not flags & (SYN | RST)) or conv.zw_open is not None:
            self.zero_window(conv, d, win, flags, number, ts)
        streams = conv.streams
        if flags & SYN:
            streams[d].syn(seq)
            if not flags & ACK and conv.syn_ts is None:
                conv.syn_ts = ts
        if flags & ACK:
            if COMPILED:  # (fastflows.pxd: the compiled reassembler's methods called in C)
                stream_ack(streams[d ^ 1], ack, number, ts)  # noqa: F821
            else:
                streams[d ^ 1].ack(ack, number, ts)
        if payload or missing:
            if COMPILED:
                stream_segment(streams[d], seq, payload, missing, number, ts)  # noqa: F821
            else:
                streams[d].segment(seq, payload, missing, number, ts)
            if missing:
                detail = f"{missing} bytes of TCP payload cut by the snapshot length"
                self.output.stream_anomaly(conv, d, number, ts, "truncated-packet", detail, missing)
        dec = conv.decoder
        if dec.events:
            self.output.events(conv, dec.pop_events())
        if dec.undecoded and not dec.is_amqp:
            conv.ignore()
        elif flags & (FIN | RST):
            self.end(conv, d, flags, seq + len(payload) + missing, number, ts)

    def end(self, conv, d, flags, end_seq, number, ts) -> None:
        """A FIN or RST from side ``d`` (``end_seq``: the sequence number after its payload):
        the conversation is finished at a RST, or once both sides sent a FIN."""
        if flags & FIN or flags & ACK:
            # Bytes before a FIN (or an acknowledging RST) were sent: a hole there is loss.
            conv.streams[d].fin(end_seq, not flags & FIN)
        side = "client" if d == 0 else "server"
        if flags & RST:
            conv.rst = True
            conv.rst_by, conv.rst_frame = side, number
            if conv.closed_by is None:
                conv.closed_by, conv.close_frame = side + "-rst", number
            self.conversations.finish(conv, number, ts)
        else:
            conv.fin[d] = True
            if conv.closed_by is None and not conv.fin[d ^ 1]:
                conv.closed_by, conv.close_frame = side + "-fin", number
            if conv.fin[d ^ 1]:
                self.conversations.finish(conv, number, ts)

    def zero_window(self, conv, d, win, flags, number, ts) -> None:
        """Track periods in which side ``d`` advertises a zero receive window."""
        if conv.zw_open is None:
            conv.zw_open = [None, None]
        if conv.zero_windows is None:
            conv.zero_windows = []
        opened = conv.zw_open[d]
        if win == 0 and not flags & (SYN | RST):
            if opened is None:
                conv.zw_open[d] = len(conv.zero_windows)
                conv.zero_windows.append([DIRS[d], number, ts, None, None])
        elif opened is not None:
            conv.zero_windows[opened][3:] = [number, ts]
            conv.zw_open[d] = None
            if conv.zw_open[d ^ 1] is None:
                conv.zw_open = None  # no period open: only a zero window calls this again


# What a run makes its loop and its conversations of, chosen once at import: the classes above, or
# the same compiled (compiled.py's part "fastflows": this module built by Cython with the types of
# fastflows.pxd).  The compiled module chooses nothing: it is what is chosen.
SOURCE_STAMP, _fast = compiled.twin("fastflows", AMQPCAP_SOURCE_STAMP if COMPILED else None)  # noqa: F821 (stamp.pxd)
new_flows = _fast.Flows if _fast is not None else Flows
new_conversation = _fast.Conversation if _fast is not None else Conversation
