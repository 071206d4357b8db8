"""The scapy layer on the real captures: frames, methods and arguments as the tables have them."""

from __future__ import annotations

import json

import pytest
from scapy.layers.inet import TCP
from scapy.utils import rdpcap

import amqpcap
import amqpcap.scapy
from amqpcap.scapy import AMQP, AMQPFragment, AMQPMethod, AMQPProtocolHeader

CAPTURES = [
    "rabbitmq091_pika_full",
    "rabbitmq091_pyamqp_basic",
    "rabbitmq08_netamqp",
    "rabbitmq09_netamqp",
    "rabbitmq09_anyevent",
    "netamqp09_offline",
    "qpid010_basic",
]


def frames_of(pkt):
    out = []
    layer = pkt.getlayer(TCP).payload if pkt.haslayer(TCP) else None
    while layer:
        out.append(layer)
        layer = layer.payload
    return out


def test_packet_7_of_pika_full_shows_start_ok_with_spec_argument_names():
    pkt = rdpcap("captures/rabbitmq091_pika_full.pcap")[7]
    frame = pkt[AMQP]
    assert frame.method == "connection.start-ok"
    assert (frame.frame_type, frame.channel, frame.frame_end) == (1, 0, 0xCE)
    assert frame.fields["mechanism"] == b"PLAIN"
    assert frame.fields["client_properties"]["product"] == "Pika Python Client Library"
    assert frame.arguments["client-properties"]["connection_name"] == "amqpcap-pika-full"
    assert frame.size == len(bytes(frame)) - 8
    text = pkt.show(dump=True)
    for word in (
        "AMQP 0-9-1 connection.start-ok",
        "frame_type",
        "channel",
        "size",
        "class_index",
        "client_properties",
        "mechanism",
        "response",
        "locale",
        "frame_end",
    ):
        assert word in text


def test_the_protocol_header_names_the_version():
    pkts = rdpcap("captures/rabbitmq08_netamqp.pcap")
    headers = [p[AMQPProtocolHeader] for p in pkts if p.haslayer(AMQPProtocolHeader)]
    assert headers and {h.protocol_version for h in headers} == {"0-8"}
    methods = {p[AMQP].version for p in pkts if p.haslayer(AMQP)}
    assert methods == {"0-8"}


@pytest.mark.parametrize("name", CAPTURES)
def test_methods_per_packet_match_the_methods_table(name):
    path = f"captures/{name}.pcap"
    pkts = rdpcap(path)
    table = amqpcap.load(path).methods
    by_packet: dict = {}
    for row in table.itertuples():
        by_packet.setdefault(int(row.frame_number), []).append((int(row.channel), row.method))
    seen = compared = 0
    previous_cut = False
    for number, pkt in enumerate(pkts, 1):
        layers = frames_of(pkt)
        cut = any(isinstance(x, AMQPFragment) for x in layers)
        methods = [(x.channel, x.method) for x in layers if isinstance(x, AMQP) and x.method is not None]
        assert not any(isinstance(x, AMQPMethod) for x in layers), f"packet {number}: undecoded arguments"
        seen += len(methods)
        if not cut and not previous_cut:
            # a packet with whole frames only: scapy sees exactly the methods the tables have there
            assert methods == by_packet.get(number, []), f"packet {number}"
            compared += 1
        previous_cut = cut
    assert seen >= 0.9 * len(table) and compared > 0.5 * len(pkts)


def _plain(v):
    return v.decode("utf-8") if isinstance(v, bytes) else v


def test_arguments_equal_the_tables_arguments_for_every_whole_method_frame():
    path = "captures/rabbitmq091_pika_full.pcap"
    table = amqpcap.load(path).methods
    rows = {}
    for r in table.itertuples():
        rows.setdefault(int(r.frame_number), []).append(json.loads(r.arguments or "{}"))
    checked = 0
    for number, pkt in enumerate(rdpcap(path), 1):
        frames = [x for x in frames_of(pkt) if isinstance(x, AMQP) and x.method is not None]
        if not frames or len(frames) != len(rows.get(number, [])):
            continue
        for frame, args in zip(frames, rows[number]):
            mine = {k: _plain(v) for k, v in frame.arguments.items()}
            for k, v in args.items():
                if k == "response":  # the tables split the credentials and redact the password
                    continue
                assert mine[k] == v, (number, frame.method, k)
            checked += 1
    assert checked > 100


def test_frame_cut_by_the_packet_end_is_a_fragment():
    pkt = rdpcap("captures/rabbitmq091_pika_full.pcap")[7]
    frame_bytes = bytes(pkt[AMQP])
    cut = AMQP(frame_bytes[:40])
    assert isinstance(cut, AMQPFragment) and cut.data == frame_bytes[:40]
    # a whole frame followed by the start of the next: a chain of frame and fragment
    two = AMQP(frame_bytes + frame_bytes[:9])
    assert two.method == "connection.start-ok" and isinstance(two.payload, AMQPFragment)
    assert two.payload.data == frame_bytes[:9]


def test_several_frames_in_one_packet_are_a_chain_of_layers():
    pkts = rdpcap("captures/rabbitmq091_pika_throughput.pcap")
    chains = [[x for x in frames_of(p)] for p in pkts]
    chain = next(c for c in chains if len(c) >= 3 and all(isinstance(x, AMQP) for x in c))
    names = [type(x).__name__ for x in chain]
    assert names[:3] == ["AMQP_0_9_1_basic_deliver", "AMQP_0_9_1_basic_header", "AMQPBody"], names
    assert chain[1].body_size == len(chain[2].data) and chain[0].channel == chain[1].channel
    offset = 0
    raw = bytes(chain[0])
    for x in chain:  # each layer holds exactly its frame's bytes, one after the other
        assert raw[offset : offset + 8 + x.size] == bytes(x)[: 8 + x.size]
        offset += 8 + x.size


def test_0_10_controls_and_commands_get_their_operation_and_arguments():
    pkts = rdpcap("captures/qpid010_basic.pcap")
    ops = [x for p in pkts for x in frames_of(p) if isinstance(x, AMQP) and x.method]
    names = [x.method for x in ops]
    assert names[:3] == ["connection.start", "connection.start-ok", "connection.tune"]
    start = ops[0]
    assert start.version == "0-10" and "PLAIN" in start.fields["mechanisms"]
    transfer = next(x for x in ops if x.method == "message.transfer")
    assert transfer.segment_type == 1 and transfer.fields["accept_mode"] in (0, 1)


def test_payload_starting_with_amqp_on_another_port_is_amqp_and_so_is_the_rest_of_its_conversation():
    from scapy.layers.inet import IP

    header = bytes(AMQPProtocolHeader())
    start = bytes(rdpcap("captures/rabbitmq091_pika_full.pcap")[5][AMQP])
    a = IP(bytes(IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=40000, dport=15999) / header))
    b = IP(bytes(IP(src="10.0.0.2", dst="10.0.0.1") / TCP(sport=15999, dport=40000) / start))
    c = IP(bytes(IP(src="10.0.0.9", dst="10.0.0.2") / TCP(sport=40001, dport=15999) / start))
    assert a.haslayer(AMQPProtocolHeader) and a[AMQPProtocolHeader].protocol_version == "0-9-1"
    assert b[AMQP].method == "connection.start"
    assert not c.haslayer(AMQP)  # another conversation on that port, without a header: not AMQP
