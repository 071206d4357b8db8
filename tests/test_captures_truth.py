"""Every shipped capture against the ground truth written by the program that recorded it."""

import base64
import collections
import glob
import json
import os
import re

import pyarrow.dataset as pads
import pytest

from amqpcap.pipeline import dissect

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "captures"))
# the AMQP 1.0 recordings (rabbitmq10_*) have truth files of their own format: their own tests
PCAPS = sorted(
    os.path.basename(p)[:-5]
    for p in glob.glob(os.path.join(CAPTURES, "*.pcap"))
    if not os.path.basename(p).startswith("rabbitmq10_")
)
TABLES = ("connections", "methods", "messages", "anomalies")
PASSWORD = "s3cret-pw"
WRONG_PASSWORD = "wrong-pw-0000"

EXPECTED_VERSION = {
    "netamqp09_offline": {0: "0-9"},
    "qpid010_basic": {0: "0-10"},
    "rabbitmq08_amqplib": {0: "0-8"},
    "rabbitmq08_netamqp": {0: "0-8", 1: "0-8"},
    "rabbitmq09_netamqp": {0: "0-9", 1: "0-9"},
    "rabbitmq09_anyevent": {0: "0-9"},
    "rabbitmq091_pika_full": {0: "0-9-1"},
    "rabbitmq091_pika_blocked": {0: "0-9-1"},
    "rabbitmq091_pika_throughput": {0: "0-9-1", 1: "0-9-1"},
    "rabbitmq091_pyamqp_basic": {0: "0-9-1"},
    "rabbitmq091_pika_refused": {0: "0-9-1", 1: "0-9-1", 2: "0-9-1"},
}


class Result:
    def __init__(self, out):
        self.out = out
        self.t = {k: pads.dataset(os.path.join(out, k)).to_table().to_pandas() for k in TABLES}

    def __getitem__(self, k):
        return self.t[k]

    def files(self):
        for root, _, fs in os.walk(self.out):
            for f in fs:
                yield os.path.join(root, f)

    def strings(self):
        """Every non-null value of every string/binary column, as bytes."""
        for k in TABLES:
            df = self.t[k]
            for col in df.columns:
                for v in df[col].dropna():
                    if isinstance(v, str):
                        yield v.encode("utf-8", "surrogateescape")
                        for b in re.findall(r'"\$b64":\s*"([A-Za-z0-9+/=]*)"', v):
                            yield base64.b64decode(b)
                    elif isinstance(v, (bytes, bytearray)):
                        yield bytes(v)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    base = tmp_path_factory.mktemp("truth")
    cache = {}

    def get(name, keep_secrets=False):
        key = (name, keep_secrets)
        if key not in cache:
            out = str(base / (name + ("-secrets" if keep_secrets else "")))
            dissect([os.path.join(CAPTURES, name + ".pcap")], out, force=True, keep_secrets=keep_secrets)
            cache[key] = Result(out)
        return cache[key]

    return get


def truth_json(name):
    with open(os.path.join(CAPTURES, name + ".truth.json")) as f:
        return json.load(f)


def perl_name(m):
    """Net::AMQP 'Connection::StartOk' -> 'connection.start-ok'."""
    cls, meth = m.split("::")
    return cls.lower() + "." + re.sub(r"(?<!^)([A-Z])", r"-\1", meth).lower()


def conn_methods(r, stream, direction):
    m = r["methods"]
    m = m[(m.tcp_stream == stream) & (m.direction == direction)].sort_values("stream_offset")
    return m


# --------------------------------------------------------------------------- all captures


def test_all_captures_present():
    assert len(PCAPS) == 12, PCAPS


