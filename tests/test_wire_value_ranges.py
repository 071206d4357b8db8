"""Unsigned 64-bit wire values that do not fit their signed 64-bit (or nanosecond timestamp)
column: the column is null, a value-out-of-range anomaly says which value, the rest of the
capture is decoded, and the compiled and pure-Python paths write the same tables."""

import json

import pytest
from fixtures import hostile as H

I64_MAX = 2**63 - 1


def dissect_both(tmp_path, blob):
    cap = tmp_path / "c.pcap"
    cap.write_bytes(blob)
    got = []
    for pure in (False, True):
        out = tmp_path / f"out-{pure}"
        r = H.run_cli("dissect", cap, "-o", out, pure=pure)
        H.no_internal_error(r)
        got.append(H.tables(out))
    assert got[0] == got[1]  # compiled and pure Python agree row for row
    return got[0]


def out_of_range(tabs):
    return [a["detail"] for a in tabs["anomalies"] if a["kind"] == "value-out-of-range"]


@pytest.mark.parametrize("version", ["0-8", "0-9", "0-9-1"])
@pytest.mark.parametrize("size", [2**63, 2**63 + 5, H.U64])
def test_a_body_size_past_int64_is_null_with_an_anomaly(tmp_path, version, size):
    tabs = dissect_both(tmp_path, H.capture(*H.conversation_09(version, body_size=size)))
    (msg,) = tabs["messages"]
    assert msg["body_size"] is None and msg["body_received"] == 2 and not msg["complete"]
    assert out_of_range(tabs) == [f"body size {size} does not fit messages.body_size (stored null)"]
    assert [m["method"] for m in tabs["methods"]] == ["connection.start", "basic.publish"]


def test_the_largest_body_size_that_fits_is_kept_without_an_anomaly(tmp_path):
    tabs = dissect_both(tmp_path, H.capture(*H.conversation_09(body_size=I64_MAX)))
    assert tabs["messages"][0]["body_size"] == I64_MAX
    assert out_of_range(tabs) == []


@pytest.mark.parametrize("tag", [2**63, H.U64])
def test_a_delivery_tag_past_int64_is_null_with_an_anomaly_and_kept_in_the_arguments(tmp_path, tag):
    methods = (("c2s", "basic.ack", {"delivery_tag": tag}), ("c2s", "basic.ack", {"delivery_tag": 7}))
    tabs = dissect_both(tmp_path, H.capture(*H.conversation_09(methods=methods)))
    acks = [m for m in tabs["methods"] if m["method"] == "basic.ack"]
    assert [a["delivery_tag"] for a in acks] == [None, 7]
    assert json.loads(acks[0]["arguments"])["delivery-tag"] == tag
    assert out_of_range(tabs) == [f"delivery-tag {tag} does not fit delivery_tag (stored null)"]


@pytest.mark.parametrize("ts", [9_000_000_000, 2**63, H.U64])
def test_a_timestamp_property_past_the_timestamp_column_is_null_with_an_anomaly(tmp_path, ts):
    tabs = dissect_both(tmp_path, H.capture(*H.conversation_09(timestamp=ts)))
    assert tabs["messages"][0]["msg_timestamp"] is None
    assert out_of_range(tabs) == [
        f"timestamp property {ts} does not fit messages.msg_timestamp (stored null)"
    ]


def test_a_0_10_content_length_past_int64_is_null_with_an_anomaly(tmp_path):
    tabs = dissect_both(tmp_path, H.capture(*H.conversation_010(content_length=H.U64, ttl=H.U64)))
    (msg,) = tabs["messages"]
    assert msg["body_size"] is None and msg["expiration"] == str(H.U64)  # ttl is text: it fits
    assert out_of_range(tabs) == [f"body size {H.U64} does not fit messages.body_size (stored null)"]


def test_a_0_10_negative_timestamp_is_null_with_an_anomaly(tmp_path):
    tabs = dissect_both(tmp_path, H.capture(*H.conversation_010(timestamp=-1)))
    assert tabs["messages"][0]["msg_timestamp"] is None
    assert out_of_range(tabs) == ["timestamp property -1 does not fit messages.msg_timestamp (stored null)"]
