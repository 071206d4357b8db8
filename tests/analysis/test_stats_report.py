"""stats JSON contract and the HTML report."""

import base64
import json
import re
import subprocess
import sys

import pytest
from tables import Capture, at

from amqpcap.analysis import render_text, stats, write_report


def sample():
    c = Capture()
    c.connection(stream=0, syn_ts=at(-10), open_ts=at(0), end_ts=at(3000), heartbeat=0)
    c.connection(stream=1, end_ts=at(3000))
    c.method(0, "c2s", "basic.qos", channel=1, prefetch_count=10)
    c.method(1, "s2c", "basic.qos-ok", channel=1)
    c.method(2, "c2s", "basic.consume", channel=1, queue="q", consumer_tag="c")
    c.method(4, "s2c", "basic.consume-ok", channel=1, consumer_tag="c")
    c.method(5, "c2s", "confirm.select", channel=1, stream=1)
    c.method(6, "s2c", "confirm.select-ok", channel=1, stream=1)
    for i in range(1, 5):  # publishes at 10..13 on stream 1, deliveries at 20..23 on stream 0
        c.method(
            9 + i, "c2s", "basic.publish", channel=1, stream=1, exchange="", routing_key="q", body=b"m%d" % i
        )
    for i in range(1, 5):
        c.method(
            19 + i,
            "s2c",
            "basic.deliver",
            channel=1,
            exchange="",
            routing_key="q",
            consumer_tag="c",
            delivery_tag=i,
            redelivered=False,
            body=b"m%d" % i,
        )
    c.method(30, "s2c", "basic.ack", channel=1, stream=1, delivery_tag=2, multiple=True)  # confirms 1, 2
    c.method(31, "s2c", "basic.nack", channel=1, stream=1, delivery_tag=3)  # nack 3; 4 unconfirmed
    c.method(40, "c2s", "basic.ack", channel=1, delivery_tag=1)
    c.method(41, "c2s", "basic.reject", channel=1, delivery_tag=2)
    c.method(42, "c2s", "basic.nack", channel=1, delivery_tag=3)  # 4 unsettled
    c.method(1500, "c2s", "queue.declare", channel=2, queue="nope")
    c.method(1502, "s2c", "channel.close", channel=2, reply_code=404, reply_text="NOT_FOUND")
    c.method(1503, "c2s", "channel.close-ok", channel=2)
    c.anomaly(2000, "gap")
    return c.tables()


def test_stats_contract_exact():
    s = stats(sample())
    json.dumps(s)  # JSON-able as is
    assert set(s) >= {
        "connections",
        "latency",
        "errors",
        "throughput",
        "methods",
        "anomalies",
        "stats_version",
    }
    assert s["connections"] == 2
    lat = s["latency"]
    assert set(lat) == {
        "method_rtt",
        "confirm",
        "consumer_ack",
        "transit",
        "rpc",
        "connection_setup",
        "settlement",
    }
    # AMQP 1.0's figures: none in a 0-9-1 sample
    assert (lat["settlement"]["count"], s["outcomes"]) == (0, {})
    for d in lat.values():
        assert {"count", "p50_ms", "p90_ms", "p99_ms", "max_ms"} <= set(d)
    # qos 1 ms, consume 2 ms, confirm.select 1 ms, channel.close 1 ms;
    # queue.declare answered by a close: error
    assert {
        k: lat["method_rtt"][k]
        for k in ("count", "p50_ms", "p90_ms", "p99_ms", "max_ms", "missing", "errors")
    } == {"count": 4, "p50_ms": 1.0, "p90_ms": 1.7, "p99_ms": 1.97, "max_ms": 2.0, "missing": 0, "errors": 1}
    # confirm latencies: 20, 19 (ack multiple), 19 (nack of #3)
    assert lat["confirm"] == {
        "count": 3,
        "p50_ms": 19.0,
        "p90_ms": 19.8,
        "p99_ms": 19.98,
        "max_ms": 20.0,
        "acked": 2,
        "nacked": 1,
        "unconfirmed": 1,
    }
    ca = lat["consumer_ack"]
    assert (ca["count"], ca["acked"], ca["nacked"], ca["rejected"], ca["unsettled"]) == (3, 1, 1, 1, 1)
    assert (ca["p50_ms"], ca["max_ms"]) == (20.0, 20.0)
    assert {k: lat["transit"][k] for k in ("count", "p50_ms", "max_ms")} == {
        "count": 4,
        "p50_ms": 10.0,
        "max_ms": 10.0,
    }
    assert lat["rpc"] == {
        "count": 0,
        "p50_ms": None,
        "p90_ms": None,
        "p99_ms": None,
        "max_ms": None,
        "missing": 0,
    }
    assert lat["connection_setup"]["count"] == 1 and lat["connection_setup"]["p50_ms"] == 10.0

    def err(code, name, cls, method, kind, failing, stream, frame, text=None):
        where = {"first_capture": "t.pcap", "first_tcp_stream": stream, "first_frame": frame}
        return {
            "code": code,
            "name": name,
            "class": cls,
            "method": method,
            "kind": kind,
            "count": 1,
            "failing_method": failing,
            **where,
            "texts": [{"text": text, "count": 1, **where}],
        }

    assert s["errors"] == [  # most frequent first, then by code; publisher and consumer nacks apart
        err(404, "not-found", "soft", "channel.close", "channel-close", None, 0, 21, "NOT_FOUND"),
        err(None, None, None, "basic.nack", "nack", "basic.deliver", 0, 19),
        err(None, None, None, "basic.nack", "nack", "basic.publish", 1, 16),
        err(None, None, None, "basic.reject", "reject", "basic.deliver", 0, 18),
    ]
    assert s["methods"]["basic.publish"] == 4 and s["methods"]["basic.deliver"] == 4
    assert s["anomalies"] == {"gap": 1}
    tp = s["throughput"]
    assert (tp["bucket_s"], tp["messages"], tp["buckets"]) == (1.0, 8, 2)  # traffic in seconds 0 and 1
    assert tp["msgs_per_s"] == {"mean": 4.0, "peak": 8.0}
    assert tp["c2s"]["messages"] == 4 and tp["s2c"]["messages"] == 4
    assert tp["body_bytes"] == 16


