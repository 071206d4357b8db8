"""Bookkeeping of one direction of a conversation picked up mid-stream (used by the stream core).

A capture that starts inside a connection first skips to a provable frame boundary
(the start-of-stream resync), and then usually sees the rest of a message that
began before the capture: content frames with no content method before them.
They are accounted for with the resync, in one anomaly per direction, instead of
as unexpected frames: nothing is wrong with the traffic, the capture just began
late.  The anomaly is held until the first method (0-10: command) of the
direction, so that it can count them.
"""

from __future__ import annotations

from amqpcap.amqp.events import Anomaly


class MidstreamStart:
    __slots__ = ("fresh", "held", "starting", "begun")

    def __init__(self, begun: bool = False) -> None:
        self.starting = True  # the first boundary is still to be found
        # The capture saw the conversation begin (the peer's protocol header): if this direction
        # starts right at a frame, it starts at its own beginning and nothing of it came before.
        self.begun = begun
        self.fresh: set = set()  # channels (0-10: channel << 4 | track) that have had a method since
        self.held: list | None = None

    def resynced(self, offset: int, skipped: int, packet: int, ts: int) -> None:
        """The first boundary was found, ``skipped`` bytes after ``offset``."""
        self.starting = False
        self.held = [offset, skipped, packet, ts, 0, 0, set()]

    def orphan(self, key: int, channel: int, size: int) -> bool | None:
        """A content frame (``size`` bytes on the wire) with no content method before it on
        ``key``: None if it is not the rest of a message begun before the capture, True if it
        is and the held anomaly counts it, False if it is and the caller must report it."""
        if key in self.fresh:
            return None
        h = self.held
        if h is None:
            return False
        h[4] += 1
        h[5] += size
        h[6].add(channel)
        return True

    def release(self) -> Anomaly | None:
        """The held start-of-stream anomaly (None if there is nothing to report)."""
        h = self.held
        self.held = None
        if h is None or not (h[1] or h[4]):
            return None
        offset, skipped, packet, ts, nframes, nbytes, channels = h
        detail = f"capture starts mid-stream: skipped {skipped} bytes to the first provable frame boundary"
        if nframes:
            detail += (
                f"; then {nframes} content frames ({nbytes} bytes) of messages begun before the capture, "
                f"on channel {', '.join(map(str, sorted(channels)))}"
            )
        return Anomaly(packet, ts, offset, "resync", detail, None, skipped)