@pytest.mark.parametrize("name", PCAPS)
def test_zero_anomalies_and_versions(results, name):
    r = results(name)
    assert len(r["anomalies"]) == 0, r["anomalies"][["kind", "detail"]].to_string()
    c = r["connections"].set_index("tcp_stream")
    assert len(c) >= 1
    assert not c.mid_stream.any()
    assert (c.anomalies.fillna(0) == 0).all()
    if name == "rabbitmq08_rejected":
        t = truth_json(name)
        assert len(c) == 2
        assert list(c.negotiation) == ["rejected", "rejected"]
        assert list(c.client_header) == [h[8:] for h in t["protocol_header_sent_hex"]]
        assert list(c.server_header) == ["00000901", "00000901"]
        return
    if name == "rabbitmq091_pika_refused":
        t = truth_json(name)
        assert len(c) == len(t["connections"]) == 5
        for tc in t["connections"]:
            row = c.loc[tc["tcp_stream"]]
            assert row.client_header == tc["protocol_header_sent"][8:]
            if tc["tcp_stream"] >= 3:
                assert row.negotiation == "rejected"
                assert row.server_header == "00000901"
    for stream, v in EXPECTED_VERSION[name].items():
        assert c.loc[stream, "version"] == v, (stream, c.loc[stream].to_dict())
        assert c.loc[stream, "negotiation"] == "accepted"


# --------------------------------------------------------------------------- 0-9-1 (pika / py-amqp)

T091 = [n for n in PCAPS if n.startswith("rabbitmq091_")]


@pytest.mark.parametrize("name", T091)
def test_091_method_sequences(results, name):
    r = results(name)
    t = truth_json(name)
    for tc in t["connections"]:
        s = tc["tcp_stream"]
        c2s = [m for m in conn_methods(r, s, "c2s").method]
        assert c2s == tc["c2s_methods"], s
        assert dict(collections.Counter(c2s)) == tc["c2s_method_counts"]
        s2c = collections.Counter(conn_methods(r, s, "s2c").method)
        assert dict(s2c) == tc["s2c_method_counts"], s
        assert c2s.count("basic.publish") == tc.get("c2s_publish_count", 0)


@pytest.mark.parametrize("name", T091)
def test_091_publishes_and_bodies(results, name):
    r = results(name)
    t = truth_json(name)
    msgs = r["messages"]
    for tc in t["connections"]:
        s = tc["tcp_stream"]
        m = msgs[msgs.tcp_stream == s]
        pub = m[m.method == "basic.publish"].sort_values("stream_offset")
        got = [
            (int(x.channel), x.exchange, x.routing_key, int(x.body_size), x.body_hash)
            for x in pub.itertuples()
        ]
        want = [
            (p["channel"], p["exchange"], p["routing_key"], p["body_len"], p["body_sha256"])
            for p in tc.get("publishes", [])
        ]
        assert got == want, s
        assert (pub.complete).all()
        assert list(pub.body_received) == list(pub.body_size)
        meths = conn_methods(r, s, "c2s")
        mp = meths[meths.method == "basic.publish"]
        assert list(mp.mandatory) == [p["mandatory"] for p in tc.get("publishes", [])]
        # received messages: deliver / get-ok / return
        recv = m[m.direction == "s2c"].sort_values("stream_offset")
        key = lambda x: (x.method, int(x.channel), x.exchange, x.routing_key, int(x.body_size), x.body_hash)  # noqa: E731
        tkey = lambda rm: (
            rm["method"],
            rm["channel"],
            rm["exchange"],
            rm["routing_key"],
            rm["body_len"],
            rm["body_sha256"],
        )  # noqa: E731
        got_r = [key(x) for x in recv.itertuples() if x.method != "basic.return"]
        want_r = [
            tkey(rm)
            for rm in tc.get("received_messages", [])
            if rm["method"] in ("basic.deliver", "basic.get-ok")
        ]
        assert got_r == want_r, s
        # returns: the client's received_messages lists those of non-confirm channels; errors lists them all
        got_ret = collections.Counter(key(x) for x in recv.itertuples() if x.method == "basic.return")
        want_ret = collections.Counter(
            tkey(rm) for rm in tc.get("received_messages", []) if rm["method"] == "basic.return"
        )
        assert not (want_ret - got_ret)
        assert sum(got_ret.values()) == sum(
            1 for e in tc.get("errors", []) if e.get("method") == "basic.return"
        )
        assert all(int(c) == 312 for c in recv[recv.method == "basic.return"].reply_code)
        for rm in tc.get("received_messages", []):
            if rm["method"] in ("basic.deliver", "basic.get-ok") and rm.get("delivery_tag") is not None:
                hit = recv[
                    (recv.method == rm["method"])
                    & (recv.channel == rm["channel"])
                    & (recv.delivery_tag == rm["delivery_tag"])
                ]
                assert len(hit) == 1
                assert bool(hit.redelivered.iloc[0]) == bool(rm["redelivered"])