def test_render_text_has_every_section():
    t = sample()
    text = render_text(stats(t), t)
    for heading in ("Connections", "Methods", "Latency (ms)", "Errors", "Throughput", "Anomalies: gap=1"):
        assert heading in text
    assert re.search(
        r"confirm\s+3\s+19\.000\s+19\.800\s+19\.980\s+20\.000\s+acked=2 nacked=1 unconfirmed=1", text
    )
    assert re.search(r"1\s+404\s+not-found\s+soft\s+channel\.close", text)


def test_latency_table_header_names_every_column_above_its_values():
    t = sample()
    lines = render_text(stats(t), t).splitlines()
    head = lines[lines.index("Latency (ms)") + 1]
    row = next(x for x in lines if x.startswith("confirm "))
    assert head.split() == ["kind", "count", "p50", "p90", "p99", "max", "counts"]
    assert head.index("counts") == row.index("acked=2")  # the outcome counts start under their header


def test_stats_on_empty_tables():
    s = stats(Capture().tables())
    assert s["connections"] == 0 and s["errors"] == [] and s["latency"]["confirm"]["count"] == 0
    assert s["throughput"]["msgs_per_s"] == {"mean": None, "peak": None}
    render_text(s, Capture().tables())


PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("make", [sample, lambda: Capture().tables()], ids=["sample", "empty"])
def test_report_files(tmp_path, make):
    index = write_report(make(), tmp_path / "rep")
    html = (tmp_path / "rep" / "index.html").read_text()
    assert index == str(tmp_path / "rep" / "index.html")
    for name in ("throughput", "latency", "errors", "timeline", "unacked"):
        data = (tmp_path / "rep" / f"{name}.png").read_bytes()
        assert data[:8] == PNG and len(data) > 1000
        assert f"data:image/png;base64,{base64.b64encode(data).decode()}" in html
    assert "<table>" in html and "src='http" not in html


