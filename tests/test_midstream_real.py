"""Real captures cut after their handshake (and inside a frame): the dissector
must pick the conversations up mid-stream and decode everything after the
first complete frame exactly as in the full capture."""

import os

import pyarrow.dataset as pads
import pytest

scapy_all = pytest.importorskip("scapy.all")
from amqpcap.pipeline import dissect  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "captures"))

# capture -> the versions a conversation picked up mid-stream may be named.  The version is
# inferred from the frames: 0-8, 0-9 and 0-9-1 frame alike, and only methods whose layout
# differs between them (channel.open-ok, basic.consume, 10.60, the access, message and test
# classes, ...) tell them apart.  Where the kept traffic has none of those, 0-9 and 0-9-1 are
# indistinguishable (both read as 0-9-1, which decodes them identically).
CASES = {
    "rabbitmq091_pika_full": {"0-9-1"},
    "rabbitmq091_pika_blocked": {"0-9-1"},
    "rabbitmq091_pyamqp_basic": {"0-9-1"},
    "rabbitmq08_amqplib": {"0-8"},
    "rabbitmq08_netamqp": {"0-8"},
    "rabbitmq09_netamqp": {"0-9", "0-9-1"},
    "rabbitmq09_anyevent": {"0-9-1"},  # announces 0-9, speaks 0-9-1
    "netamqp09_offline": {"0-9"},  # message class (references, transfer), file, stream, tunnel
    "qpid010_basic": {"0-10"},
    "rabbitmq10_rhea_frames512": {"1.0"},  # 1.0: its frame shape (no version to tell apart)
    "rabbitmq10_proton_outcomes": {"1.0"},
}
# how many cuts inside a frame each capture offers (those whose messages span packets)
MID_FRAME_CUTS = {
    "rabbitmq091_pika_full": 2,
    "rabbitmq08_amqplib": 2,
    "netamqp09_offline": 1,
    "qpid010_basic": 2,
}


def _load(out, frames=False):
    names = ["connections", "methods", "messages", "anomalies"] + (["frames"] if frames else [])
    return {k: pads.dataset(os.path.join(out, k)).to_table().to_pandas() for k in names}


def _packet_offsets(pkts, conns):
    """packet number (1-based) -> (tcp_stream, direction, start offset, payload length) for data packets."""
    TCP = scapy_all.TCP
    IP = scapy_all.IP
    by_key = {}
    for row in conns.itertuples():
        by_key[(row.client_ip, int(row.client_port), row.server_ip, int(row.server_port))] = (
            int(row.tcp_stream),
            "c2s",
        )
        by_key[(row.server_ip, int(row.server_port), row.client_ip, int(row.client_port))] = (
            int(row.tcp_stream),
            "s2c",
        )
    isn = {}
    out = {}
    for n, p in enumerate(pkts, 1):
        if TCP not in p or IP not in p:
            continue
        key = by_key.get((p[IP].src, int(p[TCP].sport), p[IP].dst, int(p[TCP].dport)))
        if key is None:
            continue
        seq = int(p[TCP].seq)
        if p[TCP].flags & 0x02:  # SYN
            isn[key] = seq + 1
            continue
        plen = len(bytes(p[TCP].payload))
        # strip Ethernet/loopback padding: use the IP total length
        plen = min(plen, int(p[IP].len) - 4 * int(p[IP].ihl) - 4 * int(p[TCP].dataofs))
        if plen <= 0 or key not in isn:
            continue
        out[n] = (key[0], key[1], (seq - isn[key]) % (1 << 32), plen)
    return out


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    base = tmp_path_factory.mktemp("full")
    res = {}
    for name in CASES:
        out = str(base / name)
        dissect([os.path.join(CAPTURES, name + ".pcap")], out, force=True, frames=True)
        t = _load(out, frames=True)
        pkts = scapy_all.rdpcap(os.path.join(CAPTURES, name + ".pcap"))
        res[name] = (t, pkts, _packet_offsets(pkts, t["connections"]))
    return res


