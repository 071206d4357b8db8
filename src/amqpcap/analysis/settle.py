"""Settlement pairing as array operations: each opened item (a publish awaiting its confirm, a
delivery awaiting its ack) and the first later event of its scope that settles it.

A pairing walk in Python costs a few microseconds a row, seconds on the millions of rows of a big
capture; these take the same decisions a column at a time.  The rules (those of the 0-8 / 0-9 /
0-9-1 walks in :mod:`amqpcap.analysis.latency`, and of any protocol settling by tag):

* an item is opened at a position with a tag, in a scope (a channel between two reopenings);
* a settling event at a later position of the same scope settles it when it names its tag, or
  when it covers it: ``multiple`` with a tag of 0 or at least the item's, or settles everything
  outstanding (``all``);
* the first such event settles it; an item still open when its scope ends stays unsettled;
* an item reopened with the same tag while still open is replaced (``replaced``): the earlier
  one is never settled nor reported.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["first_settlement", "scopes", "codes", "ALL"]

ALL = np.iinfo(np.int64).max  # the tag of an event that covers every tag (multiple with tag 0, recover)


def _next_exact(g, tag, pos, s_g, s_tag, s_pos) -> np.ndarray:
    """For each item (scope ``g``, ``tag``, ``pos``), the index of the first event of the same scope
    and tag after ``pos`` (-1: none)."""
    n, k = len(g), len(s_g)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0 or k == 0:
        return out
    # (scope, tag) as one dense number, then (number, position) as one int64 sorted once
    lo = min(int(tag.min()), int(s_tag.min()))
    span = max(int(tag.max()), int(s_tag.max())) - lo + 1
    if (int(max(g.max(), s_g.max())) + 1) * span < 2**62:
        pair = pd.factorize(np.concatenate([g * span + (tag - lo), s_g * span + (s_tag - lo)]))[0]
    else:  # (tags far apart: numbered through a hash of the pairs)
        pair = pd.MultiIndex.from_arrays([np.r_[g, s_g], np.r_[tag, s_tag]]).factorize()[0]
    pair = pair.astype(np.int64)
    width = int(max(pos.max(), s_pos.max())) + 1
    ev = pair[n:] * width + s_pos
    order = np.argsort(ev, kind="stable")
    ev = ev[order]
    c = np.searchsorted(ev, pair[:n] * width + pos, side="right")
    ok = c < k
    c = np.minimum(c, k - 1)
    ok &= ev[c] // width == pair[:n]
    out[ok] = order[c[ok]]
    return out


def _next_same(g, tag, pos) -> np.ndarray:
    """For each item, the index of the next item of the same scope and tag (by position, each item's
    its own: rows; -1: none): :func:`_next_exact` of the items against themselves, by one sort of
    the items alone (no second copy of them to search)."""
    n = len(g)
    out = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return out
    lo, span = int(tag.min()), int(tag.max()) - int(tag.min()) + 1
    width = int(pos.max()) + 1
    if (int(g.max()) + 1) * span * width < 2**62:  # (scope, tag, position) as one int64, one sort
        key = (g * span + (tag - lo)) * width + pos
        order = np.argsort(key, kind="stable")
        key = key[order] // width
    else:
        key = pd.MultiIndex.from_arrays([g, tag]).factorize()[0]
        order = np.lexsort((pos, key))
        key = key[order]
    same = key[1:] == key[:-1]
    del key
    out[order[:-1][same]] = order[1:][same]
    return out


def _first_covering(g, tag, pos, m_g, m_tag, m_pos) -> np.ndarray:
    """For each item, the index of the first covering event (``m_*``: scope, tag, position; tag
    :data:`ALL` for every tag) of its scope after ``pos`` whose tag is at least the item's (-1: none)."""
    n, k = len(g), len(m_g)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0 or k == 0:
        return out
    order = np.lexsort((m_pos, m_g))
    eg, etag, epos = m_g[order], m_tag[order], m_pos[order]
    # the events of an item's scope after it: [start, end) in the sorted events
    width = max(int(epos.max()), int(pos.max())) + 2  # one int64 per (scope, position)
    flat = eg * width + epos
    start = np.searchsorted(flat, g * width + pos, side="right")
    end = np.searchsorted(flat, g * width + (width - 1), side="right")
    del flat
    # the scopes' running maxima of the tags (as ranks, scope by scope: one nondecreasing key):
    # when every event of the scope before the item is below its tag, the first event after it
    # reaching the tag is the first where the running maximum does
    values, rank = np.unique(etag, return_inverse=True)
    rank = rank.reshape(-1).astype(np.int64)
    u = len(values)
    running = np.maximum.accumulate(eg * u + rank)
    want = g * u + np.searchsorted(values, tag, side="left")
    before = np.where(start > 0, running[np.maximum(start - 1, 0)], -1)
    simple = (start == 0) | (before < want) | (eg[np.maximum(start - 1, 0)] != g)
    s = np.where(simple, np.searchsorted(running, want, side="left"), start)
    hard = np.flatnonzero(~simple)
    if len(hard):
        s[hard] = _jump(etag, start[hard], end[hard], tag[hard])
    hit = (s < end) & (etag[np.minimum(s, k - 1)] >= tag)
    out[hit] = order[s[hit]]
    return out


