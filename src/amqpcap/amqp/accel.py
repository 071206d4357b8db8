"""Which implementations of the hot paths run: compiled or pure Python.

Optional Cython extensions (``EXTENSIONS``), each a typed twin of pure-Python code that stays
the reference, and each handing whatever is off its common path to that reference:

* ``fast09`` (amqp/fast09.pyx), the 0-8 / 0-9 / 0-9-1 decode hot path: it walks the frames of
  a direction buffer (``Decoder09._frames``) with typed C code: frame headers, method
  arguments, content headers, field tables, body frames.  It decodes only well-formed frames
  itself and hands every other frame to the reference (codec_0_9.py), so anomalies are the
  reference's by construction.
* ``fastrows`` (records/fastrows.pyx), the methods / messages row builders
  (``rows.method_row``, ``rows.message_row``): C type checks, rows staged in place and handed
  to the compiled table buffer without a tuple, the fill plans and the JSON encoder being
  rows.py's own; and ``liveness.Liveness`` with the decoder's per-packet tally in C.
* ``fastlink`` (capture/fastlink.pyx), ``link.parse_packet`` for the common packet (Ethernet,
  SLL, SLL2 or raw IP; IPv4 without options or IPv6 without extension headers; TCP; all
  captured); every other packet goes to ``link.parse_packet_reference``.
* ``fastread`` (capture/fastread.pyx), the record walks of pcap and pcapng: every record (every
  well-formed enhanced packet block) wholly in the read buffer at once; other blocks, refills,
  truncation and anomalies stay reader.py's.
* ``fastpipeline`` (fastpipeline.pyx), ``Dissector``'s packet loop: the common packet (a known
  conversation, no SYN / FIN / RST, nothing truncated, an open window) in C; every other packet
  goes to ``Dissector._parsed``, parsed once.
* ``fastreassembly`` (tcp/fastreassembly.pyx), ``reassembly.Stream`` with its fields in C: the
  next segment in order and the ACK typed; out-of-order data, overlaps, snaplen cuts, holes and
  the end run reassembly.py's own methods on those fields.

setup.py builds them when Cython and a C compiler are there; without them the install still
succeeds and the pure-Python code runs (aiohttp / msgpack / PyYAML style).

This module is the one place that decides (``select``, once per extension and process;
codec_0_9, rows, link, reader, reassembly and pipeline ask it at import):

* ``AMQPCAP_PURE=1`` in the environment: pure Python, for all of them;
* no extension built (no compiler, or a pure install): pure Python;
* a stale extension: pure Python, with a one-line warning on stderr.  An extension records
  ``SOURCE_SHA256``, the ``source_hash`` of the files it was built from (its .pyx and the
  Python code it mirrors); an edited source in an editable install does not match it, and the
  old .so is not used until it is rebuilt (``pip install -e .``).
"""

from __future__ import annotations

import importlib
import os
import sys

# What the compiled walker is built from, and mirrors: editing any of them makes a built
# extension stale.
SOURCES = (
    "fast09.pyx",
    "codec_0_9.py",
    "stream.py",
    "events.py",
    "../slots.pxi",
    "wirefields.pxi",
    "rowsink.pxi",
    "digests.pxi",
    "../deferred.pxi",
)
HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = "amqpcap.amqp.fast09"


class Extension:
    """One optional extension: its module, what it is called in messages, where its sources
    are (``directory``) and which files it is built from (``sources``, relative to it)."""

    def __init__(self, name: str, module: str, what: str, directory: str, sources: tuple) -> None:
        self.name, self.module, self.what = name, module, what
        self.directory, self.sources = directory, sources


