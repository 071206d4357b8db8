#!/usr/bin/env python3
"""AMQP 1.0 scenarios driven with Qpid Proton (python-qpid-proton) against a local RabbitMQ.

Writes a JSON-lines log, the ground truth of a capture: every frame Proton itself wrote or
read (its transport trace: the decoded frame text and the frame's bytes), and what the
application sent, received, settled and saw as outcome. The pika scenario adds a 0-9-1
consumer (pika) of the queue the 1.0 publisher sends to.

    python proton_client.py --scenario outcomes --log FILE --src 127.0.10.11 [--port 5672]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.util
import json
import re
import socket
import sys
import time
import types
import uuid
from pathlib import Path

import proton
import proton._io
import proton.reactor
import proton.utils
from proton import Condition, Delivery, Message

A = None  # the parsed command line
OUT = None
SEQ = [0]
PORT_LOG = []  # local port of every client socket, in connect order


def emit(ev, **fields):
    e = {"ev": ev, **fields, "seq": SEQ[0], "ts": round(time.time(), 6)}
    SEQ[0] += 1
    OUT.write(json.dumps(e, default=jsonable) + "\n")
    OUT.flush()


def jsonable(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"binary_hex": bytes(v).hex()}
    if isinstance(v, uuid.UUID):
        return {"type": "uuid", "value": str(v)}
    if isinstance(v, proton.symbol):
        return {"type": "symbol", "value": str(v)}
    if isinstance(
        v, (proton.ulong, proton.uint, proton.ushort, proton.ubyte, proton.byte, proton.short, proton.int32)
    ):
        return {"type": type(v).__name__, "value": int(v)}
    if isinstance(v, proton.timestamp):
        return {"type": "timestamp", "value": int(v)}
    if isinstance(v, proton.float32):
        return {"type": "float", "value": float(v)}
    if isinstance(v, proton.char):
        return {"type": "char", "value": str(v)}
    if isinstance(v, proton.Described):
        return {"described": jsonable(v.descriptor), "value": jsonable(v.value)}
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return repr(v)


def typed(v):
    """JSON of a value with its proton type kept (ulong, symbol, uuid, ... ; str/int/float plain)."""
    return json.loads(json.dumps(v, default=jsonable))


# --------------------------------------------------------------------------
# Source address: every client socket of a scenario binds to the scenario's loopback address
# --------------------------------------------------------------------------
class _BoundSocket(socket.socket):
    def connect(self, address):
        self._bind()
        return super().connect(address)

    def connect_ex(self, address):
        self._bind()
        return super().connect_ex(address)

    def _bind(self):
        if self.family == socket.AF_INET:
            try:
                self.bind((A.src, 0))
                PORT_LOG.append(self.getsockname()[1])
            except OSError:
                pass


def bind_sources():
    shim = types.ModuleType("socket_bound")
    shim.__dict__.update(socket.__dict__)
    shim.socket = _BoundSocket
    proton._io.socket = shim
    try:
        import pika.adapters.utils.connection_workflow as cw

        cw.socket = shim
    except ImportError:
        pass


# --------------------------------------------------------------------------
# Proton's transport trace -> frame events
# --------------------------------------------------------------------------
FRAME_RE = re.compile(r"^FRAME: *(\d*) *(->|<-) *(.*)$", re.S)
RAW_RE = re.compile(r"^RAW: *(->|<-)([0-9a-f]+)/([0-9a-f]+): ((?:[0-9a-f]{2} )+)")


class Tracer:
    """Pairs each FRAME line with the RAW lines of its bytes (Proton logs the frame, then its bytes)."""

    def __init__(self, conn):
        self.conn = conn
        self.pending = {"c2s": [], "s2c": []}

    def __call__(self, transport, msg):
        m = FRAME_RE.match(msg)
        if m:
            ch, arrow, text = m.groups()
            d = "c2s" if arrow == "->" else "s2c"
            if text.strip() == "EOS":
                emit("eos", conn=self.conn, dir=d)
                return
            if text in ("AMQP", "SASL", "AMQPS") or text.startswith("AMQP") and "@" not in text:
                pid = {"AMQP": 0, "SASL": 3, "AMQPS": 2}.get(text.split()[0])
                emit(
                    "header", conn=self.conn, dir=d, protocol_id=pid, major=1, minor=0, revision=0, trace=text
                )
                return
            pm = re.match(r"@([a-z-]+)\((\d+)\)", text)
            name = pm.group(1) if pm else ("empty" if "EMPTY" in text.upper() else text[:40])
            f = {"conn": self.conn, "dir": d, "channel": int(ch) if ch else None, "performative": name}
            if pm:
                f["descriptor"] = int(pm.group(2))
            f["trace"] = text if len(text) <= 4000 else text[:4000] + "...(%d chars)" % len(text)
            self.pending[d].append(f)
            if name == "empty":
                f["hex"] = ""
            return
        m = RAW_RE.match(msg)
        if m:
            arrow, off, total, hexes = m.groups()
            d = "c2s" if arrow == "->" else "s2c"
            if not self.pending[d]:
                return
            f = self.pending[d][0]
            f["hex"] = f.get("hex", "") + hexes.replace(" ", "")
            if int(off, 16) + 16 >= int(total, 16):
                f["size"] = int(total, 16)
                self.pending[d].pop(0)
                emit("frame", **f)

    def flush(self):
        for d in ("c2s", "s2c"):
            for f in self.pending[d]:
                emit("frame", **f)
            self.pending[d] = []


class Connection(proton.utils.BlockingConnection):
    """A BlockingConnection whose transport traces every frame into the log."""

    def __init__(self, label, container_id, password=None, **kw):
        self.label = label
        self.tracer = Tracer(label)
        self.requested = {k: kw[k] for k in ("max_frame_size", "heartbeat") if k in kw}
        user = kw.pop("user", A.user)
        password = A.password if password is None else password
        emit(
            "connect",
            conn=label,
            label=label,
            container_id=container_id,
            user=user,
            password=password,
            requested=self.requested,
        )
        url = "amqp://%s:%d" % (A.host, A.port)
        self.n_ports = len(PORT_LOG)
        super().__init__(
            url,
            timeout=8,
            user=user,
            password=password,
            allowed_mechs="PLAIN",
            container_id=container_id,
            **kw,
        )
        c = self.conn
        emit(
            "connection_open",
            conn=label,
            client_port=self.client_port(),
            remote={
                "container_id": c.remote_container,
                "hostname": c.remote_hostname,
                "max_frame_size": c.transport.remote_max_frame_size if c.transport else None,
                "properties": typed(c.remote_properties),
            },
        )

    def client_port(self):
        return PORT_LOG[self.n_ports] if len(PORT_LOG) > self.n_ports else None

    def on_connection_bound(self, event):
        t = event.transport
        t.trace(proton.Transport.TRACE_FRM | proton.Transport.TRACE_RAW)
        t.tracer = self.tracer

    def finish(self):
        if self.conn is not None:
            for ssn in _sessions(self):
                if ssn.remote_condition is not None:
                    emit("session_error", conn=self.label, error=cond_json(ssn.remote_condition))
            link = self.conn.link_head(0)
            while link:
                if link.remote_condition is not None:
                    emit(
                        "link_error", conn=self.label, name=link.name, error=cond_json(link.remote_condition)
                    )
                link = link.next(0)
        try:
            self.close()
        except Exception as e:  # noqa: BLE001 - the close of a broken connection: logged, not fatal
            emit("error", conn=self.label, error={"message": "%s: %s" % (type(e).__name__, e)})
        self.tracer.flush()
        cond = self.conn.remote_condition if self.conn else None
        emit("connection_close", conn=self.label, error=cond_json(cond))


def cond_json(c):
    if c is None:
        return None
    return {"condition": str(c.name), "description": c.description}


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def body_bytes(body):
    if body is None:
        return "none", b""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return "data", bytes(body)
    if isinstance(body, str):
        return "amqp-value string", body.encode()
    return "amqp-value " + type(body).__name__, json.dumps(typed(body)).encode()


PROPS = (
    "id",
    "user_id",
    "address",
    "subject",
    "reply_to",
    "correlation_id",
    "content_type",
    "content_encoding",
    "expiry_time",
    "creation_time",
    "group_id",
    "group_sequence",
    "reply_to_group_id",
)
# proton's names -> the specification's
SPEC_NAME = {"id": "message_id", "address": "to", "expiry_time": "absolute_expiry_time"}


def message_json(m):
    out = {}
    for k in ("durable", "priority", "ttl", "first_acquirer", "delivery_count"):
        out[k] = typed(getattr(m, k))
    for k in PROPS:
        v = getattr(m, k)
        if v not in (None, "", 0) or k == "group_sequence" and v:
            out[SPEC_NAME.get(k, k)] = typed(v)
    for k, name in (
        ("properties", "application_properties"),
        ("annotations", "message_annotations"),
        ("instructions", "delivery_annotations"),
    ):
        v = getattr(m, k)
        if v:
            out[name] = typed(v)
    kind, b = body_bytes(m.body)
    out["body_kind"] = kind
    out["body_len"] = len(b)
    out["body_sha256"] = sha256(b)
    if len(b) <= 64:
        out["body_hex"] = b.hex()
    return out


def delivery_json(d):
    return {
        "delivery_tag_hex": bytes(d.tag, "latin-1").hex() if isinstance(d.tag, str) else bytes(d.tag).hex(),
        "settled": bool(d.settled),
        "remote_settled": bool(d.remote_settled) if hasattr(d, "remote_settled") else None,
    }


STATES = {
    Delivery.ACCEPTED: "accepted",
    Delivery.REJECTED: "rejected",
    Delivery.RELEASED: "released",
    Delivery.MODIFIED: "modified",
    Delivery.RECEIVED: "received",
}


def outcome_json(d):
    st = d.remote_state
    o = {"outcome": STATES.get(st, None if not st else str(st))}
    r = d.remote
    if st == Delivery.REJECTED and r.condition:
        o["error"] = cond_json(r.condition)
    if st == Delivery.MODIFIED:
        o["delivery_failed"] = r.failed
        o["undeliverable_here"] = r.undeliverable
    return o


def link_json(link, address=None):
    return {
        "name": link.name,
        "role": "sender" if link.is_sender else "receiver",
        "source": link.source.address,
        "target": link.target.address,
        "remote_source": link.remote_source.address,
        "remote_target": link.remote_target.address,
        "snd_settle_mode": link.snd_settle_mode,
        "rcv_settle_mode": link.rcv_settle_mode,
    }


def open_sender(c, address, name, options=None):
    try:
        s = c.create_sender(address, name=name, options=options)
    except Exception as e:  # noqa: BLE001 - a refused attach is a scenario's expected result
        emit("link_error", conn=c.label, name=name, role="sender", target=address, error=err_json(e, c))
        return None
    emit("attached", conn=c.label, **link_json(s.link))
    return s


def open_receiver(c, address, name, credit=10, options=None):
    try:
        r = c.create_receiver(address, name=name, credit=credit, options=options)
    except Exception as e:  # noqa: BLE001 - a refused attach is a scenario's expected result
        emit("link_error", conn=c.label, name=name, role="receiver", source=address, error=err_json(e, c))
        return None
    emit("attached", conn=c.label, **link_json(r.link))
    return r


def err_json(e, c=None):
    out = {"message": "%s: %s" % (type(e).__name__, e)}
    link = getattr(e, "link", None)
    cond = None
    if link is not None:
        cond = link.remote_condition
    if cond is None and c is not None and c.conn is not None:
        for ssn in _sessions(c):
            cond = cond or ssn.remote_condition
        cond = cond or c.conn.remote_condition
    if cond is not None:
        out.update(cond_json(cond))
    return out


def _sessions(c):
    s = c.conn.session_head(0)
    while s:
        yield s
        s = s.next(0)


def close_link(c, link):
    if link is None:
        return
    # RabbitMQ's 1.0 plugin (3.x) answers detach(closed=true) with a detach that is not closed,
    # which BlockingLink.close waits for in vain: close the link and wait for any remote detach
    link.link.close()
    pause(c, 0.3)
    emit("detached", conn=c.label, name=link.link.name, error=cond_json(link.link.remote_condition))


def send(c, sender, msg, note, presettled=False):
    kind, _ = body_bytes(msg.body)
    mj = message_json(msg)
    t0 = time.time()
    try:
        d = sender.send(msg, error_states=[], timeout=5)
    except Exception as e:  # noqa: BLE001 - the broker may refuse or drop the connection
        emit("send", conn=c.label, link=sender.link.name, note=note, message=mj, error=err_json(e, c))
        return None
    emit(
        "send",
        conn=c.label,
        link=sender.link.name,
        note=note,
        message=mj,
        presettled=presettled,
        t_sent=round(t0, 6),
        **delivery_json(d),
    )
    if not presettled:
        emit(
            "outcome",
            conn=c.label,
            link=sender.link.name,
            side="sender",
            message_id=typed(msg.id),
            **delivery_json(d),
            **outcome_json(d),
        )
    return d


def receive(c, r, timeout=5):
    try:
        m = r.receive(timeout=timeout)
    except Exception as e:  # noqa: BLE001 - a timeout or a closed link ends a receive loop
        emit("receive_timeout", conn=c.label, link=r.link.name, error=err_json(e, c))
        return None, None
    d = r.fetcher.unsettled[-1] if r.fetcher.unsettled else None
    emit(
        "receive", conn=c.label, link=r.link.name, message=message_json(m), **(delivery_json(d) if d else {})
    )
    return m, d


def settle(c, r, m, d, outcome, **kw):
    """Settle one delivery with an outcome (Fetcher settles in order: we take ours out)."""
    r.fetcher.unsettled.remove(d)
    local = d.local
    if outcome == "rejected" and kw.get("condition"):
        local.condition = Condition(kw["condition"], kw.get("description"))
    if outcome == "modified":
        local.failed = kw.get("delivery_failed", False)
        local.undeliverable = kw.get("undeliverable_here", False)
    d.update(
        {
            "accepted": Delivery.ACCEPTED,
            "rejected": Delivery.REJECTED,
            "released": Delivery.RELEASED,
            "modified": Delivery.MODIFIED,
        }[outcome]
    )
    d.settle()
    emit(
        "settle",
        conn=c.label,
        link=r.link.name,
        side="receiver",
        outcome=outcome,
        params=kw or None,
        message_id=typed(m.id),
        **delivery_json(d),
    )
    try:
        c.wait(lambda: False, timeout=0.05)
    except Exception:  # noqa: BLE001 - the wait is only there to let the disposition go out
        pass


def pause(c, seconds):
    try:
        c.wait(lambda: False, timeout=seconds)
    except Exception:  # noqa: BLE001 - a timeout is the point
        pass


def body(tag, n):
    out = b""
    h = tag.encode()
    while len(out) < n:
        h = hashlib.sha256(h).digest()
        out += h
    return out[:n]


def full_message(i, queue, correlation_id=None):
    m = Message(
        durable=True,
        priority=6,
        ttl=600.0,
        first_acquirer=False,
        id="proton-msg-%d" % i,
        user_id=A.user.encode(),
        address=queue,
        subject="subject-%d" % i,
        reply_to="/queue/%s-replies" % A.prefix,
        correlation_id=proton.ulong(2000 + i) if correlation_id is None else correlation_id,
        content_type="application/octet-stream",
        content_encoding="identity",
        expiry_time=1893553445.0,
        creation_time=1767225600.0 + i,
        group_id="group-p",
        group_sequence=i,
        reply_to_group_id="group-pr",
        annotations={proton.symbol("x-opt-amqpcap"): "annotation-%d" % i},
        properties={
            "str": "text-%d" % i,
            "int": proton.int32(-42),
            "long": 1234567890123,
            "bool": True,
            "double": 3.25,
            "float": proton.float32(1.5),
            "ubyte": proton.ubyte(200),
            "ushort": proton.ushort(65000),
            "uint": proton.uint(4000000000),
            "ulong": proton.ulong(18000000000000000000),
            "short": proton.short(-300),
            "byte": proton.byte(-7),
            "char": proton.char("λ"),
            "ts": proton.timestamp(1767225600000),
            "uuid": uuid.UUID("6f1c1a52-3b5e-4c39-9a51-2f0b1c2d3e4f"),
            "sym": proton.symbol("a-symbol"),
            "bin": b"\x00\x01\xfe\xff",
            "nil": None,
        },
        body=body("proton-full-%d" % i, 48 + i),
    )
    m.inferred = True  # bytes body as a data section
    return m


def data(tag, n, **kw):
    m = Message(body=body(tag, n), **kw)
    m.inferred = True
    return m


# --------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------
def scenario_outcomes():
    q = "/queue/%s-outcomes" % A.prefix
    pub = Connection("publisher", "amqpcap-proton-publisher")
    s = open_sender(pub, q, "proton-outcomes-sender")
    send(pub, s, full_message(0, q), "all properties, data body")
    send(
        pub,
        s,
        Message(id="proton-msg-1", subject="amqp-value string", body="hello from proton"),
        "amqp-value string",
    )
    send(
        pub,
        s,
        Message(
            id=uuid.UUID("1d0f8c1e-8f9a-4d2b-b6a4-3a7e2c9d0b11"),
            subject="amqp-value map",
            body={"k": 1, "list": [1, "two", True]},
        ),
        "uuid message-id, amqp-value map body",
    )
    send(
        pub,
        s,
        Message(id=proton.ulong(77), subject="ulong id", correlation_id=b"\x01\x02corr", body=None),
        "ulong message-id, binary correlation-id, no body",
    )
    for i, what in (
        (4, "reject"),
        (5, "release"),
        (6, "modify-failed"),
        (7, "modify-undeliverable"),
        (8, "accept"),
    ):
        send(
            pub,
            s,
            data("proton-out-%d" % i, 100, id="proton-msg-%d" % i, subject=what, properties={"settle": what}),
            "to be settled by the consumer: " + what,
        )
    ps = open_sender(pub, q, "proton-presettled-sender", options=proton.reactor.AtMostOnce())
    for i in range(9, 12):
        send(
            pub,
            ps,
            data("proton-pre-%d" % i, 32, id="proton-msg-%d" % i, subject="pre-settled"),
            "pre-settled",
            presettled=True,
        )
    pause(pub, 0.3)
    close_link(pub, s)
    close_link(pub, ps)
    pub.finish()

    # consumer 1: accept / reject / release (the released message comes back: accepted then);
    # the two messages to be modified are held and one is settled modified last, which RabbitMQ's
    # 1.0 plugin (3.x) answers with end(amqp:invalid-field) and a close
    con = Connection("consumer", "amqpcap-proton-consumer")
    r = open_receiver(con, q, "proton-outcomes-receiver", credit=20)
    seen, held = {}, {}
    for _ in range(13):
        m, d = receive(con, r)
        if m is None:
            break
        what = (m.properties or {}).get("settle")
        seen[m.id] = seen.get(m.id, 0) + 1
        if what == "reject":
            settle(
                con,
                r,
                m,
                d,
                "rejected",
                condition="amqp:precondition-failed",
                description="rejected by amqpcap proton consumer",
            )
        elif what == "release" and seen[m.id] == 1:
            settle(con, r, m, d, "released")
        elif what and what.startswith("modify"):
            held[what] = (m, d)
        else:
            settle(con, r, m, d, "accepted")
    if "modify-failed" in held:
        settle(con, r, *held["modify-failed"], "modified", delivery_failed=True, undeliverable_here=False)
    pause(con, 0.5)
    con.finish()

    con2 = Connection("consumer-2", "amqpcap-proton-consumer-2")
    r2 = open_receiver(con2, q, "proton-outcomes-receiver-2", credit=5)
    got = {}
    for _ in range(2):
        m, d = receive(con2, r2)
        if m is not None:
            got[(m.properties or {}).get("settle")] = (m, d)
    if "modify-undeliverable" in got:
        settle(
            con2, r2, *got["modify-undeliverable"], "modified", delivery_failed=True, undeliverable_here=True
        )
    pause(con2, 0.5)
    con2.finish()

    con3 = Connection("consumer-3", "amqpcap-proton-consumer-3")
    r3 = open_receiver(con3, q, "proton-outcomes-receiver-3", credit=5)
    for _ in range(2):
        m, d = receive(con3, r3)
        if m is not None:
            settle(con3, r3, m, d, "accepted")
    close_link(con3, r3)
    con3.finish()


def scenario_frames512():
    q = "/queue/%s-frames512" % A.prefix
    pub = Connection("publisher", "amqpcap-proton-publisher-512", max_frame_size=512)
    s = open_sender(pub, q, "proton-512-sender")
    send(pub, s, data("proton-512-small", 100, id="proton-small"), "fits one frame")
    send(pub, s, data("proton-512-3k", 3072, id="proton-3k", properties={"size": 3072}), "3 kB, multi-frame")
    send(
        pub,
        s,
        data("proton-512-20k", 20480, id="proton-20k", properties={"size": 20480}),
        "20 kB, multi-frame",
    )
    # (an amqp-value list body makes RabbitMQ's 1.0 plugin in 3.x fail the session: not used)
    send(
        pub,
        s,
        Message(id="proton-3k-value", body=body("proton-512-3kv", 2250).hex()[:3000]),
        "3 kB amqp-value string, multi-frame",
    )
    close_link(pub, s)
    con = Connection("consumer", "amqpcap-proton-consumer-512", max_frame_size=512)
    r = open_receiver(con, q, "proton-512-receiver", credit=10)
    for _ in range(4):
        m, d = receive(con, r)
        if m is None:
            break
        settle(con, r, m, d, "accepted")
    close_link(con, r)
    con.finish()
    pub.finish()


def scenario_errors():
    try:
        Connection("wrong-password", "amqpcap-proton-badpw", password=A.wrong_password).finish()
    except Exception as e:  # noqa: BLE001 - the refused login is the point
        emit("connection_error", conn="wrong-password", error=err_json(e))
    c = Connection("missing-queue", "amqpcap-proton-errors")
    s = open_sender(c, "/amq/queue/%s-missing" % A.prefix, "proton-missing-sender")
    if s is not None:
        send(c, s, data("proton-missing", 10, id="proton-to-missing"), "to a missing queue")
    c.finish()
    for label, fn in (
        (
            "missing-queue-receiver",
            lambda x: open_receiver(x, "/amq/queue/%s-missing" % A.prefix, "proton-missing-receiver"),
        ),
        (
            "missing-exchange",
            lambda x: open_sender(
                x, "/exchange/%s-missing-exchange/key" % A.prefix, "proton-missing-exchange-sender"
            ),
        ),
        ("bad-address", lambda x: open_receiver(x, "/bogus/%s" % A.prefix, "proton-bad-address-receiver")),
    ):
        x = Connection(label, "amqpcap-proton-" + label)
        fn(x)
        pause(x, 0.3)
        x.finish()


def scenario_rpc():
    reqq = "/queue/%s-rpc-requests" % A.prefix
    repq = "/queue/%s-rpc-replies" % A.prefix
    srv = Connection("rpc-server", "amqpcap-proton-rpc-server")
    sr = open_receiver(srv, reqq, "proton-rpc-server-receiver", credit=10)
    ss = open_sender(srv, repq, "proton-rpc-server-reply-sender")
    cli = Connection("rpc-client", "amqpcap-proton-rpc-client")
    cs = open_sender(cli, reqq, "proton-rpc-client-sender")
    cr = open_receiver(cli, repq, "proton-rpc-client-receiver", credit=10)
    for i in range(3):
        cid = uuid.UUID(int=0x5EC0000000000000000000000000000 + i)
        send(
            cli,
            cs,
            Message(
                id="rpc-req-%d" % i,
                reply_to=repq,
                correlation_id=cid,
                subject="request",
                content_type="text/plain",
                body="request %d" % i,
            ),
            "request",
        )
        m, d = receive(srv, sr)
        if m is None:
            break
        settle(srv, sr, m, d, "accepted")
        reply = Message(
            id="reply-%d" % i,
            correlation_id=m.correlation_id,
            subject="reply",
            content_type="text/plain",
            body="reply to " + m.body,
        )
        send(srv, ss, reply, "reply (reply-to of the request; correlation-id copied)")
        m2, d2 = receive(cli, cr)
        if m2 is not None:
            settle(cli, cr, m2, d2, "accepted")
    close_link(cli, cs)
    close_link(cli, cr)
    cli.finish()
    srv.finish()


def _record_091():
    """The 0-9-1 recorder, for its list of basic properties (one copy of it)."""
    spec = importlib.util.spec_from_file_location("record_091", Path(__file__).with_name("record_091.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PIKA_PROPERTIES = _record_091().BASIC_PROPERTIES


def pika_connection(conn, label):
    """A 0-9-1 connection (pika) from the scenario's source address, logged like a 1.0 one."""
    import pika

    params = pika.ConnectionParameters(
        host=A.host,
        port=A.port,
        credentials=pika.PlainCredentials(A.user, A.password),
        client_properties={"connection_name": "amqpcap-" + label},
        heartbeat=0,
    )
    n = len(PORT_LOG)
    emit(
        "connect",
        conn=conn,
        label=label,
        client="pika",
        client_version=pika.__version__,
        protocol="AMQP 0-9-1",
        user=A.user,
        password=A.password,
    )
    pc = pika.BlockingConnection(params)
    emit("connection_open", conn=conn, client_port=PORT_LOG[n] if len(PORT_LOG) > n else None)
    return pc


