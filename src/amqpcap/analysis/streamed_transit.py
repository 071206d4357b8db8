"""Broker transit of a dissect output (what ``stats`` reports of it: the transit latencies,
deliveries and redeliveries) with memory bounded by a partition, not by the table.

A pass over ``messages`` writes each publish and delivery (its place, time, packet and message
id) to one of several Arrow IPC files in a temporary directory, chosen by a 64-bit hash of the
message id, so that all the rows of an id land in the same file; the files are then paired one
at a time, the ids compared exactly.  What is held at the end is the latency values.

The rules are :func:`amqpcap.analysis.message_transit.transit`'s for messages paired by their
message id (:func:`~amqpcap.analysis.message_transit.by_message_id`); a capture with publishes
without an id (paired by content) raises :class:`~amqpcap.analysis.pairing.NotStreamed`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from amqpcap.analysis._common import NAT, latency_ms, temp_files
from amqpcap.analysis.batches import BATCH_ROWS, is_one_of, plain_strings, tables
from amqpcap.analysis.growing import id_hashes
from amqpcap.analysis.message_transit import DELIVER, PUBLISH, by_message_id
from amqpcap.analysis.pairing import NotStreamed
from amqpcap.analysis.streamed_rpc import column, int_values, texts
from amqpcap.analysis.tables import count_rows

__all__ = ["streamed_transit"]

_COLUMNS = ["direction", "method", "message_id", "ts", "frame_number", "redelivered"]
WRITE_ROWS = BATCH_ROWS  # rows read and gathered before they are split among the files
PART_ROWS = 1 << 18  # message rows a partition is sized for: what pairing one file holds
# Files open at once (one writer each, under the open-files limit): past PART_ROWS * MAX_PARTS
# message rows, a partition holds more rows
MAX_PARTS = 256
_WHAT = "the transit pass"  # (named by an error of its temporary files)

_SCHEMA = pa.schema(
    [
        ("pub", pa.bool_()),
        ("idx", pa.int64()),  # the row's place among the publishes / the deliveries
        ("ts", pa.int64()),
        ("frame", pa.int64()),
        ("redelivered", pa.bool_()),
        ("id", pa.string()),
    ]
)


def _partition(directory, folder: str, parts: int) -> tuple[list[str], int]:
    """Publishes and deliveries with an id written to ``parts`` files of ``folder`` by their id's
    hash; returns the files and the number of publishes."""
    paths = [os.path.join(folder, f"{k}.arrows") for k in range(parts)]
    # (an ExitStack closes every writer opened, each on its own, whatever fails)
    with contextlib.ExitStack() as stack:
        writers = []
        for p in paths:
            with temp_files(_WHAT):
                writers.append(pa.ipc.new_stream(p, _SCHEMA))
            stack.callback(_close, writers[-1])
        n_pub = n_del = 0
        held: list = []  # rows of a few row groups, split and written together (fewer, larger writes)
        for b in tables(directory, "messages", _COLUMNS, WRITE_ROWS):
            d, m = column(b, "direction"), column(b, "method")
            is_pub = is_one_of(d, ("c2s",)) & is_one_of(m, PUBLISH)
            is_del = is_one_of(d, ("s2c",)) & is_one_of(m, DELIVER)
            mid = column(b, "message_id")
            mid = plain_strings(mid)
            has = texts(mid)
            if not has[is_pub].all():
                raise NotStreamed("publishes without a message id: paired by content")
            idx = np.where(is_pub, np.cumsum(is_pub) - 1 + n_pub, np.cumsum(is_del) - 1 + n_del)
            n_pub += int(np.count_nonzero(is_pub))
            n_del += int(np.count_nonzero(is_del))
            keep = np.flatnonzero((is_pub | is_del) & has)
            if not len(keep):
                continue
            ids = mid.take(pa.array(keep))
            red = pc.fill_null(column(b, "redelivered"), False).to_numpy(zero_copy_only=False)
            rows = pa.table(
                {
                    "pub": is_pub[keep],
                    "idx": idx[keep],
                    "ts": int_values(column(b, "ts"), NAT)[keep],
                    "frame": int_values(column(b, "frame_number"), 0)[keep],
                    "redelivered": red[keep],
                    "id": ids,
                },
                schema=_SCHEMA,
            )
            held.append(rows)
            if sum(len(r) for r in held) >= WRITE_ROWS:
                with temp_files(_WHAT):
                    _write(pa.concat_tables(held), writers)
                held.clear()
        if held:
            with temp_files(_WHAT):
                _write(pa.concat_tables(held), writers)
    return paths, n_pub


def _close(writer) -> None:
    with temp_files(_WHAT):
        writer.close()


def _write(rows: pa.Table, writers: list) -> None:
    """Each row to the writer of its id's hash."""
    part = (id_hashes(rows.column("id").combine_chunks()) % np.uint64(len(writers))).astype(np.int64)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(len(writers) + 1))
    for k in np.flatnonzero(np.diff(bounds)).tolist():
        writers[k].write_table(rows.take(pa.array(order[bounds[k] : bounds[k + 1]])))


