"""parse_packet: link layers, IPv4/IPv6, TCP, snaplen, malformed packets."""

import ipaddress
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from fixtures import pcapgen as g
from fixtures.compiled import built_or_skip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpcap.capture import link
from amqpcap.capture.link import (
    LINKTYPE_NAMES,
    UnsupportedLinkType,
    format_addr,
    is_supported,
)
from amqpcap.capture.reader import open_capture

V4 = ("192.0.2.10", "198.51.100.20")
V6 = ("2001:db8::10", "2001:db8:1::20")
PAYLOAD = b"AMQP\x00\x00\x09\x01"


def a(addr):
    return ipaddress.ip_address(addr).packed


def tcp4(payload=PAYLOAD, **kw):
    kw.setdefault("seq", 123456789)
    kw.setdefault("ack", 987654321)
    kw.setdefault("flags", "PA")
    return g.tcp_ip(V4[0], V4[1], 40001, 5672, payload=payload, **kw)


def tcp6(payload=PAYLOAD, **kw):
    kw.setdefault("seq", 4294967295)
    kw.setdefault("ack", 1)
    kw.setdefault("flags", "PA")
    return g.tcp_ip(V6[0], V6[1], 5672, 40002, payload=payload, **kw)


EXPECT4 = (4, a(V4[0]), a(V4[1]), 40001, 5672, 123456789, 987654321, 0x018, 65535, PAYLOAD, 0)
EXPECT6 = (6, a(V6[0]), a(V6[1]), 5672, 40002, 4294967295, 1, 0x018, 65535, PAYLOAD, 0)


# -- link layers -------------------------------------------------------------


@pytest.mark.parametrize(
    "linktype,builder,kw",
    [
        (1, g.ether, {}),
        (1, g.ether, {"vlans": [(0x8100, 100)]}),
        (1, g.ether, {"vlans": [(0x88A8, 10), (0x8100, 20)]}),
        (1, g.ether, {"vlans": [(0x9100, 10), (0x8100, 20)]}),
        (1, g.ether, {"vlans": [(0x88A8, 1), (0x8100, 2), (0x8100, 3)]}),
        (113, g.sll, {}),
        (276, g.sll2, {}),
        (0, g.null, {"byteorder": "little"}),
        (0, g.null, {"byteorder": "big"}),
        (108, g.loop, {}),
        (101, g.raw, {}),
        (12, g.raw, {}),
        (14, g.raw, {}),
    ],
    ids=[
        "eth",
        "vlan",
        "qinq-88a8",
        "qinq-9100",
        "triple-tag",
        "sll",
        "sll2",
        "null-le",
        "null-be",
        "loop",
        "raw101",
        "raw12",
        "raw14",
    ],
)
@pytest.mark.parametrize("ipv", [4, 6])
def test_every_link_layer_yields_the_tcp_segment(linktype, builder, kw, ipv):
    ip = tcp4() if ipv == 4 else tcp6()
    assert link.parse_packet(linktype, builder(ip, **kw)) == (EXPECT4 if ipv == 4 else EXPECT6)


def test_raw_ipv4_and_ipv6_linktypes_check_the_version():
    assert link.parse_packet(228, tcp4()) == EXPECT4
    assert link.parse_packet(229, tcp6()) == EXPECT6
    assert link.parse_packet(228, tcp6()) == "bad-ip-header"
    assert link.parse_packet(229, tcp4()) == "bad-ip-header"


@pytest.mark.parametrize("af", [10, 24, 28, 30])
@pytest.mark.parametrize("order", ["little", "big"])
def test_null_loopback_accepts_every_bsd_af_inet6_value(af, order):
    assert link.parse_packet(0, g.null(tcp6(), byteorder=order, af=af)) == EXPECT6


def test_null_loopback_with_unknown_address_family_is_not_ip():
    assert link.parse_packet(0, g.null(tcp4(), af=7)) is None
    assert link.parse_packet(108, g.loop(tcp4(), af=0x1234)) is None


def test_linktype_12_with_openbsd_loop_header_is_parsed_as_loop():
    assert link.parse_packet(12, g.loop(tcp4())) == EXPECT4


