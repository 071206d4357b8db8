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


def _u32(b, p: int, big: bool) -> int:
    """The 32-bit field at ``p``."""
    # (compiled: the top byte is a uint32_t, so that its shift by 24 is unsigned)
    if big:
        top = b[p]
        return (top << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]
    top = b[p + 3]
    return (top << 24) | (b[p + 2] << 16) | (b[p + 1] << 8) | b[p]


M64 = (1 << 64) - 1  # (compiled: 64-bit arithmetic wraps by itself)
#: splitmix64's constants (its finaliser's multipliers, the golden-ratio increment): ``mix`` and
#: ``pair_key`` here, and spark/ranges.py's whole-array keys, which must give the same keys
MIX_K1, MIX_K2, GOLDEN = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0x9E3779B97F4A7C15


def mix(x: int) -> int:
    """splitmix64's finaliser."""
    x ^= x >> 30
    x = (x * MIX_K1) & M64
    x ^= x >> 27
    x = (x * MIX_K2) & M64
    return x ^ (x >> 31)


def pair_key(e1: int, e2: int) -> int:
    """The conversation key of an unordered pair of endpoints (64-bit ints); never 0."""
    lo, hi = (e1, e2) if e1 < e2 else (e2, e1)
    k = mix((lo * GOLDEN + hi) & M64)
    return k if k else 1


def ipv4_key(b, p: int, cap: int, lt: int) -> int:
    """The key of the IPv4/TCP packet of ``cap`` bytes at ``p`` of ``b`` on an Ethernet (1) or
    Linux cooked (113) link; 0 for any other (``link.parse_packet`` keys it)."""
    if lt == 1:
        hlen, et = 14, 12
    elif lt == 113:
        hlen, et = 16, 14
    else:
        return 0
    if cap < hlen + 24:
        return 0
    ip = p + hlen
    ihl = (b[ip] & 15) * 4
    if (b[p + et] << 8) | b[p + et + 1] != 0x0800 or b[ip] >> 4 != 4 or ihl < 20 or b[ip + 9] != 6:
        return 0
    if cap < hlen + ihl + 4:
        return 0
    t = ip + ihl
    src, dst = _u32(b, ip + 12, True), _u32(b, ip + 16, True)  # (compiled: 64-bit, to shift)
    return pair_key((src << 16) | (b[t] << 8) | b[t + 1], (dst << 16) | (b[t + 2] << 8) | b[t + 3])


def pcap_records(
    buf, end: int, hl: int, big: bool, mul: int, lt: int, starts, caps, wires, ts, keys
) -> tuple:
    """``(n, pos)``: the pcap records (link type ``lt``) wholly in ``buf`` that start before
    ``end`` (``hl``: a record header's length; ``mul``: ns per fraction unit) written to the
    columns ``starts`` (the offset of each in ``buf``), ``caps``, ``wires``, ``ts`` (ns) and
    ``keys`` (``ipv4_key``), each with room for ``len(buf) // hl + 1``; how many, and where the
    walk stopped."""
    blen = len(buf)
    pos = n = 0
    while pos < end and pos + hl <= blen:
        caplen = _u32(buf, pos + 8, big)
        nxt = pos + hl + caplen
        if nxt > blen:
            break
        starts[n], caps[n], wires[n] = pos, caplen, _u32(buf, pos + 12, big)
        sec, frac = _u32(buf, pos, big), _u32(buf, pos + 4, big)  # (compiled: int64, not to wrap)
        ts[n] = sec * 1_000_000_000 + frac * mul
        keys[n] = ipv4_key(buf, pos + hl, caplen, lt)
        n += 1
        pos = nxt
    return n, pos


def packets(data, ords, ts, lts, offs, caps, wires, lo: int, base: int) -> list:
    """The packets of index entries (given by their columns) as the reader yields them,
    ``(number, ts, linktype, data, wirelen)``: number ``ord + base + 1``, the bytes from ``data``
    (which holds the capture from its offset ``lo``).  Python ints, as the reader's (run as
    Python, the columns' items are numpy scalars: a uint32 ``ord`` plus ``base`` would wrap)."""
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
        out.append((int(ords[i]) + base + 1, int(ts[i]), int(lts[i]), chunk, int(wires[i])))
    return out


# The loops, chosen once at import: the ones above, or the same compiled.  The compiled module
# chooses nothing: it is what is chosen.
SOURCE_STAMP, _fast = compiled.twin("fastranges", AMQPCAP_SOURCE_STAMP if COMPILED else None)  # noqa: F821 (stamp.pxd)
compiled_records = _fast.pcap_records if _fast is not None else None
compiled_packets = _fast.packets if _fast is not None else None
