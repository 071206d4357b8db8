# cython: annotation_typing=False
"""Per-direction TCP reassembly: segments in, ordered bytes and explicit gaps out.

Written here because scapy's TCPSession fills lost segments with zeros and
breaks when one segment holds several frames.  A ``Stream`` hands its output
to a sink with two calls:

    sink.data(direction, offset, data, packet, ts)
    sink.gap(direction, offset, size, packet, ts)

``offset`` is the byte position in this direction's stream (0 = first byte
after the SYN, or the first byte seen when the capture starts mid-stream),
64-bit, so sequence-number wraparound is invisible to the sink.

Buffering is bounded: only out-of-order bytes are held, at most
``MAX_OUT_OF_ORDER`` bytes in at most ``MAX_OUT_OF_ORDER_SEGMENTS`` segments
per direction (each held segment costs ~200 bytes of bookkeeping whatever its
size); beyond that the hole is declared lost.  A hole is also declared when
data arrives at or beyond a point the peer acknowledged (the bytes before it
were on the wire, not in the capture), and at the end -- up to the FIN/RST
sequence number when the caller reports it with ``fin()``.
"""

from __future__ import annotations

import heapq

from amqpcap import compiled

# True in this module built by Cython as compiled.py's part "fastreassembly" (with tcp/fastreassembly.pxd's
# types), which is imported under the part's name (no import of Cython's shadow module: it loads typing)
COMPILED = __name__ == compiled.PARTS["fastreassembly"].module

MASK = 0xFFFFFFFF
HALF = 1 << 31
MAX_OUT_OF_ORDER = 4 << 20
MAX_OUT_OF_ORDER_SEGMENTS = 16384


