"""Which held conversations a sweep ends and forgets.

Memory is bounded by the conversations held, not by those seen.  A conversation is held while
it is open, and once closed (FIN both ways, or RST) for its late packets until it is swept.
When more than MAX_HELD are held, a sweep ends and forgets, in capture time (as Zeek's
tcp_close_delay and tcp_inactivity_timeout): closed ones quiet for CLOSE_LINGER_NS, open ones
quiet for IDLE_TIMEOUT_NS (connections.closed_by "idle"); and if still more than half of
MAX_HELD are held, the open ones quiet longest (closed_by "evicted", as Suricata's flow memcap
evicts).  A later packet of a conversation ended so starts a new one, decoded mid-stream.  A
capture that never holds MAX_HELD conversations is never swept.
"""

from __future__ import annotations

MAX_HELD = 10_000
CLOSE_LINGER_NS = 5 * 1_000_000_000
IDLE_TIMEOUT_NS = 300 * 1_000_000_000


def choose(held: list, now: int) -> tuple[list, list]:
    """``(ending, gone)`` of a sweep at capture time ``now`` over the conversations ``held``:
    the open ones to end, each with why (its connections.closed_by), in the order to end them;
    and every one to forget (those ending too)."""
    ending, gone, closed, open_ = [], [], [], []
    for c in held:
        quiet = now - c.last_ts
        if c.closed:
            (gone if quiet > CLOSE_LINGER_NS else closed).append(c)
        elif quiet > IDLE_TIMEOUT_NS:
            ending.append((c, "idle"))
            gone.append(c)
        else:
            open_.append(c)
    over = len(held) - len(gone) - MAX_HELD // 2
    if over > 0:
        # closed ones first (only their late packets are lost), then the quietest open ones
        order = lambda c: (c.last_ts, c.stream)  # noqa: E731
        for c in (sorted(closed, key=order) + sorted(open_, key=order))[:over]:
            if not c.closed:
                ending.append((c, "evicted"))
            gone.append(c)
    return ending, gone


def next_sweep(held: int) -> int:
    """How many conversations held call for the next sweep, ``held`` being left after one:
    twice as many (linear time however many conversations a capture has)."""
    return max(MAX_HELD, 2 * held)
