"""The schema module is the single source of truth: docs and writers follow it."""

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from fixtures.compiled import rows_of

from amqpcap.records import rows
from amqpcap.records.schema import COLUMNS, SCHEMAS

REPO = Path(__file__).resolve().parents[2]


def test_docs_schema_md_is_generated_from_the_schema_module():
    r = subprocess.run([sys.executable, str(REPO / "tools" / "gen_schema_doc.py"), "--check"])
    assert r.returncode == 0, "docs/schema.md is stale: run python tools/gen_schema_doc.py"


def test_every_column_has_a_description():
    for name, schema in SCHEMAS.items():
        for f in schema:
            assert f.metadata and f.metadata[b"doc"].strip(), f"{name}.{f.name} undocumented"


def test_every_table_shares_the_keys_needed_to_find_a_packet():
    for name in ("methods", "messages", "anomalies", "frames"):
        assert COLUMNS[name][:6] == ["capture", "tcp_stream", "frame_number", "ts", "direction", "channel"]
    assert SCHEMAS["methods"].field("ts").type == pa.timestamp("ns", tz="UTC")


def test_each_declared_type_is_named_as_pyarrow_names_its_arrow_type():
    """A column's Type carries pyarrow's name of the type (docs/schema.md prints it) and builds
    that type; every type of every table is one of them."""
    from amqpcap.records.schema import TABLES, TYPES

    used = {str(t) for cols in TABLES.values() for _, t, _ in cols}
    for cols in TABLES.values():
        for _, t, _ in cols:
            assert str(t.arrow()) == t.name, t
    assert {t.name for t in TYPES} <= used and len(used - {t.name for t in TYPES}) == 1  # + id_ranges
    for name, cols in TABLES.items():
        assert [f.type for f in SCHEMAS[name]] == [t.arrow() for _, t, _ in cols], name


def test_the_tables_and_their_column_buffers_are_declared_without_pyarrow():
    """pyarrow is imported to write Parquet (a dataset opened, a batch taken), not to declare the
    tables: ``show`` and a dissect of bad input never import it.  The schema, the row builders
    and the table buffers import none of it."""
    code = (
        "import sys\n"
        "from amqpcap.records import schema, rows, writer\n"
        "from amqpcap import compiled\n"
        "if compiled.select('fastwriter'): writer.compiled_table_buffer()('methods', '/nonexistent')\n"
        "print('pyarrow' in sys.modules, sorted(schema.TABLES) == sorted(schema.COLUMNS))\n"
        "schema.SCHEMAS\n"
        "print('pyarrow' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True", "True"], r.stdout


def test_row_builders_produce_one_value_per_column():
    from amqpcap.amqp.events import Anomaly, Content, Frame, Method

    m = Method(
        7,
        1_700_000_000_000_000_000,
        100,
        1,
        60,
        40,
        "basic.publish",
        {"exchange": "x", "routing-key": "rk", "mandatory": True},
        False,
        True,
        20,
    )
    c = Content(
        9,
        1_700_000_000_000_000_001,
        100,
        1,
        m,
        60,
        {"content-type": "text/plain", "timestamp": 5},
        3,
        3,
        1,
        "00" * 32,
        b"abc",
        True,
        7,
    )
    method_row, message_row = rows_of(rows.append_rows)  # the builders in use
    for table, row in (
        ("methods", method_row("c", 0, 0, m, "0-9-1")),
        ("messages", message_row("c", 0, 0, c, "0-9-1")),
        ("anomalies", rows.anomaly_row("c", 0, 1, Anomaly(1, 2, 3, "gap", "x"))),
        ("frames", rows.frame_row("c", 0, 0, Frame(1, 2, 3, 0, 8, "heartbeat", 0, 8))),
    ):
        assert len(row) == len(COLUMNS[table]), table
        # Arrow accepts the row as typed values.
        pa.RecordBatch.from_arrays(
            [pa.array([v], type=f.type) for v, f in zip(row, SCHEMAS[table])], schema=SCHEMAS[table]
        )
    row = message_row("c", 0, 0, c, "0-9-1")
    named = dict(zip(COLUMNS["messages"], row))
    assert named["exchange"] == "x" and named["routing_key"] == "rk"
    assert named["msg_timestamp"] == 5_000_000_000 and named["content_type"] == "text/plain"


def test_typed_argument_columns_hold_what_the_arguments_json_says(tmp_path):
    """Every shipped capture: the typed argument columns (records/rows.py ARG_COLUMNS) agree
    with the arguments JSON, row by row, so the analysis never has to parse the JSON."""
    import json

    import pyarrow.dataset as ds

    from amqpcap.pipeline import dissect

    caps = sorted((REPO / "captures").glob("*.pcap"))
    dissect([str(c) for c in caps], str(tmp_path / "out"))
    t = ds.dataset(str(tmp_path / "out" / "methods"), format="parquet").to_table()
    seen = {c: 0 for c in rows.ARG_COLUMNS}
    for r in t.select(["method", "version", "arguments", *rows.ARG_COLUMNS]).to_pylist():
        if r["version"] == "1.0":  # its typed columns come from records/rows_1_0.py (tests/amqp10)
            continue
        a = json.loads(r["arguments"])
        want = {
            "no_wait": a.get("no-wait", a.get("nowait")),
            "active": a.get("active"),
            "qos_global": a.get("global"),
            "reason": a.get("reason"),
            "accept_mode": a.get("accept-mode"),
            "id_ranges": [{"lower": lo, "upper": hi} for lo, hi in a.get("commands", a.get("transfers", []))]
            if "commands" in a or "transfers" in a
            else None,
            "code": a.get("code"),
            "text": a.get("text"),
        }
        assert {c: r[c] for c in rows.ARG_COLUMNS} == want, r["method"]
        for c in rows.ARG_COLUMNS:
            seen[c] += r[c] is not None
    # the shipped captures exercise each column (reason: connection.blocked of pika_blocked)
    assert all(seen.values()), seen


def test_text_columns_are_dictionary_encoded_except_those_unique_per_row(tmp_path):
    """The written files follow schema.dictionary_columns: names, versions and keys as
    dictionaries, JSON / ids / hashes / bodies plain (a dictionary there overflows and is
    dropped), and the unique-per-row names are all real text columns."""
    import pyarrow.parquet as pq

    from amqpcap.pipeline import dissect
    from amqpcap.records.schema import UNIQUE_PER_ROW, dictionary_columns

    text = {
        f.name
        for s in SCHEMAS.values()
        for f in s
        if pa.types.is_string(f.type) or pa.types.is_binary(f.type)
    }
    assert UNIQUE_PER_ROW <= text
    dissect([str(REPO / "captures" / "rabbitmq091_pika_throughput.pcap")], str(tmp_path / "o"))
    for name in ("methods", "messages", "connections"):
        meta = pq.ParquetFile(tmp_path / "o" / name / "part-00000.parquet").metadata
        wanted = set(dictionary_columns(SCHEMAS[name]))
        assert wanted and not wanted & UNIQUE_PER_ROW
        for i in range(meta.num_columns):
            chunk = meta.row_group(0).column(i)
            col, encodings = chunk.path_in_schema.split(".")[0], set(chunk.encodings)
            if col in wanted:
                assert "RLE_DICTIONARY" in encodings, (name, col, encodings)
            else:
                assert not {"RLE_DICTIONARY", "PLAIN_DICTIONARY"} & encodings, (name, col, encodings)
