"""The AMQP 1.0 codec on hand-encoded frames: framing, every performative, SASL, messages
reassembled from their transfers, link and delivery state, and damaged input."""

import hashlib

from amqp10_wire import (
    AMQP_HEADER,
    Sym,
    accepted,
    amqp_value,
    application_properties,
    attach,
    begin,
    close,
    data,
    detach,
    disposition,
    end,
    error,
    flow,
    frame,
    header,
    message_annotations,
    modified,
    open_,
    properties,
    rejected,
    released,
    sasl_init,
    sasl_mechanisms,
    sasl_outcome,
    transfer,
)

from amqpcap.amqp.codec_1_0 import Decoder10
from amqpcap.amqp.events import Anomaly, Frame, Heartbeat, ProtocolHeader
from amqpcap.amqp.events_1_0 import Delivery, Performative


def run(c2s: bytes, s2c: bytes = b"", body_bytes: int = 64, keep_secrets: bool = False, split: int = 0):
    d = Decoder10(body_bytes=body_bytes, keep_secrets=keep_secrets)
    if split:  # fed in pieces of this size
        for i in range(0, max(len(c2s), len(s2c)), split):
            if c2s[i : i + split]:
                d.feed(0, c2s[i : i + split], 8 + i, 1 + i, 1000 + i)
            if s2c[i : i + split]:
                d.feed(1, s2c[i : i + split], 8 + i, 1 + i, 1000 + i)
    else:
        if c2s:
            d.feed(0, c2s, 8, 1, 1000)
        if s2c:
            d.feed(1, s2c, 8, 2, 2000)
    d.finish(9, 9000)
    return d, d.pop_events()


def of(events, t):
    return [(di, e) for di, e in events if type(e) is t]


def perfs(events):
    return [e for _, e in of(events, Performative)]


def session(*frames_c2s):
    return frame(open_("client")) + frame(begin()) + b"".join(frames_c2s)


def test_every_performative_is_named_with_its_fields():
    c2s = session(
        frame(attach("l", 1, False, tgt="/queues/q", snd=2, rcv=0)),
        frame(flow(1, 5, 10, True)),
        frame(transfer(1, 0, b"t", settled=False) + data(b"x")),
        frame(disposition(False, 0, 0, True, released())),
        frame(detach(1, True)),
        frame(end()),
        frame(close()),
    )
    _, ev = run(c2s)
    p = perfs(ev)
    assert [x.name for x in p] == [
        "open",
        "begin",
        "attach",
        "flow",
        "transfer",
        "disposition",
        "detach",
        "end",
        "close",
    ]
    att = p[2].args
    assert att == {
        "name": "l",
        "handle": 1,
        "role": False,
        "snd-settle-mode": 2,
        "rcv-settle-mode": 0,
        "target": {"$type": "target", "address": "/queues/q"},
    }
    assert p[3].args["link-credit"] == 10 and p[3].args["drain"] is True and p[3].link_name == "l"
    assert p[4].args["delivery-tag"] == b"t" and p[4].target == "/queues/q"
    assert p[5].args["state"] == {"$type": "released"}
    assert p[6].link_name == "l" and p[6].args["closed"] is True
    assert [x.code for x in p] == list(range(0x10, 0x19))


def test_sasl_frames_and_the_second_protocol_header():
    c2s = frame(sasl_init("PLAIN", b"\0alice\0s3cret", "host"), ftype=1) + AMQP_HEADER + frame(open_("c"))
    s2c = frame(sasl_mechanisms("PLAIN", "AMQPLAIN"), ftype=1) + frame(sasl_outcome(0), ftype=1) + AMQP_HEADER
    d, ev = run(c2s, s2c)
    names = [(di, e.name) for di, e in of(ev, Performative)]
    assert names == [(0, "sasl.init"), (0, "open"), (1, "sasl.mechanisms"), (1, "sasl.outcome")]
    mech = perfs(ev)[2]
    assert mech.args == {"sasl-server-mechanisms": ["PLAIN", "AMQPLAIN"]} and mech.frame_type == 1
    assert [e.raw for _, e in of(ev, ProtocolHeader)] == [AMQP_HEADER, AMQP_HEADER]
    init = perfs(ev)[0].args
    assert init["initial-response"] == {"user": "alice", "password": "<redacted>"}
    assert "s3cret" not in repr(ev)
    f = d.facts
    assert (f.mechanism, f.user) == ("PLAIN", "alice")


