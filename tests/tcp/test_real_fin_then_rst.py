"""A real close by FIN then RST (seq = FIN + 1), recorded on loopback: no byte lost, as tshark
says (tests/captures/README.md tells how it was recorded); with each reassembler (conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from amqpcap.pipeline import dissect

CAP = Path(__file__).resolve().parents[1] / "captures" / "loopback_client_fin_then_rst.pcap"
PORT = 47356


def tshark_lost_segments() -> int:
    exe = shutil.which("tshark")
    if exe is None:
        (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)("tshark not installed")
    out = subprocess.run(
        [exe, "-n", "-r", str(CAP), "-Y", "tcp.analysis.lost_segment || tcp.analysis.ack_lost_segment"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return len(out.splitlines())


def test_a_client_closing_with_fin_then_rst_loses_no_byte_as_tshark_says(tmp_path):
    rst = subprocess.run(
        [
            shutil.which("tshark") or "tshark",
            "-n",
            "-r",
            str(CAP),
            "-Y",
            "tcp.flags.reset == 1 || tcp.flags.fin == 1",
        ]
        + ["-T", "fields", "-e", "tcp.seq_raw", "-e", "tcp.flags.fin", "-e", "tcp.srcport"],
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    lost = tshark_lost_segments()
    (fin_seq, _, fin_port), (rst_seq, _, rst_port) = (line.split("\t") for line in rst[:2])
    assert int(rst_seq) == int(fin_seq) + 1 and fin_port == rst_port != str(PORT)  # the case: the client's
    dissect([str(CAP)], str(tmp_path / "out"), ports=[PORT])
    (c,) = pq.read_table(tmp_path / "out" / "connections").to_pylist()
    gaps = [a for a in pq.read_table(tmp_path / "out" / "anomalies").to_pylist() if a["kind"] == "gap"]
    assert (c["gaps"], c["gap_bytes"], len(gaps)) == (lost, 0, 0) == (0, 0, 0)
    assert (c["rst_by"], c["closed_by"]) == ("client", "client-fin")
