"""The wheel, installed: built from this checkout and installed into a fresh virtual environment,
it runs every compiled part (none stale: the stamps' sources ship with it) and dissects a
bundled capture into the same tables as the source checkout."""

import os
import subprocess
import sys
import sysconfig

import pyarrow.parquet as pq
import pytest
from fixtures.compiled import ROOT, built_or_skip

from amqpcap import compiled
from amqpcap.pipeline import dissect

CAPTURE = os.path.join(ROOT, "captures", "rabbitmq091_pika_full.pcap")
TABLES = ("connections", "methods", "messages", "anomalies", "frames")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, amqpcap command) of a fresh virtual environment holding the wheel.  Its other
    dependencies are this environment's, on its path as a plain directory: the .pth files there
    (the editable install's among them) are not read, so amqpcap can only come from the wheel."""
    for name in compiled.PARTS:
        built_or_skip(name)  # the wheel is built by the same compiler
    tmp = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("AMQPCAP_PURE", "AMQPCAP_PURE_BUILD")}
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    run = dict(env=env, capture_output=True, text=True, timeout=1800)
    r = subprocess.run(pip + ["wheel", "--no-deps", "-w", str(tmp / "dist"), ROOT], **run)
    assert r.returncode == 0, r.stderr
    (wheel,) = os.listdir(tmp / "dist")
    venv = tmp / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], **run)
    assert r.returncode == 0, r.stderr
    python = str(venv / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], **run
    ).stdout.strip()
    with open(os.path.join(site, "deps.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    r = subprocess.run(
        pip + ["--python", python, "install", "--no-deps", "--no-index", str(tmp / "dist" / wheel)], **run
    )
    assert r.returncode == 0, r.stderr
    return python, str(venv / "bin" / "amqpcap"), env, tmp


def test_the_wheel_runs_every_compiled_part_from_its_own_install(installed):
    python, amqpcap, env, tmp = installed
    where = subprocess.run(
        [python, "-c", "import amqpcap; print(amqpcap.__file__)"], env=env, capture_output=True, text=True
    )
    assert where.stdout.startswith(str(tmp / "venv")), where.stdout  # not the source checkout
    r = subprocess.run([amqpcap, "--version"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    for part in compiled.PARTS.values():
        assert f"{part.what}: compiled ({part.name}." in r.stdout, r.stdout
    assert "pure Python" not in r.stdout and str(tmp / "venv") not in r.stdout


def test_the_wheels_tables_equal_the_source_checkouts(installed, tmp_path):
    _python, amqpcap, env, _tmp = installed
    r = subprocess.run(
        [amqpcap, "dissect", CAPTURE, "--frames", "-o", str(tmp_path / "wheel"), "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    dissect([CAPTURE], str(tmp_path / "here"), frames=True)
    assert pq.read_table(tmp_path / "wheel" / "messages").num_rows > 0
    for table in TABLES:
        wheel = pq.read_table(tmp_path / "wheel" / table)
        assert wheel.equals(pq.read_table(tmp_path / "here" / table)), table
