"""Application RPC of a dissect output in one pass over its ``messages`` table (what ``stats``
reports of it: the latencies and the missing count), holding, of the rows that carry a
correlation id and a reply-to or a routing key, a few numbers each and the correlation ids as
Arrow strings (about 15 bytes an id), not the table.

The rules are :func:`amqpcap.analysis.rpc_replies.rpc`'s, applied by its own walk
(:func:`~amqpcap.analysis.rpc_replies.pair_replies`) to the same rows in the same order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from amqpcap.analysis._common import NAT, ROW_KEYS, latency_ms
from amqpcap.analysis.batches import PASS_ROWS, Codes, tables
from amqpcap.analysis.rpc_replies import pair_replies, reply_key
from amqpcap.records.schema import SCHEMAS

__all__ = ["streamed_rpc", "column", "texts", "wire_then_time"]

_COLUMNS = [c for c in ROW_KEYS if c not in ("channel", "method")] + [
    "correlation_id",
    "reply_to",
    "routing_key",
    "message_id",
]


def texts(col) -> np.ndarray:
    """Which values of a string column (plain or dictionary) are a non-empty string."""
    col = col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col
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
    corr = corr.cast(pa.string()) if pa.types.is_dictionary(corr.type) else corr
    is10 = version == "1.0"
    if not np.any(is10):
        return corr
    mid = column(b, "message_id")
    mid = mid.cast(pa.string()) if pa.types.is_dictionary(mid.type) else mid
    fill = is10 & texts(column(b, "reply_to")) & ~texts(corr) & mid.is_valid().to_numpy(zero_copy_only=False)
    return pc.if_else(pa.array(fill), mid, corr)


def _rows(directory) -> tuple:
    """The rows that can request or answer: their keys (dict of numpy arrays, ``pos`` the row's
    position in the table) and their correlation ids as one Arrow array."""
    strings = {c: Codes() for c in ("capture", "direction", "version")}
    keys = _KeyCodes()
    got: dict = {}
    ids = []
    base = 0
    for b in tables(directory, "messages", _COLUMNS, PASS_ROWS):
        n = b.num_rows
        v = strings["version"].encode(column(b, "version"))
        vals = strings["version"].values
        corr = _correlation_ids(b, np.array(vals + [None], dtype=object)[v])
        has_rt, has_rk = texts(column(b, "reply_to")), texts(column(b, "routing_key"))
        keep = texts(corr) & (has_rt | has_rk)
        if np.any(keep):
            sel = pa.array(keep)
            part = {
                "pos": base + np.flatnonzero(keep),
                "cap": strings["capture"].encode(column(b, "capture"))[keep],
                "stream": int_values(column(b, "tcp_stream"), -1)[keep],
                "frame": int_values(column(b, "frame_number"), -1)[keep],
                "offset": int_values(column(b, "stream_offset"), -1)[keep],
                "ts": int_values(column(b, "ts"), NAT)[keep],
                "dir": strings["direction"].encode(column(b, "direction"))[keep],
                "has_rt": has_rt[keep],
                "has_rk": has_rk[keep],
                "req": keys.encode(column(b, "reply_to").filter(sel), v[keep], vals),
                "rep": keys.encode(column(b, "routing_key").filter(sel), np.full(int(keep.sum()), -1), vals),
            }
            for k, a in part.items():
                got.setdefault(k, []).append(a)
            ids.append(corr.filter(sel))
        base += n
    rows = {k: np.concatenate(a) for k, a in got.items()}
    return rows, (pa.concat_arrays(ids) if ids else pa.array([], pa.string())), strings


def wire_then_time(rows: dict, capture_values: list) -> np.ndarray:
    """The order of ``ordered`` (capture, TCP stream, packet, stream offset, table position;
    missing values first) then a stable sort by time and packet (missing packet: 0)."""
    rank = np.argsort(np.argsort(np.array(capture_values, dtype=object), kind="stable"))
    cap = np.where(rows["cap"] < 0, -1, np.r_[rank, -1][rows["cap"]])
    frame0 = np.where(rows["frame"] < 0, 0, rows["frame"])
    return np.lexsort((rows["pos"], rows["offset"], rows["frame"], rows["stream"], cap, frame0, rows["ts"]))


def streamed_rpc(directory) -> tuple[np.ndarray, dict]:
    """The latencies (ms: the requests answered) and the ``missing`` count of
    :func:`~amqpcap.analysis.rpc_replies.rpc` on the dissect output ``directory``."""
    rows, ids, strings = _rows(directory)
    if not len(ids):
        return np.zeros(0), {"missing": 0}
    order = wire_then_time(rows, strings["capture"].values)
    corr = pc.dictionary_encode(ids.take(pa.array(order))).indices.to_numpy(zero_copy_only=False)
    del ids
    width = int(corr.max()) + 2
    req_k = rows["req"][order] * width + corr + 1
    rep_k = rows["rep"][order] * width + corr + 1
    d = rows["dir"][order]
    c2s = d == strings["direction"].index.get("c2s", -2)
    s2c = d == strings["direction"].index.get("s2c", -2)
    asks, answers = rows["has_rt"][order], rows["has_rk"][order]
    req_at, resp_at, _, status = pair_replies(c2s, s2c, asks, answers, req_k, rep_k)
    ok = status != "missing"
    ts = rows["ts"][order]
    return latency_ms(ts[req_at[ok]], ts[resp_at[ok]]), {"missing": int(np.count_nonzero(~ok))}
