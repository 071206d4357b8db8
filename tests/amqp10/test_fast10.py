"""The compiled AMQP 1.0 decoder (amqp/fast10.pyx) against its reference (types_1_0.decode,
codec_1_0.read_performative_reference / read_sections_reference): every value, performative
and message the decoder reads on every 1.0 recording, and those bytes damaged, decode to the
same values, or fail with the same error text; the rows it writes are the reference's
(records/rows_1_0.py); and whole datasets are the same either way."""

from __future__ import annotations

import glob
import os
import random
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from fixtures import hostile as H
from fixtures.compiled import ROOT, built_or_skip

from amqpcap.amqp import codec_1_0, decoder, types_1_0
from amqpcap.amqp.stream import DecodeError
from amqpcap.pipeline import dissect
from amqpcap.records import rows, rows_1_0

CAPTURES_10 = sorted(glob.glob(os.path.join(ROOT, "captures", "rabbitmq10_*.pcap")))


def outcome(fn, *args):
    """What ``fn(*args)`` gives: its value, or its DecodeError's text (and the body kind a
    section reader attaches)."""
    try:
        return "ok", fn(*args)
    except DecodeError as e:
        return "error", e.args


def sections_of(read, buf):
    sections, spans = {}, []
    got = outcome(read, buf, sections, spans)
    return got, sections, spans


def damaged(buf: bytes, rng: random.Random):
    """``buf`` with a byte changed, cut short, or a byte dropped (a few of each)."""
    if not buf:
        return
    for _ in range(4):
        i = rng.randrange(len(buf))
        yield buf[:i] + bytes([rng.randrange(256)]) + buf[i + 1 :]
        yield buf[: rng.randrange(len(buf))]
        yield buf[:i] + buf[i + 1 :]


def compare(fast10, inputs) -> int:
    rng = random.Random(7)
    compared = 0
    for kind, buf, args in inputs:
        cases = [buf] + list(damaged(buf, rng))
        for b in cases:
            if kind == "performative":
                body, end = args[0], len(b)
                if body > end:
                    continue
                want = outcome(codec_1_0.read_performative_reference, b, body, end)
                assert outcome(fast10.read_performative, b, body, end) == want, (b, body)
                if want[0] == "ok":  # the value decoder alone, from the descriptor on
                    ref = outcome(types_1_0.decode, b, body, end, 0)
                    assert outcome(fast10.decode, b, body, end, 0) == ref, (b, body)
            else:
                assert sections_of(fast10.read_sections, b) == sections_of(
                    codec_1_0.read_sections_reference, b
                ), b
            compared += 1
    return compared


@pytest.mark.parametrize("capture", CAPTURES_10, ids=os.path.basename)
def test_the_compiled_1_0_decoder_reads_every_recorded_frame_as_the_reference(capture, tmp_path, monkeypatch):
    fast10 = built_or_skip("fast10")
    inputs = []

    def performative(buf, body, end):
        inputs.append(("performative", bytes(buf[body:end]), (0,)))
        return codec_1_0.read_performative_reference(buf, body, end)

    def sections(buf, out, spans):
        inputs.append(("sections", bytes(buf), ()))
        return codec_1_0.read_sections_reference(buf, out, spans)

    monkeypatch.setattr(codec_1_0, "read_performative", performative)
    monkeypatch.setattr(codec_1_0, "read_sections", sections)
    # the reference's walk, which reads every message through read_sections
    monkeypatch.setattr(decoder, "decoder_1_0", lambda: codec_1_0.Decoder10)
    dissect([capture], str(tmp_path / "out"))
    assert any(k == "sections" for k, _b, _a in inputs)  # messages were read, not just frames
    assert compare(fast10, inputs) > len(inputs)


@pytest.mark.compiled("fast10")
@pytest.mark.parametrize("frames", [["--frames"], []], ids=["frames", "default"])
@pytest.mark.parametrize("capture", CAPTURES_10, ids=os.path.basename)
def test_1_0_datasets_are_the_same_compiled_and_pure(capture, frames, tmp_path):
    built_or_skip("fast10")
    got = []
    for pure in (False, True):
        out = tmp_path / f"out-{pure}"
        H.no_internal_error(H.run_cli("dissect", capture, "-o", out, *frames, pure=pure))
        got.append(H.tables(out))
    assert got[0]["messages"] and got[0]["methods"]
    assert got[0] == got[1]


@pytest.mark.parametrize("capture", CAPTURES_10, ids=os.path.basename)
def test_the_compiled_1_0_rows_are_the_reference_rows(capture, tmp_path, monkeypatch):
    fast10 = built_or_skip("fast10")
    written = {"methods": 0, "messages": 0}
    held, walked = [0], [0]

    def both(events, cap, stream, version, methods, messages):
        got = []
        # the events both builders take (a HeldRow is the compiled walker's own: the dataset and
        # damaged-stream tests compare its rows with the reference decoder's); a walked
        # performative's row, its arguments written from the frame's bytes, against the
        # reference's row of its Performative
        shared = [(d, e) for d, e in events if type(e) is not fast10.HeldRow]
        plain = [(d, e.perf if type(e) is fast10.WalkedPerformative else e) for d, e in shared]
        for append_rows, given in ((rows_1_0.append_rows_reference, plain), (fast10.append_rows, shared)):
            m, g = [], []  # plain lists: the compiled builder hands them its rows as tuples
            rest = append_rows(given, cap, stream, version, m, g)
            got.append(repr((m, g, rest)))  # (repr: True and 1, 1 and 1.0 differ)
        assert got[0] == got[1]
        written["methods"] += len(m)
        written["messages"] += len(g)
        held[0] += len(events) - len(shared)
        walked[0] += sum(type(e) is fast10.WalkedPerformative for _d, e in shared)
        return fast10.append_rows(events, cap, stream, version, methods, messages)

    monkeypatch.setattr(rows_1_0, "append_rows", both)
    # every row through the events, to be compared here (the walker's own rows, written with a
    # row sink, are the events' rows: test_the_1_0_walker_writes_its_rows_itself_...)
    monkeypatch.setattr(rows, "row_sink", lambda *a: None)
    dissect([capture], str(tmp_path / "out"))
    assert written["methods"]
    # (the compiled frame loop walks the transfers, dispositions and flows: some, at least)
    assert walked[0] or decoder.decoder_1_0() is codec_1_0.Decoder10
    written["messages"] += held[0]
    for table, n in written.items():  # every 1.0 row written was compared (or held: see above)
        versions = pq.read_table(tmp_path / "out" / table, columns=["version"]).column("version")
        assert versions.to_pylist().count("1.0") == n


