"""compiled.py's choice, for every compiled part: pure Python when asked, when not built, or
when built from other sources than the ones next to it; the built one otherwise.  And the one
list it keeps: what setup.py builds and stamps and what an install ships come from it."""

import os
import shutil
import subprocess
import sys

import pytest
from fixtures.compiled import built_or_skip

from amqpcap import compiled

PARTS = sorted(compiled.PARTS)


class FakeBuild:
    """An imported extension as compiled.py sees it: its file and the stamp it was built with."""

    def __init__(self, name: str, stamp) -> None:
        self.__file__ = f"/x/{name}.cpython-311-x86_64-linux-gnu.so"
        self.SOURCE_STAMP = stamp


def stamp(name: str, root: str = compiled.ROOT):
    return compiled.source_stamp(compiled.PARTS[name].sources, root)


@pytest.mark.parametrize("name", PARTS)
def test_the_env_var_or_a_missing_build_selects_pure_python_a_current_build_itself(name):
    part = compiled.PARTS[name]
    current = FakeBuild(name, stamp(name))
    assert compiled.choose({}, current, name)[0] is current
    assert compiled.choose({"AMQPCAP_PURE": "0"}, current, name)[0] is current
    module, why = compiled.choose({"AMQPCAP_PURE": "1"}, current, name)
    assert module is None and why == "pure Python (AMQPCAP_PURE is set)"
    module, why = compiled.choose({}, None, name)
    assert module is None and why == f"pure Python (compiled {part.what} not built)"


@pytest.mark.parametrize("name", PARTS)
def test_a_build_from_other_sources_is_stale_whichever_source_changed(name, tmp_path):
    part = compiled.PARTS[name]
    for src in part.sources:
        (tmp_path / src).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(compiled.ROOT, src), tmp_path / src)
    built = FakeBuild(name, stamp(name))
    assert compiled.choose({}, built, name, str(tmp_path))[0] is built
    for src in part.sources:  # the .pyx, its includes and every Python module it mirrors
        original = (tmp_path / src).read_bytes()
        (tmp_path / src).write_bytes(original + b"# edited\n")
        module, why = compiled.choose({}, built, name, str(tmp_path))
        assert module is None and why.startswith(f"pure Python (compiled {part.what} is stale"), src
        (tmp_path / src).write_bytes(original)
    os.remove(tmp_path / part.sources[0])  # a missing source cannot be checked: not used either
    assert compiled.choose({}, built, name, str(tmp_path))[0] is None


def test_an_extension_that_does_not_load_is_not_used(monkeypatch):
    import amqpcap.amqp

    monkeypatch.setitem(sys.modules, "amqpcap.amqp.fast09", None)  # the import fails
    monkeypatch.delattr(amqpcap.amqp, "fast09", raising=False)
    assert compiled.built("fast09") is None
    module, why = compiled.choose({}, compiled.Broken(ImportError("cannot import name 'Pending'")), "fast09")
    assert module is None and "decoder is stale" in why


def test_the_stale_message_names_the_fix_for_how_amqpcap_is_installed(monkeypatch):
    monkeypatch.setattr(compiled, "editable", lambda: True)
    assert compiled.choose({}, FakeBuild("fast09", "x"), "fast09")[1].endswith("rebuild: pip install -e .)")
    monkeypatch.setattr(compiled, "editable", lambda: False)
    why = compiled.choose({}, FakeBuild("fast09", "x"), "fast09")[1]
    assert why.endswith("reinstall amqpcap: pip install --force-reinstall --no-deps amqpcap)")


def test_a_stale_build_is_reported_in_one_line_on_stderr(monkeypatch, capsys):
    built_or_skip("fastrows")
    monkeypatch.delenv("AMQPCAP_PURE", raising=False)  # the suite may run with it set
    monkeypatch.setattr(compiled, "_choice", {})
    monkeypatch.setattr(compiled, "source_stamp", lambda sources, root=compiled.ROOT: "0")
    assert compiled.select("fastrows") is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("amqpcap: warning: pure Python (compiled row builder is stale")


def test_each_part_is_named_for_its_pyx_or_pxd_and_stamped_over_its_own_sources():
    """A part is built from its .pyx, or from its reference .py with the .pxd named as the part."""
    assert len({stamp(name) for name in PARTS}) == len(PARTS)
    for name, part in compiled.PARTS.items():
        first = part.sources[0]
        if first.endswith(".py"):
            assert os.path.join(os.path.dirname(first), f"{name}.pxd") in part.sources
            assert part.reference == "amqpcap." + first[:-3].replace("/", ".")
        else:
            assert first.endswith(f"{name}.pyx")
        assert part.module == "amqpcap." + os.path.join(os.path.dirname(first), name).replace("/", ".")
        assert all(os.path.exists(os.path.join(compiled.ROOT, s)) for s in part.sources)


def test_the_package_data_ships_every_non_python_source_a_stamp_reads():
    shipped = {
        os.path.join(*pkg.split(".")[1:], name)
        for pkg, names in compiled.package_data().items()
        for name in names
    }
    wanted = {s for p in compiled.PARTS.values() for s in p.sources if not s.endswith(".py")}
    assert shipped == wanted and any(s.endswith(".pxi") for s in wanted)


@pytest.mark.parametrize("name", PARTS)
def test_the_built_extension_is_current(name):
    module = built_or_skip(name)
    assert module.SOURCE_STAMP == stamp(name)


@pytest.mark.parametrize("name", PARTS)
def test_an_extension_imported_before_the_module_it_serves_is_still_chosen(name):
    """A process that imports the extension first (``amqpcap --version`` asks about every one)
    must not see it half initialised and fall back to pure Python."""
    built_or_skip(name)
    code = (
        "import importlib\n"
        "from amqpcap import compiled\n"
        f"importlib.import_module(compiled.PARTS[{name!r}].module)\n"
        "print(compiled.describe())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "AMQPCAP_PURE"}  # the choice of a build
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "pure Python" not in p.stdout, p.stdout


def test_the_decoders_sha256_is_checked_against_hashlibs_answers():
    import hashlib

    fast09 = built_or_skip("fast09")
    assert len(fast09.KNOWN_DIGESTS) == 3
    for parts, want in fast09.KNOWN_DIGESTS:
        assert hashlib.sha256(b"".join(parts)).hexdigest() == want
        h = fast09.Sha256()
        for part in parts:
            h.update(part)
        assert h.hexdigest() == want


@pytest.mark.compiled("fastflows", "fastreassembly")
@pytest.mark.parametrize("capture", ["rabbitmq091_pika_full.pcap", "rabbitmq10_proton_outcomes.pcap"])
def test_the_compiled_packet_loop_drives_the_reference_reassembler_as_its_own(capture, tmp_path):
    """The compiled packet loop calls a compiled stream's methods in C and any other stream's
    through Python: with the reference reassembler it writes the tables it writes with its own."""
    from fixtures import hostile as H

    path = os.path.join(os.path.dirname(__file__), "..", "captures", capture)
    got = []
    for pure in ("", "fastreassembly"):
        out = tmp_path / f"out-{pure}"
        r = H.run_cli("dissect", path, "-o", out, env={"AMQPCAP_PURE": pure})
        H.no_internal_error(r)
        assert "warning" not in r.stderr
        got.append(H.tables(out))
    assert got[0]["methods"] and got[0] == got[1]
