#!/usr/bin/env python3
"""Record real AMQP 0-9-1 captures against a local RabbitMQ, with ground truth.

Usage (as root, from the repository root)::

    python captures/record/record_091.py --out captures/
    python captures/record/record_091.py --out captures/ --only pika_full,pika_blocked

For every scenario this script

1. makes sure a RabbitMQ broker answers on 127.0.0.1:5672 (starts one with
   ``rabbitmq-server -detached`` if none is running and waits for
   ``rabbitmqctl await_startup``),
2. recreates the vhost ``amqpcap`` and the user ``amqpcap`` / ``s3cret-pw``
   so every recording starts from an empty broker state,
3. starts ``tcpdump -i lo -U -s 0 -w FILE 'tcp port 5672'`` and waits until
   it is listening,
4. runs the scenario with a real client library (pika or py-amqp),
5. stops tcpdump with SIGINT and waits until the file is flushed,
6. writes ``FILE.truth.json``: what the script did and what the client
   observed, connection by connection, operation by operation,
7. cross-checks the truth against ``tshark`` (if installed) and stores the
   result in the truth file under ``crosscheck`` (tshark's view, for
   information only -- the truth itself never comes from tshark).

Bodies are fixed (seeded), queue and exchange names are fixed; timestamps,
ports, server-named queues and heartbeat counts naturally differ between
recordings.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import decimal
import hashlib
import json
import os
import platform
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import types

HOST = "127.0.0.1"
PORT = 5672
USER = "amqpcap"
PASSWORD = "s3cret-pw"
WRONG_PASSWORD = "wrong-pw-0000"
VHOST = "amqpcap"
FORBIDDEN_VHOST = "amqpcap-forbidden"
DEFAULT_WATERMARK = "0.4"

# --------------------------------------------------------------------------
# AMQP 0-9-1 method names (class_id, method_id) -> "class.method"
# --------------------------------------------------------------------------
METHODS = {
    (10, 10): "connection.start",
    (10, 11): "connection.start-ok",
    (10, 20): "connection.secure",
    (10, 21): "connection.secure-ok",
    (10, 30): "connection.tune",
    (10, 31): "connection.tune-ok",
    (10, 40): "connection.open",
    (10, 41): "connection.open-ok",
    (10, 50): "connection.close",
    (10, 51): "connection.close-ok",
    (10, 60): "connection.blocked",
    (10, 61): "connection.unblocked",
    (10, 70): "connection.update-secret",
    (10, 71): "connection.update-secret-ok",
    (20, 10): "channel.open",
    (20, 11): "channel.open-ok",
    (20, 20): "channel.flow",
    (20, 21): "channel.flow-ok",
    (20, 40): "channel.close",
    (20, 41): "channel.close-ok",
    (40, 10): "exchange.declare",
    (40, 11): "exchange.declare-ok",
    (40, 20): "exchange.delete",
    (40, 21): "exchange.delete-ok",
    (40, 30): "exchange.bind",
    (40, 31): "exchange.bind-ok",
    (40, 40): "exchange.unbind",
    (40, 51): "exchange.unbind-ok",
    (50, 10): "queue.declare",
    (50, 11): "queue.declare-ok",
    (50, 20): "queue.bind",
    (50, 21): "queue.bind-ok",
    (50, 30): "queue.purge",
    (50, 31): "queue.purge-ok",
    (50, 40): "queue.delete",
    (50, 41): "queue.delete-ok",
    (50, 50): "queue.unbind",
    (50, 51): "queue.unbind-ok",
    (60, 10): "basic.qos",
    (60, 11): "basic.qos-ok",
    (60, 20): "basic.consume",
    (60, 21): "basic.consume-ok",
    (60, 30): "basic.cancel",
    (60, 31): "basic.cancel-ok",
    (60, 40): "basic.publish",
    (60, 50): "basic.return",
    (60, 60): "basic.deliver",
    (60, 70): "basic.get",
    (60, 71): "basic.get-ok",
    (60, 72): "basic.get-empty",
    (60, 80): "basic.ack",
    (60, 90): "basic.reject",
    (60, 100): "basic.recover-async",
    (60, 110): "basic.recover",
    (60, 111): "basic.recover-ok",
    (60, 120): "basic.nack",
    (85, 10): "confirm.select",
    (85, 11): "confirm.select-ok",
    (90, 10): "tx.select",
    (90, 11): "tx.select-ok",
    (90, 20): "tx.commit",
    (90, 21): "tx.commit-ok",
    (90, 30): "tx.rollback",
    (90, 31): "tx.rollback-ok",
}
METHOD_IDS = {v: k for k, v in METHODS.items()}

BASIC_PROPERTIES = (
    "content_type",
    "content_encoding",
    "headers",
    "delivery_mode",
    "priority",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "timestamp",
    "type",
    "user_id",
    "app_id",
    "cluster_id",
)


def log(*a):
    print("[record_091]", *a, file=sys.stderr, flush=True)


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def now() -> float:
    return time.time()


# --------------------------------------------------------------------------
# Field tables: describe the exact bytes a client library puts on the wire
# --------------------------------------------------------------------------
def parse_typed_table(buf: bytes, off: int = 0):
    """Parse an encoded field table (with its 4-byte length) into a typed
    JSON description ``{key: {"type": letter, "value": ...}}``.

    Used only on bytes produced by the client library's own encoder, to
    record which type letter it chose for each value (pika: bytes -> 'x',
    int64 -> 'l'; py-amqp: bytes -> 'S', int64 -> 'L', float -> 'd').
    """
    (length,) = struct.unpack_from(">I", buf, off)
    off += 4
    end = off + length
    out = {}
    while off < end:
        klen = buf[off]
        off += 1
        key = buf[off : off + klen].decode("utf-8")
        off += klen
        out[key], off = _parse_typed_value(buf, off)
    return out, off


def _parse_typed_value(buf: bytes, off: int):
    t = chr(buf[off])
    off += 1
    simple = {
        "b": ">b",
        "B": ">B",
        "s": ">h",
        "u": ">H",
        "I": ">i",
        "i": ">I",
        "l": ">q",
        "L": ">q",
        "f": ">f",
        "d": ">d",
    }
    if t in simple:
        fmt = simple[t]
        (v,) = struct.unpack_from(fmt, buf, off)
        return {"type": t, "value": v}, off + struct.calcsize(fmt)
    if t == "t":
        return {"type": t, "value": bool(buf[off])}, off + 1
    if t in "Sx":
        (n,) = struct.unpack_from(">I", buf, off)
        off += 4
        raw = buf[off : off + n]
        d = {"type": t, "length": n, "hex": raw.hex()}
        if t == "S":
            try:
                d["value"] = raw.decode("utf-8")
            except UnicodeDecodeError:
                pass
        return d, off + n
    if t == "D":
        scale, unscaled = struct.unpack_from(">Bi", buf, off)
        val = decimal.Decimal(unscaled).scaleb(-scale)
        return {"type": t, "scale": scale, "unscaled": unscaled, "value": str(val)}, off + 5
    if t == "T":
        (v,) = struct.unpack_from(">Q", buf, off)
        iso = dt.datetime.fromtimestamp(v, dt.UTC).isoformat()
        return {"type": t, "value": v, "iso": iso}, off + 8
    if t == "F":
        v, off = parse_typed_table(buf, off)
        return {"type": t, "value": v}, off
    if t == "A":
        (n,) = struct.unpack_from(">I", buf, off)
        off += 4
        end = off + n
        items = []
        while off < end:
            item, off = _parse_typed_value(buf, off)
            items.append(item)
        return {"type": t, "value": items}, off
    if t == "V":
        return {"type": t, "value": None}, off
    raise ValueError("unknown field type %r" % t)


def pika_typed_table(table):
    import pika.data

    pieces = []
    pika.data.encode_table(pieces, table)
    enc = b"".join(pieces)
    return parse_typed_table(enc)[0], enc


def pyamqp_typed_table(table):
    from amqp.serialization import dumps

    enc = dumps("F", [table])
    return parse_typed_table(enc)[0], enc


def plain_json(v):
    """JSON-friendly rendering of a value as decoded by a client library."""
    if isinstance(v, dict):
        return {
            str(k if not isinstance(k, bytes) else k.decode("utf-8", "replace")): plain_json(x)
            for k, x in v.items()
        }
    if isinstance(v, (list, tuple)):
        return [plain_json(x) for x in v]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"bytes_hex": bytes(v).hex()}
    if isinstance(v, decimal.Decimal):
        return {"decimal": str(v)}
    if isinstance(v, dt.datetime):
        return {"datetime": v.isoformat()}
    if isinstance(v, float):
        return v
    return v


# --------------------------------------------------------------------------
# Truth bookkeeping
# --------------------------------------------------------------------------
class ConnTruth:
    """Everything one client connection did, in order."""

    def __init__(self, index: int, client: str, compact=False, **info):
        self.compact = compact
        self.d = {"index": index, "tcp_stream": index, "client": client}
        if compact:
            self.d["operations_compacted"] = (
                "per-message basic.publish ops and asynchronous receive ops are "
                "left out of 'operations'; they are in 'publishes', "
                "'received_messages', 'c2s_methods' and the method counts"
            )
        self.d.update(info)
        self.ops = []
        self.publishes = []
        self.received = []
        self.errors = []
        self.c2s = []  # ordered, heartbeats excluded
        self.s2c = collections.Counter()  # heartbeats excluded
        self.t0 = now()

    def op(self, op, channel=None, sent=(), received=(), **fields):
        e = {"seq": len(self.ops), "ts": round(now(), 6), "op": op, "channel": channel}
        e.update(fields)
        e["sent"] = list(sent)
        e["received"] = list(received)
        for m in sent:
            assert m in METHOD_IDS, m
        for m in received:
            assert m in METHOD_IDS, m
        self.c2s.extend(sent)
        self.s2c.update(received)
        if not (self.compact and op == "basic.publish"):
            self.ops.append(e)
        return e

    def add_received(self, e):
        """Received a method the client did not ask for synchronously."""
        assert e["method"] in METHOD_IDS
        self.s2c[e["method"]] += 1
        e.setdefault("seq", len(self.received))
        self.received.append(e)
        if self.compact:
            return e
        self.ops.append(
            {
                "seq": len(self.ops),
                "ts": round(now(), 6),
                "op": "recv " + e["method"],
                "channel": e.get("channel"),
                "sent": [],
                "received": [e["method"]],
                "delivery_tag": e.get("delivery_tag"),
                "received_index": e["seq"],
                "note": "asynchronous; counted in received_messages / s2c counts",
            }
        )
        return e

    def as_json(self):
        d = dict(self.d)
        d["operations"] = self.ops
        d["publishes"] = self.publishes
        d["received_messages"] = self.received
        d["errors"] = self.errors
        d["c2s_methods"] = self.c2s
        d["c2s_method_counts"] = dict(sorted(collections.Counter(self.c2s).items()))
        d["s2c_method_counts"] = dict(sorted(self.s2c.items()))
        d["c2s_publish_count"] = sum(1 for m in self.c2s if m == "basic.publish")
        return d


class Truth:
    def __init__(self, scenario, capture, description):
        self.d = {
            "format": "amqpcap-truth/1",
            "scenario": scenario,
            "capture": capture,
            "description": description,
            "recorder": "captures/record/record_091.py",
            "recorded_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "protocol": "AMQP 0-9-1",
            "server": {"host": HOST, "port": PORT},
            "notes": [],
        }
        self.conns = []

    def conn(self, client, **info):
        info.setdefault("compact", self.d.get("compact_json", False))
        c = ConnTruth(len(self.conns), client, **info)
        self.conns.append(c)
        return c

    def note(self, s):
        self.d["notes"].append(s)

    def as_json(self):
        d = dict(self.d)
        d["connections"] = [c.as_json() for c in self.conns]
        return d


# --------------------------------------------------------------------------
# Local ports of client sockets (also for connections refused at login)
# --------------------------------------------------------------------------
PORT_LOG = []
# Every client socket of a scenario is bound to its own loopback source
# address (127.0.91.N) and tcpdump filters on it, so other users of the same
# broker on this machine never end up in the capture.
SOURCE = {"addr": None}


class _TracingSocket(socket.socket):
    def connect(self, address):
        self._bind_source()
        try:
            return super().connect(address)
        finally:
            self._trace()

    def connect_ex(self, address):
        self._bind_source()
        try:
            return super().connect_ex(address)
        finally:
            self._trace()

    def _bind_source(self):
        if SOURCE["addr"] and self.family == socket.AF_INET:
            try:
                self.bind((SOURCE["addr"], 0))
            except OSError:
                pass

    def _trace(self):
        try:
            PORT_LOG.append(self.getsockname()[1])
        except OSError:
            pass


def install_socket_tracing():
    shim = types.ModuleType("socket_traced")
    shim.__dict__.update(socket.__dict__)
    shim.socket = _TracingSocket
    import amqp.transport as at
    import pika.adapters.utils.connection_workflow as cw

    cw.socket = shim
    at.socket = shim


# --------------------------------------------------------------------------
# Broker and capture management
# --------------------------------------------------------------------------
def run(cmd, check=True, timeout=120, quiet=False):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if not quiet:
        log("$", " ".join(cmd), "->", r.returncode)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s %s" % (cmd, r.returncode, r.stdout, r.stderr))
    return r


def ctl(*args, check=True, timeout=120):
    return run(["rabbitmqctl", *args], check=check, timeout=timeout)


def port_open(host=HOST, port=PORT, timeout=1.0):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ensure_broker():
    """Start RabbitMQ if it is not running; wait until it accepts AMQP."""
    r = ctl("-q", "status", check=False, timeout=60)
    if r.returncode != 0:
        log("no broker answering; starting rabbitmq-server -detached")
        env = dict(os.environ)
        env.setdefault("RABBITMQ_NODE_IP_ADDRESS", HOST)
        env.setdefault("RABBITMQ_NODE_PORT", str(PORT))
        subprocess.run(["rabbitmq-server", "-detached"], env=env, check=False, timeout=120)
        deadline = now() + 180
        while True:
            r = ctl("await_startup", "--timeout", "60", check=False, timeout=90)
            if r.returncode == 0:
                break
            if now() > deadline:
                # last resort: the init script (Debian with sysvinit/systemd)
                subprocess.run(["service", "rabbitmq-server", "start"], check=False, timeout=180)
                ctl("await_startup", "--timeout", "120", timeout=150)
                break
            time.sleep(2)
    else:
        ctl("await_startup", "--timeout", "60", timeout=90)
    deadline = now() + 60
    while not port_open():
        if now() > deadline:
            raise RuntimeError("RabbitMQ does not listen on %s:%d" % (HOST, PORT))
        time.sleep(0.5)


def broker_info():
    v = ctl("version", check=False).stdout.strip().splitlines()
    version = v[-1].strip() if v else "unknown"
    erl = (
        run(["rabbitmqctl", "eval", "erlang:system_info(otp_release)."], check=False)
        .stdout.strip()
        .strip('"')
    )
    return {"product": "RabbitMQ", "version": version, "erlang_otp": erl}


def reset_broker_state():
    """Fresh vhosts and user so each recording starts from an empty broker."""
    ctl("set_vm_memory_high_watermark", DEFAULT_WATERMARK, check=False)
    for vh in (VHOST, FORBIDDEN_VHOST):
        ctl("delete_vhost", vh, check=False)
        ctl("add_vhost", vh)
    ctl("delete_user", USER, check=False)
    ctl("add_user", USER, PASSWORD)
    ctl("set_permissions", "-p", VHOST, USER, ".*", ".*", ".*")
    # FORBIDDEN_VHOST: deliberately no permissions for USER (-> 530 NOT_ALLOWED)


class Tcpdump:
    """tcpdump on lo, stopped with SIGINT (by its own pid) and flushed.

    --immediate-mode and a 64 MiB buffer (-B): without them packets of a
    burst (the throughput scenario) were lost without tcpdump counting a drop.
    """

    def __init__(self, path, src, iface="lo", port=PORT, nano=False):
        self.path = path
        self.cmd = [
            "tcpdump",
            "-i",
            iface,
            "-U",
            "--immediate-mode",
            "-B",
            "65536",
            "-s",
            "0",
            "-Z",
            "root",
            "-w",
            path,
        ]
        if nano:
            self.cmd[1:1] = ["--time-stamp-precision=nano"]
        self.filter = "tcp port %d and host %s" % (port, src)
        self.cmd.append(self.filter)
        self.proc = None
        self.stderr_lines = []

    def __enter__(self):
        if os.path.exists(self.path):
            os.unlink(self.path)
        log("$", " ".join(self.cmd))
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ready = threading.Event()

        def reader():
            for line in self.proc.stderr:
                self.stderr_lines.append(line.rstrip())
                if "listening on" in line:
                    ready.set()
            ready.set()

        self._t = threading.Thread(target=reader, daemon=True)
        self._t.start()
        if not ready.wait(30) or self.proc.poll() is not None:
            raise RuntimeError("tcpdump did not start: %s" % self.stderr_lines)
        time.sleep(0.5)  # let the capture settle before the first SYN
        return self

    def __exit__(self, *exc):
        time.sleep(1.5)  # let the last FIN/RST reach the capture
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(10)
        self._t.join(5)
        # wait until the file size is stable (flushed)
        last = -1
        for _ in range(20):
            size = os.path.getsize(self.path) if os.path.exists(self.path) else -1
            if size == last:
                break
            last = size
            time.sleep(0.2)
        log("tcpdump:", "; ".join(self.stderr_lines[-3:]))
        return False

    def stats(self):
        return [l for l in self.stderr_lines if "packets" in l or "listening" in l]


# --------------------------------------------------------------------------
# pika helpers
# --------------------------------------------------------------------------
def pika_params(
    password=PASSWORD, vhost=VHOST, heartbeat=None, name=None, frame_max=None, blocked_timeout=None
):
    import pika

    kw = {}
    if heartbeat is not None:
        kw["heartbeat"] = heartbeat
    if frame_max is not None:
        kw["frame_max"] = frame_max
    if blocked_timeout is not None:
        kw["blocked_connection_timeout"] = blocked_timeout
    props = {"connection_name": name} if name else None
    return pika.ConnectionParameters(
        host=HOST,
        port=PORT,
        virtual_host=vhost,
        credentials=pika.PlainCredentials(USER, password),
        client_properties=props,
        connection_attempts=1,
        socket_timeout=10,
        **kw,
    )


def pika_connect(truth, params, label, requested):
    """Open a pika BlockingConnection and record the handshake."""
    import pika

    n_before = len(PORT_LOG)
    c = truth.conn(
        "pika",
        label=label,
        client_version=pika.__version__,
        user=USER,
        password=params.credentials.password,
        mechanism="PLAIN",
        vhost=params.virtual_host,
        protocol_header_sent="414d515000000901",
        requested=requested,
    )
    conn = pika.BlockingConnection(params)
    impl = conn._impl
    c.d["client_port"] = PORT_LOG[n_before] if len(PORT_LOG) > n_before else None
    c.d["server_port"] = PORT
    c.d["client_properties_sent"] = plain_json(impl._client_properties)
    c.d["server_properties_received"] = plain_json(impl.server_properties)
    c.d["negotiated"] = {
        "channel_max": impl.params.channel_max,
        "frame_max": impl.params.frame_max,
        "heartbeat": impl.params.heartbeat,
    }
    c.op(
        "connect",
        channel=0,
        sent=["connection.start-ok", "connection.tune-ok", "connection.open"],
        received=["connection.start", "connection.tune", "connection.open-ok"],
        vhost=params.virtual_host,
        user=USER,
        mechanism="PLAIN",
        negotiated=c.d["negotiated"],
    )
    return c, conn


def pika_props_json(props):
    out = {}
    if props is None:
        return out
    for k in BASIC_PROPERTIES:
        v = getattr(props, k)
        if v is None:
            continue
        if k == "headers":
            typed, enc = pika_typed_table(v)
            out["headers"] = typed
            out["headers_encoded_len"] = len(enc)
            out["headers_encoded_sha256"] = sha256(enc)
        else:
            out[k] = v
    return out


def pika_received_props(props):
    out = {}
    for k in BASIC_PROPERTIES:
        v = getattr(props, k, None)
        if v is not None:
            out[k] = plain_json(v)
    return out


def pika_publish(
    c, ch, exchange, routing_key, body, props=None, mandatory=False, confirm_tag=None, tx=None, note=None
):
    """basic_publish; records the publish and (in confirm mode) the outcome."""
    import pika.exceptions as pe

    entry = {
        "index": len(c.publishes),
        "channel": ch.channel_number,
        "exchange": exchange,
        "routing_key": routing_key,
        "mandatory": mandatory,
        "immediate": False,
        "body_len": len(body),
        "body_sha256": sha256(body),
        "properties": pika_props_json(props),
    }
    if len(body) <= 64 and not c.compact:
        entry["body_hex"] = body.hex()
    if tx:
        entry["tx"] = tx
    if note:
        entry["note"] = note
    received = []
    outcome = None
    err = None
    try:
        ch.basic_publish(exchange, routing_key, body, props, mandatory)
        if confirm_tag is not None:
            outcome = "ack"
            received = ["basic.ack"]
    except pe.UnroutableError as e:
        outcome = "return+ack"
        received = ["basic.return", "basic.ack"]
        err = repr(e)
    except pe.NackError as e:
        outcome = "nack"
        received = ["basic.nack"]
        err = repr(e)
    if confirm_tag is not None:
        entry["confirm"] = {"delivery_tag": confirm_tag, "outcome": outcome}
        if outcome == "return+ack":
            entry["confirm"]["return_reply_code"] = 312
            entry["confirm"]["return_reply_text"] = "NO_ROUTE"
    c.publishes.append(entry)
    op = c.op(
        "basic.publish",
        channel=ch.channel_number,
        sent=["basic.publish"],
        received=received,
        exchange=exchange,
        routing_key=routing_key,
        mandatory=mandatory,
        body_len=len(body),
        body_sha256=entry["body_sha256"],
        publish_index=entry["index"],
    )
    if confirm_tag is not None:
        op["confirm"] = entry["confirm"]
    if err:
        op["client_exception"] = err
    return entry


def pika_channel(c, conn):
    ch = conn.channel()
    c.op("channel.open", channel=ch.channel_number, sent=["channel.open"], received=["channel.open-ok"])
    return ch


def pika_close_channel(c, ch):
    n = ch.channel_number
    ch.close()
    c.op(
        "channel.close",
        channel=n,
        sent=["channel.close"],
        received=["channel.close-ok"],
        reply_code=200,
        reply_text="Normal shutdown",
        closed_by="client",
    )


def pika_close(c, conn):
    conn.close()
    c.op(
        "connection.close",
        channel=0,
        sent=["connection.close"],
        received=["connection.close-ok"],
        reply_code=200,
        reply_text="Normal shutdown",
        closed_by="client",
    )
    c.d["outcome"] = {
        "opened": True,
        "closed_by": "client",
        "reply_code": 200,
        "reply_text": "Normal shutdown",
    }


def pika_channel_error(c, conn, what, fn, expect_code, **args):
    """Run fn(channel) on a fresh channel, expecting the broker to close it."""
    import pika.exceptions as pe

    ch = pika_channel(c, conn)
    n = ch.channel_number
    mname = what
    try:
        fn(ch)
        raise RuntimeError("expected channel error %d for %s" % (expect_code, what))
    except pe.ChannelClosedByBroker as e:
        code, text = e.reply_code, e.reply_text
    assert code == expect_code, (code, text)
    class_id, method_id = METHOD_IDS[mname]
    c.op(
        what,
        channel=n,
        sent=[mname, "channel.close-ok"],
        received=["channel.close"],
        expected_reply_code=expect_code,
        observed_reply_code=code,
        observed_reply_text=text,
        failing_class_id=class_id,
        failing_method_id=method_id,
        **args,
    )
    c.errors.append(
        {
            "level": "channel",
            "channel": n,
            "closed_by": "server",
            "reply_code": code,
            "reply_text": text,
            "class_id": class_id,
            "method_id": method_id,
            "method": mname,
        }
    )
    return code, text


# --------------------------------------------------------------------------
# Scenario: pika full
# --------------------------------------------------------------------------
def body_of(tag: str, n: int = 0) -> bytes:
    """Deterministic small body."""
    return ("amqpcap:%s:%04d" % (tag, n)).encode()


def scenario_pika_full(truth: Truth):
    import pika

    truth.d["client"] = {"library": "pika", "version": pika.__version__}
    hb = 2
    params = pika_params(heartbeat=hb, name="amqpcap-pika-full")
    c, conn = pika_connect(
        truth,
        params,
        "pika-full",
        {"heartbeat": hb, "frame_max": params.frame_max, "channel_max": params.channel_max},
    )

    ch = pika_channel(c, conn)
    n1 = ch.channel_number

    # return callback (basic.return outside confirm mode)
    returned = []
    ch.add_on_return_callback(lambda chan, method, props, body: returned.append((method, props, body)))

    # -- exchanges -------------------------------------------------------
    X = {
        "direct": "amqpcap.direct",
        "topic": "amqpcap.topic",
        "fanout": "amqpcap.fanout",
        "headers": "amqpcap.headers",
    }
    for kind, name in X.items():
        kw = dict(
            exchange=name,
            exchange_type=kind,
            passive=False,
            durable=(kind == "direct"),
            auto_delete=False,
            internal=False,
            arguments={"alternate-exchange": "amqpcap.fanout"} if kind == "headers" else None,
        )
        ch.exchange_declare(**kw)
        c.op(
            "exchange.declare",
            channel=n1,
            sent=["exchange.declare"],
            received=["exchange.declare-ok"],
            exchange=name,
            type=kind,
            passive=False,
            durable=kw["durable"],
            auto_delete=False,
            internal=False,
            arguments=kw["arguments"] or {},
        )

    # -- queues ----------------------------------------------------------
    Q_WORK = "amqpcap.q.work"
    Q_HDR = "amqpcap.q.headers"
    Q_BIG = "amqpcap.q.big"
    for qname, qargs in ((Q_WORK, None), (Q_HDR, {"x-message-ttl": 600000}), (Q_BIG, None)):
        r = ch.queue_declare(qname, durable=False, exclusive=False, auto_delete=False, arguments=qargs)
        c.op(
            "queue.declare",
            channel=n1,
            sent=["queue.declare"],
            received=["queue.declare-ok"],
            queue=qname,
            passive=False,
            durable=False,
            exclusive=False,
            auto_delete=False,
            arguments=qargs or {},
            observed_queue=r.method.queue,
            observed_message_count=r.method.message_count,
            observed_consumer_count=r.method.consumer_count,
        )
    r = ch.queue_declare("", exclusive=True)
    Q_ANON = r.method.queue
    c.op(
        "queue.declare",
        channel=n1,
        sent=["queue.declare"],
        received=["queue.declare-ok"],
        queue="",
        exclusive=True,
        server_named=True,
        observed_queue=Q_ANON,
    )
    c.d["server_named_queue"] = Q_ANON

    # -- bindings --------------------------------------------------------
    ch.queue_bind(Q_WORK, X["direct"], routing_key="work")
    c.op(
        "queue.bind",
        channel=n1,
        sent=["queue.bind"],
        received=["queue.bind-ok"],
        queue=Q_WORK,
        exchange=X["direct"],
        routing_key="work",
        arguments={},
    )
    ch.queue_bind(Q_ANON, X["fanout"], routing_key="")
    c.op(
        "queue.bind",
        channel=n1,
        sent=["queue.bind"],
        received=["queue.bind-ok"],
        queue=Q_ANON,
        exchange=X["fanout"],
        routing_key="",
        arguments={},
    )
    hdr_bind_args = {"x-match": "all", "kind": "report", "level": 3}
    ch.queue_bind(Q_HDR, X["headers"], routing_key="", arguments=hdr_bind_args)
    c.op(
        "queue.bind",
        channel=n1,
        sent=["queue.bind"],
        received=["queue.bind-ok"],
        queue=Q_HDR,
        exchange=X["headers"],
        routing_key="",
        arguments=hdr_bind_args,
    )
    ch.queue_bind(Q_BIG, X["direct"], routing_key="big")
    c.op(
        "queue.bind",
        channel=n1,
        sent=["queue.bind"],
        received=["queue.bind-ok"],
        queue=Q_BIG,
        exchange=X["direct"],
        routing_key="big",
        arguments={},
    )
    ch.exchange_bind(destination=X["fanout"], source=X["topic"], routing_key="audit.#")
    c.op(
        "exchange.bind",
        channel=n1,
        sent=["exchange.bind"],
        received=["exchange.bind-ok"],
        destination=X["fanout"],
        source=X["topic"],
        routing_key="audit.#",
        arguments={},
    )

    # -- qos -------------------------------------------------------------
    ch.basic_qos(prefetch_size=0, prefetch_count=5, global_qos=False)
    c.op(
        "basic.qos",
        channel=n1,
        sent=["basic.qos"],
        received=["basic.qos-ok"],
        prefetch_size=0,
        prefetch_count=5,
        global_=False,
    )

    # -- publish with every property -------------------------------------
    headers = {
        "str": "h\u00e9llo w\u00f6rld",
        "bytes": b"\x00\x01\x02\xfe\xff",
        "int_small": 42,
        "int_negative": -7,
        "int_int64": 2**40 + 123,
        "int_int64_negative": -(2**35),
        "bool_true": True,
        "bool_false": False,
        "decimal": decimal.Decimal("3.14159"),
        "decimal_negative": decimal.Decimal("-2.5"),
        "datetime": dt.datetime(2024, 2, 29, 12, 34, 56),
        "nested": {"a": 1, "b": "two", "c": {"deep": True}},
        "list": [1, "two", b"\x03", False, None, {"k": "v"}, [5, 6]],
        "none": None,
        "empty_str": "",
    }
    full_props = pika.BasicProperties(
        content_type="application/json",
        content_encoding="utf-8",
        headers=headers,
        delivery_mode=2,
        priority=7,
        correlation_id="corr-0001",
        reply_to="amqpcap.reply",
        expiration="600000",
        message_id="msg-full-0001",
        timestamp=1700000000,
        type="amqpcap.test.full",
        user_id=USER,
        app_id="amqpcap-recorder",
        cluster_id="amqpcap-cluster",
    )
    truth.note(
        "pika 1.4 cannot encode Python float in a field table "
        "(UnsupportedAMQPFieldException); decimals are sent as 'D' instead. "
        "py-amqp's capture has a 'd' double."
    )
    full_body = json.dumps({"hello": "world", "n": 1}, sort_keys=True).encode()
    pika_publish(c, ch, X["direct"], "work", full_body, full_props, note="every basic property set")
    work_bodies = [body_of("work", i) for i in range(1, 5)]
    for i, b in enumerate(work_bodies, 1):
        pika_publish(
            c, ch, X["direct"], "work", b, pika.BasicProperties(message_id="msg-work-%d" % i, delivery_mode=1)
        )
    pika_publish(
        c,
        ch,
        X["topic"],
        "audit.login",
        body_of("audit", 1),
        pika.BasicProperties(content_type="text/plain"),
        note="topic -> exchange binding -> fanout -> server-named queue",
    )
    pika_publish(
        c,
        ch,
        X["headers"],
        "",
        body_of("report", 1),
        pika.BasicProperties(headers={"kind": "report", "level": 3}),
        note="headers exchange match x-match=all",
    )
    pika_publish(
        c,
        ch,
        X["headers"],
        "",
        body_of("report-nomatch", 1),
        pika.BasicProperties(headers={"kind": "other"}),
        note="headers exchange no match -> alternate-exchange amqpcap.fanout -> server-named queue",
    )

    # -- consume: ack / nack(requeue) / nack / reject / reject(requeue) ---
    deliveries = []

    def on_msg(chan, method, props, body):
        deliveries.append((method, props, body))
        c.add_received(
            {
                "method": "basic.deliver",
                "channel": chan.channel_number,
                "consumer_tag": method.consumer_tag,
                "delivery_tag": method.delivery_tag,
                "redelivered": method.redelivered,
                "exchange": method.exchange,
                "routing_key": method.routing_key,
                "body_len": len(body),
                "body_sha256": sha256(body),
                "properties": pika_received_props(props),
            }
        )

    ctag = ch.basic_consume(Q_WORK, on_msg, auto_ack=False, exclusive=False, consumer_tag="amqpcap-ctag-1")
    c.op(
        "basic.consume",
        channel=n1,
        sent=["basic.consume"],
        received=["basic.consume-ok"],
        queue=Q_WORK,
        consumer_tag=ctag,
        no_ack=False,
        exclusive=False,
        no_local=False,
    )

    def pump_until(pred, limit=10.0):
        end = now() + limit
        while not pred():
            if now() > end:
                raise RuntimeError("timeout waiting in scenario")
            conn.process_data_events(time_limit=0.05)

    pump_until(lambda: len(deliveries) >= 5)
    tags = [m.delivery_tag for m, _, _ in deliveries[:5]]
    # tag of the full-properties message is tags[0] etc. (FIFO queue)
    ch.basic_ack(tags[0], multiple=False)
    c.op(
        "basic.ack",
        channel=n1,
        sent=["basic.ack"],
        delivery_tag=tags[0],
        multiple=False,
        body_sha256=sha256(deliveries[0][2]),
    )
    ch.basic_nack(tags[1], multiple=False, requeue=True)
    c.op(
        "basic.nack",
        channel=n1,
        sent=["basic.nack"],
        delivery_tag=tags[1],
        multiple=False,
        requeue=True,
        body_sha256=sha256(deliveries[1][2]),
    )
    ch.basic_nack(tags[2], multiple=False, requeue=False)
    c.op(
        "basic.nack",
        channel=n1,
        sent=["basic.nack"],
        delivery_tag=tags[2],
        multiple=False,
        requeue=False,
        body_sha256=sha256(deliveries[2][2]),
    )
    ch.basic_reject(tags[3], requeue=False)
    c.op(
        "basic.reject",
        channel=n1,
        sent=["basic.reject"],
        delivery_tag=tags[3],
        requeue=False,
        body_sha256=sha256(deliveries[3][2]),
    )
    ch.basic_reject(tags[4], requeue=True)
    c.op(
        "basic.reject",
        channel=n1,
        sent=["basic.reject"],
        delivery_tag=tags[4],
        requeue=True,
        body_sha256=sha256(deliveries[4][2]),
    )
    pump_until(lambda: len(deliveries) >= 7)
    re = deliveries[5:7]
    assert all(m.redelivered for m, _, _ in re), "expected redeliveries"
    last = max(m.delivery_tag for m, _, _ in re)
    ch.basic_ack(last, multiple=True)
    c.op(
        "basic.ack",
        channel=n1,
        sent=["basic.ack"],
        delivery_tag=last,
        multiple=True,
        covers_delivery_tags=sorted(m.delivery_tag for m, _, _ in re),
    )
    ch.basic_cancel(ctag)
    c.op("basic.cancel", channel=n1, sent=["basic.cancel"], received=["basic.cancel-ok"], consumer_tag=ctag)
    ch.basic_recover(requeue=True)
    c.op(
        "basic.recover",
        channel=n1,
        sent=["basic.recover"],
        received=["basic.recover-ok"],
        requeue=True,
        note="nothing unacked at this point",
    )

    # -- basic.get / get-empty ------------------------------------------
    def do_get(queue, auto_ack):
        m, p, b = ch.basic_get(queue, auto_ack=auto_ack)
        if m is None:
            c.op(
                "basic.get",
                channel=n1,
                sent=["basic.get"],
                received=["basic.get-empty"],
                queue=queue,
                no_ack=auto_ack,
                observed="get-empty",
            )
            return None
        c.op(
            "basic.get",
            channel=n1,
            sent=["basic.get"],
            received=[],
            queue=queue,
            no_ack=auto_ack,
            observed="get-ok",
            delivery_tag=m.delivery_tag,
            received_index=len(c.received),
        )
        c.add_received(
            {
                "method": "basic.get-ok",
                "channel": n1,
                "delivery_tag": m.delivery_tag,
                "redelivered": m.redelivered,
                "exchange": m.exchange,
                "routing_key": m.routing_key,
                "message_count": m.message_count,
                "body_len": len(b),
                "body_sha256": sha256(b),
                "properties": pika_received_props(p),
            }
        )
        return m

    m = do_get(Q_ANON, auto_ack=False)
    ch.basic_ack(m.delivery_tag)
    c.op("basic.ack", channel=n1, sent=["basic.ack"], delivery_tag=m.delivery_tag, multiple=False)
    # second message in the server-named queue: the alternate-exchange one
    do_get(Q_ANON, auto_ack=True)
    do_get(Q_ANON, auto_ack=True)  # -> get-empty
    do_get(Q_HDR, auto_ack=True)
    do_get(Q_HDR, auto_ack=True)  # -> get-empty

    # -- basic.return (mandatory, unroutable, no confirms) ---------------
    pika_publish(
        c,
        ch,
        X["direct"],
        "no.such.route",
        body_of("unroutable", 1),
        pika.BasicProperties(message_id="msg-unroutable-1"),
        mandatory=True,
        note="mandatory + unroutable -> basic.return 312 NO_ROUTE",
    )
    pump_until(lambda: len(returned) >= 1)
    rm, rp, rb = returned[0]
    c.add_received(
        {
            "method": "basic.return",
            "channel": n1,
            "reply_code": rm.reply_code,
            "reply_text": rm.reply_text,
            "exchange": rm.exchange,
            "routing_key": rm.routing_key,
            "body_len": len(rb),
            "body_sha256": sha256(rb),
            "properties": pika_received_props(rp),
        }
    )
    c.errors.append(
        {
            "level": "message",
            "method": "basic.return",
            "channel": n1,
            "reply_code": rm.reply_code,
            "reply_text": rm.reply_text,
        }
    )

    # -- body larger than frame_max ------------------------------------
    big = random.Random(91).randbytes(300 * 1024)
    fm = c.d["negotiated"]["frame_max"]
    per_frame = fm - 8
    nframes = -(-len(big) // per_frame)
    e = pika_publish(
        c,
        ch,
        X["direct"],
        "big",
        big,
        pika.BasicProperties(content_type="application/octet-stream", message_id="msg-big-1"),
        note="body > frame_max: %d body frames of <= %d bytes" % (nframes, per_frame),
    )
    e["expected_body_frames"] = nframes
    m = do_get(Q_BIG, auto_ack=True)
    c.received[-1]["expected_body_frames"] = nframes

    # -- queue.purge -----------------------------------------------------
    for i in (1, 2):
        pika_publish(c, ch, X["direct"], "work", body_of("purge-me", i))
    r = ch.queue_purge(Q_WORK)
    c.op(
        "queue.purge",
        channel=n1,
        sent=["queue.purge"],
        received=["queue.purge-ok"],
        queue=Q_WORK,
        observed_message_count=r.method.message_count,
        expected_message_count=2,
    )

    # -- unbinds ---------------------------------------------------------
    ch.queue_unbind(Q_HDR, X["headers"], routing_key="", arguments=hdr_bind_args)
    c.op(
        "queue.unbind",
        channel=n1,
        sent=["queue.unbind"],
        received=["queue.unbind-ok"],
        queue=Q_HDR,
        exchange=X["headers"],
        routing_key="",
        arguments=hdr_bind_args,
    )
    ch.exchange_unbind(destination=X["fanout"], source=X["topic"], routing_key="audit.#")
    c.op(
        "exchange.unbind",
        channel=n1,
        sent=["exchange.unbind"],
        received=["exchange.unbind-ok"],
        destination=X["fanout"],
        source=X["topic"],
        routing_key="audit.#",
        arguments={},
    )

    # -- publisher confirms with acks, nacks and a return --------------
    ch2 = pika_channel(c, conn)
    n2 = ch2.channel_number
    ch2.confirm_delivery()
    c.op("confirm.select", channel=n2, sent=["confirm.select"], received=["confirm.select-ok"], nowait=False)
    Q_LIM = "amqpcap.q.limited"
    lim_args = {"x-max-length": 1, "x-overflow": "reject-publish"}
    ch2.queue_declare(Q_LIM, arguments=lim_args)
    c.op(
        "queue.declare",
        channel=n2,
        sent=["queue.declare"],
        received=["queue.declare-ok"],
        queue=Q_LIM,
        arguments=lim_args,
    )
    tag = 0
    confirm_plan = [
        ("", Q_WORK, "confirm-work", 1, False),
        ("", Q_WORK, "confirm-work", 2, False),
        ("", Q_WORK, "confirm-work", 3, False),
        ("", Q_LIM, "confirm-limited", 1, False),
        ("", Q_LIM, "confirm-limited", 2, False),
        ("", Q_LIM, "confirm-limited", 3, False),
        (X["direct"], "no.such.route", "confirm-unroutable", 1, True),
    ]
    for exch, rk, label, i, mand in confirm_plan:
        tag += 1
        pika_publish(
            c,
            ch2,
            exch,
            rk,
            body_of(label, i),
            pika.BasicProperties(message_id="%s-%d" % (label, i)),
            mandatory=mand,
            confirm_tag=tag,
        )
    conf = [p for p in c.publishes if p["channel"] == n2]
    c.d["confirms"] = {
        "channel": n2,
        "publishes": len(conf),
        "acks": sum(1 for p in conf if p["confirm"]["outcome"] in ("ack", "return+ack")),
        "nacks": sum(1 for p in conf if p["confirm"]["outcome"] == "nack"),
        "returns": sum(1 for p in conf if p["confirm"]["outcome"] == "return+ack"),
        "outcomes_by_delivery_tag": {
            str(p["confirm"]["delivery_tag"]): p["confirm"]["outcome"] for p in conf
        },
        "note": "pika BlockingChannel waits for each confirm before the next "
        "publish, so each ack/nack covers exactly one tag (multiple=false "
        "expected but not guaranteed by the broker)",
    }
    for p in conf:
        if p["confirm"]["outcome"] == "nack":
            c.errors.append(
                {
                    "level": "message",
                    "method": "basic.nack",
                    "channel": n2,
                    "delivery_tag": p["confirm"]["delivery_tag"],
                    "reason": "x-overflow reject-publish on x-max-length 1",
                }
            )
        if p["confirm"]["outcome"] == "return+ack":
            c.errors.append(
                {
                    "level": "message",
                    "method": "basic.return",
                    "channel": n2,
                    "reply_code": 312,
                    "reply_text": "NO_ROUTE",
                }
            )

    # -- transactions ----------------------------------------------------
    ch3 = pika_channel(c, conn)
    n3 = ch3.channel_number
    ch3.tx_select()
    c.op("tx.select", channel=n3, sent=["tx.select"], received=["tx.select-ok"])
    for i in (1, 2):
        pika_publish(c, ch3, X["direct"], "work", body_of("tx-commit", i), tx="committed")
    ch3.tx_commit()
    c.op("tx.commit", channel=n3, sent=["tx.commit"], received=["tx.commit-ok"])
    pika_publish(c, ch3, X["direct"], "work", body_of("tx-rollback", 1), tx="rolled back")
    ch3.tx_rollback()
    c.op("tx.rollback", channel=n3, sent=["tx.rollback"], received=["tx.rollback-ok"])

    # -- idle so heartbeats flow ----------------------------------------
    idle = 5.0
    t0 = now()
    conn.sleep(idle)
    c.op(
        "idle",
        channel=0,
        seconds=idle,
        started=round(t0, 6),
        note="no AMQP methods; heartbeat frames (type 8, channel 0) both ways",
    )
    c.d["heartbeat_idle"] = {
        "seconds": idle,
        "started": round(t0, 6),
        "interval": c.d["negotiated"]["heartbeat"],
        "min_heartbeats_each_way_during_idle": 3,
    }

    # -- channel errors --------------------------------------------------
    pika_channel_error(
        c,
        conn,
        "queue.declare",
        lambda x: x.queue_declare("amqpcap.q.missing", passive=True),
        404,
        queue="amqpcap.q.missing",
        passive=True,
    )
    pika_channel_error(
        c,
        conn,
        "queue.declare",
        lambda x: x.queue_declare(Q_WORK, arguments={"x-max-length": 10}),
        406,
        queue=Q_WORK,
        arguments={"x-max-length": 10},
        note="redeclare with different arguments",
    )
    pika_channel_error(
        c,
        conn,
        "exchange.declare",
        lambda x: x.exchange_declare("amq.amqpcap", "direct"),
        403,
        exchange="amq.amqpcap",
        type="direct",
        note="amq.* names are reserved",
    )

    # -- cleanup ---------------------------------------------------------
    for q in (Q_WORK, Q_HDR, Q_BIG, Q_LIM):
        r = ch.queue_delete(q)
        c.op(
            "queue.delete",
            channel=n1,
            sent=["queue.delete"],
            received=["queue.delete-ok"],
            queue=q,
            if_unused=False,
            if_empty=False,
            observed_message_count=r.method.message_count,
        )
    for name in X.values():
        ch.exchange_delete(name)
        c.op(
            "exchange.delete",
            channel=n1,
            sent=["exchange.delete"],
            received=["exchange.delete-ok"],
            exchange=name,
            if_unused=False,
        )
    for chx in (ch3, ch2, ch):
        pika_close_channel(c, chx)
    pika_close(c, conn)
    c.d["expected_queue_depths_before_delete"] = {
        Q_WORK: "3 confirmed + 2 committed = 5",
        Q_LIM: 1,
        Q_HDR: 0,
        Q_BIG: 0,
    }


# --------------------------------------------------------------------------
# Scenario: py-amqp
# --------------------------------------------------------------------------
def pyamqp_received_props(props):
    """py-amqp calls the headers property 'application_headers'."""
    out = {}
    for k, v in props.items():
        out["headers" if k == "application_headers" else k] = plain_json(v)
    return out


def raw_body(msg):
    """py-amqp leaves body == '' (a str) when a message has no body frame."""
    b = msg.body
    return b.encode() if isinstance(b, str) else bytes(b)


def scenario_pyamqp_basic(truth: Truth):
    import amqp

    truth.d["client"] = {"library": "py-amqp", "version": amqp.__version__}
    n_before = len(PORT_LOG)
    c = truth.conn(
        "py-amqp",
        label="pyamqp-basic",
        client_version=amqp.__version__,
        user=USER,
        password=PASSWORD,
        mechanism="AMQPLAIN",
        vhost=VHOST,
        protocol_header_sent="414d515000000901",
        requested={"heartbeat": 0, "frame_max": 131072, "channel_max": None},
    )
    conn = amqp.Connection(
        "%s:%d" % (HOST, PORT),
        userid=USER,
        password=PASSWORD,
        virtual_host=VHOST,
        login_method="AMQPLAIN",
        heartbeat=0,
        confirm_publish=True,
        client_properties={"connection_name": "amqpcap-pyamqp-basic"},
    )
    conn.connect()
    c.d["client_port"] = conn.transport.sock.getsockname()[1]
    assert PORT_LOG[n_before:] in ([], [c.d["client_port"]])
    c.d["server_port"] = PORT
    c.d["client_properties_sent"] = plain_json(conn.client_properties)
    c.d["server_properties_received"] = plain_json(conn.server_properties)
    c.d["negotiated"] = {
        "channel_max": conn.channel_max,
        "frame_max": conn.frame_max,
        "heartbeat": conn.heartbeat,
    }
    c.op(
        "connect",
        channel=0,
        sent=["connection.start-ok", "connection.tune-ok", "connection.open"],
        received=["connection.start", "connection.tune", "connection.open-ok"],
        vhost=VHOST,
        user=USER,
        mechanism="AMQPLAIN",
        negotiated=c.d["negotiated"],
        note="AMQPLAIN: the start-ok response is a field table LOGIN/PASSWORD",
    )

    ch = conn.channel()
    ch.auto_decode = False  # keep bodies as the bytes received
    n1 = ch.channel_id
    c.op("channel.open", channel=n1, sent=["channel.open"], received=["channel.open-ok"])
    EX = "amqpcap.pyamqp.topic"
    Q = "amqpcap.pyamqp.q"
    ch.exchange_declare(EX, "topic", durable=False, auto_delete=False)
    c.op(
        "exchange.declare",
        channel=n1,
        sent=["exchange.declare"],
        received=["exchange.declare-ok"],
        exchange=EX,
        type="topic",
        durable=False,
        auto_delete=False,
    )
    r = ch.queue_declare(Q, durable=False, exclusive=False, auto_delete=False)
    c.op(
        "queue.declare",
        channel=n1,
        sent=["queue.declare"],
        received=["queue.declare-ok"],
        queue=Q,
        observed_queue=r.queue,
    )
    ch.queue_bind(Q, EX, routing_key="orders.*")
    c.op(
        "queue.bind",
        channel=n1,
        sent=["queue.bind"],
        received=["queue.bind-ok"],
        queue=Q,
        exchange=EX,
        routing_key="orders.*",
    )
    ch.basic_qos(prefetch_size=0, prefetch_count=10, a_global=False)
    c.op(
        "basic.qos",
        channel=n1,
        sent=["basic.qos"],
        received=["basic.qos-ok"],
        prefetch_size=0,
        prefetch_count=10,
        global_=False,
    )

    headers = {
        "str": "text",
        "bytes_as_S": b"\x01\x02raw",
        "int": 7,
        "int64": 2**40,
        "float": 1.5,
        "bool": True,
        "decimal": decimal.Decimal("12.50"),
        "datetime": dt.datetime(2024, 1, 2, 3, 4, 5),
        "nested": {"x": 1},
        "list": [1, "a", 2.25],
        "none": None,
    }
    truth.note(
        "py-amqp writes bytes header values as 'S' (not 'x'), ints beyond "
        "int32 as 'L' (not 'l'), floats as 'd'. RabbitMQ passes them through."
    )

    def props_json(props):
        out = {}
        for k, v in props.items():
            if k == "application_headers":
                typed, enc = pyamqp_typed_table(v)
                out["headers"] = typed
                out["headers_encoded_len"] = len(enc)
                out["headers_encoded_sha256"] = sha256(enc)
            else:
                out[k] = v
        return out

    def publish(body, rk, props, exchange=EX, mandatory=False):
        msg = amqp.Message(body, **props)
        tagn = sum(1 for p in c.publishes if "confirm" in p) + 1
        entry = {
            "index": len(c.publishes),
            "channel": n1,
            "exchange": exchange,
            "routing_key": rk,
            "mandatory": mandatory,
            "immediate": False,
            "body_len": len(body),
            "body_sha256": sha256(body),
            "properties": props_json(props),
        }
        if len(body) <= 64:
            entry["body_hex"] = body.hex()
        if tagn == 1:
            c.op(
                "confirm.select",
                channel=n1,
                sent=["confirm.select"],
                received=["confirm.select-ok"],
                note="py-amqp sends confirm.select implicitly before the first "
                "publish when confirm_publish=True",
            )
        outcome = "ack"
        try:
            ch.basic_publish(msg, exchange=exchange, routing_key=rk, mandatory=mandatory)
        except amqp.exceptions.MessageNacked:
            outcome = "nack"
        entry["confirm"] = {"delivery_tag": tagn, "outcome": outcome}
        c.publishes.append(entry)
        c.op(
            "basic.publish",
            channel=n1,
            sent=["basic.publish"],
            received=["basic.ack" if outcome == "ack" else "basic.nack"],
            exchange=exchange,
            routing_key=rk,
            body_len=len(body),
            body_sha256=entry["body_sha256"],
            publish_index=entry["index"],
            confirm=entry["confirm"],
        )

    publish(
        b'{"order":1}',
        "orders.new",
        {
            "content_type": "application/json",
            "delivery_mode": 2,
            "message_id": "pyamqp-1",
            "correlation_id": "c-1",
            "reply_to": "amqpcap.pyamqp.replies",
            "timestamp": 1709251200,
            "application_headers": headers,
            "priority": 3,
            "type": "order",
        },
    )
    publish(b'{"order":2}', "orders.paid", {"content_type": "application/json", "message_id": "pyamqp-2"})
    publish(b"", "orders.empty", {"message_id": "pyamqp-3-empty-body"})
    publish(body_of("pyamqp", 4) * 10, "orders.bulk", {"message_id": "pyamqp-4"})

    got = []

    def cb(msg):
        got.append(msg)
        di = msg.delivery_info
        c.add_received(
            {
                "method": "basic.deliver",
                "channel": n1,
                "consumer_tag": di.get("consumer_tag"),
                "delivery_tag": di["delivery_tag"],
                "redelivered": di["redelivered"],
                "exchange": di["exchange"],
                "routing_key": di["routing_key"],
                "body_len": len(msg.body),
                "body_sha256": sha256(raw_body(msg)),
                "properties": pyamqp_received_props(msg.properties),
            }
        )

    ctag = ch.basic_consume(Q, callback=cb, no_ack=False, consumer_tag="pyamqp-ctag")
    c.op(
        "basic.consume",
        channel=n1,
        sent=["basic.consume"],
        received=["basic.consume-ok"],
        queue=Q,
        consumer_tag=ctag,
        no_ack=False,
    )
    end = now() + 10
    while len(got) < 3 and now() < end:
        conn.drain_events(timeout=1)
    t1, t2, t3 = (m.delivery_info["delivery_tag"] for m in got[:3])
    ch.basic_ack(t1)
    c.op("basic.ack", channel=n1, sent=["basic.ack"], delivery_tag=t1, multiple=False)
    ch.basic_reject(t2, requeue=False)
    c.op("basic.reject", channel=n1, sent=["basic.reject"], delivery_tag=t2, requeue=False)
    ch.basic_ack(t3)
    c.op("basic.ack", channel=n1, sent=["basic.ack"], delivery_tag=t3, multiple=False)
    ch.basic_cancel(ctag)
    c.op("basic.cancel", channel=n1, sent=["basic.cancel"], received=["basic.cancel-ok"], consumer_tag=ctag)
    # messages prefetched but not acked get requeued on cancel? No: they stay
    # unacked on the channel until ack/close. Ack the 4th if it was delivered.
    if len(got) >= 4:
        t4 = got[3].delivery_info["delivery_tag"]
        ch.basic_ack(t4)
        c.op("basic.ack", channel=n1, sent=["basic.ack"], delivery_tag=t4, multiple=False)
        after_cancel = "empty"
    else:
        after_cancel = "one message"
    # basic.get: one message left? (4 published, prefetch 10 => all 4 delivered)
    m = ch.basic_get(Q, no_ack=True)
    if m is None:
        c.op(
            "basic.get",
            channel=n1,
            sent=["basic.get"],
            received=["basic.get-empty"],
            queue=Q,
            no_ack=True,
            observed="get-empty",
        )
    else:
        c.op(
            "basic.get", channel=n1, sent=["basic.get"], received=[], queue=Q, no_ack=True, observed="get-ok"
        )
        c.add_received(
            {
                "method": "basic.get-ok",
                "channel": n1,
                "delivery_tag": m.delivery_info["delivery_tag"],
                "body_len": len(m.body),
                "body_sha256": sha256(raw_body(m)),
            }
        )
    c.d["queue_after_cancel"] = after_cancel
    # publish once more then get it
    publish(body_of("pyamqp-get", 1), "orders.get", {"message_id": "pyamqp-5", "expiration": "60000"})
    m = None
    for _ in range(20):
        m = ch.basic_get(Q, no_ack=False)
        if m is not None:
            break
        c.op(
            "basic.get",
            channel=n1,
            sent=["basic.get"],
            received=["basic.get-empty"],
            queue=Q,
            no_ack=False,
            observed="get-empty (retry)",
        )
        time.sleep(0.05)
    c.op("basic.get", channel=n1, sent=["basic.get"], received=[], queue=Q, no_ack=False, observed="get-ok")
    c.add_received(
        {
            "method": "basic.get-ok",
            "channel": n1,
            "delivery_tag": m.delivery_info["delivery_tag"],
            "message_count": m.delivery_info.get("message_count"),
            "redelivered": m.delivery_info.get("redelivered"),
            "exchange": m.delivery_info.get("exchange"),
            "routing_key": m.delivery_info.get("routing_key"),
            "body_len": len(m.body),
            "body_sha256": sha256(raw_body(m)),
            "properties": pyamqp_received_props(m.properties),
        }
    )
    ch.basic_ack(m.delivery_info["delivery_tag"])
    c.op(
        "basic.ack",
        channel=n1,
        sent=["basic.ack"],
        delivery_tag=m.delivery_info["delivery_tag"],
        multiple=False,
    )
    r = ch.queue_delete(Q)
    c.op(
        "queue.delete",
        channel=n1,
        sent=["queue.delete"],
        received=["queue.delete-ok"],
        queue=Q,
        observed_message_count=r,
    )
    ch.exchange_delete(EX)
    c.op(
        "exchange.delete", channel=n1, sent=["exchange.delete"], received=["exchange.delete-ok"], exchange=EX
    )
    ch.close()
    c.op(
        "channel.close",
        channel=n1,
        sent=["channel.close"],
        received=["channel.close-ok"],
        reply_code=0,
        closed_by="client",
        note="py-amqp channel.close sends reply_code 0, empty reply_text",
    )
    conn.close()
    c.op(
        "connection.close",
        channel=0,
        sent=["connection.close"],
        received=["connection.close-ok"],
        reply_code=0,
        closed_by="client",
        note="py-amqp connection.close sends reply_code 0, empty reply_text",
    )
    c.d["outcome"] = {"opened": True, "closed_by": "client", "reply_code": 0}
    c.d["confirms"] = {
        "channel": n1,
        "publishes": len(c.publishes),
        "acks": sum(1 for p in c.publishes if p["confirm"]["outcome"] == "ack"),
        "nacks": sum(1 for p in c.publishes if p["confirm"]["outcome"] == "nack"),
    }


# --------------------------------------------------------------------------
# Scenario: refused connections
# --------------------------------------------------------------------------
def scenario_pika_refused(truth: Truth):
    import amqp
    import pika
    import pika.exceptions as pe

    truth.d["client"] = {
        "library": "pika+py-amqp+raw socket",
        "version": {"pika": pika.__version__, "py-amqp": amqp.__version__},
    }

    # 1. pika, wrong password -> 403 ACCESS_REFUSED (connection.close from broker)
    n_before = len(PORT_LOG)
    c = truth.conn(
        "pika",
        label="wrong-password",
        client_version=pika.__version__,
        user=USER,
        password=WRONG_PASSWORD,
        mechanism="PLAIN",
        vhost=VHOST,
        protocol_header_sent="414d515000000901",
    )
    try:
        pika.BlockingConnection(pika_params(password=WRONG_PASSWORD))
        raise RuntimeError("login with a wrong password succeeded")
    except pe.ProbableAuthenticationError as e:
        exc = repr(e)
    except pe.AMQPConnectionError as e:
        exc = repr(e)
    c.d["client_port"] = PORT_LOG[n_before] if len(PORT_LOG) > n_before else None
    c.d["server_port"] = PORT
    c.op(
        "connect",
        channel=0,
        sent=["connection.start-ok"],
        received=["connection.start", "connection.close"],
        client_exception=exc,
        expected_reply_code=403,
        expected_reply_text_prefix="ACCESS_REFUSED",
    )
    c.d["outcome"] = {
        "opened": False,
        "closed_by": "server",
        "reply_code": 403,
        "reply_text_prefix": "ACCESS_REFUSED",
        "note": "broker sends connection.close(403) right after "
        "start-ok because the client announced the "
        "authentication_failure_close capability",
    }
    c.errors.append(
        {
            "level": "connection",
            "closed_by": "server",
            "reply_code": 403,
            "reply_text_prefix": "ACCESS_REFUSED",
            "class_id": 0,
            "method_id": 0,
        }
    )
    time.sleep(0.3)

    # 2. pika, right password, vhost without permission -> 530 NOT_ALLOWED
    n_before = len(PORT_LOG)
    c = truth.conn(
        "pika",
        label="vhost-not-allowed",
        client_version=pika.__version__,
        user=USER,
        password=PASSWORD,
        mechanism="PLAIN",
        vhost=FORBIDDEN_VHOST,
        protocol_header_sent="414d515000000901",
    )
    try:
        pika.BlockingConnection(pika_params(vhost=FORBIDDEN_VHOST))
        raise RuntimeError("vhost access succeeded")
    except pe.AMQPConnectionError as e:
        exc = repr(e)
    c.d["client_port"] = PORT_LOG[n_before] if len(PORT_LOG) > n_before else None
    c.d["server_port"] = PORT
    c.op(
        "connect",
        channel=0,
        sent=["connection.start-ok", "connection.tune-ok", "connection.open"],
        received=["connection.start", "connection.tune", "connection.close"],
        client_exception=exc,
        expected_reply_code=530,
        expected_reply_text_prefix="NOT_ALLOWED",
        vhost=FORBIDDEN_VHOST,
    )
    c.d["outcome"] = {
        "opened": False,
        "closed_by": "server",
        "reply_code": 530,
        "reply_text_prefix": "NOT_ALLOWED",
    }
    c.errors.append(
        {"level": "connection", "closed_by": "server", "reply_code": 530, "reply_text_prefix": "NOT_ALLOWED"}
    )
    time.sleep(0.3)

    # 3. py-amqp AMQPLAIN, wrong password -> 403
    n_before = len(PORT_LOG)
    c = truth.conn(
        "py-amqp",
        label="wrong-password-amqplain",
        client_version=amqp.__version__,
        user=USER,
        password=WRONG_PASSWORD,
        mechanism="AMQPLAIN",
        vhost=VHOST,
        protocol_header_sent="414d515000000901",
    )
    conn = amqp.Connection(
        "%s:%d" % (HOST, PORT),
        userid=USER,
        password=WRONG_PASSWORD,
        virtual_host=VHOST,
        login_method="AMQPLAIN",
        connect_timeout=5,
    )
    try:
        conn.connect()
        raise RuntimeError("py-amqp login with a wrong password succeeded")
    except amqp.exceptions.AccessRefused as e:
        exc = repr(e)
    c.d["client_port"] = PORT_LOG[n_before] if len(PORT_LOG) > n_before else None
    c.d["server_port"] = PORT
    c.op(
        "connect",
        channel=0,
        sent=["connection.start-ok", "connection.close-ok"],
        received=["connection.start", "connection.close"],
        client_exception=exc,
        expected_reply_code=403,
        expected_reply_text_prefix="ACCESS_REFUSED",
    )
    c.d["outcome"] = {
        "opened": False,
        "closed_by": "server",
        "reply_code": 403,
        "reply_text_prefix": "ACCESS_REFUSED",
    }
    c.errors.append(
        {
            "level": "connection",
            "closed_by": "server",
            "reply_code": 403,
            "reply_text_prefix": "ACCESS_REFUSED",
        }
    )
    try:
        conn.collect()
    except Exception:
        pass
    time.sleep(0.3)

    # 4./5. raw sockets announcing other protocol versions
    for label, hdr in (
        ("amqp-0-10-header", b"AMQP\x01\x01\x00\x0a"),
        ("amqp-1-0-header", b"AMQP\x00\x01\x00\x00"),
    ):
        s = socket.create_connection((HOST, PORT), timeout=5, source_address=(SOURCE["addr"], 0))
        port = s.getsockname()[1]
        s.sendall(hdr)
        reply = b""
        try:
            while True:
                d = s.recv(64)
                if not d:
                    break
                reply += d
            end_reason = "FIN"
        except TimeoutError:
            end_reason = "timeout"
        except ConnectionResetError:
            end_reason = "RST"
        s.close()
        c = truth.conn(
            "raw-socket",
            label=label,
            client_port=port,
            server_port=PORT,
            protocol_header_sent=hdr.hex(),
            protocol_header_received=reply.hex(),
            socket_end_observed=end_reason,
        )
        c.op(
            "protocol-header",
            channel=None,
            sent=[],
            received=[],
            header_sent=hdr.hex(),
            header_received=reply.hex(),
            note="broker answers with the header it supports and closes the socket",
        )
        c.d["outcome"] = {"opened": False, "closed_by": "server", "reason": "protocol header rejected"}
        time.sleep(0.3)


def wait_broker_quiet(src, limit=120.0):
    """The memory alarm blocks every publisher on the node: wait until the
    only AMQP connections are ours, so other users of the broker are not hit."""
    end = now() + limit
    while True:
        r = run(["rabbitmqctl", "-q", "list_connections", "peer_host"], check=False, quiet=True)
        hosts = [l.strip() for l in r.stdout.splitlines() if l.strip() and l.strip() != "peer_host"]
        others = [h for h in hosts if h != src]
        if r.returncode == 0 and not others:
            return True
        if now() > end:
            log("other connections still open:", others)
            return False
        time.sleep(1.0)


# --------------------------------------------------------------------------
# Scenario: connection.blocked / unblocked
# --------------------------------------------------------------------------
def scenario_pika_blocked(truth: Truth):
    import pika

    truth.d["client"] = {"library": "pika", "version": pika.__version__}
    params = pika_params(heartbeat=0, name="amqpcap-pika-blocked")
    c, conn = pika_connect(
        truth,
        params,
        "pika-blocked",
        {"heartbeat": 0, "frame_max": params.frame_max, "channel_max": params.channel_max},
    )
    events = []

    def on_blocked(_conn, m):
        events.append(("blocked", now(), m.method.reason))
        c.add_received({"method": "connection.blocked", "channel": 0, "reason": m.method.reason})
        c.errors.append({"level": "connection", "method": "connection.blocked", "reason": m.method.reason})

    def on_unblocked(_conn, m):
        events.append(("unblocked", now(), None))
        c.add_received({"method": "connection.unblocked", "channel": 0})

    conn.add_on_connection_blocked_callback(on_blocked)
    conn.add_on_connection_unblocked_callback(on_unblocked)
    ch = pika_channel(c, conn)
    n1 = ch.channel_number
    Q = "amqpcap.q.blocked"
    ch.queue_declare(Q)
    c.op("queue.declare", channel=n1, sent=["queue.declare"], received=["queue.declare-ok"], queue=Q)
    for i in (1, 2, 3):
        pika_publish(c, ch, "", Q, body_of("before-alarm", i))
    conn.process_data_events(0.2)
    quiet = wait_broker_quiet(SOURCE["addr"])
    if not quiet:
        truth.note(
            "other clients were connected to the broker when the memory "
            "alarm was raised; they were blocked too"
        )
    try:
        t_alarm = now()
        ctl("set_vm_memory_high_watermark", "0.0000001")
        c.op(
            "broker memory alarm set",
            channel=None,
            command="rabbitmqctl set_vm_memory_high_watermark 0.0000001",
            started=round(t_alarm, 6),
        )
        time.sleep(1.0)
        pika_publish(
            c,
            ch,
            "",
            Q,
            body_of("during-alarm", 1),
            note="written to the socket while blocked; the broker stops reading until the alarm clears",
        )
        end = now() + 10
        while not events and now() < end:
            conn.process_data_events(0.1)
        conn.process_data_events(1.5)
    finally:
        t_clear = now()
        ctl("set_vm_memory_high_watermark", DEFAULT_WATERMARK)
    c.op(
        "broker memory alarm cleared",
        channel=None,
        command="rabbitmqctl set_vm_memory_high_watermark " + DEFAULT_WATERMARK,
        started=round(t_clear, 6),
    )
    end = now() + 10
    while len(events) < 2 and now() < end:
        conn.process_data_events(0.1)
    for i in (1, 2):
        pika_publish(c, ch, "", Q, body_of("after-alarm", i))
    conn.process_data_events(0.3)
    r = ch.queue_delete(Q)
    c.op(
        "queue.delete",
        channel=n1,
        sent=["queue.delete"],
        received=["queue.delete-ok"],
        queue=Q,
        observed_message_count=r.method.message_count,
        expected_message_count=6,
    )
    pika_close_channel(c, ch)
    pika_close(c, conn)
    c.d["blocked_events_observed_by_client"] = [
        {"event": e, "ts": round(t, 6), "reason": r} for e, t, r in events
    ]
    if len(events) >= 2:
        c.d["blocked_duration_client_s"] = round(events[1][1] - events[0][1], 6)
    else:
        truth.note("WARNING: connection.blocked/unblocked not both observed: %r" % events)


# --------------------------------------------------------------------------
# Scenario: throughput (2 connections)
# --------------------------------------------------------------------------
def scenario_pika_throughput(truth: Truth, n_messages=1200, batch=100, rpc_every=100, pause=0.15):
    import pika

    truth.d["compact_json"] = True
    truth.d["client"] = {"library": "pika", "version": pika.__version__}
    Q = "amqpcap.q.tp"
    REPLY_Q = "amqpcap.q.tp.replies"
    ack_every = 10
    # consumer connects first (tcp_stream 0), publisher second (tcp_stream 1)
    cc, cconn = pika_connect(
        truth, pika_params(heartbeat=0, name="amqpcap-tp-consumer"), "tp-consumer", {"heartbeat": 0}
    )
    cch = pika_channel(cc, cconn)
    cn = cch.channel_number
    cch.queue_declare(Q)
    cc.op("queue.declare", channel=cn, sent=["queue.declare"], received=["queue.declare-ok"], queue=Q)
    cch.queue_declare(REPLY_Q)
    cc.op("queue.declare", channel=cn, sent=["queue.declare"], received=["queue.declare-ok"], queue=REPLY_Q)
    cch.basic_qos(prefetch_count=50)
    cc.op("basic.qos", channel=cn, sent=["basic.qos"], received=["basic.qos-ok"], prefetch_count=50)

    pc, pconn = pika_connect(
        truth, pika_params(heartbeat=0, name="amqpcap-tp-publisher"), "tp-publisher", {"heartbeat": 0}
    )
    pch = pika_channel(pc, pconn)
    pn = pch.channel_number

    done = threading.Event()
    state = {"n": 0, "pending_tag": None, "since_ack": 0}
    threading.Lock()

    def on_msg(chan, method, props, body):
        cc.add_received(
            {
                "method": "basic.deliver",
                "channel": cn,
                "consumer_tag": method.consumer_tag,
                "delivery_tag": method.delivery_tag,
                "redelivered": method.redelivered,
                "exchange": method.exchange,
                "routing_key": method.routing_key,
                "body_len": len(body),
                "body_sha256": sha256(body),
                "message_id": props.message_id,
            }
        )
        state["n"] += 1
        state["since_ack"] += 1
        if props.reply_to:
            reply = b"reply:" + body
            pika_publish(
                cc,
                chan,
                "",
                props.reply_to,
                reply,
                pika.BasicProperties(
                    correlation_id=props.correlation_id, message_id="reply-" + props.message_id
                ),
                note="RPC reply",
            )
        if state["since_ack"] >= ack_every or state["n"] == n_messages:
            chan.basic_ack(method.delivery_tag, multiple=True)
            cc.op(
                "basic.ack",
                channel=cn,
                sent=["basic.ack"],
                delivery_tag=method.delivery_tag,
                multiple=True,
                covers=state["since_ack"],
            )
            state["since_ack"] = 0
        if state["n"] >= n_messages:
            done.set()

    ctag = cch.basic_consume(Q, on_msg, auto_ack=False, consumer_tag="tp-consumer")
    cc.op(
        "basic.consume",
        channel=cn,
        sent=["basic.consume"],
        received=["basic.consume-ok"],
        queue=Q,
        consumer_tag=ctag,
        no_ack=False,
    )

    def consumer_loop():
        while not done.is_set():
            cconn.process_data_events(0.05)

    th = threading.Thread(target=consumer_loop, daemon=True)
    th.start()

    # publisher: own reply consumer
    replies = []

    def on_reply(chan, method, props, body):
        pc.add_received(
            {
                "method": "basic.deliver",
                "channel": pn,
                "consumer_tag": method.consumer_tag,
                "delivery_tag": method.delivery_tag,
                "redelivered": method.redelivered,
                "exchange": method.exchange,
                "routing_key": method.routing_key,
                "body_len": len(body),
                "body_sha256": sha256(body),
                "correlation_id": props.correlation_id,
            }
        )
        replies.append(props.correlation_id)

    rtag = pch.basic_consume(REPLY_Q, on_reply, auto_ack=True, consumer_tag="tp-replies")
    pc.op(
        "basic.consume",
        channel=pn,
        sent=["basic.consume"],
        received=["basic.consume-ok"],
        queue=REPLY_Q,
        consumer_tag=rtag,
        no_ack=True,
    )
    t_start = now()
    for i in range(1, n_messages + 1):
        body = ("tp-%05d-" % i).encode().ljust(32, b".")
        kw = {"message_id": "tp-%05d" % i, "timestamp": 1700000000 + i, "delivery_mode": 1}
        if i % rpc_every == 0:
            kw["reply_to"] = REPLY_Q
            kw["correlation_id"] = "rpc-%05d" % i
        pika_publish(pc, pch, "", Q, body, pika.BasicProperties(**kw))
        if i % batch == 0:
            pconn.sleep(pause)
    end = now() + 30
    while (not done.is_set() or len(replies) < n_messages // rpc_every) and now() < end:
        pconn.process_data_events(0.05)
    th.join(10)
    t_end = now()
    pch.basic_cancel(rtag)
    pc.op("basic.cancel", channel=pn, sent=["basic.cancel"], received=["basic.cancel-ok"], consumer_tag=rtag)
    cch.basic_cancel(ctag)
    cc.op("basic.cancel", channel=cn, sent=["basic.cancel"], received=["basic.cancel-ok"], consumer_tag=ctag)
    for q in (Q, REPLY_Q):
        r = cch.queue_delete(q)
        cc.op(
            "queue.delete",
            channel=cn,
            sent=["queue.delete"],
            received=["queue.delete-ok"],
            queue=q,
            observed_message_count=r.method.message_count,
        )
    pika_close_channel(pc, pch)
    pika_close(pc, pconn)
    pika_close_channel(cc, cch)
    pika_close(cc, cconn)
    truth.d["throughput"] = {
        "messages": n_messages,
        "body_len": 32,
        "publish_batch": batch,
        "rpc_every": rpc_every,
        "pause_between_batches_s": pause,
        "rpc_requests": n_messages // rpc_every,
        "rpc_replies_received": len(replies),
        "consumer_prefetch": 50,
        "consumer_ack_every": ack_every,
        "consumer_acks_multiple": True,
        "publisher_connection": 1,
        "consumer_connection": 0,
        "client_seconds": round(t_end - t_start, 6),
        "deliveries_received": state["n"],
    }


# --------------------------------------------------------------------------
# tshark cross-check (information only)
# --------------------------------------------------------------------------
def tshark_crosscheck(pcap, truth_json):
    if not shutil.which("tshark"):
        return {"tool": None, "note": "tshark not installed"}
    ver = run(["tshark", "-v"], check=False, quiet=True).stdout.splitlines()[0]
    r = run(
        [
            "tshark",
            "-r",
            pcap,
            "-o",
            "tcp.desegment_tcp_streams:TRUE",
            "-Y",
            "amqp",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=,",
            "-e",
            "tcp.stream",
            "-e",
            "tcp.srcport",
            "-e",
            "amqp.type",
            "-e",
            "amqp.method.class",
            "-e",
            "amqp.method.method",
        ],
        check=False,
        quiet=True,
    )
    per = collections.defaultdict(lambda: {"c2s": [], "s2c": collections.Counter(), "hb_c2s": 0, "hb_s2c": 0})
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if len(f) < 5 or not f[0]:
            continue
        stream = int(f[0].split(",")[0])
        c2s = int(f[1].split(",")[0]) != PORT
        types_ = [t for t in f[2].split(",") if t]
        classes = [x for x in f[3].split(",") if x]
        meths = [x for x in f[4].split(",") if x]
        p = per[stream]
        hb = sum(1 for t in types_ if t == "8")
        if c2s:
            p["hb_c2s"] += hb
        else:
            p["hb_s2c"] += hb
        for cl, me in zip(classes, meths):
            name = METHODS.get((int(cl), int(me)), "%s.%s" % (cl, me))
            if c2s:
                p["c2s"].append(name)
            else:
                p["s2c"][name] += 1
    out = {"tool": ver, "connections": []}
    ok_all = True
    for conn in truth_json["connections"]:
        s = conn["tcp_stream"]
        p = per.get(s)
        if p is None:
            out["connections"].append({"tcp_stream": s, "seen": False})
            if conn["client"] != "raw-socket":
                ok_all = False
            continue
        exp_c2s = conn["c2s_methods"]
        c2s_ok = p["c2s"] == exp_c2s
        s2c_ok = dict(p["s2c"]) == conn["s2c_method_counts"]
        ok_all &= c2s_ok and s2c_ok
        e = {
            "tcp_stream": s,
            "seen": True,
            "c2s_sequence_matches": c2s_ok,
            "s2c_counts_match": s2c_ok,
            "heartbeats_c2s": p["hb_c2s"],
            "heartbeats_s2c": p["hb_s2c"],
        }
        if not c2s_ok:
            e["tshark_c2s"] = p["c2s"]
        if not s2c_ok:
            e["tshark_s2c_counts"] = dict(sorted(p["s2c"].items()))
        out["connections"].append(e)
    out["all_match"] = ok_all
    ex = run(["tshark", "-r", pcap, "-q", "-z", "expert"], check=False, quiet=True).stdout
    lost = [l.strip() for l in ex.splitlines() if "not captured" in l or "unseen segment" in l]
    out["tcp_segments_missing"] = lost
    if lost:
        out["all_match"] = False
    return out


# --------------------------------------------------------------------------
SCENARIOS = {
    "pika_full": (
        scenario_pika_full,
        "pika BlockingConnection, one connection: handshake with connection_name, "
        "4 exchange types, named and server-named queues, bindings (queue and "
        "exchange-to-exchange, headers), qos, a publish with every basic property "
        "and a headers table of every type pika encodes, consume with ack / "
        "nack(requeue) / nack / reject / reject(requeue), redelivery, recover, "
        "get / get-empty, mandatory return, 300 KiB body over several body frames, "
        "purge, unbinds, publisher confirms with acks, nacks (x-overflow "
        "reject-publish) and a return, tx select/commit/rollback, 5 s idle with "
        "heartbeat=2, channel errors 404/406/403, deletes, clean close.",
        False,
    ),
    "pyamqp_basic": (
        scenario_pyamqp_basic,
        "py-amqp (celery/amqp) one connection, AMQPLAIN login, heartbeat 0, "
        "topic exchange, declare/bind/qos, publisher confirms (implicit "
        "confirm.select), headers with py-amqp's type letters, empty body, "
        "consume/ack/reject, get-empty and get-ok, deletes, close with "
        "reply code 0.",
        False,
    ),
    "pika_refused": (
        scenario_pika_refused,
        "five short connections: pika wrong password (403 ACCESS_REFUSED), "
        "pika vhost without permission (530 NOT_ALLOWED), py-amqp AMQPLAIN "
        "wrong password (403), raw socket sending an AMQP 0-10 header and one "
        "sending an AMQP 1.0 header (broker answers with its 0-9-1 header and "
        "closes).",
        False,
    ),
    "pika_blocked": (
        scenario_pika_blocked,
        "pika connection publishing while the broker's memory alarm is raised "
        "with rabbitmqctl set_vm_memory_high_watermark 0.0000001 and then "
        "cleared: connection.blocked then connection.unblocked.",
        False,
    ),
    "pika_throughput": (
        scenario_pika_throughput,
        "two pika connections: consumer (stream 0, prefetch 50, ack "
        "multiple every 10) and publisher (stream 1): 1500 messages of 32 "
        "bytes with message_id and timestamp, every 100th an RPC request "
        "(reply_to + correlation_id) answered by the consumer. Nanosecond "
        "pcap.",
        True,
    ),
}


SOURCE_ADDRS = {
    "pika_full": "127.0.91.1",
    "pyamqp_basic": "127.0.91.2",
    "pika_refused": "127.0.91.3",
    "pika_blocked": "127.0.91.4",
    "pika_throughput": "127.0.91.5",
}


def record(name, outdir, binfo):
    fn, desc, nano = SCENARIOS[name]
    src = SOURCE_ADDRS[name]
    SOURCE["addr"] = src
    base = "rabbitmq091_%s" % name
    pcap = os.path.join(outdir, base + ".pcap")
    truth_path = os.path.join(outdir, base + ".truth.json")
    reset_broker_state()
    truth = Truth(name, base + ".pcap", desc)
    truth.d["broker"] = binfo
    truth.d["python"] = platform.python_version()
    truth.d["client_address"] = src
    truth.d["server"]["address"] = HOST
    truth.d["credentials"] = {
        "user": USER,
        "password": PASSWORD,
        "wrong_password": WRONG_PASSWORD,
        "vhost": VHOST,
        "note": "PLAIN and AMQPLAIN carry the password in clear "
        "in connection.start-ok; decoded output must "
        "never contain it",
    }
    log("=== scenario", name, "->", pcap)
    with Tcpdump(pcap, src, nano=nano) as td:
        time.sleep(0.2)
        fn(truth)
        time.sleep(0.3)
    truth.d["capture_info"] = {
        "command": " ".join(td.cmd),
        "filter": td.filter,
        "interface": "lo",
        "linktype": "EN10MB",
        "timestamp_precision": "ns" if nano else "us",
        "tcpdump_stderr": td.stats(),
        "file_size": os.path.getsize(pcap),
    }
    tj = truth.as_json()
    tj["crosscheck"] = tshark_crosscheck(pcap, tj)
    with open(truth_path, "w") as f:
        if tj.get("compact_json"):
            json.dump(tj, f, separators=(",", ":"), default=str)
        else:
            json.dump(tj, f, indent=1, sort_keys=False, default=str)
        f.write("\n")
    log(
        "wrote",
        pcap,
        os.path.getsize(pcap),
        "bytes;",
        truth_path,
        os.path.getsize(truth_path),
        "bytes; tshark crosscheck all_match =",
        tj["crosscheck"].get("all_match"),
    )
    return tj


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="captures/")
    ap.add_argument(
        "--only", default=",".join(SCENARIOS), help="comma-separated subset of: " + ", ".join(SCENARIOS)
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        log("warning: not root; tcpdump and rabbitmqctl usually need root")
    os.makedirs(args.out, exist_ok=True)
    ensure_broker()
    install_socket_tracing()
    binfo = broker_info()
    log("broker", binfo)
    bad = []
    for name in args.only.split(","):
        name = name.strip()
        if not name:
            continue
        tj = record(name, args.out, binfo)
        if not tj["crosscheck"].get("all_match", True):
            bad.append(name)
    if bad:
        log("tshark cross-check differs for:", bad, "(see crosscheck in the truth files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
