"""AMQP 1.0 connection state: sessions, links, deliveries and their settlement.

Each endpoint picks its own channel for a session and its own handle for a link, so state is
kept per direction: a session is (direction, channel), paired with the peer's channel by the
``remote-channel`` of begin; a link is (direction, channel, handle), named by attach.  A
delivery is identified by its sender's direction and session and its delivery-id; a disposition
names deliveries by ``first..last`` on the session of the side whose ``role`` it gives
(receiver: the peer's deliveries).

Messages (``Delivery`` events) are held until they are settled, so that their row carries the
outcome and the settlement time: pre-settled ones are released at once, the rest when a
disposition settles them, at most ``MAX_HELD`` at a time (beyond, the oldest is released
unsettled), and at the end of the capture.  A delivery whose delivery-id is no uint (a hostile
transfer's) is not held: nothing can name it, so it is released at once, unsettled.
"""

from __future__ import annotations

from amqpcap.amqp.spec import v1_0 as SPEC

MAX_HELD = 1 << 14  # unsettled deliveries held per connection
MAX_LINKS = 1 << 16  # links and sessions remembered per connection

ROLES = {False: "sender", True: "receiver"}


def role_name(role) -> str | None:
    """ "sender" / "receiver" for an attach's or disposition's role (a boolean); None for anything
    else a hostile frame may carry (0 and 1 included, unhashable values too)."""
    return ROLES[role] if role is True or role is False else None


def is_delivery_id(v) -> bool:
    """Whether ``v`` is a delivery-id a delivery can be held by: a uint (a hostile transfer may
    carry a string, a float, a list, a negative or 64-bit number there)."""
    return type(v) is int and 0 <= v <= 0xFFFFFFFF


class Link:
    __slots__ = ("name", "role", "source", "target", "snd_settle_mode", "rcv_settle_mode")

    def __init__(self, args: dict) -> None:
        self.name = _text(args.get("name"))
        self.role = role_name(args.get("role"))
        self.source = address(args.get("source"))
        self.target = address(args.get("target"))
        self.snd_settle_mode = args.get("snd-settle-mode")
        self.rcv_settle_mode = args.get("rcv-settle-mode")


def _text(v):
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def address(terminus) -> str | None:
    """The address of a source or target terminus."""
    if isinstance(terminus, dict):
        return _text(terminus.get("address"))
    return None


def outcome_of(state) -> tuple:
    """(outcome name, error condition) of a delivery state (None, None if there is none)."""
    if not isinstance(state, dict):
        return None, None
    name = state.get("$type")
    if name == "transactional-state":  # the outcome inside the transaction's state
        inner, _ = outcome_of(state.get("outcome"))
        return inner or name, None
    err = state.get("error")
    cond = _text(err.get("condition")) if isinstance(err, dict) else None
    return (name if isinstance(name, str) else "unknown"), cond


class ConnectionState:
    """What the performatives of one connection have said so far (both directions)."""

    def __init__(self) -> None:
        self.peer: dict = {}  # (direction, channel) -> the peer's channel of that session
        self.links: dict = {}  # (direction, channel, handle) -> Link
        self.held: dict = {}  # (sender direction, sender channel, delivery-id) -> Delivery
        self.outcomes: dict = {}  # same key -> (outcome, condition) stated before settlement

    # -- sessions and links ------------------------------------------------------------------

    def begin(self, direction: int, channel: int, args: dict) -> None:
        r = args.get("remote-channel")
        if isinstance(r, int) and len(self.peer) < MAX_LINKS:
            self.peer[(direction, channel)] = r
            self.peer[(direction ^ 1, r)] = channel

    def end(self, direction: int, channel: int) -> None:
        for key in [k for k in self.links if k[0] == direction and k[1] == channel]:
            del self.links[key]

    def attach(self, direction: int, channel: int, args: dict) -> Link:
        link = Link(args)
        handle = args.get("handle")
        if isinstance(handle, int) and len(self.links) < MAX_LINKS:
            self.links[(direction, channel, handle)] = link
        return link

    def link(self, direction: int, channel: int, handle) -> Link | None:
        return self.links.get((direction, channel, handle))

    def detach(self, direction: int, channel: int, handle) -> Link | None:
        return self.links.pop((direction, channel, handle), None)

    # -- deliveries --------------------------------------------------------------------------

    def delivered(self, direction: int, delivery, ts: int) -> list:
        """A message sent by ``direction`` is complete: the (direction, delivery) pairs to emit
        now (it, if it is settled or has no delivery-id to hold it by; the oldest held one if too
        many are)."""
        if delivery.settled or not is_delivery_id(delivery.delivery_id):
            if delivery.settled and delivery.settle_ts is None:
                delivery.settle_ts = ts
            return [(direction, delivery)]
        key = (direction, delivery.channel, delivery.delivery_id)
        stated = self.outcomes.pop(key, None)
        if stated is not None:
            delivery.outcome, delivery.condition = stated[0], stated[1]
            if stated[2]:  # settled before its last transfer was seen
                delivery.settled, delivery.settle_ts = True, stated[3]
                return [(direction, delivery)]
        out = []
        old = self.held.pop(key, None)
        if old is not None:
            out.append((direction, old))
        self.held[key] = delivery
        if len(self.held) > MAX_HELD:
            oldest = next(iter(self.held))
            out.append((oldest[0], self.held.pop(oldest)))
        return out

    def disposition(self, direction: int, channel: int, args: dict, ts: int) -> list:
        """Apply a disposition to the deliveries it names: the (direction, delivery) pairs
        it settles, to emit."""
        first = args.get("first")
        if not isinstance(first, int):
            return []
        last = args.get("last", first)
        if not isinstance(last, int):
            last = first
        receiver = args.get("role") is True
        sender = direction ^ 1 if receiver else direction
        sch = self.peer.get((direction, channel), channel) if receiver else channel
        settled = args.get("settled") is True
        outcome, condition = outcome_of(args.get("state"))
        out = []
        for did in self._ids(sender, sch, first, last):
            key = (sender, sch, did)
            d = self.held.get(key)
            if d is None:
                # not complete yet (or never seen): remembered for its last transfer
                if len(self.outcomes) < MAX_HELD:
                    prev = self.outcomes.get(key, (None, None, False, None))
                    self.outcomes[key] = (outcome or prev[0], condition or prev[1], settled, ts)
                continue
            if outcome is not None:
                d.outcome, d.condition = outcome, condition
            if settled:
                d.settled, d.settle_ts = True, ts
                out.append((sender, self.held.pop(key)))
        return out

    def _ids(self, sender: int, channel: int, first: int, last: int):
        """The delivery-ids first..last (serial numbers: the range may wrap) worth looking up:
        the range itself if short, else the held and remembered ids in it."""
        span = (last - first) & 0xFFFFFFFF
        if span < 64:
            return [(first + i) & 0xFFFFFFFF for i in range(span + 1)]
        known = {k[2] for k in self.held if k[0] == sender and k[1] == channel}
        known.update(k[2] for k in self.outcomes if k[0] == sender and k[1] == channel)
        return sorted(i for i in known if (i - first) & 0xFFFFFFFF <= span)

    def release_all(self) -> list:
        """Every delivery still held (the end of the capture): unsettled."""
        out = [(k[0], dv) for k, dv in self.held.items()]
        self.held.clear()
        self.outcomes.clear()
        return out


def condition_name(symbol) -> str | None:
    """The spec's name of an error condition symbol (None if it is not one the spec defines)."""
    hit = SPEC.ERROR_CONDITIONS.get(symbol)
    return hit[1] if hit else None
