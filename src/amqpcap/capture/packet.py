"""What the link parser (link.py) returns, and the link types it knows: defined here, once,
for link.py both as Python and compiled (compiled.py's part "fastlink"), so that a Packet, a
Malformed constant or an UnsupportedLinkType is the same class and object either way."""

from __future__ import annotations

from collections import namedtuple

TCP_FIN = 0x001
TCP_SYN = 0x002
TCP_RST = 0x004
TCP_PSH = 0x008
TCP_ACK = 0x010
TCP_URG = 0x020
TCP_ECE = 0x040
TCP_CWR = 0x080
TCP_NS = 0x100


# collections.namedtuple, not typing.NamedTuple: the same class without importing typing, which
# nothing else the dissect runs needs (~1.5 ms of every start)
Packet = namedtuple("Packet", "ip_version src dst sport dport seq ack flags window payload missing")
Packet.__doc__ = "A usable IP/TCP packet (see link.py's docstring)."


class Malformed(str):
    """Why an IP/TCP packet cannot be used: one of the constants below (no per-packet objects)."""

    __slots__ = ()


TRUNCATED_LINK_HEADER = Malformed("truncated-link-header")
TRUNCATED_IP_HEADER = Malformed("truncated-ip-header")
TRUNCATED_TCP_HEADER = Malformed("truncated-tcp-header")
BAD_IP_HEADER = Malformed("bad-ip-header")
BAD_IP_LENGTH = Malformed("bad-ip-length")
BAD_TCP_HEADER = Malformed("bad-tcp-header")
IP_FRAGMENT = Malformed("ip-fragment")

#: Names of link types (tcpdump.org LINKTYPE_* without the prefix).  Only
#: those in ``SUPPORTED_LINKTYPES`` can be parsed; the rest are here so that
#: an unsupported link type can be named in a report.
LINKTYPE_NAMES: dict[int, str] = {
    0: "NULL",
    1: "ETHERNET",
    6: "IEEE802_5",
    8: "SLIP",
    9: "PPP",
    10: "FDDI",
    12: "RAW",
    14: "RAW",
    50: "PPP_HDLC",
    51: "PPP_ETHER",
    101: "RAW",
    104: "C_HDLC",
    105: "IEEE802_11",
    108: "LOOP",
    113: "LINUX_SLL",
    127: "IEEE802_11_RADIOTAP",
    192: "PPI",
    197: "ERF",
    220: "USB_LINUX_MMAPPED",
    228: "IPV4",
    229: "IPV6",
    239: "NFLOG",
    249: "USBPCAP",
    276: "LINUX_SLL2",
}

SUPPORTED_LINKTYPES = frozenset({0, 1, 12, 14, 101, 108, 113, 228, 229, 276})


class UnsupportedLinkType(ValueError):
    """``parse_packet`` was given a link type it cannot parse."""

    def __init__(self, linktype: int) -> None:
        super().__init__(f"unsupported link type {linktype} ({linktype_name(linktype)})")
        self.linktype = linktype


def linktype_name(linktype: int) -> str:
    return LINKTYPE_NAMES.get(linktype, f"LINKTYPE_{linktype}")