def _jump(etag: np.ndarray, start: np.ndarray, end: np.ndarray, tag: np.ndarray) -> np.ndarray:
    """For each query, the first index in [start, end) whose ``etag`` is at least ``tag`` (``end``:
    none): a jump table of maxima over doubling spans, skipping spans wholly below the tag."""
    levels = [etag]
    width = 1
    while width * 2 <= len(etag):
        prev = levels[-1]
        levels.append(np.maximum(prev[: len(prev) - width], prev[width:]))
        width *= 2
    s = start.copy()
    for lv in range(len(levels) - 1, -1, -1):
        span = 1 << lv
        table = levels[lv]
        can = s + span <= end
        at = np.where(can, s, 0)
        can &= table[np.minimum(at, len(table) - 1)] < tag
        s = np.where(can, s + span, s)
    return s


def _mapped(at: np.ndarray, values: np.ndarray, missing=-1) -> np.ndarray:
    """``values[at]`` where ``at`` >= 0, else ``missing``."""
    out = np.full(len(at), missing, dtype=np.int64)
    ok = at >= 0
    out[ok] = values[at[ok]]
    return out


def first_settlement(items: dict, events: dict) -> tuple[np.ndarray, np.ndarray]:
    """``items``: ``g`` (scope number), ``tag``, ``pos`` (int64 arrays); ``events``: ``g``, ``tag``,
    ``pos``, ``multiple`` (bool: covers every tag up to its own; a tag of :data:`ALL` covers all).
    Returns, per item, the index of the event that settled it (-1: none) and whether the item was
    replaced before being settled (:mod:`module doc <amqpcap.analysis.settle>`)."""
    g, tag, pos = (np.asarray(items[k], dtype=np.int64) for k in ("g", "tag", "pos"))
    s_g, s_tag, s_pos = (np.asarray(events[k], dtype=np.int64) for k in ("g", "tag", "pos"))
    # scopes numbered densely: (scope, position) pairs fit one int64 (positions: rows of a table)
    _, dense = np.unique(np.concatenate([g, s_g]), return_inverse=True)
    g, s_g = dense[: len(g)].astype(np.int64), dense[len(g) :].astype(np.int64)
    mult = np.asarray(events["multiple"], dtype=bool)
    exact_at = np.flatnonzero(~mult)
    cover_at = np.flatnonzero(mult)
    a = _next_exact(g, tag, pos, s_g[exact_at], s_tag[exact_at], s_pos[exact_at])
    a = _mapped(a, exact_at)
    b = _first_covering(g, tag, pos, s_g[cover_at], s_tag[cover_at], s_pos[cover_at])
    b = _mapped(b, cover_at)
    big = np.iinfo(np.int64).max
    pa_, pb_ = _mapped(a, s_pos, big), _mapped(b, s_pos, big)
    settled = np.where(pa_ <= pb_, a, b)  # (one event is not both)
    at = np.minimum(pa_, pb_)
    # replaced: the next item of the same scope and tag opened before this one was settled
    replaced = _mapped(_next_same(g, tag, pos), pos, big) < at
    return np.where(replaced, -1, settled), replaced


def codes(s: pd.Series) -> np.ndarray:
    """int64 codes of a column's values (missing: -1, a value of its own)."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        return s.cat.codes.to_numpy().astype(np.int64)
    if pd.api.types.is_integer_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
        return s.to_numpy(dtype=np.int64, na_value=-1)
    return pd.factorize(s, use_na_sentinel=True)[0].astype(np.int64)


def scopes(m: pd.DataFrame, opens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's channel (capture, tcp_stream, channel: a number) and scope (a number per channel
    and count of the ``opens`` rows, e.g. channel.open, up to and including it): a reopened
    channel starts a new scope."""
    chan = np.zeros(len(m), dtype=np.int64)
    for c in ("capture", "tcp_stream", "channel"):
        code = codes(m[c])
        chan = chan * (int(code.max()) + 2 if len(code) else 1) + code + 1
    chan = pd.factorize(chan)[0].astype(np.int64)
    epoch = pd.Series(opens.astype(np.int64)).groupby(chan).cumsum().to_numpy()
    return chan, pd.factorize(chan * (int(epoch.max()) + 1 if len(epoch) else 1) + epoch)[0].astype(np.int64)
