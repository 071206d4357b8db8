# cython: annotation_typing=False, boundscheck=False, wraparound=False
"""Link layer + IPv4/IPv6 + TCP header parsing (per-packet hot path).

``parse_packet(linktype, data)`` returns one of three types (tell them apart
with ``type(r) is Packet`` / ``r is None``):

* ``None`` -- not an IP/TCP packet we can use: another ethertype / address
  family, another IP protocol, an IPv6 ``no next header``/ESP/unknown
  extension header, or a *non-first* IP fragment (it carries no TCP header);
* a ``Malformed`` (a ``str``, one of the constants below) naming why an IP or
  TCP packet is malformed or unusable:

  ``truncated-link-header``   the capture ends inside the link-layer header
  ``truncated-ip-header``     ... inside the IPv4/IPv6 header or an extension header
  ``truncated-tcp-header``    ... inside the fixed 20 bytes of the TCP header
  ``bad-ip-header``           IPv4 IHL < 5, or a version nibble that contradicts
                              the link layer
  ``bad-ip-length``           IPv4 total length < header length, or the
                              extension headers run past the IPv6 payload
  ``bad-tcp-header``          TCP data offset < 5 or beyond the IP payload
  ``ip-fragment``             the *first* fragment of a fragmented IP datagram
                              (we do not reassemble IP; its TCP payload would be
                              incomplete, so the whole datagram is reported here
                              once and the TCP stage sees a gap)

* otherwise a ``Packet`` (a named tuple: fields by name, and unpacked like the
  tuple it is in the hot loop): ``ip_version``, ``src``/``dst`` packed
  addresses (4 or 16 bytes), ``sport``, ``dport``, ``seq``, ``ack``, ``flags``
  the 9 TCP flag bits (``TCP_SYN`` ...), ``window``, ``payload`` the captured
  TCP payload (a ``bytes`` slice of ``data``), ``missing`` the payload bytes
  the snapshot length cut off.

``parse_located(linktype, buf, start, n)`` is ``parse_packet(linktype,
buf[start : start + n])`` for a packet that lies in a larger buffer (the reader's,
``reader.PacketSource.chunks``); compiled, the packet is read where it lies and
its payload slice is the only copy made of its bytes.

Lengths come from the IP header, never from the captured length: Ethernet
padding and trailers (FCS) are not payload.  An IPv4 total length of 0 or an
IPv6 payload length of 0 (TCP segmentation offload on the capturing host, or a
jumbogram) means "use what was captured".

Link types: see ``LINKTYPE_NAMES`` / ``is_supported``.  For an unsupported
link type ``parse_packet`` raises ``UnsupportedLinkType`` (a ``ValueError``)
so that the caller can report it once per file/interface (check with
``is_supported`` first to avoid the exception on the hot path).

* 1 Ethernet, with any stack of 802.1Q / 802.1ad / QinQ tags (TPID 0x8100,
  0x88a8, 0x9100, 0x9200); 802.3 length frames are not IP -> ``None``;
* 113 Linux cooked (SLL) and 276 SLL2 (the protocol field is an ethertype;
  VLAN tags after it are walked as for Ethernet);
* 0 BSD loopback NULL: 4-byte address family in the *capturing host's* byte
  order (both orders accepted); 108 LOOP: the same in network byte order;
  AF_INET = 2, AF_INET6 = 10 (Linux), 24 (NetBSD/OpenBSD), 28 (FreeBSD),
  30 (macOS);
* 101 raw IP (version from the first nibble), also 12 and 14 which some
  systems wrote for raw IP (12 is OpenBSD's LOOP: a 12 file whose packets
  start with a LOOP header is parsed as LOOP); 228 raw IPv4, 229 raw IPv6.
"""

from __future__ import annotations

import struct

# socket's own inet_ntop, without socket's module (its enums: ~1.3 ms of every start; cli.LAZY)
from _socket import AF_INET, AF_INET6, inet_ntop

from amqpcap import compiled
from amqpcap.capture.packet import (
    BAD_IP_HEADER,
    BAD_IP_LENGTH,
    BAD_TCP_HEADER,
    IP_FRAGMENT,
    LINKTYPE_NAMES,
    SUPPORTED_LINKTYPES,
    TCP_ACK,
    TCP_CWR,
    TCP_ECE,
    TCP_FIN,
    TCP_NS,
    TCP_PSH,
    TCP_RST,
    TCP_SYN,
    TCP_URG,
    TRUNCATED_IP_HEADER,
    TRUNCATED_LINK_HEADER,
    TRUNCATED_TCP_HEADER,
    Malformed,
    Packet,
    UnsupportedLinkType,
    linktype_name,
)