def test_values_the_compiled_decoder_leaves_to_the_reference_decode_the_same():
    fast10 = built_or_skip("fast10")
    cases = [
        b"\x72\x3f\x80\x00\x00",  # float
        b"\x98" + bytes(range(16)),  # uuid
        b"\x73\x00\x00\x00\x41",  # char
        b"\xe0\x05\x03\x52\x01\x02\x03",  # array8 of smalluint
        b"\x00\xa3\x03a:b\xc0\x03\x01\x43",  # described by a symbol no spec composite has
        b"\xc1\x05\x02\xc0\x01\x00\x41",  # a map whose key is a list
        b"\xc1\x05\x02\xc1\x01\x00\x41",  # a map whose key is a map
        b"\xc1\x08\x04\xa1\x01k\x41\x52\x07\x42",  # a map whose keys are a string and an int
        b"\xc0\x05\x02\x52\x01",  # a count its bytes cannot hold
        b"\xd0\x00\x00\x00\x01\x00\x00\x00\x00",  # list32 whose size is smaller than its count field
    ]
    for b in cases:
        assert outcome(fast10.decode, b, 0, len(b), 0) == outcome(types_1_0.decode, b, 0, len(b), 0), b


def events_of(cls, raw: bytes, cuts: list, append_rows) -> tuple:
    """What a new ``cls`` decoder makes of ``raw`` fed in pieces ending at ``cuts``: the methods
    and messages rows ``append_rows`` writes of its events, and its other events."""
    d = cls()
    pos = 0
    for cut in cuts + [len(raw)]:
        if cut > pos:
            d.feed(0, raw[pos:cut], 8 + pos, 1, 1)
            pos = cut
    d.finish(2, 2)
    methods, messages = [], []
    rest = append_rows(d.pop_events(), "c", 1, "1.0", methods, messages)
    return repr(methods), repr(messages), rest


