"""Which implementation of the 0-8 / 0-9 / 0-9-1 decode hot path runs: compiled or pure Python.

``fast09`` (fast09.pyx) is an optional Cython extension that walks the frames of a direction
buffer (``Decoder09._frames``) with typed C code: frame headers, method arguments, content
headers, field tables, body frames.  setup.py builds it when Cython and a C compiler are there;
without them the install still succeeds and the pure-Python code runs (aiohttp / msgpack /
PyYAML style).  The pure-Python code in codec_0_9.py stays the reference: the compiled walker
decodes only well-formed frames itself and hands every other frame to it, so anomalies are the
reference's by construction.

This module is the one place that decides (``select``); codec_0_9 asks it once at import:

* ``AMQPCAP_PURE=1`` in the environment: pure Python;
* no extension built (no compiler, or a pure install): pure Python;
* a stale extension: pure Python, with a one-line warning on stderr.  The extension records
  ``SOURCE_SHA256``, the ``source_hash`` of the files it was built from (fast09.pyx and the
  Python code it mirrors); an edited source in an editable install does not match it, and the
  old .so is not used until it is rebuilt (``pip install -e .``).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys

# What the compiled walker is built from, and mirrors: editing any of them makes a built
# extension stale.
SOURCES = ("fast09.pyx", "codec_0_9.py", "stream.py", "events.py")
HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = "amqpcap.amqp.fast09"

_choice: tuple | None = None


def source_hash(directory: str = HERE) -> str | None:
    """sha256 over the SOURCES in ``directory`` (None if one is missing)."""
    h = hashlib.sha256()
    for name in SOURCES:
        try:
            with open(os.path.join(directory, name), "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
        except OSError:
            return None
    return h.hexdigest()


def choose(env: dict, module, directory: str = HERE) -> tuple:
    """(module or None, why): the decision, given the environment and the imported
    extension (None if it could not be imported)."""
    if env.get("AMQPCAP_PURE", "") not in ("", "0"):
        return None, "pure Python (AMQPCAP_PURE is set)"
    if module is None:
        return None, "pure Python (compiled decoder not built)"
    built = getattr(module, "SOURCE_SHA256", "")
    want = source_hash(directory)
    if want is None or built != want:
        return None, "pure Python (compiled decoder is stale: its sources changed; rebuild: pip install -e .)"
    return module, f"compiled ({os.path.basename(module.__file__)})"


def built():
    """The compiled extension module, or None if it is not built (or cannot be loaded)."""
    try:
        return importlib.import_module(MODULE)
    except ModuleNotFoundError as e:
        if e.name != MODULE:
            raise
        return None
    except Exception as e:  # e.g. a stale build whose imports are gone: the reference runs
        return Broken(e)


class Broken:
    """An extension that is there but does not load (its stamp matches no source)."""

    SOURCE_SHA256 = ""
    __file__ = "fast09"

    def __init__(self, error: Exception) -> None:
        self.error = error


def current_build() -> tuple:
    """(module or None, why): the compiled extension if it is built from the current sources,
    whatever AMQPCAP_PURE says (the tests run it explicitly)."""
    return choose({}, built())


def select():
    """The compiled module to use, or None for pure Python (decided once per process)."""
    global _choice
    if _choice is None:
        module = built()
        _choice = choose(os.environ, module)
        if module is not None and _choice[0] is None and "stale" in _choice[1]:
            print(f"amqpcap: warning: {_choice[1]}", file=sys.stderr)
    return _choice[0]


def describe() -> str:
    """Which decoder runs, for ``amqpcap --version`` and the benches."""
    select()
    return _choice[1]
