"""Arbitrary numbers in every numeric field the wire carries, through dissect and show --json:
never an internal error.

Each example is one capture holding an 0-8, an 0-9, an 0-9-1, an 0-10 and a 1.0 conversation.
In each, every method of the version is sent once with every numeric argument drawn (a 64-bit
draw cut to the field's width: octet, short, long, longlong, timestamp; 0-10 uint8 .. uint64,
sequence-no, datetime; 1.0 ubyte .. ulong, byte .. long, timestamp, and the restricted types
over them), every content class's header with every numeric property and the body size drawn
(1.0: a transfer's message with every numeric field of its header and properties sections drawn,
and drawn numbers of every width as its annotations, application properties and footer), and the
file's packet times are drawn too: a classic pcap's seconds and fraction (microsecond or
nanosecond magic), or a pcapng's 64-bit ticks, if_tsresol and if_tsoffset.
"""

import contextlib
import io
import os
import struct
import tempfile

from amqp10 import amqp10_wire as W
from fixtures import amqp09 as A
from fixtures import hostile as H
from fixtures import pcapgen as P
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from amqpcap import cli
from amqpcap.amqp import spec as _spec
from amqpcap.amqp.spec import v0_10 as S10
from amqpcap.amqp.spec import v1_0 as S1
from amqpcap.pipeline import dissect