def test_keep_secrets_keeps_the_sasl_response():
    c2s = frame(sasl_init("PLAIN", b"\0alice\0s3cret"), ftype=1)
    _, ev = run(c2s, keep_secrets=True)
    assert perfs(ev)[0].args["initial-response"] == b"\0alice\0s3cret"


def test_empty_frames_are_heartbeats_and_extended_headers_are_skipped():
    c2s = frame(b"") + frame(open_("c"), doff=4, ext=b"\xaa" * 8) + frame(b"", channel=0)
    _, ev = run(c2s)
    assert len(of(ev, Heartbeat)) == 2
    assert [e.name for e in perfs(ev)] == ["open"]
    frames = [e for _, e in of(ev, Frame)]
    assert [f.type_name for f in frames] == ["heartbeat", "amqp", "heartbeat"]
    assert frames[1].size == 8 + 8 + len(open_("c"))


def test_connection_facts_from_the_two_opens():
    c2s = frame(open_("client-1", "vhost:/", max_frame=512, channel_max=None, idle=30000))
    s2c = frame(
        open_(
            "rabbit@host",
            max_frame=131072,
            idle=60000,
            props={Sym("product"): "RabbitMQ", Sym("version"): "4.1"},
        )
    )
    d, _ = run(c2s, s2c)
    f = d.facts
    assert (f.client_container_id, f.server_container_id, f.vhost) == ("client-1", "rabbit@host", "vhost:/")
    assert (f.frame_max, f.channel_max, f.idle_timeout_ms) == (512, 65535, 30000)
    assert f.server_properties == {"product": "RabbitMQ", "version": "4.1"}
    assert f.open_ts == 2000


def test_a_message_split_over_transfers_is_one_delivery_with_its_sections():
    payload = bytes(range(256)) * 80  # 20 kB
    msg = (
        header(True, 7, 5000)
        + message_annotations({Sym("x-opt-a"): "b"})
        + properties(
            message_id="m-1",
            to="/queues/q",
            reply_to="/queues/r",
            correlation_id="c-1",
            content_type=Sym("application/octet-stream"),
        )
        + application_properties({"k": 1})
        + data(payload)
    )
    chunks = [msg[i : i + 500] for i in range(0, len(msg), 500)]
    frames = [frame(transfer(0, 3, b"t3", more=True) + chunks[0])]
    frames += [frame(transfer(0, more=i < len(chunks) - 1) + c) for i, c in enumerate(chunks[1:], 1)]
    c2s = session(frame(attach("sender", 0, False, tgt="/queues/q")), *frames)
    s2c = frame(open_("srv")) + frame(begin(0)) + frame(disposition(True, 3, None, True, accepted()))
    _, ev = run(c2s, s2c, body_bytes=10)
    ((di, dv),) = of(ev, Delivery)
    assert di == 0 and dv.frames == len(chunks) and dv.complete and not dv.aborted
    assert (dv.link_name, dv.delivery_id, dv.address) == ("sender", 3, "/queues/q")
    assert dv.body_kind == "data" and dv.body_size == len(payload) and dv.body == payload[:10]
    assert dv.body_hash == hashlib.sha256(payload).hexdigest()
    assert dv.sections["header"] == {"durable": True, "priority": 7, "ttl": 5000}
    assert dv.sections["message-annotations"] == {"x-opt-a": "b"}
    assert dv.sections["properties"]["correlation-id"] == "c-1"
    assert dv.sections["application-properties"] == {"k": 1}
    assert (dv.settled, dv.outcome, dv.settle_ts) == (True, "accepted", 2000)


def test_the_same_message_fed_byte_by_byte_decodes_the_same():
    msg = properties(message_id="m") + data(b"hello world" * 30)
    c2s = session(
        frame(attach("s", 0, False)),
        frame(transfer(0, 0, b"a", more=True) + msg[:100]),
        frame(transfer(0, more=False) + msg[100:]),
    )
    _, whole = run(c2s)
    _, pieces = run(c2s, split=1)
    assert [e.body_hash for _, e in of(whole, Delivery)] == [e.body_hash for _, e in of(pieces, Delivery)]
    assert len(of(pieces, Performative)) == len(of(whole, Performative)) == 5


