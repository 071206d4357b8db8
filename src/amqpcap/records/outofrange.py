"""Rows whose time is a packet's that no timestamp column can hold: written with a null time.

A packet time outside what an int64 of nanoseconds holds (years 1677 to 2262: huge pcapng
ticks or ``if_tsoffset``, a scapy packet's ``time``) is reported by its source as a
``timestamp-out-of-range`` anomaly, and the packet is read with the previous packet's time, so
that reassembly, liveness and ordering keep doing arithmetic on a number.  The time of every row
that packet makes is not that number: a row's time column is null where the column naming its
packet (``FRAME_OF``) names such a packet.  The Parquet writers apply the rule to each record
batch (``null_times``), ``show`` to each line, the Dissector to each connection row (whose
end time names no packet column).
"""

from __future__ import annotations

KIND = "timestamp-out-of-range"
# A time column -> the column holding the number of the packet it is the time of.
FRAME_OF = {"ts": "frame_number", "close_ts": "close_frame"}


class OutOfRange:
    """The packet numbers of one source whose time was out of range, read from the source's
    ``anomalies`` as they come (a source reports a packet's anomaly before yielding it, so the
    rows of a packet find its number here)."""

    __slots__ = ("anomalies", "seen", "found")

    def __init__(self, source) -> None:
        self.anomalies = getattr(source, "anomalies", ())
        self.seen = 0
        self.found: set = set()

    def numbers(self) -> set:
        a = self.anomalies
        n = len(a)
        if n < self.seen:  # the source was read again from the start
            self.seen = 0
        for i in range(self.seen, n):
            if a[i][2] == KIND:
                self.found.add(a[i][0])
        self.seen = n
        return self.found

    def __contains__(self, number) -> bool:
        return number in self.numbers()


def null_times(batch, captures: dict):
    """``batch`` with its time columns null in the rows whose packet column names a packet whose
    time was out of range (``captures``: capture name -> its OutOfRange)."""
    names = batch.schema.names
    pairs = [(t, f) for t, f in FRAME_OF.items() if t in names and f in names]
    found = {c: sorted(o.numbers()) for c, o in captures.items()}
    found = {c: n for c, n in found.items() if n}
    if not pairs or not found or "capture" not in names or not batch.num_rows:
        return batch
    import pyarrow as pa
    import pyarrow.compute as pc

    capture = batch.column(names.index("capture"))
    if pa.types.is_dictionary(capture.type):
        capture = capture.cast(pa.string())
    columns = list(batch.columns)
    for t, f in pairs:
        mask = None
        for name, numbers in found.items():
            m = pc.and_(
                pc.equal(capture, name),
                pc.is_in(batch.column(names.index(f)), value_set=pa.array(numbers, pa.int64())),
            )
            mask = m if mask is None else pc.or_(mask, m)
        mask = pc.fill_null(mask, False)
        if not pc.any(mask).as_py():
            continue
        i = names.index(t)
        columns[i] = pc.if_else(mask, pa.scalar(None, columns[i].type), columns[i])
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)
