"""Unit tests of the per-direction TCP reassembler (amqpcap.tcp.reassembly.Stream), run with the
class in use (``new_stream``): the reference, or the same module compiled (the compiled pass).

The sink records every call; ``covered()`` checks the invariant every test
relies on: data and gap calls tile the stream without holes or overlaps, in
increasing offset order, and gaps are never filled with bytes.
"""

from __future__ import annotations

import random
import sys
import tracemalloc

import pytest

from amqpcap.tcp import reassembly
from amqpcap.tcp.reassembly import MASK, Stream


def Stream_(direction, sink):  # noqa: N802 - the class of the run (reference or compiled)
    return reassembly.new_stream(direction, sink)


# the module whose limits the streams of the run read (reassembly, or the same code compiled)
IMPL = sys.modules[reassembly.new_stream.__module__]


ISN = 1000


class Sink:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def data(self, direction, offset, data, packet, ts):
        assert isinstance(data, (bytes, bytearray, memoryview)) and len(data) > 0
        self.calls.append(("data", direction, offset, bytes(data), packet, ts))

    def gap(self, direction, offset, size, packet, ts):
        assert size > 0
        self.calls.append(("gap", direction, offset, size, packet, ts))

    # -- views -------------------------------------------------------------------------

    def covered(self) -> int:
        """Assert the output tiles [0, end) in order; return end."""
        pos = None
        for kind, _d, off, what, _p, _t in self.calls:
            if pos is None:
                pos = off
            assert off == pos, f"{kind} at {off}, expected {pos}: {self.calls}"
            pos += len(what) if kind == "data" else what
        return pos or 0

    def bytes(self) -> bytes:
        """The stream as delivered, gaps shown as None markers (never zeros)."""
        return b"".join(c[3] for c in self.calls if c[0] == "data")

    def gaps(self) -> list[tuple[int, int]]:
        return [(c[2], c[3]) for c in self.calls if c[0] == "gap"]

    def data_calls(self) -> list[tuple[int, bytes]]:
        return [(c[2], c[3]) for c in self.calls if c[0] == "data"]


def new(direction: int = 0, isn: int | None = ISN):
    sink = Sink()
    s = Stream_(direction, sink)
    if isn is not None:
        s.syn(isn)
    return s, sink


def seq(n: int, isn: int = ISN) -> int:
    """Sequence number of stream byte ``n`` after a SYN at ``isn``."""
    return (isn + 1 + n) & MASK


# -- ordering ------------------------------------------------------------------------------


def test_in_order_segments_are_delivered_with_stream_offsets():
    s, sink = new(direction=1)
    s.segment(seq(0), b"abc", 0, 1, 10)
    s.segment(seq(3), b"defg", 0, 2, 20)
    s.segment(seq(7), b"h", 0, 3, 30)
    assert sink.calls == [
        ("data", 1, 0, b"abc", 1, 10),
        ("data", 1, 3, b"defg", 2, 20),
        ("data", 1, 7, b"h", 3, 30),
    ]
    assert s.delivered == 8 and s.gaps == 0 and s.gap_bytes == 0


def test_empty_segment_produces_nothing():
    s, sink = new()
    s.segment(seq(0), b"", 0, 1, 0)
    s.segment(seq(0), b"ab", 0, 2, 0)
    assert sink.data_calls() == [(0, b"ab")]


def test_out_of_order_segments_are_delivered_in_sequence_order():
    s, sink = new()
    s.segment(seq(6), b"ghi", 0, 1, 0)
    s.segment(seq(3), b"def", 0, 2, 0)
    assert sink.calls == []  # nothing can be delivered before byte 0
    assert s.ooo_bytes == 6
    s.segment(seq(0), b"abc", 0, 3, 0)
    assert sink.data_calls() == [(0, b"abc"), (3, b"def"), (6, b"ghi")]
    # the packet that filled the hole completed everything
    assert {c[4] for c in sink.calls} == {3}
    assert s.ooo == {} and s.ooo_bytes == 0
    assert s.delivered == 9 and s.gaps == 0


