"""Application RPC of a dissect output in two passes over its ``messages`` table (what ``stats``
reports of it: the latencies and the missing count).  The first holds a 64-bit hash of each key a
reply may carry; the second keeps, of the rows that may pair (possible replies, and the requests
whose key hash is among those), a few numbers each and the correlation ids' bytes: the requests
no reply can answer are counted, not kept.

The rules are :func:`amqpcap.analysis.rpc_replies.rpc`'s, applied by its own walk
(:func:`~amqpcap.analysis.rpc_replies.pair_replies`) to the same rows in the same order; a hash
only narrows which rows the walk sees, ids are compared exactly.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from amqpcap.analysis import growing
from amqpcap.analysis._common import NAT, ROW_KEYS, latency_ms
from amqpcap.analysis.batches import BATCH_ROWS, PASS_ROWS, Codes, plain_strings, tables
from amqpcap.analysis.growing import Columns, HashSet, Strings, id_hashes
from amqpcap.analysis.rpc_replies import pair_replies, reply_key
from amqpcap.records.schema import SCHEMAS

__all__ = ["streamed_rpc", "column", "texts", "wire_then_time"]

_COLUMNS = [c for c in ROW_KEYS if c not in ("channel", "method")] + [
    "correlation_id",
    "reply_to",
    "routing_key",
    "message_id",
]
# what the first pass reads: which rows ask and answer, and their keys
_PASS1 = ["direction", "version", "correlation_id", "reply_to", "routing_key", "message_id"]


def texts(col) -> np.ndarray:
    """Which values of a string column (plain or dictionary) are a non-empty string."""
    col = plain_strings(col)
    return pc.fill_null(pc.not_equal(col, ""), False).to_numpy(zero_copy_only=False)


def column(b: pa.Table, name: str, table: str = "messages"):
    """Column ``name`` of batch ``b``, all null when the file has no such column."""
    if name in b.column_names:
        return b.column(name).combine_chunks()
    return pa.nulls(b.num_rows, SCHEMAS[table].field(name).type)


def int_values(col, missing: int) -> np.ndarray:
    return pc.fill_null(col.cast(pa.int64()), missing).to_numpy(zero_copy_only=False)


class _KeyCodes:
    """Reply keys (:func:`~amqpcap.analysis.rpc_replies.reply_key`) as ints, 0 for none: the key
    of each distinct (string, version) is computed once."""

    def __init__(self):
        self.codes: dict = {None: 0}
        self.done: dict = {}

    def encode(self, col, versions: np.ndarray, version_values: list) -> np.ndarray:
        enc = col if pa.types.is_dictionary(col.type) else pc.dictionary_encode(col)
        local = enc.dictionary.to_pylist()
        idx = pc.fill_null(enc.indices, len(local)).to_numpy(zero_copy_only=False).astype(np.int64)
        combo = idx * (len(version_values) + 1) + (versions + 1)
        uniq, inv = np.unique(combo, return_inverse=True)
        out = np.empty(len(uniq), dtype=np.int64)
        for j, u in enumerate(uniq.tolist()):
            s, v = divmod(u, len(version_values) + 1)
            text = local[s] if s < len(local) else None
            version = version_values[v - 1] if v else None
            got = self.done.get((text, version))
            if got is None:
                key = reply_key(text, version)
                got = self.done[(text, version)] = self.codes.setdefault(key, len(self.codes))
            out[j] = got
        return out[inv.reshape(-1)]


def _correlation_ids(b: pa.Table, version) -> pa.Array:
    """The batch's correlation ids, a 1.0 request's message-id standing for a missing one (as
    :func:`~amqpcap.analysis.amqp10_pairing.with_request_ids`)."""
    corr = column(b, "correlation_id")
    corr = plain_strings(corr)
    is10 = version == "1.0"
    if not np.any(is10):
        return corr
    mid = column(b, "message_id")
    mid = plain_strings(mid)
    fill = is10 & texts(column(b, "reply_to")) & ~texts(corr) & mid.is_valid().to_numpy(zero_copy_only=False)
    return pc.if_else(pa.array(fill), mid, corr)


class _Batch:
    """What both passes read of a batch of ``messages``: directions, the rows that ask (a
    correlation id and a reply-to) and answer (a correlation id and a routing key), and the
    (reply key, correlation id) hashes of the rows asked for."""

    def __init__(self, b: pa.Table, strings: dict, keys: _KeyCodes):
        self.b = b
        self.v = strings["version"].encode(column(b, "version"))
        self.vals = strings["version"].values
        self.corr = _correlation_ids(b, np.array(self.vals + [None], dtype=object)[self.v])
        has_corr = texts(self.corr)
        self.has_rt, self.has_rk = texts(column(b, "reply_to")), texts(column(b, "routing_key"))
        self.asks, self.answers = has_corr & self.has_rt, has_corr & self.has_rk
        d = strings["direction"].encode(column(b, "direction"))
        self.dir = d
        self.c2s = d == strings["direction"].index.get("c2s", -2)
        self.s2c = d == strings["direction"].index.get("s2c", -2)
        self.keys = keys
        # a c2s row that asks is a request, never a reply; any other answering row may be a reply
        self.replies = self.answers & (self.c2s | self.s2c) & ~(self.c2s & self.asks)

    def req_hashes(self, rows: np.ndarray) -> np.ndarray:
        """(reply key, correlation id) hashes of the rows ``rows`` (bool mask) as requests."""
        sel = pa.array(rows)
        codes = self.keys.encode(column(self.b, "reply_to").filter(sel), self.v[rows], self.vals)
        return _mix(id_hashes(self.corr.filter(sel)), codes)

    def rep_hashes(self, rows: np.ndarray) -> np.ndarray:
        """(routing key, correlation id) hashes of the rows ``rows`` as replies."""
        sel = pa.array(rows)
        n = int(rows.sum())
        codes = self.keys.encode(column(self.b, "routing_key").filter(sel), np.full(n, -1), self.vals)
        return _mix(id_hashes(self.corr.filter(sel)), codes)


def _mix(h: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """One hash of (key code, id hash): equal pairs, equal hashes."""
    return (h ^ (codes.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))) & growing.HASH_MASK


def _live_keys(directory, strings: dict, keys: _KeyCodes) -> tuple:
    """First pass: the hashes of the keys a reply may carry and of the s2c requests' keys (a
    request is paired only when its key is among them), and the number of c2s requests."""
    live = HashSet()
    c2s_asks = 0
    for b in tables(directory, "messages", _PASS1, BATCH_ROWS):  # (no per-row Python work)
        x = _Batch(b, strings, keys)
        c2s_asks += int(np.count_nonzero(x.c2s & x.asks))
        if np.any(x.replies):
            live.add(x.rep_hashes(x.replies))
        if np.any(x.s2c & x.asks):
            live.add(x.req_hashes(x.s2c & x.asks))
    return live, c2s_asks


_KEPT = {
    "pos": np.int64,
    "cap": np.int32,
    "stream": np.int64,
    "frame": np.int64,
    "offset": np.int64,
    "ts": np.int64,
    "dir": np.int32,
    "has_rt": bool,
    "has_rk": bool,
    "req": np.int64,
    "rep": np.int64,
}


def _rows(directory, strings: dict, keys: _KeyCodes, live: HashSet) -> tuple:
    """Second pass: the rows that may pair (every possible reply, every s2c request, the c2s
    requests whose key hash is live), their keys (numpy columns, ``pos`` the row's position in
    the table) and their correlation ids (exact strings); and the number of c2s requests left
    out (none of their keys' hashes is a reply's: they stay missing)."""
    rows = Columns(_KEPT)
    ids = Strings()
    dropped = 0
    base = 0
    for b in tables(directory, "messages", _COLUMNS, PASS_ROWS):
        x = _Batch(b, strings, keys)
        c2s_req = x.c2s & x.asks
        keep = x.replies | (x.s2c & x.asks)
        if np.any(c2s_req):
            at = np.flatnonzero(c2s_req)
            hit = live.contains(x.req_hashes(c2s_req))
            keep[at[hit]] = True
            dropped += int(np.count_nonzero(~hit))
        if np.any(keep):
            sel = pa.array(keep)
            n = int(keep.sum())
            rows.append(
                {
                    "pos": base + np.flatnonzero(keep),
                    "cap": strings["capture"].encode(column(b, "capture"))[keep],
                    "stream": int_values(column(b, "tcp_stream"), -1)[keep],
                    "frame": int_values(column(b, "frame_number"), -1)[keep],
                    "offset": int_values(column(b, "stream_offset"), -1)[keep],
                    "ts": int_values(column(b, "ts"), NAT)[keep],
                    "dir": x.dir[keep],
                    "has_rt": x.asks[keep],
                    "has_rk": x.answers[keep],
                    "req": keys.encode(column(b, "reply_to").filter(sel), x.v[keep], x.vals),
                    "rep": keys.encode(column(b, "routing_key").filter(sel), np.full(n, -1), x.vals),
                }
            )
            ids.append(x.corr.filter(sel))
        base += b.num_rows
    return rows, ids, dropped


def wire_then_time(rows: dict, capture_values: list) -> np.ndarray:
    """The order of ``ordered`` (capture, TCP stream, packet, stream offset, table position;
    missing values first) then a stable sort by time and packet (missing packet: 0)."""
    rank = np.argsort(np.argsort(np.array(capture_values, dtype=object), kind="stable"))
    cap = np.where(rows["cap"] < 0, -1, np.r_[rank, -1][rows["cap"]])
    frame0 = np.where(rows["frame"] < 0, 0, rows["frame"])
    return np.lexsort((rows["pos"], rows["offset"], rows["frame"], rows["stream"], cap, frame0, rows["ts"]))


def streamed_rpc(directory) -> tuple[np.ndarray, dict]:
    """The latencies (ms: the requests answered) and the ``missing`` count of
    :func:`~amqpcap.analysis.rpc_replies.rpc` on the dissect output ``directory``: a first pass
    finds the keys a reply may carry (8 bytes a key), a second keeps only the rows that may pair."""
    strings = {c: Codes() for c in ("capture", "direction", "version")}
    keys = _KeyCodes()
    live, c2s_asks = _live_keys(directory, strings, keys)
    if not len(live):  # no reply, no s2c request: every c2s request is missing
        return np.zeros(0), {"missing": c2s_asks}
    rows, ids, dropped = _rows(directory, strings, keys, live)
    del live
    if not len(rows):
        return np.zeros(0), {"missing": dropped}
    kept = {k: rows[k] for k in _KEPT}
    order = wire_then_time(kept, strings["capture"].values)
    corr = pc.dictionary_encode(ids.array().take(pa.array(order))).indices.to_numpy(zero_copy_only=False)
    del ids
    width = int(corr.max()) + 2
    req_k = kept["req"][order] * width + corr + 1
    rep_k = kept["rep"][order] * width + corr + 1
    d = kept["dir"][order]
    c2s = d == strings["direction"].index.get("c2s", -2)
    s2c = d == strings["direction"].index.get("s2c", -2)
    asks, answers = kept["has_rt"][order], kept["has_rk"][order]
    req_at, resp_at, _, status = pair_replies(c2s, s2c, asks, answers, req_k, rep_k)
    ok = status != "missing"
    ts = kept["ts"][order]
    missing = int(np.count_nonzero(~ok)) + dropped
    return latency_ms(ts[req_at[ok]], ts[resp_at[ok]]), {"missing": missing}
