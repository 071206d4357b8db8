"""Per-direction liveness facts of a conversation, kept whether or not frames are written.

The heartbeat analysis needs to know when each side last showed a sign of life
(the specification: any octet resets the heartbeat timer).  Without
``dissect --frames`` heartbeat frames leave no row anywhere, so the pipeline
feeds every frame here and the connection row carries the summary: heartbeat
frames per direction, the longest silence between two consecutive frames of a
direction, and the last frame's timestamp.  The decoder reports frames here itself
(``frames_seen``, its ``tally``), several of one packet at once: no per-frame objects
when the frames table is not written.
"""

from __future__ import annotations

from amqpcap import compiled
from amqpcap.records.schema import DIRS

__all__ = ["Liveness", "LivenessReference", "COLUMNS"]

COLUMNS = tuple(
    f"{name}_{d}"
    for d in DIRS
    for name in ("heartbeats", "silence_start_ts", "silence_end_ts", "last_frame_ts")
)


class LivenessReference:
    """Heartbeat frames and frame silences, per direction (0 = c2s, 1 = s2c).  ``Liveness`` is
    this class, or its compiled twin (fastrows.Liveness: ``frames_seen``, the decoder's tally
    called once a packet, in C; the same attributes, and this class's other methods)."""

    __slots__ = ("frames", "heartbeats", "last", "gap", "gap_start")

    def __init__(self) -> None:
        self.frames = [0, 0]  # AMQP frames decoded
        self.heartbeats = [0, 0]
        self.last = [None, None]  # ts (ns) of the latest frame
        self.gap = [-1, -1]  # longest silence so far, ns
        self.gap_start = [None, None]  # ts of the frame that began it

    def frames_seen(self, d: int, ts: int, n: int = 1) -> None:
        """``n`` frames of direction ``d``, all at ``ts``: the same as ``n`` frames one by one."""
        self.frames[d] += n
        last = self.last[d]
        if last is not None and ts - last > self.gap[d]:
            self.gap[d] = ts - last
            self.gap_start[d] = last
        if n > 1 and self.gap[d] < 0:  # the second frame at the same instant: a silence of 0
            self.gap[d] = 0
            self.gap_start[d] = ts
        self.last[d] = ts

    def heartbeat(self, d: int) -> None:
        self.heartbeats[d] += 1

    def columns(self) -> dict:
        """``{column: value}`` for the connection row (names in :data:`COLUMNS`)."""
        out = {}
        for i, d in enumerate(DIRS):
            start = self.gap_start[i]
            out[f"heartbeats_{d}"] = self.heartbeats[i]
            out[f"silence_start_ts_{d}"] = start
            out[f"silence_end_ts_{d}"] = start + self.gap[i] if start is not None else None
            out[f"last_frame_ts_{d}"] = self.last[i]
        return out


# chosen once at import, with the row builders (rows.py; the same extension)
_fast = compiled.select("fastrows")
Liveness = _fast.Liveness if _fast is not None else LivenessReference