@pytest.mark.parametrize("seed", range(20))
def test_any_arrival_order_yields_the_original_stream(seed):
    rnd = random.Random(seed)
    payload = bytes(rnd.randrange(256) for _ in range(3000))
    cuts = sorted(rnd.sample(range(1, len(payload)), 25))
    pieces = [(a, payload[a:b]) for a, b in zip([0] + cuts, cuts + [len(payload)])]
    # add a few duplicates and re-segmented overlaps, then shuffle
    extra = [rnd.choice(pieces) for _ in range(5)]
    for _ in range(5):
        a = rnd.randrange(len(payload) - 10)
        b = min(len(payload), a + rnd.randrange(1, 400))
        extra.append((a, payload[a:b]))
    arrivals = pieces + extra
    rnd.shuffle(arrivals)
    s, sink = new(isn=0xFFFFFF00)  # and across the wrap, for good measure
    for i, (off, data) in enumerate(arrivals):
        s.segment(seq(off, 0xFFFFFF00), data, 0, i + 1, 0)
    assert sink.gaps() == []
    assert sink.covered() == len(payload)
    assert sink.bytes() == payload
    assert s.delivered == len(payload)
    assert s.ooo == {} and s.ooo_bytes == 0


# -- retransmission and overlap ------------------------------------------------------------


def test_exact_retransmission_is_delivered_once():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.segment(seq(0), b"abc", 0, 2, 0)
    s.segment(seq(3), b"de", 0, 3, 0)
    s.segment(seq(3), b"de", 0, 4, 0)
    assert sink.data_calls() == [(0, b"abc"), (3, b"de")]
    assert s.delivered == 5


def test_retransmission_of_a_held_out_of_order_segment_is_held_once():
    s, sink = new()
    s.segment(seq(3), b"def", 0, 1, 0)
    s.segment(seq(3), b"def", 0, 2, 0)
    assert s.ooo_bytes == 3
    s.segment(seq(0), b"abc", 0, 3, 0)
    assert sink.bytes() == b"abcdef"
    assert s.delivered == 6


def test_partial_overlap_delivers_only_the_new_tail():
    s, sink = new()
    s.segment(seq(0), b"abcdef", 0, 1, 0)
    s.segment(seq(3), b"defghi", 0, 2, 0)  # re-segmented retransmission with new data
    assert sink.data_calls() == [(0, b"abcdef"), (6, b"ghi")]
    assert s.delivered == 9


def test_overlap_keeps_the_bytes_first_delivered():
    s, sink = new()
    s.segment(seq(0), b"abcdef", 0, 1, 0)
    s.segment(seq(2), b"XXXXgh", 0, 2, 0)
    assert sink.bytes() == b"abcdefgh"


def test_overlapping_held_segments_are_trimmed_when_drained():
    s, sink = new()
    s.segment(seq(6), b"ghij", 0, 1, 0)
    s.segment(seq(4), b"efgh", 0, 2, 0)
    s.segment(seq(8), b"ij", 0, 3, 0)  # wholly inside held data
    s.segment(seq(0), b"abcd", 0, 4, 0)
    assert sink.bytes() == b"abcdefghij"
    assert sink.covered() == 10
    assert s.delivered == 10
    assert s.ooo == {} and s.ooo_bytes == 0


def test_longer_retransmission_replaces_a_shorter_held_segment():
    s, sink = new()
    s.segment(seq(3), b"de", 0, 1, 0)
    s.segment(seq(3), b"defg", 0, 2, 0)
    s.segment(seq(0), b"abc", 0, 3, 0)
    assert sink.bytes() == b"abcdefg"
    assert s.ooo_bytes == 0


def test_segment_overlapping_the_past_and_held_future_delivers_each_byte_once():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.segment(seq(6), b"ghi", 0, 2, 0)
    s.segment(seq(1), b"bcdefgh", 0, 3, 0)
    assert sink.bytes() == b"abcdefghi"
    assert sink.covered() == 9


# -- sequence numbers ------------------------------------------------------------------------


def test_sequence_wraparound_keeps_offsets_growing():
    isn = (1 << 32) - 4  # data starts at 2**32 - 3 and wraps after 3 bytes
    s, sink = new(isn=isn)
    s.segment((1 << 32) - 3, b"abcde", 0, 1, 0)  # crosses the wrap inside the segment
    s.segment(2, b"fgh", 0, 2, 0)
    s.segment(5, b"ij", 0, 3, 0)
    assert sink.data_calls() == [(0, b"abcde"), (5, b"fgh"), (8, b"ij")]
    assert s.next_seq == 7


def test_out_of_order_and_retransmission_across_the_wrap():
    isn = (1 << 32) - 2
    s, sink = new(isn=isn)
    s.segment(seq(4, isn), b"efgh", 0, 1, 0)  # after the wrap, held
    s.segment(seq(0, isn), b"abcd", 0, 2, 0)  # before the wrap
    s.segment(seq(0, isn), b"abcd", 0, 3, 0)  # retransmission seen from after the wrap
    assert sink.data_calls() == [(0, b"abcd"), (4, b"efgh")]


