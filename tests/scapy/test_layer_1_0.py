"""The scapy layer on AMQP 1.0: every frame of the recorded 1.0 captures, built frames, the
SASL password redacted unless keep_secrets, TLS after the 1.0 TLS header."""

from __future__ import annotations

import glob
import sys
from pathlib import Path

import pytest
from scapy.all import IP, TCP, Raw, rdpcap
from scapy.utils import PcapReader

import amqpcap
from amqpcap.scapy import AMQP, AMQP10, keep_secrets
from amqpcap.scapy.layers import AMQPFragment, AMQPProtocolHeader, TLSRecords

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "amqp10"))
from amqp10_wire import attach, data, frame, properties, sasl_init, transfer  # noqa: E402

CAPTURES_10 = sorted(glob.glob(str(ROOT / "captures" / "rabbitmq10_*.pcap")))


def _frames(path: str) -> tuple[list, int]:
    """(packet number, performative) of every 1.0 frame scapy dissects, retransmitted segments
    left out (scapy sees each packet alone; the dissector reassembles the stream once), and the
    number of fragments (frames split over packets)."""
    seen, got, fragments = set(), [], 0
    with PcapReader(path) as packets:
        for i, p in enumerate(packets, 1):
            if p.haslayer(TCP) and len(p[TCP].payload):
                key = (p[IP].src, p[TCP].sport, p[TCP].seq, bytes(p[TCP].payload))
                if key in seen:
                    continue
                seen.add(key)
            layer = p
            while layer:
                if isinstance(layer, AMQP10) and layer.method != "empty":
                    got.append((i, layer.method))
                fragments += isinstance(layer, AMQPFragment)
                layer = layer.payload
    return got, fragments


@pytest.mark.parametrize("path", CAPTURES_10, ids=lambda p: Path(p).stem)
def test_every_recorded_1_0_frame_is_a_layer_named_by_its_performative(path):
    got, fragments = _frames(path)
    t = amqpcap.load(path)
    m = t.methods[t.methods["version"].astype(object) == "1.0"]
    want = list(zip(m["frame_number"].astype(int), m["method"].astype(str)))
    assert fragments == 0  # (loopback: no frame of these captures is split over packets)
    assert got == want and len(got) > 20


def test_arguments_are_the_performative_fields_by_their_specification_names():
    pk = rdpcap(str(ROOT / "captures" / "rabbitmq10_rhea_multiplex.pcap"))
    frames = [p[AMQP10] for p in pk if p.haslayer(AMQP10)]
    drain = next(f for f in frames if f.method == "flow" and f.arguments.get("drain"))
    assert (drain.arguments["handle"], drain.arguments["link-credit"], drain.arguments["delivery-count"]) == (
        3,
        5,
        2,
    )
    att = next(f for f in frames if f.method == "attach")
    assert (att.arguments["name"], att.arguments["role"], att.channel) == ("rhea-mux-sender-a", False, 0)
    empties = [f for f in frames if f.method == "empty"]
    assert len(empties) == 35 and all(f.size == 8 and f.body == b"" for f in empties)  # heartbeats
    assert all(isinstance(p[AMQP], AMQP10) for p in pk if p.haslayer(AMQP10))  # pkt[AMQP] finds them
    headers = [p[AMQPProtocolHeader].protocol_version for p in pk if p.haslayer(AMQPProtocolHeader)]
    assert headers == ["1.0-sasl", "1.0-sasl", "1.0", "1.0"]


def test_a_built_transfer_dissects_back_with_its_message_bytes():
    msg = properties(message_id="m1") + data(b"hello")
    wire = frame(transfer(2, 7, b"t7", settled=True) + msg, channel=3)
    built = AMQP10(channel=3, body=wire[8:])
    assert bytes(built) == wire  # size computed when built
    p = AMQP(wire)
    assert isinstance(p, AMQP10) and (p.method, p.channel, p.frame_type) == ("transfer", 3, 0)
    assert (p.arguments["handle"], p.arguments["delivery-id"], p.arguments["settled"]) == (2, 7, True)
    assert p.message_bytes == msg
    assert "transfer handle=2 delivery-id=7" in p.mysummary()


def test_two_frames_in_one_segment_are_a_chain_and_a_cut_one_a_fragment():
    a = frame(attach("l", 0, True, src="/queues/q"))
    b = frame(transfer(0, 1, b"x") + data(b"y" * 40))
    pkt = IP(bytes(IP(dst="10.0.0.2") / TCP(sport=40000, dport=5672) / Raw(a + b + b[:9])))
    first = pkt[AMQP10]
    assert (first.method, first.payload.method) == ("attach", "transfer")
    assert isinstance(first.payload.payload, AMQPFragment)


def test_a_sasl_init_password_is_redacted_unless_secrets_are_kept():
    p = AMQP(frame(sasl_init("PLAIN", b"\0alice\0s3cret"), ftype=1))
    assert isinstance(p, AMQP10) and p.method == "sasl.init" and p.frame_type == 1
    assert "s3cret" not in p.show(dump=True) and "<redacted>" in p.show(dump=True)
    assert "s3cret" not in repr(p)
    with keep_secrets():
        assert "s3cret" in p.show(dump=True)
    assert p.arguments["initial-response"] == b"\0alice\0s3cret"  # the wire's value, as 0-9-1 fields


def test_after_the_1_0_tls_header_the_rest_is_tls_records():
    hello = b"\x16\x03\x01\x00\x05hello"
    pkt = IP(bytes(IP(dst="10.0.0.2") / TCP(sport=40001, dport=5672) / Raw(b"AMQP\x02\x01\x00\x00" + hello)))
    assert pkt[AMQPProtocolHeader].protocol_version == "1.0-tls"
    assert isinstance(pkt[AMQPProtocolHeader].payload, TLSRecords)
    later = IP(bytes(IP(dst="10.0.0.2") / TCP(sport=40001, dport=5672) / Raw(b"\x17\x03\x03\x00\x02ab")))
    assert later.haslayer(TLSRecords) and not later.haslayer(AMQP10)