@pytest.mark.compiled("fast10")
def test_the_compiled_walker_makes_the_references_rows_and_events_of_damaged_streams():
    fast10 = built_or_skip("fast10")
    from amqp10_wire import data, frame, properties, transfer
    from test_fuzz_codec_1_0 import stream

    compiled_cls, reference = decoder.decoder_1_0(), codec_1_0.Decoder10
    assert compiled_cls is not reference
    # whole deliveries in one transfer (the compiled walk) as well as one split over two
    base = stream() + b"".join(
        frame(
            transfer(0, 1 + i, b"t%d" % i, settled=i % 2 == 0)
            + properties(message_id=f"m{i}")
            + data(b"q" * i)
        )
        for i in range(6)
    )
    rnd = random.Random(11)
    anomalies = 0
    for _ in range(300):
        raw = bytearray(base)
        for _ in range(rnd.randint(0, 5)):
            raw[rnd.randrange(len(raw))] = rnd.choice(
                (0x00, 0xFF, 0x40, 0x53, 0xA0, 0xC0, rnd.randrange(256))
            )
        raw = bytes(raw[: rnd.randint(len(raw) // 2, len(raw))])
        cuts = sorted(rnd.randrange(len(raw)) for _ in range(rnd.randint(0, 4)))
        want = events_of(reference, raw, cuts, rows_1_0.append_rows_reference)
        assert events_of(compiled_cls, raw, cuts, fast10.append_rows) == want
        anomalies += sum(type(e).__name__ == "Anomaly" for _, e in want[2])
    assert anomalies > 50  # damage the walker noticed the reference's way


@pytest.mark.compiled("fast10")
def test_the_walkers_message_rows_are_the_references_for_every_section_the_row_rule_reads():
    fast10 = built_or_skip("fast10")
    from amqp10_wire import (
        Sym,
        amqp_value,
        application_properties,
        data,
        described,
        disposition,
        frame,
        header,
        list_,
        map_,
        message_annotations,
        null,
        properties,
        released,
        string,
        timestamp,
        transfer,
    )
    from test_fuzz_codec_1_0 import stream

    messages = [
        header(True, 9, 5000) + properties(to="/exchanges/x/k", content_type="text/plain") + data(b"a"),
        header(False, None, None) + properties(reply_to="/queues/r", creation_time=timestamp(1700000000123)),
        application_properties({"k": 1}) + message_annotations({"x-opt": "v"}) + amqp_value([1, "two"]),
        described(0x74, null()) + properties(user_id=b"u\xff", correlation_id="c") + data(b""),
        properties(creation_time=timestamp(-(2**62))) + data(b"out of the column's range"),
        # values the section table's converters convert, and sections of other shapes
        properties(correlation_id=7, content_type=Sym("t/p"), content_encoding="gzip", to=b"/queues/q2")
        + application_properties({"k": b"\x01"})
        + data(b"b"),
        described(0x70, string("a header that is not a list")) + described(0x74, list_([1, 2])) + data(b""),
        described(0x73, map_({"to": "/topic/t", "message-id": 9})) + data(b"p"),
        described(0x70, list_([None, True, True])) + data(b"a priority and a ttl that are booleans"),
    ]
    raw = stream() + b"".join(
        frame(transfer(0, 1 + i, b"t%d" % i, settled=i == 0) + m) for i, m in enumerate(messages)
    )
    raw += frame(disposition(True, 2, 3, True, released()))  # two settled, the rest released at the end
    want = events_of(codec_1_0.Decoder10, raw, [], rows_1_0.append_rows_reference)
    got = events_of(decoder.decoder_1_0(), raw, [], fast10.append_rows)
    assert want[1].count("'transfer'") == 1 + len(messages)  # (the stream's own delivery too)
    assert all(v in want[1] for v in ("'7'", "'t/p'", "'q2'", '\'{"k":{"$b64":"AQ=="}}\'', "'amq.topic'"))
    assert got == want


@pytest.mark.compiled("fast10")
def test_messages_read_in_place_with_values_left_to_the_reference_make_the_references_rows():
    fast10 = built_or_skip("fast10")
    from amqp10_wire import (
        Raw,
        amqp_value,
        application_properties,
        data,
        described,
        frame,
        list_,
        properties,
        transfer,
    )
    from test_fuzz_codec_1_0 import stream

    uuid = Raw(b"\x98" + bytes(range(16)))
    messages = [
        # values the walker hands to the reference's readers, inside a message it reads in place
        properties(message_id=uuid, correlation_id=Raw(b"\x73\x00\x00\x00\x41")) + data(b"u"),
        application_properties({"f": Raw(b"\x72\x3f\x80\x00\x00"), "a": Raw(b"\xe0\x05\x03\x52\x01\x02\x03")})
        + amqp_value(Raw(b"\x82" + bytes(8))),
        # a body of two sections (its digest the reference's), and a value cut short (the reference's read)
        described(0x76, list_([1, 2])) + described(0x76, list_(["three"])),
        application_properties({"f": Raw(b"\x72\x3f\x80")}) + data(b"cut"),
    ]
    raw = stream() + b"".join(
        frame(transfer(0, 1 + i, b"t%d" % i, settled=True) + m) for i, m in enumerate(messages)
    )
    want = events_of(codec_1_0.Decoder10, raw, [], rows_1_0.append_rows_reference)
    got = events_of(decoder.decoder_1_0(), raw, [], fast10.append_rows)
    assert want[1].count("'transfer'") == 1 + len(messages)  # (the stream's own delivery too)
    assert "malformed-message" in repr(want[2])
    assert got == want


@pytest.mark.compiled("fast10")
def test_a_messages_sections_and_body_read_in_place_are_the_references():
    """A composite section of no, some, every and more values than its fields (the rest kept as
    ``$extra``), before a body of one to three sections: the compiled walk's sections, body
    size, digest and first bytes are codec_1_0.body_sections' by the reference's reader."""
    built_or_skip("fast10")
    from amqp10_wire import amqp_value, data, described, header, list_, properties

    sections = [
        header(True, 4, 9),
        described(0x70, list_([])),
        described(0x70, list_([True, 4, None, False, 1, "beyond", 2])),
        properties(message_id="m", to="/queues/q"),
        described(0x73, list_(["m"] + [None] * 12 + ["beyond", 7])),
    ]
    bodies = [b"", data(b""), data(b"a"), data(b"a") + data(b"bc") + data(b"d" * 100), amqp_value([1, "two"])]
    walker = decoder.decoder_1_0()()
    extras = 0
    for section in sections:
        for body in bodies:
            message = section + body
            want = codec_1_0.body_sections(message, 64, codec_1_0.read_sections_reference)
            assert walker._message(message) == want, message
            extras += "$extra" in repr(want[0])
    assert extras == 2 * len(bodies)


def test_a_performatives_typed_columns_follow_their_fields_types():
    """rows_1_0's methods row (the reference): a column takes a field of its type only."""
    row = rows_1_0.method_row("c", 1, 0, performative("transfer", {"delivery-id": 2**63, "more": 1}), "1.0")
    col = {c: row[i] for i, c in enumerate(rows_1_0.COLUMNS["methods"])}
    assert (col["delivery_id"], col["more"], col["settled"], col["has_content"]) == (None, None, None, True)
    row = rows_1_0.method_row("c", 1, 1, performative("disposition", {"first": 3, "role": True}), "1.0")
    col = {c: row[i] for i, c in enumerate(rows_1_0.COLUMNS["methods"])}
    assert (col["id_ranges"], col["settled"], col["role"], col["direction"]) == (
        [{"lower": 3, "upper": 3}],
        False,
        "receiver",
        "s2c",
    )
    for hostile in ([1], {"a": 1}, 1, 0, "true"):
        row = rows_1_0.method_row("c", 1, 1, performative("attach", {"role": hostile}), "1.0")
        assert row[rows_1_0.COLUMNS["methods"].index("role")] is None


def performative(name, args, code=0x14):
    from amqpcap.amqp.events_1_0 import Performative

    return Performative(7, 8, 9, 2, code, name, args, 0, 64, "link", "src", "dst")


EDGE_VALUES = (0, 1, -1, 2**63 - 1, 2**63, 2**64, True, False, "7", b"x", 1.5, [1], {"a": 1})
# delivery states: plain outcomes (read in C), and those links_1_0.outcome_of reads itself
STATES = (
    {"$type": "accepted"},
    {"$type": "released", "error": None},
    {"$type": "rejected", "error": {"condition": "x"}},
    {"$type": "rejected", "error": "not a map"},
    {"$type": "transactional-state", "outcome": {"$type": "modified"}},
    {"$type": "transactional-state"},
    {"$type": 5},
    {},
)


@pytest.mark.compiled("fast10")
def test_the_compiled_methods_rows_are_the_references_for_edge_values_of_every_typed_field():
    fast10 = built_or_skip("fast10")
    events = []
    for name, fields in rows_1_0.METHOD_FIELDS.items():
        names = [f for _c, f, *_ in fields if f is not None] + ["last", "error", "link-credit"]
        events.append((0, performative(name, {})))  # every field absent
        for v in EDGE_VALUES:
            args = {f: v for f in names}
            events.append((1, performative(name, args)))
        for state in STATES:
            events.append((0, performative(name, {"state": state})))
        events.append((1, performative(name, {"error": {"condition": b"c", "description": "d"}})))
    events.append((0, performative("open", {"handle": 5, "container-id": "x"}, 0x10)))
    want, got = ([], []), ([], [])
    assert rows_1_0.append_rows_reference(events, "c", 1, "1.0", *want) == []
    assert fast10.append_rows(events, "c", 1, "1.0", *got) == []
    assert len(want[0]) == len(events)
    assert got == want


def frame_loop_run(cls, raw: bytes, cuts: list, frame_events: bool, append_rows) -> tuple:
    """What a new ``cls`` decoder fed ``raw`` in pieces ending at ``cuts`` makes: the rows
    ``append_rows`` writes of its events, its other events, its tally calls summed per direction
    and its count of frames with no Frame event."""
    counts = [0, 0]

    def tally(direction, ts, n):
        counts[direction] += n

    d = cls()
    d.tally, d.frame_events = tally, frame_events
    pos = 0
    for i, cut in enumerate(cuts + [len(raw)]):
        if cut > pos:
            d.feed(0, raw[pos:cut], 8 + pos, 1 + i, 10 + i)
            pos = cut
    silent = d.silent_frames
    d.finish(99, 99)
    methods, messages = [], []
    rest = append_rows(d.pop_events(), "c", 1, "1.0", methods, messages)
    return repr(methods), repr(messages), rest, counts, silent


@pytest.mark.compiled("fast10")
@pytest.mark.parametrize("frame_events", [False, True], ids=["silent", "frame-events"])
def test_the_compiled_frame_loop_counts_and_emits_what_the_reference_does(frame_events):
    fast10 = built_or_skip("fast10")
    from amqp10_wire import data, frame, properties, transfer
    from test_fuzz_codec_1_0 import stream

    compiled_cls, reference = decoder.decoder_1_0(), codec_1_0.Decoder10
    assert compiled_cls._frames is not reference._frames
    whole = b"".join(
        frame(transfer(0, 1 + i, b"t%d" % i) + properties(message_id=f"m{i}") + data(b"q" * i))
        for i in range(5)
    )
    cases = {
        "sasl, a header inside the stream, heartbeats": stream() + whole + frame(b"") + whole,
        "a broken frame header after whole frames": whole + b"\x00\x00\x00\x09\x07\x05\x00\x00" + whole,
        "tls after the protocol header": whole + b"AMQP\x02\x01\x00\x00" + whole,
        "a performative that does not decode here": whole + frame(b"\x00\x53\x14\xc0\x05\x02\x52") + whole,
    }
    rnd = random.Random(5)
    for what, raw in cases.items():
        for _ in range(8):
            cuts = sorted(rnd.randrange(len(raw)) for _ in range(rnd.randint(0, 6)))
            want = frame_loop_run(reference, raw, cuts, frame_events, rows_1_0.append_rows_reference)
            assert want[3][0] >= 5 and want[1] != "[]", what  # frames counted, messages made
            assert frame_loop_run(compiled_cls, raw, cuts, frame_events, fast10.append_rows) == want, what


@pytest.mark.compiled("fast10")
def test_the_performatives_the_compiled_frame_loop_makes_are_the_references():
    """The frame loop makes each Performative in C, its fields stored at their slots: every
    field (the link's too, from the state) is what the reference's constructor gives, and the
    methods rows read from those slots are the reference's."""
    fast10 = built_or_skip("fast10")
    from amqp10_wire import attach, frame, transfer
    from test_fuzz_codec_1_0 import stream

    from amqpcap.amqp.events_1_0 import Performative

    raw = stream() + frame(attach("k", 1, False, tgt="/queues/r"), 3) + frame(transfer(1, 9, b"u"), 3)
    got = []
    for cls, append_rows in (
        (decoder.decoder_1_0(), fast10.append_rows),
        (codec_1_0.Decoder10, rows_1_0.append_rows_reference),
    ):
        d = cls()
        d.feed(0, raw, 8, 1, 10)
        d.finish(99, 99)
        events = d.pop_events()
        perfs = [e for _d, e in events if isinstance(e, Performative)]
        assert all(type(e) is Performative for e in perfs)
        methods = []
        append_rows(events, "c", 1, "1.0", methods, [])
        got.append(([tuple(getattr(e, f) for f in Performative.__slots__) for e in perfs], repr(methods)))
    assert got[0] == got[1]
    fields = {(e[5], e[3], e[9]) for e in got[0][0]}  # (name, channel, link_name)
    assert {("attach", 3, "k"), ("transfer", 3, "k"), ("flow", 0, "l"), ("close", 0, None)} <= fields


@pytest.mark.compiled("fast10")
def test_the_compiled_rows_of_assembled_deliveries_are_the_references():
    """A Delivery (several transfers, assembled by the reference) is written by the compiled
    rows: every column the reference's message_row gives, for edge values of its fields."""
    fast10 = built_or_skip("fast10")
    from amqpcap.amqp.events_1_0 import Delivery

    sections = (
        {},
        {"header": {"durable": True, "priority": 4, "ttl": 9}, "properties": {"to": "/queues/q"}},
        {"header": "not a list", "properties": {"creation-time": -(2**62), "message-id": 7}},
        {"header": {"durable": 1}, "application-properties": {"k": b"\x01"}, "footer": {"f": 1}},
    )
    events = []
    for i, sec in enumerate(sections):
        for delivery_id in (3, 2**64, None, True):
            dv = Delivery(
                *(40 + i, 50, 60, 2, 1, "link", "/exchanges/x/k", delivery_id, 30, 4, sec, "data", 9),
                *("ab" * 32, b"head", i % 2 == 0, i == 3, i > 1, 77 if i else None, "rejected", "amqp:x"),
            )
            events.append((i % 2, dv))
    want, got = ([], []), ([], [])
    assert rows_1_0.append_rows_reference(events, "c", 1, "1.0", *want) == []
    assert fast10.append_rows(events, "c", 1, "1.0", *got) == []
    assert len(want[1]) == len(events) and want[0] == []
    assert got == want


@pytest.mark.compiled("fast10")
def test_the_compiled_messages_row_finds_a_sections_fields_by_value_whatever_its_keys_objects():
    """The messages row's fields are found in one pass over a section's keys (the interned field
    names compared by identity, any other key by value): keys made at run time (not interned),
    interned or a text's subclass, and keys no field has, give the reference's row."""
    fast10 = built_or_skip("fast10")
    from amqpcap.amqp.events_1_0 import Delivery

    class Text(str):
        pass

    def fresh(name):  # the same text, another object (never interned)
        return "".join(list(name))

    fields = {"content-type": "t/p", "message-id": "m", "to": "/queues/q", "reply-to": 4, "user-id": b"u"}
    header = {"durable": True, "priority": 7, "ttl": 5, 3: "x", None: 1}
    sections = []
    for make in (fresh, sys.intern, Text, str):
        sections.append({"header": {make(k) if type(k) is str else k: v for k, v in header.items()}})
        sections[-1]["properties"] = {make(k): v for k, v in fields.items()}
        sections[-1]["properties"][make("group-id")] = "g"
    events = [
        (0, Delivery(1, 2, 3, 0, 1, "l", None, 5, 1, 1, sec, "data", 0, "", b"", True)) for sec in sections
    ]
    want, got = ([], []), ([], [])
    rows_1_0.append_rows_reference(events, "c", 1, "1.0", *want)
    fast10.append_rows(events, "c", 1, "1.0", *got)
    assert got == want
    assert all("t/p" in row and 7 in row and "m" in row and "5" in row for row in want[1])


def split_deliveries(rnd: random.Random) -> bytes:
    """A stream whose deliveries on two links are split over transfers at random byte offsets
    (inside a header, properties or data section as much as between them), their transfers
    interleaved: some settled on a middle transfer, some aborted or left unfinished, some with
    a second data section, an amqp-value body or a damaged section, then dispositions."""
    from amqp10_wire import (
        amqp_value,
        application_properties,
        attach,
        data,
        disposition,
        frame,
        header,
        properties,
        rejected,
        transfer,
    )
    from test_fuzz_codec_1_0 import stream

    out = [stream(), frame(attach("m", 1, False, tgt="/queues/r"))]
    pending = {0: [], 1: []}  # handle -> its delivery's frames still to send
    for did in range(1, 25):
        handle = rnd.randrange(2)
        msg = header(rnd.random() < 0.5, 4)
        msg += properties(message_id=f"m{did}", subject="s" * rnd.randrange(300))
        if rnd.random() < 0.5:
            msg += application_properties({"k": did, "pad": "p" * rnd.randrange(200)})
        body = bytes(rnd.randrange(256) for _ in range(rnd.choice((0, 40, 700, 3000))))
        msg += rnd.choice((data(body), data(body) + data(body[:99]), amqp_value(body.hex()[:500])))
        if rnd.random() < 0.1:
            i = rnd.randrange(len(msg))
            msg = msg[:i] + bytes([rnd.choice((0x00, 0x53, 0xA0, 0xFF))]) + msg[i + 1 :]
        cuts = sorted(rnd.randrange(len(msg) + 1) for _ in range(rnd.randint(0, 4)))
        pieces = [msg[a:b] for a, b in zip([0] + cuts, cuts + [len(msg)])]
        frames = []
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            first = i == 0
            aborted = True if last and rnd.random() < 0.05 else None
            frames.append(
                frame(
                    transfer(
                        handle,
                        did if first or rnd.random() < 0.3 else None,
                        b"t%d" % did if first else None,
                        settled=True if rnd.random() < 0.15 else None,
                        more=None if last else True,
                        aborted=aborted,
                    )
                    + piece
                )
            )
        if rnd.random() < 0.05:
            frames.pop()  # its last transfer never comes: the next delivery on the link begins
        pending[handle] += frames
        while pending[0] and pending[1] and rnd.random() < 0.7:  # the links' transfers interleaved
            out.append(pending[rnd.randrange(2)].pop(0))
    out += pending[0] + pending[1]
    out.append(frame(disposition(True, 1, 12, True, rejected("amqp:x"))))
    return b"".join(out)


@pytest.mark.compiled("fast10")
def test_deliveries_split_over_transfers_at_random_make_the_references_rows_and_events():
    """The walker assembles a delivery over several transfers itself: wherever its sections are
    cut, however its transfers interleave with another link's and whatever the feed's cuts,
    the rows and events are the reference's (its assemblies, settlement, anomalies)."""
    fast10 = built_or_skip("fast10")
    compiled_cls, reference = decoder.decoder_1_0(), codec_1_0.Decoder10
    rnd = random.Random(31)
    assembled = 0
    for i in range(60):
        raw = split_deliveries(rnd)
        # fed in pieces (a packet number each: a delivery's first and last packets differ)
        cuts = sorted(rnd.randrange(len(raw)) for _ in range(rnd.randint(0, 30)))
        frame_events = i % 4 == 0
        want = frame_loop_run(reference, raw, cuts, frame_events, rows_1_0.append_rows_reference)
        assert frame_loop_run(compiled_cls, raw, cuts, frame_events, fast10.append_rows) == want
        assembled += want[1].count("'transfer'")
    assert assembled > 60 * 20


def popped_each_feed(cls, raw: bytes, cuts: list, append_rows) -> list:
    """What a new ``cls`` decoder fed ``raw`` in pieces ending at ``cuts`` makes, its events
    popped after every feed (a new events list each time, as the pipeline drains them): per
    feed, its rows and other events, and the bytes it holds of deliveries being assembled."""
    d = cls()
    out, pos = [], 0
    for i, cut in enumerate(cuts + [len(raw)]):
        if cut > pos:
            d.feed(0, raw[pos:cut], 8 + pos, 1 + i, 10 + i)
            pos = cut
        methods, messages = [], []
        rest = append_rows(d.pop_events(), "c", 1, "1.0", methods, messages)
        out.append((repr(methods), repr(messages), rest, list(d.held_bytes)))
    return out


@pytest.mark.compiled("fast10")
def test_events_popped_after_every_feed_and_the_bytes_held_are_the_references():
    """The walker keeps what it reads of the decoder per direction (its Walk) but not the events
    list, which pop_events replaces: every feed's events reach the list of that feed, and the
    bytes held of deliveries being assembled are counted in the decoder's own list."""
    fast10 = built_or_skip("fast10")
    compiled_cls, reference = decoder.decoder_1_0(), codec_1_0.Decoder10
    rnd = random.Random(7)
    held = 0
    for _ in range(20):
        raw = split_deliveries(rnd)
        cuts = sorted(rnd.randrange(len(raw)) for _ in range(rnd.randint(5, 40)))
        want = popped_each_feed(reference, raw, cuts, rows_1_0.append_rows_reference)
        assert popped_each_feed(compiled_cls, raw, cuts, fast10.append_rows) == want
        held += sum(1 for *_x, h in want if h[0])
    assert held  # some feeds ended inside a delivery being assembled


@pytest.mark.compiled("fast10")
def test_a_large_bodys_digest_may_be_handed_on_unfinished_and_is_the_references():
    """With ``deferred_digests`` (a dissect whose messages table takes them) the walker hands a
    body's digest on as fast09's Sha256 (a large body hashed by its thread): its hex digest is
    the reference's, for a delivery whole in one transfer or assembled from several, large or
    small (a small one hashed at once, not queued); without, the digest is the hex digest."""
    fast10 = built_or_skip("fast10")
    fast09 = built_or_skip("fast09")
    if not fast09.OPENSSL:  # (CI: OpenSSL's SHA256_* is reachable, as tests/amqp require)
        (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)(
            "fast09 hashes with hashlib here: no digest is handed on"
        )
    from amqp10_wire import data, frame, properties, transfer
    from test_fuzz_codec_1_0 import stream

    big, small = bytes(range(256)) * 400, b"s" * 100
    raw = stream() + frame(transfer(0, 1, b"a", settled=True) + properties(message_id="w") + data(big))
    raw += frame(transfer(0, 2, b"b", settled=True) + data(small))
    msg = properties(message_id="x") + data(big[:5000])
    raw += frame(transfer(0, 3, b"c", settled=True, more=True) + msg[:1000]) + frame(transfer(0) + msg[1000:])
    got = []
    compiled_cls = decoder.decoder_1_0()
    for cls, deferred in ((codec_1_0.Decoder10, True), (compiled_cls, False), (compiled_cls, True)):
        d = cls()
        d.deferred_digests = deferred
        d.feed(0, raw, 8, 1, 1)
        d.finish(2, 2)
        messages = []
        fast10.append_rows(d.pop_events(), "c", 1, "1.0", [], messages)
        columns = rows_1_0.COLUMNS["messages"]
        got.append([(row[columns.index("body_size")], row[columns.index("body_hash")]) for row in messages])
    want = got[0]
    assert sorted(size for size, _h in want) == [100, 700, 5000, len(big)]
    assert all(type(h) is str for _s, h in want + got[1])
    assert got[1] == want
    assert all(type(h) is fast09.Sha256 for _s, h in got[2])
    assert not any(h.computing for size, h in got[2] if size < 512)  # a small body hashed at once
    assert [(size, str(h)) for size, h in got[2]] == want


@pytest.mark.compiled("fast10")
@pytest.mark.parametrize(
    "damage", ["none", "bad frame header", "oversize next", "header cut", "protocol header", "tls"]
)
def test_a_frame_completed_from_the_next_packet_is_walked_or_handed_on_as_the_reference(damage):
    """A frame begun in one packet and completed by the next, cut at every offset (the per-feed
    path of direction.pxi, the per-direction state in C): whatever the rest of the packet
    holds, the rows, events (an anomaly's text too) and tally are the reference's."""
    fast10 = built_or_skip("fast10")
    from amqp10_wire import data, frame, properties, transfer

    compiled_cls, reference = decoder.decoder_1_0(), codec_1_0.Decoder10
    whole = [
        frame(transfer(0, 1 + i, b"t%d" % i) + properties(message_id=f"m{i}") + data(b"q" * 40 * i))
        for i in range(4)
    ]
    middle = {
        "none": b"",
        "bad frame header": b"\x00\x00\x00\x09\x07\x05\x00\x00",
        "oversize next": b"\x7f\x00\x00\x00\x02\x00\x00\x00",
        "header cut": b"",
        "protocol header": b"AMQP\x00\x01\x00\x00",
        "tls": b"AMQP\x02\x01\x00\x00",
    }[damage]
    raw = whole[0] + whole[1] + middle + whole[2] + whole[3]
    if damage == "header cut":
        raw = raw[: len(whole[0]) + len(whole[1]) + 5]
    compared = 0
    for cut in range(1, len(whole[0]) + len(whole[1]) + 9):
        for cuts in ([cut], [cut, min(cut + len(whole[1]), len(raw) - 1)]):
            want = frame_loop_run(reference, raw, cuts, False, rows_1_0.append_rows_reference)
            assert frame_loop_run(compiled_cls, raw, cuts, False, fast10.append_rows) == want, cuts
            compared += 1
    assert compared > 2 * len(whole[0])


def spread_run(cls, raw: bytes, pieces: list, gap_after, finish_at, append_rows) -> tuple:
    """What a new ``cls`` decoder fed ``raw`` in ``pieces`` (sizes) makes, a gap of 5 bytes
    perhaps after piece ``gap_after`` and the capture ended perhaps after piece ``finish_at``:
    the rows ``append_rows`` writes of its events, its other events, and the unparsed bytes its
    direction holds (and where they end) before the end."""
    d = cls()
    pos = 0
    for i, size in enumerate(pieces):
        if i == finish_at:
            break
        d.feed(0, raw[pos : pos + size], 8 + pos, 1 + i, 10 + i)
        pos += size
        if i == gap_after:
            d.gap(0, 8 + pos, 5, 50 + i, 50 + i)
            pos += 5
    held = (len(d.dirs[0].buf) - d.dirs[0].pos, d.dirs[0].base + len(d.dirs[0].buf))
    d.finish(99, 99)
    methods, messages = [], []
    rest = append_rows(d.pop_events(), "c", 1, "1.0", methods, messages)
    return repr(methods), repr(messages), rest, held


@pytest.mark.compiled("fast10")
@pytest.mark.parametrize("end", ["whole", "gap inside", "capture ends inside", "damaged after"])
def test_a_frame_over_many_packets_is_decoded_lost_or_truncated_as_the_reference(end):
    """The packets of a large frame that do not complete it wait uncopied for the one that does
    (direction.pxi's ``waiting``): completed, cut by a gap, ended by the capture or followed by
    damage, the rows, events (anomaly texts and byte counts) and the bytes held are the
    reference's, at every packet size."""
    fast10 = built_or_skip("fast10")
    from amqp10_wire import data, frame, properties, transfer

    compiled_cls, reference = decoder.decoder_1_0(), codec_1_0.Decoder10
    big = frame(transfer(0, 1, b"big") + properties(message_id="big") + data(bytes(range(256)) * 40))
    small = [frame(transfer(0, 2 + i, b"s%d" % i) + data(b"q" * 30 * i)) for i in range(3)]
    tail = b"\x00\x00\x00\x09\x07\x05\x00\x00" if end == "damaged after" else small[2]
    raw = small[0] + big + small[1] + tail + small[0]
    for size in (7, 64, 999, 1500, 4000):
        pieces = [size] * (len(raw) // size) + [len(raw) % size]
        inside = (len(small[0]) + len(big) // 2) // size
        gap_after = inside if end == "gap inside" else None
        finish_at = inside + 1 if end == "capture ends inside" else None
        want = spread_run(reference, raw, pieces, gap_after, finish_at, rows_1_0.append_rows_reference)
        got = spread_run(compiled_cls, raw, pieces, gap_after, finish_at, fast10.append_rows)
        assert got == want, size
        if end == "capture ends inside":
            assert want[3][0] > size  # the frame held over more than one packet at the end


@pytest.mark.compiled("fast10")
def test_the_walkers_deliveries_are_settled_as_the_references_whatever_the_order_of_their_dispositions():
    """The compiled link state (a held row's outcome and settlement set in C) settles every
    delivery as links_1_0's does: an outcome before settlement, a settlement or an outcome
    stated before the delivery's (last) transfer, ranges short and long, pre-settled, a reused
    delivery-id, no delivery-id, and what is still held at the end."""
    fast10 = built_or_skip("fast10")
    from amqp10_wire import (
        accepted,
        data,
        disposition,
        frame,
        modified,
        properties,
        rejected,
        released,
        transfer,
    )
    from test_fuzz_codec_1_0 import stream

    def one(did, settled=None, more=None, body=b"b"):
        tag = None if did is None else b"t%d" % did
        return frame(transfer(0, did, tag, settled=settled, more=more) + data(body))

    def sender(first, last=None, settled=None, state=None):
        return frame(disposition(False, first, last, settled, state))

    raw = stream() + b"".join(
        [
            one(1),
            sender(1, None, False, accepted()),  # an outcome, not settled yet
            sender(1, None, True),  # then settled: the outcome stays
            sender(2, None, True, rejected("amqp:invalid-field", "no")),  # settled before its transfer
            one(2),
            sender(3, None, False, released()),  # an outcome before its transfer, never settled
            one(3),
            one(4),
            one(5),
            one(6),
            sender(4, 6, True, modified()),  # a short range
            one(7, settled=True),  # pre-settled
            one(8),
            one(8),  # the same delivery-id again: the first is let go
            frame(transfer(0, 9, b"t9", more=True) + properties(message_id="m9")),
            sender(9, None, True, accepted()),  # settled before its last transfer
            frame(transfer(0, more=False) + data(b"last")),
            one(None),  # no delivery-id
            one(10),
            one(11),
            sender(10, 1000, True, accepted()),  # a long range: the held ids in it
            one(12),  # held at the end: unsettled
        ]
    )
    want = events_of(codec_1_0.Decoder10, raw, [], rows_1_0.append_rows_reference)
    got = events_of(decoder.decoder_1_0(), raw, [], fast10.append_rows)
    for outcome in ("'accepted'", "'rejected'", "'released'", "'modified'", "'amqp:invalid-field'"):
        assert outcome in want[1]
    assert want[1].count("'transfer'") == 15  # the stream's delivery and 14 here (8 twice)
    assert got == want


@pytest.mark.compiled("fast10")
def test_the_walkers_messages_rows_take_exchange_and_key_from_the_references_cache():
    """The walker's messages rows find a text address's exchange and key in rows_1_0's
    EXCHANGE_KEYS (the one cache of them, exchange_key's): an address first named there is kept
    there, and what the cache holds is what the rows write."""
    fast10 = built_or_skip("fast10")
    from amqp10_wire import attach, data, frame, properties, transfer
    from test_fuzz_codec_1_0 import stream

    raw = stream() + frame(attach("k", 1, False, tgt="/queues/r"))
    raw += b"".join(
        frame(transfer(1, i, b"t", settled=True) + properties(message_id="m") + data(b"z")) for i in range(3)
    )

    def messages():
        d = decoder.decoder_1_0()()
        d.feed(0, raw, 8, 1, 1)
        d.finish(2, 2)
        methods, messages = [], []
        fast10.append_rows(d.pop_events(), "c", 1, "1.0", methods, messages)
        return messages

    keys = rows_1_0.EXCHANGE_KEYS
    try:
        keys.clear()
        assert len(messages()) >= 3
        assert keys["/queues/r"] == ("", "r")
        keys["/queues/r"] = ("x", "y")
        assert [m for m in map(repr, messages()) if "'x', 'y'" in m]
    finally:
        keys.clear()


# A row table that names a column twice in one row: the methods row of a transfer, the messages
# row of a delivery (each row's columns as rows_1_0's tables place them, one repeated).
DOUBLED = {
    "methods": 'plans = dict(rows_1_0.METHOD_PLANS); plans["transfer"] += plans["transfer"][-1:]; '
    "rows_1_0.METHOD_PLANS = plans",
    "messages": "rows_1_0.MESSAGE_PLAN += rows_1_0.MESSAGE_PLAN[:1]",
}


@pytest.mark.compiled("fast10", "fastwriter")
@pytest.mark.parametrize("table", sorted(DOUBLED))
def test_row_tables_that_name_a_column_twice_in_a_row_are_refused_before_any_row(table):
    # the table buffer takes a row as the columns it fills, each once (a Row has room for each
    # column once): the compiled rows refuse the tables at binding, in a fresh process (they are
    # bound once a process), before a row is written
    code = (
        "from amqpcap import compiled; from amqpcap.records import rows_1_0\n"
        f"{DOUBLED[table]}\n"
        "fast10 = compiled.current_build('fast10')[0]\n"
        "try:\n"
        "    fast10.append_rows([], 'c', 1, '1.0', [], [])\n"
        "except ValueError as e:\n"
        "    print('refused:', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.startswith("refused: amqpcap: a row's columns named twice"), r.stdout + r.stderr


def conversation_1_0(fastwriter, packets, direct: bool) -> tuple:
    """``packets`` ((direction, bytes), ...) of a 1.0 conversation through a ConnectionDecoder as
    the pipeline runs it, each packet's events drained into compiled table buffers after it, the
    walker given a row sink if ``direct``: (methods table, messages table, the events drained
    after each packet)."""
    import pyarrow as pa

    from amqpcap.records.schema import SCHEMAS

    methods = fastwriter.Columns(SCHEMAS["methods"], 10_000)
    messages = fastwriter.Columns(SCHEMAS["messages"], 10_000)
    sink = rows.row_sink("c", 1, methods, messages) if direct else None
    assert (sink is not None) == direct
    dec = decoder.ConnectionDecoder(frame_events=False, row_sink=sink)
    offsets, drained = [0, 0], []
    for number, (d, raw) in enumerate(packets, start=1):
        dec.data(d, offsets[d], raw, number, 1000 * number)
        offsets[d] += len(raw)
        events = dec.pop_events()
        drained.append(events)
        rows_1_0.append_rows(events, "c", 1, dec.version, methods, messages)
    dec.finish(len(packets) + 1, 1000 * (len(packets) + 1))
    events = dec.pop_events()
    drained.append(events)
    rows_1_0.append_rows(events, "c", 1, dec.version, methods, messages)
    return pa.Table.from_batches([methods.take()]), pa.Table.from_batches([messages.take()]), drained


@pytest.mark.compiled("fast10", "fastrows", "fastwriter")
def test_the_1_0_walker_writes_its_rows_itself_and_hands_on_only_events_without_a_row():
    """With a row sink (a dissect into compiled table buffers, no frames table) the 1.0 walker
    writes the rows of the packets it walks: what reaches the packet loop is only what has no
    row (a heartbeat, an anomaly), and the tables are the ones the events give."""
    fast10, _, fastwriter = built_or_skip("fast10"), built_or_skip("fastrows"), built_or_skip("fastwriter")
    from amqp10_wire import attach, begin, data, disposition, flow, frame, open_, properties, transfer

    def message(i):
        body = properties(message_id=f"m{i}") + data(b"q" * i)
        return frame(transfer(0, i, b"t%d" % i, settled=i % 3 == 0) + body)

    header = b"AMQP\x00\x01\x00\x00"
    packets = [
        (0, header + frame(open_("c")) + frame(begin()) + frame(attach("l", 0, False, tgt="/queues/q"))),
        (1, header + frame(open_("s")) + frame(begin(0)) + frame(attach("l", 0, True, tgt="/queues/q"))),
        (1, frame(flow(0, 0, 100))),
        (0, message(1) + message(2) + message(3)[:30]),
        (0, message(3)[30:] + frame(b"") + message(4)),
        (1, frame(disposition(True, 1, 4, True)) + frame(b"")),
        (0, frame(transfer(0, 5, b"t5", more=True) + properties(message_id="m5")) + message(6)),
    ]
    m_direct, g_direct, drained = conversation_1_0(fastwriter, packets, direct=True)
    m_events, g_events, _ = conversation_1_0(fastwriter, packets, direct=False)
    assert m_direct.num_rows == 14 and g_direct.num_rows == 6
    assert m_direct.equals(m_events) and g_direct.equals(g_events)
    # each direction's first packet is fed the reference's way (its events go on), and so is the
    # end (the unfinished delivery); in between only the heartbeats and the anomaly of the
    # delivery the next one cut reach the packet loop
    later = [type(e).__name__ for events in drained[2:-1] for _d, e in events]
    assert later == ["Heartbeat", "Heartbeat", "Anomaly"]
    rowed = (fast10.HeldRow, fast10.WalkedPerformative, fast10.Performative, fast10.Delivery)
    assert not [e for events in drained[2:-1] for _d, e in events if isinstance(e, rowed)]


@pytest.mark.compiled("fast10", "fastrows", "fastwriter")
def test_a_walked_performatives_methods_row_goes_to_the_sink_after_the_rows_of_the_events_before_it():
    """With a row sink, a transfer, disposition or flow the frame loop walks has its methods row
    written as it is walked (no event made of it), after the rows of the packet's events before
    it (an attach the reference decodes, in the same packet): the tables are the events' own."""
    fast10, _, fastwriter = built_or_skip("fast10"), built_or_skip("fastrows"), built_or_skip("fastwriter")
    from amqp10_wire import attach, begin, data, detach, disposition, flow, frame, open_, properties, transfer

    def message(handle, i, **kw):
        return frame(transfer(handle, i, b"t%d" % i, **kw) + properties(message_id=f"m{i}") + data(b"q" * i))

    header = b"AMQP\x00\x01\x00\x00"
    packets = [
        (0, header + frame(open_("c")) + frame(begin()) + frame(attach("l", 0, False, tgt="/queues/q"))),
        (1, header + frame(open_("s")) + frame(begin(0)) + frame(attach("l", 0, True, tgt="/queues/q"))),
        (0, message(0, 1, settled=True) + frame(attach("m", 1, False, tgt="/queues/r")) + message(1, 2)),
        (1, frame(flow(1, 0, 10)) + frame(attach("m", 1, True, tgt="/queues/r")) + frame(flow(1, 0, 20))),
        (1, frame(disposition(True, 2, None, True)) + frame(detach(1, True)) + frame(flow(0, 1, 5))),
    ]
    m_direct, g_direct, drained = conversation_1_0(fastwriter, packets, direct=True)
    m_events, g_events, events = conversation_1_0(fastwriter, packets, direct=False)
    assert m_direct.num_rows == 15 and g_direct.num_rows == 2
    assert m_direct.equals(m_events) and g_direct.equals(g_events)
    later = [e for packet in drained[2:] for _d, e in packet]
    assert not [e for e in later if type(e) is fast10.WalkedPerformative]
    # (without a sink the same performatives are walked: their events hold their arguments' text)
    assert [e for packet in events[2:] for _d, e in packet if type(e) is fast10.WalkedPerformative]
