# cython: annotation_typing=False, boundscheck=False, wraparound=False
"""The capture splitter's per-packet loops, compiled (spark/ranges.py uses them when built).

compiled.py's part "fastranges" is this module built by Cython with the types of
spark/fastranges.pxd.  ranges.py's pure-Python path does the same work whole-array with numpy
(its reference); these are the two loops C does faster than numpy: the walk from pcap record to
record (each start depends on the one before) and making a bucket's packet tuples.  Run as
Python they give the same results (the tests run them both ways), slowly.
"""

from __future__ import annotations

from amqpcap import compiled

# True in this module built by Cython as compiled.py's part "fastranges" (with
# spark/fastranges.pxd's types), which is imported under the part's name
COMPILED = __name__ == compiled.PARTS["fastranges"].module


def record_starts(buf, end: int, hl: int, big: bool, starts) -> tuple[int, int]:
    """``(n, pos)``: the offsets of the pcap records wholly in ``buf`` that start before ``end``
    (``hl``: a record header's length) written to ``starts`` (room for ``len(buf) // hl + 1``);
    how many, and where the walk stopped."""
    blen = len(buf)
    pos = n = 0
    while pos < end and pos + hl <= blen:
        q = pos + 8
        if big:
            caplen = (buf[q] << 24) | (buf[q + 1] << 16) | (buf[q + 2] << 8) | buf[q + 3]
        else:
            caplen = (buf[q + 3] << 24) | (buf[q + 2] << 16) | (buf[q + 1] << 8) | buf[q]
        nxt = pos + hl + caplen
        if nxt > blen:
            break
        starts[n] = pos
        n += 1
        pos = nxt
    return n, pos


def packets(data, ords, ts, lts, offs, caps, wires, lo: int, base: int) -> list:
    """The packets of index entries (given by their columns) as the reader yields them,
    ``(number, ts, linktype, data, wirelen)``: number ``ord + base + 1``, the bytes from ``data``
    (which holds the capture from its offset ``lo``)."""
    out = []
    dlen = len(data)
    for i in range(len(ords)):
        off, cap = offs[i], caps[i]
        if off < lo or off - lo + cap > dlen:
            raise ValueError("index entry outside the capture's bytes")
        at = off - lo
        if COMPILED:
            chunk = _bytes_at(data, at, cap)  # noqa: F821 (C: from the buffer, no slice object; fastranges.pxd)
        else:
            chunk = bytes(data[at : at + cap])
        out.append((ords[i] + base + 1, ts[i], lts[i], chunk, wires[i]))
    return out


# The loops, chosen once at import: the ones above, or the same compiled.  The compiled module
# chooses nothing: it is what is chosen.
if COMPILED:
    SOURCE_STAMP = AMQPCAP_SOURCE_STAMP.decode("ascii")  # noqa: F821 (the build's, from stamp.pxd)
_fast = None if COMPILED else compiled.select("fastranges")
compiled_starts = _fast.record_starts if _fast is not None else None
compiled_packets = _fast.packets if _fast is not None else None
