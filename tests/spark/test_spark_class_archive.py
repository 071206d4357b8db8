"""Local sessions map a class archive the first one recorded (the JVM's start, about half of the
fixed start of a run)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SESSION = """
from amqpcap.spark import session
s = session.build("local[1]", app="archive", quiet=True)
print(s.sparkContext.getConf().get("spark.driver.extraJavaOptions"))
s.stop()
"""


def _start(tmp_path) -> str:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    p = subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert len(lines) == 1, lines  # the JVM writes nothing on stdout, the archive's warnings included
    return lines[0]


def test_the_first_local_session_records_the_class_archive_and_the_next_maps_it(spark, tmp_path):
    where = tmp_path / "amqpcap-spark"
    first = _start(tmp_path)
    archives = sorted(p.name for p in where.glob("classes-*"))
    assert "-XX:ArchiveClassesAtExit=" in first
    assert len(archives) == 1 and archives[0].endswith(".jsa"), archives  # the recording renamed
    assert (where / archives[0]).stat().st_size > 1 << 20
    second = _start(tmp_path)
    assert f"-XX:SharedArchiveFile={where / archives[0]}" in second
    assert "ArchiveClassesAtExit" not in second


def test_a_recording_left_by_a_process_that_is_gone_is_removed_and_recorded_anew(
    spark, tmp_path, monkeypatch
):
    from amqpcap.spark import session

    pytest.importorskip("pyspark")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(session.tempfile, "tempdir", None)
    where = tmp_path / "amqpcap-spark"
    where.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    torn = where / f"classes-0123456789abcdef.jsa.tmp-{dead.stdout.strip()}"
    torn.write_bytes(b"torn")
    flag = session.class_archive()
    assert not torn.exists()
    assert flag.startswith("-XX:ArchiveClassesAtExit=") and flag.endswith(f".tmp-{os.getpid()}")
