"""AMQP 0-10 codec (amqpcap.amqp.codec_0_10.Decoder010).

Part 1 checks the decoder against a real capture made by Apache qpid-python on
both ends and against qpid's own log of every operation it SENT and RECV
(/work/shared/captures/qpid010_basic.*, copied to captures/ by the project).
Part 2 builds edge cases the log does not cover from the specification with
the small encoder in codec010_builders.py.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import re
import struct
import sys
import uuid

import pytest

from amqpcap.amqp import codec_0_10 as C
from amqpcap.amqp.codec_0_10 import Decoder010
from amqpcap.amqp.events import Anomaly, Content, Frame, Heartbeat, Method
from amqpcap.amqp.spec import v0_10 as SPEC

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import codec010_builders as B  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _find(*names: str) -> str | None:
    """The project's copy in captures/ first, else the shared reference directory."""
    for d in (os.path.join(REPO, "captures"), os.path.join(os.path.dirname(REPO), "shared", "captures")):
        for name in names:
            p = os.path.join(d, name)
            if os.path.exists(p):
                return p
    return None


PCAP = _find("qpid010_basic.pcap")
QPIDLOG = _find("qpid010_basic.qpidlog.txt", "qpid010_basic.qpidlog.txt.gz")
PORT = 5673


# --- the real capture -----------------------------------------------------------------


def capture_streams():
    """[(direction, offset after the protocol header, data, packet, ts)] in capture order."""
    from scapy.all import TCP, rdpcap

    out, off = [], [0, 0]
    for i, p in enumerate(rdpcap(PCAP), 1):
        if TCP not in p:
            continue
        data = bytes(p[TCP].payload)
        if not data:
            continue
        d = 0 if p[TCP].dport == PORT else 1
        start = off[d]
        off[d] += len(data)
        if start < 8:  # the 8-byte protocol header each side sends first
            assert data[: 8 - start] == B.HEADER_010[start:]
            data = data[8 - start :]
            start = 8
        if data:
            out.append((d, start, data, i, int(p.time * 1_000_000_000)))
    return out


def decode(chunks, **kw):
    dec = Decoder010(**kw)
    for d, off, data, pkt, ts in chunks:
        dec.feed(d, data, off, pkt, ts)
    last = chunks[-1]
    dec.finish(last[3], last[4])
    return dec, dec.pop_events()


class Rec:
    """A qpid object from the log: Name(key=value, ...)."""

    def __init__(self, name, kw):
        self.name, self.kw = name, kw

    def __repr__(self):
        return f"{self.name}({self.kw})"


class _Names(dict):
    def __missing__(self, name):
        if name[:1].isupper():
            return lambda **kw: Rec(name, kw)
        raise KeyError(name)


def _ranges(text: str):
    return [[int(a), int(b)] for a, b in (r.split("-") for r in text.split(",") if r.strip())]


LOG_LINE = re.compile(r"^\s*\d+ (?P<thread>.+?) qpid\.io\.(?:ctl|cmd) (?P<dir>SENT|RECV) (?P<op>\w+\(.*\))$")


def parse_log():
    """(client->server ops, server->client ops) as qpid received them (wire order), and as sent."""
    ns = _Names(serial=lambda n: n, UUID=lambda s: s, timestamp=lambda t: int(t), RS=_ranges)
    lines = []
    opener = gzip.open if QPIDLOG.endswith(".gz") else open
    for line in opener(QPIDLOG, "rt", encoding="utf-8"):
        m = LOG_LINE.match(line.rstrip("\n"))
        assert m, line[:200]
        op = re.sub(r"\b(commands|transfers)=\[([\d\-, ]*)\]", lambda g: f'{g[1]}=RS("{g[2]}")', m["op"])
        lines.append((m["thread"], m["dir"], eval(op, {"__builtins__": {}}, ns)))  # noqa: S307 - test data
    server = {
        t for t, d, r in lines if (d, r.name) in (("SENT", "ConnectionStart"), ("RECV", "ConnectionStartOk"))
    }
    recv = {
        0: [r for t, d, r in lines if d == "RECV" and t in server],
        1: [r for t, d, r in lines if d == "RECV" and t not in server],
    }
    sent = {
        0: [r for t, d, r in lines if d == "SENT" and t not in server],
        1: [r for t, d, r in lines if d == "SENT" and t in server],
    }
    return recv, sent


def spec_name(camel: str) -> str:
    words = re.findall(r"[A-Z][a-z0-9]*", camel)
    return f"{words[0].lower()}.{'-'.join(w.lower() for w in words[1:])}"


def camel(name: str) -> str:
    return "".join(w.capitalize() for w in re.split(r"[-.]", name))


def same(log, ours, path="") -> None:
    """Assert a logged qpid value equals our decoded value."""
    if isinstance(log, Rec):
        assert isinstance(ours, dict), (path, log, ours)
        if "$struct" in ours:
            assert camel(ours["$struct"].split(".", 1)[1]) == log.name, (path, log.name, ours["$struct"])
        for k, v in log.kw.items():
            key = k.replace("_", "-")
            assert key in ours, (path, key, ours)
            same(v, ours[key], f"{path}.{key}")
        for k, v in ours.items():
            if k != "$struct" and k.replace("-", "_") not in log.kw:
                assert v is False, (path, k, v)  # absent bits
    elif isinstance(log, dict):
        assert isinstance(ours, dict) and list(log) == list(ours), (path, log, ours)
        for k in log:
            same(log[k], ours[k], f"{path}[{k!r}]")
    elif isinstance(log, list):
        assert isinstance(ours, list) and len(log) == len(ours), (path, log, ours)
        for i, (a, b) in enumerate(zip(log, ours)):
            same(a, b, f"{path}[{i}]")
    elif isinstance(log, bool):
        assert ours is log, (path, log, ours)
    else:
        assert type(ours) is type(log) and ours == log, (path, log, ours)


