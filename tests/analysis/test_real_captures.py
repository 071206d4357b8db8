"""The analysis on the shipped captures, against what the recording scripts know
(captures/*.truth.json, captures/qpid010_basic.qpidlog.txt.gz)."""

import os

import pytest

import amqpcap
from amqpcap.analysis import blocked, stats, write_report

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "..", "captures"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("amqpcap-cache")


def _load(name, cache):
    path = os.path.join(CAPTURES, name)
    if not os.path.exists(path):
        pytest.skip(f"{name} not shipped")
    pytest.importorskip("amqpcap.pipeline")
    return amqpcap.load(path, cache_dir=cache, frames=True)


def _errors(s):
    return {
        (e["kind"], e["code"], e["name"], e["method"], e["failing_method"]): e["count"] for e in s["errors"]
    }


def test_amqplib_0_8(cache):
    s = stats(_load("rabbitmq08_amqplib.pcap", cache))
    ca = s["latency"]["consumer_ack"]
    assert (ca["count"], ca["acked"], ca["rejected"], ca["nacked"], ca["unsettled"]) == (4, 3, 1, 0, 0)
    assert s["latency"]["transit"]["count"] == 5  # 7 publishes: 1 returned, 1 rolled back
    assert s["latency"]["method_rtt"]["errors"] == 1  # the passive declare answered by 404
    assert _errors(s) == {
        ("return", 312, "no-route", "basic.return", "basic.publish"): 1,
        ("channel-close", 404, "not-found", "channel.close", "queue.declare"): 1,
        ("reject", None, None, "basic.reject", "basic.deliver"): 1,
    }


def test_pika_full_0_9_1(cache):
    s = stats(_load("rabbitmq091_pika_full.pcap", cache))
    lat = s["latency"]
    c = lat["confirm"]
    assert (c["count"], c["acked"], c["nacked"], c["unconfirmed"]) == (7, 5, 2, 0)
    ca = lat["consumer_ack"]
    # deliveries 1-5: ack, nack(requeue), nack, reject, reject(requeue); 6-7 acked (multiple); get-ok 8 acked;
    # get-ok 9-11 were no-ack gets
    assert (ca["count"], ca["acked"], ca["nacked"], ca["rejected"], ca["unsettled"], ca["redelivered"]) == (
        8,
        4,
        2,
        2,
        0,
        2,
    )
    assert (lat["transit"]["count"], lat["transit"]["deliveries"]) == (9, 11)
    # publisher nacks (2 confirms nacked) and consumer nacks (2 deliveries nacked) are told apart
    assert _errors(s) == {
        ("nack", None, None, "basic.nack", "basic.publish"): 2,
        ("nack", None, None, "basic.nack", "basic.deliver"): 2,
        ("return", 312, "no-route", "basic.return", "basic.publish"): 2,
        ("reject", None, None, "basic.reject", "basic.deliver"): 2,
        ("channel-close", 403, "access-refused", "channel.close", "exchange.declare"): 1,
        ("channel-close", 404, "not-found", "channel.close", "queue.declare"): 1,
        ("channel-close", 406, "precondition-failed", "channel.close", "queue.declare"): 1,
    }
    full = {
        e["code"]: (e["texts"], e["first_frame"], e["first_tcp_stream"]) for e in s["errors"] if e["code"]
    }
    assert full[406] == (
        [
            {
                "text": "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue "
                "'amqpcap.q.work' in vhost 'amqpcap': received the value '10' of type "
                "'signedint' but current is none",
                "count": 1,
                "first_capture": s["captures"][0],
                "first_tcp_stream": 0,
                "first_frame": 242,
            }
        ],
        242,
        0,
    )
    # heartbeat 2 s, 5 s idle with heartbeats both ways: nothing missed
    assert s["health"]["heartbeat_missed"] == 0 and s["health"]["heartbeat_source"] == "frames"


