"""The one lines of runs that find nothing to decode: --ports suggested only for ports the run did
not already take as AMQP; packets without a link layer named so, not as link type -1."""

from amqpcap.cli import no_amqp_message
from amqpcap.pipeline import DEFAULT_PORTS


def test_ports_already_taken_as_amqp_are_not_suggested_again():
    line = no_amqp_message(1, {5672: 1}, DEFAULT_PORTS | {5673})
    assert "try --ports" not in line
    assert line == (
        "no AMQP conversations found; 1 TCP conversation(s) seen (server ports 5672); "
        "nothing there decoded as AMQP (a cut protocol header? another protocol?)"
    )


def test_only_the_ports_not_taken_are_suggested():
    line = no_amqp_message(3, {5672: 2, 8080: 1}, DEFAULT_PORTS)
    assert line.endswith("(server ports 5672, 8080); try --ports 8080 if AMQP runs there")


def test_packets_without_a_link_layer_are_named_so_not_as_link_type_minus_1():
    import pytest
    from scapy.packet import Raw

    import amqpcap
    from amqpcap.capture.reader import CaptureError

    odd = Raw(b"\x00" * 20)
    odd.time = 1_700_000_001.0
    with pytest.raises(CaptureError) as e:
        amqpcap.dissect_packets([odd])
    assert "-1" not in str(e.value) and "unknown" not in str(e.value)
    assert str(e.value) == (
        "packets: unsupported link type: none (a packet without a link layer, e.g. scapy's Raw)"
    )
