"""Events -> row tuples in the column order of records/schema.py (method and message rows are
filled by column index in a list, then frozen: the writer converts tuples).

``append_rows`` runs per batch of events: it is ``append_rows_reference`` here, or its compiled
twin (fastrows.pyx, optional), chosen once at import by compiled.py like the 0-9 decoder."""

from __future__ import annotations

from operator import attrgetter

from amqpcap import compiled
from amqpcap.amqp import spec as _spec
from amqpcap.amqp.events import Anomaly, Content, Frame, Method
from amqpcap.amqp.facts import ConnectionFacts
from amqpcap.records.schema import COLUMNS, DIRS


def json_default(o):
    if isinstance(o, (bytes, bytearray, memoryview)):
        import base64  # here: the compiled row builder writes base64 itself, and a dissect never loads it

        return {"$b64": base64.b64encode(bytes(o)).decode()}
    return str(o)


def _make_encode():
    """``JSONEncoder(...).encode``, minus the C encoder that ``encode`` builds again on every call
    (a third of its cost on small values): the C encoder is built once, here, and checked to write
    what ``encode`` writes.  No circular-reference check: decoded values are trees."""
    import json

    encoder = json.JSONEncoder(default=json_default, ensure_ascii=False, separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        chunks = make(None, json_default, json.encoder.encode_basestring, None, ":", ",", False, False, True)
        join = "".join

        def encode(o) -> str:
            return join(chunks(o, 0))

        probe = {"a": [1, 2.5, None, True, "é\n"], "b": {"$": b"\x00"}, "c": float("nan")}
        if encode(probe) == encoder.encode(probe) and encode("x") == encoder.encode("x"):
            return encode
    except Exception:  # no C accelerator, or another signature: the encoder's own path
        pass
    return encoder.encode


_encoder = None


def encode_json(o) -> str:
    """The JSON text of ``o``.  The encoder is made at the first call: the json module is not
    imported by a dissect whose JSON the compiled row builder writes (~1 ms of every start)."""
    global _encoder
    if _encoder is None:
        _encoder = _make_encode()
    return _encoder(o)


def to_json(obj) -> str | None:
    if obj is None:
        return None
    return encode_json(obj)


def as_text(v):
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def as_int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def as_bool(v):
    return v if isinstance(v, bool) else None


_I64_MAX = (1 << 63) - 1


def with_destination(columns, column: str, first: bool = False) -> tuple:
    """``columns`` (column, argument names, converter) with ``destination`` an argument name of
    ``column``: the last (the column's own arguments win), or the ``first``."""
    return tuple(
        (c, (("destination",) + names if first else names + ("destination",)) if c == column else names, conv)
        for c, names, conv in columns
    )


def failing_method(version, a):
    """The method a close (class-id / method-id) or a 0-10 execution.exception (class-code /
    command-code: a command) names, by name; ``class.method`` numbers when the spec has none."""
    cid = a.get("class-id", a.get("class-code"))
    mid = a.get("method-id", a.get("command-code"))
    if not cid:
        return None
    try:
        mod = _spec.get(version or "0-9-1")
    except Exception:
        mod = None
    m = getattr(mod, "COMMANDS" if version == "0-10" else "METHODS", {}).get((cid, mid))
    return m.name if m is not None else f"{cid}.{mid}"


def _ranges(v):
    """A 0-10 sequence set as the codec decodes it (``[[lower, upper], ...]``) -> list of struct dicts."""
    if not isinstance(v, list):
        return None
    out = []
    for r in v:
        if (
            isinstance(r, (list, tuple))
            and len(r) == 2
            and as_int(r[0]) is not None
            and as_int(r[1]) is not None
        ):
            out.append({"lower": r[0], "upper": r[1]})
    return out


# The typed argument columns added for the analysis (they follow answers_command_id in METHODS).
ARG_COLUMNS = ("no_wait", "active", "qos_global", "reason", "accept_mode", "id_ranges", "code", "text")


def as_tag(v):
    """A delivery-tag that fits the int64 column, else null."""
    return v if isinstance(v, int) and 0 <= v <= _I64_MAX else None


# The methods columns filled from a method's arguments: column -> (argument names, the first
# present wins; converter).  Every converter maps None to None, so a column none of whose
# arguments is present stays null, exactly as ``conv(a.get(k1, a.get(k2)))`` would leave it.
METHOD_ARGS = (
    ("exchange", ("exchange",), as_text),
    ("routing_key", ("routing-key", "binding-key"), as_text),
    ("queue", ("queue",), as_text),
    ("consumer_tag", ("consumer-tag",), as_text),
    ("delivery_tag", ("delivery-tag",), as_tag),
    ("multiple", ("multiple",), as_bool),
    ("requeue", ("requeue",), as_bool),
    ("redelivered", ("redelivered",), as_bool),
    ("no_ack", ("no-ack",), as_bool),
    ("mandatory", ("mandatory",), as_bool),
    ("reply_code", ("reply-code", "error-code"), as_int),
    ("reply_text", ("reply-text", "description"), as_text),
    ("prefetch_count", ("prefetch-count",), as_int),
    ("prefetch_size", ("prefetch-size",), as_int),
    ("message_count", ("message-count",), as_int),
    ("consumer_count", ("consumer-count",), as_int),
    ("no_wait", ("no-wait", "nowait"), as_bool),
    ("active", ("active",), as_bool),
    ("qos_global", ("global",), as_bool),
    ("reason", ("reason",), as_text),
    ("accept_mode", ("accept-mode",), as_int),
    ("id_ranges", ("commands", "transfers"), _ranges),
    ("code", ("code",), as_int),
    ("text", ("text",), as_text),
)
_ARG_CONVERTERS = {col: (names, conv) for col, names, conv in METHOD_ARGS}
# by spec.names_subscription: where a destination goes (the consumer tag it names; an exchange
# argument wins over it)
_METHOD_ARGS_BY_SUBSCRIPTION = {
    False: with_destination(METHOD_ARGS, "exchange"),
    True: with_destination(METHOD_ARGS, "consumer_tag", first=True),
}


def arg_columns(a: dict) -> tuple:
    """Values of the typed argument columns :data:`ARG_COLUMNS` (they follow ``answers_command_id``
    in METHODS, see records/schema.py) from a method's decoded arguments (test fixtures build
    rows with it as dissect fills them)."""
    out = []
    for col in ARG_COLUMNS:
        names, conv = _ARG_CONVERTERS[col]
        out.append(conv(next((a[k] for k in names if k in a), None)))
    return tuple(out)


# Which column each value of a methods / messages row that no fill plan writes comes from:
# (column of records/schema.py, source), the source an attribute of the event (a dotted path
# for its method's) or one of the row builder's own arguments (OWN: the direction by its name).
# Both row builders place these values by these tables (fastrows reads them at its first row);
# the other columns are the plans' (arguments, properties, reply name, failing method, JSON).
OWN = ("=capture", "=stream", "=direction", "=version")
KEY_SOURCES = (  # the columns every table starts with
    ("capture", "=capture"),
    ("tcp_stream", "=stream"),
    ("frame_number", "packet"),
    ("ts", "ts"),
    ("direction", "=direction"),
    ("channel", "channel"),
    ("stream_offset", "offset"),
)
METHOD_SOURCES = KEY_SOURCES + (
    ("method", "name"),
    ("class_id", "class_id"),
    ("method_id", "method_id"),
    ("version", "=version"),
    ("synchronous", "synchronous"),
    ("has_content", "has_content"),
    ("frame_size", "frame_size"),
    ("command_id", "command_id"),
    ("answers_command_id", "answers_command_id"),
)
MESSAGE_SOURCES = KEY_SOURCES + (
    ("method", "method.name"),
    ("version", "=version"),
    ("body_size", "body_size"),
    ("body_received", "body_received"),
    ("body_frames", "body_frames"),
    ("body_hash", "body_hash"),
    ("body", "body"),
    ("complete", "complete"),
    ("first_frame_number", "first_packet"),
    ("last_frame_number", "packet"),
)


class Placement:
    """A row's values from its sources (``placed``), by one of the tables above: a list of
    ``width`` nulls with the builder's own arguments and the event's attributes in place."""

    __slots__ = ("width", "own", "at", "get")

    def __init__(self, sources: tuple, columns: list) -> None:
        index = {name: i for i, name in enumerate(columns)}
        self.width = len(columns)
        self.own = tuple(index[col] for src in OWN for col, s in sources if s == src)
        assert len(self.own) == len(OWN), "a row names each of the builder's arguments once"
        attrs = [(index[col], src) for col, src in sources if src not in OWN]
        self.at = tuple(i for i, _ in attrs)
        self.get = attrgetter(*(src for _, src in attrs))

    def placed(self, event, capture, stream, direction, version) -> list:
        row = [None] * self.width
        for i, v in zip(self.own, (capture, stream, DIRS[direction], version)):
            row[i] = v
        for i, v in zip(self.at, self.get(event)):
            row[i] = v
        return row


METHOD_COLUMNS = COLUMNS["methods"]
_METHOD_PLACEMENT = Placement(METHOD_SOURCES, METHOD_COLUMNS)
_M = {name: i for i, name in enumerate(METHOD_COLUMNS)}
M_EXCHANGE, M_CONSUMER_TAG = _M["exchange"], _M["consumer_tag"]
M_REPLY_NAME, M_FAILING = _M["reply_name"], _M["failing_method"]
M_ARGUMENTS = _M["arguments"]


def fill_plan(columns, index: dict, present: set) -> tuple:
    """(column index, value name, converter) for each of ``columns`` (column, value names in
    precedence order, converter) that a value of ``present`` fills."""
    return tuple(
        (index[col], next(k for k in names if k in present), conv)
        for col, names, conv in columns
        if not present.isdisjoint(names)
    )


class MethodPlan:
    """How to fill a method row from arguments with these names (in this order), compiled once
    per (method name, argument names, direction, version): a row then touches only the arguments
    present instead of looking up every typed column's argument in every row."""

    __slots__ = ("fill", "code", "failing")

    def __init__(self, name: str, keys: tuple, direction=0, version=None) -> None:
        present = set(keys)
        columns = _METHOD_ARGS_BY_SUBSCRIPTION[_spec.names_subscription(name, direction, version)]
        self.fill = fill_plan(columns, _M, present)
        self.code = "reply-code" in present or "error-code" in present
        self.failing = name.endswith(".close") or name == "execution.exception"


method_plans: dict = {}  # (method name, argument names, direction, version) -> MethodPlan


def method_row_reference(capture, stream, direction, m: Method, version):
    """The methods row of ``m`` (fastrows.pyx builds the same in C)."""
    a = m.args
    if not isinstance(a, dict):  # the compiled decoder's mapping over the frame (fast09.WireFields)
        a = dict(a)
    name = m.name
    key = (name, tuple(a), direction, version)
    plan = method_plans.get(key)
    if plan is None:
        plan = method_plans[key] = MethodPlan(*key)
    row = _METHOD_PLACEMENT.placed(m, capture, stream, direction, version)
    for i, k, conv in plan.fill:
        row[i] = conv(a[k])
    if plan.code:
        code = a.get("reply-code", a.get("error-code"))
        info = _spec.reply_code_info(version, code) if isinstance(code, int) else None
        row[M_REPLY_NAME] = info[0] if info else None
    if plan.failing:
        row[M_FAILING] = failing_method(version, a)
    row[M_ARGUMENTS] = to_json(a)
    return tuple(row)


def as_short(v):
    """An int16 property (delivery-mode, priority): out-of-range values are null."""
    v = as_int(v)
    return v if v is None or v < 32768 else None


def as_timestamp_ns(v):
    """The timestamp property (seconds) as ns, null when outside the timestamp column's range."""
    return v * 1_000_000_000 if isinstance(v, int) and 0 <= v < 9_000_000_000 else None


def as_table_json(v):
    return to_json(v) if v is not None else None


# The messages columns filled from the arguments of a content's method, as METHOD_ARGS (by
# message_arg_plan); a content's own exchange and routing key (0-10's delivery properties) come
# before them, and a redelivered property stands in for a redelivered argument.
MESSAGE_ARGS = (
    ("exchange", ("exchange", "destination"), as_text),
    ("routing_key", ("routing-key",), as_text),
    ("consumer_tag", ("consumer-tag",), as_text),
    ("delivery_tag", ("delivery-tag",), as_tag),
    ("redelivered", ("redelivered",), as_bool),
    ("reply_code", ("reply-code",), as_int),
)
_MESSAGE_ARGS_BY_SUBSCRIPTION = {False: MESSAGE_ARGS, True: with_destination(MESSAGE_ARGS, "consumer_tag")}

# The messages columns filled from a content's properties, as METHOD_ARGS (contiguous, in
# schema order: checked below).
MESSAGE_PROPERTIES = (
    ("content_type", ("content-type",), as_text),
    ("content_encoding", ("content-encoding",), as_text),
    ("headers", ("headers", "application-headers"), as_table_json),
    ("delivery_mode", ("delivery-mode",), as_short),
    ("priority", ("priority",), as_short),
    ("correlation_id", ("correlation-id",), as_text),
    ("reply_to", ("reply-to",), as_text),
    ("expiration", ("expiration",), as_text),
    ("message_id", ("message-id",), as_text),
    ("msg_timestamp", ("timestamp",), as_timestamp_ns),
    ("type", ("type",), as_text),
    ("user_id", ("user-id",), as_text),
    ("app_id", ("app-id",), as_text),
    ("cluster_id", ("cluster-id",), as_text),
)
MSG = {name: i for i, name in enumerate(COLUMNS["messages"])}
MSG_FIRST_PROPERTY = MSG[MESSAGE_PROPERTIES[0][0]]
assert [c for c, _, _ in MESSAGE_PROPERTIES] == COLUMNS["messages"][
    MSG_FIRST_PROPERTY : MSG_FIRST_PROPERTY + len(MESSAGE_PROPERTIES)
], "records/schema.py MESSAGES reordered"
MSG_EXCHANGE, MSG_ROUTING_KEY, MSG_REDELIVERED = MSG["exchange"], MSG["routing_key"], MSG["redelivered"]
MSG_FIRST_ARG = MSG[MESSAGE_ARGS[0][0]]
assert [c for c, _, _ in MESSAGE_ARGS] == COLUMNS["messages"][MSG_FIRST_ARG:MSG_FIRST_PROPERTY], (
    "records/schema.py MESSAGES reordered"
)
MSG_PROPERTIES = MSG["properties"]  # the properties' JSON
_MESSAGE_PLACEMENT = Placement(MESSAGE_SOURCES, COLUMNS["messages"])
property_plans: dict = {}  # property names (in order) -> fill plan; a handful per capture
message_arg_plans: dict = {}  # (method name, argument names, direction, version) -> fill plan


def message_arg_plan(name: str, keys: tuple, direction, version) -> tuple:
    """The fill plan of the MESSAGE_ARGS columns from the arguments ``keys`` of method ``name``."""
    columns = _MESSAGE_ARGS_BY_SUBSCRIPTION[_spec.names_subscription(name, direction, version)]
    return fill_plan(columns, MSG, set(keys))


def message_row_reference(capture, stream, direction, c: Content, version):
    """The messages row of ``c`` (fastrows.pyx builds the same in C)."""
    p = c.properties
    if not isinstance(p, dict):  # the compiled decoder's mapping over the frame (fast09.WireFields)
        p = dict(p)
    a = c.method.args
    if not isinstance(a, dict):
        a = dict(a)
    keys = tuple(p)
    fill = property_plans.get(keys)
    if fill is None:
        fill = property_plans[keys] = fill_plan(MESSAGE_PROPERTIES, MSG, set(keys))
    name = c.method.name
    akey = (name, tuple(a), direction, version)
    afill = message_arg_plans.get(akey)
    if afill is None:
        afill = message_arg_plans[akey] = message_arg_plan(*akey)
    row = _MESSAGE_PLACEMENT.placed(c, capture, stream, direction, version)
    row[MSG_PROPERTIES] = to_json(p)
    for i, k, conv in afill:
        row[i] = conv(a[k])
    if c.exchange is not None:
        row[MSG_EXCHANGE] = as_text(c.exchange)
    if c.routing_key is not None:
        row[MSG_ROUTING_KEY] = as_text(c.routing_key)
    if "redelivered" not in a:
        row[MSG_REDELIVERED] = as_bool(p.get("redelivered"))
    for i, k, conv in fill:
        row[i] = conv(p[k])
    return tuple(row)


def anomaly_row(capture, stream, direction, e: Anomaly, layer="amqp"):
    return (
        capture,
        stream,
        e.packet,
        e.ts,
        DIRS[direction] if direction is not None else None,
        e.channel,
        e.offset,
        layer,
        e.kind,
        e.detail,
        e.skipped,
    )


def frame_row(capture, stream, direction, f: Frame):
    return (
        capture,
        stream,
        f.packet,
        f.ts,
        DIRS[direction],
        f.channel,
        f.offset,
        f.frame_type,
        f.type_name,
        f.size,
        f.wire_size,
    )


_CONNECTION_COLUMNS = tuple(COLUMNS["connections"])


def _prop(props: dict, key: str):
    v = props.get(key)
    return as_text(v) if v is not None else None


def connection_facts(f: ConnectionFacts) -> dict:
    """The connections columns that a connection's facts fill, by name."""
    sp = f.server_properties if isinstance(f.server_properties, dict) else {}
    cp = f.client_properties if isinstance(f.client_properties, dict) else {}
    return {
        "client_header": f.client_header[4:].hex() if f.client_header else None,
        "server_header": f.server_header[4:].hex() if f.server_header else None,
        "client_version": f.client_version,
        "version": f.version,
        "version_evidence": f.version_evidence,
        "negotiation": f.negotiation,
        "tls": f.tls,
        "mid_stream": f.mid_stream,
        "server_product": _prop(sp, "product"),
        "server_product_version": _prop(sp, "version"),
        "server_platform": _prop(sp, "platform"),
        "server_properties": connection_json(sp) if sp else None,
        "client_product": _prop(cp, "product"),
        "client_product_version": _prop(cp, "version"),
        "client_platform": _prop(cp, "platform"),
        "connection_name": _prop(cp, "connection_name"),
        "client_properties": connection_json(cp) if cp else None,
        "mechanism": as_text(f.mechanism),
        "user": as_text(f.user),
        "vhost": as_text(f.vhost),
        "channel_max": f.channel_max,
        "frame_max": f.frame_max,
        "heartbeat": f.heartbeat,
        "open_ts": f.open_ts,
        "close_ts": f.close_ts,
        "closed_by": f.closed_by,
        "close_frame": f.close_frame,
        "close_reply_code": f.close_reply_code,
        "close_reply_text": as_text(f.close_reply_text),
        "client_container_id": f.client_container_id,
        "server_container_id": f.server_container_id,
        "idle_timeout_ms": f.idle_timeout_ms,
        "client_idle_timeout_ms": f.client_idle_timeout_ms,
        "server_idle_timeout_ms": f.server_idle_timeout_ms,
    }


def connection_row(values: dict) -> tuple:
    """A connections row from ``{column: value}``.  Every column of the schema must be named
    and no other: a column added to records/schema.py cannot silently shift another."""
    if len(values) != len(_CONNECTION_COLUMNS) or not values.keys() >= set(_CONNECTION_COLUMNS):
        missing = sorted(set(_CONNECTION_COLUMNS) - values.keys())
        extra = sorted(values.keys() - set(_CONNECTION_COLUMNS))
        raise ValueError(f"connections row: missing columns {missing}, unknown columns {extra}")
    return tuple(values[c] for c in _CONNECTION_COLUMNS)


def append_rows_reference(events, capture, stream, version, methods, messages) -> list:
    """The methods and messages rows of ``events`` ((direction, event) pairs), appended to the
    ``methods`` and ``messages`` tables in event order; the other events are returned, in
    order (they are the pipeline's: anomalies, heartbeats, frames)."""
    rest = []
    for d, e in events:
        t = type(e)
        if t is Method:
            methods.append(method_row_reference(capture, stream, d, e, version))
        elif t is Content:
            messages.append(message_row_reference(capture, stream, d, e, version))
        else:
            rest.append((d, e))
    return rest


def row_sink(capture, stream, methods, messages):
    """Where the compiled decoder writes the methods and messages rows of what it decodes on its
    common path, making no events for them (``fastrows.RowSink``; ``ConnectionDecoder``'s
    ``row_sink``): None unless the compiled row builder is in use and both tables are compiled
    table buffers.  The rows are append_rows' from those events, in the same order."""
    if not compiled_in_use():
        return None
    from amqpcap.records import fastrows

    try:
        return fastrows.RowSink(capture, stream, methods, messages)
    except ValueError:  # a table that is not a compiled table buffer
        return None


# The row builders, chosen once at import: the reference functions here, or the compiled ones
# (fastrows; liveness.Liveness is chosen with them, from the same extension).  The JSON columns
# the row builders do not write (a connections row's peers' properties and zero-window periods,
# AMQP 1.0's rows) go through connection_json: to_json, or fastrows.json_text (the same text).
_fast = compiled.select("fastrows")
if _fast is not None:
    append_rows, connection_json = _fast.append_rows, _fast.json_text
else:
    append_rows, connection_json = append_rows_reference, to_json


def compiled_in_use() -> bool:
    """True if method and message rows are built by the compiled builders."""
    return _fast is not None
