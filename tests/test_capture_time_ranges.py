"""Packet times outside what a timestamp[ns] column holds (a pcapng high word of 0xFFFFFFFF, an
if_tsoffset of +/- 2^63 s, a scapy packet time of 1e30 or nan): the packet is read with the
previous packet's time and a capture-layer timestamp-out-of-range anomaly names it, in every
entry point; nothing else of the capture is lost."""

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


def test_a_timestamp_past_64_bits_reads_with_the_previous_time_and_an_anomaly_both_paths(tmp_path):
    cap = write(tmp_path, "epb-high-word")
    got = []
    for pure in (False, True):
        r = H.run_cli("dissect", cap, "-o", tmp_path / f"o{pure}", pure=pure)
        H.no_internal_error(r)
        got.append(H.tables(tmp_path / f"o{pure}"))
    assert got[0] == got[1]
    tabs = got[0]
    (a,) = [a for a in tabs["anomalies"] if a["kind"] == "timestamp-out-of-range"]
    assert a["layer"] == "capture" and a["frame_number"] == 6 and str(HIGH) in a["detail"]
    start = next(m for m in tabs["methods"] if m["method"] == "connection.start")
    assert start["frame_number"] == 6
    assert start["ts"].timestamp() == pytest.approx(PACKETS[4][0] / 1e9)  # packet 5's time
    assert [m["method"] for m in tabs["methods"]] == ["connection.start", "basic.publish"]


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