def test_ethernet_padding_is_not_payload():
    ip = tcp4(payload=b"", flags="A")  # 40 bytes -> 54-byte frame, padded to 60
    f = g.ether(ip)
    assert len(f) == 60
    r = link.parse_packet(1, f)
    assert r[9] == b"" and r[10] == 0
    f2 = g.ether(tcp4(payload=b"ab")) + b"\xde\xad\xbe\xef"  # e.g. an FCS trailer
    assert link.parse_packet(1, f2)[9] == b"ab"


def test_non_ip_ethertypes_and_non_tcp_protocols_are_none():
    from scapy.layers.inet import ICMP, IP, UDP
    from scapy.layers.l2 import ARP, Ether

    assert link.parse_packet(1, bytes(Ether() / ARP())) is None
    assert link.parse_packet(1, bytes(Ether() / IP(dst="10.0.0.1") / UDP(dport=53))) is None
    assert link.parse_packet(101, bytes(IP(dst="10.0.0.1") / ICMP())) is None
    # 802.3 length field instead of an ethertype
    assert link.parse_packet(1, b"\x02" * 12 + b"\x00\x26" + b"\xaa" * 46) is None
    # SLL carrying ARP
    assert link.parse_packet(113, bytes(16 - 2) + b"\x08\x06" + b"\x00" * 28) is None


def test_short_link_headers_are_reported():
    assert link.parse_packet(1, b"\x00" * 13) == "truncated-link-header"
    assert link.parse_packet(1, b"\x00" * 12 + b"\x81\x00\x00") == "truncated-link-header"
    assert link.parse_packet(113, b"\x00" * 15) == "truncated-link-header"
    assert link.parse_packet(276, b"\x08\x00" + b"\x00" * 17) == "truncated-link-header"
    assert link.parse_packet(0, b"\x02\x00") == "truncated-link-header"
    assert link.parse_packet(101, b"") == "truncated-ip-header"


def test_unsupported_linktype_raises_a_documented_error():
    assert not is_supported(105)
    assert all(is_supported(lt) for lt in (0, 1, 12, 14, 101, 108, 113, 228, 229, 276))
    with pytest.raises(UnsupportedLinkType) as ei:
        link.parse_packet(105, b"\x00" * 64)
    assert ei.value.linktype == 105
    assert "IEEE802_11" in str(ei.value)
    assert isinstance(ei.value, ValueError)
    assert LINKTYPE_NAMES[1] == "ETHERNET" and LINKTYPE_NAMES[276] == "LINUX_SLL2"
    assert link.linktype_name(4242) == "LINKTYPE_4242"


# -- IPv4 / IPv6 / TCP headers ---------------------------------------------------


def test_ipv4_options_are_skipped_by_ihl():
    ip = tcp4(ip_options=b"\x94\x04\x00\x00" + b"\x01" * 8)  # router alert + NOPs
    assert ip[0] & 0x0F == 8
    assert link.parse_packet(101, ip) == EXPECT4


def test_tcp_options_are_skipped_by_data_offset():
    ip = tcp4(
        tcp_options=[("MSS", 1460), ("NOP", None), ("WScale", 7), ("SAckOK", b""), ("Timestamp", (1, 2))]
    )
    r = link.parse_packet(101, ip)
    assert r == EXPECT4
    assert (ip[20 + 12] >> 4) * 4 > 20


@pytest.mark.parametrize(
    "ext",
    [["hop"], ["routing"], ["dest"], ["frag"], ["ah"], ["hop", "dest", "routing", "frag", "ah", "dest"]],
)
def test_ipv6_extension_headers_are_walked_to_tcp(ext):
    r = link.parse_packet(229, tcp6(ipv6_ext=ext))  # "frag" alone = atomic fragment
    assert r == EXPECT6


def test_ipv6_no_next_header_and_esp_are_not_tcp():
    ip = bytearray(tcp6())
    ip[6] = 59
    assert link.parse_packet(229, bytes(ip)) is None
    ip[6] = 50
    assert link.parse_packet(229, bytes(ip)) is None


def test_ip_fragments_first_is_reported_later_ones_are_none():
    assert link.parse_packet(101, tcp4(frag=(0, True))) == "ip-fragment"
    assert link.parse_packet(101, tcp4(frag=(185, True))) is None
    assert link.parse_packet(101, tcp4(frag=(185, False))) is None
    assert link.parse_packet(229, tcp6(ipv6_ext=["frag"], frag=(0, True))) == "ip-fragment"
    assert link.parse_packet(229, tcp6(ipv6_ext=["hop", "frag"], frag=(100, False))) is None


