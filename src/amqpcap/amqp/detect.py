"""Protocol header and mid-stream version detection."""

from __future__ import annotations

import functools
import re

from amqpcap.amqp import spec
from amqpcap.amqp.framing_0_9 import NOT_A_FRAME, NOT_ALL_THERE, frame_end

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

DECODED_VERSIONS = ("0-8", "0-9", "0-9-1", "0-10", "1.0", "1.0-sasl")
AMQP_1_0 = ("1.0", "1.0-sasl")  # a SASL layer, then AMQP 1.0: one codec


def header_version(raw: bytes) -> str | None:
    """Version named by an 8-byte protocol header, None if it is not one we know."""
    if len(raw) < 8 or raw[:4] != b"AMQP":
        return None
    return HEADERS.get(bytes(raw[4:8]))


def is_tls(data: bytes) -> bool:
    """A TLS record (handshake/alert/data) starts the stream: content type 20-23, version 3.x."""
    return len(data) >= 3 and 20 <= data[0] <= 23 and data[1] == 3 and data[2] <= 4


# 0-8 / 0-9 / 0-9-1 frame types (4-7 are 0-8's out-of-band and trace frames).
TYPES_0_9 = frozenset(range(1, 9))
MAX_FRAME_0_9 = 1 << 20  # before connection.tune (the 0-9 codec's limit too)
_ZERO4 = b"\0\0\0\0"


def frame_ok_0_10(buf, p: int, limit: int = 0xFFFF) -> int:
    """Size of a strictly valid 0-10 frame header at ``p`` (reserved bits zero, track matching
    the segment type: controls on track 0, everything else on track 1), else 0."""
    flags = buf[p]
    stype = buf[p + 1]
    if flags & 0xF0 or stype > 3 or buf[p + 4] or buf[p + 5] > 1 or (stype == 0) != (buf[p + 5] == 0):
        return 0
    if buf[p + 8 : p + 12] != _ZERO4:
        return 0
    size = (buf[p + 2] << 8) | buf[p + 3]
    return size if 12 <= size <= limit else 0


@functools.cache
def methods_0_9() -> frozenset:
    """Every (class, method) some 0-8 / 0-9 / 0-9-1 table knows (the tables loaded at the first
    call: a capture with no 0-9 frame to prove loads none)."""
    return frozenset().union(*(spec.get(v).METHODS for v in ("0-8", "0-9", "0-9-1")))


def chain_0_9(
    data,
    p: int,
    n: int | None = None,
    most: int = -1,
    types=TYPES_0_9,
    limit: int = MAX_FRAME_0_9,
    methods=None,
) -> int:
    """How many whole 0-8/0-9/0-9-1 frames follow each other from ``p`` to ``n`` (the end
    of ``data``; the last frame may be cut short by it), counting at most ``most``, or -1
    where the chain breaks: a type not in ``types``, a size over ``limit``, a frame-end
    octet that is not 0xCE, a method not in ``methods`` (default: any version's,
    ``methods_0_9()``), a heartbeat that is not empty on channel 0.  A codec proves a boundary
    with ``most=1`` and its own version's limits."""
    if n is None:
        n = len(data)
    if methods is None:
        methods = methods_0_9()
    k = 0
    while p + 7 <= n:
        end = frame_end(data, p, n, types, limit)
        if end == NOT_A_FRAME:
            return -1
        if end == NOT_ALL_THERE:
            return k
        ftype, size = data[p], end - p - 7
        if ftype == 1 and (
            size < 4
            or (int.from_bytes(data[p + 7 : p + 9], "big"), int.from_bytes(data[p + 9 : p + 11], "big"))
            not in methods
        ):
            return -1
        if ftype == 8 and (size or data[p + 1] or data[p + 2]):
            return -1
        k += 1
        if k == most:
            return k
        p = end + 1
    return k


def chain_0_10(data, p: int) -> int:
    """How many whole 0-10 frames follow each other from ``p`` to the end of ``data`` (the
    last may be cut short), or -1 where a frame header is not strictly valid."""
    n = len(data)
    k = 0
    while p + 12 <= n:
        size = frame_ok_0_10(data, p)
        if not size:
            return -1
        if p + size > n:
            return k
        k += 1
        p += size
    return k