needs_capture = pytest.mark.skipif(PCAP is None or QPIDLOG is None, reason="qpid 0-10 capture not found")


@pytest.fixture(scope="module")
def qpid():
    chunks = capture_streams()
    dec, events = decode(chunks)
    recv, sent = parse_log()
    return dict(chunks=chunks, dec=dec, events=events, recv=recv, sent=sent)


def methods(events, direction=None):
    return [e for d, e in events if isinstance(e, Method) and (direction is None or d == direction)]


@needs_capture
def test_capture_decodes_without_anomalies_and_every_frame_counted(qpid):
    ev = qpid["events"]
    assert [e for _, e in ev if isinstance(e, Anomaly)] == []
    frames = [e for _, e in ev if isinstance(e, Frame)]
    assert len(frames) == 214  # README: 214 AMQP frames
    assert [sum(1 for d, e in ev if isinstance(e, Frame) and d == k) for k in (0, 1)] == [102, 112]
    # every captured byte after the headers is inside exactly one frame
    total = sum(len(c[2]) for c in qpid["chunks"])
    assert sum(f.wire_size for f in frames) == total


@needs_capture
@pytest.mark.parametrize("direction", [0, 1])
def test_every_logged_operation_in_wire_order_with_its_arguments(qpid, direction):
    logged = qpid["recv"][direction]  # what the peer's qpid decoded, in the order it read them
    ours = methods(qpid["events"], direction)
    assert [spec_name(r.name) for r in logged] == [m.name for m in ours]
    for r, m in zip(logged, ours):
        kw = dict(r.kw)
        assert m.channel == kw.pop("channel", 0), r
        if "id" in kw:
            assert m.command_id == kw.pop("id"), r
        else:
            assert m.command_id is None
        if kw.pop("sync", False):
            assert m.synchronous, r
        elif SPEC.OPS_BY_NAME[m.name].kind == "command" and not SPEC.OPS_BY_NAME[m.name].synchronous:
            assert not m.synchronous, r
        kw.pop("headers", None)
        kw.pop("payload", None)
        if m.name == "connection.start-ok":
            assert kw.pop("response") == b"\0guest\0guest"
            assert m.args["response"] == {"user": "guest", "password": "<redacted>"}
        same(
            Rec(r.name, kw),
            {k: v for k, v in m.args.items() if k != "response" or m.name != "connection.start-ok"},
            m.name,
        )


@needs_capture
@pytest.mark.parametrize("direction", [0, 1])
def test_sent_log_lists_the_same_operations(qpid, direction):
    # qpid's senders log from several threads, so only the multiset is comparable
    sent = sorted(spec_name(r.name) for r in qpid["sent"][direction])
    assert sent == sorted(m.name for m in methods(qpid["events"], direction))


@needs_capture
def test_operation_counts_match_the_readme(qpid):
    ms = methods(qpid["events"])
    count = lambda n: sum(m.name == n for m in ms)  # noqa: E731
    assert count("exchange.declare") == 3 and count("queue.declare") == 4 and count("exchange.bind") == 4
    assert count("execution.result") == 6
    assert count("message.transfer") == 26
    assert count("session.completed") == 55
    assert count("connection.heartbeat") == 3
    assert len(ms) == sum(len(v) for v in qpid["recv"].values()) == 159


@needs_capture
def test_execution_results_link_to_the_command_they_answer(qpid):
    ev = qpid["events"]
    by_id = {(m.channel, m.command_id): m for m in methods(ev, 0) if m.command_id is not None}
    results = [m for m in methods(ev, 1) if m.name == "execution.result"]
    answered = [(by_id[(r.channel, r.answers_command_id)].name, r.args["value"]["$struct"]) for r in results]
    assert answered == [
        ("exchange.bound", "exchange.exchange-bound-result"),
        ("exchange.query", "exchange.exchange-query-result"),
        ("exchange.query", "exchange.exchange-query-result"),
        ("queue.query", "queue.queue-query-result"),
        ("queue.query", "queue.queue-query-result"),
        ("message.acquire", "message.acquired"),
    ]
    for r in results:  # and the result struct is the one the answered command's spec names
        assert (
            SPEC.OPS_BY_NAME[by_id[(r.channel, r.answers_command_id)].name].result
            == r.args["value"]["$struct"]
        )
    assert [r.command_id for r in results] == [0, 1, 2, 3, 4, 15]  # the server's own numbering


