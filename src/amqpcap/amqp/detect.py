"""Protocol header and mid-stream version detection."""
from __future__ import annotations

# The 4 octets after "AMQP" -> version.  0-8 clients send either form.
HEADERS = {
    b"\x01\x01\x08\x00": "0-8",
    b"\x01\x01\x09\x01": "0-8",  # python3-amqplib, old Qpid: "0-8" with 0-9's revision bytes
    b"\x01\x01\x00\x09": "0-9",
    b"\x00\x00\x09\x01": "0-9-1",
    b"\x01\x01\x00\x0a": "0-10",
    b"\x00\x01\x00\x00": "1.0",
    b"\x03\x01\x00\x00": "1.0-sasl",
    b"\x02\x01\x00\x00": "1.0-tls",
}

DECODED_VERSIONS = ("0-8", "0-9", "0-9-1", "0-10")


def header_version(raw: bytes) -> str | None:
    """Version named by an 8-byte protocol header, None if it is not one we know."""
    if len(raw) < 8 or raw[:4] != b"AMQP":
        return None
    return HEADERS.get(bytes(raw[4:8]))


def is_tls(data: bytes) -> bool:
    """A TLS record (handshake/alert/data) starts the stream: content type 20-23, version 3.x."""
    return len(data) >= 3 and 20 <= data[0] <= 23 and data[1] == 3 and data[2] <= 4


def looks_like_0_10(data: bytes) -> bool:
    """A 0-10 frame header: version bits 0, segment type 0-3, size >= 12, reserved octets zero."""
    if len(data) < 12:
        return False
    flags, seg, size = data[0], data[1], int.from_bytes(data[2:4], "big")
    return (flags & 0xC0) == 0 and (flags & 0x0F) != 0 and seg <= 3 and size >= 12 and data[4] == 0 \
        and (data[5] & 0xF0) == 0 and data[8:12] == b"\0\0\0\0"


def looks_like_0_9(data: bytes) -> bool:
    """A 0-8/0-9/0-9-1 frame starts the data: known type, frame-end where the size says."""
    if len(data) < 8:
        return False
    size = int.from_bytes(data[3:7], "big")
    return data[0] in (1, 2, 3, 8) and 7 + size < len(data) and data[7 + size] == 0xCE


def find_0_9_boundary(data, limit: int = 65536):
    """Offset of the first provable 0-9-x frame start in ``data`` (a whole frame whose
    frame-end octet is where its size says, followed by another frame start or the end
    of the data), or None."""
    n = len(data)
    for p in range(min(n, limit)):
        if data[p] in (1, 2, 3, 8) and p + 7 <= n:
            size = int.from_bytes(data[p + 3:p + 7], "big")
            end = p + 7 + size
            if end < n and data[end] == 0xCE and (end + 1 == n or data[end + 1] in (1, 2, 3, 8)):
                return p
    return None
