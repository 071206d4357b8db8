"""The layer never raises on what a capture can hold: cut frames, garbage, TLS on 5671."""

from __future__ import annotations

import random

from scapy.layers.inet import IP, TCP
from scapy.packet import Raw
from scapy.utils import rdpcap

from amqpcap.scapy import AMQP, AMQPFragment


def payloads(name):
    pkts = rdpcap(f"captures/{name}.pcap")
    return [bytes(p[TCP].payload) for p in pkts if p.haslayer(TCP) and p[TCP].payload]


def layers(pkt):
    out = []
    while pkt:
        out.append(pkt)
        pkt = pkt.payload
    return out


def test_every_cut_of_real_frames_dissects_to_whole_frames_and_one_fragment():
    for name, version in (("rabbitmq091_pika_full", "0-9-1"), ("qpid010_basic", "0-10")):
        for data in payloads(name)[:60]:
            whole = layers(AMQP(data, version=version))
            for cut in sorted({1, 5, 7, 11, 12, 13, len(data) // 2, len(data) - 1}):
                if not 0 < cut < len(data):
                    continue
                got = layers(AMQP(data[:cut], version=version))
                assert b"".join(bytes(x)[: len(bytes(x)) - len(bytes(x.payload))] for x in got) == data[:cut]
                assert isinstance(got[-1], (AMQPFragment, AMQP)) and not isinstance(got[-1], Raw)
                # the frames before the cut are dissected as in the whole packet
                for a, b in zip(got[:-1], whole):
                    assert type(a) is type(b)


def test_random_bytes_never_raise():
    rng = random.Random(13)
    for _ in range(2000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
        if rng.random() < 0.5:
            data = bytes((rng.choice((1, 2, 3, 8)), 0, 1, 0, 0, 0, rng.randrange(40))) + data
        p = IP(bytes(IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=40000, dport=5672) / data))
        p.show(dump=True)
        assert bytes(p[TCP].payload) == data


def test_mutated_real_frames_never_raise_and_keep_their_bytes():
    rng = random.Random(7)
    data = payloads("rabbitmq091_pika_full")
    for _ in range(500):
        b = bytearray(rng.choice(data))
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        p = AMQP(bytes(b))
        p.show(dump=True)
        assert bytes(p) == bytes(b)


def test_tls_on_5671_is_not_read_as_frames():
    hello = bytes.fromhex("16030100a5010000a10303") + bytes(160)
    p = IP(bytes(IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=40000, dport=5671) / hello))
    assert not p.haslayer(AMQP) and isinstance(p[TCP].payload, Raw) and bytes(p[TCP].payload) == hello
    assert p[TCP].payload.name == "TLS (not decoded)"
