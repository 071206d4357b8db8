"""The row filters ``show`` and ``live`` share: their options, the check of a ``--method`` value
against the methods of every AMQP version, and the match of a method name."""

from __future__ import annotations

import argparse
import difflib
import functools
import importlib

#: names show prints that are no method of a spec
PSEUDO_METHODS = ("heartbeat", "protocol-header")


@functools.cache
def method_names() -> frozenset:
    """Every method, command and control name of every version (``basic.publish``,
    ``message.transfer``, ``session.attach``, ...), and show's pseudo-methods."""
    from amqpcap.amqp import spec

    names = set(PSEUDO_METHODS)
    for version in spec.VERSIONS:
        mod = spec.get(version)
        for table in ("METHODS", "COMMANDS", "CONTROLS"):
            names.update(m.name for m in getattr(mod, table, {}).values())
    try:  # AMQP 1.0's performatives, where that version is decoded
        names.update(importlib.import_module("amqpcap.amqp.spec.v1_0").METHOD_NAMES.values())
    except ImportError:
        pass
    return frozenset(names)


def matches(method: str, patterns) -> bool:
    """``method`` (lower case) is one of ``patterns`` (lower case) or in a class one names
    (``basic`` or ``basic.``)."""
    return any(
        method == p or (p.endswith(".") and method.startswith(p)) or method.startswith(p + ".")
        for p in patterns
    )


def method_pattern(text: str) -> str:
    """A ``--method`` value, lower case: a method name or class of some version, else a usage
    error naming the closest ones."""
    p = text.strip().lower()
    names = method_names()
    if p and any(matches(m, (p,)) for m in names):
        return p
    classes = {n.split(".")[0] for n in names if "." in n}
    close = difflib.get_close_matches(p, sorted(names | classes), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; e.g. basic.publish, basic. or queue"
    raise argparse.ArgumentTypeError(f"no AMQP method or class is named {text!r}{hint}")


def add_arguments(p: argparse.ArgumentParser, arguments: bool = True) -> None:
    """``--stream``, ``--channel``, ``--method`` (and with ``arguments`` ``--exchange``,
    ``--queue``, ``--routing-key``) on ``p``."""
    p.add_argument("--stream", type=int, action="append", help="only this tcp stream (repeatable)")
    p.add_argument("--channel", type=int, action="append", help="only this channel (repeatable)")
    p.add_argument(
        "--method",
        action="append",
        type=method_pattern,
        help="only methods matching this name or class, any case, e.g. basic.publish, "
        "Basic.Publish or basic. (repeatable; a name no version has is an error)",
    )
    if arguments:
        p.add_argument("--exchange", action="append", help="only methods with this exchange (repeatable)")
        p.add_argument("--queue", action="append", help="only methods with this queue (repeatable)")
        p.add_argument(
            "--routing-key", action="append", help="only methods with this routing key (repeatable)"
        )


__all__ = ["PSEUDO_METHODS", "method_names", "matches", "method_pattern", "add_arguments"]