# True in this module built by Cython as compiled.py's part "fastlink" (with capture/fastlink.pxd's
# types), which is imported under the part's name
COMPILED = __name__ == compiled.PARTS["fastlink"].module

__all__ = [
    "parse_packet",
    "parse_located",
    "Packet",
    "Malformed",
    "format_addr",
    "is_supported",
    "linktype_name",
    "LINKTYPE_NAMES",
    "SUPPORTED_LINKTYPES",
    "UnsupportedLinkType",
    "TCP_FIN",
    "TCP_SYN",
    "TCP_RST",
    "TCP_PSH",
    "TCP_ACK",
    "TCP_URG",
    "TCP_ECE",
    "TCP_CWR",
    "TCP_NS",
]

# tuple.__new__ straight away: Packet(...) would add a Python-level __new__ call per packet
_packet = tuple.__new__


def is_supported(linktype: int) -> bool:
    return linktype in SUPPORTED_LINKTYPES


_AF_INET6 = frozenset({10, 24, 28, 30})
_VLAN_TPIDS = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})

_u_H = struct.Struct("!H").unpack_from
_u_tcp = struct.Struct("!HHIIHH").unpack_from  # sport dport seq ack off/flags window
# IPv4 (no options) + TCP: vihl, total length, frag, proto, src, dst, then TCP as above
_u_v4 = struct.Struct("!BxHxxHxB2x4s4sHHIIHH").unpack_from
# IPv6 + TCP: version/class, payload length, next header, src, dst, then TCP
_u_v6 = struct.Struct("!BxxxHBx16s16sHHIIHH").unpack_from

_inet_ntop = inet_ntop
_AF = {4: AF_INET, 6: AF_INET6}


def format_addr(ip_version: int, packed: bytes) -> str:
    """Text form of a packed address (``"192.0.2.1"``, ``"2001:db8::1"``)."""
    return _inet_ntop(_AF[ip_version], packed)


def _ethertype(b, n: int, off: int, et: int):
    """Skip VLAN tags of the packet's ``n`` bytes ``b``; return (ethertype, offset of the network
    header)."""
    while et in _VLAN_TPIDS:
        if n < off + 4:
            return -1, off
        et = (b[off + 2] << 8) | b[off + 3]
        off += 4
    return et, off


# -- what the compiled parser reads and makes in C (this module built by Cython: COMPILED) --------


def _rd16(b, p: int) -> int:
    return (b[p] << 8) | b[p + 1]


def _rd32(b, p: int) -> int:
    top = b[p]  # (compiled: a uint32_t, so that its shift by 24 is unsigned)
    return (top << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]


# The addresses of the last hosts, each handed out again for the same bytes: the dissector looks
# every packet's conversation up by (src, dst, sport, dport), and an address object seen before
# has its hash computed and compares by identity (a fresh one is hashed and compared byte by
# byte).  Likewise the ports and windows (a packet's three ints that repeat): no int made and
# freed for them a packet.  Equal values either way.
_ADDRS = [None] * 256
_PORTS = [None] * 512


def _address(b, a: int, alen: int) -> bytes:
    """``b[a : a + alen]``, the object handed out last time if it holds the same bytes."""
    h = (b[a + alen - 1] * 31 + b[a + alen - 2] * 7 + b[a + alen - 3] + alen) & 255
    c = _ADDRS[h]
    if c is not None and len(c) == alen:
        cb = c  # (compiled: its bytes, compared in C)
        i = 0
        while i < alen and cb[i] == b[a + i]:
            i += 1
        if i == alen:
            return c
    c = _ADDRS[h] = b[a : a + alen]
    return c


def _u16(v: int) -> int:
    """The int ``v``, the object handed out last time if it is the same."""
    c = _PORTS[v & 511]
    if c is not None:
        k = c  # (compiled: its value)
        if k == v:
            return c
    c = _PORTS[v & 511] = v
    return c


def _packet_at(version: int, b, a: int, alen: int, t: int, p: int, end: int) -> Packet:
    """The Packet of the addresses at ``a`` (``alen`` bytes each) and the TCP header at ``t``
    of ``b``, its payload ``b[p:end]``."""
    sport, dport, win = _u16(_rd16(b, t)), _u16(_rd16(b, t + 2)), _u16(_rd16(b, t + 14))
    src, dst, flags = _address(b, a, alen), _address(b, a + alen, alen), _rd16(b, t + 12) & 0x1FF
    seq, ack, payload = _rd32(b, t + 4), _rd32(b, t + 8), b[p:end]
    if COMPILED:  # (tuple.__new__ is a generic call that copies a tuple made first)
        return _new_packet(Packet, version, src, dst, sport, dport, seq, ack, flags, win, payload, 0)  # noqa: F821 (fastlink.pxd)
    return _packet(Packet, (version, src, dst, sport, dport, seq, ack, flags, win, payload, 0))


