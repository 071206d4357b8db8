"""Optional compiled parts (every part of src/amqpcap/compiled.PARTS), built by Cython when it
and a C compiler are there (pyproject.toml lists Cython as a build requirement).  Without them
the install still succeeds, with a warning, and amqpcap runs its pure-Python code
(``AMQPCAP_PURE=1`` forces it; ``AMQPCAP_PURE_BUILD=1`` skips the build).

Everything here comes from compiled.PARTS: the extensions, the stamp each is built with (the
sources it mirrors: an edited source is never silently shadowed by an old build), and the
package data that ships those sources so that an installed copy can check its stamps.
"""

import importlib.util
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "src", "amqpcap")


def warn(msg: str) -> None:
    print(f"WARNING: amqpcap compiled code not built ({msg}); amqpcap runs pure Python", file=sys.stderr)


def load_compiled():
    # by path: the package itself is not importable while it is being built
    spec = importlib.util.spec_from_file_location("amqpcap_compiled", os.path.join(PACKAGE, "compiled.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def extensions(compiled) -> list:
    if os.environ.get("AMQPCAP_PURE_BUILD", "") not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError as e:
        warn(f"Cython missing: {e}")
        return []
    exts = []
    for part in compiled.PARTS.values():
        source = os.path.join("src", "amqpcap", part.sources[0])  # a .pyx, or a .py with its .pxd
        stamp = compiled.source_stamp(part.sources)
        exts.append(
            Extension(
                part.module, [source], define_macros=[("AMQPCAP_SOURCE_STAMP", f'"{stamp}"')], optional=True
            )
        )
    try:
        # force: the stamp changes with the Python sources too, which Cython does not track
        return cythonize(exts, language_level=3, quiet=True, force=True)
    except Exception as e:
        warn(f"cythonize failed: {e}")
        return []


COMPILED = load_compiled()
PACKAGE_DATA = COMPILED.package_data()
PACKAGE_DATA.setdefault("amqpcap.spark", []).append("log4j2.properties")

setup(
    ext_modules=extensions(COMPILED),
    cmdclass={"build_ext": OptionalBuildExt},
    package_data=PACKAGE_DATA,
    # Cython's generated C: built from the sources, not shipped
    exclude_package_data={"": ["*.c", "*.html"]},
)