# Every extension, by short name (setup.py builds them, describe() names them, in this order).
EXTENSIONS = {
    "fast09": Extension("fast09", MODULE, "decoder", HERE, SOURCES),
    "fastrows": Extension(
        "fastrows",
        "amqpcap.records.fastrows",
        "row builder",
        os.path.join(os.path.dirname(HERE), "records"),
        ("fastrows.pyx", "rows.py", "schema.py", "liveness.py", "../slots.pxi", "raw.pxi")
        + ("../amqp/wirefields.pxi", "../amqp/rowsink.pxi"),
    ),
    "fastwriter": Extension(
        "fastwriter",
        "amqpcap.records.fastwriter",
        "table buffer",
        os.path.join(os.path.dirname(HERE), "records"),
        ("fastwriter.pyx", "writer.py", "raw.pxi", "../deferred.pxi"),
    ),
    "fastlink": Extension(
        "fastlink",
        "amqpcap.capture.fastlink",
        "link parser",
        os.path.join(os.path.dirname(HERE), "capture"),
        ("fastlink.pyx", "link.py"),
    ),
    "fastread": Extension(
        "fastread",
        "amqpcap.capture.fastread",
        "pcap reader",
        os.path.join(os.path.dirname(HERE), "capture"),
        ("fastread.pyx", "reader.py"),
    ),
    "fastpipeline": Extension(
        "fastpipeline",
        "amqpcap.fastpipeline",
        "packet loop",
        os.path.dirname(HERE),
        ("fastpipeline.pyx", "pipeline.py", "slots.pxi"),
    ),
    "fastreassembly": Extension(
        "fastreassembly",
        "amqpcap.tcp.fastreassembly",
        "TCP reassembler",
        os.path.join(os.path.dirname(HERE), "tcp"),
        ("fastreassembly.pyx", "reassembly.py"),
    ),
}

_choice: dict | None = None  # extension name -> (module or None, why)


def sha256():
    """A new SHA-256: OpenSSL's through the compiled decoder if it loads (importing hashlib
    costs ~2.4 ms of every start, which nothing else on the dissect path needs; the decoder
    imports only the events and the stream core), else hashlib's."""
    try:
        return built("fast09").Sha256()
    except Exception:  # not built, another build, OpenSSL's SHA256_* not reachable
        import hashlib

        return hashlib.sha256()


def source_hash(directory: str = HERE, sources: tuple = SOURCES) -> str | None:
    """sha256 over ``sources`` in ``directory`` (None if one is missing)."""
    h = sha256()
    for name in sources:
        try:
            with open(os.path.join(directory, name), "rb") as f:
                one = sha256()
                one.update(f.read())
                h.update(bytes.fromhex(one.hexdigest()))
        except OSError:
            return None
    return h.hexdigest()


def choose(env: dict, module, directory: str = HERE, ext: str = "fast09") -> tuple:
    """(module or None, why): the decision for extension ``ext``, given the environment and
    the imported extension (None if it could not be imported), its sources in ``directory``."""
    x = EXTENSIONS[ext]
    if env.get("AMQPCAP_PURE", "") not in ("", "0"):
        return None, "pure Python (AMQPCAP_PURE is set)"
    if module is None:
        return None, f"pure Python (compiled {x.what} not built)"
    built = getattr(module, "SOURCE_SHA256", "")
    # fast09's hash with one argument: the tests replace source_hash by a one-argument stub
    want = source_hash(directory) if x.sources is SOURCES else source_hash(directory, x.sources)
    if want is None or built != want:
        return (
            None,
            f"pure Python (compiled {x.what} is stale: its sources changed; rebuild: pip install -e .)",
        )
    return module, f"compiled ({os.path.basename(module.__file__)})"


def built(ext: str = "fast09"):
    """The compiled extension module, or None if it is not built (or cannot be loaded)."""
    name = EXTENSIONS[ext].module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        return None
    except Exception as e:  # e.g. a stale build whose imports are gone: the reference runs
        return Broken(e, ext)


class Broken:
    """An extension that is there but does not load (its stamp matches no source)."""

    SOURCE_SHA256 = ""

    def __init__(self, error: Exception, ext: str = "fast09") -> None:
        self.error = error
        self.__file__ = ext


def current_build(ext: str = "fast09") -> tuple:
    """(module or None, why): the compiled extension if it is built from the current sources,
    whatever AMQPCAP_PURE says (the tests run it explicitly)."""
    return choose({}, built(ext), EXTENSIONS[ext].directory, ext)


def select(ext: str = "fast09"):
    """The compiled module of ``ext`` to use, or None for pure Python (decided once per process)."""
    global _choice
    if _choice is None:
        _choice = {}
    if ext not in _choice:
        module = built(ext)
        _choice[ext] = choose(os.environ, module, EXTENSIONS[ext].directory, ext)
        if module is not None and _choice[ext][0] is None and "stale" in _choice[ext][1]:
            print(f"amqpcap: warning: {_choice[ext][1]}", file=sys.stderr)
    return _choice[ext][0]


def describe() -> str:
    """Which implementations run, for ``amqpcap --version`` (after "0-9 decoder: ") and the
    benches: the decoder's first, then each other extension's, named by what it is."""
    parts = []
    for ext, x in EXTENSIONS.items():
        select(ext)
        why = _choice[ext][1]
        parts.append(why if ext == "fast09" else f"{x.what}: {why}")
    return "; ".join(parts)
