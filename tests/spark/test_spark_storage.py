"""Captures and datasets on S3: an S3 API server on loopback (moto's standalone server), the
endpoint and credentials from the standard AWS environment, read and written by the driver and
the tasks alike."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures import pcapgen
from test_spark_job import CAPTURES, _merged_packets

from amqpcap.pipeline import dissect
from amqpcap.spark import run, storage

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "amqpcap-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on loopback, its bucket, and the AWS environment pointing at it."""
    pytest.importorskip("moto", reason="the test extra installs moto[server]")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        import boto3

        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket=BUCKET)
        storage.forget()
        yield f"s3://{BUCKET}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        storage.forget()


def _upload(local: str, uri: str) -> None:
    storage.write_bytes(storage.locate(uri), Path(local).read_bytes())


def _download(uri: str, local: Path) -> str:
    from pyarrow import fs

    loc = storage.locate(uri)
    fs.copy_files(
        loc.path, str(local), source_filesystem=loc.fs(), destination_filesystem=fs.LocalFileSystem()
    )
    return str(local)


def _keys(uri: str) -> list:
    loc = storage.locate(uri)
    try:
        return [f.path for f in storage.listing(loc)]
    except storage.StorageError:
        return []


def test_captures_on_s3_give_dissects_rows_in_an_s3_dataset_with_a_split_capture(spark, s3, tmp_path):
    merged = tmp_path / "merged.pcap"
    merged.write_bytes(pcapgen.pcap_bytes(_merged_packets()))
    names = ["rabbitmq091_pika_full.pcap", "rabbitmq08_rejected.pcap"]
    for n in names:
        _upload(str(ROOT / "captures" / n), f"{s3}/in/{n}")
    _upload(str(merged), f"{s3}/in/big/merged.pcap")
    want = str(tmp_path / "want")
    dissect([str(ROOT / "captures" / n) for n in names] + [str(merged)], want, frames=True)
    # the merged capture is larger than a task's share: indexed by range, dissected by bucket
    s = run(spark, [f"{s3}/in/"], f"{s3}/out", frames=True, split_size=merged.stat().st_size // 3 + 1)
    assert s.split[f"{s3}/in/big/merged.pcap"] >= 3
    assert s.captures == 3 and not s.errors
    assert f"{BUCKET}/out/_SUCCESS" in _keys(f"{s3}/out")
    got = _download(f"{s3}/out", tmp_path / "got")
    # the capture column names the S3 objects; everything else is dissect's
    import pyarrow.dataset as ds

    caps = set(
        ds.dataset(os.path.join(got, "connections")).to_table(columns=["capture"]).column(0).to_pylist()
    )
    assert caps == {f"{s3}/in/{n}" for n in names} | {f"{s3}/in/big/merged.pcap"}
    _assert_same_but_capture(got, want)
    assert not [k for k in _keys(f"{s3}") if ".tmp-spark-" in k]


TABLES4 = ["connections", "methods", "messages", "anomalies"]


def _assert_same_but_capture(got: str, want: str, tables=(*TABLES4, "frames")) -> None:
    import pyarrow as pa
    import pyarrow.dataset as ds

    for table in tables:
        g = ds.dataset(os.path.join(got, table)).to_table()
        w = ds.dataset(os.path.join(want, table)).to_table()
        assert g.schema.equals(w.schema), table
        i = g.schema.get_field_index("capture")
        names = [os.path.basename(c) for c in g.column(i).to_pylist()]
        wnames = [os.path.basename(c) for c in w.column(i).to_pylist()]
        g = g.set_column(i, "capture", pa.array(names, pa.string()))
        w = w.set_column(i, "capture", pa.array(wnames, pa.string()))
        keys = [(c, "ascending") for c in g.column_names if not pa.types.is_nested(g.schema.field(c).type)]
        assert g.sort_by(keys).equals(w.sort_by(keys)), table


def test_a_failed_job_leaves_nothing_on_s3_that_looks_like_a_dataset(spark, s3):
    _upload(str(ROOT / "captures" / "rabbitmq091_pyamqp_basic.pcap"), f"{s3}/in2/a.pcap")
    with pytest.raises(Exception, match="TypeError|ValueError"):
        run(spark, [f"{s3}/in2/a.pcap"], f"{s3}/out2", body_bytes="not a number")
    assert _keys(f"{s3}/out2") == []
    assert not [k for k in _keys(f"{s3}") if ".tmp-spark-" in k]


def test_a_glob_over_s3_objects_reads_each_match(spark, s3, tmp_path):
    for c in CAPTURES[:3]:
        _upload(c, f"{s3}/in3/{os.path.basename(c)}")
    _upload(CAPTURES[3], f"{s3}/in3/other.txt")
    s = run(spark, [f"{s3}/in3/*.pcap"], f"{s3}/out3")
    assert s.captures == 3 and not s.errors
    want = str(tmp_path / "want")
    dissect(CAPTURES[:3], want)
    got = _download(f"{s3}/out3", tmp_path / "got")
    _assert_same_but_capture(got, want, TABLES4)