def one_and_split(msg: bytes, cut: int):
    """The deliveries and anomalies of ``msg`` sent in one transfer, and split at ``cut``."""
    one = session(frame(attach("s", 0, False)), frame(transfer(0, 0, b"a") + msg))
    split = session(
        frame(attach("s", 0, False)),
        frame(transfer(0, 0, b"a", more=True) + msg[:cut]),
        frame(transfer(0, more=False) + msg[cut:]),
    )
    out = []
    for c2s in (one, split):
        _, ev = run(c2s, body_bytes=20)
        ((_, dv),) = of(ev, Delivery)
        out.append(
            (
                dv.sections,
                dv.body_kind,
                dv.body_size,
                dv.body_hash,
                dv.body,
                dv.complete,
                [(a.kind, a.detail) for _, a in of(ev, Anomaly) if a.kind != "incomplete-content"],
            )
        )
    return out


def test_a_message_in_one_transfer_decodes_as_the_same_message_split():
    # a single-frame message is read where it lies, a split one from its assembly: the same
    msg = header(True) + properties(message_id="m", to="/q") + data(b"abc" * 20) + data(b"xyz" * 7)
    one, split = one_and_split(msg, 7)
    assert one == split
    assert one[2:5] == (81, hashlib.sha256(b"abc" * 20 + b"xyz" * 7).hexdigest(), (b"abc" * 20)[:20])


def test_a_malformed_message_in_one_transfer_is_reported_as_the_same_message_split():
    msg = properties(message_id="m") + data(b"abc") + b"\x00\x53\x75\xa0\x09abc"  # a data section cut
    one, split = one_and_split(msg, 5)
    assert one == split
    assert not one[5] and one[6] == [("malformed-message", one[6][0][1])]
    assert one[6][0][1].startswith("data section at ")


def test_amqp_value_and_sequence_bodies_hash_their_encoded_value():
    c2s = session(frame(attach("s", 0, False)), frame(transfer(0, 0, b"a", settled=True) + amqp_value("hi")))
    _, ev = run(c2s)
    ((_, dv),) = of(ev, Delivery)
    assert dv.body_kind == "amqp-value" and dv.body == b"\xa1\x02hi" and dv.body_size == 4
    assert dv.settled and dv.outcome is None


def test_deliveries_on_two_links_and_two_sessions_are_kept_apart():
    c2s = (
        frame(open_("c"))
        + frame(begin(), channel=0)
        + frame(begin(), channel=1)
        + frame(attach("a", 0, False), channel=0)
        + frame(attach("b", 0, False), channel=1)
        + frame(transfer(0, 0, b"1", more=True) + data(b"A1"), channel=0)
        + frame(transfer(0, 0, b"1", more=True) + data(b"B1"), channel=1)
        + frame(transfer(0, more=False) + data(b"A2"), channel=0)
        + frame(transfer(0, more=False) + data(b"B2"), channel=1)
    )
    s2c = (
        frame(open_("s"))
        + frame(begin(0), channel=5)
        + frame(begin(1), channel=6)
        + frame(disposition(True, 0, 0, True, accepted()), channel=5)
        + frame(disposition(True, 0, 0, True, rejected("amqp:not-allowed", "no")), channel=6)
    )
    _, ev = run(c2s, s2c)
    got = {e.link_name: e for _, e in of(ev, Delivery)}
    assert got["a"].body_hash == hashlib.sha256(b"A1A2").hexdigest()
    assert got["b"].body_hash == hashlib.sha256(b"B1B2").hexdigest()
    assert (got["a"].outcome, got["b"].outcome, got["b"].condition) == (
        "accepted",
        "rejected",
        "amqp:not-allowed",
    )


def test_a_disposition_range_settles_every_delivery_in_it():
    c2s = session(
        frame(attach("s", 0, False)), *[frame(transfer(0, i, bytes([i])) + data(b"m")) for i in range(5)]
    )
    s2c = frame(open_("s")) + frame(begin(0)) + frame(disposition(True, 1, 3, True, modified()))
    _, ev = run(c2s, s2c)
    by_id = {e.delivery_id: e for _, e in of(ev, Delivery)}
    assert sorted(by_id) == [0, 1, 2, 3, 4]
    assert [by_id[i].outcome for i in range(5)] == [None, "modified", "modified", "modified", None]
    assert [by_id[i].settled for i in range(5)] == [False, True, True, True, False]


