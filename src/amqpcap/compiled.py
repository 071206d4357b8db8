"""The build switch: which stages run their optional compiled twin, and what each is built from.

Some stages have a Cython twin of their common case (``PARTS``); the pure-Python module beside
it stays the reference and the fallback.  setup.py builds the twins when Cython and a C compiler
are there, from this module's list (their extensions, the files each is stamped with, and the
package data that ships those files all come from ``PARTS``); without them the install still
succeeds and the pure-Python code runs (aiohttp / msgpack / PyYAML style).

This module is the one place that decides, once per part and process (``select``; each stage
asks once, most at import, the 1.0 decoder at the first 1.0 conversation, and binds one
implementation):

* ``AMQPCAP_PURE=1`` in the environment: pure Python, for all of them (a comma-separated list
  of part names instead: for those, e.g. ``AMQPCAP_PURE=fastwriter`` for a benchmark);
* a part not built (no compiler, ``AMQPCAP_PURE_BUILD=1``): pure Python;
* a stale part: pure Python, with a one-line warning on stderr naming the fix.  A part records
  ``SOURCE_STAMP``, the ``source_stamp`` of the files it was built from (its .pyx and .pxi
  includes, or its .py and .pxd in Cython's pure mode, and the Python it mirrors); an edited
  source no longer matches it, and the old build is not used until it is rebuilt.

It imports nothing of amqpcap, so every stage (capture/, tcp/, amqp/, records/) can ask it.
A part is imported by the module that binds it (``select``, at import), or through ``built``,
which imports its reference module first (fast09 and fast10 subclass ``codec_0_9.Decoder09Py`` and
``codec_1_0.Decoder10``, which decoder.py binds; the others' references bind them at their own
end).  A part imports what it reads from its reference at its own end.
"""

from __future__ import annotations

import importlib
import os
import sys
import zlib

ROOT = os.path.dirname(os.path.abspath(__file__))  # the amqpcap package; sources are relative to it


class Part:
    """One optional compiled part: its module (``name``, in the package of its first source),
    what it is called in messages, and the files it is built from and mirrors (relative to the
    package; the one Cython compiles first).  That is a .pyx twin, or the reference .py itself,
    compiled with the types of the .pxd named as the part (Cython's pure-Python mode)."""

    __slots__ = ("name", "module", "reference", "what", "sources")

    def __init__(self, name: str, what: str, sources: tuple) -> None:
        self.name, self.what, self.sources = name, what, sources
        package = os.path.dirname(sources[0])
        self.module = "amqpcap." + os.path.join(package, name).replace("/", ".")
        # the Python module it stands in for, which selects it at its end (the first .py source)
        first = next(src for src in sources if src.endswith(".py"))
        self.reference = "amqpcap." + first[: -len(".py")].replace("/", ".")


# Every compiled part, in the order describe() names them.
PARTS = {
    p.name: p
    for p in (
        Part(
            "fast09",
            "decoder",
            ("amqp/fast09.pyx", "amqp/codec_0_9.py", "amqp/fields_0_9.py", "amqp/stream.py", "amqp/events.py")
            + ("values.py",)  # the events' classes, whose slots the walker fills
            + ("slots.pxi", "amqp/wirefields.pxi", "amqp/fields_0_9.pxi", "amqp/spec/readers_0_9.pxi")
            + ("amqp/rowsink.pxi", "amqp/digests.pxi", "amqp/direction.pxi", "deferred.pxi", "stamp.pxd")
            + ("amqp/framing_0_9.py", "amqp/fastframing.pxd"),  # the frame cutter it calls in C
        ),
        Part(
            "fastrows",
            "row builder",
            ("records/fastrows.pyx", "records/rows.py", "records/schema.py", "records/liveness.py")
            + ("slots.pxi", "records/raw.pxi", "records/jsonbuf.pxi", "amqp/wirefields.pxi")
            + ("amqp/rowsink.pxi", "stamp.pxd"),
        ),
        Part(
            "fastwriter",
            "table buffer",
            ("records/fastwriter.pyx", "records/writer.py", "records/times.py", "records/raw.pxi")
            + ("deferred.pxi", "stamp.pxd"),
        ),
        Part("fastframing", "frame cutter", ("amqp/framing_0_9.py", "amqp/fastframing.pxd", "stamp.pxd")),
        Part("fastlink", "link parser", ("capture/link.py", "capture/fastlink.pxd", "stamp.pxd")),
        Part("fastread", "pcap reader", ("capture/reader.py", "capture/fastread.pxd", "stamp.pxd")),
        Part(
            "fastflows",
            "packet loop",
            ("flows.py", "fastflows.pxd", "stamp.pxd")
            + ("tcp/reassembly.py", "tcp/fastreassembly.pxd"),  # the reassembler's Stream it calls in C
        ),
        Part(
            "fastreassembly", "TCP reassembler", ("tcp/reassembly.py", "tcp/fastreassembly.pxd", "stamp.pxd")
        ),
        Part("fastranges", "capture splitter", ("spark/entries.py", "spark/fastranges.pxd", "stamp.pxd")),
        Part(
            "fast10",
            "AMQP 1.0 decoder",
            ("amqp/fast10.pyx", "amqp/codec_1_0.py", "amqp/types_1_0.py", "amqp/spec/v1_0.py")
            + ("amqp/links_1_0.py", "amqp/events_1_0.py", "values_1_0.py", "amqp/rows10.pxi")
            + ("records/rows_1_0.py",)
            + ("amqp/links10.pxi", "amqp/stream.py", "amqp/direction.pxi")  # direction.pxi follows stream.py
            + ("amqp/json10.pxi", "records/jsonbuf.pxi", "records/raw.pxi", "stamp.pxd"),
        ),
    )
}

