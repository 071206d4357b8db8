"""``amqpcap show``: rows rendered as the dissector produces them (text, JSON Lines or CSV).

``ShowSink`` stands in for the ``DatasetWriter`` of ``Dissector``: the tables
it is handed print their rows instead of storing them.  Rows are read by
column name (``records.schema.COLUMNS``), never by position.
"""

from __future__ import annotations

import base64
import collections
import csv
import datetime as _dt
import json
import struct
import sys

from amqpcap.capture.link import format_addr
from amqpcap.filters import matches
from amqpcap.records.outofrange import OutOfRange
from amqpcap.records.schema import COLUMNS

#: Arguments shown on a text line, in this order (JSON and CSV carry every argument).
KEY_ARGS = (
    "exchange",
    "type",
    "source",
    "destination",
    "routing-key",
    "queue",
    "consumer-tag",
    "delivery-tag",
    "multiple",
    "requeue",
    "reply-code",
    "reply-text",
    "reason",
    "prefetch-count",
    "message-count",
    "virtual-host",
    "mechanism",
    "user",
    "password",
    "frame-max",
    "heartbeat",
    "channel-max",
    "error-code",
    "description",
    "command-id",
)
_KEY_ORDER = {k: i for i, k in enumerate(KEY_ARGS)}  # a key argument's place in a text line
#: A content-carrying method's message (JSON: ``body_size`` and a ``properties`` object).
MESSAGE_FIELDS = (
    "body_size",
    "content_type",
    "delivery_mode",
    "correlation_id",
    "reply_to",
    "message_id",
    "properties",
)
CSV_FIELDS = (
    "time",
    "frame",
    "stream",
    "direction",
    "channel",
    "method",
    "client",
    "server",
    "arguments",
    *MESSAGE_FIELDS,
)
MAX_HELD = 10_000  # lines held at most while a content is incomplete (JSON / CSV)
_VERSIONS = {
    "01010800": "0-8",
    "01010009": "0-9",
    "00000901": "0-9-1",
    "0101000a": "0-10",
    "00010000": "1.0",
    "03010000": "1.0 SASL",
    "02010000": "1.0 TLS",
}


class _Table:
    """One table of the sink: ``append(row)`` renders the row."""

    __slots__ = ("render", "rows")

    def __init__(self, render) -> None:
        self.render = render
        self.rows = 0

    def append(self, row) -> None:
        self.rows += 1
        if self.render is not None:
            self.render(row)


class _FirstPacket:
    """A packet source that tells a ShowSink its first packet's timestamp."""

    def __init__(self, sink, source) -> None:
        self.sink, self.source = sink, source

    @property
    def anomalies(self):
        return getattr(self.source, "anomalies", ())

    def __iter__(self):
        it = iter(self.source)
        out_of_range = OutOfRange(self.source)  # such a packet's time is not its own: no t0
        for pkt in it:
            if pkt[0] not in out_of_range:
                self.sink.t0 = pkt[1]
                yield pkt
                break
            yield pkt
        yield from it