# Offsets where a header could start (checked exactly by the chains, and by the codecs'
# resynchronisation): 0-8/0-9/0-9-1, a type octet 1-8 and a size below 32 MiB (above any
# frame-max a codec accepts); 0-10, flags, a segment type on its track, a size of 12 or more,
# zero reserved octets.  Searching with these runs at C speed.
CANDIDATE_0_9 = re.compile(rb"(?=[\x01-\x08][\x00-\xff]{2}[\x00\x01])")
CANDIDATE_0_10 = re.compile(
    rb"(?=[\x00-\x0f](?:\x00(?:[\x01-\xff][\x00-\xff]|\x00[\x0c-\xff])\x00\x00"
    rb"|[\x01-\x03](?:[\x01-\xff][\x00-\xff]|\x00[\x0c-\xff])\x00\x01)"
    rb"[\x00-\xff]{2}\x00\x00\x00\x00)"
)


def _boundary_1_0(data, final: bool, start: int, end: int):
    """The first offset in ``data[start:end]`` where a chain of AMQP 1.0 frames is proven (as
    find_midstream_boundary proves the other framings), with its length: (offset, frames) or
    None; and the first offset not disproven."""
    from amqpcap.amqp import codec_1_0

    resume = len(data)
    for m in codec_1_0.CANDIDATE.finditer(data, start, end):
        p = m.start()
        k = codec_1_0.chain(data, p)
        if k >= 0:
            resume = min(resume, p)
            if k >= 2 or (k == 1 and (p == 0 or final)):
                return (p, k), resume
    return None, resume


def find_midstream_boundary(data, final: bool = False, start: int = 0):
    """Where the frames of a conversation picked up mid-stream begin, and in which framing.

    Returns ``(found, resume)``: ``found`` is ``("0-9", offset)`` or ``("0-10", offset)``, or
    None while unproven; ``resume`` is the offset a later call (with more data appended) may
    start from, every candidate before it being disproven for good.

    A boundary is proven by a chain of whole frames running from it to the end of the
    data: two frames or more, or one if it starts the data (a capture cut between frames).
    When the data is all there will be (``final``: the end of the capture, or as much as
    the caller will hold), one whole frame is enough, and so is a lone strictly valid 0-10
    header (its reserved bits make it unlikely by chance) whose frame runs past the end.
    The earliest boundary wins; where both framings chain from the same offset, the longer
    chain."""
    n = len(data)
    resume = n
    b9 = None
    for m in CANDIDATE_0_9.finditer(data, start):
        p = m.start()
        k = chain_0_9(data, p)
        if k >= 0:
            resume = min(resume, p)
            if k >= 2 or (k == 1 and (p == 0 or final)):
                b9 = (p, k)
                break
    end = n if b9 is None else min(n, b9[0] + 12)
    # AMQP 1.0 frames (their header and performative descriptor are checked): where a 1.0 chain
    # starts no later than the others and is at least as long, it wins
    b10, r10 = _boundary_1_0(data, final, start, end)
    resume = min(resume, r10)
    if b10 is not None and (b9 is None or b10[0] < b9[0] or (b10[0] == b9[0] and b10[1] >= b9[1])):
        b9 = None
        end = min(n, b10[0] + 12)
    for m in CANDIDATE_0_10.finditer(data, start, end):
        p = m.start()
        k = chain_0_10(data, p)
        if k >= 0:
            resume = min(resume, p)
            if k >= 2 or (k == 1 and (p == 0 or final)) or (k == 0 and final):
                if b10 is not None and b9 is None and p >= b10[0]:
                    break
                if b9 is None or p < b9[0] or k > b9[1]:
                    return ("0-10", p), resume
                break
    if b10 is not None and b9 is None:
        return ("1.0", b10[0]), min(resume, max(start, n - 11))
    # the last bytes may yet start a header once more data arrives
    resume = min(resume, max(start, n - 11))
    return (("0-9", b9[0]) if b9 is not None else None), resume