def parse_packet_reference(linktype: int, data: bytes):
    """Parse one captured packet; see the module docstring for the result (``parse_packet`` is
    this, compiled by Cython if built: capture/fastlink.pxd)."""
    return parse_located_reference(linktype, data, 0, len(data))


def _bytes_of(buf: bytes, start: int, stop: int) -> bytes:
    """``buf[start:stop]``: ``buf`` itself when that is all of it."""
    return buf if start == 0 and stop == len(buf) else buf[start:stop]


def parse_located_reference(linktype: int, buf: bytes, start: int, n: int):
    """``parse_packet`` of the packet of ``n`` bytes at ``buf[start]`` (a record of the capture's
    read buffer, ``reader.PacketSource.chunks``): compiled, its bytes are read where they are and
    its payload is the one copy made of them (``parse_located`` is this, compiled by Cython if
    built)."""
    stop = start + n
    if COMPILED:
        b = _bytes_from(buf, start)  # noqa: F821 (fastlink.pxd: a pointer to the packet's bytes in buf)
    else:  # (Python: the packet's own bytes, offsets from its first byte)
        buf = b = _bytes_of(buf, start, stop)
        start, stop = 0, n
    # 1. link layer -> (offset of the IP header, IP version)
    if linktype == 1 or linktype == 113 or linktype == 276:
        if linktype == 1:
            if n < 14:
                return TRUNCATED_LINK_HEADER
            et = (b[12] << 8) | b[13]
            off = 14
        elif linktype == 113:
            if n < 16:
                return TRUNCATED_LINK_HEADER
            et = (b[14] << 8) | b[15]
            off = 16
        else:
            if n < 20:
                return TRUNCATED_LINK_HEADER
            et = (b[0] << 8) | b[1]
            off = 20
        if et != 0x0800 and et != 0x86DD and et in _VLAN_TPIDS:
            et, off = _ethertype(b, n, off, et)
            if et < 0:
                return TRUNCATED_LINK_HEADER
        if et == 0x0800:
            v = 4
        elif et == 0x86DD:
            v = 6
        else:
            return None
    elif linktype == 0 or linktype == 108:
        if n < 4:
            return TRUNCATED_LINK_HEADER
        if linktype == 108 or b[0] == 0:
            af = b[3] if b[0] == 0 and b[1] == 0 and b[2] == 0 else -1
        else:  # little-endian host
            af = b[0] if b[1] == 0 and b[2] == 0 and b[3] == 0 else -1
        if af == 2:
            v = 4
        elif af in _AF_INET6:
            v = 6
        else:
            return None
        off = 4
    elif linktype == 101 or linktype == 14 or linktype == 12:
        if n < 1:
            return TRUNCATED_IP_HEADER
        v = b[0] >> 4
        if v != 4 and v != 6:
            if linktype == 12 and n >= 4 and b[0] == 0 and b[1] == 0 and b[2] == 0:
                return parse_located_reference(108, buf, start, n)  # OpenBSD DLT_LOOP
            return None
        off = 0
    elif linktype == 228 or linktype == 229:
        if n < 1:
            return TRUNCATED_IP_HEADER
        v = b[0] >> 4
        if v != (4 if linktype == 228 else 6):
            return BAD_IP_HEADER
        off = 0
    else:
        raise UnsupportedLinkType(linktype)

    # 2. fast path for the common case (no IP options / extension headers,
    #    not fragmented, lengths consistent, not cut by the snaplen); anything
    #    else goes to the careful parsers below, which give the same answer.
    #    The header is read by struct in Python (one call for all of it), byte by byte compiled.
    if v == 4:
        if n >= off + 40:
            if COMPILED:
                vihl, total, frag, proto, of = (
                    b[off],
                    _rd16(b, off + 2),
                    _rd16(b, off + 6),
                    b[off + 9],
                    _rd16(b, off + 32),
                )
            else:
                vihl, total, frag, proto, src, dst, sport, dport, seq, ack, of, win = _u_v4(buf, off)
            if vihl == 0x45 and proto == 6 and not frag & 0x3FFF and total >= 40 and of >= 0x5000:
                end = off + total
                p = off + 20 + ((of >> 10) & 0x3C)
                if end <= n and p <= end:
                    if COMPILED:
                        return _packet_at(4, b, off + 12, 4, off + 20, p, end)
                    return _packet(
                        Packet, (4, src, dst, sport, dport, seq, ack, of & 0x1FF, win, buf[p:end], 0)
                    )
        return _ipv4(_bytes_of(buf, start, stop), off, n)
    if n >= off + 60:
        if COMPILED:
            vf, plen, nh, of = b[off], _rd16(b, off + 4), b[off + 6], _rd16(b, off + 52)
        else:
            vf, plen, nh, src, dst, sport, dport, seq, ack, of, win = _u_v6(buf, off)
        if nh == 6 and vf >> 4 == 6 and plen >= 20 and of >= 0x5000:
            end = off + 40 + plen
            p = off + 40 + ((of >> 10) & 0x3C)
            if end <= n and p <= end:
                if COMPILED:
                    return _packet_at(6, b, off + 8, 16, off + 40, p, end)
                return _packet(Packet, (6, src, dst, sport, dport, seq, ack, of & 0x1FF, win, buf[p:end], 0))
    return _ipv6(_bytes_of(buf, start, stop), off, n)