@pytest.mark.parametrize("name", T091)
def test_091_connection_fields_and_errors(results, name):
    r = results(name)
    t = truth_json(name)
    c = r["connections"].set_index("tcp_stream")
    meths = r["methods"]
    for tc in t["connections"]:
        s = tc["tcp_stream"]
        row = c.loc[s]
        assert row.client_port == tc["client_port"]
        neg = tc.get("negotiated")
        if neg:
            assert (row.heartbeat, row.frame_max, row.channel_max) == (
                neg["heartbeat"],
                neg["frame_max"],
                neg["channel_max"],
            )
        if tc.get("user") and tc.get("c2s_methods"):
            assert row.user == tc["user"]
            assert row.mechanism == tc.get("mechanism", row.mechanism)
        m = meths[meths.tcp_stream == s]
        got = collections.Counter()
        for x in m[
            m.method.isin(["channel.close", "connection.close", "basic.return"]) & (m.direction == "s2c")
        ].itertuples():
            got[
                (
                    x.method.split(".")[0] if x.method != "basic.return" else "message",
                    int(x.channel),
                    int(x.reply_code),
                )
            ] += 1
        want = collections.Counter()
        for e in tc.get("errors", []):
            if e.get("reply_code") is None:
                continue
            lvl = {"connection": "connection", "channel": "channel", "message": "message"}[e["level"]]
            if e.get("closed_by", "server") != "server":
                continue
            want[(lvl, e.get("channel", 0), e["reply_code"])] += 1
        assert got == want, s
        oc = tc.get("outcome") or {}
        if oc.get("reply_code"):
            assert row.close_reply_code == oc["reply_code"]
            assert row.closed_by == oc["closed_by"]


def test_pika_full_counts(results):
    r = results("rabbitmq091_pika_full")
    m = r["methods"]
    cnt = collections.Counter(m.method)
    assert cnt["basic.publish"] == 22
    assert cnt["basic.deliver"] == 7
    assert cnt["basic.reject"] == 2 and cnt["basic.nack"] == 4  # 2 client nacks + 2 broker confirm nacks
    codes = set(m.reply_code.dropna().astype(int))
    assert {404, 406, 403, 312, 200} <= codes
    rej = m[m.method == "basic.reject"]
    assert sorted(rej.requeue) == [False, True]


def test_refused_codes(results):
    m = results("rabbitmq091_pika_refused")["methods"]
    closes = m[m.method == "connection.close"]
    assert sorted(closes[closes.direction == "s2c"].reply_code.astype(int)) == [403, 403, 530]


# ---------------------------------------------------------------- 0-8 / 0-9 (amqplib, Net::AMQP, AnyEvent)

T0809 = [n for n in PCAPS if n.startswith(("rabbitmq08_", "rabbitmq09_")) and n != "rabbitmq08_rejected"]


@pytest.mark.parametrize("name", T0809)
def test_0809_frame_sequences(results, name):
    r = results(name)
    t = truth_json(name)
    frames = t["frames"]
    nconn = len(t["tcp_connections"]) or 1
    for conn in range(nconn):
        for d in ("c2s", "s2c"):
            tf = [f for f in frames if f.get("conn", 0) == conn and f.get("dir") == d and f.get("type") == 1]
            m = conn_methods(r, conn, d)
            got = [(int(x.channel), int(x.class_id), int(x.method_id)) for x in m.itertuples()]
            want = [(f["channel"], f["class_id"], f["method_id"]) for f in tf]
            assert got == want, (conn, d)
            assert list(m.frame_size) == [f["size"] for f in tf]
            named = [perl_name(f["method"]) for f in tf if "method" in f]
            if len(named) == len(tf):
                assert list(m.method) == named, (conn, d)
            # content: header body_size and body hashes
            hdrs = [
                f for f in frames if f.get("conn", 0) == conn and f.get("dir") == d and f.get("type") == 2
            ]
            msgs = r["messages"]
            mm = msgs[(msgs.tcp_stream == conn) & (msgs.direction == d)].sort_values("stream_offset")
            assert list(mm.body_size) == [h["body_size"] for h in hdrs]
            assert list(mm.body_frames) == [_nbodies(frames, conn, d, i) for i in range(len(hdrs))]


