"""What the dissector keeps of one TCP conversation (its own module so that the compiled packet
loop, fastpipeline.pyx, imports the class it reads the slots of, as pipeline.py does)."""

from __future__ import annotations

from amqpcap.capture.link import format_addr
from amqpcap.records import liveness as _liveness
from amqpcap.records.rows import connection_facts


class Conversation:
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
        # neither direction has one open (the compiled loop leaves the packet to handle_parsed otherwise)
        self.zw_open = None
        self.zero_windows = None  # list of closed/open periods, created on the first one
        # frames, heartbeats and silences per direction (heartbeat health without --frames),
        # reported by the decoder itself
        self.live = _liveness.Liveness()  # the compiled one with the compiled row builders

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
