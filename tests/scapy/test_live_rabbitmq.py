"""amqpcap live on loopback against a real RabbitMQ and a real pika client.

The broker is started as the recording scripts start it (captures/record/record_091.py:
``rabbitmq-server -detached``, a fresh vhost and user); the client's connections come from
their own loopback address so the BPF filter sees nothing else.  What pika itself sent and
processed, method by method (its ``_send_method`` / ``_process_frame``), is the truth the
printed lines and the written segments are checked against.

Needs root and rabbitmq-server; skipped without them unless AMQPCAP_REQUIRE_TOOLS is set
(scripts/test.sh installs rabbitmq-server and sets it in CI).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import amqpcap
from amqpcap.amqp import spec

ROOT = Path(__file__).resolve().parents[2]
ADDR = "127.0.91.213"  # the client's source address (the recording scripts use 127.0.91.N)

pytestmark = pytest.mark.skipif(
    (shutil.which("rabbitmq-server") is None or os.geteuid() != 0)
    and not os.environ.get("AMQPCAP_REQUIRE_TOOLS"),
    reason="needs rabbitmq-server and root",
)


def recorder():
    s = importlib.util.spec_from_file_location("record_091", ROOT / "captures" / "record" / "record_091.py")
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m


@pytest.fixture
def broker_to_ourselves():
    """The machine's one RabbitMQ, held for this test: scripts/test.sh runs its two passes side by
    side, and each resets the broker's vhost and user."""
    with open("/tmp/amqpcap-test-rabbitmq.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def method_name(method) -> str:
    return spec.get("0-9-1").METHODS[(method.INDEX >> 16, method.INDEX & 0xFFFF)].name


@pytest.fixture
def pika_log(monkeypatch):
    """(direction, channel, method) of every method pika sends or processes, in its own order."""
    import pika.connection
    import pika.frame

    log = []
    lock = threading.Lock()
    send, process = pika.connection.Connection._send_method, pika.connection.Connection._process_frame

    def sent(self, channel_number, method, content=None):
        with lock:
            log.append(("c2s", channel_number, method_name(method)))
        return send(self, channel_number, method, content)

    def processed(self, frame_value):
        if isinstance(frame_value, pika.frame.Method):
            with lock:
                log.append(("s2c", frame_value.channel_number, method_name(frame_value.method)))
        return process(self, frame_value)

    monkeypatch.setattr(pika.connection.Connection, "_send_method", sent)
    monkeypatch.setattr(pika.connection.Connection, "_process_frame", processed)
    return log


def start_live(out: Path):
    cmd = [
        sys.executable,
        "-m",
        "amqpcap.cli",
        "live",
        "-i",
        "lo",
        "-f",
        f"tcp port 5672 and host {ADDR}",
        "-o",
        str(out),
        "--rotate",
        "1s",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stderr.readline()
    if "capturing on lo" not in line:
        proc.kill()
        pytest.fail(f"amqpcap live did not start: {line!r} {proc.stderr.read()}")
    time.sleep(0.3)  # the socket is open before the line is printed; give the kernel a moment
    return proc


def printed_methods(stdout: str):
    """(direction, channel, method) of the lines in show's format."""
    out = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[3] in ("c2s", "s2c") and parts[4].startswith("ch"):
            out.append((parts[3], int(parts[4][2:]), parts[5]))
    return out


def per_direction(rows):
    return {d: [(c, m) for dd, c, m in rows if dd == d] for d in ("c2s", "s2c")}


def test_live_prints_and_writes_the_methods_pika_sent_and_received(
    tmp_path, pika_log, monkeypatch, broker_to_ourselves
):
    import amqp.transport
    import pika
    import pika.adapters.utils.connection_workflow as workflow

    rec = recorder()
    rec.ensure_broker()
    rec.reset_broker_state()
    rec.SOURCE["addr"] = ADDR
    # the recorder binds client sockets to ADDR by swapping the clients' socket modules; put them back after
    monkeypatch.setattr(workflow, "socket", workflow.socket)
    monkeypatch.setattr(amqp.transport, "socket", amqp.transport.socket)
    rec.install_socket_tracing()
    params = pika.ConnectionParameters(
        host="127.0.0.1",
        port=5672,
        virtual_host=rec.VHOST,
        heartbeat=0,
        credentials=pika.PlainCredentials(rec.USER, rec.PASSWORD),
        client_properties={"connection_name": "amqpcap-live-test"},
    )
    out = tmp_path / "live"
    proc = start_live(out)
    try:
        conn = pika.BlockingConnection(params)
        ch = conn.channel()
        ch.queue_declare("amqpcap-live", durable=False, auto_delete=False)
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish(
                "",
                "amqpcap-live",
                f"message {i}".encode(),
                pika.BasicProperties(content_type="text/plain", message_id=f"m{i}"),
            )
        got = ch.basic_get("amqpcap-live", auto_ack=False)
        ch.basic_ack(got[0].delivery_tag)
        ch.queue_purge("amqpcap-live")
        ch.queue_delete("amqpcap-live")
        ch.close()
        conn.close()
        # a second connection still open at Ctrl-C: its conversation is written too
        open_conn = pika.BlockingConnection(params)
        open_ch = open_conn.channel()
        time.sleep(2.5)  # more than one rotation period
        growing = amqpcap.load(out)  # the directory as it is while live still runs
        assert len(growing.methods) > 0
        stats = subprocess.run(
            [sys.executable, "-m", "amqpcap.cli", "stats", str(out), "--json"],
            check=False,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert stats.returncode == 0 and json.loads(stats.stdout), stats.stderr
        logged_before_stop = len(pika_log)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        open_ch.close()
        open_conn.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    truth = per_direction(pika_log)
    assert len(truth["c2s"]) >= 20 and ("c2s", 1, "basic.publish") in pika_log
    # truth: everything pika logged before Ctrl-C (the open connection's close came after it)
    before_stop = per_direction(pika_log[:logged_before_stop])
    assert per_direction(printed_methods(stdout)) == before_stop

    t = amqpcap.load(out)
    written = t.methods.sort_values(["tcp_stream", "frame_number", "stream_offset"])
    rows = [(r.direction, int(r.channel), r.method) for r in written.itertuples()]
    assert per_direction(rows) == before_stop
    assert len(t.messages) == 4 and sorted(t.messages.message_id) == ["m0", "m0", "m1", "m2"]
    conns = t.connections.sort_values("tcp_stream")
    assert len(conns) == 2 and list(conns.connection_name) == ["amqpcap-live-test"] * 2
    assert conns.iloc[0].closed_by == "client" and conns.iloc[0].client_ip == ADDR
    assert pd.isna(conns.iloc[1].close_ts)  # still open at Ctrl-C, and written
    segments = sorted(p.name for p in (out / "methods").iterdir())
    assert len(segments) >= 2 and all(p.startswith("part-") and p.endswith(".parquet") for p in segments)
    assert not (out / ".segments").exists()
    assert len(growing.methods) <= len(t.methods)
