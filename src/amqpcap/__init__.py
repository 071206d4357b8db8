"""amqpcap: AMQP packet-capture dissector and traffic analyser."""

import os as _os
import sys as _sys

__version__ = "0.1.0"

# The compiled core: these modules are compiled by Cython (setup.py) when a C compiler is there;
# their .py files are the one source, and the fallback.
CORE_MODULES = (
    "amqpcap.capture.reader",
    "amqpcap.capture.link",
    "amqpcap.tcp.reassembly",
    "amqpcap.amqp.stream",
    "amqpcap.amqp.codec_0_9",
    "amqpcap.amqp.codec_0_10",
    "amqpcap.records.rows",
    "amqpcap.records.writer",
    "amqpcap.pipeline",
)


class _PureFinder:
    """``AMQPCAP_PURE=1``: load amqpcap's modules from their .py files even where a compiled module
    sits next to them.  Python's path finder prefers the extension module (.so) over the .py of the
    same name; this finder, first on ``sys.meta_path``, answers before it for ``amqpcap.*``."""

    only: frozenset = frozenset()  # AMQPCAP_PURE=amqpcap.x,amqpcap.y: just these (to measure each)

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if not name.startswith("amqpcap.") or not path or (cls.only and name not in cls.only):
            return None
        from importlib.util import spec_from_file_location

        leaf = name.rpartition(".")[2]
        for d in path:
            source = _os.path.join(d, leaf + ".py")
            if _os.path.isfile(source):
                return spec_from_file_location(name, source)
        return None  # a package (or not ours): the normal finders


_pure = _os.environ.get("AMQPCAP_PURE", "")
if _pure not in ("", "0"):
    _PureFinder.only = frozenset(m for m in _pure.split(",") if m.startswith("amqpcap."))
    _sys.meta_path.insert(0, _PureFinder)


def compiled_modules() -> tuple[str, ...]:
    """The modules of :data:`CORE_MODULES` running compiled (empty: pure Python)."""
    from importlib import import_module
    from importlib.machinery import ExtensionFileLoader

    return tuple(m for m in CORE_MODULES if isinstance(import_module(m).__loader__, ExtensionFileLoader))


def __getattr__(name):
    # COMPILED is computed on first use: it imports the core (pyarrow), which `import amqpcap` does not
    if name == "COMPILED":
        return bool(compiled_modules())
    raise AttributeError(f"module 'amqpcap' has no attribute {name!r}")


def load(path, **kwargs):
    """Load a dissect output directory (or dissect a capture to a cache) as pandas tables."""
    from amqpcap.analysis.tables import load as _load

    return _load(path, **kwargs)


def dissect_packets(packets, out=None, **options):
    """Dissect an iterable of scapy packets (``rdpcap``, ``sniff``, crafted) into the tables ``load``
    returns; see :func:`amqpcap.scapy.source.dissect_packets`."""
    from amqpcap.scapy.source import dissect_packets as _dissect_packets

    return _dissect_packets(packets, out, **options)
