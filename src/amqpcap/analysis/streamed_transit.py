"""Broker transit of a dissect output in one pass over its ``messages`` table (what ``stats``
reports of it: the transit latencies, deliveries and redeliveries), holding per publish and
delivery its time, packet and message id (an Arrow string, about 15 bytes), not the table.

The rules are :func:`amqpcap.analysis.message_transit.transit`'s for messages paired by their
message id (:func:`~amqpcap.analysis.message_transit.by_message_id`); a capture with publishes
without an id (paired by content) raises :class:`~amqpcap.analysis.pairing.NotStreamed`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from amqpcap.analysis._common import NAT, latency_ms
from amqpcap.analysis.batches import PASS_ROWS, tables
from amqpcap.analysis.message_transit import DELIVER, PUBLISH, by_message_id
from amqpcap.analysis.pairing import NotStreamed
from amqpcap.analysis.streamed_rpc import column, int_values, texts

__all__ = ["streamed_transit"]

_COLUMNS = ["direction", "method", "message_id", "ts", "frame_number", "redelivered"]


def _is(col, values) -> np.ndarray:
    col = col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col
    return pc.fill_null(pc.is_in(col, value_set=pa.array(list(values), pa.string())), False).to_numpy(
        zero_copy_only=False
    )


def _rows(directory) -> tuple:
    """Publishes' and deliveries' columns (dicts of numpy arrays) and their message ids (one Arrow
    array: the publishes', then the deliveries')."""
    pubs: dict = {"ts": []}
    dels: dict = {"ts": [], "frame": [], "redelivered": []}
    ids: dict = {"p": [], "d": []}
    for b in tables(directory, "messages", _COLUMNS, PASS_ROWS):
        d, m = column(b, "direction"), column(b, "method")
        is_pub = _is(d, ("c2s",)) & _is(m, PUBLISH)
        is_del = _is(d, ("s2c",)) & _is(m, DELIVER)
        mid = column(b, "message_id")
        mid = mid.cast(pa.string()) if pa.types.is_dictionary(mid.type) else mid
        if not texts(mid.filter(pa.array(is_pub))).all():
            raise NotStreamed("publishes without a message id: paired by content")
        ts = int_values(column(b, "ts"), NAT)
        pubs["ts"].append(ts[is_pub])
        ids["p"].append(mid.filter(pa.array(is_pub)))
        if np.any(is_del):
            frame = int_values(column(b, "frame_number"), 0)
            red = pc.fill_null(column(b, "redelivered"), False).to_numpy(zero_copy_only=False)
            dels["ts"].append(ts[is_del])
            dels["frame"].append(frame[is_del])
            dels["redelivered"].append(red[is_del])
            ids["d"].append(mid.filter(pa.array(is_del)))
    pubs = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in pubs.items()}
    dels = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in dels.items()}
    both = ids["p"] + ids["d"]
    return pubs, dels, pa.concat_arrays(both) if both else pa.array([], pa.string())


def streamed_transit(directory) -> tuple[np.ndarray, dict]:
    """The transit latencies (ms: each publish's first delivery) and the ``deliveries`` /
    ``redeliveries`` counts of :func:`~amqpcap.analysis.message_transit.transit` on the dissect
    output ``directory``."""
    pubs, dels, ids = _rows(directory)
    n_pub, n_del = len(pubs["ts"]), len(dels["ts"])
    if n_pub == 0 or n_del == 0:
        return np.zeros(0), {"deliveries": 0, "redeliveries": 0}
    enc = pc.dictionary_encode(ids)
    del ids
    codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    n_codes = len(enc.dictionary)
    del enc
    p_code, d_code = codes[:n_pub], codes[n_pub:]
    pairs = by_message_id(pubs["ts"], dels["ts"], p_code, d_code, np.ones(n_pub, dtype=bool), n_codes)
    del codes, p_code, d_code
    pid, did = pairs[:, 0], pairs[:, 1]
    n = len(pid)
    o = np.lexsort((np.arange(n), dels["frame"][did], dels["ts"][did], pid))
    pid, did = pid[o], did[o]
    first = np.r_[True, pid[1:] != pid[:-1]] if n else np.zeros(0, dtype=bool)
    counts = {"deliveries": int(n), "redeliveries": int(np.count_nonzero(dels["redelivered"][did]))}
    return latency_ms(pubs["ts"][pid[first]], dels["ts"][did[first]]), counts