def _pair_file(path: str, ms: np.ndarray, paired: np.ndarray) -> tuple[int, int]:
    """Pairs the publishes and deliveries of one partition file: each paired publish's
    first-delivery latency into ``ms`` at its place, marked in ``paired``; returns (deliveries,
    redeliveries) paired."""
    with pa.memory_map(path) as src:
        t = pa.ipc.open_stream(src).read_all()
    if not t.num_rows:
        return 0, 0
    is_pub = t.column("pub").to_numpy()
    codes = pc.dictionary_encode(t.column("id")).combine_chunks().indices.to_numpy()
    n_codes = int(codes.max()) + 1
    ts, frame = t.column("ts").to_numpy(), t.column("frame").to_numpy()
    red, idx = t.column("redelivered").to_numpy(), t.column("idx").to_numpy()
    del t
    p, d = np.flatnonzero(is_pub), np.flatnonzero(~is_pub)
    if not len(p) or not len(d):
        return 0, 0
    pairs = by_message_id(ts[p], ts[d], codes[p], codes[d], np.ones(len(p), dtype=bool), n_codes)
    pid, did = pairs[:, 0], pairs[:, 1]
    n = len(pid)
    o = np.lexsort((np.arange(n), frame[d][did], ts[d][did], pid))
    pid, did = pid[o], did[o]
    first = np.r_[True, pid[1:] != pid[:-1]] if n else np.zeros(0, dtype=bool)
    at = idx[p][pid[first]]
    ms[at] = latency_ms(ts[p][pid[first]], ts[d][did[first]])
    paired[at] = True
    return n, int(np.count_nonzero(red[d][did]))


def streamed_transit(directory) -> tuple[np.ndarray, dict]:
    """The transit latencies (ms: each publish's first delivery, in the publishes' order) and the
    ``deliveries`` / ``redeliveries`` counts of :func:`~amqpcap.analysis.message_transit.transit`
    on the dissect output ``directory``."""
    parts = min(MAX_PARTS, max(1, -(-count_rows(directory, "messages") // PART_ROWS)))
    counts = {"deliveries": 0, "redeliveries": 0}
    # (no usable temporary folder: tempfile tried TMPDIR, then /tmp and the like)
    with temp_files(_WHAT):
        temp = tempfile.TemporaryDirectory(prefix="amqpcap-transit-")
    with temp as folder:
        paths, n_pub = _partition(directory, folder, parts)
        ms, paired = np.empty(n_pub), np.zeros(n_pub, dtype=bool)  # by publish: 9 bytes each
        for path in paths if n_pub else ():
            got = _pair_file(path, ms, paired)
            counts["deliveries"] += got[0]
            counts["redeliveries"] += got[1]
            os.remove(path)
    if not counts["deliveries"]:
        return np.zeros(0), {"deliveries": 0, "redeliveries": 0}
    return ms if paired.all() else ms[paired], counts  # (no copy when every publish was delivered)