def _nbodies(frames, conn, d, i):
    seq = [f for f in frames if f.get("conn", 0) == conn and f.get("dir") == d and f.get("type") in (1, 2, 3)]
    k = -1
    n = 0
    for f in seq:
        if f["type"] == 2:
            k += 1
            n = 0
            continue
        if k == i:
            if f["type"] == 3:
                n += 1
            else:
                break
    return n


@pytest.mark.parametrize("name", T0809)
def test_0809_operations(results, name):
    r = results(name)
    t = truth_json(name)
    msgs = r["messages"]
    meths = r["methods"]
    ops = t["operations"]
    pubs = [o for o in ops if o["op"] == "basic.publish"]
    pm = msgs[msgs.method == "basic.publish"].sort_values(["tcp_stream", "stream_offset"])
    assert [
        (x.tcp_stream, x.exchange, x.routing_key, int(x.body_size), x.body_hash) for x in pm.itertuples()
    ] == [(o.get("conn", 0), o["exchange"], o["routing_key"], o["body_size"], o["body_sha256"]) for o in pubs]
    # every body the client saw, by hash (multiset)
    want = collections.Counter()
    for o in ops:
        if "body_sha256" in o and o["op"] != "basic.publish":
            want[(o["body_size"], o["body_sha256"])] += 1
    rcv = msgs[msgs.direction == "s2c"]
    got = collections.Counter((int(x.body_size), x.body_hash) for x in rcv.itertuples())
    assert got == want
    assert (msgs.complete).all()
    # counts of acks / rejects / deliveries by the client's own count
    oc = t["operation_counts"]
    c2s = collections.Counter(meths[meths.direction == "c2s"].method)
    s2c = collections.Counter(meths[meths.direction == "s2c"].method)
    assert c2s["basic.ack"] + s2c["basic.ack"] == oc.get("basic.ack", 0)  # broker confirm acks counted too
    for meth in ("basic.publish", "basic.reject", "basic.get", "basic.consume", "basic.cancel", "queue.bind"):
        assert c2s[meth] == oc.get(meth, 0), meth
    assert s2c["basic.deliver"] == oc.get("basic.deliver", 0)
    assert s2c["basic.return"] == oc.get("basic.return", 0)
    # connection fields
    c = r["connections"].set_index("tcp_stream")
    conn_op = [o for o in ops if o["op"] in ("connection.open", "connect")]
    for i, row in c.iterrows():
        for col in ("user", "mechanism"):
            want = t[col][str(i)] if isinstance(t[col], dict) else t[col]
            assert getattr(row, col) == want, (i, col)
    if conn_op and "negotiated" in conn_op[0]:
        neg = conn_op[0]["negotiated"]
        assert (c.loc[0, "heartbeat"], c.loc[0, "frame_max"]) == (neg["heartbeat"], neg["frame_max"])


def test_0809_reply_codes(results):
    m = results("rabbitmq08_amqplib")["methods"]
    t = truth_json("rabbitmq08_amqplib")
    want = sorted(o["reply_code"] for o in t["operations"] if "reply_code" in o)
    assert want == [0, 0, 312, 404]  # amqplib closes with reply_code 0
    assert sorted(m.reply_code.dropna().astype(int)) == want
    m = results("rabbitmq08_netamqp")["methods"]
    cl = m[(m.tcp_stream == 1) & (m.method == "connection.close")]
    assert list(cl.reply_code) == [540] and list(cl.failing_method) == ["basic.publish"]
    m = results("rabbitmq09_anyevent")["methods"]
    c = results("rabbitmq09_anyevent")["connections"]
    assert (int(c.heartbeat[0]), int(c.frame_max[0])) == (1, 8192)
    assert list(m[m.method == "connection.close"].reply_code) == [0]


# --------------------------------------------------------------------------- secrets


@pytest.mark.parametrize(
    "name", [n for n in PCAPS if n.startswith(("rabbitmq08_", "rabbitmq09_", "rabbitmq091_"))]
)
def test_password_never_written(results, name):
    r = results(name)
    for pw in (PASSWORD, WRONG_PASSWORD):
        for f in r.files():
            with open(f, "rb") as fh:
                assert pw.encode() not in fh.read(), f
        for v in r.strings():
            assert pw.encode() not in v


