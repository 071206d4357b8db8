"""A 1.0 creation-time (signed ms) that the nanosecond msg_timestamp column cannot hold is null
there and reported as a value-out-of-range anomaly, the same rule as 0-9-1's timestamp property;
the compiled and pure-Python paths write the same tables."""

from __future__ import annotations

import pytest
from amqp10_wire import (
    AMQP_HEADER,
    Raw,
    attach,
    begin,
    close,
    data,
    frame,
    open_,
    properties,
    timestamp,
    transfer,
)
from fixtures import hostile as H

LIMIT_MS = 9_000_000_000_000  # the column's range: seconds below 9e9, in ms


def capture(created_ms: int, created: bytes | None = None) -> bytes:
    created = timestamp(created_ms) if created is None else created
    msg = properties(message_id="m-1", creation_time=created) + data(b"hello")
    client = [
        AMQP_HEADER,
        frame(open_("c")) + frame(begin()) + frame(attach("l", 0, False, tgt="/queues/q")),
        frame(transfer(0, 0, b"t0") + msg),
        frame(close()),
    ]
    server = [AMQP_HEADER, frame(open_("s")) + frame(begin(0)), frame(close())]
    return H.capture(client, server)


def dissect_both(tmp_path, blob):
    cap = tmp_path / "c.pcap"
    cap.write_bytes(blob)
    got = []
    for pure in (False, True):
        out = tmp_path / f"out-{pure}"
        H.no_internal_error(H.run_cli("dissect", cap, "-o", out, pure=pure))
        got.append(H.tables(out))
    assert got[0] == got[1]  # compiled and pure Python agree row for row
    return got[0]


def out_of_range(tabs):
    return [a["detail"] for a in tabs["anomalies"] if a["kind"] == "value-out-of-range"]


@pytest.mark.parametrize("ms", [LIMIT_MS, -LIMIT_MS, 2**63 - 1, -(2**63)])
def test_a_creation_time_past_the_column_is_null_with_an_anomaly(tmp_path, ms):
    tabs = dissect_both(tmp_path, capture(ms))
    (msg,) = tabs["messages"]
    assert msg["msg_timestamp"] is None and msg["message_id"] == "m-1"
    assert out_of_range(tabs) == [f"creation-time {ms} does not fit messages.msg_timestamp (stored null)"]


def test_a_creation_time_inside_the_column_is_kept_without_an_anomaly(tmp_path):
    ms = LIMIT_MS - 1
    tabs = dissect_both(tmp_path, capture(ms))
    assert tabs["messages"][0]["msg_timestamp"] is not None
    assert out_of_range(tabs) == []


def test_a_boolean_creation_time_is_no_timestamp(tmp_path):
    tabs = dissect_both(tmp_path, capture(0, created=Raw(b"\x41")))  # true: a boolean, not an integer
    (msg,) = tabs["messages"]
    assert msg["msg_timestamp"] is None and msg["message_id"] == "m-1"
    assert '"creation-time":true' in msg["properties"]
    assert out_of_range(tabs) == []