def pika_properties(props):
    return {k: typed(getattr(props, k)) for k in PIKA_PROPERTIES if getattr(props, k) is not None}


def pika_get(conn, ch, queue, timeout=5.0):
    """basic.get until a message comes (a 1.0 sender's accepted transfer may still be on its way
    into the queue); the message is logged as pika received it."""
    deadline = time.time() + timeout
    while True:
        method, props, b = ch.basic_get(queue, auto_ack=False)
        if method is not None or time.time() > deadline:
            break
        time.sleep(0.05)
    if method is None:
        emit("receive_timeout", conn=conn, queue=queue)
        return None, None, None
    emit(
        "pika_receive",
        conn=conn,
        op="basic.get",
        delivery_tag=method.delivery_tag,
        routing_key=method.routing_key,
        exchange=method.exchange,
        redelivered=method.redelivered,
        body_len=len(b),
        body_sha256=sha256(b),
        body_hex=b.hex() if len(b) <= 64 else None,
        properties=pika_properties(props),
    )
    return method, props, b


def pika_publish(conn, ch, routing_key, b, **props):
    import pika

    p = pika.BasicProperties(**props)
    ch.basic_publish("", routing_key, b, p)
    emit(
        "pika",
        conn=conn,
        op="basic.publish",
        exchange="",
        routing_key=routing_key,
        body_len=len(b),
        body_sha256=sha256(b),
        properties=pika_properties(p),
    )