@needs_capture
@pytest.mark.parametrize("direction", [0, 1])
def test_every_transfer_content_matches_the_log(qpid, direction):
    ev = qpid["events"]
    contents = [e for d, e in ev if isinstance(e, Content) and d == direction]
    logged = [r for r in qpid["recv"][direction] if r.name == "MessageTransfer"]
    assert len(contents) == len(logged) == (14 if direction == 0 else 12)
    for r, c in zip(logged, contents):
        assert c.complete and c.method.command_id == r.kw["id"]
        structs = {h.name: h for h in r.kw.get("headers", [])}
        for name, key in (
            ("DeliveryProperties", "delivery-properties"),
            ("MessageProperties", "message-properties"),
        ):
            if name in structs:
                same(structs[name], c.properties[key], key)
            else:
                assert key not in c.properties
        body = r.kw.get("payload", b"")
        assert c.body_received == len(body)
        assert c.body_hash == hashlib.sha256(body).hexdigest()
        assert c.body == body[:64]
        assert (
            c.body_size == structs["MessageProperties"].kw.get("content_length", len(body))
            if "MessageProperties" in structs
            else c.body_size == len(body)
        )
        dp = structs.get("DeliveryProperties")
        assert c.routing_key == (dp.kw.get("routing_key") if dp else None)
        expect_exchange = dp.kw.get("exchange") if dp else None
        if expect_exchange is None and direction == 0:
            expect_exchange = r.kw.get("destination")
        assert c.exchange == expect_exchange


@needs_capture
def test_big_body_of_204800_bytes_spans_frames_both_ways(qpid):
    big = [(d, e) for d, e in qpid["events"] if isinstance(e, Content) and e.body_received == 204800]
    assert [d for d, _ in big] == [0, 1]
    payload = next(
        r.kw["payload"] for r in qpid["recv"][0] if r.name == "MessageTransfer" and r.kw["id"] == 19
    )
    for _, c in big:
        assert c.body_frames == 4 and c.complete and c.body_size == 204800
        assert c.body_hash == hashlib.sha256(payload).hexdigest()
        assert c.first_packet < c.packet  # completed by a later packet than the command's


@needs_capture
def test_redelivered_transfers_are_the_ones_qpid_logged(qpid):
    from amqpcap.records.rows import message_row_reference
    from amqpcap.records.schema import MESSAGES

    logged = {}
    for d in (0, 1):
        for r in qpid["recv"][d]:
            if r.name == "MessageTransfer":
                dp = [h for h in r.kw.get("headers", []) if h.name == "DeliveryProperties"]
                logged[(d, r.kw["id"])] = bool(dp and dp[0].kw.get("redelivered"))
    assert sum(logged.values()) == 1  # the released message, redelivered to the subscription
    col = [name for name, *_ in MESSAGES].index("redelivered")
    got = {}
    for d, c in qpid["events"]:
        if isinstance(c, Content):
            got[(d, c.method.command_id)] = message_row_reference("x", 0, d, c, "0-10")[col]
    assert {k: v is True for k, v in got.items()} == logged
    assert {v for (d, _), v in got.items() if d == 0} == {None}  # client transfers: as a 0-9-1 publish


@needs_capture
def test_mapped_message_properties_use_0_9_1_names(qpid):
    c = next(e for d, e in qpid["events"] if isinstance(e, Content) and d == 0)
    p = c.properties
    assert {
        k: p[k]
        for k in (
            "content-type",
            "content-encoding",
            "delivery-mode",
            "priority",
            "correlation-id",
            "reply-to",
            "expiration",
            "message-id",
            "timestamp",
            "user-id",
            "app-id",
        )
    } == {
        "content-type": "text/plain",
        "content-encoding": "utf-8",
        "delivery-mode": 2,
        "priority": 7,
        "correlation-id": "corr-0",
        "reply-to": "amq.direct/reply-queue",
        "expiration": "60000",
        "message-id": "a1b2c3d4-e5f6-4718-9a0b-1c2d3e4f5060",
        "timestamp": 1700000000,
        "user-id": "guest",
        "app-id": "qpid010-capture",
    }
    h = p["headers"]
    assert h["uuid"] == "0f0e0d0c-0b0a-0908-0706-050403020100" and h["ts"] == 1700000000
    assert h["nested"] == {"a": 1, "b": "two", "c": [1, "x", False], "d": {"deep": 2.5}}
    assert h["list"] == [1, 2, "three", 4.0, True, None, {"k": "v"}]
    assert h["float"] == 3.25 and h["bytes"] == b"\x00\x01\x02\xff" and h["big"] == 1 << 40
    assert (c.exchange, c.routing_key) == ("ex.direct", "rk1")


@needs_capture
def test_heartbeats_are_methods_and_heartbeat_events(qpid):
    ev = qpid["events"]
    hb = [(d, e.offset, e.channel) for d, e in ev if isinstance(e, Heartbeat)]
    hm = [
        (d, e.offset, e.channel) for d, e in ev if isinstance(e, Method) and e.name == "connection.heartbeat"
    ]
    assert hb == hm and sorted(d for d, _, _ in hb) == [0, 0, 1]
    assert all(ch == 1 for _, _, ch in hb)  # qpid sends them on the session's channel


@needs_capture
def test_connection_facts_and_close_200(qpid):
    f = qpid["dec"].facts
    ev = qpid["events"]
    close = next(e for d, e in ev if isinstance(e, Method) and e.name == "connection.close")
    open_ok = next(e for d, e in ev if isinstance(e, Method) and e.name == "connection.open-ok")
    assert f.close_reply_code == 200 and f.closed_by == "client"
    assert SPEC.CLOSE_CODES[200] == ("normal", None)
    assert f.close_ts == close.ts and close.packet == 189
    assert f.open_ts == open_ok.ts and open_ok.packet == 16
    assert f.user == "guest" and f.mechanism == "PLAIN"
    assert f.server_properties["product"] == "qpid-python TestServer"
    assert f.client_properties["qpid.client_pid"] == 4242
    assert (f.channel_max, f.frame_max, f.heartbeat) == (256, 65535, 30)