@pytest.mark.parametrize("name", ["rabbitmq091_pika_full", "rabbitmq08_amqplib", "rabbitmq091_pyamqp_basic"])
def test_password_kept_with_keep_secrets(results, name):
    r = results(name, keep_secrets=True)
    assert any(PASSWORD.encode() in v for v in r.strings())


# --------------------------------------------------------------------------- netamqp09_offline

LINE = re.compile(r"^#(\d+) (C>S|S>C) off=(\d+)\s+len=(\d+)\s+(\S+)(?: ch=(\d+))?\s*(.*)$")


def offline_truth():
    out = []
    with open(os.path.join(CAPTURES, "netamqp09_offline.truth.txt")) as f:
        for line in f:
            mt = LINE.match(line.rstrip("\n"))
            if mt:
                out.append(mt.groups())
    return out


def camel_to_ours(s):
    cls, meth = s.split(".")
    return cls.lower() + "." + re.sub(r"(?<!^)([A-Z])", r"-\1", meth).lower()


def test_offline_methods(results):
    r = results("netamqp09_offline")
    m = r["methods"]
    lines = [l for l in offline_truth() if l[4] == "METHOD"]
    assert len(lines) == 99
    assert len(m) == len(lines)
    for num, d, off, ln, _kind, ch, rest in lines:
        direction = "c2s" if d == "C>S" else "s2c"
        ids, name = rest.split()[0], rest.split()[1]
        cid, mid = map(int, ids.split("."))
        hit = m[(m.direction == direction) & (m.stream_offset == int(off))]
        assert len(hit) == 1, (num, rest)
        row = hit.iloc[0]
        assert (int(row.class_id), int(row.method_id), int(row.channel)) == (cid, mid, int(ch)), num
        assert row.method == camel_to_ours(name), (num, row.method, name)
        assert row.frame_size == int(ln) - 8, num
        for key, col in (
            ("exchange", "exchange"),
            ("routing_key", "routing_key"),
            ("queue", "queue"),
            ("reply_code", "reply_code"),
            ("delivery_tag", "delivery_tag"),
            ("consumer_tag", "consumer_tag"),
        ):
            mm = re.search(r"(?:^| )" + key + r"=(?:'([^']*)'|(\d+))", rest)
            if mm:
                want = mm.group(1) if mm.group(1) is not None else int(mm.group(2))
                got = getattr(row, col)
                if isinstance(want, int):
                    got = int(got)
                assert got == want, (num, key, got, want)


def test_offline_contents(results):
    r = results("netamqp09_offline")
    msgs = r["messages"]
    lines = offline_truth()
    hdrs = [l for l in lines if l[4] == "HEADER"]
    transfers = [l for l in lines if l[4] == "METHOD" and " Message.Transfer " in " " + l[6] + " "]
    assert len(msgs) == len(hdrs) + len(transfers) == 12
    for num, d, off, _ln, _kind, _ch, rest in hdrs:
        direction = "c2s" if d == "C>S" else "s2c"
        size = int(re.search(r"body_size=(\d+)", rest).group(1))
        # the carrying method is the METHOD line just before the header in this direction
        prev = [l for l in lines if l[1] == d and l[4] == "METHOD" and int(l[2]) < int(off)][-1]
        hit = msgs[(msgs.direction == direction) & (msgs.stream_offset == int(prev[2]))]
        assert len(hit) == 1, num
        assert int(hit.body_size.iloc[0]) == size and int(hit.body_received.iloc[0]) == size
        assert bool(hit.complete.iloc[0])
    for num, d, off, _ln, _kind, _ch, rest in transfers:
        direction = "c2s" if d == "C>S" else "s2c"
        size = int(re.search(r"body=longstr\[(\d+)\]", rest).group(1))
        hit = msgs[(msgs.direction == direction) & (msgs.stream_offset == int(off))]
        assert len(hit) == 1, num
        assert hit.method.iloc[0] == "message.transfer"
        assert int(hit.body_size.iloc[0]) == size
