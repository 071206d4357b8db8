"""The conversations one capture holds: how each begins, ends and is let go.

The packet loop (flows.py) reads the flow table kept here for every packet, and comes here for
the few packets that begin or end a conversation.  A conversation begins at its first packet (or
a SYN on the addresses of a closed one): which side is the client, its tcp_stream number, its
decoder and its two streams.  It is finished at a RST, at FIN both ways, when a sweep ends it or
at the end of the capture: its streams closed, its last events out, its connections row made.
That row is written once the conversation is let go (swept, or the capture ends), so that the
packets after the closing FIN or RST still count.
"""

from __future__ import annotations

from amqpcap import flows, sweep
from amqpcap.amqp.decoder import ConnectionDecoder
from amqpcap.capture.link import TCP_ACK, TCP_SYN
from amqpcap.tcp import reassembly


class Conversations:
    """The flow table of one capture, and the conversations' beginning, end and letting go."""

    def __init__(self, opts, output, stream_of=None, on_conversation=None) -> None:
        self.opts = opts  # pipeline.Options: the AMQP ports, what the decoders keep
        self.output = output  # output.CaptureOutput: the capture's tables
        # (src, sport, dst, dport) -> (Conversation, direction): both directions of each one held
        self.table: dict = {}
        # first packet number -> tcp_stream, when a run sees part of a capture's conversations
        # (Spark: the whole capture's numbering); None: numbered in order of appearance
        self.stream_of = stream_of
        self.on_conversation = on_conversation  # called with each new one (show's addresses)
        self.count = 0  # conversations begun (the capture's TCP streams)
        self.frames = 0  # AMQP frames decoded in the finished ones
        self.server_ports: dict = {}  # server port -> conversations (for "try --ports")
        self.done: list = []  # finished conversations whose connections row is not written yet
        self.held = 0  # conversations in the table (two entries each)
        self.sweep_at = sweep.MAX_HELD

    def open(self, ipv, src, sport, dst, dport, flags, payload, number, ts) -> tuple:
        """A new conversation from packet ``number``: its table entry for that packet's
        direction, ``(conversation, direction)``."""
        client_is_src, how = self.sides(sport, dport, flags, payload)
        a, b = (src, sport), (dst, dport)
        client, server = (a, b) if client_is_src else (b, a)
        stream = self.count if self.stream_of is None else self.stream_of(number)
        conv = flows.new_conversation(stream, ipv, client, server, how, number, ts)
        self.count += 1
        conv.decoder = ConnectionDecoder(
            body_bytes=self.opts.body_bytes,
            keep_secrets=self.opts.keep_secrets,
            amqp_port=server[1] in self.opts.ports,
            tally=conv.live.frames_seen,
            **self.output.decoder_output(conv.stream),
        )
        new_stream = reassembly.new_stream
        conv.streams = (new_stream(0, conv.decoder), new_stream(1, conv.decoder))
        self.server_ports[server[1]] = self.server_ports.get(server[1], 0) + 1
        if self.on_conversation is not None:
            self.on_conversation(conv)
        if (*client, *server) in self.table:
            self.held -= 1  # a new SYN on a closed conversation's addresses: it is let go
        self.table[(*client, *server)] = (conv, 0)
        self.table[(*server, *client)] = (conv, 1)
        self.held += 1
        if self.held > self.sweep_at:
            self.sweep(ts)
        return self.table[(src, sport, dst, dport)]

    def sides(self, sport, dport, flags, payload) -> tuple:
        """``(the packet's sender is the client, how that is known)``: connections.direction_source."""
        ports = self.opts.ports
        if flags & TCP_SYN and not flags & TCP_ACK:
            return True, "syn"
        if flags & TCP_SYN and flags & TCP_ACK:
            return False, "syn"
        if dport in ports and sport not in ports:
            return True, "port"
        if sport in ports and dport not in ports:
            return False, "port"
        if payload[:4] == b"AMQP":
            return True, "header"
        return sport > dport, "guess"

    def finish(self, conv, number, ts) -> None:
        """End ``conv`` at packet ``number``: its streams closed, its last events out, its
        connections row made (an AMQP or TLS conversation) to be written when it is let go."""
        dec = conv.decoder
        for s in conv.streams:
            s.close(number, ts)
        dec.finish(number, ts)
        self.output.events(conv, dec.pop_events())
        conv.closed = True
        self.frames += sum(conv.live.frames)
        if dec.is_amqp or dec.tls:
            conv.row = conv.connection_row(self.output.capture)
            self.done.append(conv)
        conv.decoder = None
        conv.streams = None

    def finish_all(self) -> None:
        """The end of the capture: every conversation still open finished, every row written."""
        seen = set()
        for conv, _d in list(self.table.values()):
            if id(conv) not in seen:
                seen.add(id(conv))
                if not conv.closed and not conv.ignored:
                    self.finish(conv, conv.last_packet, conv.last_ts)
        self.write_done()

    def sweep(self, now) -> None:
        """Bound the conversations held (sweep.py), at capture time ``now``."""
        held = list({id(c): c for c, _ in self.table.values()}.values())
        ending, gone = sweep.choose(held, now)
        for conv, why in ending:
            self.end_quiet(conv, why)
        self.forget(gone)
        self.sweep_at = sweep.next_sweep(self.held)

    def end_quiet(self, conv, why) -> None:
        """End an open conversation amqpcap stops following (``why``: its connections.closed_by)."""
        if conv.ignored:  # not AMQP: nothing to finish or write
            conv.closed = True
            return
        conv.closed_by = conv.closed_by or why
        self.finish(conv, conv.last_packet, conv.last_ts)

    def forget(self, convs) -> None:
        """Drop ``convs`` (finished) from the table, and write the rows of every finished
        conversation no longer held."""
        table = self.table
        for c in convs:
            del table[(*c.client, *c.server)]
            del table[(*c.server, *c.client)]
        self.held -= len(convs)
        let_go = [c for c in self.done if table.get((*c.client, *c.server), (None,))[0] is not c]
        if let_go:
            self.output.connection_rows(let_go)
            self.done = [c for c in self.done if c.row is not None]

    def write_done(self) -> None:
        """Write the connections rows of the conversations that have ended (live: at each segment)."""
        self.output.connection_rows(self.done)
        self.done = []