def test_pika_throughput_0_9_1(cache):
    s = stats(_load("rabbitmq091_pika_throughput.pcap", cache))
    lat = s["latency"]
    assert lat["consumer_ack"]["acked"] == 1200 and lat["consumer_ack"]["unsettled"] == 0
    assert lat["rpc"]["count"] == 12 and lat["rpc"]["missing"] == 0
    assert lat["transit"]["count"] == 1212  # 1200 messages + 12 RPC replies
    assert s["throughput"]["messages"] == 2424  # each published once and delivered once
    assert s["health"]["max_unacked"] == 50 and s["health"]["channels_over_prefetch"] == 0  # prefetch 50
    assert s["errors"] == []


def test_pika_blocked(cache):
    t = _load("rabbitmq091_pika_blocked.pcap", cache)
    b = blocked(t)
    assert b["status"].tolist() == ["unblocked"] and b["reason"].tolist() == ["low on memory"]
    assert 2300 < b["duration_ms"].iloc[0] < 2700  # the client saw 2.54 s


def test_pyamqp_confirms(cache):
    s = stats(_load("rabbitmq091_pyamqp_basic.pcap", cache))
    assert (s["latency"]["confirm"]["acked"], s["latency"]["confirm"]["unconfirmed"]) == (5, 0)
    ca = s["latency"]["consumer_ack"]
    assert (ca["acked"], ca["rejected"], ca["unsettled"]) == (4, 1, 0)


@pytest.mark.parametrize("name", ["rabbitmq08_rejected.pcap", "rabbitmq091_pika_refused.pcap"])
def test_rejected_headers(cache, name):
    s = stats(_load(name, cache))
    assert _errors(s)[("protocol-rejected", None, "protocol-rejected", None, None)] == 2


def test_qpid_0_10(cache):
    s = stats(_load("qpid010_basic.pcap", cache))
    rtt = s["latency"]["method_rtt"]
    assert rtt["missing"] == 0 and rtt["count"] > 40  # sync commands -> session.completed
    ca = s["latency"]["consumer_ack"]
    # accept [5,7], release [8], reject [14], accept [9,13]
    assert (ca["acked"], ca["nacked"], ca["rejected"]) == (8, 1, 1)
    assert _errors(s) == {("reject", 0, "unspecified", "message.reject", "message.transfer"): 1}


def test_report_on_every_capture(cache, tmp_path):
    names = sorted(n for n in os.listdir(CAPTURES) if n.endswith((".pcap", ".pcapng")))
    if not names:
        pytest.skip("no captures")
    for name in names:
        index = write_report(_load(name, cache), tmp_path / name)
        assert os.path.getsize(index) > 10_000


def test_pika_full_heartbeats_healthy_without_frames(cache):
    """The default dissect (no frames table): heartbeat frames are invisible to the methods,
    the connection row's liveness columns still show the peers were never silent."""
    path = os.path.join(CAPTURES, "rabbitmq091_pika_full.pcap")
    t = amqpcap.load(path, cache_dir=cache)
    assert not t.has_frames
    h = stats(t)["health"]
    assert (h["heartbeat_late"], h["heartbeat_missed"], h["heartbeat_unknown"], h["heartbeat_source"]) == (
        0,
        0,
        0,
        "liveness",
    )
    c = t.connections.iloc[0]
    assert (c["heartbeats_c2s"], c["heartbeats_s2c"]) == (5, 5)
    f = amqpcap.load(path, cache_dir=cache, frames=True).frames
    hb = f[f["type_name"] == "heartbeat"].groupby("direction").size().to_dict()
    assert hb == {"c2s": 5, "s2c": 5}  # the same count as the frames table
    for d in ("c2s", "s2c"):
        fd = f[f["direction"] == d]["ts"].sort_values()
        assert (c[f"silence_end_ts_{d}"] - c[f"silence_start_ts_{d}"]) == fd.diff().max()
        assert c[f"last_frame_ts_{d}"] == fd.iloc[-1]


