"""Packet times outside what a timestamp[ns] column holds (a pcapng high word of 0xFFFFFFFF, an
if_tsoffset of +/- 2^63 s, a scapy packet time of 1e30 or nan): a capture-layer
timestamp-out-of-range anomaly names the packet, every row whose time is that packet's has a null
time (and every line ``show`` prints of it none), in every entry point; nothing else of the
capture is lost."""

import json

import pytest
from fixtures import hostile as H
from fixtures import pcapgen as P

import amqpcap

HIGH = 0xFFFFFFFF_00000007  # ticks (microseconds): ~5.8e14 years
CLI, SRV = H.conversation_09()
PACKETS = P.to_packets(P.tcp_conversation(client_chunks=CLI, server_chunks=SRV), 1)
CAPTURES = {
    "epb-high-word": lambda: H.pcapng_ticks(PACKETS, {5: HIGH}),
    "tsoffset-plus": lambda: H.pcapng_ticks(PACKETS, {}, tsoffset=2**63 - 1),
    "tsoffset-minus": lambda: H.pcapng_ticks(PACKETS, {}, tsoffset=-(2**63)),
}


def write(tmp_path, name):
    cap = tmp_path / f"{name}.pcapng"
    cap.write_bytes(CAPTURES[name]())
    return cap


def late_rows(tabs, frame=6):
    """(table, row) of every row whose time is packet ``frame``'s (connections: first, close, end)."""
    for name, rows in tabs.items():
        for r in rows:
            if r.get("frame_number") == frame:
                yield name, r


def test_rows_of_a_packet_past_64_bits_have_a_null_time_both_paths(tmp_path):
    cap = write(tmp_path, "epb-high-word")
    got = []
    for pure in (False, True):
        r = H.run_cli("dissect", cap, "--frames", "-o", tmp_path / f"o{pure}", pure=pure)
        H.no_internal_error(r)
        got.append(H.tables(tmp_path / f"o{pure}"))
    assert got[0] == got[1]
    tabs = got[0]
    (a,) = [a for a in tabs["anomalies"] if a["kind"] == "timestamp-out-of-range"]
    assert a["layer"] == "capture" and a["frame_number"] == 6 and str(HIGH) in a["detail"]
    assert a["ts"] is None
    late = list(late_rows(tabs))
    assert {name for name, _ in late} == {"methods", "frames", "anomalies"}
    assert all(r["ts"] is None for _, r in late)
    start = next(m for m in tabs["methods"] if m["method"] == "connection.start")
    assert start["frame_number"] == 6 and start["ts"] is None
    publish = next(m for m in tabs["methods"] if m["method"] == "basic.publish")
    assert publish["ts"].timestamp() == pytest.approx(PACKETS[publish["frame_number"] - 1][0] / 1e9)
    others = [r for name, rows in tabs.items() for r in rows if r.get("frame_number") != 6]
    assert others and all(r["ts"] is not None for r in others)
    assert [m["method"] for m in tabs["methods"]] == ["connection.start", "basic.publish"]


def test_a_connection_whose_packets_are_all_past_64_bits_has_no_start_or_end_time(tmp_path):
    cap = write(tmp_path, "tsoffset-plus")
    for pure in (False, True):
        r = H.run_cli("dissect", cap, "-o", tmp_path / f"o{pure}", pure=pure)
        H.no_internal_error(r)
        tabs = H.tables(tmp_path / f"o{pure}")
        (c,) = tabs["connections"]
        assert c["ts"] is None and c["end_ts"] is None and c["close_ts"] is None
        assert all(r["ts"] is None for name in ("methods", "messages", "anomalies") for r in tabs[name])
        assert len(tabs["methods"]) == 2 and len(tabs["messages"]) == 1


@pytest.mark.parametrize("name", ["tsoffset-plus", "tsoffset-minus"])
def test_an_interface_offset_past_64_bits_reports_every_packet_and_decodes_them_all(tmp_path, name):
    cap = write(tmp_path, name)
    r = H.run_cli("dissect", cap, "-o", tmp_path / "o")
    H.no_internal_error(r)
    tabs = H.tables(tmp_path / "o")
    late = [a["frame_number"] for a in tabs["anomalies"] if a["kind"] == "timestamp-out-of-range"]
    assert late == list(range(1, len(PACKETS) + 1))
    assert [m["method"] for m in tabs["methods"]] == ["connection.start", "basic.publish"]


