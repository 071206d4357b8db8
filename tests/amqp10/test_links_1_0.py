"""The AMQP 1.0 connection state: links_1_0.ConnectionState (the reference) and its compiled twin
(fast10's LinkState, which the compiled decoder holds), fed the same performatives, emit the same
deliveries in the same order with the same settlement, outcome and time, and hold the same
tables: for ordinary traffic, dispositions over short, long and wrapping ranges, hostile ids and
channels, and past MAX_HELD.  A delivery-id that is no uint (a string, a float, a list, a number
past 32 bits) is never held, so no disposition raises over it."""

from __future__ import annotations

import random

import pytest
from fixtures.compiled import built_or_skip

from amqpcap.amqp import links_1_0
from amqpcap.amqp.links_1_0 import ConnectionState

ACCEPTED = {"$type": "accepted"}
REJECTED = {"$type": "rejected", "error": {"condition": "amqp:not-found"}}
EMPTY_CONDITION = {"$type": "rejected", "error": {"condition": ""}}
MODIFIED = {"$type": "modified"}


class Msg:
    """What the state reads and sets of a delivery (a Delivery, or the compiled walker's row)."""

    __slots__ = ("name", "channel", "delivery_id", "settled", "settle_ts", "outcome", "condition")

    def __init__(self, name, channel, delivery_id, settled=False):
        self.name, self.channel, self.delivery_id, self.settled = name, channel, delivery_id, settled
        self.settle_ts = self.outcome = self.condition = None


def seen(pairs) -> list:
    return [(d, m.name, m.settled, m.settle_ts, m.outcome, m.condition) for d, m in pairs]


def replay(state, ops) -> list:
    """What ``state`` emits and returns for ``ops``, then what it holds and releases at the end."""
    out = []
    for n, (op, *args) in enumerate(ops):
        if op == "deliver":
            direction, channel, did, settled = args
            out.append(seen(state.delivered(direction, Msg(n, channel, did, settled), n)))
        elif op == "disposition":
            out.append(seen(state.disposition(*args, n)))
        elif op in ("attach", "link", "detach"):
            link = getattr(state, op)(*args)
            out.append(None if link is None else (link.name, link.role, link.source, link.target))
        else:
            out.append(getattr(state, op)(*args))
    out.append((len(state.held), len(state.outcomes), sorted(map(repr, state.peer.items()))))
    out.append(sorted(map(repr, state.links)))
    out.append(seen(state.release_all()))
    return out


def compiled_state():
    return built_or_skip("fast10").LinkState()


def ops_of(seed: int, count: int = 600) -> list:
    """Random traffic of two sessions and their links, with dispositions by either role over
    short, long and wrapping ranges, and hostile ids, channels and fields now and then."""
    rng = random.Random(seed)
    ids = [0, 0]
    ops = [
        ("begin", 0, 0, {"remote-channel": None}),
        ("begin", 1, 0, {"remote-channel": 0}),
        ("begin", 0, 1, {}),
        ("begin", 1, 3, {"remote-channel": 1}),
    ]
    for direction in (0, 1):
        for handle in (0, 1):
            args = {"name": f"l{direction}{handle}", "handle": handle, "role": bool(handle)}
            args["target"] = {"address": f"/queues/q{handle}"}
            ops.append(("attach", direction, handle, args))
    if seed % 3 == 0:  # ids about to wrap
        ids = [0xFFFFFFFF - 40, 0xFFFFFFF0]
    odd = [True, False, -1, 1 << 32, (1 << 32) + 3, 1 << 40, "7", 2.0, [5]]
    for _ in range(count):
        r = rng.random()
        direction = rng.randrange(2)
        if r < 0.55:
            channel = rng.choice((0, 0, 0, 1))
            if rng.random() < 0.05:
                did = rng.choice(odd)
            elif rng.random() < 0.1:
                did = None
            else:
                did = ids[direction]
                ids[direction] = (ids[direction] + 1) & 0xFFFFFFFF
            ops.append(("deliver", direction, channel, did, rng.random() < 0.1))
        elif r < 0.9:
            back = rng.choice((0, 1, 3, 10, 63, 64, 65, 200))
            first = (ids[direction ^ 1] - back - rng.randrange(3)) & 0xFFFFFFFF
            args = {"role": rng.random() < 0.8, "first": first}
            if rng.random() < 0.8:
                args["last"] = (first + rng.choice((0, 1, 5, 63, 64, 100, 300))) & 0xFFFFFFFF
            elif rng.random() < 0.2:
                args["last"] = "x"
            if rng.random() < 0.85:
                args["settled"] = True
            args["state"] = rng.choice((ACCEPTED, REJECTED, EMPTY_CONDITION, MODIFIED, None, "junk"))
            if rng.random() < 0.03:
                args["first"] = rng.choice(odd)
            ops.append(
                ("disposition", direction ^ 1 if args["role"] else direction, rng.choice((0, 0, 1, 3)), args)
            )
        elif r < 0.94:
            ops.append(("link", direction, rng.randrange(2), rng.choice((0, 1, 2, True, "h"))))
        elif r < 0.96:
            ops.append(("detach", direction, rng.randrange(2), rng.randrange(3)))
        elif r < 0.98:
            args = {"name": b"n\xff", "handle": rng.choice((0, 1, True, "h", 1 << 40)), "role": 1}
            ops.append(("attach", direction, rng.randrange(2), args))
        elif r < 0.99:
            ops.append(
                ("begin", direction, rng.randrange(2), {"remote-channel": rng.choice((2, 70000, True, "c"))})
            )
        else:
            ops.append(("end", direction, rng.randrange(2)))
    return ops


