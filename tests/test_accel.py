"""amqp/accel.py's choice, for every optional extension: pure Python when asked, when not
built, or when built from other sources than the ones next to it; the built one otherwise."""

import os

import pytest
from fixtures.compiled import built_or_skip

from amqpcap.amqp import accel

EXTENSIONS = sorted(accel.EXTENSIONS)


class FakeBuild:
    """An imported extension as accel sees it: its file and the stamp it was built with."""

    def __init__(self, ext: str, stamp) -> None:
        self.__file__ = f"/x/{ext}.cpython-311-x86_64-linux-gnu.so"
        self.SOURCE_SHA256 = stamp


def stamp(ext: str, directory: str | None = None):
    x = accel.EXTENSIONS[ext]
    return accel.source_hash(directory or x.directory, x.sources)


@pytest.mark.parametrize("ext", EXTENSIONS)
def test_the_env_var_or_a_missing_build_selects_pure_python_a_current_build_itself(ext):
    x = accel.EXTENSIONS[ext]
    current = FakeBuild(ext, stamp(ext))
    assert accel.choose({}, current, x.directory, ext)[0] is current
    module, why = accel.choose({"AMQPCAP_PURE": "1"}, current, x.directory, ext)
    assert module is None and why == "pure Python (AMQPCAP_PURE is set)"
    module, why = accel.choose({}, None, x.directory, ext)
    assert module is None and why == f"pure Python (compiled {x.what} not built)"


@pytest.mark.parametrize("ext", EXTENSIONS)
def test_a_build_from_other_sources_is_stale_whichever_source_changed(ext, tmp_path):
    x = accel.EXTENSIONS[ext]
    here = tmp_path / "package" / "directory"  # sources may be in the directories above (../)
    for name in x.sources:
        (here / name).parent.mkdir(parents=True, exist_ok=True)
        (here / name).write_bytes(open(os.path.join(x.directory, name), "rb").read())
    built = FakeBuild(ext, stamp(ext))
    assert accel.choose({}, built, str(here), ext)[0] is built
    for name in x.sources:  # the .pyx and every Python module it mirrors
        original = (here / name).read_bytes()
        (here / name).write_bytes(original + b"# edited\n")
        module, why = accel.choose({}, built, str(here), ext)
        assert module is None and why.startswith(f"pure Python (compiled {x.what} is stale"), name
        (here / name).write_bytes(original)


def test_each_stamp_covers_its_own_sources():
    assert len({stamp(ext) for ext in EXTENSIONS}) == len(EXTENSIONS)
    assert all(accel.EXTENSIONS[ext].sources[0] == f"{ext}.pyx" for ext in EXTENSIONS)


@pytest.mark.parametrize("ext", EXTENSIONS)
def test_the_built_extension_is_current_and_names_its_sources(ext):
    module = built_or_skip(ext)
    assert module.SOURCE_SHA256 == stamp(ext)


@pytest.mark.parametrize("ext", EXTENSIONS)
def test_an_extension_imported_before_the_module_it_serves_is_still_chosen(ext):
    """A process that imports the extension first (``amqpcap --version`` asks accel about every
    one) must not see it half initialised and fall back to pure Python."""
    import subprocess
    import sys

    built_or_skip(ext)
    code = (
        "import importlib, sys\n"
        "from amqpcap.amqp import accel\n"
        f"importlib.import_module(accel.EXTENSIONS[{ext!r}].module)\n"
        "print(accel.describe())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "AMQPCAP_PURE"}  # the choice of a build
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "pure Python" not in p.stdout, p.stdout


def test_the_stamp_is_the_same_with_hashlibs_sha256_and_with_the_decoders(monkeypatch):
    """accel hashes the sources with the compiled decoder's OpenSSL SHA-256 if it loads
    (hashlib is then never imported by a dissect), hashlib's otherwise: the same stamps, the
    one setup.py built with."""
    import hashlib

    fast09 = built_or_skip("fast09")
    assert type(accel.sha256()) is fast09.Sha256
    with_decoder = {ext: stamp(ext) for ext in EXTENSIONS}
    monkeypatch.setattr(accel, "built", lambda ext="fast09": None)  # not built
    assert type(accel.sha256()) is type(hashlib.sha256())
    for ext in EXTENSIONS:
        x = accel.EXTENSIONS[ext]
        h = hashlib.sha256()
        for name in x.sources:
            with open(os.path.join(x.directory, name), "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
        assert with_decoder[ext] == stamp(ext) == h.hexdigest(), ext


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