@needs_capture
def test_password_kept_only_with_keep_secrets(qpid):
    _, ev = decode(qpid["chunks"], keep_secrets=True)
    so = next(e for d, e in ev if isinstance(e, Method) and e.name == "connection.start-ok")
    assert so.args["response"] == b"\0guest\0guest"
    plain = next(e for d, e in qpid["events"] if isinstance(e, Method) and e.name == "connection.start-ok")
    assert "guest\0guest" not in repr(plain.args) and "'guest'" in repr(plain.args)


def _strip(e):
    """An event without its packet / ts (they depend on how bytes were chunked)."""
    if isinstance(e, Method):
        return (
            "M",
            e.offset,
            e.channel,
            e.name,
            repr(e.args),
            e.command_id,
            e.answers_command_id,
            e.synchronous,
        )
    if isinstance(e, Content):
        return ("C", e.offset, e.method.name, repr(e.properties), e.body_hash, e.body_received, e.complete)
    if isinstance(e, Frame):
        return ("F", e.offset, e.channel, e.type_name, e.size)
    return (type(e).__name__, getattr(e, "offset", None), getattr(e, "kind", None))


@needs_capture
@pytest.mark.parametrize("seed", [1, 2])
def test_any_chunking_of_the_streams_gives_the_same_events(qpid, seed):
    rnd = random.Random(seed)
    chunks = []
    for d, off, data, pkt, ts in qpid["chunks"]:
        i = 0
        while i < len(data):
            n = rnd.choice((1, 2, 3, 7, 12, 13, 100, 5000))
            chunks.append((d, off + i, data[i : i + n], pkt, ts))
            i += n
    _, ev = decode(chunks)
    per_dir = lambda evs, k: [_strip(e) for d, e in evs if d == k]  # noqa: E731
    for k in (0, 1):
        assert per_dir(ev, k) == per_dir(qpid["events"], k)


@needs_capture
def test_capture_cut_mid_stream_resyncs_and_decodes_the_rest(qpid):
    # Drop the first 1000 bytes of each direction (the handshake and some
    # commands), start inside a frame, and decode from the first provable boundary.
    cut = 1000
    chunks = []
    for d, off, data, pkt, ts in qpid["chunks"]:
        if off + len(data) <= cut:
            continue
        if off < cut:
            data, off = data[cut - off :], cut
        chunks.append((d, off, data, pkt, ts))
    dec = Decoder010()
    dec.start_midstream(0, cut)
    dec.start_midstream(1, cut)
    for d, off, data, pkt, ts in chunks:
        dec.feed(d, data, off, pkt, ts)
    dec.finish(0, 0)
    ev = dec.pop_events()
    full = {d: [m for m in methods(qpid["events"], d) if m.offset >= cut] for d in (0, 1)}
    for d in (0, 1):
        an = [e for dd, e in ev if dd == d and isinstance(e, Anomaly)]
        assert an[0].kind == "resync" and an[0].offset == cut
        # what follows is the tail of an assembly begun before the cut
        assert {a.kind for a in an[1:]} <= {"bad-segment-sequence", "incomplete-content"}
        resumed = cut + an[0].skipped
        got = methods(ev, d)
        expect = [m for m in full[d] if m.offset >= resumed]
        assert [(m.offset, m.name, m.args) for m in got] == [(m.offset, m.name, m.args) for m in expect]
        assert len(got) > 50, len(got)
        # command numbering is unknown until session.attach / command-point says (channel 2 here)
        for g, m in zip(got, expect):
            assert g.command_id == (m.command_id if m.channel == 2 else None)


# --- generated tables -------------------------------------------------------------------


def test_generated_module_is_what_the_generator_writes():
    sys.path.insert(0, os.path.join(REPO, "tools"))
    import gen_spec_0_10

    xml = os.path.join(REPO, "specs", "0-10", "amqp.0-10.stripped.xml")
    src = gen_spec_0_10.generate(xml)
    assert src == gen_spec_0_10.generate(xml)
    assert src.startswith("# generated by tools/gen_spec_0_10.py, do not edit")
    with open(os.path.join(REPO, "src", "amqpcap", "amqp", "spec", "v0_10.py")) as f:
        assert f.read() == src


def test_tables_hold_classes_structs_and_error_codes():
    assert SPEC.CLASSES == {
        1: "connection",
        2: "session",
        3: "execution",
        4: "message",
        5: "tx",
        6: "dtx",
        7: "exchange",
        8: "queue",
        9: "file",
        10: "stream",
    }
    assert len(SPEC.CONTROLS) == 25 and len(SPEC.COMMANDS) == 59
    t = SPEC.COMMANDS[(4, 1)]
    assert t.name == "message.transfer" and [f.name for f in t.fields] == [
        "destination",
        "accept-mode",
        "acquire-mode",
    ]
    assert t.segments[0] == (
        "message.delivery-properties",
        "message.fragment-properties",
        "message.message-properties",
    )
    assert SPEC.COMMANDS[(8, 4)].result == "queue.queue-query-result" and SPEC.COMMANDS[(8, 4)].synchronous
    assert SPEC.CONTROLS[(1, 1)].responses == ("connection.start-ok",)
    dp = SPEC.STRUCTS["message.delivery-properties"]
    assert (dp.size, dp.pack, dp.class_code, dp.code) == (4, 2, 4, 1)
    assert SPEC.STRUCTS["message.message-properties"].fields[3].type == "message.reply-to"
    assert SPEC.TYPES["str16"] == (0x95, None, 2) and SPEC.TYPE_CODES[0x48] == "uuid"
    assert SPEC.ERROR_CODES[404] == ("not-found", "soft")
    assert SPEC.DETACH_CODES[0] == ("normal", None) and SPEC.DETACH_CODES[1] == ("session-busy", "soft")
    assert SPEC.CLOSE_CODES[320] == ("connection-forced", "hard")
    assert SPEC.STRUCT_CODES[(6, 4)] == "dtx.xid"  # qpid errata