def scenario_pika():
    """A 1.0 publisher (Proton) and a 0-9-1 consumer (pika) of the same queue."""
    qname = "%s-cross" % A.prefix
    pc = pika_connection("pika", "pika-consumer")
    ch = pc.channel()
    ch.queue_declare(qname, durable=True)
    emit("pika", conn="pika", op="queue.declare", queue=qname, durable=True)
    pub = Connection("publisher", "amqpcap-proton-cross-publisher")
    s = open_sender(pub, "/amq/queue/" + qname, "proton-cross-sender")
    # a ulong correlation-id makes RabbitMQ 3.x fail the 0-9-1 delivery (its writer expects a
    # string for correlation_id: connection.close 541 to the 0-9-1 consumer): a string here
    msgs = [
        full_message(0, "/amq/queue/" + qname, correlation_id="corr-0"),
        Message(
            id="cross-1", subject="amqp-value string", content_type="text/plain", body="a string from proton"
        ),
        data(
            "cross-2",
            2000,
            id="cross-2",
            correlation_id="corr-2",
            reply_to="/queue/%s-cross-replies" % A.prefix,
            properties={"k": "v", "n": 5},
        ),
        Message(id="cross-3", subject="amqp-value map", body={"a": 1}),
    ]
    for m in msgs:
        send(pub, s, m, "to the 0-9-1 consumer's queue")
    close_link(pub, s)
    pub.finish()
    for _ in range(len(msgs)):
        method, _, _ = pika_get("pika", ch, qname, timeout=0)
        if method is None:
            break
        ch.basic_ack(method.delivery_tag)
        emit("pika", conn="pika", op="basic.ack", delivery_tag=method.delivery_tag)
    ch.queue_delete(qname)
    emit("pika", conn="pika", op="queue.delete", queue=qname)
    pc.close()
    emit("connection_close", conn="pika", error=None)


