"""Optional compiled core: the hot modules named in ``amqpcap.CORE_MODULES`` are compiled by
Cython 3 (pure Python mode: the very same .py files, typed where it pays by the .pxd files next
to them).  Compilation is optional: without Cython or a C compiler the install still succeeds,
with a warning, and amqpcap runs the .py files (also what ``AMQPCAP_PURE=1`` selects)."""

import ast
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def core_modules() -> list[str]:
    """``CORE_MODULES`` of src/amqpcap/__init__.py, read without importing the package."""
    with open(os.path.join(HERE, "src", "amqpcap", "__init__.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        names = [getattr(t, "id", None) for t in getattr(node, "targets", ())]
        if isinstance(node, ast.Assign) and "CORE_MODULES" in names:
            return list(ast.literal_eval(node.value))
    raise RuntimeError("CORE_MODULES not found in src/amqpcap/__init__.py")


def warn(msg: str) -> None:
    print(f"WARNING: amqpcap compiled core not built ({msg}); amqpcap runs pure Python", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """A failed compilation is a warning, not a failed install; the modules compile in parallel."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self):
        try:
            super().run()
        except Exception as e:  # no compiler at all (distutils errors are Exceptions too)
            warn(str(e))

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:
            warn(f"{ext.name}: {e}")


def extensions():
    if os.environ.get("AMQPCAP_PURE_BUILD"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError as e:
        warn(f"Cython missing: {e}")
        return []
    mods = core_modules()
    paths = [os.path.join("src", *m.split(".")) + ".py" for m in mods]
    try:
        return cythonize(
            paths,
            language_level=3,
            quiet=True,
            compiler_directives={
                # annotations stay documentation (Python semantics: `x: float` is not a C double);
                # C types come from the .pxd files and cython.* declarations only
                "annotation_typing": False,
                "binding": True,
                "embedsignature": True,
            },
        )
    except Exception as e:
        warn(f"cythonize failed: {e}")
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
