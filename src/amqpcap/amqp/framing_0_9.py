# cython: annotation_typing=False, boundscheck=False, wraparound=False
"""Where an AMQP 0-8 / 0-9 / 0-9-1 frame ends: the framing rule, once.

A frame is a 7-octet header (type, channel, payload size), the payload and the frame-end octet
0xCE.  The decoder's frame loops (``codec_0_9.Decoder09Py.frames_reference`` and the compiled
walker in fast09.pyx) and the boundary proof (``detect.chain_0_9``) cut frames with
``frame_end``.  This module is also compiled (compiled.py's part "fastframing", with
amqp/fastframing.pxd's types), for fast09 to call in C on a pointer to its buffer.
"""

from amqpcap import compiled

# True in this module built by Cython as compiled.py's part "fastframing", imported under its name
COMPILED = __name__ == compiled.PARTS["fastframing"].module

FRAME_END = 0xCE
NOT_A_FRAME = 0  # frame_end's answers other than an offset (one is never 0: a header comes first)
NOT_ALL_THERE = -1


def frame_end(b, pos: int, n: int, types, limit: int) -> int:
    """The offset of the frame-end octet of the frame whose header is at ``b[pos]`` (``n``: the
    end of ``b``, at least ``pos + 7``); ``NOT_A_FRAME`` if its type is not in ``types``, its
    size over ``limit`` or the octet its size points at is not 0xCE; ``NOT_ALL_THERE`` if that
    octet is not in ``b`` yet.  (compiled: ``b`` a pointer to the bytes)"""
    top = b[pos + 3]  # (compiled: a uint32_t, so that its shift by 24 is unsigned)
    size = (top << 24) | (b[pos + 4] << 16) | (b[pos + 5] << 8) | b[pos + 6]
    if b[pos] not in types or size > limit:
        return NOT_A_FRAME
    end = pos + 7 + size
    if end >= n:
        return NOT_ALL_THERE
    return end if b[end] == FRAME_END else NOT_A_FRAME


# Nothing to choose here: fast09 calls the compiled frame_end in C, the Python modules this one.
SOURCE_STAMP = AMQPCAP_SOURCE_STAMP.decode("ascii") if COMPILED else None  # noqa: F821 (stamp.pxd)
