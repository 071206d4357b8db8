"""The Parquet schema: the single source of truth for every table.

The CLI, the library and the Spark job all write exactly these Arrow schemas,
whatever the AMQP version.  docs/schema.md documents every column and is
generated from this module (tools/gen_schema_doc.py; tests/records/test_schema.py checks it).

Each column is declared as (name, type, description); the description is the
documentation, so the two cannot drift apart.  The types are ``Type``s, which name an Arrow type
without importing pyarrow: the row builders and the column buffers work from these declarations,
and pyarrow is imported only to write Parquet (``SCHEMAS``, the Arrow schemas, are made on first
use): ``show`` and a dissect of bad input never import it.
"""

from __future__ import annotations


class Type:
    """An Arrow type by the name pyarrow prints for it (``str()``), and what the compiled column
    buffers need to know of it without pyarrow: ``kind`` (int, timestamp, bool, string, binary,
    struct, list), ``width`` (bytes of an int or timestamp), ``fields`` (a struct's (name, Type)
    pairs; a list's one item field).  ``arrow()`` is the pyarrow type."""

    __slots__ = ("name", "kind", "width", "fields")

    def __init__(self, name: str, kind: str, width: int = 0, fields: tuple = ()) -> None:
        self.name, self.kind, self.width, self.fields = name, kind, width, fields

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__

    @classmethod
    def struct(cls, *fields: tuple[str, Type]) -> Type:
        return cls(f"struct<{', '.join(f'{n}: {t}' for n, t in fields)}>", "struct", fields=fields)

    @classmethod
    def list_of(cls, item: str, type: Type) -> Type:
        return cls(f"list<{item}: {type}>", "list", fields=((item, type),))

    def arrow(self):
        import pyarrow as pa

        if self.kind == "struct":
            return pa.struct([(n, t.arrow()) for n, t in self.fields])
        if self.kind == "list":
            ((item, type),) = self.fields
            return pa.list_(pa.field(item, type.arrow()))
        if self.kind == "timestamp":  # TS (rows, frames) or STORED_TS (Parquet): UTC, the unit named
            return pa.timestamp(self.name[len("timestamp[") :].split(",")[0], tz="UTC")
        return pa.type_for_alias(self.name)


STRING = Type("string", "string")
BINARY = Type("binary", "binary")
BOOL = Type("bool", "bool")
INT8, INT16, INT32, INT64 = (Type(f"int{8 * w}", "int", w) for w in (1, 2, 4, 8))
TS = Type("timestamp[ns, tz=UTC]", "timestamp", 8)  # a time in the rows and the library's frames
STORED_TS = Type("timestamp[us, tz=UTC]", "timestamp", 8)  # a time in Parquet, with its NANOS companion
TYPES = (STRING, BINARY, BOOL, INT8, INT16, INT32, INT64, TS)  # every leaf type (tests: names = pyarrow's)
NANOS = "_nanos"  # suffix of a time column's companion in Parquet: the ns past its microsecond
DIRS = ("c2s", "s2c")  # direction values, and the suffixes of the per-direction columns

_KEYS = [
    ("capture", STRING, "Capture file as given on the command line (or the Spark input path)."),
    (
        "tcp_stream",
        INT32,
        "0-based index of the TCP conversation in first-packet order (Wireshark `tcp.stream`).",
    ),
    (
        "frame_number",
        INT64,
        "1-based number of the packet that completed this record (Wireshark `frame.number`).",
    ),
    (
        "ts",
        TS,
        "Capture timestamp of that packet, UTC; null if the packet's own time is outside "
        "1677 .. 2262, which the column cannot hold (a `timestamp-out-of-range` anomaly names "
        "the packet).",
    ),
    ("direction", STRING, "`c2s` (client to server) or `s2c` (server to client)."),
    ("channel", INT32, "AMQP channel (0-10: session channel); null where not applicable."),
]

