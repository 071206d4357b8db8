"""Local sessions map a class archive the first one recorded (the JVM's start, about half of the
fixed start of a run)."""

from __future__ import annotations

import os
import shutil
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


STAGE_CLASSES = """
import re, shutil, subprocess
from amqpcap.spark import session
s = session.build("local[1]", app="archive", quiet=True)
pid = str(s._jvm.java.lang.ProcessHandle.current().pid())

def loaded():  # classes loaded from the archive, and from Spark's jars
    jcmd = [shutil.which("jcmd"), pid, "PerfCounter.print"]
    out = subprocess.run(jcmd, capture_output=True, text=True).stdout
    keys = ("sharedLoadedClasses", "loadedClasses")
    return [int(re.search(rf"^java.cls.{k}=(\\d+)", out, re.M).group(1)) for k in keys]

before = loaded()
session.warm(s)
after = loaded()
print(after[0] - before[0], after[1] - before[1])
s.stop()
"""


def test_the_archive_holds_the_classes_of_a_stage_though_the_recording_session_ran_none(spark, tmp_path):
    """The recording run may end before any stage of its own (a small input is done on the driver
    while its session starts): its session runs one before it is handed over, so a later
    session's first stage loads most of its classes from the archive, not from Spark's jars."""
    if shutil.which("jcmd") is None:  # (CI: scripts/test.sh installs the JDK, so it is there)
        (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)("needs the JDK's jcmd")
    assert "-XX:ArchiveClassesAtExit=" in _start(tmp_path)  # a session built and stopped, no stage
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    p = subprocess.run(
        [sys.executable, "-c", STAGE_CLASSES], env=env, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr[-2000:]
    shared, from_jars = map(int, p.stdout.split())
    assert shared > 1000 and from_jars < shared, (shared, from_jars)


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


ENDED_PIDS = """
import os, sys
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print(pid)
"""


def _aged(path, days: float, now: float, data: bytes = b"x") -> None:
    path.write_bytes(data)
    os.utime(path, (now - days * 86400, now - days * 86400))


def test_prune_keeps_the_current_archive_and_the_last_used_others_and_drops_stale_logs(tmp_path):
    from amqpcap.spark import session

    now = 1_800_000_000.0
    current = "classes-aaaaaaaaaaaaaaaa.jsa"
    _aged(tmp_path / current, 30, now)  # old, but this run's: kept
    others = {f"classes-{k * 16}.jsa": d for k, d in zip("bcdef", (0.5, 1, 2, 3, 8))}
    for name, days in others.items():
        _aged(tmp_path / name, days, now)
    _aged(tmp_path / "classes-1111111111111111.jsa.tmp-1", 0, now)  # a recording: not ours to judge
    ended = subprocess.run(  # pids of processes that ran and ended
        [sys.executable, "-c", ENDED_PIDS, str(session.LOGS_KEPT + 4)], capture_output=True, text=True
    )
    dead_pid, *pids = [int(x) for x in ended.stdout.split()]
    _aged(tmp_path / f"spark-{os.getpid()}.log", 5, now)  # a live run's log, however old
    _aged(tmp_path / f"spark-{dead_pid}.log", 2, now)  # an ended run's, older than LOG_DAYS
    fresh = [tmp_path / f"spark-{pid}.log" for pid in pids]  # ended runs', newest first
    for i, p in enumerate(fresh):
        _aged(p, 0.01 * (i + 1), now)
    _aged(tmp_path / "notes.log", 9, now)
    _aged(tmp_path / f"{dead_pid}.log", 9, now)  # named by a pid, but not a Spark run's log

    gone = set(session.prune(str(tmp_path), current, now=now))

    left = {p.name for p in tmp_path.iterdir()}
    assert current in left
    # the two others used last stay; the rest (beyond ARCHIVES_KEPT, or unused for 8 days) go
    assert {n for n in others if n in left} == {
        "classes-bbbbbbbbbbbbbbbb.jsa",
        "classes-cccccccccccccccc.jsa",
    }
    assert "classes-1111111111111111.jsa.tmp-1" in left
    assert f"spark-{os.getpid()}.log" in left and f"spark-{dead_pid}.log" not in left
    assert {p.name for p in fresh if p.name in left} == {p.name for p in fresh[: session.LOGS_KEPT]}
    assert "notes.log" in left and f"{dead_pid}.log" in left
    assert gone and gone.isdisjoint(left)


def test_a_session_touches_its_archive_so_prune_counts_it_as_used(spark, tmp_path, monkeypatch):
    from amqpcap.spark import session

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(session.tempfile, "tempdir", None)
    monkeypatch.setattr(session.atexit, "register", lambda *a: None)  # no JVM records here
    flag = session.class_archive()
    assert flag.startswith("-XX:ArchiveClassesAtExit="), flag  # an empty temp dir: none yet
    final = flag.split("=", 1)[1].rsplit(".tmp-", 1)[0]
    session._recording.pop(flag.split("=", 1)[1], None)
    open(final, "wb").close()  # as if that recording had ended well
    os.utime(final, (1, 1))
    assert session.class_archive() == f"-XX:SharedArchiveFile={final}"
    assert os.stat(final).st_mtime > 1_000_000_000


LET_GO = """
from pyspark import SparkContext
from amqpcap.spark import session
s = session.build("local[1]", app="archive", quiet=True)
jvm = SparkContext._gateway.proc
session.let_go()
print(jvm.poll() is None)  # still ending when let_go returned
print(jvm.wait())  # then ends on its own, and well
"""


def test_the_command_waits_for_its_jvm_only_while_it_records_the_class_archive(spark, tmp_path):
    """``session.let_go`` (the command's end): a JVM recording the archive is waited for, so the
    archive is in place when the process leaves; one mapping it ends on its own after."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    got = []
    for _ in range(2):  # the first run records, the second maps
        cmd = [sys.executable, "-c", LET_GO]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        got.append(p.stdout.split())
    assert got == [["False", "0"], ["True", "0"]]
    assert [p.name for p in (tmp_path / "amqpcap-spark").glob("classes-*")][0].endswith(".jsa")
