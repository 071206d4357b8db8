#!/usr/bin/python3
"""AMQP 0-8 client scenario with py-amqplib (client_0_8), for amqpcap captures.

Run by captures/record/record_08_09.py; can also be run on its own:

    /usr/bin/python3 record_08_09_amqplib.py --src 127.0.8.1 --ops ops.json

Connects from source address --src to the broker on 127.0.0.1:5672, runs a
fixed scenario and writes what it did (operations + every frame it sent and
received, as seen by the library) to --ops as JSON.  Works with Python 2 and 3
(Debian python-amqplib / python3-amqplib).
"""

import argparse
import hashlib
import json
import socket
import sys
import time
import traceback
from datetime import datetime
from decimal import Decimal

import amqplib
from amqplib import client_0_8 as amqp
from amqplib.client_0_8 import transport as amqp_transport

USER = "amqpcap08"
PASSWORD = "s3cret-pw"
VHOST = "/"
EXCHANGE = "amqpcap08.direct"
QUEUE = "amqpcap08.q1"
CTAG = "amqpcap08-ctag"

OPS = []
FRAMES = []
T0 = time.time()


def sha(b):
    return hashlib.sha256(b).hexdigest()


def op(name, **kw):
    rec = {"seq": len(OPS) + 1, "op": name, "t": round(time.time(), 6)}
    rec.update(kw)
    OPS.append(rec)
    print(
        "op %2d %s %s" % (rec["seq"], name, {k: v for k, v in kw.items() if k != "properties"}),
        file=sys.stderr,
    )
    return rec


def body_info(body):
    return {"body_size": len(body), "body_sha256": sha(body)}


# --- frame logging at the transport level --------------------------------


def _frame_rec(direction, frame_type, channel, payload):
    import struct

    rec = {
        "dir": direction,
        "t": round(time.time(), 6),
        "type": frame_type,
        "channel": channel,
        "size": len(payload),
    }
    if frame_type == 1 and len(payload) >= 4:
        rec["class_id"], rec["method_id"] = struct.unpack(">HH", payload[:4])
    elif frame_type == 2 and len(payload) >= 14:
        rec["class_id"], _w, rec["body_size"], rec["property_flags"] = struct.unpack(">HHQH", payload[:14])
    elif frame_type == 3:
        rec["sha256"] = sha(payload)
    FRAMES.append(rec)


_orig_read_frame = amqp_transport._AbstractTransport.read_frame
_orig_write_frame = amqp_transport._AbstractTransport.write_frame


def _read_frame(self):
    frame_type, channel, payload = _orig_read_frame(self)
    _frame_rec("s2c", frame_type, channel, payload)
    return frame_type, channel, payload


def _write_frame(self, frame_type, channel, payload):
    _frame_rec("c2s", frame_type, channel, payload)
    return _orig_write_frame(self, frame_type, channel, payload)


amqp_transport._AbstractTransport.read_frame = _read_frame
amqp_transport._AbstractTransport.write_frame = _write_frame


def bind_source(src):
    """Make every TCP socket amqplib opens bind to `src` first."""
    orig = socket.socket

    class BoundSocket(orig):
        def connect(self, addr):
            self.bind((src, 0))
            r = orig.connect(self, addr)
            op("tcp.connect", local=list(self.getsockname()[:2]), remote=list(addr[:2]))
            return r

    socket.socket = BoundSocket


