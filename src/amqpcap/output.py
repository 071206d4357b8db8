"""Where one capture's rows go: its tables, and the row each event, anomaly and ended
conversation makes.

Rows reach the tables by one of two routes, chosen here per conversation (``decoder_output``):
through events (decoder -> events -> ``events`` -> rows.append_rows, a 1.0 conversation's
rows_1_0.append_rows / ``emit_rest`` -> table),
or, for the common 0-9 method and its content, written by the decoder itself through a
``RowSink`` of the compiled row builder, with no event made (a 1.0 conversation's rows: written
into the same sink's tables by the compiled walker after each packet it walks).  docs/design.md
("Events or direct rows") says when each is taken.
"""

from __future__ import annotations

from amqpcap.amqp.events import Anomaly, Frame, Heartbeat
from amqpcap.capture.link import LINKTYPE_NAMES
from amqpcap.records import rows as R
from amqpcap.records.outofrange import FRAME_OF


def link_type_text(linktype: int) -> str:
    """A link type as the messages name it; a negative one is a record that came without one (a
    scapy packet whose first layer scapy does not know as a link layer, e.g. Raw)."""
    if linktype < 0:
        return "link type: none (a packet without a link layer, e.g. scapy's Raw)"
    return f"link type {linktype} ({LINKTYPE_NAMES.get(linktype, 'unknown')})"


class CaptureOutput:
    """The tables of one capture's rows (a DatasetWriter, or show's / live's stand-ins)."""

    def __init__(self, capture: str, writer, out_of_range, deferred_digests: bool) -> None:
        self.capture = capture
        self.connections = writer["connections"]
        self.methods = writer["methods"]
        self.messages = writer["messages"]
        self.anomalies = writer["anomalies"]
        self.frames = writer.tables.get("frames")
        self.out_of_range = out_of_range  # outofrange.OutOfRange: packets whose time no column holds
        self.deferred_digests = deferred_digests  # the messages table takes digests still being hashed
        self.unsupported: set = set()  # link types reported as unsupported
        self.append_rows_1_0 = None  # records/rows_1_0's append_rows, from the first 1.0 rows on

    def decoder_output(self, stream) -> dict:
        """How the decoder of conversation ``stream`` hands its rows on (ConnectionDecoder's
        keywords): the one place that chooses between events and direct rows.  With the frames
        table every frame is an event, so nothing may go past the event list; otherwise
        ``rows.row_sink`` gives a sink when the compiled row builder and table buffers are in use
        (None otherwise: events), and body digests may be handed on unfinished when the
        messages table resolves them as its batch is made (hashing overlaps decoding)."""
        frames = self.frames is not None
        return {
            "frame_events": frames,
            "deferred_digests": self.deferred_digests,
            "row_sink": None if frames else R.row_sink(self.capture, stream, self.methods, self.messages),
        }

    def events(self, conv, events) -> None:
        """The rows of a conversation's events: methods and messages (almost every event) in one
        call, the rest in order."""
        version = conv.decoder.version
        if version == "1.0":  # a 1.0 decoder makes no 0-9 Method or Content: rows_1_0's rows
            append = self.append_rows_1_0 or self.rows_1_0()
        else:
            append = R.append_rows
        rest = append(events, self.capture, conv.stream, version, self.methods, self.messages)
        if rest:
            self.emit_rest(conv, rest)

    def rows_1_0(self):
        """records/rows_1_0's append_rows, imported at the first 1.0 rows (a run without 1.0
        conversations never loads the 1.0 modules), then held: an import statement at every call
        costs ~1 us (the module's __spec__._initializing and __path__ looked up, AttributeErrors
        made)."""
        from amqpcap.records.rows_1_0 import append_rows

        self.append_rows_1_0 = append_rows
        return append_rows

    def emit_rest(self, conv, rest) -> None:
        """The events the row builders left: frames, anomalies, heartbeats."""
        st, cap = conv.stream, self.capture
        ta, tf = self.anomalies, self.frames
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

    def stream_anomaly(self, conv, d, number, ts, kind, detail, skipped=0) -> None:
        """A TCP-layer anomaly of conversation ``conv``'s direction ``d``."""
        conv.anomalies += 1
        e = Anomaly(packet=number, ts=ts, offset=None, kind=kind, detail=str(detail), skipped=skipped)
        self.anomalies.append(R.anomaly_row(self.capture, conv.stream, d, e, "tcp"))

    def capture_anomaly(self, number, ts, kind, detail) -> None:
        """An anomaly of the capture itself (a record, a packet no conversation takes)."""
        e = Anomaly(packet=number, ts=ts, offset=None, kind=kind, detail=str(detail))
        self.anomalies.append(R.anomaly_row(self.capture, None, None, e, "capture"))

    def unsupported_link(self, number, ts, linktype) -> None:
        """A record of a link type amqpcap does not read: one anomaly for each such link type."""
        if linktype not in self.unsupported:
            self.unsupported.add(linktype)
            detail = f"{link_type_text(linktype)} is not supported; its packets are skipped"
            self.capture_anomaly(number, ts, "unsupported-link-type", detail)

    def connection_rows(self, convs) -> None:
        """The connections rows of finished conversations, by tcp_stream."""
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
                self.null_times(row, conv)
            self.connections.append(R.connection_row(row))
            conv.row = None

    def null_times(self, row: dict, conv) -> None:
        """A connections row's times that are a packet's whose own time was out of range: null."""
        for t, f in FRAME_OF.items():
            if row[f] in self.out_of_range:
                row[t] = None
        if conv.last_packet in self.out_of_range:
            row["end_ts"] = None