CONNECTIONS = [
    ("capture", STRING, "Capture file as given."),
    ("tcp_stream", INT32, "0-based TCP conversation index (Wireshark `tcp.stream`)."),
    ("frame_number", INT64, "Packet number of the conversation's first packet."),
    ("ts", TS, "Timestamp of the conversation's first packet (null as the other tables' `ts`)."),
    ("client_ip", STRING, "Client address (the side that sent the protocol header / SYN)."),
    ("client_port", INT32, "Client TCP port."),
    ("server_ip", STRING, "Server address."),
    ("server_port", INT32, "Server TCP port."),
    ("ip_version", INT8, "4 or 6."),
    ("direction_source", STRING, "How client/server was decided: `header`, `syn`, `port` or `guess`."),
    (
        "client_header",
        STRING,
        "Protocol header the client sent, hex of the 4 octets after `AMQP` (e.g. `00000901`); "
        "null if not seen.",
    ),
    (
        "server_header",
        STRING,
        "Protocol header the server answered with (a rejected negotiation), hex; null if none.",
    ),
    (
        "client_version",
        STRING,
        "Version the client's header announced: `0-8`, `0-9`, `0-9-1`, `0-10`, `1.0`.",
    ),
    (
        "version",
        STRING,
        "Version the conversation was decoded as (agreed, or inferred mid-stream: the framing tells "
        "0-10 from the rest; 0-8, 0-9 and 0-9-1 are told apart by methods whose layouts differ, "
        "else 0-9-1).",
    ),
    (
        "version_evidence",
        STRING,
        "Why: `header`, `header+start` (connection.start version agreed), "
        "`inferred` (mid-stream frame shape).",
    ),
    (
        "negotiation",
        STRING,
        "`accepted`, `rejected` (server answered with its own header), `unknown` (mid-stream) or `none`.",
    ),
    ("tls", BOOL, "The conversation is TLS (not decoded)."),
    (
        "mid_stream",
        BOOL,
        "The capture started after the connection was opened (no protocol header seen).",
    ),
    ("server_product", STRING, "server-properties.product (1.0: of the server's open properties)."),
    ("server_product_version", STRING, "server-properties.version"),
    ("server_platform", STRING, "server-properties.platform"),
    ("server_properties", STRING, "All server-properties, JSON (1.0: the server's open properties)."),
    ("client_product", STRING, "client-properties.product (1.0: of the client's open properties)."),
    ("client_product_version", STRING, "client-properties.version"),
    ("client_platform", STRING, "client-properties.platform"),
    ("connection_name", STRING, "client-properties.connection_name"),
    ("client_properties", STRING, "All client-properties, JSON (1.0: the client's open properties)."),
    ("mechanism", STRING, "SASL mechanism chosen in start-ok (1.0: sasl.init)."),
    (
        "user",
        STRING,
        "User name from the start-ok/secure-ok response (1.0: sasl.init initial-response; never "
        "the password).",
    ),
    ("vhost", STRING, "Virtual host from connection.open (1.0: the client's open hostname)."),
    (
        "channel_max",
        INT32,
        "Negotiated channel-max (tune-ok, else tune; 1.0: the smaller of the two opens' channel-max).",
    ),
    ("frame_max", INT64, "Negotiated frame-max (1.0: the smaller of the two opens' max-frame-size)."),
    ("heartbeat", INT32, "Negotiated heartbeat interval, seconds."),
    ("syn_ts", TS, "Timestamp of the client's SYN, if captured."),
    ("open_ts", TS, "Timestamp of connection.open-ok (1.0: the server's open)."),
    ("close_ts", TS, "Timestamp of the first connection.close (1.0: close); null as `ts`."),
    (
        "closed_by",
        STRING,
        "Who closed: `client` / `server` (connection.close), `client-rst` / `server-rst`, "
        "`client-fin` / `server-fin`; null if still open at capture end.",
    ),
    (
        "close_frame",
        INT64,
        "Frame number of the packet `closed_by` names (the connection.close, FIN or RST).",
    ),
    ("close_reply_code", INT32, "Reply code of connection.close."),
    (
        "close_reply_text",
        STRING,
        "Reply text of connection.close (1.0: the close error's description, else its condition).",
    ),
    ("end_ts", TS, "Timestamp of the conversation's last packet; null as `ts`."),
    ("packets_c2s", INT64, "TCP packets client to server."),
    ("packets_s2c", INT64, "TCP packets server to client."),
    (
        "bytes_c2s",
        INT64,
        "TCP payload bytes client to server (reassembled, retransmissions counted once).",
    ),
    ("bytes_s2c", INT64, "TCP payload bytes server to client."),
    ("frames_c2s", INT64, "AMQP frames client to server."),
    ("frames_s2c", INT64, "AMQP frames server to client."),
    ("gaps", INT32, "Number of holes (lost data) in the two byte streams."),
    ("gap_bytes", INT64, "Bytes missing in those holes."),
    ("anomalies", INT32, "Anomaly rows for this conversation."),
    ("rst", BOOL, "A TCP reset was seen."),
    ("rst_by", STRING, "Who sent the first TCP reset: `client` / `server`; null if none."),
    ("rst_frame", INT64, "Frame number of that reset."),
    (
        "zero_windows",
        STRING,
        "TCP zero-window periods, JSON list of `[direction of the side advertising 0, first "
        "frame_number, first ts ns, end frame_number, end ts ns]` (end null if the window never "
        "reopened).",
    ),
    ("client_container_id", STRING, "1.0: container-id of the client's open."),
    ("server_container_id", STRING, "1.0: container-id of the server's open."),
    (
        "idle_timeout_ms",
        INT64,
        "1.0: the smaller idle-time-out of the two opens, ms (each peer must send a frame, empty "
        "if need be, within the other's).",
    ),
    (
        "client_idle_timeout_ms",
        INT64,
        "1.0: idle-time-out of the client's open, ms: the longest silence it accepts from the server.",
    ),
    (
        "server_idle_timeout_ms",
        INT64,
        "1.0: idle-time-out of the server's open, ms: the longest silence it accepts from the client.",
    ),
    # Liveness (records/liveness.py), written with or without --frames: what the heartbeat analysis needs.
] + [
    col
    for d, who in (("c2s", "client to server"), ("s2c", "server to client"))
    for col in (
        (f"heartbeats_{d}", INT64, f"Heartbeat frames {who} (0-10: connection.heartbeat controls)."),
        (
            f"silence_start_ts_{d}",
            TS,
            f"Start of the longest silence {who}: timestamp of the earlier of "
            "the two consecutive AMQP frames of this direction furthest apart "
            "in time "
            "(null with fewer than two frames).",
        ),
        (f"silence_end_ts_{d}", TS, "End of that silence: timestamp of the frame that broke it."),
        (f"last_frame_ts_{d}", TS, f"Timestamp of the last AMQP frame {who}."),
    )
]

