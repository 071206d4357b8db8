"""No run replaces or deletes a dataset it was not told to: OUT is checked again, atomically, when
the finished tables are renamed into place; runs racing with --force each end with one complete
dataset in place and exit 0; what killed runs left beside OUT is swept by the next run into it."""

import os
import subprocess
import sys

import pyarrow.dataset as ds
import pytest
from fixtures import hostile as H

from amqpcap.records import writer as W
from amqpcap.records.writer import DatasetWriter, OutputExists

CAP = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures", "rabbitmq091_pika_full.pcap"
)


def dataset(path):
    return {t: ds.dataset(os.path.join(path, t)).count_rows() for t in sorted(os.listdir(path))}


def test_an_out_made_by_another_run_meanwhile_is_not_replaced_without_force(tmp_path):
    out = tmp_path / "out"
    w = DatasetWriter(str(out), ["connections"])
    (out / "methods").mkdir(parents=True)  # another run's dataset, installed while this one ran
    (out / "methods" / "part-0.parquet").write_bytes(b"theirs")
    with pytest.raises(OutputExists, match="created by another run meanwhile"):
        w.close()
    w.abort()
    assert (out / "methods" / "part-0.parquet").read_bytes() == b"theirs"
    assert os.listdir(tmp_path) == ["out"]  # its own temporary directory is gone


def test_a_dissect_whose_out_appears_meanwhile_raises_output_exists_and_leaves_it(tmp_path, monkeypatch):
    out = tmp_path / "out"
    r = H.run_cli("dissect", CAP, "-o", out)
    assert r.returncode == 0
    before = dataset(out)
    monkeypatch.setattr(
        os.path, "exists", lambda p, real=os.path.exists: False if str(p) == str(out) else real(p)
    )
    from amqpcap import pipeline

    with pytest.raises(OutputExists):
        pipeline.dissect([CAP], str(out))
    assert dataset(out) == before and sorted(os.listdir(tmp_path)) == ["out"]


def test_a_force_run_whose_out_another_run_moves_away_meanwhile_still_installs_its_own(tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    os.makedirs(os.path.join(out, "connections"))
    w = DatasetWriter(out, ["connections"], force=True)
    real = os.rename
    moved = []

    def rename(src, dst):
        if src == out and not moved:  # another --force run takes OUT aside just before us
            moved.append(real(out, out + ".elsewhere"))
        return real(src, dst)

    monkeypatch.setattr(W.os, "rename", rename)
    w.close()
    assert moved and os.path.isfile(os.path.join(out, "connections", "part-00000.parquet"))


def test_racing_force_runs_all_exit_0_and_leave_one_complete_dataset(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "amqpcap.cli", "dissect", CAP, "-o", str(out), "--force"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _ in results), results
    assert all("no such file" not in err.lower() for _, err in results)
    assert dataset(out)["methods"] > 0 and set(dataset(out)) == {
        "anomalies",
        "connections",
        "messages",
        "methods",
    }
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_the_next_run_sweeps_what_killed_runs_left_beside_out_but_not_a_live_runs(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "out"
    for name in (
        f"out.tmp-{dead.pid}",
        f"out.old-{dead.pid}",
        f"out.tmp-{os.getpid()}x",
        f"out.tmp-{os.getppid()}",
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_bytes(b"x")
    (tmp_path / "other.tmp-1").mkdir()
    r = H.run_cli("dissect", CAP, "-o", out)
    assert r.returncode == 0, r.stderr
    left = sorted(os.listdir(tmp_path))
    assert left == sorted(["out", f"out.tmp-{os.getpid()}x", f"out.tmp-{os.getppid()}", "other.tmp-1"])


def test_live_segments_refuse_an_out_made_by_another_run_meanwhile(tmp_path, monkeypatch):
    from amqpcap import live

    out = tmp_path / "out"
    (out / "methods").mkdir(parents=True)
    monkeypatch.setattr(live.os.path, "exists", lambda p: False)  # it was not there at the check
    with pytest.raises(OutputExists):
        live.SegmentWriter(str(out), ["methods"])
    assert os.listdir(out) == ["methods"]