def scenario_pika_rpc():
    """Request / reply across protocols through one broker: a 1.0 requester (Proton) and a 0-9-1
    responder (pika), then a 0-9-1 requester (pika) and a 1.0 responder (Proton). Each responder
    answers on the request's reply-to (as its own protocol sees that address) with the request's
    correlation-id."""
    to_091, back_10 = "%s-xrpc-requests" % A.prefix, "%s-xrpc-replies" % A.prefix
    to_10, back_091 = "%s-xrpc091-requests" % A.prefix, "%s-xrpc091-replies" % A.prefix
    pc = pika_connection("pika", "pika-rpc")
    ch = pc.channel()
    for q in (to_091, to_10, back_091):
        ch.queue_declare(q)
        emit("pika", conn="pika", op="queue.declare", queue=q, durable=False)
    px = Connection("proton", "amqpcap-proton-xrpc")
    replies = open_receiver(px, "/queue/" + back_10, "proton-xrpc-reply-receiver", credit=10)
    requests = open_sender(px, "/amq/queue/" + to_091, "proton-xrpc-request-sender")
    for i in range(3):
        req = Message(
            id="xrpc-req-%d" % i,
            reply_to="/queue/" + back_10,
            correlation_id="xrpc-corr-%d" % i,
            subject="request",
            content_type="text/plain",
            body="request %d" % i,
        )
        send(px, requests, req, "request to the 0-9-1 responder")
        method, props, b = pika_get("pika", ch, to_091)
        if method is None:
            break
        # RabbitMQ hands the 0-9-1 side the 1.0 reply-to /queue/Q as Q: a routing key
        pika_publish(
            "pika",
            ch,
            props.reply_to,
            b"reply to " + b,
            correlation_id=props.correlation_id,
            message_id="xrpc-reply-%d" % i,
            content_type="text/plain",
        )
        ch.basic_ack(method.delivery_tag)
        emit("pika", conn="pika", op="basic.ack", delivery_tag=method.delivery_tag)
        m, d = receive(px, replies)
        if m is not None:
            settle(px, replies, m, d, "accepted")
    close_link(px, requests)
    close_link(px, replies)

    served = open_receiver(px, "/amq/queue/" + to_10, "proton-xrpc091-request-receiver", credit=10)
    answers = None
    for i in range(3):
        pika_publish(
            "pika",
            ch,
            to_10,
            b"request %d" % i,
            correlation_id="xrpc091-corr-%d" % i,
            reply_to=back_091,
            message_id="xrpc091-req-%d" % i,
            content_type="text/plain",
        )
        m, d = receive(px, served)
        if m is None:
            break
        settle(px, served, m, d, "accepted")
        if answers is None:
            answers = open_sender(px, reply_address(m.reply_to), "proton-xrpc091-reply-sender")
        reply = Message(
            id="xrpc091-reply-%d" % i,
            correlation_id=m.correlation_id,
            subject="reply",
            content_type="text/plain",
            body=b"reply to " + bytes(m.body),
        )
        reply.inferred = True  # bytes body as a data section
        send(px, answers, reply, "reply (reply-to of the 0-9-1 request; correlation-id copied)")
        method, _, _ = pika_get("pika", ch, back_091)
        if method is not None:
            ch.basic_ack(method.delivery_tag)
            emit("pika", conn="pika", op="basic.ack", delivery_tag=method.delivery_tag)
    close_link(px, served)
    close_link(px, answers)
    px.finish()
    for q in (to_091, to_10, back_091, back_10):
        ch.queue_delete(q)
        emit("pika", conn="pika", op="queue.delete", queue=q)
    pc.close()
    emit("connection_close", conn="pika", error=None)