METHODS = _KEYS + [
    ("stream_offset", INT64, "Byte offset of the frame in this direction's TCP stream."),
    (
        "method",
        STRING,
        "`class.method`, specification spelling (e.g. `basic.get-empty`, 0-10 `message.transfer`); "
        "1.0: the performative (`open`, `begin`, `attach`, `flow`, `transfer`, `disposition`, `detach`, "
        "`end`, `close`) or SASL frame (`sasl.mechanisms`, `sasl.init`, `sasl.challenge`, "
        "`sasl.response`, `sasl.outcome`).",
    ),
    ("class_id", INT32, "Class index (0-10: class code; 1.0: frame type, 0 AMQP, 1 SASL)."),
    ("method_id", INT32, "Method index (0-10: command/control code; 1.0: descriptor code)."),
    ("version", STRING, "Protocol version of the conversation."),
    ("synchronous", BOOL, "The specification marks the method synchronous (expects a response)."),
    ("has_content", BOOL, "The method carries content (a `messages` row; 1.0: transfer)."),
    ("frame_size", INT64, "Method frame payload size in bytes."),
    ("exchange", STRING, "exchange / destination argument (0-9-1 exchange.bind: destination)."),
    ("routing_key", STRING, "routing-key / binding-key argument."),
    ("queue", STRING, "queue argument."),
    ("consumer_tag", STRING, "consumer-tag (0-10: destination of message.subscribe/transfer)."),
    (
        "delivery_tag",
        INT64,
        "delivery-tag (an unsigned 64-bit wire value: one past 2^63 - 1 is null here, kept in "
        "`arguments`, and a `value-out-of-range` anomaly says so).",
    ),
    ("multiple", BOOL, "multiple flag (ack / nack / reject)."),
    ("requeue", BOOL, "requeue flag."),
    ("redelivered", BOOL, "redelivered flag."),
    ("no_ack", BOOL, "no-ack flag (consume / get)."),
    ("mandatory", BOOL, "mandatory flag (publish)."),
    ("reply_code", INT32, "reply-code (close, return; 0-10 error-code)."),
    ("reply_text", STRING, "reply-text (0-10 description; 1.0: the error's description)."),
    ("reply_name", STRING, "Name of reply_code in the specification (e.g. `not-found`)."),
    (
        "failing_method",
        STRING,
        "close: the method named by class-id/method-id (null when 0/0); 0-10 execution.exception: "
        "the command named by class-code/command-code; by name (`queue.declare`), numbers when "
        "the spec has none.",
    ),
    ("prefetch_count", INT32, "basic.qos prefetch-count."),
    ("prefetch_size", INT64, "basic.qos prefetch-size."),
    ("message_count", INT64, "message-count (declare-ok, get-ok, purge-ok, ...)."),
    ("consumer_count", INT64, "consumer-count (queue.declare-ok)."),
    ("command_id", INT64, "0-10: session command number of this command."),
    ("answers_command_id", INT64, "0-10: command answered by execution.result / execution.exception."),
    (
        "no_wait",
        BOOL,
        "no-wait flag (declare, bind, consume, cancel, ...; 0-8 `nowait`): no response expected.",
    ),
    ("active", BOOL, "active flag (channel.flow, channel.flow-ok; 0-8 / 0-9 access.request)."),
    ("qos_global", BOOL, "global flag of basic.qos (also 0-8 / 0-9 file.qos, stream.qos)."),
    ("reason", STRING, "reason argument (connection.blocked)."),
    (
        "accept_mode",
        INT16,
        "0-10 accept-mode (message.subscribe, message.transfer): 0 explicit, 1 none.",
    ),
    (
        "id_ranges",
        Type.list_of("element", Type.struct(("lower", INT64), ("upper", INT64))),
        "0-10 sequence set, inclusive ranges of command ids: `commands` of session.completed / "
        "known-completed / expected / confirmed, `transfers` of message.accept / release / reject / acquire; "
        "1.0: the delivery-ids `first..last` of a disposition.",
    ),
    (
        "code",
        INT32,
        "`code` argument: 0-10 session.detached detach code, 0-10 / 0-9 message.reject reject code, "
        "1.0 sasl.outcome code (0 ok, 1 auth, 2 sys, 3 sys-perm, 4 sys-temp).",
    ),
    ("text", STRING, "`text` argument of 0-10 / 0-9 message.reject."),
    (
        "arguments",
        STRING,
        "All arguments, JSON (binary as base64 under `$b64`; secrets redacted unless --keep-secrets; "
        "1.0: the performative's fields present, a described value as an object with `$type` naming "
        "it, or `$descriptor` and `value` where the descriptor is not the specification's).",
    ),
    ("handle", INT64, "1.0: link handle (attach, flow, transfer, detach)."),
    (
        "link_name",
        STRING,
        "1.0: link name (attach; flow, transfer, detach: the link the handle names on this session).",
    ),
    (
        "role",
        STRING,
        "1.0: `sender` or `receiver`: the role of the side sending an attach or disposition.",
    ),
    ("source", STRING, "1.0: source address of the link (attach, and the frames naming the link)."),
    ("target", STRING, "1.0: target address of the link (likewise)."),
    ("delivery_id", INT64, "1.0: delivery-id (transfer; disposition: `first`, the range in id_ranges)."),
    ("settled", BOOL, "1.0: settled flag (transfer: sent settled; disposition: settles the range)."),
    ("more", BOOL, "1.0: transfer `more` flag (the delivery continues in the next transfer)."),
    (
        "outcome",
        STRING,
        "1.0: delivery state of a transfer or disposition: `accepted`, `rejected`, `released`, "
        "`modified`, `received`, `declared` (the state's type name).",
    ),
    (
        "condition",
        STRING,
        "1.0: error condition (e.g. `amqp:not-found`) of close, end, detach or a rejected outcome.",
    ),
    ("link_credit", INT64, "1.0: flow link-credit."),
    ("delivery_count", INT64, "1.0: flow delivery-count (attach: initial-delivery-count)."),
    ("drain", BOOL, "1.0: flow drain flag (the sender is to use up its credit or give it back)."),
    ("available", INT64, "1.0: flow available: the messages the sender has waiting for the link."),
]

