"""Which column an argument fills (rows.py's plans, used by both row builders): the 0-10
destination as a subscription's consumer tag or as an exchange, and a message row's exchange,
routing key and redelivered from its content and its method."""

from __future__ import annotations

import pytest
from fixtures.compiled import built_or_skip, rows_of

from amqpcap.amqp import spec
from amqpcap.amqp.events import Content, Method
from amqpcap.records import rows

COLUMNS = ("exchange", "routing_key", "consumer_tag", "redelivered", "delivery_tag")


@pytest.fixture(params=["reference", "compiled"])
def build(request):
    """(method_row, message_row) of the reference, or of the compiled builders."""
    if request.param == "reference":
        return rows.method_row_reference, rows.message_row_reference
    fastrows = built_or_skip("fastrows")
    return rows_of(fastrows.append_rows)


def _method(name, args):
    return Method(1, 2, 3, 1, 0, 0, name, args, False, False, 9)


def _content(m, props=None, **kw):
    return Content(4, 5, 6, 1, m, 60, props or {}, 1, 1, 1, "h", b"x", True, 4, **kw)


def _cols(table, row):
    names = rows.COLUMNS[table]
    return {c: row[names.index(c)] for c in COLUMNS if c in names}


@pytest.mark.parametrize("name", sorted(spec.SUBSCRIPTION_COMMANDS))
def test_a_0_10_subscription_command_names_its_consumer_tag_by_its_destination(build, name):
    row = build[0]("c", 1, 0, _method(name, {"destination": "sub-1"}), "0-10")
    assert _cols("methods", row)["consumer_tag"] == "sub-1" and _cols("methods", row)["exchange"] is None


@pytest.mark.parametrize("direction, consumer_tag, exchange", [(1, "sub-1", None), (0, None, "sub-1")])
def test_a_0_10_transfer_from_the_broker_names_a_subscription_and_to_it_an_exchange(
    build, direction, consumer_tag, exchange
):
    row = _cols(
        "methods", build[0]("c", 1, direction, _method("message.transfer", {"destination": "sub-1"}), "0-10")
    )
    assert (row["consumer_tag"], row["exchange"]) == (consumer_tag, exchange)


def test_an_exchange_argument_wins_over_a_destination(build):
    m = _method("message.transfer", {"destination": "d", "exchange": "x", "routing-key": "r"})
    row = _cols("methods", build[0]("c", 1, 1, m, "0-9"))
    assert (row["exchange"], row["routing_key"], row["consumer_tag"]) == ("x", "r", None)


def test_a_message_from_a_0_10_broker_takes_its_consumer_tag_from_the_transfer(build):
    m = _method("message.transfer", {"destination": "sub-1"})
    row = _cols("messages", build[1]("c", 1, 1, _content(m, exchange="amq.direct", routing_key="q"), "0-10"))
    assert (row["consumer_tag"], row["exchange"], row["routing_key"]) == ("sub-1", "amq.direct", "q")
    row = _cols("messages", build[1]("c", 1, 0, _content(m), "0-10"))
    assert (row["consumer_tag"], row["exchange"]) == (None, "sub-1")


def test_a_message_row_takes_the_content_s_own_exchange_before_its_method_s(build):
    m = _method(
        "basic.deliver", {"consumer-tag": "ct", "delivery-tag": 7, "exchange": "e", "routing-key": "r"}
    )
    row = _cols("messages", build[1]("c", 1, 1, _content(m, exchange="own", routing_key="own-rk"), "0-9-1"))
    assert row == {
        "exchange": "own",
        "routing_key": "own-rk",
        "consumer_tag": "ct",
        "redelivered": None,
        "delivery_tag": 7,
    }


@pytest.mark.parametrize(
    "args, props, redelivered",
    [
        ({"redelivered": True}, {"redelivered": False}, True),
        ({}, {"redelivered": True}, True),
        ({}, {}, None),
    ],
)
def test_a_redelivered_property_stands_in_for_a_missing_redelivered_argument(build, args, props, redelivered):
    m = _method("basic.deliver", {"consumer-tag": "ct", **args})
    assert _cols("messages", build[1]("c", 1, 1, _content(m, props), "0-9-1"))["redelivered"] is redelivered