@pytest.mark.parametrize("fmt", [[], ["--json"], ["--csv"], ["--absolute"], ["--json", "--absolute"]])
def test_show_prints_the_packet_and_its_timestamp_anomaly_in_every_format(tmp_path, fmt):
    cap = write(tmp_path, "epb-high-word")
    r = H.run_cli("show", cap, *fmt)
    H.no_internal_error(r)
    lines = [x for x in r.stdout.splitlines() if "timestamp-out-of-range" in x]
    assert len(lines) == 1 and str(HIGH) in lines[0]
    assert "connection.start" in r.stdout and "basic.publish" in r.stdout
    start = next(x for x in r.stdout.splitlines() if "connection.start" in x)
    publish = next(x for x in r.stdout.splitlines() if "basic.publish" in x)
    for line, timed in ((lines[0], False), (start, False), (publish, True)):
        if "--json" in fmt:
            obj = json.loads(line)
            assert (obj["time"] is not None) == timed
            assert (obj.get("ts") is not None) == ("--absolute" not in fmt and timed)
        elif "--csv" in fmt:
            assert (line.split(",")[0] != "") == timed
        else:
            assert (line.split()[0] != "-") == timed
    if fmt == ["--json"]:
        assert json.loads(lines[0])["frame"] == 6


@pytest.mark.parametrize("cmd", ["stats", "report"])
def test_stats_and_report_take_a_capture_with_timestamps_past_64_bits(tmp_path, cmd):
    cap = write(tmp_path, "tsoffset-plus")
    extra = ["-o", tmp_path / "r"] if cmd == "report" else []
    r = H.run_cli(cmd, cap, *extra, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    H.no_internal_error(r)


@pytest.mark.parametrize("bad", [1e30, -1e30, float("nan"), float("inf")])
def test_the_api_reads_a_scapy_packet_time_it_cannot_store_with_the_previous_time(bad):
    from scapy.layers.l2 import Ether

    pkts = [Ether(p[2]) for p in PACKETS]
    for i, p in enumerate(pkts):
        p.time = PACKETS[i][0] / 1e9
    pkts[5].time = bad
    t = amqpcap.dissect_packets(pkts)
    a = t.anomalies[t.anomalies.kind == "timestamp-out-of-range"]
    assert list(a.frame_number) == [6] and list(a.layer) == ["capture"]
    assert list(t.methods.method) == ["connection.start", "basic.publish"]
    assert list(t.methods.ts.isna()) == [True, False] and a.ts.isna().all()


class Replay:
    """A capture socket for LiveSource that hands over ``packets`` (Ethernet bytes, time in s)
    and then sets ``stop``; its descriptor is always readable."""

    def __init__(self, packets, stop) -> None:
        import socket

        from scapy.layers.l2 import Ether

        self.ends = socket.socketpair()
        self.ends[1].send(b"x")
        self.packets = [(Ether, data, t) for data, t in packets]
        self.stop = stop

    def fileno(self) -> int:
        return self.ends[0].fileno()

    def recv_raw(self, _size):
        got = self.packets.pop(0)
        if not self.packets:
            self.stop.set()
        return got

    def close(self) -> None:
        for end in self.ends:
            end.close()


def test_live_segments_of_a_packet_time_past_64_bits_have_a_null_time(tmp_path):
    import threading

    from amqpcap.live import LiveSource, SegmentWriter
    from amqpcap.pipeline import Dissector, Options

    stop = threading.Event()
    times = [ts / 1e9 for ts, _lt, _data in PACKETS]
    times[5] = 1e30  # a clock no timestamp column holds
    sock = Replay([(data, t) for (_ts, _lt, data), t in zip(PACKETS, times)], stop)
    out = tmp_path / "live"
    segments = SegmentWriter(str(out), ["connections", "methods", "messages", "anomalies"])
    try:
        Dissector("live:test", segments, Options()).run(LiveSource(sock, stop))
    finally:
        segments.close()
        sock.close()
    tabs = H.tables(out)
    (a,) = [a for a in tabs["anomalies"] if a["kind"] == "timestamp-out-of-range"]
    assert a["frame_number"] == 6 and a["ts"] is None
    start = next(m for m in tabs["methods"] if m["method"] == "connection.start")
    publish = next(m for m in tabs["methods"] if m["method"] == "basic.publish")
    assert start["frame_number"] == 6 and start["ts"] is None and publish["ts"] is not None