B = H.B
WIDTH_09 = {"octet": 8, "short": 16, "long": 32, "longlong": 64, "timestamp": 64}
WIDTH_010 = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "sequence-no": 32}
U64 = st.integers(0, 2**64 - 1)
# No shrinking: a failing capture of 600 packets shrinks for minutes; the seed reproduces it.
EXAMPLES = settings(
    max_examples=int(os.environ.get("AMQPCAP_FUZZ_EXAMPLES", "100")),
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _numeric_09(version):
    """(class id, method id, fields, has content) of every method of ``version``."""
    ms = sorted(_spec.get(version).METHODS.items())
    return [(cid, mid, m.fields, m.content) for (cid, mid), m in ms]


def _ops_010():
    """0-10 commands and controls whose numeric fields the test encoder writes (each checked once)."""
    out = []
    for name, op in sorted(S10.OPS_BY_NAME.items()):
        fields = [f for f in op.fields if f.type in WIDTH_010]
        if not fields:
            continue
        encode = B.command_segment if op.kind == "command" else B.control_segment
        try:
            encode(name, {f.name: 0 for f in fields})
        except Exception:  # noqa: BLE001  (a field the encoder cannot write alone)
            continue
        out.append((name, op.kind, fields))
    return out


METHODS = {v: _numeric_09(v) for v in ("0-8", "0-9", "0-9-1")}
OPS_010 = _ops_010()


def conversation_09(version, draw64):
    spec = _spec.get(version)
    cli_, srv = [A.protocol_header(version)], [H.start_09(version)]
    later = []
    for cid, mid, fields, content in METHODS[version]:
        values = {n: draw64() & ((1 << WIDTH_09[t]) - 1) for n, t in fields if t in WIDTH_09}
        payload = struct.pack(">HH", cid, mid) + A.encode_fields(fields, values)
        frame = A.frame(1, 0 if cid == 10 else 1, payload)
        (later if cid == 10 else cli_).append(frame)  # connection methods last: a close ends nothing early
        if content:
            props = spec.PROPERTIES.get(cid, ())
            pv = {n: draw64() & ((1 << WIDTH_09[t]) - 1) for n, t in props if t in WIDTH_09}
            cli_.append(A.header_frame(1, cid, draw64(), pv, version) + A.body_frame(1, b"xy"))
    return cli_ + later, srv


def conversation_010(draw64):
    c2s, s2c = B.handshake()
    for name, kind, fields in OPS_010:
        values = {f.name: draw64() & ((1 << WIDTH_010[f.type]) - 1) for f in fields}
        if kind == "command":
            c2s += B.command(name, values)
        else:
            c2s += B.control(name, values, channel=1)
    dp = {"priority": draw64() & 0xFF, "delivery-mode": draw64() & 0xFF, "ttl": draw64()}
    dp.update({"timestamp": draw64() - 2**63, "expiration": draw64() - 2**63, "resume-ttl": draw64()})
    header = {
        "message.delivery-properties": dp,
        "message.message-properties": {"content-length": draw64()},
        "message.fragment-properties": {"fragment-size": draw64()},
    }
    c2s += B.command("message.transfer", {"destination": "ex"}, header=header, body=b"xy")
    return [B.HEADER_010, c2s], [B.HEADER_010, s2c]


# 1.0 primitive -> (constructor, width in bits): every fixed-width number (a signed one's bits
# drawn as they are: every two's-complement value)
NUMBERS_10 = {
    "ubyte": (0x50, 8),
    "ushort": (0x60, 16),
    "uint": (0x70, 32),
    "ulong": (0x80, 64),
    "byte": (0x51, 8),
    "short": (0x61, 16),
    "int": (0x71, 32),
    "long": (0x81, 64),
    "timestamp": (0x83, 64),
}
# a value for the fields that are not numbers (mandatory ones must be there for the list to decode)
OTHER_10 = {"string": "x", "symbol": W.Sym("x"), "boolean": False, "binary": b"t"}


def number_10(primitive, draw64) -> W.Raw:
    code, bits = NUMBERS_10[primitive]
    return W.Raw(bytes([code]) + (draw64() & ((1 << bits) - 1)).to_bytes(bits // 8, "big"))


def composite_10(code, draw64) -> bytes:
    """The composite ``code`` (a performative, SASL frame or message section) with every numeric
    field drawn at its wire width, the other mandatory ones plausible, the rest null."""
    values = []
    for f in S1.COMPOSITES[code].fields:
        prim = "ulong" if f.primitive == "*" else f.primitive
        if f.multiple:
            values.append(None)
        elif prim in NUMBERS_10:
            values.append(number_10(prim, draw64))
        else:
            values.append(OTHER_10.get(prim) if f.mandatory else None)
    return W.perf(code, values)


def conversation_10(draw64):
    """SASL then AMQP 1.0: every SASL frame and performative once, a transfer carrying a message
    whose header, properties, annotations and application properties hold drawn numbers."""
    sasl = [c for c in S1.SASL_FRAMES]
    amqp = [c for c in S1.PERFORMATIVES if c not in (0x14, 0x18)]
    drawn = {W.Sym(f"n-{p}"): number_10(p, draw64) for p in NUMBERS_10}
    message = (
        composite_10(0x70, draw64)
        + W.described(0x71, W.map_(drawn))  # delivery annotations
        + W.described(0x72, W.map_(drawn))  # message annotations
        + composite_10(0x73, draw64)
        + W.described(0x74, W.map_({f"n-{p}": v for p, v in drawn.items()}))
        + W.data(b"xy")
        + W.described(0x78, W.map_(drawn))  # footer
    )
    c2s = [W.SASL_HEADER] + [W.frame(composite_10(c, draw64), ftype=1) for c in sasl[1::2]]
    s2c = [W.SASL_HEADER] + [W.frame(composite_10(c, draw64), ftype=1) for c in sasl[0::2]]
    c2s += [W.AMQP_HEADER] + [W.frame(composite_10(c, draw64)) for c in amqp]
    c2s += [W.frame(composite_10(0x14, draw64) + message), W.frame(composite_10(0x18, draw64))]
    s2c += [W.AMQP_HEADER, W.frame(W.open_("srv"))]
    return c2s, s2c


def packets(draw64):
    pk = []
    convs = [conversation_09(v, draw64) for v in ("0-8", "0-9", "0-9-1")]
    convs += [conversation_010(draw64), conversation_10(draw64)]
    for port, (cli_, srv) in enumerate(convs):
        segs = P.tcp_conversation(client_chunks=cli_, server_chunks=srv, client=("10.0.0.1", 40000 + port))
        pk += P.to_packets(segs, 1)
    return pk


@st.composite
def captures(draw):
    draw64 = lambda: draw(U64)  # noqa: E731
    pk = packets(draw64)
    which = draw(st.integers(0, len(pk) - 1))
    form = draw(st.sampled_from(["pcap", "pcap-ns", "pcapng"]))
    if form == "pcapng":
        resol = draw(st.one_of(st.none(), st.integers(0, 255)))
        offset = draw(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)))
        ticks = {which: draw64()}
        return H.pcapng_ticks(pk, ticks, tsresol=resol, tsoffset=offset)
    raw = (draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 2**32 - 1)))
    return H.pcap_times(pk, {which: raw}, nano=form == "pcap-ns")


@EXAMPLES
@given(captures())
def test_no_number_on_the_wire_or_in_a_packet_time_is_an_internal_error(blob):
    with tempfile.TemporaryDirectory() as d:
        cap = os.path.join(d, "c.cap")
        with open(cap, "wb") as f:
            f.write(blob)
        summary = dissect([cap], os.path.join(d, "out"))
        assert summary.rows["methods"] > 0
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["show", cap, "--json"])
        assert code == 0 and "internal error" not in err.getvalue(), err.getvalue()
        assert '"method": "basic.publish"' in out.getvalue()
        assert '"method": "transfer"' in out.getvalue()