def _cut_points(t, offs):
    """K values: right after the handshake, a bit later, and one (or more) whose
    first kept packet starts inside a frame."""
    m = t["methods"]
    frames = t["frames"]
    opened = m[m.method.isin(["connection.open-ok", "session.attached", "begin"])]  # begin: 1.0
    k1 = int(opened.frame_number.min()) if len(opened) else int(m.frame_number.min()) + 4
    ks = [k1, k1 + 9]
    # frame starts per (stream, direction)
    starts = {}
    for f in frames.itertuples():
        starts.setdefault((int(f.tcp_stream), f.direction), set()).add(int(f.stream_offset))
    # 1.0 after SASL: the protocol header before the open is no frame either
    for r in m[m.method == "open"].itertuples():
        starts.setdefault((int(r.tcp_stream), r.direction), set()).add(int(r.stream_offset) - 8)
    # (offset 0 is a protocol header: a cut there is a new connection, not a mid-frame cut)
    mid = [
        n
        for n, (s, d, off, ln) in sorted(offs.items())
        if n > k1 + 1 and off and off not in starts.get((s, d), ())
    ]
    if mid:
        ks.append(mid[0] - 1)
        if len(mid) > 3:
            ks.append(mid[len(mid) // 2] - 1)
    return ks


def _expected(t, offs, K):
    """Methods of the full capture after the first fully-captured frame boundary of each direction."""
    frames = t["frames"]
    m = t["methods"]
    keep = []
    for (s, d), fr in frames.groupby(["tcp_stream", "direction"]):
        kept = [(off, ln) for n, (s2, d2, off, ln) in offs.items() if n > K and s2 == s and d2 == d]
        if not kept:
            continue
        first = min(off for off, _ in kept)
        fr = fr[fr.stream_offset >= first]
        if not len(fr):
            continue
        # the packet holding the first complete frame's start
        b_off = int(fr.stream_offset.min())
        b_pkt = min(
            n
            for n, (s2, d2, off, ln) in offs.items()
            if s2 == s and d2 == d and off <= b_off < off + ln and n > K
        )
        mm = m[(m.tcp_stream == s) & (m.direction == d) & (m.frame_number > b_pkt)]
        keep.append(mm)
    import pandas as pd

    return pd.concat(keep) if keep else m.iloc[0:0]


CUTS = ["handshake", "handshake+9", "mid-frame", "mid-frame-2"]


def _params():
    return [
        pytest.param(name, label, id=f"{name}-{label}")
        for name in CASES
        for label in CUTS[: 2 + MID_FRAME_CUTS.get(name, 0)]
    ]


def _k(t, offs, label):
    return _cut_points(t, offs)[CUTS.index(label)]


@pytest.fixture(scope="module")
def cuts(full, tmp_path_factory):
    base = tmp_path_factory.mktemp("cuts")
    cache = {}

    def get(name, label):
        if (name, label) not in cache:
            t, pkts, offs = full[name]
            K = _k(t, offs, label)
            cut = str(base / f"{name}-{label}.pcap")
            scapy_all.wrpcap(cut, pkts[K:])
            out = str(base / f"{name}-{label}")
            # qpid listens on 5673: without a protocol header the port must be given
            dissect([cut], out, force=True, ports=(5673,))
            cache[(name, label)] = (K, _load(out))
        return cache[(name, label)]

    return get


def test_cut_points_are_the_ones_parametrized(full):
    for name in CASES:
        t, pkts, offs = full[name]
        assert len(_cut_points(t, offs)) == 2 + MID_FRAME_CUTS.get(name, 0), name


@pytest.mark.parametrize("name,label", _params())
def test_midstream_methods_preserved(full, cuts, name, label):
    t, pkts, offs = full[name]
    K, c = cuts(name, label)
    conns = c["connections"]
    if name.startswith(("rabbitmq08_netamqp", "rabbitmq09_netamqp", "rabbitmq10_")):
        # several connections one after another: only those the cut went through are mid-stream
        conns = conns[conns.mid_stream]
    assert len(conns) >= 1, K
    assert conns.mid_stream.all(), (K, conns[["mid_stream"]])
    assert set(conns.version) <= CASES[name], (K, set(conns.version))
    assert (conns.version_evidence == "inferred").all()
    assert (conns.negotiation == "unknown").all()
    # rows were held until the evidence settled the version: they all carry the connection's
    for table in ("methods", "messages"):
        rows = c[table]
        for st, version in zip(conns.tcp_stream, conns.version):
            assert set(rows[rows.tcp_stream == st].version) <= {version}, (table, st)
    exp = _expected(t, offs, K)
    assert len(exp) > 10
    got = c["methods"]

    def key(r, shift):
        return (
            int(r.frame_number) + shift,
            r.method,
            int(r.channel) if r.channel == r.channel else None,
            r.direction,
        )

    got_keys = {key(r, K) for r in got.itertuples()}
    missing = [key(r, 0) for r in exp.itertuples() if key(r, 0) not in got_keys]
    assert not missing, (K, missing[:5], len(missing))
    # and nothing invented: every decoded method is one of the full capture's
    full_keys = {key(r, 0) for r in t["methods"].itertuples()}
    extra = [k for k in got_keys if k not in full_keys]
    assert not extra, (K, extra[:5])


@pytest.mark.parametrize("name,label", _params())
def test_midstream_anomalies_only_resync(cuts, name, label):
    K, c = cuts(name, label)
    an = c["anomalies"]
    assert set(an.kind) <= {"resync"}, (K, an[["kind", "detail"]].to_string())
    if len(an):
        assert an.groupby(["tcp_stream", "direction"]).size().max() <= 1