@pytest.mark.compiled("fast10")
@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_state_emits_and_holds_what_the_reference_does(seed):
    ops = ops_of(seed)
    assert replay(compiled_state(), ops) == replay(ConnectionState(), ops)


@pytest.mark.compiled("fast10")
def test_past_max_held_both_states_release_the_oldest_unsettled_delivery_first():
    n = links_1_0.MAX_HELD + 50
    ops = [("deliver", i % 2, i % 3, i, False) for i in range(n)]
    ops.append(
        ("disposition", 1, 0, {"role": True, "first": 0, "last": n, "settled": True, "state": ACCEPTED})
    )
    want = replay(ConnectionState(), ops)
    evicted = [e for step in want[:n] for e in step]
    assert [name for _, name, *_ in evicted] == list(range(50))  # the oldest first
    assert replay(compiled_state(), ops) == want


@pytest.mark.parametrize(
    "make",
    [ConnectionState, pytest.param(compiled_state, marks=pytest.mark.compiled("fast10"))],
    ids=["reference", "compiled"],
)
def test_a_disposition_over_a_wrapping_range_settles_the_ids_on_both_sides_of_zero(make):
    st = make()
    for i, did in enumerate((0xFFFFFFFE, 0xFFFFFFFF, 0, 1, 2)):
        st.delivered(0, Msg(i, 0, did), i)
    out = st.disposition(1, 0, {"role": True, "first": 0xFFFFFFFF, "last": 1, "settled": True}, 9)
    assert [m.delivery_id for _, m in out] == [0xFFFFFFFF, 0, 1]
    assert [m.delivery_id for _, m in st.release_all()] == [0xFFFFFFFE, 2]


@pytest.mark.parametrize(
    "make",
    [ConnectionState, pytest.param(compiled_state, marks=pytest.mark.compiled("fast10"))],
    ids=["reference", "compiled"],
)
@pytest.mark.parametrize("hostile", ["7", 7.0, [7], -1, 1 << 32, True], ids=repr)
def test_a_delivery_id_that_is_no_uint_is_released_at_once_and_a_wide_disposition_settles_the_rest(
    make, hostile
):
    st = make()
    assert st.delivered(0, Msg("ok-5", 0, 5), 1) == []
    (released,) = st.delivered(0, Msg("hostile", 0, hostile), 2)
    assert seen([released]) == [(0, "hostile", False, None, None, None)]
    assert st.delivered(0, Msg("ok-6", 0, 6), 3) == []
    out = st.disposition(1, 0, {"role": True, "first": 0, "last": 100, "settled": True, "state": ACCEPTED}, 4)
    assert seen(out) == [(0, "ok-5", True, 4, "accepted", None), (0, "ok-6", True, 4, "accepted", None)]
    assert st.release_all() == []
