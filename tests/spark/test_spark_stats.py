"""`stats --spark` (Spark DataFrame jobs) gives the report the pandas `stats` gives on the same output:
counts equal, latencies (ms) within 1 µs."""
from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest

import amqpcap
from amqpcap.analysis import stats as pandas_stats
from amqpcap.cli import main
from amqpcap.pipeline import dissect

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted(glob.glob(str(ROOT / "captures" / "*.pcap")))


def assert_same_report(got, want, path="stats"):
    """Equal, except values in milliseconds (keys ending in ``_ms``/``_ms_total``): within 1 µs."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{path}: keys {set(got) ^ set(want)}"
        for k in want:
            assert_same_report(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{path}: {got} != {want}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_report(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and (path.endswith("_ms") or path.endswith("_ms_total")):
        assert got is not None and abs(got - want) <= 0.001 + 1e-9, f"{path}: {got} != {want}"
    else:
        assert got == want and type(got) is type(want), f"{path}: {got!r} != {want!r}"


# netamqp09_offline.pcap was recorded three years before the others: together, the pandas path
# materialises every 1 s throughput bucket in between (Spark does not), so it gets its own output.
OLD = [c for c in CAPTURES if c.endswith("netamqp09_offline.pcap")]
RECENT = [c for c in CAPTURES if c not in OLD]


@pytest.fixture(scope="module", params=["recent+frames", "recent", "netamqp09_offline"])
def output(request, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("stats") / "out")
    captures = OLD if request.param == "netamqp09_offline" else RECENT
    dissect(captures, out, frames=request.param.endswith("frames"))
    return out


def test_stats_spark_json_equals_the_pandas_stats_on_the_shipped_captures(spark, output, capsys):
    assert main(["stats", output, "--spark", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = json.loads(json.dumps(pandas_stats(amqpcap.load(output)), default=str))
    assert_same_report(got, want)
    assert want["throughput"]["messages"] > 0 and want["methods"]
    if want["captures"] != OLD:
        # the comparison has teeth: these captures exercise every kind of pairing
        lat = want["latency"]
        assert all(lat[k]["count"] > 0 for k in ("method_rtt", "confirm", "consumer_ack", "transit", "rpc",
                                                  "connection_setup"))
        assert want["errors"] and want["health"]["blocked"] > 0
    assert want["throughput"]["frames_source"] == ("frames" if "frames" in os.listdir(output) else "estimate")


def test_stats_spark_needs_an_output_directory(tmp_path, capsys):
    assert main(["stats", CAPTURES[0], "--spark"]) == 3
    assert "stats --spark reads a dissect or spark output directory" in capsys.readouterr().err
