#!/usr/bin/env python3
"""Record a real RabbitMQ bulk capture for the benchmarks, with a truth file, and check it.

Usage (as root, from the repository root, with the project's venv: pika, amqp and kombu)::

    .venv/bin/python bench/record_bulk.py                     # ~35 MB: bench/data/rabbit_bulk_35mb.pcap
    .venv/bin/python bench/record_bulk.py --mb 100
    .venv/bin/python bench/record_bulk.py --profile small     # 128..1024 B bodies: rabbit_small_35mb.pcap
    .venv/bin/python bench/record_bulk.py --verify-only bench/data/rabbit_bulk_35mb.pcap

then ``python bench/bench_dissect.py --capture bench/data/rabbit_bulk_35mb.pcap --runs 2``.

What it does: starts RabbitMQ if needed and tcpdump on lo (the helpers of
``captures/record/record_091.py``: every client socket is bound to its own loopback source
address, 127.0.93.1 for ``bulk`` and .2 for ``small``, and tcpdump filters on it), in a vhost and
user of its own (``amqpcap-bulk``: the 0-9-1 recorder and the live tests reset ``amqpcap``).
Then the traffic of a busy broker, every connection in its own thread:

- ``setup`` (pika) declares a topic exchange, three work queues, a get queue and an RPC queue;
- five publishers with publisher confirms: three pika BlockingConnections (no properties;
  basic properties; properties and a headers table, plus a few mandatory unroutable publishes that
  come back as basic.return), one py-amqp and one kombu (if installed) connection;
- consumers with prefetch and manual acks: pika acking every message, pika acking ``multiple``
  every 10, py-amqp acking ``multiple`` every 5; a pika basic.get loop (get-ok / get-empty);
- RPC: a pika client publishing requests with reply_to / correlation_id to a pika server that
  answers on the client's exclusive server-named queue;
- ``teardown`` (pika) deletes the queues (checking they are empty) and the exchange.

Bodies are seeded random bytes of mixed sizes (``bulk``: mostly 32..384 B, 1 % up to 64 KiB and
one in 10000 above frame-max 131072, so several body frames; ``small``: 128..1024 B); the number
of messages is sized so the capture is about ``--mb`` MB. The truth file next to the capture
(``.truth.json``) holds, per connection, what the client sent and received: method counts,
messages confirmed / acked (what ``multiple`` acks cover), and per content method the count,
body bytes and a digest of the sorted body SHA-256s. Afterwards the script runs
``amqpcap dissect --frames``, reads the Parquet tables with pyarrow, prints truth against tables,
and exits 1 on any difference (also on dropped packets or anomaly rows).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import hashlib
import importlib.util
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VHOST = "amqpcap-bulk"
USER = "amqpcap-bulk"
PASSWORD = "bulk-s3cret"
SOURCE_ADDRS = {"bulk": "127.0.93.1", "small": "127.0.93.2"}
EXCHANGE = "bulk.topic"
WORK_QUEUES = ["bulk.work.0", "bulk.work.1", "bulk.work.2"]
GET_QUEUE = "bulk.get"
RPC_QUEUE = "bulk.rpc"
FRAME_MAX = 131072
# estimated capture bytes per message besides its body (twice on the wire): method and header frames
# both ways, confirm and consumer acks, Ethernet/IP/TCP headers of ~6 packets; calibrated on a 3 MB run
OVERHEAD = 860
DEADLINE_S = 1800
LO_SNAPLEN = 14 + 65536  # Ethernet header + lo's MTU: whole packets


def load_recorder():
    """captures/record/record_091.py: broker start, tcpdump, source-address binding."""
    spec = importlib.util.spec_from_file_location(
        "record_091", ROOT / "captures" / "record" / "record_091.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rec = load_recorder()


def log(*a):
    print("[record_bulk]", *a, file=sys.stderr, flush=True)


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def digest(hashes) -> str:
    """Order-independent digest of a multiset of body SHA-256s (deliveries interleave)."""
    return sha256("\n".join(sorted(hashes)).encode())


# --------------------------------------------------------------------------
# What each connection did, from the client side
# --------------------------------------------------------------------------
class Conn:
    def __init__(self, label, client, version, role):
        self.d = {"label": label, "client": client, "client_version": version, "role": role}
        self.c2s = collections.Counter()
        self.s2c = collections.Counter()
        self.content = collections.defaultdict(list)  # "c2s basic.publish" -> [body sha256, ...]
        self.content_bytes = collections.Counter()
        self.acked = 0  # deliveries / get-oks this client acked (what its basic.ack cover)
        self.confirmed = 0  # its publishes the broker confirmed (what the broker's basic.ack cover)
        self.lock = threading.Lock()

    def sent(self, method, n=1):
        self.c2s[method] += n

    def got(self, method, n=1):
        self.s2c[method] += n

    def body(self, direction, method, body):
        key = "%s %s" % (direction, method)
        self.content[key].append(sha256(body))
        self.content_bytes[key] += len(body)

    def as_json(self):
        d = dict(self.d)
        d["c2s_method_counts"] = dict(sorted(self.c2s.items()))
        d["s2c_method_counts"] = dict(sorted(self.s2c.items()))
        d["messages_acked_by_client"] = self.acked
        d["publishes_confirmed_by_broker"] = self.confirmed
        d["content"] = {
            k: {"count": len(v), "body_bytes": self.content_bytes[k], "body_sha256_digest": digest(v)}
            for k, v in sorted(self.content.items())
        }
        return d


class Scenario:
    """The message plan, the connections and their threads."""

    def __init__(self, args):
        self.args = args
        self.conns: list[Conn] = []
        self.errors: list[str] = []
        self.rng = random.Random(args.seed)
        self.blob = self.rng.randbytes((1 << 20) + 512 * 1024)
        self.plan = self.make_plan()

    # ---- the plan: (publisher, routing key, body) -------------------------
    def body_size(self, i):
        r = self.rng
        if self.args.profile == "small":
            return r.randint(128, 1024)
        if i % 10000 == 1000:
            return r.randint(FRAME_MAX + 1, 3 * FRAME_MAX)  # several body frames
        # mostly small (a production capture of 35 MB had 194k packets and 60k message rows), with a tail
        x = r.random()
        if x < 0.001:
            lo, hi = 16384, 65536
        elif x < 0.011:
            lo, hi = 1024, 16384
        else:
            lo, hi = 32, 384
        return int(lo * (hi / lo) ** r.random())  # log-uniform

    def body(self, i, size):
        head = b"msg-%07d " % i
        off = self.rng.randrange(0, len(self.blob) - size)
        return (head + self.blob[off : off + size])[:size]

    def make_plan(self):
        a = self.args
        target = a.mb * 1e6
        pubs = ["pika-raw", "pika-props", "pika-headers", "pyamqp", "kombu"]
        weights = [30, 25, 20, 15, 10]
        plan = {p: [] for p in pubs}
        est, i = 0.0, 0
        while est < target * 0.98:  # the RPC and get traffic make up the rest
            size = self.body_size(i)
            pub = self.rng.choices(pubs, weights)[0]
            q = self.rng.choices([0, 1, 2, 3], [32, 32, 32, 4])[0]
            rk = "get.%d" % i if q == 3 else "work.%d.%s" % (q, pub)
            plan[pub].append((rk, self.body(i, size)))
            est += 2 * size + OVERHEAD
            i += 1
        self.n_rpc = max(20, i // 100)
        return plan

    def expected(self):
        """Messages each queue will hold, from the plan."""
        n = collections.Counter()
        for msgs in self.plan.values():
            for rk, _ in msgs:
                n[GET_QUEUE if rk.startswith("get.") else WORK_QUEUES[int(rk.split(".")[1])]] += 1
        return n

    # ---- connections ------------------------------------------------------
    def new_conn(self, label, client, version, role, connect):
        """Connect (in the main thread, one after the other, so tcp_stream == connect order)."""
        n_before = len(rec.PORT_LOG)
        c = Conn(label, client, version, role)
        handle = connect()
        ports = rec.PORT_LOG[n_before:]
        if len(ports) != 1:
            raise RuntimeError("%s: expected one new client socket, saw ports %r" % (label, ports))
        c.d["client_port"] = ports[0]
        c.d["tcp_stream"] = len(self.conns)
        self.conns.append(c)
        return c, handle

    def pika(self, label, role):
        import pika

        params = pika.ConnectionParameters(
            host=rec.HOST,
            port=rec.PORT,
            virtual_host=VHOST,
            credentials=pika.PlainCredentials(USER, PASSWORD),
            client_properties={"connection_name": "amqpcap-bulk-" + label},
            heartbeat=30,
            connection_attempts=1,
            socket_timeout=10,
        )
        return self.new_conn(label, "pika", pika.__version__, role, lambda: pika.BlockingConnection(params))

    def pyamqp(self, label, role, confirm=False):
        import amqp

        def connect():
            conn = amqp.Connection(
                host="%s:%d" % (rec.HOST, rec.PORT),
                userid=USER,
                password=PASSWORD,
                virtual_host=VHOST,
                heartbeat=0,
                confirm_publish=confirm,
                client_properties={"connection_name": "amqpcap-bulk-" + label},
            )
            conn.connect()
            return conn

        return self.new_conn(label, "py-amqp", amqp.__version__, role, connect)

    def kombu(self, label, role):
        import kombu

        def connect():
            conn = kombu.Connection(
                hostname=rec.HOST,
                port=rec.PORT,
                userid=USER,
                password=PASSWORD,
                virtual_host=VHOST,
                transport="pyamqp",
                heartbeat=0,
                transport_options={"confirm_publish": True},
            )
            conn.connect()
            return conn

        return self.new_conn(label, "kombu", kombu.__version__, role, connect)

    def thread(self, name, fn, *args):
        def body():
            try:
                fn(*args)
            except Exception as e:  # reported, and the run fails
                self.errors.append("%s: %r" % (name, e))
                log("ERROR in", name, repr(e))

        t = threading.Thread(target=body, name=name, daemon=True)
        t.start()
        return t


# --------------------------------------------------------------------------
# The clients
# --------------------------------------------------------------------------
def pika_channel(c, conn):
    ch = conn.channel()
    c.sent("channel.open")
    c.got("channel.open-ok")
    return ch


def close_connection(c, conn, ch):
    """Close the channel and the connection (pika or py-amqp), in the truth too."""
    ch.close()
    c.sent("channel.close")
    c.got("channel.close-ok")
    conn.close()
    c.sent("connection.close")
    c.got("connection.close-ok")


def run_setup(c, conn):
    ch = pika_channel(c, conn)
    ch.exchange_declare(EXCHANGE, "topic", durable=True)
    c.sent("exchange.declare")
    c.got("exchange.declare-ok")
    for i, q in enumerate(WORK_QUEUES):
        ch.queue_declare(q, durable=True)
        ch.queue_bind(q, EXCHANGE, "work.%d.#" % i)
    ch.queue_declare(GET_QUEUE, durable=True)
    ch.queue_bind(GET_QUEUE, EXCHANGE, "get.#")
    ch.queue_declare(RPC_QUEUE)
    c.sent("queue.declare", 5)
    c.got("queue.declare-ok", 5)
    c.sent("queue.bind", 4)
    c.got("queue.bind-ok", 4)
    close_connection(c, conn, ch)


def run_pika_publisher(c, conn, msgs, kind, unroutable=0):
    import pika
    from pika.exceptions import NackError, UnroutableError

    ch = pika_channel(c, conn)
    ch.confirm_delivery()
    c.sent("confirm.select")
    c.got("confirm.select-ok")

    def publish(rk, body, props, mandatory=False):
        c.sent("basic.publish")
        c.body("c2s", "basic.publish", body)
        try:
            ch.basic_publish(EXCHANGE, rk, body, props, mandatory)
            c.confirmed += 1
        except UnroutableError as e:
            c.confirmed += 1  # basic.return, then basic.ack
            for m in e.messages:
                c.got("basic.return")
                c.body("s2c", "basic.return", m.body)
        except NackError:
            c.got("basic.nack")

    for i, (rk, body) in enumerate(msgs):
        props = None
        if kind != "raw":
            props = pika.BasicProperties(
                content_type="application/octet-stream",
                delivery_mode=2,
                message_id="%s-%06d" % (c.d["label"], i),
                timestamp=int(time.time()),
                app_id="amqpcap-bulk",
            )
            if kind == "headers":
                props.headers = {"seq": i, "tenant": "t%d" % (i % 7), "retry": False, "trace": {"hop": 1}}
        publish(rk, body, props)
        if unroutable and i % max(1, len(msgs) // unroutable) == 0 and c.s2c["basic.return"] < unroutable:
            publish("nowhere.%d" % i, body[:100], props, mandatory=True)
    close_connection(c, conn, ch)


def run_pika_consumer(c, conn, queue, expected, prefetch, ack_every, deadline):
    ch = pika_channel(c, conn)
    ch.basic_qos(prefetch_count=prefetch)
    c.sent("basic.qos")
    c.got("basic.qos-ok")
    st = {"n": 0, "pending": 0}

    def on_msg(chan, method, props, body):
        c.got("basic.deliver")
        c.body("s2c", "basic.deliver", body)
        st["n"] += 1
        st["pending"] += 1
        if st["pending"] >= ack_every or st["n"] == expected:
            chan.basic_ack(method.delivery_tag, multiple=ack_every > 1)
            c.sent("basic.ack")
            c.acked += st["pending"]
            st["pending"] = 0

    tag = ch.basic_consume(queue, on_msg, auto_ack=False)
    c.sent("basic.consume")
    c.got("basic.consume-ok")
    while st["n"] < expected and time.time() < deadline:
        conn.process_data_events(0.1)
    ch.basic_cancel(tag)
    c.sent("basic.cancel")
    c.got("basic.cancel-ok")
    close_connection(c, conn, ch)


def run_pyamqp_publisher(c, conn, msgs):
    import amqp

    ch = conn.channel()  # confirm_publish: py-amqp sends confirm.select when the channel opens
    c.sent("channel.open")
    c.got("channel.open-ok")
    c.sent("confirm.select")
    c.got("confirm.select-ok")
    for i, (rk, body) in enumerate(msgs):
        msg = amqp.Message(
            body,
            content_type="application/octet-stream",
            message_id="pyamqp-%06d" % i,
            application_headers={"seq": i, "source": "py-amqp"},
        )
        c.sent("basic.publish")
        c.body("c2s", "basic.publish", body)
        ch.basic_publish(msg, exchange=EXCHANGE, routing_key=rk)
        c.confirmed += 1  # basic_publish_confirm raises on a nack
    close_connection(c, conn, ch)


def run_pyamqp_consumer(c, conn, queue, expected, prefetch, ack_every, deadline):

    ch = conn.channel()
    c.sent("channel.open")
    c.got("channel.open-ok")
    ch.basic_qos(0, prefetch, False)
    c.sent("basic.qos")
    c.got("basic.qos-ok")
    st = {"n": 0, "pending": 0}

    def on_msg(msg):
        c.got("basic.deliver")
        c.body("s2c", "basic.deliver", msg.body)
        st["n"] += 1
        st["pending"] += 1
        if st["pending"] >= ack_every or st["n"] == expected:
            ch.basic_ack(msg.delivery_tag, multiple=True)
            c.sent("basic.ack")
            c.acked += st["pending"]
            st["pending"] = 0

    tag = ch.basic_consume(queue, callback=on_msg, no_ack=False)
    c.sent("basic.consume")
    c.got("basic.consume-ok")
    while st["n"] < expected and time.time() < deadline:
        try:
            conn.drain_events(timeout=0.2)
        except TimeoutError:
            pass
    ch.basic_cancel(tag)
    c.sent("basic.cancel")
    c.got("basic.cancel-ok")
    close_connection(c, conn, ch)


def run_kombu_publisher(c, conn, msgs):
    from kombu import Producer

    prod = Producer(conn.default_channel, auto_declare=False)
    c.sent("channel.open")
    c.sent("confirm.select")
    for i, (rk, body) in enumerate(msgs):
        c.sent("basic.publish")
        c.body("c2s", "basic.publish", body)
        prod.publish(
            body,
            exchange=EXCHANGE,
            routing_key=rk,
            content_type="application/octet-stream",
            content_encoding="binary",
            headers={"task": "bulk.process", "id": "kombu-%06d" % i},
            message_id="kombu-%06d" % i,
        )
        c.confirmed += 1
    conn.release()
    c.sent("connection.close")


def run_getter(c, conn, expected, deadline):
    ch = pika_channel(c, conn)
    n = 0
    while n < expected and time.time() < deadline:
        method, _props, body = ch.basic_get(GET_QUEUE, auto_ack=False)
        c.sent("basic.get")
        if method is None:
            c.got("basic.get-empty")
            conn.sleep(0.05)
            continue
        c.got("basic.get-ok")
        c.body("s2c", "basic.get-ok", body)
        n += 1
        ch.basic_ack(method.delivery_tag)
        c.sent("basic.ack")
        c.acked += 1
    close_connection(c, conn, ch)


def run_rpc_server(c, conn, done, deadline):
    import pika

    ch = pika_channel(c, conn)
    ch.basic_qos(prefetch_count=10)
    c.sent("basic.qos")
    c.got("basic.qos-ok")

    def on_req(chan, method, props, body):
        c.got("basic.deliver")
        c.body("s2c", "basic.deliver", body)
        reply = b'{"ok":true,"len":%d,"echo":"%s"}' % (len(body), body[:16].hex().encode())
        chan.basic_publish(
            "", props.reply_to, reply, pika.BasicProperties(correlation_id=props.correlation_id)
        )
        c.sent("basic.publish")
        c.body("c2s", "basic.publish", reply)
        chan.basic_ack(method.delivery_tag)
        c.sent("basic.ack")
        c.acked += 1

    tag = ch.basic_consume(RPC_QUEUE, on_req, auto_ack=False)
    c.sent("basic.consume")
    c.got("basic.consume-ok")
    while not done.is_set() and time.time() < deadline:
        conn.process_data_events(0.1)
    ch.basic_cancel(tag)
    c.sent("basic.cancel")
    c.got("basic.cancel-ok")
    close_connection(c, conn, ch)


def run_rpc_client(c, conn, n, rng, done, deadline):
    import pika

    ch = pika_channel(c, conn)
    reply_q = ch.queue_declare("", exclusive=True).method.queue
    c.sent("queue.declare")
    c.got("queue.declare-ok")
    replies = {}

    def on_reply(chan, method, props, body):
        c.got("basic.deliver")
        c.body("s2c", "basic.deliver", body)
        replies[props.correlation_id] = body

    ch.basic_consume(reply_q, on_reply, auto_ack=True)
    c.sent("basic.consume")
    c.got("basic.consume-ok")
    try:
        for i in range(n):
            corr = "rpc-%05d" % i
            body = json.dumps({"call": "lookup", "id": i, "pad": "x" * rng.randint(32, 400)}).encode()
            ch.basic_publish("", RPC_QUEUE, body, pika.BasicProperties(reply_to=reply_q, correlation_id=corr))
            c.sent("basic.publish")
            c.body("c2s", "basic.publish", body)
            while corr not in replies and time.time() < deadline:
                conn.process_data_events(0.05)
            if corr not in replies:
                raise RuntimeError("no reply to %s" % corr)
    finally:
        done.set()
    c.d["rpc_calls"] = n
    close_connection(c, conn, ch)


def run_teardown(c, conn):
    ch = pika_channel(c, conn)
    left = {}
    for q in [*WORK_QUEUES, GET_QUEUE, RPC_QUEUE]:
        left[q] = ch.queue_delete(q).method.message_count
        c.sent("queue.delete")
        c.got("queue.delete-ok")
    ch.exchange_delete(EXCHANGE)
    c.sent("exchange.delete")
    c.got("exchange.delete-ok")
    c.d["messages_left_in_queues"] = left
    close_connection(c, conn, ch)
    if any(left.values()):
        raise RuntimeError("messages left in queues: %r" % left)


# --------------------------------------------------------------------------
def run_scenario(s: Scenario):
    deadline = time.time() + DEADLINE_S
    exp = s.expected()
    c, h = s.pika("setup", "declares exchange, queues, bindings")
    run_setup(c, h)
    # connect everyone first (tcp_stream order = connect order), then let them run at once
    start = []
    roles = {
        "pika-raw": "publisher, confirms, no properties, a few mandatory unroutable",
        "pika-props": "publisher, confirms, basic properties",
        "pika-headers": "publisher, confirms, properties and a headers table",
    }
    for label, kind in (("pika-raw", "raw"), ("pika-props", "props"), ("pika-headers", "headers")):
        c, h = s.pika(label, roles[label])
        start.append((label, run_pika_publisher, c, h, s.plan[label], kind, 10 if kind == "raw" else 0))
    c, h = s.pyamqp("pyamqp", "publisher, confirm_publish, application_headers", confirm=True)
    start.append(("pyamqp", run_pyamqp_publisher, c, h, s.plan["pyamqp"]))
    try:
        import kombu  # noqa: F401

        c, h = s.kombu("kombu", "publisher (Producer), confirm_publish, headers")
        start.append(("kombu", run_kombu_publisher, c, h, s.plan["kombu"]))
    except ImportError:
        log("kombu not installed: its messages go through the py-amqp publisher")
        start[-1] = start[-1][:4] + (s.plan["pyamqp"] + s.plan["kombu"],)
    q0, q1, q2 = WORK_QUEUES
    c, h = s.pika("consumer-0", "consumer, prefetch 100, ack each")
    start.append(("consumer-0", run_pika_consumer, c, h, q0, exp[q0], 100, 1, deadline))
    c, h = s.pika("consumer-1", "consumer, prefetch 50, ack multiple every 10")
    start.append(("consumer-1", run_pika_consumer, c, h, q1, exp[q1], 50, 10, deadline))
    c, h = s.pyamqp("consumer-2", "py-amqp consumer, prefetch 20, ack multiple every 5")
    start.append(("consumer-2", run_pyamqp_consumer, c, h, q2, exp[q2], 20, 5, deadline))
    c, h = s.pika("getter", "basic.get loop, ack each")
    start.append(("getter", run_getter, c, h, exp[GET_QUEUE], deadline))
    done = threading.Event()
    c, h = s.pika("rpc-server", "RPC server: consume, reply to reply_to, ack")
    start.append(("rpc-server", run_rpc_server, c, h, done, deadline))
    c, h = s.pika("rpc-client", "RPC client: exclusive reply queue, reply_to + correlation_id")
    start.append(
        ("rpc-client", run_rpc_client, c, h, s.n_rpc, random.Random(s.args.seed + 1), done, deadline)
    )
    t0 = time.time()
    threads = [s.thread(name, fn, *a) for name, fn, *a in start]
    for t in threads:
        t.join(max(1.0, deadline - time.time()))
        if t.is_alive():
            s.errors.append("%s did not finish in %d s" % (t.name, DEADLINE_S))
    elapsed = time.time() - t0
    c, h = s.pika("teardown", "deletes queues (all empty) and the exchange")
    try:
        run_teardown(c, h)
    except Exception as e:
        s.errors.append("teardown: %r" % e)
    return elapsed


# --------------------------------------------------------------------------
# Check the recording: amqpcap dissect + the Parquet tables against the truth
# --------------------------------------------------------------------------
def ack_coverage(rows):
    """Messages covered by basic.ack rows of one channel and direction, in stream order."""
    covered, high = 0, 0
    for tag, multiple in rows:
        if multiple:
            covered += max(0, tag - high)
        else:
            covered += 1
        high = max(high, tag)
    return covered


def amqpcap_cmd(args):
    if args.amqpcap:
        return [args.amqpcap]
    near = Path(sys.executable).with_name("amqpcap")
    return [str(near)] if near.exists() else ["amqpcap"]


def read_tables(cap, args):
    import pyarrow.parquet as pq

    out = tempfile.mkdtemp(prefix="record-bulk-")
    try:
        cmd = [*amqpcap_cmd(args), "dissect", cap, "-o", os.path.join(out, "t"), "--frames", "--force", "-q"]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        log("$", " ".join(cmd), "->", r.returncode, "(%.1f s)" % (time.time() - t0))
        if r.returncode:
            raise SystemExit("amqpcap dissect failed: %s" % r.stderr.strip())

        def table(name, cols):
            return pq.read_table(os.path.join(out, "t", name), columns=cols).to_pydict()

        return {
            "connections": table("connections", ["tcp_stream", "client_ip", "client_port"]),
            "methods": table(
                "methods",
                ["tcp_stream", "direction", "channel", "stream_offset", "method", "delivery_tag", "multiple"],
            ),
            "messages": table(
                "messages",
                ["tcp_stream", "direction", "method", "body_size", "body_received", "body_hash", "complete"],
            ),
            "anomalies": table("anomalies", ["tcp_stream", "kind", "detail"]),
            "frames": table("frames", ["type_name"]),
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)


def observed(tables):
    """Per tcp_stream: the same figures as the truth, from the tables."""
    per = collections.defaultdict(
        lambda: {
            "c2s": collections.Counter(),
            "s2c": collections.Counter(),
            "acks": collections.defaultdict(list),
        }
    )
    m = tables["methods"]
    order = sorted(range(len(m["method"])), key=lambda i: (m["tcp_stream"][i], m["stream_offset"][i]))
    for i in order:
        p = per[m["tcp_stream"][i]]
        d = m["direction"][i]
        p[d][m["method"][i]] += 1
        if m["method"][i] == "basic.ack":
            p["acks"][(d, m["channel"][i])].append((m["delivery_tag"][i], bool(m["multiple"][i])))
    for p in per.values():
        for d in ("c2s", "s2c"):
            p[d + "_covered"] = sum(ack_coverage(v) for (dd, _), v in p["acks"].items() if dd == d)
    g = tables["messages"]
    hashes = collections.defaultdict(list)
    for i in range(len(g["method"])):
        key = (g["tcp_stream"][i], "%s %s" % (g["direction"][i], g["method"][i]))
        hashes[key].append((g["body_hash"][i], g["body_size"][i], g["body_received"][i], g["complete"][i]))
    for (stream, key), v in hashes.items():
        per[stream].setdefault("content", {})[key] = {
            "count": len(v),
            "body_bytes": sum(x[1] for x in v),
            "body_sha256_digest": digest(x[0] or "" for x in v),
            "incomplete": sum(1 for x in v if not x[3] or x[1] != x[2]),
        }
    return per


def compare(truth, tables):
    """Print truth against tables, connection by connection; return the number of differences."""
    cols = tables["connections"]
    stream_of = {
        (ip, port): s for s, ip, port in zip(cols["tcp_stream"], cols["client_ip"], cols["client_port"])
    }
    per = observed(tables)
    bad = 0
    print("%-13s %-6s %-30s %12s %12s" % ("connection", "stream", "what", "truth", "tables"))

    def line(label, stream, what, want, got):
        nonlocal bad
        ok = want == got
        bad += not ok
        if isinstance(want, str):
            want, got = want[:12], (got or "-")[:12]
        print(
            "%-13s %-6s %-30s %12s %12s%s" % (label, stream, what, want, got, "" if ok else "  <-- DIFFERS")
        )

    for c in truth["connections"]:
        stream = stream_of.get((truth["client_address"], c["client_port"]))
        p = per.get(stream, {"c2s": {}, "s2c": {}, "c2s_covered": 0, "s2c_covered": 0})
        label = c["label"]
        line(label, stream, "tcp_stream (connect order)", c["tcp_stream"], stream)
        for d in ("c2s", "s2c"):
            for meth, n in c[d + "_method_counts"].items():
                line(label, stream, "%s %s" % (d, meth), n, p[d].get(meth, 0))
        if c["messages_acked_by_client"]:
            line(label, stream, "c2s messages acked", c["messages_acked_by_client"], p["c2s_covered"])
        if c["publishes_confirmed_by_broker"]:
            line(
                label, stream, "s2c publishes confirmed", c["publishes_confirmed_by_broker"], p["s2c_covered"]
            )
        for key, t in c["content"].items():
            o = p.get("content", {}).get(
                key, {"count": 0, "body_bytes": 0, "body_sha256_digest": "", "incomplete": 0}
            )
            line(label, stream, key + " messages", t["count"], o["count"])
            line(label, stream, key + " body bytes", t["body_bytes"], o["body_bytes"])
            line(label, stream, key + " body digest", t["body_sha256_digest"], o["body_sha256_digest"])
            line(label, stream, key + " incomplete", 0, o["incomplete"])
    tot = truth["totals"]
    g = tables["messages"]
    m = tables["methods"]
    line("all", "", "streams", len(truth["connections"]), len(cols["tcp_stream"]))
    line("all", "", "message rows", tot["message_rows"], len(g["method"]))
    for meth in ("basic.publish", "basic.deliver", "basic.get-ok", "basic.return"):
        line("all", "", "messages " + meth, tot["messages"].get(meth, 0), g["method"].count(meth))
    line("all", "", "c2s basic.ack (consumer acks)", tot["consumer_ack_methods"],
         sum(1 for x, d in zip(m["method"], m["direction"]) if x == "basic.ack" and d == "c2s"))  # fmt: skip
    line("all", "", "anomaly rows", 0, len(tables["anomalies"]["kind"]))
    for k, d in collections.Counter(
        zip(tables["anomalies"]["kind"], tables["anomalies"]["detail"])
    ).most_common(5):
        print("  anomaly:", k, d)
    return bad


def capture_stats(cap, tables):
    stats = {"bytes": os.path.getsize(cap)}
    if shutil.which("capinfos"):
        r = subprocess.run(["capinfos", "-M", "-c", "-d", "-u", "-y", cap], capture_output=True, text=True)
        print(r.stdout.rstrip())
        for key, pat in (
            ("packets", r"Number of packets:\s+(\d+)"),
            ("duration_s", r"Capture duration:\s+([\d.]+)"),
        ):
            mt = re.search(pat, r.stdout)
            if mt:
                stats[key] = float(mt.group(1)) if "." in mt.group(1) else int(mt.group(1))
    frames = collections.Counter(tables["frames"]["type_name"])
    stats["amqp_frames"] = sum(frames.values())
    stats["amqp_frames_by_type"] = dict(frames)
    stats["methods"] = len(tables["methods"]["method"])
    stats["messages"] = len(tables["messages"]["method"])
    stats["tcp_streams"] = len(tables["connections"]["tcp_stream"])
    print(
        "capture: %s  %.1f MB  %s packets  %d AMQP frames %s  %d methods  %d message rows  %d connections"
        % (
            cap,
            stats["bytes"] / 1e6,
            stats.get("packets", "?"),
            stats["amqp_frames"],
            dict(frames),
            stats["methods"],
            stats["messages"],
            stats["tcp_streams"],
        )
    )
    return stats


def verify(cap, truth_path, args):
    with open(truth_path) as f:
        truth = json.load(f)
    tables = read_tables(cap, args)
    stats = capture_stats(cap, tables)
    bad = compare(truth, tables)
    drops = truth["capture_info"].get("packets_dropped_by_kernel")
    if drops:
        print("tcpdump dropped %d packets" % drops)
        bad += 1
    print("truth check: %s" % ("OK, every figure matches" if not bad else "%d DIFFERENCES" % bad))
    return bad, stats


# --------------------------------------------------------------------------
def totals(conns):
    messages = collections.Counter()
    for c in conns:
        for key, v in c["content"].items():
            messages[key.split(" ", 1)[1]] += v["count"]
    return {
        "messages": dict(messages),
        "message_rows": sum(messages.values()),
        "published": sum(c["c2s_method_counts"].get("basic.publish", 0) for c in conns),
        "confirmed": sum(c["publishes_confirmed_by_broker"] for c in conns),
        "delivered": sum(c["s2c_method_counts"].get("basic.deliver", 0) for c in conns),
        "get_ok": sum(c["s2c_method_counts"].get("basic.get-ok", 0) for c in conns),
        "get_empty": sum(c["s2c_method_counts"].get("basic.get-empty", 0) for c in conns),
        "consumer_ack_methods": sum(c["c2s_method_counts"].get("basic.ack", 0) for c in conns),
        "messages_acked": sum(c["messages_acked_by_client"] for c in conns),
        "body_bytes": sum(v["body_bytes"] for c in conns for v in c["content"].values()),
    }


def record(args, pcap, truth_path):
    s = Scenario(args)
    src = SOURCE_ADDRS[args.profile]
    rec.SOURCE["addr"] = src
    rec.ensure_broker()
    rec.install_socket_tracing()
    binfo = rec.broker_info()
    rec.ctl("delete_vhost", VHOST, check=False)
    rec.ctl("add_vhost", VHOST)
    rec.ctl("delete_user", USER, check=False)
    rec.ctl("add_user", USER, PASSWORD)
    rec.ctl("set_permissions", "-p", VHOST, USER, ".*", ".*", ".*")
    n_msgs = sum(len(v) for v in s.plan.values())
    log("plan: %d messages (%d RPC calls) for ~%g MB -> %s" % (n_msgs, s.n_rpc, args.mb, pcap))
    td = rec.Tcpdump(pcap, src)
    # In immediate mode libpcap's ring has one snaplen-sized slot per packet: with record_091's
    # -s 0 (256 KiB) and -B 65536 that is 256 slots, and the first 35 MB recording lost 928 packets
    # in bursts. lo's packets are at most 14 + 65536 bytes: 4000 slots of that size.
    td.cmd[td.cmd.index("-s") + 1] = str(LO_SNAPLEN)
    td.cmd[td.cmd.index("-B") + 1] = str(256 * 1024)
    with td:
        try:  # and let it run before the clients and the broker when the 2 cores are busy
            os.setpriority(os.PRIO_PROCESS, td.proc.pid, -10)
        except OSError as e:
            log("could not renice tcpdump:", e)
        time.sleep(0.2)
        elapsed = run_scenario(s)
        time.sleep(0.3)
    drops = [int(x) for line in td.stats() for x in re.findall(r"(\d+) packets? dropped by kernel", line)]
    conns = [c.as_json() for c in s.conns]
    truth = {
        "format": "amqpcap-bulk-truth/1",
        "capture": os.path.basename(pcap),
        "recorder": "bench/record_bulk.py",
        "recorded_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "protocol": "AMQP 0-9-1",
        "profile": args.profile,
        "target_mb": args.mb,
        "seed": args.seed,
        "broker": binfo,
        "python": platform.python_version(),
        "clients": {c["client"]: c["client_version"] for c in conns},
        "client_address": src,
        "server": {"address": rec.HOST, "port": rec.PORT},
        "credentials": {"user": USER, "password": PASSWORD, "vhost": VHOST},
        "client_seconds": round(elapsed, 3),
        "capture_info": {
            "command": " ".join(td.cmd),
            "filter": td.filter,
            "tcpdump_stderr": td.stats(),
            "packets_dropped_by_kernel": sum(drops),
            "file_size": os.path.getsize(pcap),
        },
        "errors": s.errors,
        "totals": totals(conns),
        "connections": conns,
    }
    with open(truth_path, "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    log(
        "wrote %s (%d bytes) and %s in %.1f s of traffic" % (pcap, os.path.getsize(pcap), truth_path, elapsed)
    )
    if s.errors:
        log("client errors:", s.errors)
    return not s.errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=35, help="approximate capture size in MB (default 35)")
    ap.add_argument("--profile", choices=sorted(SOURCE_ADDRS), default="bulk", help="body sizes (see above)")
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "bench" / "data"), help="directory (default bench/data)")
    ap.add_argument("--amqpcap", help="amqpcap executable for the check (default: next to this python)")
    ap.add_argument("--verify-only", metavar="PCAP", help="only check PCAP against PCAP's .truth.json")
    args = ap.parse_args()
    if args.verify_only:
        pcap = args.verify_only
        truth_path = os.path.splitext(pcap)[0] + ".truth.json"
    else:
        if os.geteuid() != 0:
            log("warning: not root; tcpdump and rabbitmqctl usually need root")
        os.makedirs(args.out, exist_ok=True)
        pcap = os.path.join(args.out, "rabbit_%s_%gmb.pcap" % (args.profile, args.mb))
        truth_path = os.path.splitext(pcap)[0] + ".truth.json"
        if not record(args, pcap, truth_path):
            verify(pcap, truth_path, args)
            return 1
    bad, _ = verify(pcap, truth_path, args)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