@pytest.mark.parametrize(
    "name",
    [
        "qpid010_basic.pcap",
        "rabbitmq091_pika_full.pcap",
        "rabbitmq091_pika_blocked.pcap",
        "rabbitmq08_amqplib.pcap",
    ],
)
def test_analysis_reads_typed_columns_not_the_arguments_json(cache, name):
    """The same stats, health and latency tables with the ``arguments`` column emptied."""
    import dataclasses

    import pandas as pd

    from amqpcap.analysis import all_latencies, health

    t = _load(name, cache)
    bare = dataclasses.replace(t, methods=t.methods.assign(arguments=None))
    assert stats(bare) == stats(t)
    for a, b in ((all_latencies(t), all_latencies(bare)), (health(t), health(bare))):
        for k in a:
            pd.testing.assert_frame_equal(a[k], b[k], obj=k)


def test_stats_over_two_captures_names_the_capture_of_each_row(tmp_path):
    """One dissect output of two captures recorded years apart: every connection and error row
    says its capture; the throughput mean counts each capture's own span."""
    from amqpcap.analysis import render_text
    from amqpcap.pipeline import dissect

    a, b = (os.path.join(CAPTURES, n) for n in ("rabbitmq091_pika_full.pcap", "netamqp09_offline.pcap"))
    dissect([a, b], str(tmp_path / "pair"))
    t = amqpcap.load(tmp_path / "pair")
    s = stats(t)
    text = render_text(s, t)
    conns = text.split("\nConnections\n")[1].split("\n\n")[0].splitlines()
    assert conns[0].split()[:2] == ["capture", "stream"]
    assert sorted(line.split()[0] for line in conns[2:]) == sorted([a, b])
    errs = text.split("\nErrors")[1].split("\n\n")[0]
    line = next(x for x in errs.splitlines() if "NOT_IMPLEMENTED" in x)
    # capture, stream, first frame, reply text
    assert line.split()[-6:] == [b, "0", "199", "NOT_IMPLEMENTED", "-", "tunnel"]
    spans = [stats(amqpcap.load(p, cache_dir=tmp_path / "c"))["throughput"]["buckets"] for p in (a, b)]
    assert s["throughput"]["buckets"] == sum(spans)


@pytest.mark.parametrize("frames", [False, True])
def test_the_analysis_columns_are_all_stats_and_the_report_read(cache, tmp_path, frames):
    """load(columns="analysis") leaves out the JSON and body columns (most of the memory of a big
    output) and nothing the analysis needs: the same stats on every shipped capture, and a report."""
    from amqpcap.analysis import error_summary, health

    names = sorted(n for n in os.listdir(CAPTURES) if n.endswith(".pcap"))
    for name in names:
        path = os.path.join(CAPTURES, name)
        full = amqpcap.load(path, cache_dir=cache, frames=frames)
        lean = amqpcap.load(path, cache_dir=cache, frames=frames, columns="analysis")
        assert "arguments" not in lean.methods.columns and "properties" not in lean.messages.columns
        assert stats(lean) == stats(full), name
        assert error_summary(lean).equals(error_summary(full)) and health(lean).keys() == health(full).keys()
    write_report(lean, tmp_path / "report")


def test_categorical_analysis_columns_give_the_same_frames(cache):
    """load(columns="analysis") reads the low-cardinality strings as Categorical (sorted categories):
    every pairing, the throughput by every grouping, the message queues and the time outliers are
    the frames of the full load (a delivery with no exchange included: netamqp09_offline)."""
    import pandas as pd

    from amqpcap.analysis import all_latencies, message_queues, throughput, time_outliers
    from amqpcap.analysis.traffic import BY

    def same(a, b, what):
        cat = [c for c in a.columns if isinstance(a[c].dtype, pd.CategoricalDtype)]
        pd.testing.assert_frame_equal(a.astype({c: b[c].dtype for c in cat}), b, obj=what)

    names = sorted(n for n in os.listdir(CAPTURES) if n.endswith(".pcap"))
    assert "netamqp09_offline.pcap" in names
    for name in names:
        path = os.path.join(CAPTURES, name)
        full = amqpcap.load(path, cache_dir=cache, frames=True)
        lean = amqpcap.load(path, cache_dir=cache, frames=True, columns="analysis")
        for df in (lean.methods, lean.messages):
            cats = df["method"].cat.categories
            assert list(cats) == sorted(cats) and isinstance(df["capture"].dtype, pd.CategoricalDtype)
        fl, ll = all_latencies(full), all_latencies(lean)
        for k in fl:
            same(ll[k], fl[k], f"{name} {k}")
        for by in (b for b in BY if b):
            same(throughput(lean, by=by), throughput(full, by=by), f"{name} throughput by {by}")
        same(message_queues(lean), message_queues(full)[list(lean.messages.columns) + ["queue"]], name)
        same(time_outliers(lean), time_outliers(full), f"{name} time_outliers")


