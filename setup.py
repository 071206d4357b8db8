"""Optional compiled extensions (amqpcap/amqp/accel.py EXTENSIONS: the 0-9 decoder, the row
builders, the link parser, the pcap record walk, ...), built by Cython
when it and a C compiler are there (pyproject.toml lists Cython as a build requirement).  Without
them the install still succeeds, with a warning, and amqpcap runs its pure-Python code (accel.py
decides at run time, ``AMQPCAP_PURE=1`` forces pure Python).

Each extension is stamped with the hash of the sources it mirrors (its accel ``sources``), so that
an edited source is never silently shadowed by an old build; ``AMQPCAP_PURE_BUILD=1`` skips them.
"""

import hashlib
import importlib.util
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
AMQP = os.path.join(HERE, "src", "amqpcap", "amqp")


def warn(msg: str) -> None:
    print(f"WARNING: amqpcap compiled code not built ({msg}); amqpcap runs pure Python", file=sys.stderr)


def load_accel():
    # accel.py by path: the package itself is not importable while it is being built
    spec = importlib.util.spec_from_file_location("amqpcap_accel", os.path.join(AMQP, "accel.py"))
    accel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(accel)
    # the stamps with hashlib's SHA-256: accel's own would load the decoder being rebuilt
    accel.sha256 = hashlib.sha256
    return accel


class OptionalBuildExt(build_ext):
    """A failed compilation is a warning, not a failed install (no compiler, no Python headers)."""

    def run(self):
        try:
            super().run()
        except Exception as e:  # no compiler at all (distutils errors are Exceptions too)
            warn(str(e))

    failed: set = set()

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:
            warn(f"{ext.name}: {e}")
            self.failed.add(ext.name)

    def copy_extensions_to_source(self):
        # editable install: there is nothing to copy for an extension that did not build
        self.extensions = [e for e in self.extensions if e.name not in self.failed]
        super().copy_extensions_to_source()


def extensions() -> list:
    if os.environ.get("AMQPCAP_PURE_BUILD", "") not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError as e:
        warn(f"Cython missing: {e}")
        return []
    accel = load_accel()
    exts = []
    for x in accel.EXTENSIONS.values():
        pyx = os.path.relpath(os.path.join(x.directory, x.sources[0]), HERE)
        stamp = accel.source_hash(x.directory, x.sources)
        exts.append(
            Extension(x.module, [pyx], define_macros=[("AMQPCAP_SOURCE_SHA256", f'"{stamp}"')], optional=True)
        )
    try:
        # force: the stamp changes with the Python sources too, which Cython does not track
        return cythonize(exts, language_level=3, quiet=True, force=True)
    except Exception as e:
        warn(f"cythonize failed: {e}")
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
