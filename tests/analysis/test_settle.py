"""Confirms and consumer acks, paired as array operations, against a walk of the same rules one
method at a time, on generated method sequences (reopened channels, tags acknowledged twice or
ahead, multiple with tag 0, a tag delivered again while outstanding, consumers on other channels)."""

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st
from tables import Capture, rows

from amqpcap.analysis import confirms, consumer_acks

CHANNELS = st.sampled_from([1, 1, 2, 3])
TAGS = st.one_of(st.none(), st.integers(0, 8))
FLAGS = st.one_of(st.none(), st.booleans())

CONFIRM_STEP = st.one_of(
    st.tuples(st.just("confirm.select"), CHANNELS, st.just("c2s")),
    st.tuples(st.just("channel.open"), CHANNELS, st.sampled_from(["c2s", "s2c"])),
    st.tuples(st.just("basic.publish"), CHANNELS, st.sampled_from(["c2s", "c2s", "s2c"])),
    st.tuples(
        st.sampled_from(["basic.ack", "basic.nack"]), CHANNELS, st.sampled_from(["s2c", "c2s"]), TAGS, FLAGS
    ),
)


def walk_confirms(steps):
    """(channel, n, publish frame, settling frame, outcome, multiple) by the rules, one step at a time."""
    chans, out = {}, []
    for frame, (name, ch, d, *rest) in enumerate(steps, start=1):
        c = chans.get(ch)
        if name == "channel.open":
            for n, f in (c or {"out": {}})["out"].items():
                out.append((ch, n, f, None, "unconfirmed", None))
            chans.pop(ch, None)
        elif name == "confirm.select":
            chans.setdefault(ch, {"seq": 0, "out": OrderedDict()})
        elif c is None:
            continue
        elif name == "basic.publish" and d == "c2s":
            c["seq"] += 1
            c["out"][c["seq"]] = frame
        elif name in ("basic.ack", "basic.nack") and d == "s2c" and rest[0] is not None:
            tag, multiple = rest
            outcome = "ack" if name == "basic.ack" else "nack"
            done = [k for k in c["out"] if tag == 0 or k <= tag] if multiple else [tag] * (tag in c["out"])
            for k in done:
                out.append((ch, k, c["out"].pop(k), frame, outcome, bool(multiple)))
    for ch, c in chans.items():
        out += [(ch, n, f, None, "unconfirmed", None) for n, f in c["out"].items()]
    return sorted(out, key=lambda r: (r[0], r[2], r[1]))


def play(steps) -> Capture:
    c = Capture()
    for ms, (name, ch, d, *rest) in enumerate(steps):
        kw = {}
        if name in ("basic.ack", "basic.nack", "basic.reject"):
            kw = dict(delivery_tag=rest[0], multiple=rest[1], requeue=rest[2] if len(rest) > 2 else None)
        elif name == "basic.publish":
            kw = dict(exchange="x", routing_key="k", body=b"p")
        elif name == "basic.deliver":
            kw = dict(consumer_tag=rest[0], delivery_tag=rest[1], body=b"d")
        elif name == "basic.consume":
            kw = dict(consumer_tag=rest[0], queue=rest[1], no_ack=rest[2])
        c.method(ms, d, name, channel=ch, **kw)
    return c


@settings(max_examples=60, deadline=None)
@given(st.lists(CONFIRM_STEP, max_size=40))
def test_confirms_settle_as_a_walk_of_the_rules_does(steps):
    cols = ["channel", "delivery_tag", "request_frame", "response_frame", "outcome", "multiple"]
    assert rows(confirms(play(steps).tables()), cols) == walk_confirms(steps)


CTAGS = st.sampled_from(["a", "b", "c"])
ACK_STEP = st.one_of(
    st.tuples(
        st.just("basic.consume"),
        CHANNELS,
        st.just("c2s"),
        CTAGS,
        st.sampled_from(["q1", "q2"]),
        st.booleans(),
    ),
    st.tuples(st.just("channel.open"), CHANNELS, st.sampled_from(["c2s", "s2c"])),
    st.tuples(st.just("basic.deliver"), CHANNELS, st.sampled_from(["s2c", "s2c", "c2s"]), CTAGS, TAGS),
    st.tuples(st.just("basic.recover"), CHANNELS, st.just("c2s")),
    st.tuples(
        st.sampled_from(["basic.ack", "basic.nack", "basic.reject"]),
        CHANNELS,
        st.sampled_from(["c2s", "c2s", "s2c"]),
        TAGS,
        FLAGS,
        FLAGS,
    ),
)


def walk_acks(steps):
    """(channel, tag, delivery frame, settling frame, outcome, multiple, requeue, queue) by the rules."""
    by_tag, chans, out = {}, {}, []  # by_tag: (channel, consumer tag) -> (queue, no_ack)

    def settle(ch, k, dl, frame, outcome, multiple, requeue):
        out.append((ch, k, dl[0], frame, outcome, multiple, requeue, dl[1]))

    for frame, (name, ch, d, *rest) in enumerate(steps, start=1):
        if name == "channel.open":
            for k, dl in chans.pop(ch, {}).items():
                settle(ch, k, dl, None, "unsettled", None, None)
            for key in [key for key in by_tag if key[0] == ch]:
                by_tag.pop(key)
        elif name == "basic.consume":
            by_tag[(ch, rest[0])] = (rest[1], rest[2])
        elif name == "basic.deliver" and d == "s2c":
            ctag, tag = rest
            consumer = by_tag.get((ch, ctag)) or next((v for k, v in by_tag.items() if k[1] == ctag), None)
            queue, no_ack = consumer or (None, None)
            if not no_ack and tag is not None:
                chans.setdefault(ch, OrderedDict())[tag] = (frame, queue)
        elif d == "c2s" and chans.get(ch) and name not in ("basic.deliver", "basic.consume"):
            out_ = chans[ch]
            if name.startswith("basic.recover"):
                for k in list(out_):
                    settle(ch, k, out_.pop(k), frame, "recovered", None, None)
            elif rest[0] is not None:
                tag, multiple, requeue = rest
                outcome = {"basic.ack": "ack", "basic.nack": "nack", "basic.reject": "reject"}[name]
                if multiple and name != "basic.reject":
                    for k in [k for k in out_ if tag == 0 or k <= tag]:
                        settle(ch, k, out_.pop(k), frame, outcome, True, requeue)
                elif tag in out_:
                    settle(
                        ch,
                        tag,
                        out_.pop(tag),
                        frame,
                        outcome,
                        None if outcome == "reject" else False,
                        requeue,
                    )
    for ch, out_ in chans.items():
        for k, dl in out_.items():
            settle(ch, k, dl, None, "unsettled", None, None)
    return sorted(out, key=lambda r: (r[0], r[2]))


@settings(max_examples=60, deadline=None)
@given(st.lists(ACK_STEP, max_size=40))
def test_consumer_acks_settle_as_a_walk_of_the_rules_does(steps):
    cols = ["channel", "delivery_tag", "request_frame", "response_frame", "outcome", "multiple", "requeue",
            "queue"]  # fmt: skip
    assert rows(consumer_acks(play(steps).tables()), cols) == walk_acks(steps)
