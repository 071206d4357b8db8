"""The tail the spec generators share: write what they generate, or (``--check``) say which
generated file is out of date.  Used by tools/gen_spec.py, gen_spec_0_10.py and gen_spec_1_0.py."""

from __future__ import annotations

import argparse
import os
import sys


def write(outputs: dict, check: bool) -> int:
    """Write each ``{path: source}`` that differs from the file; with ``check``, write nothing and
    return 1 (naming them on stderr) if any differs."""
    stale = []
    for path, src in outputs.items():
        old = None
        if os.path.exists(path):
            with open(path) as f:
                old = f.read()
        if old != src:
            stale.append(path)
            if not check:
                with open(path, "w") as f:
                    f.write(src)
    if check and stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


def main(doc: str, source: tuple, out_path: str, generate, argv=None) -> int:
    """The command line of a generator of one module: ``source`` is its input option and default
    (("--xml", path)), ``generate(input) -> source text``."""
    option, default = source
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument(option, default=default, dest="source")
    ap.add_argument("--out", default=out_path)
    ap.add_argument("--check", action="store_true", help="exit 1 if the module is out of date")
    a = ap.parse_args(argv)
    return write({a.out: generate(a.source)}, a.check)
