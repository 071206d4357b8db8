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
``MAX_OUT_OF_ORDER`` per direction; beyond that the hole is declared lost.
A hole is also declared as soon as the peer acknowledges bytes the capture
never showed (they were on the wire, not in the capture), and at the end.
"""
from __future__ import annotations

MASK = 0xFFFFFFFF
HALF = 1 << 31
MAX_OUT_OF_ORDER = 4 << 20


class Stream:
    __slots__ = ("direction", "sink", "started", "next_seq", "next_off", "ooo", "ooo_bytes", "acked_off",
                 "retransmitted", "delivered", "gaps", "gap_bytes", "fin", "packets")

    def __init__(self, direction: int, sink) -> None:
        self.direction = direction
        self.sink = sink
        self.started = False
        self.next_seq = 0  # sequence number of the next expected byte
        self.next_off = 0  # stream offset of the next expected byte
        self.ooo: dict[int, tuple[bytes, int]] = {}  # offset -> (captured bytes, bytes cut by snaplen)
        self.ooo_bytes = 0
        self.acked_off = -1  # highest offset the peer acknowledged
        self.retransmitted = 0
        self.delivered = 0
        self.gaps = 0
        self.gap_bytes = 0
        self.fin = False
        self.packets = 0

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
            self._deliver(payload, missing, packet, ts)
            if self.ooo:
                self._drain(packet, ts)
        elif d < 0:
            if d + total <= 0:
                self.retransmitted += total
                return
            # Overlaps what we have: keep only the new tail.
            cut = -d
            self.retransmitted += cut
            if cut < len(payload):
                self._deliver(payload[cut:], missing, packet, ts)
            else:
                self._deliver(b"", missing - (cut - len(payload)), packet, ts)
            if self.ooo:
                self._drain(packet, ts)
        else:
            off = self.next_off + d
            old = self.ooo.get(off)
            if old is None or len(old[0]) + old[1] < total:
                if old is not None:
                    self.ooo_bytes -= len(old[0])
                self.ooo[off] = (payload, missing)
                self.ooo_bytes += len(payload)
            else:
                self.retransmitted += total
            if self.ooo_bytes > MAX_OUT_OF_ORDER or off <= self.acked_off:
                self._force(self.acked_off if self.ooo_bytes <= MAX_OUT_OF_ORDER else None, packet, ts)

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
            if self.ooo and min(self.ooo) <= off:
                self._force(off, packet, ts)

    def close(self, packet: int, ts: int) -> None:
        """End of the conversation or capture: whatever is still held goes out after its hole."""
        if self.ooo:
            self._force(None, packet, ts)

    # -- internals --------------------------------------------------------------------

    def _deliver(self, payload: bytes, missing: int, packet: int, ts: int) -> None:
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

    def _drain(self, packet: int, ts: int) -> None:
        ooo = self.ooo
        while ooo:
            off = min(ooo)
            if off > self.next_off:
                return
            payload, missing = ooo.pop(off)
            self.ooo_bytes -= len(payload)
            end = off + len(payload) + missing
            if end <= self.next_off:
                self.retransmitted += len(payload) + missing
                continue
            cut = self.next_off - off
            if cut < len(payload):
                self._deliver(payload[cut:], missing, packet, ts)
            else:
                self._deliver(b"", missing - (cut - len(payload)), packet, ts)

    def _force(self, upto: int | None, packet: int, ts: int) -> None:
        """Declare holes lost: all of them (upto None) or those before held data at or below ``upto``."""
        while self.ooo:
            off = min(self.ooo)
            if upto is not None and off > upto:
                return
            if off > self.next_off:
                size = off - self.next_off
                self.gaps += 1
                self.gap_bytes += size
                self.sink.gap(self.direction, self.next_off, size, packet, ts)
                self.next_off = off
                self.next_seq = (self.next_seq + size) & MASK
            self._drain(packet, ts)