@pytest.mark.parametrize(
    "flags,value",
    [
        ("S", 0x002),
        ("SA", 0x012),
        ("FA", 0x011),
        ("RA", 0x014),
        ("PAU", 0x038),
        ("SEC", 0x0C2),
        ("AN", 0x110),
    ],
)
def test_tcp_flags_are_the_nine_flag_bits(flags, value):
    assert link.parse_packet(101, tcp4(flags=flags))[7] == value


def test_window_sequence_and_ack_are_unsigned_32_bit():
    r = link.parse_packet(101, tcp4(seq=2**32 - 1, ack=2**31, window=1234))
    assert r[5:9] == (2**32 - 1, 2**31, 0x018, 1234)


# -- snaplen and lengths ------------------------------------------------------------


def test_snaplen_cut_payload_reports_missing_bytes():
    body = bytes(range(200))
    f = g.ether(tcp4(payload=body))  # 14 + 20 + 20 + 200
    r = link.parse_packet(1, f[: 14 + 40 + 50])
    assert r[9] == body[:50]
    assert r[10] == 150


def test_snaplen_cut_inside_tcp_options_gives_empty_payload_and_full_missing():
    ip = tcp4(payload=b"x" * 100, tcp_options=[("Timestamp", (1, 2)), ("NOP", None), ("NOP", None)])
    doff = (ip[32] >> 4) * 4
    assert doff == 32
    r = link.parse_packet(101, ip[: 20 + 24])
    assert r[5] == 123456789 and r[9] == b"" and r[10] == 100


def test_snaplen_cut_inside_headers_is_reported():
    f = g.ether(tcp4())
    assert link.parse_packet(1, f[: 14 + 20 + 19]) == "truncated-tcp-header"
    assert link.parse_packet(1, f[: 14 + 19]) == "truncated-ip-header"
    f6 = g.ether(tcp6(ipv6_ext=["hop", "dest"]))
    assert link.parse_packet(1, f6[: 14 + 40 + 8 + 4]) == "truncated-ip-header"
    assert link.parse_packet(1, f6[: 14 + 40 + 16 + 10]) == "truncated-tcp-header"


def test_ipv6_snaplen_cut_reports_missing_from_payload_length():
    f = g.sll(tcp6(payload=b"z" * 1000, ipv6_ext=["dest"]))
    r = link.parse_packet(113, f[: 16 + 40 + 8 + 20 + 10])
    assert r[9] == b"z" * 10 and r[10] == 990


def test_zero_ip_length_from_segmentation_offload_uses_captured_length():
    ip = tcp4(payload=b"q" * 3000, total_length=0)
    assert link.parse_packet(101, ip)[9:] == (b"q" * 3000, 0)
    ip6 = bytearray(tcp6(payload=b"w" * 70))
    ip6[4:6] = b"\x00\x00"
    assert link.parse_packet(229, bytes(ip6))[9:] == (b"w" * 70, 0)


def test_malformed_headers_are_named():
    ip = bytearray(tcp4())
    ip[0] = 0x44  # IHL 4
    assert link.parse_packet(101, bytes(ip)) == "bad-ip-header"
    ip = bytearray(tcp4())
    ip[2:4] = struct.pack("!H", 19)
    assert link.parse_packet(101, bytes(ip)) == "bad-ip-length"
    ip = bytearray(tcp4())
    ip[32] = 0x40  # data offset 4 words
    assert link.parse_packet(101, bytes(ip)) == "bad-tcp-header"
    ip = bytearray(tcp4(payload=b""))
    ip[32] = 0xF0  # data offset 60 > segment
    assert link.parse_packet(101, bytes(ip)) == "bad-tcp-header"
    eth = bytearray(g.ether(tcp4()))
    eth[14] = 0x65  # ethertype IPv4 but version 6
    assert link.parse_packet(1, bytes(eth)) == "bad-ip-header"


def test_format_addr():
    assert format_addr(4, a("192.0.2.10")) == "192.0.2.10"
    assert format_addr(6, a("2001:db8::10")) == "2001:db8::10"
    assert format_addr(6, a("::ffff:10.0.0.1")) == "::ffff:10.0.0.1"


