"""Same input, same options -> same rows; no temporary directory left behind."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from amqpcap.pipeline import dissect

CAPS = Path(__file__).resolve().parents[1] / "captures"


@pytest.mark.parametrize(
    "name", ["rabbitmq091_pika_full.pcap", "qpid010_basic.pcap", "rabbitmq08_amqplib.pcap"]
)
def test_two_runs_write_identical_tables(tmp_path, name):
    for out in ("a", "b"):
        dissect([str(CAPS / name)], str(tmp_path / out), frames=True)
    for table in ("connections", "methods", "messages", "anomalies", "frames"):
        a = pq.read_table(tmp_path / "a" / table)
        b = pq.read_table(tmp_path / "b" / table)
        assert a.num_rows == b.num_rows and a.equals(b), table
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