def test_docs_list_every_result_column():
    import importlib
    import os

    doc = open(
        os.path.join(os.path.dirname(__file__), "..", "..", "docs", "analysis.md"), encoding="utf-8"
    ).read()
    L = importlib.import_module("amqpcap.analysis.latency")
    H = importlib.import_module("amqpcap.analysis.connection_health")
    E = importlib.import_module("amqpcap.analysis.failures")
    tables = [
        L.RTT_COLS,
        L.CONFIRM_COLS,
        L.ACK_COLS,
        L.TRANSIT_COLS,
        L.RPC_COLS,
        L.SETUP_COLS,
        L.CONSUMER_COLS,
        E.ERROR_COLS,
        H.GAP_COLS,
        H.SUMMARY_COLS,
        H.BLOCKED_COLS,
        H.FLOW_COLS,
        H.UNACKED_COLS,
        importlib.import_module("amqpcap.analysis.amqp10_credit").STALL_COLS,
        importlib.import_module("amqpcap.analysis.amqp10_credit").DRAIN_COLS,
        importlib.import_module("amqpcap.analysis.amqp10").IDLE_GAP_COLS,
    ]
    missing = sorted({c for cols in tables for c in cols if f"`{c}`" not in doc})
    assert missing == []
    s = stats(sample())
    for key in list(s) + list(s["throughput"]) + list(s["health"]):
        assert f'"{key}"' in doc or f"`{key}`" in doc, key


def test_a_packet_stamped_1970_is_reported_not_a_crash(tmp_path):
    import pandas as pd

    from amqpcap.analysis import from_frames, time_outliers

    t = sample()
    m = t.methods.copy()
    m.loc[m["frame_number"] == 20, "ts"] = pd.Timestamp(0, tz="UTC")  # the queue.declare
    t = from_frames(connections=t.connections, methods=m, messages=t.messages, anomalies=t.anomalies)
    s = stats(t)
    assert s["span"]["time_outliers"] == 1
    assert s["span"]["first_time_outlier"] == {
        "capture": "t.pcap",
        "tcp_stream": 0,
        "frame_number": 20,
        "ts": "1970-01-01T00:00:00+00:00",
    }
    # the 1970 bucket is counted, not allocated
    assert s["throughput"]["messages"] == 8 and s["throughput"]["buckets"] > 1_700_000_000
    assert time_outliers(t)["frame_number"].tolist() == [20]
    assert "warning: 1 packet(s) stamped far from the rest" in render_text(s, t)
    index = write_report(t, tmp_path / "r")
    assert "<h2>Throughput</h2>" in open(index, encoding="utf-8").read()
    assert stats(sample())["span"]["time_outliers"] == 0


def test_matplotlib_is_loaded_by_drawing_a_figure_not_by_importing_the_report(tmp_path):
    code = (
        "import sys\n"
        "from amqpcap.analysis import report\n"
        "assert 'matplotlib' not in sys.modules, 'loaded at import'\n"
        f"report.fig_errors(report.pd.DataFrame(), report.Path({str(tmp_path)!r}) / 'e.png')\n"
        "assert 'matplotlib' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert (tmp_path / "e.png").read_bytes().startswith(b"\x89PNG")


def test_what_the_latency_figure_keeps_of_a_kind_is_its_bins_and_percentiles_not_one_value_a_pair():
    import pickle

    import numpy as np

    from amqpcap.analysis.report import latency_bins, latency_drawn

    rng = np.random.default_rng(5)
    for a in (rng.lognormal(0, 2, 200_000), rng.uniform(1, 3, 50)):
        d = latency_drawn(a)
        counts, edges, log = latency_bins(a)
        assert d.n == len(a) and d.log == log and len(d.edges) == len(d.counts) + 1 <= 41
        np.testing.assert_array_equal(d.counts, counts)
        np.testing.assert_array_equal(d.edges, edges)
        np.testing.assert_array_equal(d.p50_p99, np.percentile(a, [50, 99]))
        assert len(pickle.dumps(d)) < 4096  # (what a forked process sends)
    assert latency_drawn(np.zeros(0)).n == 0


def test_latency_bins_count_the_values_below_the_smallest_positive_one_as_if_raised_to_it():
    import math

    import numpy as np

    from amqpcap.analysis.report import latency_bins, latency_drawn

    rng = np.random.default_rng(7)
    for a in (
        np.r_[np.zeros(30), -rng.uniform(0, 1, 20), rng.lognormal(0, 3, 500)],  # (log bins: zeros, negatives)
        np.round(rng.lognormal(0, 2, 400), 3),
        rng.uniform(-1, 5, 300),  # (within a factor of 20: even bins)
    ):
        pos = a[a > 0]
        log = pos.max() / pos.min() > 20
        if log:  # the values raised to the smallest positive one, binned
            bins = np.logspace(math.log10(pos.min()), math.log10(pos.max()) + 1e-9, 40)
            want = np.histogram(np.clip(a, pos.min(), None), bins=bins)
        else:
            want = np.histogram(a, bins=40)
        counts, edges, got_log = latency_bins(a)
        assert got_log == log
        np.testing.assert_array_equal(counts, want[0])
        np.testing.assert_array_equal(edges, want[1])
        before = a.copy()
        np.testing.assert_array_equal(latency_drawn(a).p50_p99, np.percentile(before, [50, 99]))
        np.testing.assert_array_equal(a, before)  # (not its own: left as it was)
        own = latency_drawn(a.copy(), own=True)  # (its own array reordered, the same percentiles)
        np.testing.assert_array_equal(own.p50_p99, np.percentile(before, [50, 99]))


def _drawn_figure(lay_out):
    from amqpcap.analysis import report

    fig = report._figure(figsize=(6, 3))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1e6], [0, 123456])
    ax.set_title("a title")
    ax.set_xlabel("x label")
    ax.set_ylabel("y label")
    lay_out(fig)
    draws = []
    fig.canvas.mpl_connect("draw_event", lambda _e: draws.append(1))
    return fig, draws


