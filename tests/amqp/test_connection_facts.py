"""Connection facts and the redaction policy: one place for every AMQP version."""

from __future__ import annotations

import os
import sys

import pytest
from fixtures import amqp09 as A

from amqpcap.amqp.codec_0_10 import Decoder010
from amqpcap.amqp.events import Method
from amqpcap.amqp.facts import REDACTED, ConnectionFacts, FactLearner
from amqpcap.records import rows as R
from amqpcap.records.schema import COLUMNS

sys.path.insert(0, os.path.dirname(__file__))
import codec010_builders as B  # noqa: E402

SECRET = b"s3cret-trace"


def _start_ok_0_9(mechanism, response):
    wire = A.method_frame(
        0, "connection.start-ok", client_properties={}, mechanism=mechanism, response=response, locale="en_US"
    )
    dec, events = A.decode(wire)
    return dec.facts, A.events_of(events, Method)[0].args["response"]


def _start_ok_0_10(mechanism, response):
    dec = Decoder010()
    wire = B.control(
        "connection.start-ok",
        {"client-properties": {}, "mechanism": mechanism, "response": response, "locale": "en_US"},
    )
    dec.feed(0, wire, 8, 1, 1)
    dec.finish(2, 2)
    [m] = [e for _, e in dec.pop_events() if isinstance(e, Method)]
    return dec.facts, m.args["response"]


@pytest.mark.parametrize("start_ok", [_start_ok_0_9, _start_ok_0_10], ids=["0-9-1", "0-10"])
@pytest.mark.parametrize(
    "mechanism, response, user, redacted",
    [
        ("PLAIN", b"\0guest\0" + SECRET, "guest", {"user": "guest", "password": REDACTED}),
        ("CRAM-MD5", b"carol " + SECRET, "carol", {"user": "carol", "password": REDACTED}),
        ("ANONYMOUS", SECRET, None, REDACTED),  # a trace string may name a person: redacted whole
        ("EXTERNAL", SECRET, None, REDACTED),
    ],
)
def test_every_version_redacts_a_response_alike(start_ok, mechanism, response, user, redacted):
    facts, got = start_ok(mechanism, response)
    assert got == redacted
    assert (facts.user, facts.mechanism) == (user, mechanism)
    assert SECRET.decode() not in repr(facts) + repr(got)


def _method(name, ts=1, **args):
    return Method(ts, ts, 0, 0, 10, 0, name, {k.replace("_", "-"): v for k, v in args.items()}, True, False)


@pytest.mark.parametrize("frame_arg", ["frame-max", "max-frame-size"])  # 0-9 / 0-10 spelling
def test_tune_ok_wins_over_tune_in_either_order(frame_arg):
    tune = Method(
        1,
        1,
        0,
        0,
        10,
        30,
        "connection.tune",
        {"channel-max": 0, frame_arg: 131072, "heartbeat": 60},
        True,
        False,
    )
    tune_ok = Method(
        2, 2, 0, 0, 10, 31, "connection.tune-ok", {"channel-max": 2047, frame_arg: 4096}, True, False
    )
    for order in ((tune, tune_ok), (tune_ok, tune)):
        learner = FactLearner()
        for m in order:
            learner.handlers[m.name](0, m)
        f = learner.snapshot()
        # tune-ok without a heartbeat asks for none (0-10); the proposal does not come back
        assert (f.channel_max, f.frame_max, f.heartbeat) == (2047, 4096, 0)


def test_the_first_close_says_who_closed():
    learner = FactLearner()
    close = learner.handlers["connection.close"]
    close(1, _method("connection.close", ts=5, reply_code=320, reply_text="bye"))
    close(0, _method("connection.close", ts=6, reply_code=200, reply_text="ok"))
    f = learner.snapshot()
    assert (f.close_ts, f.closed_by, f.close_reply_code, f.close_reply_text) == (5, "server", 320, "bye")


def test_connection_row_is_built_by_column_name():
    cols = COLUMNS["connections"]
    values = {c: i for i, c in enumerate(cols)}
    assert R.connection_row(values) == tuple(range(len(cols)))
    with pytest.raises(ValueError, match="missing columns \\['user'\\]"):
        R.connection_row({c: v for c, v in values.items() if c != "user"})
    with pytest.raises(ValueError, match="unknown columns \\['no_such_column'\\]"):
        R.connection_row({**values, "no_such_column": 1})


def test_connection_facts_fill_their_columns():
    f = ConnectionFacts(
        client_header=b"AMQP\x00\x00\x09\x01",
        version="0-9-1",
        version_evidence="header+start",
        server_properties={"product": "RabbitMQ", "version": "3.13.0"},
        client_properties={"product": "pika", "connection_name": "c1"},
        user=b"guest",
        close_reply_text=b"bye",
    )
    row = R.connection_facts(f)
    assert set(row) < set(COLUMNS["connections"])
    assert (
        row["client_header"],
        row["server_header"],
        row["server_product"],
        row["server_product_version"],
        row["client_product"],
        row["connection_name"],
        row["user"],
        row["close_reply_text"],
    ) == ("00000901", None, "RabbitMQ", "3.13.0", "pika", "c1", "guest", "bye")