def _ipv4(data, off: int, n: int):
    if n < off + 20:
        return TRUNCATED_IP_HEADER
    vihl = data[off]
    if vihl >> 4 != 4:
        return BAD_IP_HEADER
    ihl = (vihl & 0x0F) << 2
    if ihl < 20:
        return BAD_IP_HEADER
    if n < off + ihl:
        return TRUNCATED_IP_HEADER
    if data[off + 9] != 6:
        return None
    frag = (data[off + 6] << 8) | data[off + 7]
    if frag & 0x3FFF:  # MF or a fragment offset
        if frag & 0x1FFF:
            return None  # non-first fragment: no TCP header in it
        return IP_FRAGMENT
    total = (data[off + 2] << 8) | data[off + 3]
    if total == 0:  # TSO: length not filled in by the capturing host
        end = n
    else:
        if total < ihl:
            return BAD_IP_LENGTH
        end = off + total
    return _tcp(4, data[off + 12 : off + 16], data[off + 16 : off + 20], data, off + ihl, end, n)


def _ipv6(data, off: int, n: int):
    if n < off + 40:
        return TRUNCATED_IP_HEADER
    if data[off] >> 4 != 6:
        return BAD_IP_HEADER
    plen = (data[off + 4] << 8) | data[off + 5]
    nh = data[off + 6]
    p = off + 40
    end = p + plen if plen else n  # 0: jumbogram or TSO
    hops = 0
    while nh != 6:
        if nh == 0 or nh == 43 or nh == 60 or nh == 51:
            if n < p + 2:
                return TRUNCATED_IP_HEADER
            if nh == 51:
                hlen = (data[p + 1] + 2) << 2
            else:
                hlen = (data[p + 1] + 1) << 3
        elif nh == 44:
            if n < p + 8:
                return TRUNCATED_IP_HEADER
            fo = (data[p + 2] << 8) | data[p + 3]
            if fo & 0xFFF8:
                return None  # non-first fragment
            if fo & 1:
                return IP_FRAGMENT
            hlen = 8  # atomic fragment: just a header
        else:
            return None  # 59 no next header, 50 ESP, other protocols
        nh = data[p]
        p += hlen
        hops += 1
        if p > end or hops > 32:
            return BAD_IP_LENGTH
        if n < p:
            return TRUNCATED_IP_HEADER
    return _tcp(6, data[off + 8 : off + 24], data[off + 24 : off + 40], data, p, end, n)


def _tcp(version, src, dst, data, t: int, end: int, n: int):
    if n < t + 20:
        return TRUNCATED_TCP_HEADER
    sport, dport, seq, ack, offflags, window = _u_tcp(data, t)
    doff = (offflags >> 10) & 0x3C
    if doff < 20 or t + doff > end:
        return BAD_TCP_HEADER
    p = t + doff
    flags = offflags & 0x1FF
    if end <= n:
        return Packet(version, src, dst, sport, dport, seq, ack, flags, window, data[p:end], 0)
    if p >= n:
        return Packet(version, src, dst, sport, dport, seq, ack, flags, window, b"", end - p)
    return Packet(version, src, dst, sport, dport, seq, ack, flags, window, data[p:n], end - n)


# The parser, chosen once at import: the one above, or the same compiled (compiled.py's part
# "fastlink": this module built by Cython with the types of capture/fastlink.pxd).  The compiled
# module chooses nothing: it is what is chosen.
SOURCE_STAMP, _fast = compiled.twin("fastlink", AMQPCAP_SOURCE_STAMP if COMPILED else None)  # noqa: F821 (stamp.pxd)
parse_packet = _fast.parse_packet_reference if _fast is not None else parse_packet_reference
parse_located = _fast.parse_located_reference if _fast is not None else parse_located_reference
