"""Publisher confirms: each publish on a confirm channel paired with the broker's ack or nack.

docs/analysis.md has the exact definitions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from amqpcap.analysis._common import (
    STR,
)
from amqpcap.analysis.pairing import (
    BASE_COLS,
    PAIR_FIELDS,
    SCOPE_OPEN,
    SETTLE_COLUMNS,
    finish,
    needed_sources,
    result_columns,
    scope_end,
    settled_pair,
    sources,
    taken_frame,
    with_content_completion,
)
from amqpcap.analysis.settle import ALL, first_settlement, scopes
from amqpcap.analysis.tables import as_tables

# publisher confirms

CONFIRM_COLS = dict(
    BASE_COLS, delivery_tag="Int64", outcome=STR, multiple="boolean", exchange=STR, routing_key=STR
)
_CONFIRM_FIELDS = PAIR_FIELDS + ("exchange", "routing_key")


# the methods confirms reads (of ``methods``, and of ``messages`` for content timing)
CONFIRM_METHODS = ("confirm.select", "basic.publish", "basic.ack", "basic.nack") + SCOPE_OPEN


def confirms(t, columns=None) -> pd.DataFrame:
    """Publisher confirms: after confirm.select on a channel, the n-th basic.publish (c2s)
    -> the basic.ack / basic.nack (s2c) whose delivery-tag covers n.

    ``multiple`` covers every outstanding n <= tag; tag 0 with ``multiple`` covers
    every outstanding publish.  ``delivery_tag`` is n.  ``outcome``: ``ack``,
    ``nack`` or ``unconfirmed`` (never settled before the channel was reopened
    or the capture ended; NaN latency).  The publish is timed at the packet that
    completed its content (``request_frame``).  ``columns``: only these columns of the result
    (a caller that summarises it reads a few; a big capture's full frame is hundreds of MB).
    """
    t = as_tables(t)
    cols = SETTLE_COLUMNS + [
        "exchange",
        "routing_key",
    ]
    m = with_content_completion(t, CONFIRM_METHODS, cols)
    if len(m) == 0:
        return finish([], CONFIRM_COLS)[result_columns(CONFIRM_COLS, columns)]
    p, r, tags, outcomes, multiples = _confirm_pairs(m)
    if not len(p):
        return finish([], CONFIRM_COLS)[result_columns(CONFIRM_COLS, columns)]
    src = {
        **settled_pair(p, r, tags, outcomes, multiples),
        "exchange": ("exchange", p),
        "routing_key": ("routing_key", p),
    }
    sort_by = ["capture", "tcp_stream", "channel", "request_frame", "delivery_tag"]
    src = needed_sources(src, columns, sort_by)
    outcomes = multiples = tags = None  # (freed: src holds what is still read)
    m = sources(m, src)
    return taken_frame(m, src, CONFIRM_COLS, sort_by, columns)


def _confirm_pairs(m: pd.DataFrame):
    """The publishes of ``m`` (wire order) counted on a channel in confirm mode (after a c2s
    confirm.select; a reopened channel starts over) and their basic.ack / nack (s2c): positions
    in ``m`` of each publish and of its settlement (-1: unconfirmed), its sequence number, outcome
    and ``multiple``, in the order a walk of ``m`` settles them (see :mod:`.settle`)."""
    method, direction = m["method"], m["direction"]
    c2s = (direction == "c2s").fillna(False).to_numpy(dtype=bool)
    s2c = (direction == "s2c").fillna(False).to_numpy(dtype=bool)
    chan, g = scopes(m, method.isin(SCOPE_OPEN).to_numpy(dtype=bool))
    pos = np.arange(len(m), dtype=np.int64)
    select = (method == "confirm.select").fillna(False).to_numpy(dtype=bool) & c2s
    big = np.iinfo(np.int64).max
    on_from = np.full(int(g.max()) + 1 if len(g) else 0, big)
    np.minimum.at(on_from, g[select], pos[select])  # a scope's first confirm.select
    publish = (method == "basic.publish").fillna(False).to_numpy(dtype=bool)
    pub = np.flatnonzero(publish & c2s & (pos > on_from[g]))
    n = _ranks(g[pub])
    tag = m["delivery_tag"].to_numpy(dtype=np.int64, na_value=-1)
    has_tag = m["delivery_tag"].notna().to_numpy(dtype=bool)
    is_ack = (method == "basic.ack").fillna(False).to_numpy(dtype=bool)
    ack = np.flatnonzero(method.isin(("basic.ack", "basic.nack")).to_numpy(dtype=bool) & s2c & has_tag)
    multiple = m["multiple"].fillna(False).to_numpy(dtype=bool)[ack]
    by = first_settlement(
        {"g": g[pub], "tag": n, "pos": pub},
        {
            "g": g[ack],
            "tag": np.where(multiple & (tag[ack] == 0), ALL, tag[ack]),
            "pos": ack,
            "multiple": multiple,
        },
    )[0]
    done = by >= 0
    resp = np.full(len(pub), -1, dtype=np.int64)
    resp[done] = ack[by[done]]
    outcome = np.full(len(pub), "unconfirmed", dtype=object)
    outcome[done] = np.where(is_ack[resp[done]], "ack", "nack")
    mult = np.full(len(pub), None, dtype=object)
    mult[done] = multiple[by[done]].tolist()
    # the walk's order: by the settling packet; the unconfirmed when their channel was reopened, or
    # at the end by their channel's confirm.select
    when = np.where(done, resp, scope_end(chan, g, pos, big)[g[pub]])
    order = np.lexsort((pub, np.where(when == big, on_from[g[pub]], 0), when))
    return pub[order], resp[order], n[order], outcome[order], mult[order]


def _ranks(g: np.ndarray) -> np.ndarray:
    """1, 2, 3 ... within each run of equal numbers of ``g`` (in order)."""
    return pd.Series(np.ones(len(g), dtype=np.int64)).groupby(g).cumsum().to_numpy()
