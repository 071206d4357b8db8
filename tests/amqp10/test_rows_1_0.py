"""AMQP 1.0 rows (records/rows_1_0.py): their JSON columns are written by the connections row's
encoder (rows.connection_json: the compiled builder's when it is built), which must give the
text of the reference encoder for every 1.0 row of every recording."""

from __future__ import annotations

import glob
import os

import pyarrow.parquet as pq
import pytest
from fixtures.compiled import ROOT, built_or_skip

from amqpcap.pipeline import dissect
from amqpcap.records import rows, rows_1_0

CAPTURES_10 = sorted(glob.glob(os.path.join(ROOT, "captures", "rabbitmq10_*.pcap")))


def test_there_are_1_0_recordings():
    assert len(CAPTURES_10) >= 10


@pytest.mark.parametrize("capture", CAPTURES_10, ids=os.path.basename)
def test_1_0_rows_are_the_same_with_the_compiled_json_encoder(capture, tmp_path, monkeypatch):
    fastrows = built_or_skip("fastrows")
    built = {"methods": [], "messages": []}

    def both(table, build):
        def rows_of(*args):
            texts = []
            for encode in (rows.to_json, fastrows.json_text):
                monkeypatch.setattr(rows, "connection_json", encode)
                texts.append(repr(build(*args)))
            assert texts[0] == texts[1]
            built[table].append(texts[0])
            return build(*args)

        return rows_of

    monkeypatch.setattr(rows_1_0, "append_rows", rows_1_0.append_rows_reference)  # (its builders)
    monkeypatch.setattr(rows_1_0, "method_row", both("methods", rows_1_0.method_row))
    monkeypatch.setattr(rows_1_0, "message_row", both("messages", rows_1_0.message_row))
    dissect([capture], str(tmp_path / "out"), frames=True)
    for table, written in built.items():  # every 1.0 row written went through the comparison
        versions = pq.read_table(tmp_path / "out" / table, columns=["version"]).column("version")
        assert len(written) == versions.to_pylist().count("1.0")
    assert built["methods"]
    assert any('"$b64"' in r for r in built["methods"])  # (delivery tags: bytes)


ODD_VALUES = [
    {1: 2, 2.5: None, False: "f", None: 0, "[1, 2]": [1, 2]},  # map keys the type system allows
    [float("nan"), float("inf"), -0.0, 2**64 - 1, -(2**63)],
    {"$decimal": "-Infinity", "char": "\ufffd", "text": "é\n\x00"},
    {"$descriptor": "x:y", "value": [b"\xff\x00", bytearray(b"ab"), None]},
]


@pytest.mark.parametrize("value", ODD_VALUES, ids=range(len(ODD_VALUES)))
def test_the_compiled_json_encoder_writes_decoded_1_0_values_as_the_reference(value):
    fastrows = built_or_skip("fastrows")
    assert fastrows.json_text(value) == rows.to_json(value)
