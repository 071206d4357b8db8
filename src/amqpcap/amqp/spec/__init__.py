"""Generated protocol tables, one module per version (see tools/gen_spec.py)."""

from __future__ import annotations

import importlib

from amqpcap.amqp.spec._types import MethodSpec

_MODULES = {"0-8": "v0_8", "0-9": "v0_9", "0-9-1": "v0_9_1", "0-10": "v0_10"}
VERSIONS = tuple(_MODULES)


def get(version: str):
    """The table module of ``version`` ("0-8", "0-9", "0-9-1", "0-10")."""
    try:
        return importlib.import_module(f"amqpcap.amqp.spec.{_MODULES[version]}")
    except KeyError:
        raise ValueError(f"unknown AMQP version {version!r}") from None


def reply_code_info(version: str | None, code: int | None):
    """(name, "soft" | "hard" | None) of a reply / error code, or None if unknown.

    For 0-10 the connection.close, session.detach and execution.exception code
    tables are consulted in that order (their ranges do not collide much;
    the most specific table is the caller's business via v0_10 directly).
    """
    if code is None:
        return None
    mod = get(version or "0-9-1")
    for table in ("REPLY_CODES", "CLOSE_CODES", "ERROR_CODES", "DETACH_CODES"):
        t = getattr(mod, table, None)
        if t and code in t:
            return t[code]
    if version not in (None, "0-9-1"):
        return reply_code_info("0-9-1", code)
    return None


# 0-10 commands whose "destination" names a subscription, not an exchange.
SUBSCRIPTION_COMMANDS = frozenset(
    (
        "message.subscribe",
        "message.cancel",
        "message.set-flow-mode",
        "message.flow",
        "message.stop",
        "message.flush",
    )
)


def names_subscription(name: str, direction, version) -> bool:
    """Whether the ``destination`` argument of method ``name`` names a subscription (a consumer
    tag), not an exchange: 0-10's subscription commands, and a transfer the broker delivers
    (``direction`` 1: server to client)."""
    return name in SUBSCRIPTION_COMMANDS or (
        name == "message.transfer" and direction == 1 and version == "0-10"
    )


__all__ = ["MethodSpec", "get", "reply_code_info", "names_subscription", "SUBSCRIPTION_COMMANDS", "VERSIONS"]
