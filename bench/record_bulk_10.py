#!/usr/bin/env python3
"""Record a real AMQP 1.0 bulk capture for the benchmarks (RabbitMQ's 1.0 plugin, Qpid Proton).

Usage (as root, from the repository root, with python-qpid-proton in the venv)::

    .venv/bin/python bench/record_bulk_10.py                 # ~20 MB: bench/data/rabbit10_bulk_20mb.pcap
    .venv/bin/python bench/record_bulk_10.py --mb 100

then ``python bench/bench_dissect.py --capture bench/data/rabbit10_bulk_20mb.pcap --runs 2``.

Broker and tcpdump come from ``captures/record/record_10.py`` (RabbitMQ with the
``rabbitmq_amqp1_0`` plugin on 127.0.0.1:5672; the client sockets are bound to 127.0.10.93 and
tcpdump filters on it). One Proton container runs, each on its own connection:

- a sender (unsettled: every transfer gets its disposition) and a pre-settled sender (one message
  in five), both to the queue ``amqpcap10-bulk``;
- a receiver with a credit window of 500 that accepts every message.

Bodies are seeded random bytes: mostly 32..384 B, 1 % of 1..64 KiB (several transfer frames at
Proton's max-frame-size of 32 KiB), each with a message-id, and every 50th with
correlation-id / reply-to and application-properties; the message count is sized so the capture
is about ``--mb`` MB. ``FILE.truth.json`` holds what the clients did: messages sent (unsettled /
pre-settled), accepted by the broker, received and accepted, body bytes, and the SHA-256 of the
sorted body digests.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = "127.0.10.93"
QUEUE = "amqpcap10-bulk"


def recorder():
    spec = importlib.util.spec_from_file_location("record_10", ROOT / "captures" / "record" / "record_10.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bodies(n, seed=10):
    rnd = random.Random(seed)
    for i in range(n):
        size = rnd.randint(1024, 65536) if rnd.random() < 0.01 else rnd.randint(32, 384)
        yield i, rnd.randbytes(size)


def run_clients(n, truth):
    import socket
    import types

    import proton._io
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import AtMostOnce, Container

    class Bound(socket.socket):
        def connect_ex(self, address):
            self.bind((SRC, 0))
            return super().connect_ex(address)

        def connect(self, address):
            self.bind((SRC, 0))
            return super().connect(address)

    shim = types.ModuleType("socket_bound")
    shim.__dict__.update(socket.__dict__)
    shim.socket = Bound
    proton._io.socket = shim

    digests_sent, digests_recv = [], []

    class Bulk(MessagingHandler):
        def __init__(self):
            super().__init__(prefetch=500, auto_accept=True)
            self.todo = bodies(n)
            self.sent = self.accepted = self.received = 0
            self.presettled = 0
            self.next = None

        def on_start(self, event):
            c = event.container
            url = "amqp://guest:guest@127.0.0.1:5672"
            self.rconn = c.connect(url, allowed_mechs="PLAIN", container_id="amqpcap-bulk-receiver")
            c.create_receiver(self.rconn, "/queue/" + QUEUE, name="bulk-receiver")
            self.sconn = c.connect(url, allowed_mechs="PLAIN", container_id="amqpcap-bulk-sender")
            self.sender = c.create_sender(self.sconn, "/queue/" + QUEUE, name="bulk-sender")
            self.psender = c.create_sender(
                self.sconn, "/queue/" + QUEUE, name="bulk-presettled", options=AtMostOnce()
            )

        def on_sendable(self, event):
            while True:
                if self.next is None:
                    self.next = next(self.todo, None)
                    if self.next is None:
                        return
                i, b = self.next
                link = self.psender if i % 5 == 4 else self.sender
                if not link.credit:
                    return
                m = Message(id="bulk-%d" % i, body=b)
                m.inferred = True
                if i % 50 == 0:
                    m.correlation_id = "corr-%d" % i
                    m.reply_to = "/queue/%s-replies" % QUEUE
                    m.properties = {"i": i, "kind": "rpc-like"}
                link.send(m)
                digests_sent.append(hashlib.sha256(b).hexdigest())
                self.sent += 1
                self.presettled += link is self.psender
                truth["body_bytes"] += len(b)
                self.next = None

        def on_accepted(self, event):
            self.accepted += 1

        def on_message(self, event):
            digests_recv.append(hashlib.sha256(bytes(event.message.body)).hexdigest())
            self.received += 1
            if self.received == n:
                self.sconn.close()
                self.rconn.close()

    h = Bulk()
    t0 = time.time()
    Container(h).run()
    truth.update(
        sent=h.sent,
        sent_presettled=h.presettled,
        sent_unsettled=h.sent - h.presettled,
        accepted_by_broker=h.accepted,
        received_and_accepted=h.received,
        seconds=round(time.time() - t0, 2),
        bodies_sha256_sorted_sent=hashlib.sha256("".join(sorted(digests_sent)).encode()).hexdigest(),
        bodies_sha256_sorted_received=hashlib.sha256("".join(sorted(digests_recv)).encode()).hexdigest(),
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("record_bulk_10: needs root (tcpdump on lo)", file=sys.stderr)
        return 1
    rec = recorder()
    rec.ensure_broker()
    rec.R091.ctl("-q", "delete_queue", QUEUE, check=False)
    out = Path(a.out or ROOT / "bench" / "data" / ("rabbit10_bulk_%dmb.pcap" % a.mb))
    out.parent.mkdir(parents=True, exist_ok=True)
    # about 1.25 kB on the wire per message (both ways; the 1 % large bodies weigh most)
    n = a.mb * 1_000_000 // 1250
    truth = {
        "format": "amqpcap-bulk-10/1",
        "capture": out.name,
        "messages": n,
        "body_bytes": 0,
        "broker": rec.broker_info(),
    }
    with rec.R091.Tcpdump(str(out), SRC) as td:
        run_clients(n, truth)
    truth["tcpdump"] = td.stats()
    out.with_suffix(".truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    print(json.dumps({k: v for k, v in truth.items() if k != "broker"}, indent=1))
    print("%s: %.1f MB" % (out, out.stat().st_size / 1e6))
    ok = (
        truth["sent"] == truth["received_and_accepted"] == n
        and truth["accepted_by_broker"] == truth["sent_unsettled"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
