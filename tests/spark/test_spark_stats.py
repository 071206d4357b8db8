"""`stats --spark` gives the report the pandas `stats` gives on the same output: by its parts as
Spark tasks (the same JSON), or, beyond what a task holds, by the per-conversation Spark jobs
(counts equal, latencies (ms) within 1 µs)."""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import warnings
from pathlib import Path

import pytest

import amqpcap
from amqpcap.analysis import stats as pandas_stats
from amqpcap.analysis.summary import STATS_PARTS, stats_of_parts, stats_parts
from amqpcap.cli import main
from amqpcap.pipeline import dissect
from amqpcap.spark import stats_tasks

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


def stamped_1970(src: str, dst, packet: int) -> str:
    """A copy of the classic pcap ``src`` whose ``packet``-th record (1-based) is stamped 0 (1970)."""
    data = bytearray(open(src, "rb").read())
    assert data[:4] == bytes.fromhex("d4c3b2a1")  # little-endian, µs
    pos = 24
    for _ in range(packet - 1):
        pos += 16 + int.from_bytes(data[pos + 8 : pos + 12], "little")
    data[pos : pos + 8] = bytes(8)
    dst.write_bytes(bytes(data))
    return str(dst)


# "all": captures recorded three years apart in one output (buckets counted, never materialised);
# "1970": one packet of a capture stamped 0, a time outlier the span reports
@pytest.fixture(scope="module", params=["all+frames", "all", "1970"])
def output(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stats")
    out = str(tmp / "out")
    captures = CAPTURES
    if request.param == "1970":
        captures = [stamped_1970(str(ROOT / "captures" / "rabbitmq091_pika_full.pcap"), tmp / "t.pcap", 14)]
    dissect(captures, out, frames=request.param.endswith("frames"))
    return out


# "parts": the pandas stats' parts as Spark tasks; "conversations": the per-conversation Spark
# jobs an output larger than a task holds goes to
@pytest.fixture(params=["parts", "conversations"])
def way(request, monkeypatch):
    if request.param == "conversations":
        monkeypatch.setattr(stats_tasks, "PARTS_UP_TO", 0)

        def no_parts(*args, **kwargs):
            raise AssertionError("the parts were computed")

        monkeypatch.setattr(stats_tasks, "Report", no_parts)
    return request.param


def test_stats_parts_computed_apart_and_merged_give_the_stats_of_the_whole(output):
    """What the Spark tasks compute: each task's parts alone, merged on the driver."""
    items = [t for t in stats_tasks.TASKS if t != (stats_tasks.CONNECTIONS,)]
    assert sorted(p for t in items for p in t) == sorted(STATS_PARTS)  # each part in one task
    got = stats_of_parts(stats_tasks.merged([stats_parts(output, t) for t in items]))
    assert json.dumps(got, default=str) == json.dumps(pandas_stats(output), default=str)


def test_stats_spark_json_equals_the_pandas_stats_on_the_shipped_captures(spark, output, way, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["stats", output, "--spark", "--json"]) == 0
    # pyspark's pandas-3 FutureWarning is not printed on every run
    assert not [w for w in caught if "fully support pandas" in str(w.message)]
    text = capsys.readouterr().out
    got = json.loads(text)
    want = json.loads(json.dumps(pandas_stats(amqpcap.load(output)), default=str))
    assert_same_report(got, want)
    if way == "parts":  # the pandas stats' own JSON, to the byte
        assert main(["stats", output, "--json"]) == 0
        assert text == capsys.readouterr().out
    assert want["throughput"]["messages"] > 0 and want["methods"]
    if len(want["captures"]) > 1:
        # the comparison has teeth: these captures exercise every kind of pairing
        lat = want["latency"]
        assert all(
            lat[k]["count"] > 0
            for k in ("method_rtt", "confirm", "consumer_ack", "transit", "rpc", "connection_setup")
        )
        assert want["errors"] and want["health"]["blocked"] > 0
        assert any(len(e["texts"]) > 1 for e in want["errors"])  # one error, several reply texts
        assert want["span"]["duration_s"] > 2 * 365 * 86400 and want["throughput"]["buckets"] < 10**6
    else:
        assert want["span"]["time_outliers"] == 1 and want["span"]["first_time_outlier"]["frame_number"] == 14
    assert want["throughput"]["frames_source"] == ("frames" if "frames" in os.listdir(output) else "estimate")


def assert_same_text(got: str, want: str) -> None:
    """The same lines, except latency figures (ms, three decimals) within 1 µs (Spark's
    percentiles are over latencies rounded to 1 µs: ``assert_same_report``)."""
    g, w = got.splitlines(), want.splitlines()
    assert len(g) == len(w), (got, want)
    for a, b in zip(g, w):
        if a == b:
            continue
        ta, tb = a.split(), b.split()
        assert len(ta) == len(tb), (a, b)
        for x, y in zip(ta, tb):
            if x != y:
                assert "." in x and abs(float(x.replace(",", "")) - float(y.replace(",", ""))) <= 0.0011, (
                    a,
                    b,
                )


def test_stats_spark_prints_the_text_the_pandas_stats_prints_connections_included(spark, output, way, capsys):
    assert main(["stats", output, "--spark"]) == 0
    got = capsys.readouterr()
    assert main(["stats", output]) == 0
    want = capsys.readouterr().out
    assert "\nConnections" in want and "client" in want
    assert_same_text(got.out, want)
    if way == "parts":
        assert got.out == want
    assert got.err == ""  # no terminal here: no progress lines, and no JVM or Spark chatter


def test_stats_spark_shows_a_line_per_step_on_a_terminal(spark, output, capsys, monkeypatch):
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert main(["stats", output, "--spark", "--json"]) == 0
    err = capsys.readouterr().err
    # the count refreshed in place ("\r"), the last count on a line of its own; the tasks (at
    # most one a core) take the parts the driver has not computed while the session started
    last = err.splitlines()[-1]
    assert err.endswith(" s\n") and re.search(r"amqpcap stats: parts: (\d+)/\1 tasks done, ", last)
    lines = [line for line in err.replace("\r", "\n").split("\n") if line]
    step = re.compile(r"amqpcap stats: (parts: |\d+ of \d+ parts computed while Spark started)")
    assert all(step.match(x) for x in lines)


def test_stats_spark_needs_an_output_directory(tmp_path, capsys):
    assert main(["stats", CAPTURES[0], "--spark"]) == 3
    assert "stats --spark reads a dissect or spark output directory" in capsys.readouterr().err


@pytest.fixture(scope="module")
def rpc_set(tmp_path_factory):
    """bench_spark's generated set, small: every publish a request (reply_to "reply.q", a
    correlation id, routing key "orders.N") without a reply, several publishes to a TCP segment,
    the same correlation ids in every capture."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_spark

    tmp = tmp_path_factory.mktemp("rpcset")
    for i in range(3):
        bench_spark.build(str(tmp / f"c{i}.pcap"), 400_000, 4, seed=100 + i)
    out = str(tmp / "out")
    dissect(sorted(glob.glob(str(tmp / "*.pcap"))), out)
    return out


def test_stats_spark_counts_each_rpc_request_once_when_a_segment_holds_several(spark, rpc_set, way, capsys):
    assert main(["stats", rpc_set, "--spark", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    t = amqpcap.load(rpc_set)
    want = json.loads(json.dumps(pandas_stats(t), default=str))
    assert_same_report(got, want)
    m = t.messages
    publishes = m[(m["method"] == "basic.publish") & m["reply_to"].notna()]
    # the traffic has what made the two differ: requests sharing a frame, no replies
    assert publishes.duplicated(["capture", "tcp_stream", "frame_number"]).any()
    assert got["latency"]["rpc"] == dict(got["latency"]["rpc"], count=0, missing=len(publishes))