class ShowSink:
    """Prints method, anomaly and (with ``frames``) heartbeat rows; see the module docstring.

    ``opts``: the parsed ``show`` arguments (stream, channel, method, exchange, queue,
    routing_key filters; absolute, frames, keep_secrets, fmt "text"/"json"/"csv").
    Call ``first_packet(source)`` around the packet source so relative times count
    from the capture's first packet (Wireshark's ``frame.time_relative``), and ``flush()``
    at the end.

    In JSON and CSV a content-carrying method's line also carries its message (properties,
    body size), known when the content is complete: its line, and the lines after it, wait
    for that (in order, so the output stays in frame order).
    """

    def __init__(self, opts, out=None, header: bool = False) -> None:
        self.o = opts
        self.out = out or sys.stdout
        self.t0 = None
        self.streams: dict[int, tuple[str, str]] = {}  # tcp stream -> (client, server) "ip:port"
        self.headed: set = set()
        self.methods = [m.lower() for m in opts.method or ()]  # (filters.method_pattern checked them)
        self.csv = csv.writer(self.out, lineterminator="\n") if opts.fmt == "csv" else None
        if self.csv is not None:
            self.csv.writerow(CSV_FIELDS)
        elif header and opts.fmt == "text":
            self.out.write(f"{'time':>12} {'frame':>7} {'strm':>4} dir ch   {'method':<26} arguments\n")
        self.tables = {
            "connections": _Table(self._connection),
            "methods": _Table(self._method),
            "messages": _Table(self._message if opts.fmt != "text" else None),
            "anomalies": _Table(self._anomaly),
        }
        if opts.frames:
            self.tables["frames"] = _Table(self._frame)
        names = ("connections", "methods", "messages", "anomalies", "frames")
        self._cols = {name: COLUMNS[name] for name in names}
        # lines waiting for a content (JSON / CSV): [fields, done], in output order, and the
        # waiting ones by (tcp_stream, direction, stream_offset) of their method
        self._held: collections.deque = collections.deque()
        self._waiting: dict = {}
        self.out_of_range = None  # the capture's packets whose time is out of range: lines without time

    def __getitem__(self, name):
        return self.tables[name]

    def note_out_of_range(self, capture: str, found) -> None:
        """The Dissector's: lines of ``capture`` (dissected one at a time, printed as they come)
        whose packet is in ``found`` (an outofrange.OutOfRange) have no time."""
        self.out_of_range = found

    @property
    def amqp_conversations(self) -> int:
        return self.tables["connections"].rows

    # -- inputs ------------------------------------------------------------------------

    def first_packet(self, source):
        """``source``'s packets, noting the first one's timestamp (its ``anomalies`` passed on:
        the Dissector reports the capture's own after the packets)."""
        return _FirstPacket(self, source)

    def conversation(self, conv) -> None:
        """``Dissector.on_conversation``: remember the stream's addresses."""
        (ca, cp), (sa, sp) = conv.client, conv.server
        v = conv.ip_version
        fmt = "[{}]:{}" if v == 6 else "{}:{}"
        self.streams[conv.stream] = (fmt.format(format_addr(v, ca), cp), fmt.format(format_addr(v, sa), sp))

    # -- filters -----------------------------------------------------------------------

    def _keep(self, stream, channel, method, r=None) -> bool:
        o = self.o
        if o.stream and stream not in o.stream:
            return False
        if o.channel and channel not in o.channel:
            return False
        if self.methods:
            if method is None:
                return False
            if not matches(method.lower(), self.methods):
                return False
        for col, wanted in (("exchange", o.exchange), ("queue", o.queue), ("routing_key", o.routing_key)):
            if wanted and (r is None or r.get(col) not in wanted):
                return False
        return True

    # -- rows --------------------------------------------------------------------------

    def _method(self, row) -> None:
        r = dict(zip(self._cols["methods"], row))
        if not self._keep(r["tcp_stream"], r["channel"], r["method"], r):
            return
        args = json.loads(r["arguments"] or "{}")
        if "response" in args and r["version"] != "1.0":  # (1.0's sasl.response: redacted by the codec)
            args.update(_credentials(args.pop("response"), self.o.keep_secrets))
        text = line_1_0(r, args) if r["version"] == "1.0" else None
        # (0-9's message.transfer carries its message in its arguments; a 1.0 delivery's message
        # row comes when it is settled, perhaps much later: its transfers' lines do not wait)
        carries = r["version"] != "1.0" and (
            r["has_content"] or (r["method"] == "message.transfer" and "body" in args)
        )
        wait = (r["tcp_stream"], r["direction"], r["stream_offset"]) if carries else None
        self._line(
            r["ts"],
            r["frame_number"],
            r["tcp_stream"],
            r["direction"],
            r["channel"],
            r["method"],
            args,
            text,
            wait=wait,
        )

    def _message(self, row) -> None:
        """A content is complete: its method's line gets the message and goes out (JSON / CSV)."""
        r = dict(zip(self._cols["messages"], row))
        entry = self._waiting.pop((r["tcp_stream"], r["direction"], r["stream_offset"]), None)
        if entry is None:
            return  # its method was filtered out
        props = json.loads(r["properties"]) if r["properties"] else {}
        entry[0].update(
            body_size=r["body_size"],
            content_type=r["content_type"],
            delivery_mode=r["delivery_mode"],
            correlation_id=r["correlation_id"],
            reply_to=r["reply_to"],
            message_id=r["message_id"],
            properties=props,
        )
        entry[1] = True
        self._release()

    def flush(self) -> None:
        """Write the lines still waiting (contents that never completed: no message)."""
        for entry in self._held:
            entry[1] = True
        self._waiting.clear()
        self._release()

    def _release(self) -> None:
        held = self._held
        while held and held[0][1]:
            self._write(held.popleft()[0])

    def _anomaly(self, row) -> None:
        r = dict(zip(self._cols["anomalies"], row))
        o = self.o
        if o.exchange or o.queue or o.routing_key or not self._keep(r["tcp_stream"], r["channel"], None):
            return
        self._line(
            r["ts"],
            r["frame_number"],
            r["tcp_stream"],
            r["direction"],
            r["channel"],
            "!" + r["kind"],
            {"layer": r["layer"], "detail": r["detail"]},
            text_args=r["detail"],
        )

    def _frame(self, row) -> None:
        r = dict(zip(self._cols["frames"], row))
        if r["type_name"] != "heartbeat" or not self._keep(r["tcp_stream"], r["channel"], "heartbeat"):
            return
        o = self.o
        if o.exchange or o.queue or o.routing_key:
            return
        self._line(r["ts"], r["frame_number"], r["tcp_stream"], r["direction"], r["channel"], "heartbeat", {})

    def _connection(self, row) -> None:
        r = dict(zip(self._cols["connections"], row))
        try:
            self._rejected(r)
        finally:  # the conversation's last row: what was kept to print its lines can go
            self.streams.pop(r["tcp_stream"], None)
            self.headed.discard(r["tcp_stream"])

    def _rejected(self, r) -> None:
        """A protocol header answered with another (the connection row of ``r``)."""
        if r["negotiation"] != "rejected" or not self._keep(r["tcp_stream"], None, "protocol-header", None):
            return
        if self.o.exchange or self.o.queue or self.o.routing_key:
            return
        args = {
            "client": _header(r["client_header"]),
            "server": _header(r["server_header"]),
            "negotiation": "rejected",
        }
        # Like Wireshark's "AMQP (unknown version)": the server answered with the header it speaks.
        self._line(
            r["ts"],
            r["frame_number"],
            r["tcp_stream"],
            "s2c",
            None,
            "protocol-header",
            args,
            text_args=f"rejected: client sent {args['client']}, server answered {args['server']}",
        )

    # -- output ------------------------------------------------------------------------

    def _time(self, ts):
        if ts is None:
            return None
        if self.o.absolute:
            return _dt.datetime.fromtimestamp(ts / 1e9, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if self.t0 is None:
            self.t0 = ts
        return round((ts - self.t0) / 1e9, 9)

    def _line(self, ts, frame, stream, direction, channel, method, args, text_args=None, wait=None) -> None:
        """One line; ``wait``: the (tcp_stream, direction, stream_offset) of a method whose
        message completes it (JSON / CSV)."""
        if self.out_of_range is not None and frame in self.out_of_range:
            ts = None
        t = self._time(ts)
        client, server = self.streams.get(stream, (None, None))
        fmt = self.o.fmt
        if fmt != "text":
            obj = {
                "time": t,
                "frame": frame,
                "stream": stream,
                "direction": direction,
                "channel": channel,
                "method": method,
                "client": client,
                "server": server,
                "arguments": args,
            }
            if fmt == "json" and not self.o.absolute:
                iso = None if ts is None else _dt.datetime.fromtimestamp(ts / 1e9, _dt.UTC).isoformat()
                obj["ts"] = iso
            if wait is not None:
                entry = [obj, False]
                self._waiting[wait] = entry
                self._held.append(entry)
                if len(self._held) > MAX_HELD:  # a content that does not end: its line goes as it is
                    self._held[0][1] = True
                    self._release()
            elif self._held:
                self._held.append([obj, True])
            else:
                self._write(obj)
            return
        if stream is not None and stream not in self.headed:
            self.headed.add(stream)
            if client is not None:
                self.out.write(f"# stream {stream}: {client} -> {server}\n")
        if text_args is None:  # the key arguments present, in KEY_ARGS order
            keys = [k for k in args if k in _KEY_ORDER and args[k] not in ("", None)]
            keys.sort(key=_KEY_ORDER.__getitem__)
            text_args = " ".join([f"{k}={_text(args[k])}" for k in keys])
        tt = t if isinstance(t, str) else (f"{t:12.6f}" if t is not None else f"{'-':>12}")
        ch = f"ch{channel}" if channel is not None else "-"
        self.out.write(
            f"{tt} {frame:>7} {stream if stream is not None else '-':>4} {direction or '---'} "
            f"{ch:<5} {method:<26} {text_args}".rstrip()
            + "\n"
        )

    def _write(self, obj: dict) -> None:
        """A JSON or CSV line (``obj``: the fields of ``_line``, and a message's)."""
        if self.o.fmt == "json":
            self.out.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
            return
        row = [obj.get(k) for k in CSV_FIELDS]
        for i in (CSV_FIELDS.index("arguments"), CSV_FIELDS.index("properties")):
            if row[i] is not None:
                row[i] = json.dumps(row[i], ensure_ascii=False, default=str)
        self.csv.writerow(row)


def line_1_0(r: dict, args: dict) -> str:
    """The key fields of an AMQP 1.0 methods row, for its text line: the link on attach, the
    delivery on transfer, the range and outcome on disposition, credit on flow, the error on
    detach / end / close."""
    m = r["method"]
    parts = []

    def add(key, value):
        if value is not None and value != "":
            parts.append(f"{key}={_text(value)}")

    if m in ("attach", "flow", "transfer", "detach"):
        add("handle", r["handle"])
        add("link", r["link_name"])
    if m == "attach":
        add("role", r["role"])
        add("source", r["source"])
        add("target", r["target"])
    elif m == "transfer":
        add("delivery-id", r["delivery_id"])
        add("settled", r["settled"])
        if r["more"]:
            add("more", True)
        add("outcome", r["outcome"])
        if args.get("aborted"):
            add("aborted", True)
    elif m == "disposition":
        first, last = r["delivery_id"], (r["id_ranges"] or [{}])[0].get("upper")
        add("role", r["role"])
        add("range", f"{first}..{last}" if last is not None and last != first else first)
        add("settled", r["settled"])
        add("outcome", r["outcome"])
    elif m == "flow":
        add("credit", r["link_credit"])
        add("delivery-count", r["delivery_count"])
        if args.get("drain"):
            add("drain", True)
        add("available", args.get("available"))
    elif m == "open":
        for k in ("container-id", "hostname", "max-frame-size", "idle-time-out"):
            add(k, args.get(k))
    elif m == "sasl.init":
        add("mechanism", args.get("mechanism"))
        resp = args.get("initial-response")
        if isinstance(resp, dict):
            add("user", resp.get("user"))
            add("password", resp.get("password"))
    elif m in ("sasl.challenge", "sasl.response"):
        key = m[5:]
        add(key, args.get(key))
    elif m == "sasl.mechanisms":
        add("mechanisms", args.get("sasl-server-mechanisms"))
    elif m == "sasl.outcome":
        add("code", r["code"])
    add("condition", r["condition"])
    add("description", r["reply_text"])
    return " ".join(parts)


def _text(v) -> str:
    """A key argument's value as the text line shows it: a string as it is, anything else as JSON."""
    if isinstance(v, str):
        return v
    if type(v) is int:  # JSON's text of an int (not of a bool, an int subclass)
        return str(v)
    return json.dumps(v, ensure_ascii=False)


def _header(hexstr):
    """``"AMQP 0 0 9 1 (0-9-1)"`` from the hex of the 4 octets after ``AMQP``."""
    if not hexstr:
        return None
    octets = " ".join(str(b) for b in bytes.fromhex(hexstr))
    return f"AMQP {octets} ({_VERSIONS.get(hexstr, 'unknown version')})"


def _credentials(response, keep_secrets: bool) -> dict:
    """start-ok / secure-ok ``response``: user (and with ``keep_secrets`` the password) in clear.

    The dataset keeps the raw response (base64) under --keep-secrets; decoding it for
    people is this layer's business: PLAIN is ``authzid NUL user NUL password``, AMQPLAIN
    a field table with LOGIN and PASSWORD.
    """
    if isinstance(response, dict) and "$b64" not in response:
        out = {k: v for k, v in response.items() if k in ("user", "password")}
        if not keep_secrets and "password" in out:
            del out["password"]
        return out or {"response": response}
    raw = None
    if isinstance(response, dict):
        try:
            raw = base64.b64decode(response["$b64"])
        except (ValueError, TypeError):
            raw = None
    elif isinstance(response, str):
        raw = response.encode("utf-8", "surrogateescape")
    if raw is None:
        return {"response": response}
    creds = _plain(raw) or _amqplain(raw)
    if creds is None:
        return {"response": response} if keep_secrets else {}
    user, password = creds
    return {"user": user, "password": password} if keep_secrets else {"user": user}


def _plain(raw: bytes):
    parts = raw.split(b"\0")
    if len(parts) != 3:
        return None
    return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")


def _amqplain(raw: bytes):
    """LOGIN and PASSWORD of an AMQPLAIN field table (with or without its length prefix)."""
    if len(raw) >= 4 and struct.unpack_from(">I", raw)[0] == len(raw) - 4:
        raw = raw[4:]
    found = {}
    p = 0
    try:
        while p < len(raw):
            n = raw[p]
            key = raw[p + 1 : p + 1 + n].decode("utf-8", "replace")
            p += 1 + n
            if raw[p : p + 1] != b"S":
                return None
            size = struct.unpack_from(">I", raw, p + 1)[0]
            found[key] = raw[p + 5 : p + 5 + size].decode("utf-8", "replace")
            p += 5 + size
    except (IndexError, struct.error):
        return None
    if "LOGIN" not in found:
        return None
    return found["LOGIN"], found.get("PASSWORD", "")


__all__ = ["ShowSink", "KEY_ARGS", "CSV_FIELDS", "MESSAGE_FIELDS"]