class Stream:
    __slots__ = (
        "direction",
        "sink",
        "started",
        "next_seq",
        "next_off",
        "ooo",
        "ooo_heap",
        "ooo_bytes",
        "acked_off",
        "delivered",
        "gaps",
        "gap_bytes",
        "fin_off",
    )

    def __init__(self, direction: int, sink) -> None:
        self.direction = direction
        self.sink = sink
        self.started = False
        self.next_seq = 0  # sequence number of the next expected byte
        self.next_off = 0  # stream offset of the next expected byte
        self.ooo: dict[int, tuple[bytes, int]] = {}  # offset -> (captured bytes, bytes cut by snaplen)
        self.ooo_heap: list[int] = []  # the keys of ooo, smallest first (draining is O(log n) per segment)
        self.ooo_bytes = 0
        self.acked_off = -1  # highest offset the peer acknowledged
        self.delivered = 0
        self.gaps = 0
        self.gap_bytes = 0
        self.fin_off: int | None = None  # stream offset of the FIN (or RST) sequence number, if reported

    def syn(self, seq: int) -> None:
        if not self.started:
            self.started = True
            self.next_seq = (seq + 1) & MASK

    def segment(self, seq: int, payload: bytes, missing: int, packet: int, ts: int) -> None:
        """A segment with ``payload`` captured and ``missing`` more bytes cut by the snapshot length."""
        total = len(payload) + missing
        if not total:
            return
        if not self.started:
            self.started = True
            self.next_seq = seq
        d = (seq - self.next_seq) & MASK
        if d >= HALF:
            d -= 1 << 32
        if d == 0:
            self.deliver(payload, missing, packet, ts)
            if self.ooo:
                self.drain(packet, ts)
        elif d < 0:
            if d + total <= 0:
                return  # a retransmission of bytes already delivered
            # Overlaps what we have: keep only the new tail.
            cut = -d
            if cut < len(payload):
                self.deliver(payload[cut:], missing, packet, ts)
            else:
                self.deliver(b"", missing - (cut - len(payload)), packet, ts)
            if self.ooo:
                self.drain(packet, ts)
        else:
            off = self.next_off + d
            old = self.ooo.get(off)
            if old is None or len(old[0]) + old[1] < total:
                if old is None:
                    heapq.heappush(self.ooo_heap, off)
                else:
                    self.ooo_bytes -= len(old[0])  # the longer copy covers it
                self.ooo[off] = (payload, missing)
                self.ooo_bytes += len(payload)
            full = self.ooo_bytes > MAX_OUT_OF_ORDER or len(self.ooo) > MAX_OUT_OF_ORDER_SEGMENTS
            if full or off <= self.acked_off:
                self.force(None if full else self.acked_off, packet, ts)

    def ack(self, ack: int, packet: int, ts: int) -> None:
        """The peer acknowledged up to ``ack``: bytes before it were on the wire."""
        if not self.started:
            return
        d = (ack - self.next_seq) & MASK
        if d >= HALF or d == 0:
            return
        off = self.next_off + d
        if off > self.acked_off:
            self.acked_off = off
            if self.ooo and self.ooo_heap[0] <= off:
                self.force(off, packet, ts)

    def fin(self, seq: int, rst: bool = False) -> None:
        """This direction's FIN (or RST, ``rst``) carries ``seq``: every byte before it was sent.

        A FIN takes one sequence number of its own, so a RST after it carries the FIN's
        number + 1 without a byte between them.  Nothing is declared yet (a retransmission
        may still fill a hole); ``close()`` declares whatever is missing before it.
        """
        if not self.started:
            return
        d = (seq - self.next_seq) & MASK
        if d >= HALF:
            return
        off = self.next_off + d
        if rst and self.fin_off is not None and off == self.fin_off + 1:
            return  # (a RST ends the conversation: an end reported before it was a FIN)
        if self.fin_off is None or off > self.fin_off:
            self.fin_off = off

    def close(self, packet: int, ts: int) -> None:
        """End of the conversation or capture: whatever is still held goes out after its hole,
        and bytes before a reported FIN/RST that never arrived are declared lost."""
        if self.ooo:
            self.force(None, packet, ts)
        if self.fin_off is not None and self.fin_off > self.next_off:
            self.hole(self.fin_off - self.next_off, packet, ts)

    # -- the steps segment/ack/fin are made of -------------------------------------------

    def deliver(self, payload: bytes, missing: int, packet: int, ts: int) -> None:
        n = len(payload)
        if n:
            self.sink.data(self.direction, self.next_off, payload, packet, ts)
            self.delivered += n
        self.next_off += n + missing
        self.next_seq = (self.next_seq + n + missing) & MASK
        if missing:
            self.gaps += 1
            self.gap_bytes += missing
            self.sink.gap(self.direction, self.next_off - missing, missing, packet, ts)

    def hole(self, size: int, packet: int, ts: int) -> None:
        self.gaps += 1
        self.gap_bytes += size
        self.sink.gap(self.direction, self.next_off, size, packet, ts)
        self.next_off += size
        self.next_seq = (self.next_seq + size) & MASK

    def drain(self, packet: int, ts: int) -> None:
        ooo = self.ooo
        heap = self.ooo_heap
        while ooo:
            off = heap[0]
            if off > self.next_off:
                return
            heapq.heappop(heap)
            payload, missing = ooo.pop(off)
            self.ooo_bytes -= len(payload)
            end = off + len(payload) + missing
            if end <= self.next_off:
                continue  # already delivered
            cut = self.next_off - off  # the part already delivered
            if cut < len(payload):
                self.deliver(payload[cut:], missing, packet, ts)
            else:
                self.deliver(b"", missing - (cut - len(payload)), packet, ts)

    def force(self, upto: int | None, packet: int, ts: int) -> None:
        """Declare holes lost: all of them (upto None) or those before held data at or below ``upto``."""
        while self.ooo:
            off = self.ooo_heap[0]
            if upto is not None and off > upto:
                return
            if off > self.next_off:
                self.hole(off - self.next_off, packet, ts)
            self.drain(packet, ts)


# What new conversations are given, chosen once at import: ``Stream``, or the same class compiled
# (compiled.py's part "fastreassembly": this module built by Cython with the types of
# tcp/fastreassembly.pxd).  The compiled module chooses nothing: it is what is chosen.
SOURCE_STAMP, _fast = compiled.twin("fastreassembly", AMQPCAP_SOURCE_STAMP if COMPILED else None)  # noqa: F821 (stamp.pxd)
new_stream = _fast.Stream if _fast is not None else Stream


def compiled_in_use() -> bool:
    """True if new conversations are reassembled by the compiled stream."""
    return _fast is not None