MESSAGES = _KEYS + [
    ("stream_offset", INT64, "Stream offset of the carrying method frame."),
    (
        "method",
        STRING,
        "Carrying method: basic.publish, basic.deliver, basic.get-ok, basic.return, message.transfer, ...",
    ),
    ("version", STRING, "Protocol version of the conversation."),
    (
        "exchange",
        STRING,
        "Exchange (0-10: message.transfer destination, else delivery-properties.exchange).",
    ),
    ("routing_key", STRING, "Routing key."),
    ("consumer_tag", STRING, "consumer-tag (deliver)."),
    ("delivery_tag", INT64, "delivery-tag (deliver, get-ok); null past 2^63 - 1, as in `methods`."),
    ("redelivered", BOOL, "redelivered flag."),
    ("reply_code", INT32, "basic.return reply-code."),
    ("content_type", STRING, "content-type property."),
    ("content_encoding", STRING, "content-encoding property."),
    ("headers", STRING, "headers / application-headers table, JSON."),
    ("delivery_mode", INT16, "delivery-mode (1 transient, 2 persistent)."),
    ("priority", INT16, "priority."),
    ("correlation_id", STRING, "correlation-id."),
    ("reply_to", STRING, "reply-to (0-10: reply-to exchange/routing key as `exchange/key`)."),
    ("expiration", STRING, "expiration (0-10: ttl in ms as text)."),
    ("message_id", STRING, "message-id (0-10 uuid as text)."),
    (
        "msg_timestamp",
        TS,
        "timestamp property (1.0: creation-time); null (value kept in `properties`, a "
        "`value-out-of-range` anomaly) outside 0 .. 9e9 s (1.0: -9e12 .. 9e12 ms), which the ns "
        "column cannot hold.",
    ),
    ("type", STRING, "type property."),
    ("user_id", STRING, "user-id property."),
    ("app_id", STRING, "app-id property."),
    ("cluster_id", STRING, "cluster-id property."),
    (
        "properties",
        STRING,
        "Every property present, JSON (also the file/stream/tunnel classes' properties).",
    ),
    (
        "body_size",
        INT64,
        "Body size declared in the content header (0-10: content-length). The wire's unsigned "
        "64-bit value past 2^63 - 1 is null here and reported as a `value-out-of-range` anomaly.",
    ),
    ("body_received", INT64, "Body bytes actually captured."),
    ("body_frames", INT32, "Number of body frames."),
    ("body_hash", STRING, "SHA-256 (hex) of the body bytes received."),
    ("body", BINARY, "First N bytes of the body (`--body-bytes N`)."),
    ("complete", BOOL, "Header and every body byte were decoded."),
    ("first_frame_number", INT64, "Packet of the carrying method frame."),
    ("last_frame_number", INT64, "Packet that completed the content (same as frame_number)."),
    ("link_name", STRING, "1.0: name of the link the delivery travelled on."),
    ("delivery_id", INT64, "1.0: delivery-id of the delivery."),
    ("settled", BOOL, "1.0: the delivery was settled (sent settled, or by a disposition) in the capture."),
    (
        "settle_ts",
        TS,
        "1.0: when it was settled (the settling disposition; sent settled: its last transfer).",
    ),
    (
        "outcome",
        STRING,
        "1.0: its outcome (the settling disposition's state, else the last one stated): `accepted`, "
        "`rejected`, `released`, `modified`, ...",
    ),
    ("condition", STRING, "1.0: error condition of a rejected outcome."),
    ("aborted", BOOL, "1.0: the sender aborted the delivery (a transfer with `aborted`)."),
]