def reply_address(reply_to):
    """The 1.0 target of a reply-to: an address as it is, a bare 0-9-1 queue name as /queue/Q."""
    return reply_to if reply_to.startswith("/") else "/queue/" + reply_to


SCENARIOS = {
    "outcomes": scenario_outcomes,
    "frames512": scenario_frames512,
    "errors": scenario_errors,
    "rpc": scenario_rpc,
    "pika": scenario_pika,
    "pika_rpc": scenario_pika_rpc,
}


def main(argv=None):
    global A, OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--log", required=True)
    ap.add_argument("--src", default="127.0.0.1")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5672)
    ap.add_argument("--user", default="guest")
    ap.add_argument("--password", default="guest")
    ap.add_argument("--wrong-password", default="wrong-pw-0000")
    ap.add_argument("--prefix", default="amqpcap10-proton")
    A = ap.parse_args(argv)
    OUT = open(A.log, "w")
    bind_sources()
    emit(
        "start",
        client="qpid-proton",
        client_version=".".join(map(str, proton.VERSION)),
        runtime="python " + sys.version.split()[0],
        scenario=A.scenario,
        src=A.src,
        server="%s:%d" % (A.host, A.port),
        started_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    try:
        SCENARIOS[A.scenario]()
    except Exception as e:  # noqa: BLE001 - logged into the truth, exit status says it
        emit("end", ok=False, error="%s: %s" % (type(e).__name__, e))
        OUT.close()
        return 1
    emit("end", ok=True)
    OUT.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
