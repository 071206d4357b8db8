"""amqpcap live: errors, rotation, segments, and a capture of local AMQP traffic on loopback."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import amqpcap
from amqpcap.live import Rotation, SegmentWriter
from amqpcap.records.schema import SCHEMAS
from amqpcap.records.writer import OutputExists

ROOT = Path(__file__).resolve().parents[2]
LIVE = [sys.executable, "-m", "amqpcap.cli", "live"]


def run(args):
    return subprocess.run([*LIVE, *args], check=False, capture_output=True, text=True, cwd=ROOT, timeout=60)


def one_line_error(r, code):
    assert r.returncode == code, r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_without_capture_privilege_one_line_and_exit_77():
    if os.geteuid() == 0:
        if shutil.which("capsh") is None:
            (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)(
                "root, and no capsh (libcap2-bin) to drop CAP_NET_RAW"
            )
        # root without CAP_NET_RAW: the packet socket is refused as for an ordinary user
        r = subprocess.run(
            ["capsh", "--drop=cap_net_raw", "--", "-c", " ".join([*LIVE, "-i", "lo"])],
            check=False,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
    else:
        r = run(["-i", "lo"])
    one_line_error(r, 77)
    assert "no privilege to capture on lo" in r.stderr


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="capturing needs root")


@needs_root
def test_unknown_interface_exit_66():
    one_line_error(run(["-i", "no-such-if0"]), 66)


@needs_root
def test_invalid_bpf_filter_exit_64():
    r = run(["-i", "lo", "-f", "tcp port and"])
    one_line_error(r, 64)
    assert "filter" in r.stderr


def test_rotate_without_out_and_bad_rotation_are_usage_errors():
    one_line_error(run(["-i", "lo", "--rotate", "60s"]), 64)
    one_line_error(run(["-i", "lo", "-o", "x", "--rotate", "sixty"]), 64)


def test_existing_output_exit_5_before_capturing(tmp_path):
    (tmp_path / "out").mkdir()
    r = run(["-i", "lo", "-o", str(tmp_path / "out")])  # refused even before the socket is opened
    one_line_error(r, 5)
    assert "exists" in r.stderr


def test_rotation_by_time_and_by_size():
    assert Rotation.parse("60s").seconds == 60 and Rotation.parse("5m").seconds == 300
    assert Rotation.parse("100MB").nbytes == 100_000_000 and Rotation.parse("1KB").nbytes == 1000
    r = Rotation.parse("2s")
    assert not r.due(10.0, 11.9, 10**9) and r.due(10.0, 12.0, 0)
    r = Rotation.parse("1KB")
    assert not r.due(0, 10**6, 999) and r.due(0, 0, 1000)


ROW = (
    "cap",
    0,
    1,
    1_700_000_000_000_000_000,
    "c2s",
    0,
    0,
    "connection.start",
    10,
    10,
    "0-9-1",
    True,
    False,
    10,
)
ROW += (None,) * (len(SCHEMAS["methods"]) - len(ROW))  # the method's arguments: none


def test_segments_appear_whole_in_the_table_directories(tmp_path):
    out = tmp_path / "out"
    w = SegmentWriter(str(out), ["connections", "methods", "messages", "anomalies"])
    w["methods"].append(ROW)
    assert list((out / "methods").iterdir()) == []  # the open segment is not in the table directory
    assert len(amqpcap.load(out).methods) == 0  # a reader of the growing directory sees no half file
    w.rotate()
    assert sorted(p.name for p in (out / "methods").iterdir()) == ["part-00000.parquet"]
    assert len(amqpcap.load(out).methods) == 1
    w["methods"].append(ROW)
    w["methods"].append(ROW)
    rows = w.close()
    assert rows["methods"] == 3 and w.segments == 2
    assert sorted(p.name for p in (out / "methods").iterdir()) == ["part-00000.parquet", "part-00001.parquet"]
    assert len(amqpcap.load(out).methods) == 3 and not (out / ".segments").exists()
    with pytest.raises(OutputExists):
        SegmentWriter(str(out), ["methods"])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _live_over_local_traffic(port, args, stop=signal.SIGINT):
    """Run live on loopback with ``args`` while a client and a server on ``port`` exchange
    connection.start, start-ok and tune; stop it with ``stop``; (returncode, stdout, stderr)."""
    from amqpcap.scapy import AMQP, AMQPProtocolHeader

    cmd = [*LIVE, "-i", "lo", "-f", f"tcp port {port}", "--ports", str(port), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert "capturing on lo" in proc.stderr.readline()
        time.sleep(0.3)
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", port))
        srv.listen(1)
        cli = socket.create_connection(("127.0.0.1", port))
        conn, _ = srv.accept()
        cli.sendall(bytes(AMQPProtocolHeader()))
        conn.sendall(
            bytes(
                AMQP(
                    method="connection.start",
                    version_major=0,
                    version_minor=9,
                    server_properties={"product": "local" * 300},
                    mechanisms="PLAIN",
                    locales="en_US",
                )
            )
        )
        time.sleep(0.3)
        cli.sendall(
            bytes(
                AMQP(
                    method="connection.start-ok",
                    client_properties={"product": "test"},
                    mechanism="PLAIN",
                    response=b"\0u\0p",
                    locale="en_US",
                )
            )
        )
        time.sleep(0.3)
        conn.sendall(bytes(AMQP(method="connection.tune", channel_max=8, frame_max=4096, heartbeat=0)))
        time.sleep(0.5)
        cli.close()
        conn.close()
        srv.close()
        time.sleep(0.5)
        proc.send_signal(stop)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, stdout, stderr


@needs_root
def test_live_prints_methods_of_local_traffic_and_rotates_by_size(tmp_path):
    port = _free_port()
    out = tmp_path / "live"
    code, stdout, stderr = _live_over_local_traffic(port, ["-o", str(out), "--rotate", "1KB"])
    assert code == 0, stderr
    headers = [ln for ln in stdout.splitlines() if ln.startswith("# stream")]
    assert len(headers) == 1 and "-> 127.0.0.1:" in headers[0]  # a line naming the conversation first
    lines = [ln.split() for ln in stdout.splitlines() if not ln.startswith("#")]
    assert [(ln[3], ln[5]) for ln in lines] == [
        ("s2c", "connection.start"),
        ("c2s", "connection.start-ok"),
        ("s2c", "connection.tune"),
    ]
    t = amqpcap.load(out)
    assert list(t.methods.method) == ["connection.start", "connection.start-ok", "connection.tune"]
    assert len(t.connections) == 1 and t.connections.iloc[0].server_port == port
    assert len(list((out / "methods").iterdir())) >= 2  # the 1.5 KB start frame passed the 1 KB rotation


@needs_root
def test_live_filters_lines_like_show_keeps_every_row_and_exits_143_on_sigterm(tmp_path):
    port = _free_port()
    out = tmp_path / "live"
    args = ["-o", str(out), "--method", "Connection.Tune", "--method", "connection.start", "--channel", "0"]
    code, stdout, stderr = _live_over_local_traffic(port, args, stop=signal.SIGTERM)
    assert code == 143, stderr
    lines = [ln.split() for ln in stdout.splitlines() if not ln.startswith("#")]
    assert [ln[5] for ln in lines] == ["connection.start", "connection.tune"]
    t = amqpcap.load(out)  # the segments are whole and keep every row
    assert list(t.methods.method) == ["connection.start", "connection.start-ok", "connection.tune"]
    assert len(t.connections) == 1


def test_live_help_has_a_description_examples_exit_codes_and_whole_option_helps():
    r = run(["--help"])
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "print AMQP methods as they happen on an interface" in text and "SIGTERM too (exit 143)" in text
    assert "examples: amqpcap live -i" in text and "exit codes:" in text and "143 stopped by SIGTERM" in text
    assert "seconds since the first packet captured" in text
    for option in ("--stream", "--channel", "--method", "--exchange", "--queue", "--routing-key"):
        assert option in text


def test_the_dissect_path_does_not_import_scapy(tmp_path):
    code = (
        "import sys, amqpcap, amqpcap.pipeline, amqpcap.cli; amqpcap.cli.build_parser(); "
        "amqpcap.pipeline.dissect('captures/rabbitmq091_pika_refused.pcap', sys.argv[1], force=True); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scapy'))"
    )
    with_tmp = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "out")],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert with_tmp.returncode == 0, with_tmp.stderr
    assert with_tmp.stdout.strip() == "[]"
