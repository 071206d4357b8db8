"""Credentials: the user is kept, the password never reaches an event unless keep_secrets."""

from __future__ import annotations

import pytest
from fixtures import amqp09 as A

from amqpcap.amqp.decoder import Decoder09
from amqpcap.amqp.events import Method
from amqpcap.amqp.facts import REDACTED, split_credentials

PASSWORD = "s3cret"


def _start_ok(mechanism, response, version="0-9-1"):
    return A.method_frame(
        0,
        "connection.start-ok",
        version,
        client_properties={"product": "test"},
        mechanism=mechanism,
        response=response,
        locale="en_US",
    )


PLAIN = b"\0guest\0" + PASSWORD.encode()
AMQPLAIN = A.encode_table({"LOGIN": "guest", "PASSWORD": PASSWORD})[4:]  # a table without its size


def _leaks(dec, events) -> bool:
    text = repr(events) + repr(dec.facts)
    return PASSWORD in text or repr(PASSWORD.encode())[2:-1] in text


@pytest.mark.parametrize("version", ["0-8", "0-9", "0-9-1"])
@pytest.mark.parametrize("mechanism, response", [("PLAIN", PLAIN), ("AMQPLAIN", AMQPLAIN)])
def test_start_ok_password_is_redacted_and_user_kept(version, mechanism, response):
    dec, events = A.decode(_start_ok(mechanism, response, version), version)
    [m] = A.events_of(events, Method)
    assert m.args["response"] == {"user": "guest", "password": REDACTED}
    assert (m.args["mechanism"], dec.facts.user, dec.facts.mechanism) == (mechanism, "guest", mechanism)
    assert not _leaks(dec, events)


@pytest.mark.parametrize("mechanism, response", [("PLAIN", PLAIN), ("AMQPLAIN", AMQPLAIN)])
def test_keep_secrets_keeps_the_raw_response(mechanism, response):
    dec, events = A.decode(_start_ok(mechanism, response), keep_secrets=True)
    [m] = A.events_of(events, Method)
    assert m.args["response"] == response
    assert dec.facts.user == "guest"
    assert _leaks(dec, events)


def test_plain_with_an_authorisation_identity_takes_the_authentication_identity():
    dec, events = A.decode(_start_ok("PLAIN", b"admin\0guest\0" + PASSWORD.encode()))
    assert dec.facts.user == "guest"
    assert not _leaks(dec, events)


@pytest.mark.parametrize(
    "mechanism, response",
    [
        ("EXTERNAL", PASSWORD.encode()),  # unknown mechanism: whole response is secret
        ("PLAIN", b"guest" + PASSWORD.encode()),  # PLAIN without the NULs
        ("AMQPLAIN", b"\x05LOGINS\x00\x00"),  # AMQPLAIN that does not decode
        ("PLAIN", PASSWORD),  # printable response decoded as text
    ],
)
def test_responses_that_cannot_be_split_are_redacted_whole(mechanism, response):
    dec, events = A.decode(_start_ok(mechanism, response))
    [m] = A.events_of(events, Method)
    assert m.args["response"] == REDACTED
    assert dec.facts.user is None
    assert not _leaks(dec, events)


def test_secure_ok_response_is_redacted_using_the_start_ok_mechanism():
    wire = _start_ok("PLAIN", b"") + A.method_frame(0, "connection.secure-ok", response=PLAIN)
    dec, events = A.decode(wire)
    ms = A.events_of(events, Method)
    assert [m.args["response"] for m in ms] == [REDACTED, {"user": "guest", "password": REDACTED}]
    assert dec.facts.user == "guest"
    assert not _leaks(dec, events)


def test_update_secret_token_is_redacted():
    wire = _start_ok("PLAIN", PLAIN) + A.method_frame(
        0, "connection.update-secret", new_secret="eyJ" + PASSWORD + ".token", reason="refresh"
    )
    dec, events = A.decode(wire)
    m = A.events_of(events, Method)[-1]
    assert (m.name, m.args) == ("connection.update-secret", {"new-secret": REDACTED, "reason": "refresh"})
    assert dec.facts.user == "guest"
    assert not _leaks(dec, events)


def test_secrets_split_across_packets_are_still_redacted():
    wire = _start_ok("PLAIN", PLAIN)
    dec = Decoder09("0-9-1")
    for i in range(len(wire)):
        dec.feed(0, wire[i : i + 1], i, i + 1, i)
    events = [e for _, e in dec.pop_events()]
    assert not _leaks(dec, events)
    assert dec.facts.user == "guest"


@pytest.mark.parametrize(
    "mechanism, response, expected",
    [
        ("PLAIN", b"\0u\0p", ("u", "p")),
        (None, b"\0u\0p", ("u", "p")),
        ("AMQPLAIN", AMQPLAIN, ("guest", PASSWORD)),
        ("AMQPLAIN", "not a table", (None, None)),
        ("EXTERNAL", b"\0u\0p", (None, None)),
        ("PLAIN", None, (None, None)),
    ],
)
def test_split_credentials(mechanism, response, expected):
    assert split_credentials(mechanism, response) == expected
