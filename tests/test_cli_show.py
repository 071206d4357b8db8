"""amqpcap show: one line per method, filters by stream, channel and method."""
import subprocess
import sys
from pathlib import Path

import pandas as pd

from amqpcap.pipeline import dissect

CAP = Path(__file__).resolve().parents[1] / "captures" / "rabbitmq091_pika_full.pcap"


def _show(*args):
    r = subprocess.run([sys.executable, "-m", "amqpcap.cli", "show", str(CAP), *args],
                       capture_output=True, text=True, check=True)
    return [line for line in r.stdout.splitlines() if line.strip()]


def test_show_prints_one_line_per_method_row(tmp_path):
    dissect([str(CAP)], str(tmp_path / "o"))
    methods = pd.read_parquet(tmp_path / "o" / "methods")
    lines = _show()
    assert len(lines) == len(methods)
    # Packet number and method name of each line match the rows, in order.
    got = [(int(l.split()[1]), l.split()[5]) for l in lines]
    assert got == list(zip(methods.frame_number.astype(int), methods.method))


def test_method_prefix_and_channel_filters(tmp_path):
    dissect([str(CAP)], str(tmp_path / "o"))
    m = pd.read_parquet(tmp_path / "o" / "methods")
    lines = _show("--method", "basic.")
    assert len(lines) == int(m.method.str.startswith("basic.").sum()) > 0
    assert all(l.split()[5].startswith("basic.") for l in lines)
    lines = _show("--method", "basic.publish", "--channel", "1")
    assert len(lines) == int(((m.method == "basic.publish") & (m.channel == 1)).sum())
    publish = m[m.method == "basic.publish"].iloc[0]
    first = _show("--method", "basic.publish")[0]
    assert f"routing-key={publish.routing_key}" in first


def test_password_never_shown():
    r = subprocess.run([sys.executable, "-m", "amqpcap.cli", "show", str(CAP)], capture_output=True, text=True)
    assert "s3cret-pw" not in r.stdout and "start-ok" in r.stdout