# --- spec-built edge cases ---------------------------------------------------------------


def run(c2s: bytes = b"", s2c: bytes = b"", chunk: int | None = None, **kw):
    dec = Decoder010(**kw)
    for d, data in ((0, c2s), (1, s2c)):
        step = chunk or max(len(data), 1)
        for i in range(0, len(data), step):
            dec.feed(d, data[i : i + step], 8 + i, 100 + i, 1000 + i)
    dec.finish(9999, 9999)
    return dec, dec.pop_events()


def only(ev, cls, direction=None):
    return [e for d, e in ev if isinstance(e, cls) and (direction is None or d == direction)]


HEADERS = {
    "message.delivery-properties": {
        "priority": 3,
        "delivery-mode": 2,
        "ttl": 1500,
        "timestamp": 1234567890,
        "exchange": "amq.topic",
        "routing-key": "a.b",
        "redelivered": True,
    },
    "message.message-properties": {
        "content-length": 1000,
        "message-id": uuid.UUID(int=7),
        "correlation-id": b"c-1",
        "reply-to": {"exchange": "", "routing-key": "replies"},
        "content-type": "application/json",
        "application-headers": {"k": "v" * 300, "n": {"m": [1, 2, 3]}},
    },
}


def test_segments_spanning_frames_of_a_few_hundred_bytes():
    hs_c, hs_s = B.handshake(max_frame=4096)
    body = (bytes(range(256)) * 4)[:1000]
    c2s = hs_c + B.command(
        "message.transfer",
        {"destination": "amq.topic", "accept-mode": 1, "acquire-mode": 0},
        sync=True,
        header=HEADERS,
        body=body,
        max_frame=200,
    )
    c2s += B.command("queue.declare", {"queue": "q" * 200, "arguments": {"x": "y" * 400}}, max_frame=150)
    dec, ev = run(c2s, hs_s, chunk=37)
    assert only(ev, Anomaly) == []
    frames = only(ev, Frame, 0)
    assert max(f.wire_size for f in frames) <= 200 and len(frames) > 15
    (c,) = only(ev, Content)
    assert c.complete and c.body_received == 1000 and c.body_hash == hashlib.sha256(body).hexdigest()
    assert c.body_frames == 6 and c.body == body[:64]
    assert c.properties["headers"] == {"k": "v" * 300, "n": {"m": [1, 2, 3]}}
    assert c.properties["reply-to"] == "/replies" and c.properties["message-id"] == str(uuid.UUID(int=7))
    assert c.properties["delivery-properties"]["redelivered"] is True
    assert (c.exchange, c.routing_key, c.body_size) == ("amq.topic", "a.b", 1000)
    qd = only(ev, Method, 0)[-1]
    assert qd.name == "queue.declare" and qd.args["queue"] == "q" * 200 and qd.command_id == 1
    assert dec.facts.user == "alice" and "s3cret" not in repr(ev)


def test_controls_between_frames_of_a_multi_frame_command():
    hs_c, hs_s = B.handshake()
    cmd = B.command(
        "exchange.declare",
        {"exchange": "e" * 100, "type": "topic", "arguments": {"z": "w" * 100}},
        max_frame=60,
    )
    frames = []
    p = 0
    while p < len(cmd):
        size = struct.unpack_from(">H", cmd, p + 2)[0]
        frames.append(cmd[p : p + size])
        p += size
    ctl = B.control("session.completed", {"commands": [[0, 5]], "timely-reply": True}, channel=1)
    mixed = frames[0] + ctl + frames[1] + ctl + b"".join(frames[2:])
    _, ev = run(hs_c + mixed, hs_s)
    assert only(ev, Anomaly) == []
    ms = [m for m in only(ev, Method, 0) if m.channel == 1]
    assert [m.name for m in ms][-3:] == ["session.completed", "session.completed", "exchange.declare"]
    assert ms[-1].args["arguments"] == {"z": "w" * 100} and ms[-1].command_id == 0
    assert ms[-2].args == {"commands": [[0, 5]], "timely-reply": True}


