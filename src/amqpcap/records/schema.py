"""The Parquet schema: the single source of truth for every table.

The CLI, the library and the Spark job all write exactly these Arrow schemas,
whatever the AMQP version.  docs/schema.md documents every column and is
checked against this module by tests/records/test_schema_docs.py.

Each column is declared as (name, type, description); the description is the
documentation, so the two cannot drift apart.
"""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("ns", tz="UTC")
DIRS = ("c2s", "s2c")  # direction values, and the suffixes of the per-direction columns

_KEYS = [
    ("capture", pa.string(), "Capture file as given on the command line (or the Spark input path)."),
    (
        "tcp_stream",
        pa.int32(),
        "0-based index of the TCP conversation in first-packet order (Wireshark `tcp.stream`).",
    ),
    (
        "frame_number",
        pa.int64(),
        "1-based number of the packet that completed this record (Wireshark `frame.number`).",
    ),
    ("ts", TS, "Capture timestamp of that packet, ns, UTC."),
    ("direction", pa.string(), "`c2s` (client to server) or `s2c` (server to client)."),
    ("channel", pa.int32(), "AMQP channel (0-10: session channel); null where not applicable."),
]

CONNECTIONS = [
    ("capture", pa.string(), "Capture file as given."),
    ("tcp_stream", pa.int32(), "0-based TCP conversation index (Wireshark `tcp.stream`)."),
    ("frame_number", pa.int64(), "Packet number of the conversation's first packet."),
    ("ts", TS, "Timestamp of the conversation's first packet."),
    ("client_ip", pa.string(), "Client address (the side that sent the protocol header / SYN)."),
    ("client_port", pa.int32(), "Client TCP port."),
    ("server_ip", pa.string(), "Server address."),
    ("server_port", pa.int32(), "Server TCP port."),
    ("ip_version", pa.int8(), "4 or 6."),
    ("direction_source", pa.string(), "How client/server was decided: `header`, `syn`, `port` or `guess`."),
    (
        "client_header",
        pa.string(),
        "Protocol header the client sent, hex of the 4 octets after `AMQP` (e.g. `00000901`); "
        "null if not seen.",
    ),
    (
        "server_header",
        pa.string(),
        "Protocol header the server answered with (a rejected negotiation), hex; null if none.",
    ),
    (
        "client_version",
        pa.string(),
        "Version the client's header announced: `0-8`, `0-9`, `0-9-1`, `0-10`, `1.0`.",
    ),
    (
        "version",
        pa.string(),
        "Version the conversation was decoded as (agreed, or inferred mid-stream: the framing tells "
        "0-10 from the rest; 0-8, 0-9 and 0-9-1 are told apart by methods whose layouts differ, "
        "else 0-9-1).",
    ),
    (
        "version_evidence",
        pa.string(),
        "Why: `header`, `header+start` (connection.start version agreed), "
        "`inferred` (mid-stream frame shape).",
    ),
    (
        "negotiation",
        pa.string(),
        "`accepted`, `rejected` (server answered with its own header), `unknown` (mid-stream) or `none`.",
    ),
    ("tls", pa.bool_(), "The conversation is TLS (not decoded)."),
    (
        "mid_stream",
        pa.bool_(),
        "The capture started after the connection was opened (no protocol header seen).",
    ),
    ("server_product", pa.string(), "server-properties.product"),
    ("server_product_version", pa.string(), "server-properties.version"),
    ("server_platform", pa.string(), "server-properties.platform"),
    ("server_properties", pa.string(), "All server-properties, JSON."),
    ("client_product", pa.string(), "client-properties.product"),
    ("client_product_version", pa.string(), "client-properties.version"),
    ("client_platform", pa.string(), "client-properties.platform"),
    ("connection_name", pa.string(), "client-properties.connection_name"),
    ("client_properties", pa.string(), "All client-properties, JSON."),
    ("mechanism", pa.string(), "SASL mechanism chosen in start-ok."),
    ("user", pa.string(), "User name from the start-ok/secure-ok response (never the password)."),
    ("vhost", pa.string(), "Virtual host from connection.open."),
    ("channel_max", pa.int32(), "Negotiated channel-max (tune-ok, else tune)."),
    ("frame_max", pa.int64(), "Negotiated frame-max."),
    ("heartbeat", pa.int32(), "Negotiated heartbeat interval, seconds."),
    ("syn_ts", TS, "Timestamp of the client's SYN, if captured."),
    ("open_ts", TS, "Timestamp of connection.open-ok."),
    ("close_ts", TS, "Timestamp of the first connection.close."),
    (
        "closed_by",
        pa.string(),
        "Who closed: `client` / `server` (connection.close), `client-rst` / `server-rst`, "
        "`client-fin` / `server-fin`; null if still open at capture end.",
    ),
    ("close_reply_code", pa.int32(), "Reply code of connection.close."),
    ("close_reply_text", pa.string(), "Reply text of connection.close."),
    ("end_ts", TS, "Timestamp of the conversation's last packet."),
    ("packets_c2s", pa.int64(), "TCP packets client to server."),
    ("packets_s2c", pa.int64(), "TCP packets server to client."),
    (
        "bytes_c2s",
        pa.int64(),
        "TCP payload bytes client to server (reassembled, retransmissions counted once).",
    ),
    ("bytes_s2c", pa.int64(), "TCP payload bytes server to client."),
    ("frames_c2s", pa.int64(), "AMQP frames client to server."),
    ("frames_s2c", pa.int64(), "AMQP frames server to client."),
    ("gaps", pa.int32(), "Number of holes (lost data) in the two byte streams."),
    ("gap_bytes", pa.int64(), "Bytes missing in those holes."),
    ("anomalies", pa.int32(), "Anomaly rows for this conversation."),
    ("rst", pa.bool_(), "A TCP reset was seen."),
    (
        "zero_windows",
        pa.string(),
        "TCP zero-window periods, JSON list of `[direction of the side advertising 0, first "
        "frame_number, first ts ns, end frame_number, end ts ns]` (end null if the window never "
        "reopened).",
    ),
    # Liveness (records/liveness.py), written with or without --frames: what the heartbeat analysis needs.
] + [
    col
    for d, who in (("c2s", "client to server"), ("s2c", "server to client"))
    for col in (
        (f"heartbeats_{d}", pa.int64(), f"Heartbeat frames {who} (0-10: connection.heartbeat controls)."),
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
    ("stream_offset", pa.int64(), "Byte offset of the frame in this direction's TCP stream."),
    (
        "method",
        pa.string(),
        "`class.method`, specification spelling (e.g. `basic.get-empty`, 0-10 `message.transfer`).",
    ),
    ("class_id", pa.int32(), "Class index (0-10: class code)."),
    ("method_id", pa.int32(), "Method index (0-10: command/control code)."),
    ("version", pa.string(), "Protocol version of the conversation."),
    ("synchronous", pa.bool_(), "The specification marks the method synchronous (expects a response)."),
    ("has_content", pa.bool_(), "The method carries content (a `messages` row)."),
    ("frame_size", pa.int64(), "Method frame payload size in bytes."),
    ("exchange", pa.string(), "exchange / destination argument (0-9-1 exchange.bind: destination)."),
    ("routing_key", pa.string(), "routing-key / binding-key argument."),
    ("queue", pa.string(), "queue argument."),
    ("consumer_tag", pa.string(), "consumer-tag (0-10: destination of message.subscribe/transfer)."),
    ("delivery_tag", pa.int64(), "delivery-tag."),
    ("multiple", pa.bool_(), "multiple flag (ack / nack / reject)."),
    ("requeue", pa.bool_(), "requeue flag."),
    ("redelivered", pa.bool_(), "redelivered flag."),
    ("no_ack", pa.bool_(), "no-ack flag (consume / get)."),
    ("mandatory", pa.bool_(), "mandatory flag (publish)."),
    ("reply_code", pa.int32(), "reply-code (close, return; 0-10 error-code)."),
    ("reply_text", pa.string(), "reply-text (0-10 description)."),
    ("reply_name", pa.string(), "Name of reply_code in the specification (e.g. `not-found`)."),
    ("failing_method", pa.string(), "close: `class.method` named by class-id/method-id (null when 0/0)."),
    ("prefetch_count", pa.int32(), "basic.qos prefetch-count."),
    ("prefetch_size", pa.int64(), "basic.qos prefetch-size."),
    ("message_count", pa.int64(), "message-count (declare-ok, get-ok, purge-ok, ...)."),
    ("consumer_count", pa.int64(), "consumer-count (queue.declare-ok)."),
    ("command_id", pa.int64(), "0-10: session command number of this command."),
    ("answers_command_id", pa.int64(), "0-10: command answered by execution.result / execution.exception."),
    (
        "no_wait",
        pa.bool_(),
        "no-wait flag (declare, bind, consume, cancel, ...; 0-8 `nowait`): no response expected.",
    ),
    ("active", pa.bool_(), "active flag (channel.flow, channel.flow-ok; 0-8 / 0-9 access.request)."),
    ("qos_global", pa.bool_(), "global flag of basic.qos (also 0-8 / 0-9 file.qos, stream.qos)."),
    ("reason", pa.string(), "reason argument (connection.blocked)."),
    (
        "accept_mode",
        pa.int16(),
        "0-10 accept-mode (message.subscribe, message.transfer): 0 explicit, 1 none.",
    ),
    (
        "id_ranges",
        pa.list_(pa.field("element", pa.struct([("lower", pa.int64()), ("upper", pa.int64())]))),
        "0-10 sequence set, inclusive ranges of command ids: `commands` of session.completed / "
        "known-completed / expected / confirmed, `transfers` of message.accept / release / reject / acquire.",
    ),
    (
        "code",
        pa.int32(),
        "`code` argument: 0-10 session.detached detach code, 0-10 / 0-9 message.reject reject code.",
    ),
    ("text", pa.string(), "`text` argument of 0-10 / 0-9 message.reject."),
    (
        "arguments",
        pa.string(),
        "All arguments, JSON (binary as base64 under `$b64`; secrets redacted unless --keep-secrets).",
    ),
]

MESSAGES = _KEYS + [
    ("stream_offset", pa.int64(), "Stream offset of the carrying method frame."),
    (
        "method",
        pa.string(),
        "Carrying method: basic.publish, basic.deliver, basic.get-ok, basic.return, message.transfer, ...",
    ),
    ("version", pa.string(), "Protocol version of the conversation."),
    (
        "exchange",
        pa.string(),
        "Exchange (0-10: message.transfer destination, else delivery-properties.exchange).",
    ),
    ("routing_key", pa.string(), "Routing key."),
    ("consumer_tag", pa.string(), "consumer-tag (deliver)."),
    ("delivery_tag", pa.int64(), "delivery-tag (deliver, get-ok)."),
    ("redelivered", pa.bool_(), "redelivered flag."),
    ("reply_code", pa.int32(), "basic.return reply-code."),
    ("content_type", pa.string(), "content-type property."),
    ("content_encoding", pa.string(), "content-encoding property."),
    ("headers", pa.string(), "headers / application-headers table, JSON."),
    ("delivery_mode", pa.int16(), "delivery-mode (1 transient, 2 persistent)."),
    ("priority", pa.int16(), "priority."),
    ("correlation_id", pa.string(), "correlation-id."),
    ("reply_to", pa.string(), "reply-to (0-10: reply-to exchange/routing key as `exchange/key`)."),
    ("expiration", pa.string(), "expiration (0-10: ttl in ms as text)."),
    ("message_id", pa.string(), "message-id (0-10 uuid as text)."),
    ("msg_timestamp", TS, "timestamp property."),
    ("type", pa.string(), "type property."),
    ("user_id", pa.string(), "user-id property."),
    ("app_id", pa.string(), "app-id property."),
    ("cluster_id", pa.string(), "cluster-id property."),
    (
        "properties",
        pa.string(),
        "Every property present, JSON (also the file/stream/tunnel classes' properties).",
    ),
    ("body_size", pa.int64(), "Body size declared in the content header."),
    ("body_received", pa.int64(), "Body bytes actually captured."),
    ("body_frames", pa.int32(), "Number of body frames."),
    ("body_hash", pa.string(), "SHA-256 (hex) of the body bytes received."),
    ("body", pa.binary(), "First N bytes of the body (`--body-bytes N`)."),
    ("complete", pa.bool_(), "Header and every body byte were decoded."),
    ("first_frame_number", pa.int64(), "Packet of the carrying method frame."),
    ("last_frame_number", pa.int64(), "Packet that completed the content (same as frame_number)."),
]

ANOMALIES = _KEYS + [
    ("stream_offset", pa.int64(), "Byte offset in this direction's stream, where known."),
    ("layer", pa.string(), "`capture`, `tcp` or `amqp`."),
    ("kind", pa.string(), "What went wrong (see docs/schema.md, anomaly kinds)."),
    ("detail", pa.string(), "Human-readable detail."),
    ("skipped_bytes", pa.int64(), "Stream bytes this anomaly accounts for (not decoded)."),
]

FRAMES = _KEYS + [
    ("stream_offset", pa.int64(), "Byte offset of the frame in this direction's stream."),
    ("frame_type", pa.int16(), "Frame type octet (0-10: segment type)."),
    (
        "type_name",
        pa.string(),
        "method, header, body, heartbeat, oob-method, oob-header, oob-body, trace; "
        "0-10: control, command, header, body.",
    ),
    ("size", pa.int64(), "Payload size."),
    ("wire_size", pa.int64(), "Whole frame size on the wire."),
]

TABLES = {
    "connections": CONNECTIONS,
    "methods": METHODS,
    "messages": MESSAGES,
    "anomalies": ANOMALIES,
    "frames": FRAMES,
}


def _schema(cols, table):
    return pa.schema(
        [pa.field(n, t, metadata={"doc": d}) for n, t, d in cols],
        metadata={"amqpcap.table": table, "amqpcap.schema_version": "1"},
    )


SCHEMAS: dict[str, pa.Schema] = {name: _schema(cols, name) for name, cols in TABLES.items()}
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


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns of ``schema`` (a table's, or a selection of it) to write dictionary-encoded."""
    text = (pa.types.is_string, pa.types.is_binary)
    return [f.name for f in schema if any(t(f.type) for t in text) and f.name not in UNIQUE_PER_ROW]
