# AMQP 1.0 connection state in C (included by fast10.pyx): links_1_0.ConnectionState compiled,
# which this module's ``Decoder10`` holds (its ``State``).  The very tables of the reference (the
# same dicts, keys and order), so that every delivery is emitted when and as the reference emits
# it (release_all's order, the oldest evicted past MAX_HELD) whatever the ids are; what is
# compiled is the walk: ``transfer`` calls ``link_of`` and ``deliver`` with no Python call and
# appends to the events in place, and a disposition's range is walked in C.  The reference's code
# (codec_1_0) calls the same methods by their Python names.

from cpython.list cimport PyList_Append
from cpython.long cimport PyLong_Check, PyLong_CheckExact

cdef Py_ssize_t MAX_HELD = L.MAX_HELD
cdef Py_ssize_t MAX_LINKS = L.MAX_LINKS
cdef object Link = L.Link
cdef tuple NO_OUTCOME = (None, None, False, None)


cdef inline bint is_delivery_id(v):
    """links_1_0.is_delivery_id: a uint."""
    return PyLong_CheckExact(v) and 0 <= v <= 0xFFFFFFFF


cdef class LinkState:
    """links_1_0.ConnectionState: what the performatives of one connection have said so far."""

    cdef public dict peer  # (direction, channel) -> the peer's channel of that session
    cdef public dict links  # (direction, channel, handle) -> Link
    cdef public dict held  # (sender direction, sender channel, delivery-id) -> Delivery (or HeldRow)
    cdef public dict outcomes  # same key -> (outcome, condition, settled, ts) stated before settlement

    def __init__(self):
        self.peer, self.links, self.held, self.outcomes = {}, {}, {}, {}

    # -- sessions and links ------------------------------------------------------------------

    def begin(self, direction, channel, dict args):
        r = args.get("remote-channel")
        if PyLong_Check(r) and len(self.peer) < MAX_LINKS:
            self.peer[(direction, channel)] = r
            self.peer[(direction ^ 1, r)] = channel

    def end(self, direction, channel):
        for key in [k for k in self.links if k[0] == direction and k[1] == channel]:
            del self.links[key]

    def attach(self, direction, channel, dict args):
        link = Link(args)
        handle = args.get("handle")
        if PyLong_Check(handle) and len(self.links) < MAX_LINKS:
            self.links[(direction, channel, handle)] = link
        return link

    def link(self, direction, channel, handle):
        return self.links.get((direction, channel, handle))

    cdef inline object link_of(self, int direction, channel, handle):
        return self.links.get((direction, channel, handle))

    def detach(self, direction, channel, handle):
        return self.links.pop((direction, channel, handle), None)

    # -- deliveries --------------------------------------------------------------------------

    def delivered(self, int direction, delivery, ts):
        out = []
        self.deliver(out, direction, delivery, ts)
        return out

    cdef int deliver(self, list out, int direction, delivery, ts) except -1:
        """ConnectionState.delivered: the (direction, delivery) pairs to emit appended to ``out``."""
        cdef HeldRow h
        if type(delivery) is HeldRow:  # (the walker's: its fields read in C)
            h = <HeldRow>delivery
            did, settled, channel = h.delivery_id, h.settled, h.channel
        else:
            did, settled, channel = delivery.delivery_id, delivery.settled, delivery.channel
        if settled or not is_delivery_id(did):
            if settled and settle_ts_of(delivery) is None:
                mark_settled(delivery, ts)
            PyList_Append(out, (direction, delivery))
            return 0
        key = (direction, channel, did)
        stated = self.outcomes.pop(key, None) if self.outcomes else None  # (none stated: no lookup)
        if stated is not None:
            mark_outcome(delivery, stated[0], stated[1])
            if stated[2]:  # settled before its last transfer was seen
                mark_settled(delivery, stated[3])
                PyList_Append(out, (direction, delivery))
                return 0
        old = self.held.pop(key, None)
        if old is not None:
            PyList_Append(out, (direction, old))
        self.held[key] = delivery
        if len(self.held) > MAX_HELD:
            oldest = next(iter(self.held))
            PyList_Append(out, (oldest[0], self.held.pop(oldest)))
        return 0

    def disposition(self, int direction, channel, dict args, ts):
        out = []
        self.settle(out, direction, channel, args, ts)
        return out

    cdef int settle(self, list out, int direction, channel, dict args, ts) except -1:
        """ConnectionState.disposition: the (direction, delivery) pairs it settles appended to
        ``out``."""
        cdef unsigned int f, span, i
        first = args.get("first")
        if not PyLong_Check(first):
            return 0
        last = args.get("last", first)
        if not PyLong_Check(last):
            last = first
        receiver = args.get("role") is True
        sender = direction ^ 1 if receiver else direction
        sch = self.peer.get((direction, channel), channel) if receiver else channel
        settled = args.get("settled") is True
        outcome, condition = outcome_pair(args.get("state"))
        span = <unsigned int>((last - first) & 0xFFFFFFFF)
        if span < 64:  # the range itself (serial numbers: it may wrap)
            f = <unsigned int>(first & 0xFFFFFFFF)
            for i in range(span + 1):
                self.settle_one(out, (sender, sch, f + i), settled, outcome, condition, ts)
            return 0
        # else the held and remembered ids in it (ConnectionState._ids)
        known = {k[2] for k in self.held if k[0] == sender and k[1] == sch}
        known.update(k[2] for k in self.outcomes if k[0] == sender and k[1] == sch)
        for did in sorted(i for i in known if (i - first) & 0xFFFFFFFF <= span):
            self.settle_one(out, (sender, sch, did), settled, outcome, condition, ts)
        return 0

    cdef int settle_one(self, list out, tuple key, bint settled, outcome, condition, ts) except -1:
        d = self.held.pop(key, None) if settled else self.held.get(key)
        if d is None:
            # not complete yet (or never seen): remembered for its last transfer
            if len(self.outcomes) < MAX_HELD:
                prev = self.outcomes.get(key, NO_OUTCOME)
                self.outcomes[key] = (outcome or prev[0], condition or prev[1], settled, ts)
            return 0
        if outcome is not None:
            mark_outcome(d, outcome, condition)
        if settled:
            mark_settled(d, ts)
            PyList_Append(out, (key[0], d))
        return 0

    def release_all(self):
        """Every delivery still held (the end of the capture): unsettled."""
        out = [(k[0], dv) for k, dv in self.held.items()]
        self.held.clear()
        self.outcomes.clear()
        return out


# A held delivery's settlement and outcome set (a Delivery's attributes, a HeldRow's fields in C)

cdef inline object settle_ts_of(d):
    return (<HeldRow>d).settle_ts if type(d) is HeldRow else d.settle_ts


cdef inline int mark_settled(d, ts) except -1:
    if type(d) is HeldRow:
        (<HeldRow>d).settled, (<HeldRow>d).settle_ts = True, ts
    else:
        d.settled, d.settle_ts = True, ts
    return 0


cdef inline int mark_outcome(d, outcome, condition) except -1:
    if type(d) is HeldRow:
        (<HeldRow>d).outcome, (<HeldRow>d).condition = outcome, condition
    else:
        d.outcome, d.condition = outcome, condition
    return 0
