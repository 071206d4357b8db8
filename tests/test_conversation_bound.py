"""What a dissect holds is bounded by the conversations open, not by those seen: past
sweep.MAX_HELD, closed conversations quiet for a while and open ones quiet past the idle
timeout are ended and forgotten, then the longest quiet open ones; every conversation still gets
its one connections row."""

import pyarrow.dataset as ds
from fixtures import amqp09 as A
from fixtures import pcapgen as P

from amqpcap import pipeline, sweep
from amqpcap.amqp.decoder import Decoder09
from amqpcap.conversations import Conversations

S = 1_000_000_000


def headers_only(n, step_ns, *, close=None):
    """``n`` conversations, each a client sending only a protocol header, ``step_ns`` apart."""
    segs = []
    for i in range(n):
        segs += P.tcp_conversation(
            client_chunks=[A.protocol_header("0-9-1")],
            client=(f"10.0.{i >> 8}.{i & 255}", 40000),
            handshake=False,
            acks=False,
            close=close,
            start_ns=P.START_NS + i * step_ns,
        )
    return P.pcap_bytes(P.to_packets(segs, 1))


def dissect(tmp_path, blob, monkeypatch, held=8):
    monkeypatch.setattr(sweep, "MAX_HELD", held)
    most = []
    real = Conversations.sweep

    def counted(self, now):
        most.append(self.held)
        real(self, now)
        assert self.held <= held // 2 + 1 and len(self.table) == 2 * self.held

    monkeypatch.setattr(Conversations, "sweep", counted)
    cap = tmp_path / "c.pcap"
    cap.write_bytes(blob)
    pipeline.dissect([cap], tmp_path / "out")
    conns = ds.dataset(tmp_path / "out" / "connections").to_table().to_pandas()
    return conns, most


def test_open_conversations_past_the_bound_are_evicted_quietest_first_with_their_rows(tmp_path, monkeypatch):
    conns, most = dissect(tmp_path, headers_only(100, S // 1000), monkeypatch)
    assert sorted(conns.tcp_stream) == list(range(100))  # one row each, none lost
    assert max(most) == 9 and len(most) > 10  # swept whenever the bound is passed, never above it
    ended = conns.set_index("tcp_stream").closed_by
    # the quietest (the oldest here) are evicted; the last ones are still open at the end
    assert (ended.loc[:80] == "evicted").all() and ended.loc[96:].isna().all()


def test_open_conversations_quiet_past_the_idle_timeout_end_as_idle(tmp_path, monkeypatch):
    conns, _ = dissect(tmp_path, headers_only(30, sweep.IDLE_TIMEOUT_NS + S), monkeypatch)
    ended = conns.set_index("tcp_stream").closed_by
    assert sorted(conns.tcp_stream) == list(range(30))
    assert (ended.loc[:20] == "idle").all()


def test_closed_conversations_are_forgotten_after_their_linger_with_their_rows_written(tmp_path, monkeypatch):
    step = sweep.CLOSE_LINGER_NS + S
    conns, most = dissect(tmp_path, headers_only(40, step, close="fin"), monkeypatch)
    assert sorted(conns.tcp_stream) == list(range(40))
    assert set(conns.closed_by) == {"client-fin"} and (conns.packets_c2s == 3).all()


def test_decoders_share_their_tables_of_known_methods_and_frame_types():
    a, b = Decoder09("0-9-1"), Decoder09("0-9-1")
    assert a._known is b._known and a.frame_types is b.frame_types
    assert Decoder09(infer=True)._known is Decoder09(infer=True)._known


def test_show_keeps_the_addresses_of_the_conversations_held_only(tmp_path, monkeypatch):
    import argparse
    import io

    from amqpcap.capture.reader import open_capture
    from amqpcap.show import ShowSink

    monkeypatch.setattr(sweep, "MAX_HELD", 8)
    cap = tmp_path / "c.pcap"
    cap.write_bytes(headers_only(60, S // 1000))
    opts = argparse.Namespace(
        stream=None, channel=None, method=None, exchange=None, queue=None, routing_key=None,
        absolute=False, frames=False, keep_secrets=False, fmt="text",
    )  # fmt: skip
    sink = ShowSink(opts, out=io.StringIO())
    d = pipeline.Dissector(str(cap), sink, pipeline.Options(body_bytes=0))
    most = []

    def conversation(conv):
        sink.conversation(conv)
        most.append(len(sink.streams))

    d.on_conversation = conversation
    with open_capture(str(cap)) as source:
        d.run(sink.first_packet(source))
    assert len(most) == 60 and max(most) <= 9 + 1 and sink.streams == {}


def test_a_burst_of_closed_conversations_is_forgotten_before_an_open_one_is_evicted(tmp_path, monkeypatch):
    segs = []
    for i in range(3):  # long-lived: a heartbeat every 0.1 s through the whole burst
        segs += P.tcp_conversation(
            client_chunks=[A.protocol_header("0-9-1")] + [A.heartbeat()] * 60,
            client=("10.1.0.1", 41000 + i),
            handshake=False,
            acks=False,
            close=None,
            start_ns=P.START_NS + i,
            step_ns=S // 10,
        )
    for i in range(50):  # short-lived: open, a header, closed, all within the close linger
        segs += P.tcp_conversation(
            client_chunks=[A.protocol_header("0-9-1")],
            client=(f"10.2.0.{i}", 40000),
            handshake=False,
            acks=False,
            close="fin",
            start_ns=P.START_NS + S + i * S // 20,
            step_ns=S // 1000,
        )
    segs.sort(key=lambda s: s.ts_ns)
    conns, most = dissect(tmp_path, P.pcap_bytes(P.to_packets(segs, 1)), monkeypatch)
    assert len(conns) == 53 and len(most) > 5
    long_lived = conns[conns.client_port.between(41000, 41002)]
    assert long_lived.closed_by.isna().all() and (long_lived.frames_c2s == 60).all()