def wire_table(d):
    """Describe a field table the way amqplib 0-8 puts it on the wire:
    {key: [type_char, value]} (S longstr, I int32, D decimal as
    [scale, unscaled], T timestamp seconds (mktime of the naive datetime), F table)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, bytes):
            out[k] = ["S", v.decode("utf-8")]
        elif isinstance(v, str):
            out[k] = ["S", v]
        elif isinstance(v, bool) or isinstance(v, int):
            out[k] = ["I", int(v)]
        elif isinstance(v, Decimal):
            sign, digits, exp = v.as_tuple()
            n = 0
            for dg in digits:
                n = n * 10 + dg
            out[k] = ["D", [-exp, -n if sign else n]]
        elif isinstance(v, datetime):
            out[k] = ["T", int(time.mktime(v.timetuple()))]
        elif isinstance(v, dict):
            out[k] = ["F", wire_table(v)]
        else:
            out[k] = ["?", repr(v)]
    return out


def publish(ch, body, exchange, routing_key, mandatory=False, **props):
    msg = amqp.Message(body, **props)
    shown = {}
    for k, v in props.items():
        if k == "application_headers":
            shown[k] = wire_table(v)
        elif isinstance(v, datetime):
            shown[k] = int(time.mktime(v.timetuple()))  # what amqplib encodes
        else:
            shown[k] = v
    rec = op(
        "basic.publish",
        channel=ch.channel_id,
        exchange=exchange,
        routing_key=routing_key,
        mandatory=mandatory,
        immediate=False,
        properties=shown,
        **body_info(body),
    )
    ch.basic_publish(msg, exchange=exchange, routing_key=routing_key, mandatory=mandatory)
    return rec


def msg_props(msg):
    out = {}
    for k, v in msg.properties.items():
        if isinstance(v, datetime):
            out[k] = int(time.mktime(v.timetuple()))
        elif k == "application_headers":
            out[k] = wire_table(v)
        else:
            out[k] = v
    return out


def raw_body(msg):
    b = msg.body
    if not isinstance(b, bytes):
        b = b.encode("utf-8")
    return b


def scenario(args):
    op(
        "protocol.header",
        bytes_hex=amqp_transport.AMQP_PROTOCOL_HEADER.hex()
        if hasattr(bytes, "hex")
        else amqp_transport.AMQP_PROTOCOL_HEADER.encode("hex"),
    )
    conn = amqp.Connection(
        host="127.0.0.1:5672",
        userid=USER,
        password=PASSWORD,
        virtual_host=VHOST,
        insist=False,
        client_properties={"connection_name": "amqpcap 0-8 amqplib"},
    )
    op(
        "connection.open",
        user=USER,
        password=PASSWORD,
        mechanism="AMQPLAIN",
        locale="en_US",
        vhost=VHOST,
        insist=False,
        negotiated={
            "channel_max": conn.channel_max,
            "frame_max": conn.frame_max,
            "heartbeat": 0,
            "broker_heartbeat_proposed": conn.heartbeat,
        },
        server_version=[conn.version_major, conn.version_minor],
        server_product=conn.server_properties.get("product"),
        server_product_version=conn.server_properties.get("version"),
        known_hosts=conn.known_hosts,
    )

    ch = conn.channel(1)
    op("channel.open", channel=1)

    try:
        ticket = ch.access_request("/data", active=True, read=True, write=True)
        op(
            "access.request",
            channel=1,
            realm="/data",
            active=True,
            read=True,
            write=True,
            passive=False,
            exclusive=False,
            result="ok",
            ticket=ticket,
        )
    except Exception as e:  # keep going: record the refusal
        op("access.request", channel=1, realm="/data", result="error", error=repr(e))
        ch = conn.channel(3)
        op("channel.open", channel=3)

    ch.basic_qos(prefetch_size=0, prefetch_count=10, a_global=False)
    op("basic.qos", channel=ch.channel_id, prefetch_size=0, prefetch_count=10, global_=False)

    ch.exchange_declare(EXCHANGE, "direct", passive=False, durable=False, auto_delete=True)
    op(
        "exchange.declare",
        channel=ch.channel_id,
        exchange=EXCHANGE,
        type="direct",
        passive=False,
        durable=False,
        auto_delete=True,
        internal=False,
    )

    qname, count, consumers = ch.queue_declare(
        QUEUE, passive=False, durable=False, exclusive=True, auto_delete=False
    )
    op(
        "queue.declare",
        channel=ch.channel_id,
        queue=QUEUE,
        passive=False,
        durable=False,
        exclusive=True,
        auto_delete=False,
        result={"queue": qname, "message_count": count, "consumer_count": consumers},
    )

    ch.queue_bind(QUEUE, EXCHANGE, routing_key="rk.small")
    op("queue.bind", channel=ch.channel_id, queue=QUEUE, exchange=EXCHANGE, routing_key="rk.small")

    # 1. publish with (almost) every property, then basic.get + ack
    body1 = b'{"hello": "amqpcap 0-8 via py-amqplib", "n": 1}'
    ts = datetime(2024, 1, 2, 3, 4, 5)
    publish(
        ch,
        body1,
        EXCHANGE,
        "rk.small",
        content_type="application/json",
        content_encoding="utf-8",
        delivery_mode=2,
        priority=5,
        correlation_id="corr-0001",
        reply_to="amqpcap08.reply",
        message_id="msg-0001",
        timestamp=ts,
        type="amqpcap.test",
        user_id=USER,
        app_id="amqpcap-recorder",
        application_headers={
            "str": "text value",
            "int": 42,
            "neg": -7,
            "dec": Decimal("3.14"),
            "when": ts,
            "nested": {"inner": "x", "num": 1},
        },
    )

    m = ch.basic_get(QUEUE, no_ack=False)
    body = raw_body(m)
    op(
        "basic.get",
        channel=ch.channel_id,
        queue=QUEUE,
        no_ack=False,
        result="get-ok",
        delivery_tag=m.delivery_info["delivery_tag"],
        redelivered=m.delivery_info["redelivered"],
        exchange=m.delivery_info["exchange"],
        routing_key=m.delivery_info["routing_key"],
        message_count=m.delivery_info["message_count"],
        received_properties=msg_props(m),
        **body_info(body),
    )
    ch.basic_ack(m.delivery_info["delivery_tag"])
    op("basic.ack", channel=ch.channel_id, delivery_tag=m.delivery_info["delivery_tag"], multiple=False)

    m = ch.basic_get(QUEUE, no_ack=False)
    op(
        "basic.get",
        channel=ch.channel_id,
        queue=QUEUE,
        no_ack=False,
        result="get-empty" if m is None else "get-ok",
    )

    # 1b. basic.reject of a fetched message (requeue=False drops it)
    body_j = b"this one gets rejected"
    publish(ch, body_j, EXCHANGE, "rk.small", message_id="msg-0001b-reject")
    m = ch.basic_get(QUEUE, no_ack=False)
    op(
        "basic.get",
        channel=ch.channel_id,
        queue=QUEUE,
        no_ack=False,
        result="get-ok",
        delivery_tag=m.delivery_info["delivery_tag"],
        message_id=m.properties.get("message_id"),
        **body_info(raw_body(m)),
    )
    ch.basic_reject(m.delivery_info["delivery_tag"], requeue=False)
    op("basic.reject", channel=ch.channel_id, delivery_tag=m.delivery_info["delivery_tag"], requeue=False)

    # 2. unroutable mandatory publish -> basic.return
    body_r = b"nobody is bound to rk.nowhere"
    publish(ch, body_r, EXCHANGE, "rk.nowhere", mandatory=True, content_type="text/plain")
    while ch.returned_messages.empty():
        ch.wait()
    rc, rt, rex, rrk, rmsg = ch.returned_messages.get()
    op(
        "basic.return",
        channel=ch.channel_id,
        direction="s2c",
        reply_code=rc,
        reply_text=rt,
        exchange=rex,
        routing_key=rrk,
        **body_info(raw_body(rmsg)),
    )

    # 3. a small and a multi-frame message, consumed with basic.consume
    body2 = b"small message number two"
    big = hashlib.sha256(b"amqpcap-big-body").digest()
    body3 = (big * (300000 // len(big) + 1))[:300000]
    publish(
        ch, body2, EXCHANGE, "rk.small", content_type="text/plain", delivery_mode=1, message_id="msg-0002"
    )
    publish(
        ch, body3, EXCHANGE, "rk.small", content_type="application/octet-stream", message_id="msg-0003-big"
    )
    got = []

    def on_msg(msg):
        got.append(msg)

    ctag = ch.basic_consume(
        QUEUE, consumer_tag=CTAG, no_local=False, no_ack=False, exclusive=False, callback=on_msg
    )
    op(
        "basic.consume",
        channel=ch.channel_id,
        queue=QUEUE,
        consumer_tag=CTAG,
        no_local=False,
        no_ack=False,
        exclusive=False,
        result_consumer_tag=ctag,
    )
    while len(got) < 2:
        ch.wait()
    for msg in got:
        b = raw_body(msg)
        op(
            "basic.deliver",
            channel=ch.channel_id,
            direction="s2c",
            consumer_tag=msg.delivery_info["consumer_tag"],
            delivery_tag=msg.delivery_info["delivery_tag"],
            redelivered=msg.delivery_info["redelivered"],
            exchange=msg.delivery_info["exchange"],
            routing_key=msg.delivery_info["routing_key"],
            received_properties=msg_props(msg),
            **body_info(b),
        )
    for msg in got:
        ch.basic_ack(msg.delivery_info["delivery_tag"])
        op("basic.ack", channel=ch.channel_id, delivery_tag=msg.delivery_info["delivery_tag"], multiple=False)
    ch.basic_cancel(ctag)
    op("basic.cancel", channel=ch.channel_id, consumer_tag=ctag)

    # 4. transactions: commit one publish, roll back another
    try:
        ch.tx_select()
        op("tx.select", channel=ch.channel_id)
        body4 = b"committed in a transaction"
        publish(ch, body4, EXCHANGE, "rk.small", message_id="msg-0004-tx")
        ch.tx_commit()
        op("tx.commit", channel=ch.channel_id)
        body5 = b"rolled back, never delivered"
        publish(ch, body5, EXCHANGE, "rk.small", message_id="msg-0005-rollback")
        ch.tx_rollback()
        op("tx.rollback", channel=ch.channel_id)
        m = ch.basic_get(QUEUE, no_ack=True)
        op(
            "basic.get",
            channel=ch.channel_id,
            queue=QUEUE,
            no_ack=True,
            result="get-empty" if m is None else "get-ok",
            **(
                {}
                if m is None
                else dict(
                    delivery_tag=m.delivery_info["delivery_tag"],
                    message_id=m.properties.get("message_id"),
                    **body_info(raw_body(m)),
                )
            ),
        )
        m = ch.basic_get(QUEUE, no_ack=True)
        op(
            "basic.get",
            channel=ch.channel_id,
            queue=QUEUE,
            no_ack=True,
            result="get-empty" if m is None else "get-ok",
        )
    except Exception as e:
        op("tx", channel=ch.channel_id, result="error", error=repr(e))

    # 5. 404 channel error on a second channel
    ch2 = conn.channel(2)
    op("channel.open", channel=2)
    try:
        ch2.queue_declare("amqpcap08.does-not-exist", passive=True)
        op(
            "queue.declare",
            channel=2,
            queue="amqpcap08.does-not-exist",
            passive=True,
            result="ok (unexpected)",
        )
    except Exception as e:
        code = getattr(e, "amqp_reply_code", None)
        if code is None and getattr(e, "args", None):
            code = e.args[0]
        op(
            "queue.declare",
            channel=2,
            queue="amqpcap08.does-not-exist",
            passive=True,
            result="channel.close from broker, client sent channel.close-ok",
            reply_code=code,
            error=repr(e),
        )

    # 6. clean up and close
    ch.queue_unbind(QUEUE, EXCHANGE, routing_key="rk.small")
    op("queue.unbind", channel=ch.channel_id, queue=QUEUE, exchange=EXCHANGE, routing_key="rk.small")
    n = ch.queue_delete(QUEUE, if_unused=False, if_empty=False)
    op(
        "queue.delete",
        channel=ch.channel_id,
        queue=QUEUE,
        if_unused=False,
        if_empty=False,
        result_message_count=n,
    )
    try:
        ch.exchange_delete(EXCHANGE, if_unused=False)
        op("exchange.delete", channel=ch.channel_id, exchange=EXCHANGE, if_unused=False)
    except Exception as e:
        op("exchange.delete", channel=ch.channel_id, exchange=EXCHANGE, result="error", error=repr(e))
        raise
    chid = ch.channel_id
    ch.close()
    op("channel.close", channel=chid, reply_code=0, reply_text="")
    conn.close()
    op("connection.close", reply_code=0, reply_text="")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default="127.0.8.1")
    ap.add_argument("--ops", required=True)
    args = ap.parse_args()
    bind_source(args.src)
    err = None
    try:
        scenario(args)
    except Exception:
        err = traceback.format_exc()
        print(err, file=sys.stderr)
    with open(args.ops, "w") as f:
        json.dump(
            {
                "client": {
                    "name": "py-amqplib",
                    "module": "amqplib.client_0_8",
                    "version": getattr(amqplib, "__version__", None)
                    or "python3-amqplib 1.0.2-3 (Debian; module has no version)",
                    "python": sys.version.split()[0],
                },
                "protocol_header_sent_hex": (amqp_transport.AMQP_PROTOCOL_HEADER.hex()),
                "user": USER,
                "password": PASSWORD,
                "vhost": VHOST,
                "mechanism": "AMQPLAIN",
                "operations": OPS,
                "frames": FRAMES,
                "error": err,
            },
            f,
            indent=1,
            sort_keys=False,
            default=str,
        )
    return 1 if err else 0


if __name__ == "__main__":
    sys.exit(main())
