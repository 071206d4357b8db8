"""The wheel, installed: built from this checkout and installed into a fresh virtual environment,
it runs every compiled part (none stale: the stamps' sources ship with it), dissects a bundled
capture into the same tables as the source checkout, and passes the dissect and differential
tests (against tshark, and compiled against pure Python on every shipped capture) run with it."""

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
# once, in the compiled pass: the wheel is built with every compiled part
pytestmark = pytest.mark.compiled(*compiled.PARTS)


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


# the dissect and differential tests, run by the wheel's interpreter (amqpcap from the wheel)
WHEEL_TESTS = (
    "tests/test_differential_tshark.py",
    "tests/test_captures_truth.py",
    "tests/amqp/test_compiled_decoder.py::test_compiled_and_reference_write_identical_tables_for_every_capture",
    "tests/records/test_writer_compiled.py::test_every_shipped_capture_gives_the_reference_tables",
)


def test_the_dissect_and_differential_tests_pass_with_the_wheel(installed):
    python, _amqpcap, env, tmp = installed
    env = env | {"AMQPCAP_INSTALLED_FROM": str(tmp / "venv")}  # tests/conftest.py checks it
    r = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *WHEEL_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " skipped" not in r.stdout, r.stdout[-2000:]