# -- property: whatever scapy builds, we read back -------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    linktype=st.sampled_from([0, 1, 108, 101, 113, 276]),
    v6=st.booleans(),
    sport=st.integers(1, 65535),
    dport=st.integers(1, 65535),
    seq=st.integers(0, 2**32 - 1),
    ack=st.integers(0, 2**32 - 1),
    flags=st.sampled_from(["S", "SA", "A", "PA", "FA", "RA", "F", "R"]),
    payload=st.binary(max_size=300),
    caplen=st.one_of(st.none(), st.integers(0, 500)),
    extra=st.sampled_from([0, 4, 8, 16]),  # IPv4 option bytes / IPv6 ext headers
    tcp_ts=st.booleans(),
)
def test_roundtrip_against_scapy_built_packets(
    linktype, v6, sport, dport, seq, ack, flags, payload, caplen, extra, tcp_ts
):
    src, dst = V6 if v6 else V4
    kw = {"tcp_options": [("NOP", None), ("NOP", None), ("Timestamp", (7, 9))] if tcp_ts else None}
    if v6:
        kw["ipv6_ext"] = {0: [], 4: ["hop"], 8: ["dest"], 16: ["hop", "routing"]}[extra]
    elif extra:
        kw["ip_options"] = b"\x01" * extra
    ip = g.tcp_ip(src, dst, sport, dport, seq, ack, flags, payload, **kw)
    f = g.frame(linktype, ip)
    hdr = len(f) - len(ip) if linktype != 1 else 14
    cut_f = f if caplen is None else f[:caplen]
    r = link.parse_packet(linktype, cut_f)
    # the fast path and the careful parsers agree
    if len(cut_f) >= hdr:
        slow = (link._ipv6 if v6 else link._ipv4)(cut_f, hdr, len(cut_f))
        assert r == slow
    head = len(ip) - len(payload)  # IP + extension/option + TCP header bytes
    if caplen is not None and caplen < hdr + head - (12 if tcp_ts else 0):
        assert isinstance(r, str)
        return
    kept = len(payload) if caplen is None else max(0, min(len(payload), caplen - hdr - head))
    assert r[0] == (6 if v6 else 4)
    assert r[1:5] == (a(src), a(dst), sport, dport)
    assert r[5:7] == (seq, ack)
    assert r[9] == payload[:kept]
    assert r[10] == len(payload) - kept


# -- real captures, cross-checked with tshark ---------------------------------------

SHARED = Path("/work/shared/captures")


# scripts/test.sh installs tshark and sets AMQPCAP_REQUIRE_TOOLS in CI: a missing tool fails
@pytest.mark.skipif(
    shutil.which("tshark") is None and not os.environ.get("AMQPCAP_REQUIRE_TOOLS"),
    reason="tshark not installed",
)
@pytest.mark.parametrize("name", ["netamqp09_offline.pcap", "qpid010_basic.pcap"])
def test_real_capture_matches_tshark_tcp_fields(name):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(path),
            "-o",
            "tcp.desegment_tcp_streams:FALSE",
            "-T",
            "fields",
            "-E",
            "separator=,",
            "-e",
            "frame.number",
            "-e",
            "ip.src",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.dstport",
            "-e",
            "tcp.seq_raw",
            "-e",
            "tcp.ack_raw",
            "-e",
            "tcp.len",
            "-e",
            "tcp.flags",
            "-e",
            "tcp.window_size_value",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    want = {}
    for line in out:
        if line:
            num, src, sp, dp, seq, ack, ln, fl, win = line.split(",")
            want[int(num)] = (src, int(sp), int(dp), int(seq), int(ack), int(ln), int(fl, 16), int(win))
    got = {}
    for num, _ts, lt, data, _wl in open_capture(path):
        r = link.parse_packet(lt, data)
        got[num] = (format_addr(r[0], r[1]), r[3], r[4], r[5], r[6], len(r[9]) + r[10], r[7], r[8])
    assert len(got) > 150
    assert got == want


