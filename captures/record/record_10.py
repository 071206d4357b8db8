#!/usr/bin/env python3
"""Record real AMQP 1.0 captures against a local RabbitMQ, with the clients' own logs as truth.

Usage (as root, from the repository root)::

    python captures/record/record_10.py --out captures/                  # every scenario
    python captures/record/record_10.py --out captures/ --only rhea_outcomes,proton_frames512
    python captures/record/record_10.py --list

Two independent AMQP 1.0 implementations drive the scenarios: rhea (node, ``rhea_client.js``;
``npm ci`` in this folder installs it) and Qpid Proton (python-qpid-proton, ``proton_client.py``);
the cross-protocol scenario adds a pika (0-9-1) consumer. For every scenario this script

1. makes sure RabbitMQ answers on 127.0.0.1:5672 with the ``rabbitmq_amqp1_0`` plugin enabled
   (starts ``rabbitmq-server -detached`` if no broker runs, enables the plugin if needed) and
   deletes the scenario's queues, so every recording starts empty;
2. starts ``tcpdump -i lo -s 0`` filtered on port 5672 and the scenario's own loopback source
   address (127.0.10.N; the clients bind their sockets to it), so other users of the broker
   stay out of the capture;
3. runs the client, which writes a JSON-lines log: every frame the library itself wrote or read
   (rhea's frame and raw-byte debug channels, Proton's frame trace) and what the application
   sent, received, settled and saw as outcome;
4. stops tcpdump (SIGINT to its own pid) and writes ``FILE.truth.json`` from that log;
5. cross-checks the frames against ``tshark`` and stores the comparison under ``crosscheck``
   (for information: the truth never comes from tshark).

The truth format (``amqpcap-truth-10/1``) is described in captures/README.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
HOST = "127.0.0.1"
PORT = 5672
USER = "guest"
PASSWORD = "guest"
WRONG_PASSWORD = "wrong-pw-0000"
PREFIX = "amqpcap10"
PLUGIN = "rabbitmq_amqp1_0"
FULL_QUEUE_POLICY = ("amqpcap10-full", "^amqpcap10-.*-full$", '{"max-length":2,"overflow":"reject-publish"}')


def _record_091():
    """The 0-9-1 recorder's broker and tcpdump helpers (one copy of that machinery)."""
    spec = importlib.util.spec_from_file_location("record_091", HERE / "record_091.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


R091 = _record_091()
sys.path.insert(0, str(HERE))
import frame_fields  # noqa: E402 - the recorder's sibling module


def log(*a):
    print("[record_10]", *a, file=sys.stderr, flush=True)


class Scenario:
    def __init__(self, name, client, arg, src, description, queues, notes=()):
        self.notes = list(notes)
        self.name = name
        self.client = client
        self.arg = arg
        self.src = src
        self.description = description
        self.queues = queues

    @property
    def capture(self):
        return "rabbitmq10_%s.pcap" % self.name


def _q(client, *names):
    return ["%s-%s-%s" % (PREFIX, client, n) for n in names]


SCENARIOS = {
    s.name: s
    for s in [
        Scenario(
            "rhea_outcomes",
            "rhea",
            "outcomes",
            "127.0.10.1",
            "rhea: SASL PLAIN, a sender with every message property and application-properties "
            "(data, amqp-value and amqp-sequence bodies), a pre-settled sender, an unroutable "
            "message; consumers settling accepted, rejected, released and modified",
            _q("rhea", "outcomes"),
            notes=[
                "RabbitMQ 3.10's 1.0 plugin does not support the modified outcome: it answers the "
                "disposition with end(amqp:invalid-field) and closes the connection (a close, then a second"
                " close with amqp:internal-error)",
            ],
        ),
        Scenario(
            "rhea_frames512",
            "rhea",
            "frames512",
            "127.0.10.2",
            "rhea: max-frame-size 512 on both connections; 100 B, 3 kB, 20 kB data bodies and "
            "a 3 kB amqp-value string, split over many transfers (more=true) both ways",
            _q("rhea", "frames512"),
        ),
        Scenario(
            "rhea_errors",
            "rhea",
            "errors",
            "127.0.10.3",
            "rhea: a refused login (SASL outcome auth), links to a missing queue and a missing "
            "exchange (amqp:not-found), and a publish to a full queue (reject-publish)",
            _q("rhea", "full"),
            notes=[
                "a failing attach makes the broker end the session (end with the error), not detach the link",
                "the sender to /amq/queue/<missing> is attached and its message accepted",
                "on the full queue (reject-publish) the broker's session fails on the nack and the broker "
                "resets the TCP connection 3 s later",
            ],
        ),
        Scenario(
            "rhea_rpc",
            "rhea",
            "rpc",
            "127.0.10.4",
            "rhea: request / reply: requests with reply-to, replies with the request's "
            "message-id as correlation-id, sent on an anonymous-target link addressed by 'to'",
            _q("rhea", "rpc-requests", "rpc-replies"),
        ),
        Scenario(
            "rhea_multiplex",
            "rhea",
            "multiplex",
            "127.0.10.5",
            "rhea: one connection, max-frame-size 512, idle-time-out 1 s, two sessions with a sender "
            "and a receiver each moving 8 kB messages at once; empty frames while idle; a receiver "
            "attached with no credit while 4 messages wait, then 2 credits, then 5 and a drain",
            _q("rhea", "mux-a", "mux-b", "mux-credit"),
            notes=[
                "the drain: the broker answers flow(drain) with a flow echoing link-credit 5 and drain, "
                "sends one of the two waiting messages, then ends the session with amqp:internal-error "
                "(function_clause in rabbit_classic_queue:handle_event send_drained)",
            ],
        ),
        Scenario(
            "proton_outcomes",
            "proton",
            "outcomes",
            "127.0.10.11",
            "Qpid Proton: SASL PLAIN, a sender with every message property and application-properties "
            "of every AMQP type (data, amqp-value string / map bodies, no body; string, uuid and ulong "
            "message-ids), a pre-settled sender; consumers settling accepted, rejected, released "
            "and modified",
            _q("proton", "outcomes"),
            notes=[
                "RabbitMQ 3.10's 1.0 plugin does not support the modified outcome: it answers the "
                "disposition with end(amqp:invalid-field) and closes the connection (a close, then a second"
                " close with amqp:internal-error)",
            ],
        ),
        Scenario(
            "proton_frames512",
            "proton",
            "frames512",
            "127.0.10.12",
            "Qpid Proton: max-frame-size 512 on both connections; 100 B, 3 kB, 20 kB data bodies and "
            "a 3 kB amqp-value string, split over many transfers (more=true) both ways",
            _q("proton", "frames512"),
            notes=[
                "no amqp-value list body: it makes RabbitMQ 3.10's 1.0 session fail",
            ],
        ),
        Scenario(
            "proton_errors",
            "proton",
            "errors",
            "127.0.10.13",
            "Qpid Proton: a refused login (SASL outcome auth), a send to a missing queue, and one "
            "connection each for a receiver on a missing queue, a sender to a missing exchange "
            "(amqp:not-found) and a receiver on an unknown address (amqp:invalid-field)",
            [],
            notes=[
                "a failing attach makes the broker end the session (end with the error), not detach the link",
            ],
        ),
        Scenario(
            "proton_rpc",
            "proton",
            "rpc",
            "127.0.10.14",
            "Qpid Proton: request / reply: requests with reply-to and a uuid correlation-id, the "
            "server replies with the request's correlation-id",
            _q("proton", "rpc-requests", "rpc-replies"),
        ),
        Scenario(
            "proton_pika",
            "proton",
            "pika",
            "127.0.10.15",
            "cross-protocol: a 0-9-1 pika connection declares a queue, a Qpid Proton 1.0 publisher "
            "sends 4 messages to it (/amq/queue/NAME), pika fetches them with basic.get and acks; "
            "the truth has both sides (the 1.0 properties as pika saw them)",
            _q("proton", "cross"),
            notes=[
                "tcp.stream 0 is AMQP 0-9-1 (pika): its truth is under 'operations', not 'frames'",
                "string correlation-ids: a ulong correlation-id makes RabbitMQ 3.10 fail the 0-9-1 delivery"
                " (connection.close 541)",
            ],
        ),
        Scenario(
            "proton_pika_rpc",
            "proton",
            "pika_rpc",
            "127.0.10.16",
            "cross-protocol RPC: a Qpid Proton 1.0 requester sends requests with reply-to and "
            "correlation-id to a queue a pika 0-9-1 responder reads (basic.get), which publishes each "
            "reply to the reply-to queue with the request's correlation-id, received by the 1.0 "
            "requester; then the reverse (pika requester, Proton responder)",
            _q("proton", "xrpc-requests", "xrpc-replies", "xrpc091-requests", "xrpc091-replies"),
            notes=[
                "tcp.stream 0 is AMQP 0-9-1 (pika): its truth is under 'operations', not 'frames'",
                "RabbitMQ hands a 1.0 reply-to /queue/Q to the 0-9-1 side as Q; the 1.0 responder "
                "sends its replies to the address the 0-9-1 reply-to names",
                "'rpc' pairs each request with its reply and the reply's delivery, from the clients' logs",
            ],
        ),
    ]
}


# --------------------------------------------------------------------------
# Broker
# --------------------------------------------------------------------------
def plugin_enabled():
    r = R091.run(["rabbitmq-plugins", "list", "-e", "-m", PLUGIN], check=False, quiet=True)
    return r.returncode == 0 and PLUGIN in r.stdout.split()


def ensure_broker():
    """RabbitMQ on 127.0.0.1:5672 with the AMQP 1.0 plugin; returns what had to be done."""
    done = []
    running = R091.ctl("-q", "status", check=False, timeout=60).returncode == 0
    if not running:
        R091.run(["rabbitmq-plugins", "enable", "--offline", PLUGIN])
        done.append("enabled %s offline" % PLUGIN)
        R091.ensure_broker()
        done.append("started rabbitmq-server -detached")
    elif not plugin_enabled():
        R091.run(["rabbitmq-plugins", "enable", PLUGIN])
        done.append("enabled %s" % PLUGIN)
    else:
        R091.ensure_broker()
    return done


def reset_queues(scenario):
    for q in scenario.queues:
        R091.ctl("-q", "delete_queue", q, check=False)
    name, pattern, definition = FULL_QUEUE_POLICY
    R091.ctl("set_policy", name, pattern, definition, "--apply-to", "queues")


def broker_info():
    info = R091.broker_info()
    info["plugin"] = PLUGIN
    info["plugin_version"] = info["version"]
    return info


# --------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------
def client_command(scenario, logfile):
    common = ["--scenario", scenario.arg, "--log", str(logfile), "--src", scenario.src]
    common += ["--host", HOST, "--port", str(PORT), "--prefix", "%s-%s" % (PREFIX, scenario.client)]
    if scenario.client == "rhea":
        if not (HERE / "node_modules" / "rhea").is_dir():
            R091.run(["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(HERE)], timeout=300)
        return ["node", str(HERE / "rhea_client.js"), *common]
    return [sys.executable, str(HERE / "proton_client.py"), *common]


def run_client(scenario, logfile):
    cmd = client_command(scenario, logfile)
    log("$", " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    if proc.returncode != 0:
        log("client exited %s: %s %s" % (proc.returncode, out[-2000:], err[-2000:]))
    return proc.returncode


# --------------------------------------------------------------------------
# Truth
# --------------------------------------------------------------------------
PERFORMATIVES = frame_fields.PERFORMATIVES


def frame_name(raw):
    """A client's name of a frame (rhea 'sasl_init#41', proton 'sasl-init') -> 'sasl.init'."""
    if raw in ("empty", None):
        return "empty"
    raw = raw.split("#")[0].replace("_", "-")
    if raw.startswith("sasl-"):
        raw = "sasl." + raw[5:]
    return raw


def parse_header(e):
    """A protocol header as a client logged it -> {dir, protocol_id, major, minor, revision}."""
    h = {"dir": e["dir"]}
    if "protocol_id" in e:
        for k in ("protocol_id", "major", "minor", "revision"):
            h[k] = e[k]
        return h
    for k in ("protocol_id", "major", "minor", "revision"):
        m = re.search(k + r"\W+(\d+)", e["header"])
        h[k] = int(m.group(1)) if m else None
    return h


def build_truth(scenario, events, binfo, tcpdump, client_rc):
    conns = collections.OrderedDict()

    def conn(cid):
        if cid not in conns:
            conns[cid] = {
                "index": len(conns),
                "tcp_stream": len(conns),
                "conn": cid,
                "headers": [],
                "frames": [],
                "links": [],
                "sends": [],
                "receives": [],
                "settles": [],
                "outcomes": [],
                "errors": [],
            }
        return conns[cid]

    start = next((e for e in events if e["ev"] == "start"), {})
    other = []
    for e in events:
        cid = e.get("conn")
        if cid is None:
            other.append(e)
            continue
        c = conn(cid)
        ev = e["ev"]
        if ev == "frame":
            name = frame_name(e.get("performative"))
            f = {"i": len(c["frames"]), "dir": e["dir"], "channel": e.get("channel"), "performative": name}
            for k in ("descriptor", "size", "hex", "trace"):
                if e.get(k) is not None:
                    f[k] = e[k]
            fields = frame_fields.from_rhea(name, e.get("fields")) if e.get("fields") else None
            if fields is None and e.get("trace"):
                fields = frame_fields.from_proton(e["trace"])
            if fields is not None:
                f["fields"] = fields
            c["frames"].append(f)
        elif ev == "header":
            c["headers"].append(parse_header(e))
        elif ev in ("pika", "pika_receive"):
            c.setdefault("operations", []).append(strip(e) | {"ev": ev})
        elif ev in ("connection_open", "disconnected", "connect"):
            for k in (
                "label",
                "client",
                "client_version",
                "protocol",
                "client_port",
                "container_id",
                "user",
                "password",
                "requested",
                "remote",
            ):
                if e.get(k) is not None and k not in c:
                    c[k] = e[k]
            if ev == "disconnected" and e.get("error"):
                c["errors"].append({"where": "transport", **e["error"]})
        elif ev in ("attached", "detached", "link_error"):
            c["links"].append(
                {k: v for k, v in e.items() if k not in ("conn", "seq", "ts")} | {"seq": e["seq"]}
            )
            if e.get("error"):
                c["errors"].append({"where": "link " + str(e.get("name")), **e["error"]})
        elif ev == "send":
            c["sends"].append(strip(e))
        elif ev == "receive":
            c["receives"].append(strip(e))
        elif ev == "settle":
            c["settles"].append(strip(e))
        elif ev == "outcome":
            c["outcomes"].append(strip(e))
        elif ev in ("connection_error", "error", "session_error"):
            c["errors"].append(
                {
                    "where": ev,
                    **(e.get("error") if isinstance(e.get("error"), dict) else {"message": e.get("error")}),
                }
            )
        else:
            other.append(e)
            continue
        if ev in ("connection_close", "disconnected", "connect", "sasl_outcome"):
            other.append(e)
            if ev == "connection_close" and e.get("error"):
                c["errors"].append({"where": "close", **e["error"]})
    for c in conns.values():
        fill_delivery_ids(c)
    for c in conns.values():
        c.setdefault("protocol", "AMQP 1.0")
        if c["protocol"] != "AMQP 1.0":
            continue
        c["c2s_performatives"] = [f["performative"] for f in c["frames"] if f["dir"] == "c2s"]
        c["s2c_performatives"] = [f["performative"] for f in c["frames"] if f["dir"] == "s2c"]
        c["c2s_counts"] = dict(collections.Counter(c["c2s_performatives"]))
        c["s2c_counts"] = dict(collections.Counter(c["s2c_performatives"]))
    return {
        "format": "amqpcap-truth-10/1",
        "scenario": scenario.name,
        "capture": scenario.capture,
        "description": scenario.description,
        "recorder": "captures/record/record_10.py",
        "recorded_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "protocol": "AMQP 1.0",
        "broker": binfo,
        "client": {
            "name": start.get("client"),
            "version": start.get("client_version"),
            "runtime": start.get("runtime"),
        },
        "client_address": scenario.src,
        "server": {"host": HOST, "port": PORT},
        "credentials": {"user": USER, "password": PASSWORD, "wrong_password": WRONG_PASSWORD},
        "capture_info": {
            "tcpdump": " ".join(tcpdump.cmd),
            "filter": tcpdump.filter,
            "stats": tcpdump.stats(),
        },
        "client_exit": client_rc,
        "notes": list(scenario.notes),
        "connections": list(conns.values()),
        "rpc": rpc_truth(conns),
        "events": other,
    }


def _logged_message(c, method, e, props):
    return {
        "tcp_stream": c["tcp_stream"],
        "protocol": c["protocol"],
        "method": method,
        "seq": e["seq"],
        "message_id": props.get("message_id"),
        "correlation_id": props.get("correlation_id"),
        "reply_to": props.get("reply_to"),
    }


def rpc_truth(conns):
    """Each request a client sent (reply-to and correlation-id set), the reply a client sent with
    its correlation-id, and that reply's delivery to a client: from the clients' logs, in log
    order (``seq``), whatever protocol each side speaks."""
    sent, got = [], []
    for c in conns.values():
        for e in c["sends"]:
            if not e.get("error"):
                sent.append(_logged_message(c, "transfer", e, e["message"]))
        for e in c["receives"]:
            got.append(_logged_message(c, "transfer", e, e["message"]))
        for e in c.get("operations", []):
            if e["op"] == "basic.publish":
                sent.append(_logged_message(c, "basic.publish", e, e["properties"]))
            elif e["ev"] == "pika_receive":
                got.append(_logged_message(c, e["op"] + "-ok", e, e["properties"]))
    sent.sort(key=lambda m: m["seq"])
    got.sort(key=lambda m: m["seq"])
    pairs = []
    for req in sent:
        if not (req["reply_to"] and req["correlation_id"]):
            continue
        reply = next(
            (
                m
                for m in sent
                if m["seq"] > req["seq"]
                and not m["reply_to"]
                and m["correlation_id"] == req["correlation_id"]
            ),
            None,
        )
        delivered = reply and next(
            (m for m in got if m["seq"] > reply["seq"] and m["message_id"] == reply["message_id"]), None
        )
        pairs.append(
            {
                "correlation_id": req["correlation_id"],
                "reply_to": req["reply_to"],
                "request": req,
                "reply": reply,
                "delivered": delivered,
            }
        )
    return pairs


def fill_delivery_ids(c):
    """Give sends / receives / settles / outcomes the delivery-id of their first transfer frame.

    Proton's API has no delivery-id; its frame trace has, with the delivery-tag and the link's
    handle (named by the attach frames of the same direction). rhea's events carry it already.
    """
    names = {}
    ids = collections.defaultdict(list)
    for f in c["frames"]:
        fields = f.get("fields") or {}
        if f["performative"] == "attach" and "handle" in fields:
            names[(f["dir"], f["channel"], fields["handle"])] = fields.get("name")
        if f["performative"] == "transfer" and "delivery-id" in fields and "delivery-tag" in fields:
            link = names.get((f["dir"], f["channel"], fields.get("handle")))
            key = (f["dir"], link, fields["delivery-tag"].get("binary_hex"))
            if fields["delivery-id"] not in ids[key]:
                ids[key].append(fields["delivery-id"])
    for kind, d in (("sends", "c2s"), ("outcomes", "c2s"), ("receives", "s2c"), ("settles", "s2c")):
        taken = collections.Counter()
        for e in c[kind]:
            if e.get("delivery_id") is not None:
                continue
            key = (d, e.get("link"), e.get("delivery_tag_hex"))
            found = ids.get(key, [])
            if kind in ("sends", "receives") and taken[key] < len(found):
                e["delivery_id"] = found[taken[key]]
                taken[key] += 1
            elif found:
                e["delivery_id"] = found[0] if len(found) == 1 else None


def strip(e):
    return {k: v for k, v in e.items() if k not in ("conn", "ev")}


# --------------------------------------------------------------------------
# tshark cross-check (information only)
# --------------------------------------------------------------------------
TSHARK_FIELDS = [
    "frame.number",
    "tcp.stream",
    "tcp.srcport",
    "amqp.type",
    "amqp.performative",
    "amqp.sasl.method",
    "amqp.init.id",
]


def tshark_frames(pcap):
    """Per tcp.stream and direction, tshark's list of frame names (empty frames included)."""
    cmd = [
        "tshark",
        "-r",
        str(pcap),
        "-Y",
        "amqp",
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=|",
    ]
    for f in TSHARK_FIELDS:
        cmd += ["-e", f]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    out = collections.defaultdict(list)
    for line in r.stdout.splitlines():
        num, stream, sport, types, perfs, sasls, inits = (line.split("\t") + [""] * 7)[:7]
        d = "s2c" if sport == str(PORT) else "c2s"
        for x in inits.split("|"):
            if x:
                out[(int(stream), d, "headers")].append(int(x, 0))
        perf = [int(x, 0) for x in perfs.split("|") if x]
        sasl = [int(x, 0) for x in sasls.split("|") if x]
        for t in types.split("|"):
            if t == "":
                continue
            if int(t, 0) == 1:
                name = PERFORMATIVES.get(sasl.pop(0), "?") if sasl else "?"
            else:
                name = PERFORMATIVES.get(perf.pop(0), "?") if perf else "empty"
            out[(int(stream), d)].append((int(num), name))
    return out


TSHARK_KEYS = {
    "amqp.performative.arguments.handle": "handle",
    "amqp.performative.arguments.deliveryId": "delivery-id",
    "amqp.performative.arguments.deliveryTag": "delivery-tag",
    "amqp.performative.arguments.more": "more",
    "amqp.performative.arguments.settled": "settled",
    "amqp.performative.arguments.first": "first",
    "amqp.performative.arguments.last": "last",
    "amqp.performative.arguments.role": "role",
    "amqp.performative.arguments.linkCredit": "link-credit",
    "amqp.performative.arguments.deliveryCount": "delivery-count",
    "amqp.performative.arguments.name": "name",
    "amqp.sasl.saslCode": "code",
    "amqp.error.condition": "condition",
}
BOOLS = {"more", "settled", "role"}


def _walk(d, out):
    for k, v in d.items():
        if k.startswith("amqp.delivery-state."):
            out.setdefault("outcome", k.rsplit(".", 1)[1])
        if isinstance(v, dict):
            _walk(v, out)
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, dict):
                    _walk(x, out)
        elif k in TSHARK_KEYS and TSHARK_KEYS[k] not in out:
            name = TSHARK_KEYS[k]
            if name in BOOLS:
                out[name] = v in ("1", "True", "true")
            elif name in ("delivery-tag", "name", "condition"):
                out[name] = v.replace(":", "") if name == "delivery-tag" else v
            else:
                out[name] = int(v, 0)
    return out


def tshark_pdus(pcap):
    """Per (tcp.stream, direction): tshark's key fields of every AMQP 1.0 frame, in order."""
    cmd = ["tshark", "-r", str(pcap), "-Y", "amqp", "-T", "json", "-J", "tcp amqp", "--no-duplicate-keys"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    out = collections.defaultdict(list)
    for pkt in json.loads(r.stdout or "[]"):
        layers = pkt["_source"]["layers"]
        tcp = layers.get("tcp", {})
        stream = int(tcp.get("tcp.stream", -1))
        d = "s2c" if tcp.get("tcp.srcport") == str(PORT) else "c2s"
        pdus = layers.get("amqp", [])
        for pdu in pdus if isinstance(pdus, list) else [pdus]:
            if "amqp.type" not in pdu:
                continue
            out[(stream, d)].append(_walk(pdu, {}))
    return out


def key_fields(f):
    """The truth's key fields of a frame, named as tshark_pdus names them."""
    fields = f.get("fields") or {}
    out = {}
    for k in (
        "handle",
        "delivery-id",
        "more",
        "settled",
        "first",
        "last",
        "role",
        "link-credit",
        "delivery-count",
        "name",
        "code",
    ):
        if k in fields:
            out[k] = fields[k]
    tag = fields.get("delivery-tag")
    if isinstance(tag, dict):
        out["delivery-tag"] = tag.get("binary_hex")
    state = fields.get("state")
    if isinstance(state, dict):
        out["outcome"] = state.get("descriptor")
    for holder in (fields, state if isinstance(state, dict) else {}):
        err = holder.get("error")
        if isinstance(err, dict) and err.get("condition"):
            out["condition"] = err["condition"]
    return out


def compare_fields(truth_frames, tshark_frames):
    """Per key field: frames where both have it and agree / disagree (first disagreements kept)."""
    agree = collections.Counter()
    differ = collections.Counter()
    examples = []
    for i, (f, t) in enumerate(zip(truth_frames, tshark_frames)):
        mine = key_fields(f)
        for k, v in mine.items():
            if k not in t:
                continue
            if t[k] == v:
                agree[k] += 1
            else:
                differ[k] += 1
                if len(examples) < 5:
                    examples.append({"frame": i, "field": k, "client": v, "tshark": t[k]})
    return {"agree": dict(agree), "differ": dict(differ), "examples": examples}


def crosscheck(pcap, truth):
    if not shutil.which("tshark"):
        return {"tshark": None}
    ver = subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    seen = tshark_frames(pcap)
    pdus = tshark_pdus(pcap)
    res = {"tshark": ver, "connections": []}
    for c in truth["connections"]:
        row = {"tcp_stream": c["tcp_stream"]}
        if c["protocol"] != "AMQP 1.0":
            row["protocol"] = c["protocol"]
            res["connections"].append(row)
            continue
        for d in ("c2s", "s2c"):
            ts = [n for _, n in seen.get((c["tcp_stream"], d), [])]
            mine = c[d + "_performatives"]
            row[d + "_frames"] = len(mine)
            row[d + "_tshark_frames"] = len(ts)
            row[d + "_equal"] = ts == mine
            mine_frames = [f for f in c["frames"] if f["dir"] == d]
            row[d + "_fields"] = compare_fields(mine_frames, pdus.get((c["tcp_stream"], d), []))
            if ts != mine:
                first = next((i for i, (a, b) in enumerate(zip(ts, mine)) if a != b), min(len(ts), len(mine)))
                row[d + "_first_difference"] = {
                    "index": first,
                    "tshark": ts[first : first + 3],
                    "client": mine[first : first + 3],
                }
            heads = seen.get((c["tcp_stream"], d, "headers"), [])
            mine_h = [h for h in c["headers"] if h["dir"] == d]
            row[d + "_headers_equal"] = heads == [h["protocol_id"] for h in mine_h]
            for h in mine_h[len(heads) :]:
                h["on_wire"] = False
        res["connections"].append(row)
    return res


# --------------------------------------------------------------------------
def record(scenario, outdir, binfo, keep_log=False):
    pcap = outdir / scenario.capture
    logfile = outdir / (scenario.capture[: -len(".pcap")] + ".clientlog.jsonl")
    reset_queues(scenario)
    with R091.Tcpdump(str(pcap), scenario.src) as td:
        rc = run_client(scenario, logfile)
    os.chmod(pcap, 0o644)
    events = [json.loads(line) for line in logfile.read_text().splitlines() if line.strip()]
    truth = build_truth(scenario, events, binfo, td, rc)
    truth["crosscheck"] = crosscheck(pcap, truth)
    for row in truth["crosscheck"].get("connections", []):
        for d in ("c2s", "s2c"):
            diff = row.get(d + "_first_difference")
            if diff and not diff["client"] and diff["index"] == row[d + "_frames"]:
                truth["notes"].append(
                    "tcp.stream %d %s: the capture has %d frame(s) after the last one the client logged "
                    "(%s): the client had stopped reading"
                    % (
                        row["tcp_stream"],
                        d,
                        row[d + "_tshark_frames"] - diff["index"],
                        ", ".join(diff["tshark"]),
                    )
                )
            if diff and not diff["tshark"] and diff["index"] == row[d + "_tshark_frames"]:
                c = truth["connections"][row["tcp_stream"]]
                late = [f for f in c["frames"] if f["dir"] == d][diff["index"] :]
                for f in late:
                    f["on_wire"] = False
                truth["notes"].append(
                    "tcp.stream %d %s: the client logged %d frame(s) (%s) written after the peer had closed "
                    "the connection; they are not in the capture (marked on_wire: false)"
                    % (row["tcp_stream"], d, len(late), ", ".join(f["performative"] for f in late))
                )
    tpath = outdir / (scenario.capture[: -len(".pcap")] + ".truth.json")
    tpath.write_text(json.dumps(truth, indent=1, sort_keys=False) + "\n")
    if not keep_log:
        logfile.unlink()
    log("wrote", pcap, pcap.stat().st_size, "bytes;", tpath, tpath.stat().st_size, "bytes")
    for row in truth["crosscheck"].get("connections", []):
        log("crosscheck", row)
    return truth


def write_index(outdir):
    """captures/rabbitmq10_index.json: one line of figures per 1.0 capture, from its truth."""
    rows = []
    for t in sorted(outdir.glob("rabbitmq10_*.truth.json")):
        d = json.loads(t.read_text())
        counts = collections.Counter()
        more = 0
        for c in d["connections"]:
            for f in c["frames"]:
                if f.get("on_wire") is False:
                    continue
                counts[f["performative"]] += 1
                more += f["performative"] == "transfer" and bool((f.get("fields") or {}).get("more"))
        conditions = sorted(
            {e["condition"] for c in d["connections"] for e in c["errors"] if e.get("condition")}
        )
        rows.append(
            {
                "capture": d["capture"],
                "truth": t.name,
                "scenario": d["scenario"],
                "client": "%s %s" % (d["client"]["name"], d["client"]["version"]),
                "connections": [
                    {"tcp_stream": c["tcp_stream"], "label": c.get("label"), "protocol": c["protocol"]}
                    for c in d["connections"]
                ],
                "frames_logged_on_wire": sum(counts.values()),
                "frames_tshark": sum(
                    row.get(k, 0)
                    for row in d["crosscheck"].get("connections", [])
                    for k in ("c2s_tshark_frames", "s2c_tshark_frames")
                ),
                "performatives": dict(sorted(counts.items())),
                "transfers_with_more": more,
                "messages_sent": sum(len(c["sends"]) for c in d["connections"]),
                "messages_received": sum(len(c["receives"]) for c in d["connections"]),
                "error_conditions": conditions,
                "notes": d["notes"],
            }
        )
    path = outdir / "rabbitmq10_index.json"
    path.write_text(json.dumps({"format": "amqpcap-truth-10-index/1", "captures": rows}, indent=1) + "\n")
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "captures"))
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep-log", action="store_true", help="keep the client's raw JSON-lines log")
    a = ap.parse_args(argv)
    if a.list:
        for s in SCENARIOS.values():
            print("%-20s %s" % (s.name, s.description))
        return 0
    if os.geteuid() != 0:
        log("needs root (tcpdump on lo, rabbitmqctl)")
        return 1
    names = [n for n in a.only.split(",") if n] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        log("unknown scenario(s):", ", ".join(unknown))
        return 2
    done = ensure_broker()
    if done:
        log("broker:", "; ".join(done))
    binfo = broker_info()
    outdir = Path(a.out)
    for n in names:
        record(SCENARIOS[n], outdir, binfo, keep_log=a.keep_log)
        time.sleep(0.5)
    log("wrote", write_index(outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