EVERY_TYPE = {
    "bin8": 0xAB,
    "int8": -5,
    "uint8": 250,
    "char": "é",
    "boolean": True,
    "bin16": 0xBEEF,
    "int16": -300,
    "uint16": 65000,
    "bin32": 0xDEADBEEF,
    "int32": -70000,
    "uint32": 4000000000,
    "float": 1.5,
    "char-utf32": "☃",
    "bin64": 1 << 60,
    "int64": -(1 << 40),
    "uint64": (1 << 64) - 1,
    "double": -2.25,
    "datetime": 1700000000,
    "bin128": bytes(range(16)),
    "uuid": "12345678-1234-5678-1234-567812345678",
    "bin256": bytes(range(32)),
    "bin512": bytes(range(64)),
    "bin1024": bytes(range(128)),
    "vbin8": b"\x00\xff",
    "str8-latin": "façade",
    "str8": "héllo",
    "str8-utf16": "ü☃",
    "vbin16": b"x" * 300,
    "str16-latin": "€uro",
    "str16": "long ☃" * 50,
    "str16-utf16": "𝄞 clef",
    "vbin32": b"\x01" * 70000,
    "map": {"inner": 1},
    "list": [1, "a", None],
    "array": B.Typed("int32", [1, -2, 3]),
    "struct32": ("message.acquired", {"transfers": [[1, 2]]}),
    "bin40": b"12345",
    "dec32": (2, -12345),
    "bin72": b"123456789",
    "dec64": (3, 1234567),
    "void": None,
    "bit": None,
}
EXPECTED = dict(
    EVERY_TYPE,
    **{
        "array": [1, -2, 3],
        "struct32": {"$struct": "message.acquired", "transfers": [[1, 2]]},
        "dec32": -123.45,
        "dec64": 1234.567,
        "bit": True,
        "boolean": True,
    },
)


def test_every_type_code_in_a_map_nested_in_a_list_in_a_map():
    coded = {name for name, t in SPEC.TYPES.items() if t.code is not None}
    assert coded == set(EVERY_TYPE)  # the test covers every type code of the spec
    m = {name: B.Typed(name, v) for name, v in EVERY_TYPE.items()}
    nested = {"outer": [m, {"again": m}]}
    c2s = B.command("exchange.declare", {"exchange": "x", "type": "direct", "arguments": nested})
    _, ev = run(c2s)
    assert only(ev, Anomaly) == []
    (decl,) = only(ev, Method)
    got = decl.args["arguments"]["outer"]
    assert got[0] == EXPECTED and got[1] == {"again": EXPECTED}
    assert got[0]["bin8"] == 0xAB and isinstance(got[0]["vbin16"], bytes) and isinstance(got[0]["str16"], str)


def test_unknown_type_codes_are_skipped_by_their_code_range():
    m = {
        "f3": B.Typed("raw", (0x03, b"\x07")),
        "v8": B.Typed("raw", (0x8F, b"\x02hi")),
        "z": B.Typed("raw", (0xF5, b"")),
        "after": 1,
    }
    _, ev = run(B.command("exchange.declare", {"exchange": "x", "type": "t", "arguments": m}))
    (decl,) = only(ev, Method)
    assert decl.args["arguments"] == {"f3": b"\x07", "v8": b"hi", "z": None, "after": 1}
    bad = {"r": B.Typed("raw", (0xB5, b"\x00"))}  # reserved code: size unknown
    _, ev = run(B.command("exchange.declare", {"exchange": "x", "type": "t", "arguments": bad}))
    assert [a.kind for a in only(ev, Anomaly)] == ["malformed-command"]


def test_packed_struct_with_4_octet_flags():
    # The spec defines no pack="4" struct; build one with 27 fields to cover octets 2-4.
    names = [f"f{i}" for i in range(27)]
    fields = tuple(
        SPEC.FieldSpec(n, "bit" if i % 3 == 0 else "uint16", False, None) for i, n in enumerate(names)
    )
    values = {n: (True if i % 3 == 0 else i * 100) for i, n in enumerate(names) if i % 4 != 1}
    values["f0"] = False
    data = B.encode_packed(fields, 4, values)
    flags = int.from_bytes(data[:4], "little")
    assert flags >> 24 and not flags & 1  # fields 24.. live in the 4th octet
    got, off = C._decode_packed(data, 0, len(data), C._compile_fields(fields), 4, 0)
    assert off == len(data)
    expect = {
        n: values.get(n, False) if i % 3 == 0 else values[n]
        for i, n in enumerate(names)
        if i % 3 == 0 or n in values
    }
    assert got == expect


def test_coded_struct_fields_and_errata_xid():
    xid = {"format": 1, "global-id": b"g", "branch-id": b"b"}
    std = B.command("dtx.start", {"xid": xid, "join": True})
    errata_xid = B.encode_struct32("dtx.xid", xid)  # 4-octet size, class 6 struct 4
    op = SPEC.OPS_BY_NAME["dtx.start"]
    errata = B.frames([(1, bytes([6, 2, 1, 0]) + b"\x03\x00" + errata_xid)], 1, 1)
    rec = B.command(
        "execution.result",
        {"command-id": 3, "value": ("dtx.recover-result", {"in-doubt": B.Typed("dtx.xid", [xid, xid])})},
    )
    _, ev = run(std + errata + rec)
    assert only(ev, Anomaly) == []
    a, b, r = only(ev, Method)
    assert a.args == {"xid": xid, "join": True, "resume": False} and b.args == a.args and op.result
    assert r.answers_command_id == 3
    assert r.args["value"] == {
        "$struct": "dtx.recover-result",
        "in-doubt": [dict(xid, **{"$struct": "dtx.xid"})] * 2,
    }