def test_offsets_keep_growing_beyond_4_gib():
    s, sink = new(isn=0)
    chunk = b"x" * 65536
    n = (1 << 32) // len(chunk) + 3  # more than one whole sequence space
    for i in range(n):
        s.segment(seq(i * len(chunk), 0), chunk, 0, i + 1, 0)
    last_off = sink.calls[-1][2]
    assert last_off == (n - 1) * len(chunk) > (1 << 32)
    assert s.delivered == n * len(chunk) and s.gaps == 0


def test_mid_stream_start_takes_offset_0_at_the_first_sequence_seen():
    s, sink = new(isn=None)
    s.segment(123456789, b"abc", 0, 7, 0)
    s.segment(123456792, b"de", 0, 8, 0)
    assert sink.data_calls() == [(0, b"abc"), (3, b"de")]


def test_mid_stream_ack_before_any_data_is_ignored():
    s, sink = new(isn=None)
    s.ack(5000, 1, 0)
    s.segment(100, b"abc", 0, 2, 0)
    assert sink.calls == [("data", 0, 0, b"abc", 2, 0)]


def test_syn_consumes_one_sequence_number():
    s, sink = new(isn=ISN)
    s.syn(ISN)  # retransmitted SYN changes nothing
    s.segment(ISN + 1, b"abc", 0, 1, 0)
    assert sink.data_calls() == [(0, b"abc")]
    s.ack(ISN + 1, 2, 0)  # the SYN-ACK acknowledges the SYN only: no gap
    s.close(3, 0)
    assert sink.gaps() == []


def test_first_data_after_syn_at_the_syn_sequence_is_not_offset_0():
    # A byte at the SYN's own sequence number is not stream data.
    s, sink = new(isn=ISN)
    s.segment(ISN, b"Xab", 0, 1, 0)
    assert sink.data_calls() == [(0, b"ab")]


# -- lost data ------------------------------------------------------------------------------


def test_hole_is_declared_when_the_peer_acknowledges_beyond_it():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 10)
    # bytes 3..6 ("defg") never captured
    s.segment(seq(7), b"hij", 0, 2, 20)
    assert sink.data_calls() == [(0, b"abc")]  # held: the hole may still be filled
    s.ack(seq(10), 3, 30)
    assert sink.calls[1:] == [("gap", 0, 3, 4, 3, 30), ("data", 0, 7, b"hij", 3, 30)]
    assert s.gaps == 1 and s.gap_bytes == 4
    assert s.ooo == {} and s.ooo_bytes == 0
    # the retransmission arriving late is not delivered into the past
    s.segment(seq(3), b"defg", 0, 4, 40)
    assert sink.bytes() == b"abchij"
    assert sink.covered() == 10


def test_hole_is_declared_when_data_arrives_after_the_ack_that_covers_it():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.ack(seq(7), 2, 0)  # peer acknowledged "defg", which we never saw
    assert sink.gaps() == []  # not yet: nothing after the hole to deliver
    s.segment(seq(7), b"hij", 0, 3, 0)
    assert sink.gaps() == [(3, 4)]
    assert sink.data_calls()[-1] == (7, b"hij")
    assert sink.covered() == 10


def test_ack_below_held_data_does_not_declare_the_hole():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.segment(seq(7), b"hij", 0, 2, 0)
    s.ack(seq(3), 3, 0)  # acknowledges only what we have
    s.ack(seq(5), 4, 0)  # inside the hole, but below the held data
    assert sink.gaps() == []
    s.segment(seq(3), b"defg", 0, 5, 0)
    assert sink.bytes() == b"abcdefghij"


def test_stale_and_wrapped_acks_are_ignored():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.segment(seq(7), b"hij", 0, 2, 0)
    s.ack(seq(0) - 500, 3, 0)  # old ack
    s.ack((seq(0) + (1 << 31) + 5) & MASK, 4, 0)  # half the space away: not "beyond"
    assert sink.gaps() == []


def test_holes_are_declared_at_close_and_held_data_delivered():
    s, sink = new()
    s.segment(seq(0), b"ab", 0, 1, 0)
    s.segment(seq(5), b"fg", 0, 2, 0)
    s.segment(seq(10), b"kl", 0, 3, 0)
    s.close(9, 90)
    assert sink.calls[1:] == [
        ("gap", 0, 2, 3, 9, 90),
        ("data", 0, 5, b"fg", 9, 90),
        ("gap", 0, 7, 3, 9, 90),
        ("data", 0, 10, b"kl", 9, 90),
    ]
    assert s.gaps == 2 and s.gap_bytes == 6
    assert s.ooo == {} and s.ooo_bytes == 0