ANOMALIES = _KEYS + [
    ("stream_offset", INT64, "Byte offset in this direction's stream, where known."),
    ("layer", STRING, "`capture`, `tcp` or `amqp`."),
    ("kind", STRING, "What went wrong (see docs/schema.md, anomaly kinds)."),
    ("detail", STRING, "Human-readable detail."),
    ("skipped_bytes", INT64, "Stream bytes this anomaly accounts for (not decoded)."),
]

FRAMES = _KEYS + [
    ("stream_offset", INT64, "Byte offset of the frame in this direction's stream."),
    ("frame_type", INT16, "Frame type octet (0-10: segment type; 1.0: 0 AMQP, 1 SASL)."),
    (
        "type_name",
        STRING,
        "method, header, body, heartbeat, oob-method, oob-header, oob-body, trace; "
        "0-10: control, command, header, body; 1.0: amqp, sasl, heartbeat (an empty frame).",
    ),
    ("size", INT64, "Payload size."),
    ("wire_size", INT64, "Whole frame size on the wire."),
]

TABLES = {
    "connections": CONNECTIONS,
    "methods": METHODS,
    "messages": MESSAGES,
    "anomalies": ANOMALIES,
    "frames": FRAMES,
}


# How a time column is stored.  The rows and the library's frames hold exact ns (TS); Parquet
# holds each time column X as a microsecond TIMESTAMP (STORED_TS, floored) plus ``X_nanos``, the
# 0 .. 999 ns past that microsecond: Spark and the other Parquet readers that take no
# TIMESTAMP(NANOS) read X as a timestamp, and X + X_nanos ns is the exact time.
def nanos_doc(name: str) -> str:
    """The description of time column ``name``'s companion."""
    return (
        f"Nanoseconds past the microsecond of `{name}` (0 .. 999; null where `{name}` is): "
        f"`{name}` + `{name}_nanos` ns is the exact time."
    )


