"""The specification XML the generators read is in the repository (a clean clone checks the tables)."""

import importlib.util
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "tools", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(os.path.join(REPO, "tools"))
    return mod


def test_generators_default_to_the_xml_vendored_in_the_repository():
    gen = _tool("gen_spec")
    assert os.path.realpath(gen.DEFAULT_SPECS) == os.path.join(os.path.realpath(REPO), "specs")
    for _module, rel in gen.SOURCES.values():
        assert os.path.isfile(os.path.join(gen.DEFAULT_SPECS, rel)), rel
    gen10 = _tool("gen_spec_0_10")
    assert os.path.isfile(gen10.DEFAULT_XML)
    assert os.path.realpath(gen10.DEFAULT_XML).startswith(os.path.realpath(REPO))


def test_gen_spec_check_passes_with_its_defaults():
    r = subprocess.run(
        [sys.executable, os.path.join(REPO, "tools", "gen_spec.py"), "--check"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert (r.returncode, r.stderr) == (0, "")