def test_close_without_held_data_emits_nothing():
    s, sink = new()
    s.segment(seq(0), b"ab", 0, 1, 0)
    s.close(2, 0)
    assert sink.calls == [("data", 0, 0, b"ab", 1, 0)]


def test_out_of_order_overflow_declares_the_hole(monkeypatch):
    monkeypatch.setattr(IMPL, "MAX_OUT_OF_ORDER", 100)
    s, sink = new()
    s.segment(seq(0), b"a" * 10, 0, 1, 0)
    for i in range(10):  # hole at 10..20, then 10 held segments of 10 bytes
        s.segment(seq(20 + 10 * i), bytes([65 + i]) * 10, 0, 2 + i, 0)
    assert sink.gaps() == []  # 100 bytes held: at the limit, not beyond
    s.segment(seq(120), b"z" * 10, 0, 12, 0)  # one more: beyond the limit
    assert sink.gaps() == [(10, 10)]
    assert sink.covered() == 130
    assert s.ooo == {} and s.ooo_bytes == 0


def test_overflow_never_holds_more_than_the_limit_plus_one_segment(monkeypatch):
    monkeypatch.setattr(IMPL, "MAX_OUT_OF_ORDER", 1000)
    s, sink = new()
    s.segment(seq(0), b"a", 0, 1, 0)
    high = 0
    for i in range(5000):
        s.segment(seq(1000 + 97 * i * 3), b"q" * 97, 0, i + 2, 0)  # every third slot: many holes
        high = max(high, s.ooo_bytes)
    assert high <= 1000 + 97
    s.close(9999, 0)
    assert sink.covered() == 1000 + 97 * 3 * 4999 + 97


def test_snaplen_truncated_segment_gives_data_then_gap():
    s, sink = new()
    s.segment(seq(0), b"abc", 5, 1, 10)  # 8 bytes on the wire, 3 captured
    s.segment(seq(8), b"ij", 0, 2, 20)
    assert sink.calls == [
        ("data", 0, 0, b"abc", 1, 10),
        ("gap", 0, 3, 5, 1, 10),
        ("data", 0, 8, b"ij", 2, 20),
    ]
    assert s.gaps == 1 and s.gap_bytes == 5 and s.delivered == 5


def test_snaplen_truncated_segment_with_nothing_captured_is_all_gap():
    s, sink = new()
    s.segment(seq(0), b"", 6, 1, 0)
    s.segment(seq(6), b"g", 0, 2, 0)
    assert sink.calls == [("gap", 0, 0, 6, 1, 0), ("data", 0, 6, b"g", 2, 0)]


def test_snaplen_truncated_segment_held_out_of_order():
    s, sink = new()
    s.segment(seq(3), b"de", 4, 1, 0)  # bytes 3..9, 5..9 cut
    s.segment(seq(0), b"abc", 0, 2, 0)
    assert sink.calls == [
        ("data", 0, 0, b"abc", 2, 0),
        ("data", 0, 3, b"de", 2, 0),
        ("gap", 0, 5, 4, 2, 0),
    ]
    s.segment(seq(9), b"j", 0, 3, 0)
    assert sink.covered() == 10


def test_full_retransmission_after_a_truncated_copy_does_not_rewrite_the_past():
    s, sink = new()
    s.segment(seq(0), b"ab", 4, 1, 0)
    s.segment(seq(0), b"abcdef", 0, 2, 0)
    s.segment(seq(6), b"g", 0, 3, 0)
    assert sink.covered() == 7
    assert sink.gaps() == [(2, 4)]


def test_keepalive_one_byte_before_next_seq_is_ignored():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.segment(seq(2), b"\x00", 0, 2, 0)  # keep-alive probe: seq = next_seq - 1, 1 garbage byte
    s.segment(seq(3), b"", 0, 3, 0)  # zero-length keep-alive
    s.segment(seq(3), b"de", 0, 4, 0)
    assert sink.calls == [("data", 0, 0, b"abc", 1, 0), ("data", 0, 3, b"de", 4, 0)]
    assert s.gaps == 0


# -- bounded memory --------------------------------------------------------------------------


def test_flood_of_far_future_segments_keeps_ooo_bytes_bounded():
    s, sink = new()
    s.segment(seq(0), b"a", 0, 1, 0)
    seg = b"f" * 1460
    limit = reassembly.MAX_OUT_OF_ORDER
    high = 0
    n = 2 * limit // len(seg)
    for i in range(n):
        s.segment(seq(1 << 24) + 2 * i * len(seg), seg, 0, i + 2, 0)
        high = max(high, s.ooo_bytes)
    assert high <= limit + len(seg)
    s.close(n + 2, 0)
    assert s.ooo == {}
    assert sink.covered() == (1 << 24) + (2 * (n - 1) + 1) * len(seg)


