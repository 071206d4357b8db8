"""AMQP 1.0 messages in the transit and RPC pairings (analysis.latency).

Transit pairs a 1.0 transfer by its message-id like a 0-9-1 publish or delivery (a 1.0
publisher and a 0-9-1 consumer of one queue pair too).  RPC needs two things of 1.0:
a reply-to is an address, not a routing key (:func:`reply_key`), and a reply names its
request by the request's message-id when the request has no correlation-id
(:func:`with_request_ids`).
"""

from __future__ import annotations

import pandas as pd


def reply_key(reply_to: str) -> str:
    """The routing key a 1.0 reply-to address names (``/queue/Q`` -> ``Q``, ``/exchange/E/K`` ->
    ``K``: what a reply's messages row carries), else the address itself.  A 0-9-1 responder
    publishing to ``Q`` and a 1.0 one sending to ``/queue/Q`` both answer ``/queue/Q``.  The
    dissect's row builder (and the AMQP stack it imports) is loaded here, at a 1.0 reply-to, not
    by every ``stats`` and ``report``."""
    from amqpcap.records.rows_1_0 import exchange_key

    key = exchange_key(reply_to)[1]
    return key if key else reply_to


def with_request_ids(msgs: pd.DataFrame) -> pd.DataFrame:
    """``msgs`` with each 1.0 request that has a reply-to but no correlation-id given its
    message-id as ``correlation_id``: a 1.0 reply names its request by the request's message-id
    (the specification's request-response pattern), or by the request's correlation-id when it
    has one.  Other rows unchanged; ``msgs`` itself when no row needs it."""
    if len(msgs) == 0 or not {"version", "message_id", "reply_to", "correlation_id"} <= set(msgs.columns):
        return msgs
    corr = msgs["correlation_id"]
    fill = (
        (msgs["version"].astype(object) == "1.0")
        & msgs["reply_to"].notna()
        & (msgs["reply_to"].astype(object) != "")
        & (corr.isna() | (corr.astype(object) == ""))
        & msgs["message_id"].notna()
    ).to_numpy(dtype=bool)
    if not fill.any():
        return msgs
    ids = corr.astype(object).to_numpy(copy=True)
    ids[fill] = msgs["message_id"].astype(object).to_numpy()[fill]
    return msgs.assign(correlation_id=pd.Series(ids, index=msgs.index, dtype=corr.dtype))
