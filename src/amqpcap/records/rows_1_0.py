"""AMQP 1.0 events -> methods and messages rows (the columns of records/schema.py, by name).

A ``Performative`` is a methods row named by the performative, its typed columns filled from
its fields and the link state; a ``Delivery`` is a messages row: the properties section gives
the columns 0-9-1 names the same way, the other sections go to the ``properties`` JSON, the
application-properties to ``headers``.  The pipeline hands these events here (rows.append_rows
leaves them, as it leaves frames and anomalies).
"""

from __future__ import annotations

from amqpcap.amqp import links_1_0
from amqpcap.amqp.events_1_0 import Delivery, Performative
from amqpcap.records.rows import to_json
from amqpcap.records.schema import COLUMNS, DIRS

_METHOD_INDEX = {c: i for i, c in enumerate(COLUMNS["methods"])}
_MESSAGE_INDEX = {c: i for i, c in enumerate(COLUMNS["messages"])}
_I64_MAX = (1 << 63) - 1


def _row(index: dict, values: dict) -> tuple:
    row = [None] * len(index)
    for k, v in values.items():
        row[index[k]] = v
    return tuple(row)


def _s(v):
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def _i(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _I64_MAX else None


def _b(v):
    return v if isinstance(v, bool) else None


def _error(a: dict):
    err = a.get("error")
    if not isinstance(err, dict):
        return None, None
    return _s(err.get("condition")), _s(err.get("description"))


_ROLE = {False: "sender", True: "receiver"}


def method_row(capture, stream, direction, p: Performative, version) -> tuple:
    """The methods row of a performative or SASL frame."""
    a = p.args
    v = {
        "capture": capture,
        "tcp_stream": stream,
        "frame_number": p.packet,
        "ts": p.ts,
        "direction": DIRS[direction],
        "channel": p.channel,
        "stream_offset": p.offset,
        "method": p.name,
        "class_id": p.frame_type,
        "method_id": p.code,
        "version": version,
        "synchronous": False,
        "has_content": p.name == "transfer",
        "frame_size": p.frame_size,
        "arguments": to_json(a),
        "handle": _i(a.get("handle")),
        "link_name": p.link_name,
        "source": p.source,
        "target": p.target,
    }
    name = p.name
    if name in ("attach", "disposition"):
        v["role"] = _ROLE.get(a.get("role"))
    if name == "attach":
        v["delivery_count"] = _i(a.get("initial-delivery-count"))
    elif name == "transfer":
        v["delivery_id"] = _i(a.get("delivery-id"))
        v["settled"] = _b(a.get("settled"))
        v["more"] = _b(a.get("more", False))
        v["outcome"], v["condition"] = links_1_0.outcome_of(a.get("state"))
    elif name == "disposition":
        first = _i(a.get("first"))
        last = _i(a.get("last", first))
        v["delivery_id"] = first
        v["settled"] = _b(a.get("settled", False))
        if first is not None and last is not None:
            v["id_ranges"] = [{"lower": first, "upper": last}]
        v["outcome"], v["condition"] = links_1_0.outcome_of(a.get("state"))
    elif name == "flow":
        v["link_credit"] = _i(a.get("link-credit"))
        v["delivery_count"] = _i(a.get("delivery-count"))
    elif name in ("detach", "end", "close"):
        v["condition"], v["reply_text"] = _error(a)
    elif name == "sasl.outcome":
        code = a.get("code")
        v["code"] = code if isinstance(code, int) and not isinstance(code, bool) else None
    return _row(_METHOD_INDEX, v)


def _ms_ts(v):
    """A timestamp (ms since the epoch) as ns, null outside the column's range."""
    return v * 1_000_000 if isinstance(v, int) and -9_000_000_000_000 < v < 9_000_000_000_000 else None


def exchange_key(address):
    """(exchange, routing key) an address names on RabbitMQ: ``/exchanges/X[/K]`` (and the older
    ``/exchange/X[/K]``), ``/queues/Q`` (and ``/queue/Q``, ``/amq/queue/Q``: the default exchange,
    the queue's name as key); (None, None) for any other address."""
    if not isinstance(address, str) or not address.startswith("/"):
        return None, None
    parts = address[1:].split("/")
    if parts[0] in ("exchanges", "exchange") and len(parts) >= 2:
        return parts[1], "/".join(parts[2:]) if len(parts) > 2 else None
    if parts[0] in ("queues", "queue") and len(parts) == 2:
        return "", parts[1]
    if parts[:2] == ["amq", "queue"] and len(parts) == 3:
        return "", parts[2]
    return None, None


def message_row(capture, stream, direction, dv: Delivery, version) -> tuple:
    """The messages row of a delivery."""
    sec = dv.sections
    props = sec.get("properties") if isinstance(sec.get("properties"), dict) else {}
    hdr = sec.get("header") if isinstance(sec.get("header"), dict) else None
    to = _s(props.get("to"))
    exchange, key = exchange_key(to if to is not None else dv.address)
    others = {k: val for k, val in sec.items() if k != "application-properties"}
    if dv.body_kind is not None:
        others["body-section"] = dv.body_kind
    app = sec.get("application-properties")
    v = {
        "capture": capture,
        "tcp_stream": stream,
        "frame_number": dv.packet,
        "ts": dv.ts,
        "direction": DIRS[direction],
        "channel": dv.channel,
        "stream_offset": dv.offset,
        "method": "transfer",
        "version": version,
        "exchange": exchange,
        "routing_key": key,
        "content_type": _s(props.get("content-type")),
        "content_encoding": _s(props.get("content-encoding")),
        "headers": to_json(app) if app is not None else None,
        "correlation_id": _s(props.get("correlation-id")),
        "reply_to": _s(props.get("reply-to")),
        "message_id": _s(props.get("message-id")),
        "msg_timestamp": _ms_ts(props.get("creation-time")),
        "user_id": _s(props.get("user-id")),
        "properties": to_json(others),
        "body_size": dv.body_size,
        "body_received": dv.body_size,
        "body_frames": dv.frames,
        "body_hash": dv.body_hash,
        "body": dv.body,
        "complete": dv.complete,
        "first_frame_number": dv.first_packet,
        "last_frame_number": dv.packet,
        "link_name": dv.link_name,
        "delivery_id": _i(dv.delivery_id),
        "settled": dv.settled,
        "settle_ts": dv.settle_ts,
        "outcome": dv.outcome,
        "condition": dv.condition,
        "aborted": dv.aborted,
    }
    if hdr is not None:
        v["delivery_mode"] = 2 if hdr.get("durable") is True else 1
        pr = hdr.get("priority")
        v["priority"] = pr if isinstance(pr, int) and not isinstance(pr, bool) else None
        ttl = hdr.get("ttl")
        v["expiration"] = str(ttl) if isinstance(ttl, int) and not isinstance(ttl, bool) else None
    return _row(_MESSAGE_INDEX, v)


EVENT_TYPES = (Performative, Delivery)


def append(events, capture, stream, version, methods, messages) -> None:
    """Rows of the 1.0 events among ``events`` ((direction, event) pairs) appended in order."""
    for d, e in events:
        t = type(e)
        if t is Performative:
            methods.append(method_row(capture, stream, d, e, version))
        elif t is Delivery:
            messages.append(message_row(capture, stream, d, e, version))