def test_a_report_figure_is_placed_as_tight_layout_places_it_and_drawn_once_when_saved(tmp_path):
    from amqpcap.analysis import report

    def tight_layout(fig):  # matplotlib's own, with the texts and ticks the report draws
        with report._drawing(fig):
            fig.tight_layout()

    ours, ours_draws = _drawn_figure(report._tight)
    theirs, their_draws = _drawn_figure(tight_layout)
    assert vars(ours.subplotpars) == vars(theirs.subplotpars)
    report._save(ours, tmp_path / "ours.png")
    report._save(theirs, tmp_path / "theirs.png")
    assert (tmp_path / "ours.png").read_bytes() == (tmp_path / "theirs.png").read_bytes()
    assert len(ours_draws) == 1


def test_a_report_figure_has_few_ticks_a_linear_axis_and_leaves_matplotlibs_settings_as_they_were(tmp_path):
    import matplotlib

    from amqpcap.analysis import report

    before = {k: matplotlib.rcParams[k] for k in report.TEXT_RC}
    fig = report._figure(figsize=(6, 8))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 97], [0, 1e6])
    report._integer_ticks(ax.yaxis)
    log = fig.add_axes((0.5, 0.5, 0.3, 0.3))
    log.plot([1, 1e6], [1, 2])
    log.set_xscale("log")
    report._save(fig, tmp_path / "f.png")
    for axis in (ax.xaxis, ax.yaxis):
        shown = [t for t in axis.get_majorticklocs() if axis.get_view_interval().min() <= t]
        shown = [t for t in shown if t <= axis.get_view_interval().max()]
        assert 3 <= len(shown) <= report.TICK_BINS + 1
    assert len(log.xaxis.get_majorticklocs()) >= 6  # (a log axis keeps its decades)
    assert {k: matplotlib.rcParams[k] for k in report.TEXT_RC} == before != report.TEXT_RC


def test_the_analysis_imports_the_dissects_amqp_stack_only_for_a_1_0_reply_address():
    code = (
        "import sys\n"
        "from amqpcap.analysis import stats, write_report\n"
        "assert 'amqpcap.records.rows_1_0' not in sys.modules, 'loaded at import'\n"
        "from amqpcap.analysis.amqp10_pairing import reply_key\n"
        "assert reply_key('/queue/replies') == 'replies'\n"
        "assert 'amqpcap.records.rows_1_0' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_latency_figure_draws_a_pass_values_in_place_not_a_copy_of_them():
    import tracemalloc

    import numpy as np

    from amqpcap.analysis.report import latency_drawn, matched_latencies

    a = np.random.default_rng(3).lognormal(0, 2, 1_000_000)  # (a pass' latencies: float64, finite)
    want = latency_drawn(a.copy())
    tracemalloc.start()
    try:
        got = latency_drawn(matched_latencies("confirm", a), own=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < a.nbytes / 4  # (masks of a byte a value at most, no copy of 8 bytes a value)
    assert got.n == want.n and got.log == want.log
    for g, w in ((got.counts, want.counts), (got.edges, want.edges), (got.p50_p99, want.p50_p99)):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(matched_latencies("confirm", np.r_[a[:5], np.nan, np.inf]), a[:5])
