"""The failing method a close or a 0-10 execution.exception names: its name, in every version
(run with the reference and the compiled row builders, conftest.py)."""

from __future__ import annotations

import pytest

from amqpcap.amqp.events import Method
from amqpcap.records import rows
from amqpcap.records.schema import COLUMNS

FAILING = COLUMNS["methods"].index("failing_method")


def failing_of(name, args, version):
    m = Method(
        packet=9,
        ts=1,
        offset=0,
        channel=1,
        class_id=3,
        method_id=1,
        name=name,
        args=args,
        synchronous=False,
        has_content=False,
        frame_size=40,
    )
    table = []
    rows.append_rows([(1, m)], "cap", 0, version, table, [])
    return table[0][FAILING]


@pytest.mark.parametrize(
    ("class_code", "command_code", "failing"),
    [(4, 1, "message.transfer"), (8, 1, "queue.declare"), (7, 1, "exchange.declare"), (99, 1, "99.1")],
)
def test_a_0_10_exception_names_the_failing_command_by_name(class_code, command_code, failing):
    args = {"error-code": 404, "command-id": 1, "class-code": class_code, "command-code": command_code}
    assert failing_of("execution.exception", args, "0-10") == failing


@pytest.mark.parametrize("version", ["0-8", "0-9", "0-9-1"])
def test_a_channel_close_names_the_failing_method_by_name(version):
    args = {"reply-code": 404, "reply-text": "NOT_FOUND", "class-id": 50, "method-id": 10}
    assert failing_of("channel.close", args, version) == "queue.declare"
