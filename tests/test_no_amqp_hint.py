"""The one line of a run that found no AMQP: it suggests --ports only for ports the run did not
already take as AMQP (the defaults and those given)."""

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
