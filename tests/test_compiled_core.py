"""The optional compiled core (setup.py, Cython pure Python mode) and its pure-Python fallback.

The default test run uses whatever ``pip install -e .`` built (the compiled core where a C compiler
is there); ``AMQPCAP_PURE=1`` loads the very same modules from their .py files.  These tests check
that the switch really switches, that CI (``AMQPCAP_REQUIRE_TOOLS``) cannot pass on a silently
failed build, and run the decoding-truth, codec and differential tests again on the pure path.
"""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys

import pytest

import amqpcap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The strongest decoding checks, bounded to a minute or two: the real captures against their truth
# files and against tshark, the codecs (with their fuzzers), TCP reassembly and the capture readers.
PURE_SUBSET = [
    "tests/test_captures_truth.py",
    "tests/test_differential_tshark.py",
    "tests/test_pipeline_synthetic.py",
    "tests/amqp",
    "tests/tcp",
    "tests/capture",
]


def run_python(code: str, **env) -> str:
    r = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_pure_env_loads_every_core_module_from_its_py_file():
    out = run_python(
        "import importlib, amqpcap\n"
        "for m in amqpcap.CORE_MODULES: print(importlib.import_module(m).__file__)\n"
        "print(amqpcap.compiled_modules(), amqpcap.COMPILED)",
        AMQPCAP_PURE="1",
    )
    *files, last = out.splitlines()
    assert len(files) == len(amqpcap.CORE_MODULES)
    assert all(f.endswith(".py") and os.path.isfile(f) for f in files), files
    assert last == "() False"


def test_compiled_modules_reports_the_loaded_extensions():
    compiled = amqpcap.compiled_modules()
    assert set(compiled) <= set(amqpcap.CORE_MODULES)
    for name in amqpcap.CORE_MODULES:
        loader = sys.modules[name].__loader__
        assert isinstance(loader, importlib.machinery.ExtensionFileLoader) == (name in compiled)
    assert amqpcap.COMPILED == bool(compiled)


# scripts/test.sh sets AMQPCAP_REQUIRE_TOOLS in CI: a build that silently fell back to pure Python
# (no compiler, a Cython error) fails the run there.
@pytest.mark.skipif(
    not os.environ.get("AMQPCAP_REQUIRE_TOOLS"), reason="the compiled core is optional outside CI"
)
def test_compiled_core_is_in_use_in_ci():
    assert amqpcap.compiled_modules() == amqpcap.CORE_MODULES


@pytest.mark.parametrize("pure", ["", "1"])
def test_version_says_which_core_runs(pure):
    out = run_python("from amqpcap.cli import main; main(['--version'])", AMQPCAP_PURE=pure)
    compiled = amqpcap.COMPILED and not pure
    assert out == f"amqpcap {amqpcap.__version__} ({'compiled core' if compiled else 'pure Python'})"


@pytest.mark.skipif(os.environ.get("AMQPCAP_PURE", "") not in ("", "0"), reason="this run is the pure one")
def test_pure_python_path_passes_the_decoding_tests():
    """The same truth, codec and differential tests again, in a process that loads the .py files."""
    env = {**os.environ, "AMQPCAP_PURE": "1"}
    code = "import amqpcap, sys; sys.exit(1 if amqpcap.compiled_modules() else 0)"
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=120).returncode == 0
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *PURE_SUBSET],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout.splitlines()[-1]
