"""AMQP 1.0 events -> methods and messages rows (the columns of records/schema.py, by name).

A ``Performative`` is a methods row named by the performative, its typed columns filled from
its fields and the link state; a ``Delivery`` is a messages row: the properties section gives
the columns 0-9-1 names the same way, the other sections go to the ``properties`` JSON, the
application-properties to ``headers``.  The pipeline hands these events here (rows.append_rows
leaves them, as it leaves frames and anomalies).
"""

from __future__ import annotations

from amqpcap import compiled
from amqpcap.amqp import links_1_0
from amqpcap.amqp.events_1_0 import Delivery, Performative, creation_time
from amqpcap.amqp.stream import TS_MS_MAX
from amqpcap.records import rows
from amqpcap.records.rows import as_text
from amqpcap.records.schema import COLUMNS, DIRS

_METHOD_INDEX = {c: i for i, c in enumerate(COLUMNS["methods"])}
_MESSAGE_INDEX = {c: i for i, c in enumerate(COLUMNS["messages"])}
_I64_MAX = (1 << 63) - 1


def unsigned_or_null(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _I64_MAX else None


def bool_or_null(v):
    return v if isinstance(v, bool) else None


def _error(err):
    """(condition, description) of an error field."""
    if not isinstance(err, dict):
        return None, None
    return as_text(err.get("condition")), as_text(err.get("description"))


def disposition_range(a: dict):
    """A disposition's first..last as an id_ranges value."""
    first = unsigned_or_null(a.get("first"))
    last = unsigned_or_null(a.get("last", first))
    return [{"lower": first, "upper": last}] if first is not None and last is not None else None


# A methods row: its head and link columns from the performative (rows.py's source tables; the
# link columns from the link state), then its typed columns from its fields by ``METHOD_FIELDS``:
# performative -> (column or (column, column), field, converter[, default]); the converter gets
# the field's value (or, with field None, every field), the default (None, (None, None) for two
# columns) stands for an absent field (the decoder leaves null fields out).  method_row and the
# compiled rows (fast10) read these.
METHOD_SOURCES = rows.KEY_SOURCES + (
    ("method", "name"),
    ("class_id", "frame_type"),
    ("method_id", "code"),
    ("version", "=version"),
    ("synchronous", "synchronous"),
    ("has_content", "has_content"),
    ("frame_size", "frame_size"),
    ("link_name", "link_name"),
    ("source", "source"),
    ("target", "target"),
)
_EVERY = (("arguments", None, rows.connection_json), ("handle", "handle", unsigned_or_null))
_OUTCOME = (("outcome", "condition"), "state", links_1_0.outcome_of)
_ERROR = _EVERY + ((("condition", "reply_text"), "error", _error),)
METHOD_FIELDS = {
    "transfer": _EVERY
    + (
        ("delivery_id", "delivery-id", unsigned_or_null),
        ("settled", "settled", bool_or_null),
        ("more", "more", bool_or_null, False),
        _OUTCOME,
    ),
    "disposition": _EVERY
    + (
        ("role", "role", links_1_0.role_name),
        ("delivery_id", "first", unsigned_or_null),
        ("settled", "settled", bool_or_null, False),
        ("id_ranges", None, disposition_range),
        _OUTCOME,
    ),
    "attach": _EVERY
    + (("role", "role", links_1_0.role_name), ("delivery_count", "initial-delivery-count", unsigned_or_null)),
    "flow": _EVERY
    + (
        ("link_credit", "link-credit", unsigned_or_null),
        ("delivery_count", "delivery-count", unsigned_or_null),
        ("drain", "drain", bool_or_null, False),
        ("available", "available", unsigned_or_null),
    ),
    "detach": _ERROR,
    "end": _ERROR,
    "close": _ERROR,
    "sasl.outcome": _EVERY + (("code", "code", rows.as_int),),
}


def _plan(fields: tuple) -> tuple:
    """(column index or pair of them, field, converter, default) of each typed column."""
    out = []
    for col, field, conv, *default in fields:
        at = _METHOD_INDEX[col] if isinstance(col, str) else tuple(_METHOD_INDEX[c] for c in col)
        out.append((at, field, conv, default[0] if default else (None if type(at) is int else (None, None))))
    return tuple(out)


METHOD_PLANS = {name: _plan(fields) for name, fields in METHOD_FIELDS.items()}
EVERY_PLAN = _plan(_EVERY)  # any other performative's
_METHOD_PLACEMENT = rows.Placement(METHOD_SOURCES, COLUMNS["methods"])


def method_row(capture, stream, direction, p: Performative, version) -> tuple:
    """The methods row of a performative or SASL frame."""
    row = _METHOD_PLACEMENT.placed(p, capture, stream, direction, version)
    a = p.args
    for at, field, conv, default in METHOD_PLANS.get(p.name, EVERY_PLAN):
        if field is None:
            v = conv(a)
        else:
            v = a.get(field)
            v = default if v is None else conv(v)
        if type(at) is int:
            row[at] = v
        else:
            row[at[0]], row[at[1]] = v
    return tuple(row)


def _ms_ts(v):
    """A timestamp (ms since the epoch, an integer: events_1_0.creation_time) as ns, null
    outside the column's range (the decoder reports such a value as a value-out-of-range anomaly)."""
    return v * 1_000_000 if v is not None and -TS_MS_MAX < v < TS_MS_MAX else None


def _unquote(name: str) -> str:
    """``urllib.parse.unquote(name)``, urllib.parse imported only for a name with a percent escape
    (with the ipaddress module it brings, ~2 ms of the start of a run)."""
    if "%" not in name:  # (unquote's own shortcut)
        return name
    from urllib.parse import unquote

    return unquote(name)


# exchange_key's pairs of the text addresses it was asked for, the first MAX_ADDRESSES of them (a
# capture's messages name few): the one cache of them, which the compiled rows (rows10.pxi) look
# up in C before calling exchange_key
EXCHANGE_KEYS: dict = {}
MAX_ADDRESSES = 4096


def exchange_key(address):
    """``address_pair`` of ``address``, kept in ``EXCHANGE_KEYS`` if it is text."""
    if type(address) is not str:
        return address_pair(address)
    pair = EXCHANGE_KEYS.get(address)
    if pair is None:
        pair = address_pair(address)
        if len(EXCHANGE_KEYS) < MAX_ADDRESSES:
            EXCHANGE_KEYS[address] = pair
    return pair


def address_pair(address):
    """(exchange, routing key) an address names on RabbitMQ: ``/exchanges/X[/K]`` (and the older
    ``/exchange/X[/K]``), ``/queues/Q`` (and ``/queue/Q``, ``/amq/queue/Q``: the default exchange,
    the queue's name as key), ``/topic/K`` (amq.topic); (None, None) for any other address.
    RabbitMQ 4's forms (``/exchanges/``, ``/queues/``) percent-encode each name: decoded here."""
    if not isinstance(address, str) or not address.startswith("/"):
        return None, None
    parts = address[1:].split("/")
    if parts[0] == "exchanges" and len(parts) in (2, 3):
        return _unquote(parts[1]), _unquote(parts[2]) if len(parts) == 3 else None
    if parts[0] == "queues" and len(parts) == 2:
        return "", _unquote(parts[1])
    if parts[0] == "exchange" and len(parts) >= 2:
        return parts[1], "/".join(parts[2:]) if len(parts) > 2 else None
    if parts[0] == "queue" and len(parts) == 2:
        return "", parts[1]
    if parts[0] == "topic" and len(parts) == 2:
        return "amq.topic", parts[1]
    if parts[:2] == ["amq", "queue"] and len(parts) == 3:
        return "", parts[2]
    return None, None


# The messages row of a delivery is made in two steps: ``message_values``, the row of the
# delivery itself, as soon as its last transfer is read (the compiled walker holds it until the
# delivery is settled), and ``settled_row``, which fills in where it was seen and how it was
# settled.  The 0-9-1 columns a 1.0 message has nothing for are null.
_MSG_ORDER = (  # message_values' row, in records/schema.py's order (checked below)
    *("capture", "tcp_stream", "frame_number", "ts", "direction", "channel", "stream_offset"),
    *("method", "version", "exchange", "routing_key", "consumer_tag"),
    *("delivery_tag", "redelivered", "reply_code", "content_type"),
    *("content_encoding", "headers", "delivery_mode", "priority", "correlation_id", "reply_to"),
    *("expiration", "message_id", "msg_timestamp", "type", "user_id", "app_id", "cluster_id"),
    *("properties", "body_size", "body_received", "body_frames", "body_hash", "body", "complete"),
    *("first_frame_number", "last_frame_number", "link_name", "delivery_id", "settled"),
    *("settle_ts", "outcome", "condition", "aborted"),
)
assert _MSG_ORDER == tuple(COLUMNS["messages"]), "message_values' row is not in the schema's order"
# (the columns settled_row fills, in its arguments' order: the compiled walker's rows read it)
SETTLED_COLUMNS = ("capture", "tcp_stream", "version", "settled", "settle_ts", "outcome", "condition")
_SETTLED_AT = tuple(_MESSAGE_INDEX[c] for c in SETTLED_COLUMNS)


def delivery_mode_of(header):
    """0-9-1's delivery mode of a header section: 2 if it says durable, else 1."""
    return (2 if header.get("durable") is True else 1) if isinstance(header, dict) else None


def _ttl_text(ttl):
    """A header's ttl (ms) as 0-9-1's expiration text."""
    return str(ttl) if isinstance(ttl, int) and not isinstance(ttl, bool) else None


# The messages columns filled from a delivery's sections: (column, section, field, converter);
# the field None: the whole section.  A section that is absent (or, with a field, not a map of
# fields) or a field that is absent leaves the column null; any other value is converted.
# message_values and the compiled walker's rows (fast10) read this.
MESSAGE_FIELDS = (
    ("content_type", "properties", "content-type", as_text),
    ("content_encoding", "properties", "content-encoding", as_text),
    ("headers", "application-properties", None, rows.connection_json),
    ("delivery_mode", "header", None, delivery_mode_of),
    ("priority", "header", "priority", rows.as_int),
    ("correlation_id", "properties", "correlation-id", as_text),
    ("reply_to", "properties", "reply-to", as_text),
    ("expiration", "header", "ttl", _ttl_text),
    ("message_id", "properties", "message-id", as_text),
    ("user_id", "properties", "user-id", as_text),
)
MESSAGE_PLAN = tuple((_MESSAGE_INDEX[col], sec, field, conv) for col, sec, field, conv in MESSAGE_FIELDS)
_MESSAGE_WIDTH = len(_MSG_ORDER)
(
    _C_FRAME,
    _C_TS,
    _C_DIRECTION,
    _C_CHANNEL,
    _C_OFFSET,
    _C_METHOD,
    _C_EXCHANGE,
    _C_KEY,
    _C_MSG_TS,
    _C_PROPERTIES,
    _C_BODY_SIZE,
    _C_BODY_RECEIVED,
    _C_BODY_FRAMES,
    _C_BODY_HASH,
    _C_BODY,
    _C_COMPLETE,
    _C_FIRST,
    _C_LAST,
    _C_LINK,
    _C_DELIVERY_ID,
    _C_ABORTED,
) = (
    _MESSAGE_INDEX[c]
    for c in (
        *("frame_number", "ts", "direction", "channel", "stream_offset", "method", "exchange"),
        *("routing_key", "msg_timestamp", "properties", "body_size", "body_received"),
        *("body_frames", "body_hash", "body", "complete", "first_frame_number"),
        *("last_frame_number", "link_name", "delivery_id", "aborted"),
    )
)


def other_sections(sections: dict, body_kind):
    """The properties JSON's object: every section but the application-properties (the
    headers column's), and the body's kind."""
    others = dict(sections)
    others.pop("application-properties", None)
    if body_kind is not None:
        others["body-section"] = body_kind
    return others


def message_values(
    direction,
    packet,
    ts,
    channel,
    offset,
    first_packet,
    frames,
    link_name,
    address,
    delivery_id,
    sections: dict,
    body_kind,
    body_size,
    body_hash,
    body,
    complete,
    aborted,
    created,
) -> list:
    """The messages row of a delivery (``_MSG_ORDER``) but for where it was seen and how it was
    settled (null: ``settled_row`` fills them): ``MESSAGE_FIELDS`` from its sections, the
    properties section's ``to`` (else the link's ``address``) the exchange and routing key,
    every section but the application-properties (and the body's kind) the properties JSON.
    ``created`` is the creation time (events_1_0.creation_time); ``packet`` is that of the last
    transfer.  (The compiled walker's rows, fast10's ``values_row``, are this in C.)"""
    row = [None] * _MESSAGE_WIDTH
    for at, sec, field, conv in MESSAGE_PLAN:
        v = sections.get(sec)
        if field is not None:
            v = v.get(field) if isinstance(v, dict) else None
        if v is not None:
            row[at] = conv(v)
    props = sections.get("properties")
    to = as_text(props.get("to")) if isinstance(props, dict) else None
    row[_C_EXCHANGE], row[_C_KEY] = exchange_key(to if to is not None else address)
    row[_C_FRAME] = row[_C_LAST] = packet
    row[_C_TS] = ts
    row[_C_DIRECTION] = DIRS[direction]
    row[_C_CHANNEL] = channel
    row[_C_OFFSET] = offset
    row[_C_METHOD] = "transfer"
    row[_C_MSG_TS] = _ms_ts(created)
    row[_C_PROPERTIES] = rows.connection_json(other_sections(sections, body_kind))
    row[_C_BODY_SIZE] = row[_C_BODY_RECEIVED] = body_size
    row[_C_BODY_FRAMES] = frames
    row[_C_BODY_HASH] = body_hash
    row[_C_BODY] = body
    row[_C_COMPLETE] = complete
    row[_C_FIRST] = first_packet
    row[_C_LINK] = link_name
    row[_C_DELIVERY_ID] = unsigned_or_null(delivery_id)
    row[_C_ABORTED] = aborted
    return row


def settled_row(row: list, capture, stream, version, settled, settle_ts, outcome, condition) -> tuple:
    """The messages row of a delivery's ``message_values`` (filled in place), seen in
    ``capture``'s ``stream``, settled (or not) as given."""
    for at, v in zip(_SETTLED_AT, (capture, stream, version, settled, settle_ts, outcome, condition)):
        row[at] = v
    return tuple(row)


def message_row(capture, stream, direction, dv: Delivery, version) -> tuple:
    """The messages row of a delivery."""
    sec = dv.sections
    row = message_values(
        direction,
        dv.packet,
        dv.ts,
        dv.channel,
        dv.offset,
        dv.first_packet,
        dv.frames,
        dv.link_name,
        dv.address,
        dv.delivery_id,
        sec,
        dv.body_kind,
        dv.body_size,
        dv.body_hash,
        dv.body,
        dv.complete,
        dv.aborted,
        creation_time(sec),
    )
    return settled_row(row, capture, stream, version, dv.settled, dv.settle_ts, dv.outcome, dv.condition)


def append_rows_reference(events, capture, stream, version, methods, messages) -> list:
    """The rows of the 1.0 events among ``events`` ((direction, event) pairs) appended in
    order; the other events returned, in order (``append_rows`` is this, or its compiled twin
    amqp/fast10.pyx's, which writes into the compiled table buffers without a row tuple)."""
    rest = []
    for d, e in events:
        t = type(e)
        if t is Performative:
            methods.append(method_row(capture, stream, d, e, version))
        elif t is Delivery:
            messages.append(message_row(capture, stream, d, e, version))
        else:
            rest.append((d, e))
    return rest


# chosen once, at import (CaptureOutput.rows_1_0 imports this module at the first 1.0 rows)
_fast = compiled.select("fast10")
append_rows = append_rows_reference if _fast is None else _fast.append_rows