class CountingSink:
    """Keeps nothing but totals, so that memory measurements see only the reassembler."""

    def __init__(self) -> None:
        self.next = 0
        self.data_bytes = self.gap_bytes = 0

    def data(self, direction, offset, data, packet, ts):
        assert offset == self.next
        self.next += len(data)
        self.data_bytes += len(data)

    def gap(self, direction, offset, size, packet, ts):
        assert offset == self.next
        self.next += size
        self.gap_bytes += size


def test_flood_of_tiny_out_of_order_segments_keeps_memory_bounded():
    """Out-of-order bookkeeping has a per-segment cost too: a flood of 1-byte
    segments, each after its own hole, must not grow memory far beyond the byte
    limit (nor take quadratic time to drain)."""
    sink = CountingSink()
    s = Stream_(0, sink)
    s.syn(ISN)
    s.segment(seq(0), b"a", 0, 1, 0)
    limit = reassembly.MAX_OUT_OF_ORDER
    n = 100_000  # > 6 times MAX_OUT_OF_ORDER_SEGMENTS
    high = 0
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            s.segment(seq(2 + 2 * i), b"t", 0, i + 2, 0)
            if not i % 1000:
                high = max(high, len(s.ooo))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 2 * limit, f"{peak / 1e6:.1f} MB held for {s.ooo_bytes} out-of-order bytes"
    assert high <= reassembly.MAX_OUT_OF_ORDER_SEGMENTS + 1
    s.close(n + 2, 0)
    assert sink.next == 2 + 2 * n - 1 and sink.data_bytes == n + 1 and sink.gap_bytes == n


# -- FIN / RST --------------------------------------------------------------------------------


def test_bytes_before_a_fin_that_never_arrived_are_declared_at_close():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.fin(seq(8))  # the FIN says 8 bytes were sent; "defgh" never captured
    assert sink.gaps() == []  # not before close: a retransmission may still come
    s.close(5, 50)
    assert sink.calls[-1] == ("gap", 0, 3, 5, 5, 50)
    assert s.gaps == 1 and s.gap_bytes == 5


def test_retransmission_after_the_fin_fills_the_hole():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.fin(seq(8))
    s.segment(seq(3), b"defgh", 0, 2, 0)
    s.close(3, 0)
    assert sink.bytes() == b"abcdefgh" and sink.gaps() == []


def test_fin_with_held_data_before_it():
    s, sink = new()
    s.segment(seq(0), b"ab", 0, 1, 0)
    s.segment(seq(4), b"ef", 0, 2, 0)
    s.fin(seq(9))
    s.close(3, 0)
    assert sink.gaps() == [(2, 2), (6, 3)]
    assert sink.covered() == 9


def test_fin_at_next_seq_or_in_the_past_declares_nothing():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.fin(seq(3))
    s.fin(seq(1))  # a stale FIN retransmission cannot move the end back
    s.close(2, 0)
    assert sink.gaps() == []
    s2, sink2 = new(isn=None)
    s2.fin(12345)  # nothing seen in this direction: nothing to say
    s2.close(1, 0)
    assert sink2.calls == []


def test_rst_one_past_the_fin_is_the_fins_sequence_number_not_a_lost_byte():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.fin(seq(3))  # the FIN takes sequence number 3
    s.fin(seq(4), rst=True)  # the RST after it carries FIN + 1
    s.close(3, 0)
    assert sink.gaps() == [] and (s.gaps, s.gap_bytes) == (0, 0)


def test_rst_beyond_missing_bytes_still_declares_them():
    s, sink = new()
    s.segment(seq(0), b"abc", 0, 1, 0)
    s.fin(seq(5), rst=True)  # no FIN: the RST says 5 bytes were sent
    s.close(2, 0)
    assert sink.gaps() == [(3, 2)]


def test_a_stream_keeps_only_state_that_something_reads():
    # retransmitted bytes were counted and never written anywhere; packets was never counted
    s = Stream_(0, None)
    assert not hasattr(s, "retransmitted") and not hasattr(s, "packets")
    fields = {
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
    }
    assert set(Stream.__slots__) == fields
    # the compiled twin has the same fields (the reference's methods run on them), and no more
    assert {a for a in fields if hasattr(s, a)} == fields
    assert not hasattr(s, "__dict__")