_choice: dict = {}  # part name -> (module or None, why)


def source_stamp(sources: tuple, root: str = ROOT) -> str | None:
    """A stamp of the contents of ``sources`` under ``root`` (None if one is missing): CRC-32 of
    each file, which any edit changes (a stale-build check, not a security one; zlib is built
    into Python, where hashlib would load OpenSSL at every start)."""
    parts = []
    for name in sources:
        try:
            with open(os.path.join(root, name), "rb") as f:
                parts.append("%08x" % zlib.crc32(f.read()))
        except OSError:
            return None
    return "".join(parts)


def package_data() -> dict:
    """{package: [file, ...]}: the non-Python sources the stamps read, which an install must ship."""
    data: dict = {}
    for part in PARTS.values():
        for src in part.sources:
            if not src.endswith(".py"):
                d, name = os.path.split(src)
                package = "amqpcap" + ("." + d.replace("/", ".") if d else "")
                data.setdefault(package, set()).add(name)
    return {k: sorted(v) for k, v in sorted(data.items())}


def editable() -> bool:
    """True if amqpcap runs from a source checkout (an editable install), not an installed copy."""
    return os.path.exists(os.path.join(ROOT, "..", "..", "setup.py"))


def rebuild_hint() -> str:
    """The fix for a stale build, for how amqpcap is installed."""
    if editable():
        return "rebuild: pip install -e ."
    return "reinstall amqpcap: pip install --force-reinstall --no-deps amqpcap"


def choose(env, module, name: str = "fast09", root: str = ROOT) -> tuple:
    """(module or None, why): the decision for part ``name``, given the environment and the
    imported extension (None if it could not be imported), its sources under ``root``."""
    part = PARTS[name]
    pure = env.get("AMQPCAP_PURE", "")
    if pure not in ("", "0") and (name in pure.split(",") or not PARTS.keys() & set(pure.split(","))):
        return None, "pure Python (AMQPCAP_PURE is set)"
    if module is None:
        return None, f"pure Python (compiled {part.what} not built)"
    want = source_stamp(part.sources, root)
    if want is None or getattr(module, "SOURCE_STAMP", "") != want:
        return None, f"pure Python (compiled {part.what} is stale: its sources changed; {rebuild_hint()})"
    return module, f"compiled ({os.path.basename(module.__file__)})"


def built(name: str = "fast09"):
    """The compiled extension module of part ``name``, or None if it is not built."""
    part = PARTS[name]
    module = part.module
    try:
        # the reference first: a part imports what it falls back to, which binds it at its end
        importlib.import_module(part.reference)
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        return None
    except Exception as e:  # e.g. a stale build whose imports are gone: the reference runs
        return Broken(e, name)


class Broken:
    """An extension that is there but does not load (its stamp matches no source)."""

    SOURCE_STAMP = ""

    def __init__(self, error: Exception, name: str = "fast09") -> None:
        self.error = error
        self.__file__ = name


def current_build(name: str = "fast09") -> tuple:
    """(module or None, why): the compiled part if it is built from the current sources,
    whatever AMQPCAP_PURE says (the tests run it explicitly)."""
    return choose({}, built(name), name)


def select(name: str = "fast09"):
    """The compiled module of part ``name`` to use, or None for pure Python (once per process)."""
    if name not in _choice:
        module = built(name)
        _choice[name] = choose(os.environ, module, name)
        if module is not None and _choice[name][0] is None and "stale" in _choice[name][1]:
            print(f"amqpcap: warning: {_choice[name][1]}", file=sys.stderr)
    return _choice[name][0]


def twin(name: str, stamp) -> tuple:
    """(SOURCE_STAMP, compiled module or None): the choice at the end of a module that Cython also
    builds as part ``name`` (the .py with the part's .pxd), in one line.  The compiled module
    passes its build's ``stamp`` (stamp.pxd's bytes) and gets it back as text with None: it is what
    is chosen and chooses nothing.  The Python module passes None and gets what ``select`` chooses."""
    if stamp is not None:
        return stamp.decode("ascii"), None
    return None, select(name)


def describe() -> str:
    """Which implementations run, for ``amqpcap --version`` and the benches: each part named by
    what it is, in ``PARTS``' order."""
    parts = []
    for name, part in PARTS.items():
        select(name)
        parts.append(f"{part.what}: {_choice[name][1]}")
    return "; ".join(parts)
