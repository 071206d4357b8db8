"""The generated spec tables are up to date with tools/gen_spec.py and say what the XML says."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from amqpcap.amqp import spec

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEN = os.path.join(REPO, "tools", "gen_spec.py")
SPECS = os.path.join(REPO, "specs")  # vendored XML: these tests run on a clean clone
XML = {
    "0-8": "0-8/amqp0-8.stripped.xml",
    "0-9": "0-9/amqp0-9.stripped.xml",
    "0-9-1": "0-9-1-rabbit/amqp0-9-1.stripped.extended.xml",
}


def needs_specs(f):  # the XML is in the repository: nothing to skip
    return f


@needs_specs
def test_gen_spec_check_reports_the_generated_modules_up_to_date():
    r = subprocess.run([sys.executable, GEN, "--check", "--specs", SPECS], capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (0, "")


def _xml_method(version, cls, method):
    root = ET.parse(os.path.join(SPECS, XML[version])).getroot()
    c = next(c for c in root.iter("class") if c.get("name") == cls)
    m = next(m for m in c.iter("method") if m.get("name") == method)
    return int(c.get("index")), int(m.get("index")), [f.get("name") for f in m.iter("field")]


@needs_specs
def test_0_9_1_basic_get_empty_is_60_72_in_the_xml_and_the_tables():
    assert _xml_method("0-9-1", "basic", "get-empty")[:2] == (60, 72)
    s = spec.get("0-9-1").METHODS[(60, 72)]
    assert (s.name, s.synchronous, s.content, s.fields) == (
        "basic.get-empty",
        True,
        False,
        (("reserved-1", "shortstr"),),
    )
    assert spec.get("0-9-1").METHODS[(60, 70)].responses == ("basic.get-ok", "basic.get-empty")


@needs_specs
def test_0_8_basic_consume_has_no_arguments_table():
    _, _, xml_fields = _xml_method("0-8", "basic", "consume")
    assert xml_fields == ["ticket", "queue", "consumer tag", "no local", "no ack", "exclusive", "nowait"]
    assert spec.get("0-8").METHODS[(60, 20)].fields == (
        ("ticket", "short"),
        ("queue", "shortstr"),
        ("consumer-tag", "shortstr"),
        ("no-local", "bit"),
        ("no-ack", "bit"),
        ("exclusive", "bit"),
        ("nowait", "bit"),
    )
    # 0-9 calls its table "filter", 0-9-1 "arguments"
    assert spec.get("0-9").METHODS[(60, 20)].fields[-1] == ("filter", "table")
    assert spec.get("0-9-1").METHODS[(60, 20)].fields[-1] == ("arguments", "table")


@needs_specs
def test_0_9_message_transfer_field_list():
    cid, mid, xml_fields = _xml_method("0-9", "message", "transfer")
    expected = [
        "ticket",
        "destination",
        "redelivered",
        "immediate",
        "ttl",
        "priority",
        "timestamp",
        "delivery-mode",
        "expiration",
        "exchange",
        "routing-key",
        "message-id",
        "correlation-id",
        "reply-to",
        "content-type",
        "content-encoding",
        "user-id",
        "app-id",
        "transaction-id",
        "security-token",
        "application-headers",
        "body",
    ]
    assert (cid, mid, xml_fields) == (120, 10, expected)
    s = spec.get("0-9").METHODS[(120, 10)]
    assert [f for f, _ in s.fields] == expected
    assert dict(s.fields) == {
        "ticket": "short",
        "destination": "shortstr",
        "redelivered": "bit",
        "immediate": "bit",
        "ttl": "longlong",
        "priority": "octet",
        "timestamp": "timestamp",
        "delivery-mode": "octet",
        "expiration": "timestamp",
        "exchange": "shortstr",
        "routing-key": "shortstr",
        "message-id": "shortstr",
        "correlation-id": "shortstr",
        "reply-to": "shortstr",
        "content-type": "shortstr",
        "content-encoding": "shortstr",
        "user-id": "shortstr",
        "app-id": "shortstr",
        "transaction-id": "shortstr",
        "security-token": "longstr",
        "application-headers": "table",
        "body": "content",
    }
    assert spec.get("0-9").UNDEFINED_DOMAINS == ("content",)


def test_reply_code_404_is_not_found_and_soft_in_every_version():
    for v in ("0-8", "0-9", "0-9-1"):
        assert spec.get(v).REPLY_CODES[404] == ("not-found", "soft")
        assert spec.reply_code_info(v, 404) == ("not-found", "soft")
    assert spec.reply_code_info("0-9-1", 320) == ("connection-forced", "hard")
    assert spec.reply_code_info("0-9-1", 200) == ("reply-success", None)
    assert spec.reply_code_info("0-8", 406) == ("precondition-failed", "soft")  # 0-8 lacks it: 0-9-1's
    assert spec.reply_code_info("0-9-1", 999) is None


def test_0_8_connection_close_ids_and_frame_types_differ_from_0_9_1():
    v08, v091 = spec.get("0-8"), spec.get("0-9-1")
    assert (v08.METHODS[(10, 60)].name, v08.METHODS[(10, 61)].name) == (
        "connection.close",
        "connection.close-ok",
    )
    assert (v091.METHODS[(10, 50)].name, v091.METHODS[(10, 51)].name) == (
        "connection.close",
        "connection.close-ok",
    )
    assert v08.METHODS[(20, 11)].fields == ()
    assert set(v08.FRAME_TYPES) == {1, 2, 3, 4, 5, 6, 7, 8}
    assert set(v091.FRAME_TYPES) == {1, 2, 3, 8}
    assert v091.CONSTANTS["frame-end"] == 0xCE and v091.CONSTANTS["frame-min-size"] == 4096


def test_basic_properties_in_flag_order():
    assert [p for p, _ in spec.get("0-9-1").PROPERTIES[60]] == [
        "content-type",
        "content-encoding",
        "headers",
        "delivery-mode",
        "priority",
        "correlation-id",
        "reply-to",
        "expiration",
        "message-id",
        "timestamp",
        "type",
        "user-id",
        "app-id",
        "reserved",
    ]
    assert spec.get("0-8").PROPERTIES[60][-1] == ("cluster-id", "shortstr")


def test_unknown_version_is_a_value_error():
    with pytest.raises(ValueError, match="unknown AMQP version '1.0'"):
        spec.get("1.0")