def test_truncated_feed_at_every_offset_needs_more_data_then_decodes():
    cmd = B.command(
        "message.subscribe",
        {
            "queue": "q",
            "destination": "d",
            "accept-mode": 0,
            "acquire-mode": 0,
            "arguments": {"x": [1, {"y": "z"}]},
        },
        sync=True,
    )
    whole = only(run(cmd)[1], Method)
    for cut in range(len(cmd)):
        dec = Decoder010()
        dec.feed(0, cmd[:cut], 8, 1, 1)
        assert [e for _, e in dec.pop_events() if not isinstance(e, Frame)] == []  # nothing yet: NEED DATA
        dec.feed(0, cmd[cut:], 8 + cut, 2, 2)
        got = only(dec.pop_events(), Method)
        assert [(m.name, m.args, m.command_id, m.synchronous) for m in got] == [
            (m.name, m.args, m.command_id, m.synchronous) for m in whole
        ]
    for cut in range(1, len(cmd)):  # and a capture that ends there says so
        dec = Decoder010()
        dec.feed(0, cmd[:cut], 8, 1, 1)
        dec.finish(2, 2)
        an = only(dec.pop_events(), Anomaly)
        assert [a.kind for a in an] == ["truncated-stream"] and an[0].skipped == cut


def _transfer(body: bytes, max_frame: int, cmd_args=None):
    return B.command(
        "message.transfer",
        cmd_args or {"destination": "ex", "accept-mode": 1, "acquire-mode": 0},
        header={"message.delivery-properties": {"routing-key": "rk"}},
        body=body,
        max_frame=max_frame,
    )


def test_gap_inside_a_body_frame_keeps_sync_and_the_next_command_decodes():
    body = bytes(range(200)) * 10  # 2000 bytes in frames of 300
    t = _transfer(body, 300)
    nxt = B.command("queue.declare", {"queue": "after"})
    data = t + nxt
    gap_at, gap_len = len(t) - 700, 100  # inside a body frame, the header before it is intact
    dec = Decoder010()
    dec.feed(0, data[:gap_at], 8, 1, 1)
    dec.gap(0, 8 + gap_at, gap_len, 2, 2)
    dec.feed(0, data[gap_at + gap_len :], 8 + gap_at + gap_len, 3, 3)
    dec.finish(4, 4)
    ev = dec.pop_events()
    kinds = [a.kind for a in only(ev, Anomaly)]
    assert kinds == ["gap", "incomplete-content"]
    (c,) = only(ev, Content)
    assert not c.complete and c.body_received < 2000 and c.body_frames == 7
    qd = only(ev, Method)[-1]
    assert qd.name == "queue.declare" and qd.args["queue"] == "after" and qd.command_id == 1  # still numbered
    gap = only(ev, Anomaly)[0]
    assert gap.skipped == 300  # the lost bytes and the rest of the damaged frame: one whole 300-byte frame


def test_gap_that_swallows_frame_boundaries_resyncs():
    hs_c, hs_s = B.handshake()
    body = b"B" * 3000
    t = _transfer(body, 256)
    after = B.command("queue.declare", {"queue": "a1"}) + B.command("queue.declare", {"queue": "a2"})
    point = B.control("session.command-point", {"command-id": 40, "command-offset": 0}, channel=1)
    after += point + B.command("queue.declare", {"queue": "a3"})
    data = hs_c + t + after
    gap_at = len(hs_c) + 500
    gap_len = 600  # spans more than a frame: boundaries inside are lost
    dec = Decoder010()
    dec.feed(0, data[:gap_at], 8, 1, 1)
    dec.gap(0, 8 + gap_at, gap_len, 2, 2)
    rest = data[gap_at + gap_len :]
    for i in range(0, len(rest), 50):
        dec.feed(0, rest[i : i + 50], 8 + gap_at + gap_len + i, 3, 3)
    dec.finish(4, 4)
    ev = dec.pop_events()
    kinds = [a.kind for a in only(ev, Anomaly)]
    assert kinds[:3] == ["gap", "incomplete-content", "resync"]
    assert set(kinds[3:]) <= {"bad-segment-sequence", "incomplete-content"}
    (c,) = only(ev, Content)
    assert not c.complete
    qds = [m for m in only(ev, Method) if m.name == "queue.declare"]
    assert [(m.args["queue"], m.command_id) for m in qds] == [("a1", None), ("a2", None), ("a3", 40)]


def test_hostile_frame_sizes_are_anomalies_and_decoding_resumes():
    hs_c, hs_s = B.handshake(max_frame=4096)
    good = B.command("queue.declare", {"queue": "ok1"}) + B.command("queue.declare", {"queue": "ok2"})
    tiny = B.frame(0x0F, 1, b"\x08\x01\x01\x00", 1, 1, size=4)  # size < 12
    huge = B.frame(0x0F, 1, b"\x08\x01\x01\x00" + b"\0" * 20, 1, 1, size=60000)  # > negotiated 4096
    for bad, kind in ((tiny, "malformed-frame"), (huge, "oversize-frame")):
        _, ev = run(hs_c + bad + good, hs_s, chunk=29)
        an = only(ev, Anomaly)
        assert [a.kind for a in an] == [kind, "resync"]
        assert an[1].skipped == len(bad)
        assert [m.args["queue"] for m in only(ev, Method) if m.name == "queue.declare"] == ["ok1", "ok2"]