def _as_text(s, empty_is_null):
    """String column values, missing as None (and "" too when ``empty_is_null``)."""
    v = s.astype(object).where(s.notna(), None)
    return v.where(v != "", None) if empty_is_null else v


def test_compact_load_pairs_on_codes_exactly_as_on_the_strings(cache):
    """load(columns="compact") (what stats and report load) holds message_id, correlation_id and
    body_hash as integer codes: on every shipped capture equal strings have equal codes and
    different strings different ones, and every pairing, unacked and the stats are those of the
    full load, the codes in transit and rpc standing for the very strings of the full result."""
    import pandas as pd

    from amqpcap.analysis import all_latencies, unacked
    from amqpcap.analysis.tables import CODE_COLUMNS

    ids = {"message_id", "correlation_id"}  # an empty id is no id: a null code
    names = sorted(n for n in os.listdir(CAPTURES) if n.endswith(".pcap"))
    coded = 0
    for name in names:
        path = os.path.join(CAPTURES, name)
        full = amqpcap.load(path, cache_dir=cache, frames=True)
        lean = amqpcap.load(path, cache_dir=cache, frames=True, columns="compact")
        text = {}  # column -> {code: string}
        for c in CODE_COLUMNS:
            code, s = lean.messages[c], _as_text(full.messages[c], c in ids)
            assert str(code.dtype) == "Int32" and (code.isna() == s.isna()).all(), (name, c)
            pairs = pd.DataFrame({"code": code, "s": s}).dropna()
            assert (pairs.groupby("code")["s"].nunique() == 1).all(), (name, c)
            assert (pairs.groupby("s")["code"].nunique() == 1).all(), (name, c)
            text[c] = dict(zip(pairs["code"].astype(int), pairs["s"]))
            coded += len(pairs)
        # message_id and correlation_id share one dictionary (a 1.0 reply's correlation-id is its
        # request's message-id): a code is one string in both
        both = text["message_id"].keys() & text["correlation_id"].keys()
        assert all(text["message_id"][k] == text["correlation_id"][k] for k in both), name
        text["correlation_id"] = {**text["message_id"], **text["correlation_id"]}
        fl, ll = all_latencies(full), all_latencies(lean)
        for kind, cols in (("transit", ["message_id", "body_hash"]), ("rpc", ["correlation_id"])):
            for c in cols:
                got = [None if pd.isna(v) else text[c][int(v)] for v in ll[kind][c]]
                want = _as_text(fl[kind][c], c in ids).tolist()
                assert got == want, (name, kind, c)
            ll[kind] = ll[kind].drop(columns=cols)
            fl[kind] = fl[kind].drop(columns=cols)
        for k in fl:
            _same(ll[k], fl[k], f"{name} {k}")
        _same(unacked(lean), unacked(full), f"{name} unacked")
        assert stats(lean) == stats(full), name
    assert coded > 1000  # the captures do carry ids and bodies


def _same(a, b, what):
    import pandas as pd

    cat = [c for c in a.columns if isinstance(a[c].dtype, pd.CategoricalDtype)]
    pd.testing.assert_frame_equal(a.astype({c: b[c].dtype for c in cat}), b, obj=what)
