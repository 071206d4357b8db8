"""Property-based fuzzing of the 0-10 codec: it yields events or anomalies, never an exception.

CI runs a bounded number of examples; run longer with
    AMQPCAP_FUZZ_EXAMPLES=5000 python -m pytest tests/amqp/test_fuzz_codec_0_10.py
"""

import os

import codec010_builders as B
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpcap.amqp import events as E
from amqpcap.amqp.codec_0_10 import DecodeError, Decoder010, decode_value
from amqpcap.amqp.events import Anomaly, Frame, Method

EXAMPLES = int(os.environ.get("AMQPCAP_FUZZ_EXAMPLES", "200"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _stream():
    c, _s = B.handshake()
    out = c
    for i in range(4):
        out += B.command("exchange.declare", {"exchange": f"ex{i}", "type": "direct"}, channel=1)
        out += B.command("queue.declare", {"queue": f"q{i}"}, channel=1, sync=True)
    return out


CLEAN = _stream()


def _run(chunks):
    dec = Decoder010(body_bytes=16)
    off = 0
    for i, data in enumerate(chunks, 1):
        dec.feed(0, data, off, i, i * 1000)
        off += len(data)
    dec.finish(len(chunks) + 1, 0)
    return dec.pop_events()


def test_the_clean_stream_decodes_without_anomalies():
    ev = [e for _d, e in _run([CLEAN])]
    assert not [e for e in ev if isinstance(e, Anomaly)]
    assert sum(isinstance(e, Method) and e.name == "queue.declare" for e in ev) == 4


@SETTINGS
@given(st.binary(max_size=2048))
def test_random_bytes_never_raise(data):
    ev = _run([data])
    kinds = (E.Anomaly, E.Frame, E.Method, E.Content, E.Heartbeat)
    assert all(d in (0, 1) and isinstance(e, kinds) for d, e in ev)
    # Whatever was not decoded as frames is accounted for by anomalies.
    if data and not any(isinstance(e, E.Frame) for _d, e in ev):
        assert any(isinstance(e, E.Anomaly) for _d, e in ev)


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, len(CLEAN) - 1), st.integers(0, 255)), max_size=8), st.integers(1, 200)
)
def test_corrupted_real_stream_never_raises_and_reports_damage(flips, chunk):
    data = bytearray(CLEAN)
    for pos, val in flips:
        data[pos] = val
    chunks = [bytes(data[i : i + chunk]) for i in range(0, len(data), chunk)]
    ev = [e for _d, e in _run(chunks)]
    if bytes(data) == CLEAN:
        assert not [e for e in ev if isinstance(e, Anomaly)]
    # Commands before the first damaged byte decode as in the clean stream.
    first = min((p for p, v in flips if CLEAN[p] != v), default=len(CLEAN))
    clean_ev = [e for _d, e in _run([CLEAN]) if isinstance(e, Method)]
    want = [(m.name, m.offset) for m in clean_ev if m.offset + m.frame_size + 12 <= first]
    got = [(m.name, m.offset) for m in ev if isinstance(m, Method)]
    assert got[: len(want)] == want


@SETTINGS
@given(st.integers(0, len(CLEAN)))
def test_truncation_at_any_offset_never_raises(cut):
    ev = [e for _d, e in _run([CLEAN[:cut]] if cut else [b""])]
    if cut < len(CLEAN):
        assert (
            cut == 0
            or any(isinstance(e, Anomaly) for e in ev)
            or sum(isinstance(e, Frame) for e in ev) * 12 <= cut
        )


_leaf = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.none(),
    st.floats(allow_nan=False),
)
_values = st.recursive(
    _leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=20,
)


@SETTINGS
@given(st.dictionaries(st.text(max_size=8), _values, max_size=6))
def test_random_maps_round_trip(m):
    raw = B.encode_value("map", m)
    assert decode_value("map", raw) == _expect(m)


@SETTINGS
@given(st.binary(max_size=256))
def test_random_map_bytes_decode_or_raise_decode_error(data):
    try:
        decode_value("map", data)
    except DecodeError:
        pass


def _expect(v):
    if isinstance(v, dict):
        return {k: _expect(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_expect(x) for x in v]
    return v


def test_deep_nesting_is_refused_not_a_crash():
    v = {}
    for _ in range(200):
        v = {"k": v}
    raw = B.encode_value("map", v)
    try:
        decode_value("map", raw)
        raise AssertionError("200 nested maps decoded past the nesting limit")
    except DecodeError:
        pass