def test_hostile_length_fields_inside_values_allocate_nothing():
    seg = bytes([7, 1, 1, 0]) + (0b1000011).to_bytes(2, "little") + b"\x01x\x01t"
    lying_map = struct.pack(">II", 0xFFFFFFF0, 0xFFFFFFFF)  # size and count far beyond the segment
    lying_count = struct.pack(">II", 8, 0x7FFFFFFF) + b"\0" * 4
    deep = b""
    for _ in range(100):  # list nested 100 deep: over the depth limit
        deep = b"\xa9" + struct.pack(">II", 4 + len(deep), 1 if deep else 0) + deep
    deep_map = struct.pack(">II", 4 + 2 + len(deep), 1) + b"\x01k" + deep
    zero_width = b"\xaa" + struct.pack(">IBI", 5, 0xF0, 0xFFFFFFFF)  # array of 4 billion voids
    zw_map = struct.pack(">II", 4 + 2 + len(zero_width), 1) + b"\x01k" + zero_width
    for arg in (lying_map, lying_count, deep_map, zw_map):
        _, ev = run(B.frames([(1, seg + arg)], 1, 1) + B.command("queue.declare", {"queue": "next"}))
        assert [a.kind for a in only(ev, Anomaly)] == ["malformed-command"]
        ms = only(ev, Method)
        assert [(m.name, m.command_id) for m in ms] == [("queue.declare", 1)]


def test_unknown_command_and_control_are_reported_and_numbering_continues():
    unknown_cmd = B.frames([(1, bytes([99, 1, 1, 0, 0, 0]))], 1, 1)
    unknown_ctl = B.frames([(0, bytes([2, 99, 0, 0]))], 1, 0)
    _, ev = run(unknown_cmd + unknown_ctl + B.command("queue.declare", {"queue": "n"}))
    assert [a.kind for a in only(ev, Anomaly)] == ["unknown-command", "unknown-control"]
    assert only(ev, Method)[0].command_id == 1


def test_execution_exception_links_and_names_its_error_code():
    exc = B.command(
        "execution.exception",
        {
            "error-code": 404,
            "command-id": 7,
            "class-code": 8,
            "command-code": 1,
            "description": "no queue",
            "error-info": {"q": "x"},
        },
    )
    _, ev = run(
        b"", B.control("session.command-point", {"command-id": 3, "command-offset": 0}, channel=1) + exc
    )
    m = only(ev, Method)[-1]
    assert (m.name, m.command_id, m.answers_command_id) == ("execution.exception", 3, 7)
    assert SPEC.ERROR_CODES[m.args["error-code"]] == ("not-found", "soft")


def test_header_only_empty_body_and_no_segment_transfers():
    args = {"destination": "ex", "accept-mode": 1, "acquire-mode": 0}
    header_only = B.command("message.transfer", args, header={"message.delivery-properties": {"priority": 1}})
    empty_body = B.command("message.transfer", args, body=b"")
    bare = B.command("message.transfer", args)
    _, ev = run(header_only + empty_body + bare)
    assert only(ev, Anomaly) == []
    cs = only(ev, Content)
    assert [(c.complete, c.body_received, c.body_frames, "priority" in c.properties) for c in cs] == [
        (True, 0, 0, True),
        (True, 0, 1, False),
        (True, 0, 0, False),
    ]
    assert [c.method.command_id for c in cs] == [0, 1, 2]


def test_content_cut_by_the_end_of_the_capture_is_incomplete():
    t = _transfer(b"z" * 1000, 300)
    dec = Decoder010()
    dec.feed(0, t[:-400], 8, 1, 1)
    dec.finish(2, 2)
    ev = dec.pop_events()
    (c,) = only(ev, Content)
    assert not c.complete and 0 < c.body_received < 1000
    assert {a.kind for a in only(ev, Anomaly)} == {"truncated-stream", "incomplete-content"}


def test_amqplain_and_cram_md5_responses_are_redacted():
    amqplain = b"\x05LOGINS" + struct.pack(">I", 3) + b"bob" + b"\x08PASSWORDS" + struct.pack(">I", 2) + b"pw"
    for mech, resp, user in (("AMQPLAIN", amqplain, "bob"), ("CRAM-MD5", b"carol 0123abcd", "carol")):
        c2s = B.control(
            "connection.start-ok",
            {"client-properties": {}, "mechanism": mech, "response": resp, "locale": "en_US"},
        )
        dec, ev = run(c2s)
        (m,) = only(ev, Method)
        assert m.args["response"] == {"user": user, "password": "<redacted>"} and dec.facts.user == user


@needs_capture
def test_decode_speed_on_the_capture_streams(qpid):
    """Not a pass/fail benchmark: prints frames/s and MB/s for the report."""
    import time

    reps = 20
    streams = {0: b"", 1: b""}
    for d, _off, data, _pkt, _ts in qpid["chunks"]:
        streams[d] += data
    start = time.perf_counter()
    nframes = 0
    for _ in range(reps):
        dec = Decoder010()
        for d in (0, 1):
            s = streams[d]
            for i in range(0, len(s), 65536):
                dec.feed(d, s[i : i + 65536], 8 + i, 1, 1)
        dec.finish(1, 1)
        nframes += sum(1 for _, e in dec.pop_events() if type(e) is Frame)
    dt = time.perf_counter() - start
    mb = reps * (len(streams[0]) + len(streams[1])) / 1e6
    print(f"\n0-10 decode: {nframes / dt:,.0f} frames/s, {mb / dt:,.1f} MB/s")
