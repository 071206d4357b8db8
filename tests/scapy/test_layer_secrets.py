"""The layers' show() and repr redact passwords as the tables do, unless keep_secrets."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.all import rdpcap

import amqpcap.scapy  # noqa: F401  (binds the layer)
from amqpcap.scapy import AMQP, keep_secrets

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def start_ok(capture: str, index: int):
    return rdpcap(str(CAPTURES / capture))[index][AMQP]


CASES = {
    # (frame, the password on the wire, the user the tables keep)
    "0-9-1 capture": (lambda: start_ok("rabbitmq091_pika_full.pcap", 7), b"s3cret-pw", "amqpcap"),
    "0-10 capture": (lambda: start_ok("qpid010_basic.pcap", 9), None, None),
    "0-9-1 secure-ok": (
        lambda: AMQP(method="connection.secure-ok", response=b"\0alice\0pw-0-9-1"),
        b"pw-0-9-1",
        "alice",
    ),
    "0-8 start-ok": (
        lambda: AMQP(
            version="0-8", method="connection.start-ok", mechanism="PLAIN", response=b"\0bob\0pw-08"
        ),
        b"pw-08",
        "bob",
    ),
    "0-10 start-ok": (
        lambda: AMQP(
            version="0-10", method="connection.start-ok", mechanism="PLAIN", response=b"\0carol\0pw-10"
        ),
        b"pw-10",
        "carol",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_show_and_repr_redact_the_password_unless_keep_secrets(case):
    make, password, user = CASES[case]
    pkt = make()
    wire = pkt.fields["response"]
    user = user or wire.split(b"\0")[1].decode()  # the capture's own (qpid: guest / guest)
    shown = repr(wire)  # b'\x00user\x00password': how the response shows unredacted
    assert wire in bytes(pkt)  # the bytes are the wire's
    for text in (pkt.show(dump=True), repr(pkt)):
        assert shown not in text and "<redacted>" in text and repr(user) in text
        assert password is None or password.decode() not in text
    with keep_secrets():
        assert shown in pkt.show(dump=True) and shown in repr(pkt)
    assert shown not in pkt.show(dump=True)  # the block's end restores redaction
    keep_secrets()
    try:
        assert shown in repr(pkt)
    finally:
        keep_secrets(False)
    assert shown not in repr(pkt)
