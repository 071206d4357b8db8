"""What the dissector keeps of one TCP conversation (its own module so that the compiled packet
loop, fastpipeline.pyx, imports the class it reads the slots of, as pipeline.py does)."""

from __future__ import annotations

from amqpcap.records import liveness as _liveness


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
