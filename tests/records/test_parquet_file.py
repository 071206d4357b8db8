"""writer.open_parquet: pyarrow.parquet's engine opened directly writes the file
pq.ParquetWriter writes, byte for byte, for every table of a real dissection."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixtures.compiled import CAPTURES

from amqpcap.pipeline import dissect
from amqpcap.records import writer
from amqpcap.records.schema import STORED_SCHEMAS


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("d")
    cut = tmp / "cut.pcap"  # ends inside a record: a truncated-file anomaly
    with open(CAPTURES[-1], "rb") as f:
        data = f.read()
    cut.write_bytes(data[: len(data) - 7])
    out = tmp / "out"
    dissect(CAPTURES + [str(cut)], str(out), frames=True)
    return {name: pq.read_table(out / name) for name in STORED_SCHEMAS}


@pytest.mark.parametrize("name", sorted(STORED_SCHEMAS))
def test_the_engine_writes_the_bytes_pq_parquetwriter_writes(tables, name, tmp_path):
    table = tables[name]
    assert table.num_rows  # every table has rows to write (else the check says little)
    files = {}
    for reference in (False, True):
        path = str(tmp_path / f"{reference}.parquet")
        w = writer.open_parquet(path, STORED_SCHEMAS[name], reference=reference)
        assert isinstance(w, pq.ParquetWriter) is reference
        for batch in table.to_batches(max_chunksize=max(1, table.num_rows // 3)):
            w.write_table(pa.Table.from_batches([batch]), batch.num_rows)
        w.close()
        with open(path, "rb") as f:
            files[reference] = f.read()
    assert files[False] == files[True]
    assert pq.read_table(tmp_path / "False.parquet").equals(table)


def test_an_unwritable_path_is_an_os_error_either_way(tmp_path):
    for reference in (False, True):
        with pytest.raises(OSError):
            writer.open_parquet(
                str(tmp_path / "no" / "x.parquet"), STORED_SCHEMAS["methods"], reference=reference
            )


def test_an_engine_that_refuses_the_options_falls_back_to_pq(monkeypatch, tmp_path):
    def refuses(*args, **kwargs):
        raise TypeError("unexpected keyword argument")

    monkeypatch.setattr(writer, "parquet_engine", lambda: refuses)
    w = writer.open_parquet(str(tmp_path / "x.parquet"), STORED_SCHEMAS["methods"])
    assert isinstance(w, pq.ParquetWriter)
    w.write_batch(pa.RecordBatch.from_pylist([], schema=STORED_SCHEMAS["methods"]))
    w.close()
    assert pq.read_table(tmp_path / "x.parquet").schema.equals(STORED_SCHEMAS["methods"])