@settings(max_examples=500, deadline=None)
@given(
    linktype=st.sampled_from(sorted(link.SUPPORTED_LINKTYPES)),
    data=st.binary(max_size=120),
    prefix=st.sampled_from(
        [
            b"",
            b"\x45",
            b"\x60",
            b"\x00" * 12 + b"\x08\x00\x45",
            b"\x00" * 12 + b"\x86\xdd\x60",
            b"\x02\x00\x00\x00\x45",
        ]
    ),
)
def test_random_bytes_never_raise(linktype, data, prefix):
    r = link.parse_packet(linktype, prefix + data)
    assert r is None or isinstance(r, str) or (isinstance(r, tuple) and len(r) == 11 and r[10] >= 0)


# -- the typed result ----------------------------------------------------------------------


def test_a_usable_packet_is_a_packet_namedtuple_with_named_fields():
    from amqpcap.capture.link import Packet

    body = bytes(range(200))
    for r in (
        link.parse_packet(1, g.ether(tcp4(payload=body))),  # fast path
        link.parse_packet(1, g.ether(tcp4(payload=body))[: 14 + 40 + 50]),
    ):  # careful path (cut by snaplen)
        assert type(r) is Packet and isinstance(r, tuple)
        assert r.ip_version == 4 and r.payload == body[: len(r.payload)] and r.payload
        assert r.missing == 200 - len(r.payload)
        assert (r.sport, r.dport, r.flags) == (r[3], r[4], r[7])


def test_a_malformed_packet_is_a_malformed_constant_never_a_packet():
    from amqpcap.capture import link as L

    r = link.parse_packet(1, b"\x00" * 13)
    assert type(r) is L.Malformed and r is L.TRUNCATED_LINK_HEADER and r == "truncated-link-header"
    assert link.parse_packet(101, tcp4(frag=(0, True))) is L.IP_FRAGMENT


# -- the compiled parser gives the reference's answer --------------------------------------


# (the fixture only says which run this is: nothing in it changes between examples)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    linktype=st.sampled_from(sorted(link.SUPPORTED_LINKTYPES)),
    v6=st.booleans(),
    payload=st.binary(max_size=64),
    flips=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=3),
    cut=st.one_of(st.none(), st.integers(0, 140)),
)
def test_compiled_parser_answers_as_the_reference_on_damaged_packets(linktype, v6, payload, flips, cut):
    """Valid packets of every link type, with bytes overwritten (link, IP and TCP headers) and
    cut: the compiled parser returns what link.py returns, value and type."""
    fastlink = built_or_skip("fastlink")
    ip = tcp6(payload) if v6 else tcp4(payload)
    data = bytearray(g.frame(linktype, ip) if linktype not in (12, 14, 228, 229) else ip)
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    data = bytes(data if cut is None else data[:cut])
    want = link.parse_packet_reference(linktype, data)
    got = fastlink.parse_packet(linktype, data)
    assert got == want and type(got) is type(want)


# -- a packet read where it lies in the reader's buffer -------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    linktype=st.sampled_from(sorted(link.SUPPORTED_LINKTYPES)),
    v6=st.booleans(),
    vlan=st.booleans(),
    payload=st.binary(max_size=64),
    flips=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=3),
    cut=st.one_of(st.none(), st.integers(0, 140)),
    before=st.binary(max_size=40),
    after=st.binary(max_size=40),
)
def test_a_packet_located_in_a_buffer_parses_as_its_bytes_alone(
    linktype, v6, vlan, payload, flips, cut, before, after
):
    """parse_located of a packet between other bytes (the read buffer's records before and after
    it) answers what parse_packet answers for the packet's bytes alone, value and type, whichever
    path reads it (fast, careful, VLAN tags, LOOP inside RAW), compiled and as the reference."""
    ip = tcp6(payload) if v6 else tcp4(payload)
    if linktype == 1 and vlan:
        frame = g.frame(1, ip, vlans=[(0x8100, 7)])
    elif linktype == 12 and vlan:
        frame = g.frame(108, ip)  # OpenBSD's LOOP in a RAW (12) file
    else:
        frame = g.frame(linktype, ip)
    data = bytearray(frame)
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    data = bytes(data if cut is None else data[:cut])
    buf = before + data + after
    want = link.parse_packet_reference(linktype, data)
    parsers = [link.parse_located_reference, link.parse_located]
    for parse in parsers:
        got = parse(linktype, buf, len(before), len(data))
        assert got == want and type(got) is type(want)
        if type(got) is link.Packet:
            assert type(got.payload) is bytes