def stored(cols: list) -> list:
    """A table's columns as Parquet holds them: each time column as STORED_TS, then its companion."""
    out = []
    for n, t, d in cols:
        if t is TS:
            out += [(n, STORED_TS, d), (n + NANOS, INT16, nanos_doc(n))]
        else:
            out.append((n, t, d))
    return out


STORED = {table: stored(cols) for table, cols in TABLES.items()}
SCHEMA_VERSION = "2"  # 2: time columns as microsecond timestamps plus their NANOS companions


def _schema(cols, table):
    import pyarrow as pa

    return pa.schema(
        [pa.field(n, t.arrow(), metadata={"doc": d}) for n, t, d in cols],
        metadata={"amqpcap.table": table, "amqpcap.schema_version": SCHEMA_VERSION},
    )


def __getattr__(name: str):
    # SCHEMAS (the rows' and frames' pyarrow.Schema, by table) and STORED_SCHEMAS (the Parquet
    # files') are each made, and pyarrow imported, on first use: a dissect reads SCHEMAS only
    made = {"SCHEMAS": TABLES, "STORED_SCHEMAS": STORED}.get(name)
    if made is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = schemas = {table: _schema(cols, table) for table, cols in made.items()}
    return schemas


COLUMNS: dict[str, list[str]] = {name: [c[0] for c in cols] for name, cols in TABLES.items()}

# Parquet encoding (not the schema: readers see the same columns either way).  Text columns hold
# few distinct values (names, versions, routing keys) and are dictionary-encoded, except these,
# whose values are (nearly) one per row: a dictionary there is built, overflows and is thrown
# away.  Numbers are written plain.  On the methods and messages of 200k small packets: 15.6 ->
# 11.4 MB and about a quarter less Parquet write time than dictionary-encoding every column.
UNIQUE_PER_ROW = frozenset(
    {
        "arguments",
        "headers",
        "properties",
        "correlation_id",
        "message_id",
        "body_hash",
        "body",
        "detail",
        "client_properties",
        "server_properties",
        "zero_windows",
    }
)


def dictionary_columns(schema) -> list[str]:
    """The columns of ``schema`` (a pyarrow.Schema: a table's, or a selection of it) to write
    dictionary-encoded."""
    import pyarrow as pa

    text = (pa.types.is_string, pa.types.is_binary)
    return [f.name for f in schema if any(t(f.type) for t in text) and f.name not in UNIQUE_PER_ROW]