def test_an_outcome_stated_unsettled_is_kept_until_the_sender_settles():
    c2s = session(frame(attach("s", 0, False, rcv=1)), frame(transfer(0, 0, b"t") + data(b"m")))
    settle = frame(disposition(False, 0, None, True))  # the sender settles (receiver settle mode second)
    s2c = frame(open_("s")) + frame(begin(0)) + frame(disposition(True, 0, None, False, accepted()))
    d = Decoder10()
    d.feed(0, c2s, 8, 1, 100)
    d.feed(1, s2c, 8, 2, 200)
    assert of(d.pop_events(), Delivery) == []  # stated, not settled: held
    d.feed(0, settle, 8 + len(c2s), 3, 300)
    ((_, dv),) = of(d.pop_events(), Delivery)
    assert (dv.outcome, dv.settled, dv.settle_ts) == ("accepted", True, 300)


def test_an_aborted_delivery_is_recorded_as_such():
    c2s = session(
        frame(attach("s", 0, False)),
        frame(transfer(0, 0, b"t", more=True) + data(b"part")),
        frame(transfer(0, aborted=True)),
    )
    _, ev = run(c2s)
    ((_, dv),) = of(ev, Delivery)
    assert dv.aborted and not dv.complete and dv.settled


def test_errors_of_close_end_and_detach_are_decoded():
    c2s = session(
        frame(attach("s", 0, True, src="/queues/missing")),
        frame(detach(0, True, error("amqp:not-found", "no queue"))),
        frame(end(error("amqp:session:unattached-handle"))),
        frame(close(error("amqp:connection:forced", "bye"))),
    )
    d, ev = run(c2s)
    p = perfs(ev)
    assert p[3].args["error"] == {"$type": "error", "condition": "amqp:not-found", "description": "no queue"}
    assert p[3].source == "/queues/missing"
    assert p[4].args["error"]["condition"] == "amqp:session:unattached-handle"
    assert (d.facts.closed_by, d.facts.close_reply_text) == ("client", "bye")


def test_a_bad_frame_header_loses_the_framing_and_resyncs_to_the_next_frame():
    good = session(frame(attach("s", 0, False)))
    bad = b"\x00\x00\x00\x09\x01\x00\x00\x00" + b"\xff" * 20  # doff 1
    _, ev = run(good + bad + frame(close()) + frame(close()))
    kinds = [e.kind for _, e in of(ev, Anomaly)]
    assert "malformed-frame" in kinds and "resync" in kinds
    assert [e.name for e in perfs(ev)][-2:] == ["close", "close"]


def test_a_malformed_performative_is_an_anomaly_and_the_next_frame_decodes():
    broken = frame(b"\x00\x53\x12\xc0\x40\x05\x41")  # attach list claiming 64 bytes
    _, ev = run(session(broken, frame(close())))
    ((_, a),) = of(ev, Anomaly)
    assert a.kind == "malformed-performative" and a.skipped == len(broken)
    assert perfs(ev)[-1].name == "close"


def test_an_unknown_descriptor_in_a_frame_is_an_anomaly():
    _, ev = run(frame(b"\x00\x53\x70\x45") + frame(close()))
    assert [e.kind for _, e in of(ev, Anomaly)] == ["unknown-performative"]


def test_a_huge_count_in_a_performative_is_refused_without_allocating():
    hostile = frame(b"\x00\x53\x10\xd0\x00\x00\x00\x08\xff\xff\xff\xff\x40\x40\x40\x40")
    _, ev = run(hostile)
    ((_, a),) = of(ev, Anomaly)
    assert a.kind == "malformed-performative" and "claims more items" in a.detail


def test_a_transfer_cut_by_the_end_of_the_capture_is_an_incomplete_delivery():
    c2s = session(frame(attach("s", 0, False)), frame(transfer(0, 0, b"t", more=True) + data(b"abc")))
    _, ev = run(c2s)
    ((_, dv),) = of(ev, Delivery)
    assert not dv.complete
    assert any(e.kind == "incomplete-content" for _, e in of(ev, Anomaly))


def test_a_tls_header_inside_the_stream_leaves_the_rest_undecoded():
    _, ev = run(b"AMQP\x02\x01\x00\x00" + b"\x16\x03\x01" + b"\x00" * 50)
    assert [e.kind for _, e in of(ev, Anomaly)] == ["encrypted"]
    assert perfs(ev) == []
