"""TCP zero-window periods: recorded by the dissector, reported by analysis.zero_windows."""

from fixtures.amqp09 import method_frame, protocol_header
from fixtures.pcapgen import pcap_bytes, tcp_conversation, write

import amqpcap
from amqpcap.analysis import health, zero_windows
from amqpcap.pipeline import dissect


def _capture(tmp_path, reopen=True):
    segs = tcp_conversation(
        [
            ("c2s", protocol_header("0-9-1")),
            (
                "s2c",
                method_frame(
                    0,
                    "connection.start",
                    version_major=0,
                    version_minor=9,
                    mechanisms="PLAIN",
                    locales="en_US",
                ),
            ),
            ("c2s", b""),
            ("s2c", b""),
            ("c2s", b""),
        ],
        close=None,
    )
    data = list(segs)
    srv = [s for s in data if s.direction == "s2c"][-1]
    cli = [s for s in data if s.direction == "c2s"][-1]
    # After the data: the server advertises a zero window twice (one period), then reopens.
    extra = [
        srv.copy(
            flags="A", payload=b"", window=w, seq=srv.seq + len(srv.payload), ack=cli.seq + len(cli.payload)
        )
        for w in (0, 0) + ((4096,) if reopen else ())
    ]
    allsegs = data + extra
    for i, s in enumerate(allsegs):
        s.ts_ns = 1_700_000_000_000_000_000 + i * 10_000_000
    path = tmp_path / "zw.pcap"
    write(path, pcap_bytes([s.packet() for s in allsegs]))
    return path, len(data)


def test_a_zero_window_period_is_measured_from_first_zero_to_reopening(tmp_path):
    path, n = _capture(tmp_path)
    dissect([str(path)], str(tmp_path / "out"))
    z = zero_windows(amqpcap.load(str(tmp_path / "out")))
    assert len(z) == 1
    r = z.iloc[0]
    assert r.direction == "s2c" and r.start_frame == n + 1 and r.end_frame == n + 3 and r.reopened
    assert abs(r.duration_ms - 20.0) < 1e-6
    assert "zero_windows" in health(amqpcap.load(str(tmp_path / "out")))


def test_a_window_never_reopened_lasts_to_the_last_packet(tmp_path):
    path, n = _capture(tmp_path, reopen=False)
    dissect([str(path)], str(tmp_path / "out"))
    z = zero_windows(amqpcap.load(str(tmp_path / "out")))
    assert len(z) == 1 and not z.iloc[0].reopened and z.iloc[0].start_frame == n + 1
    # Open until the conversation's last packet, the second zero-window ACK.
    assert abs(z.iloc[0].duration_ms - 10.0) < 1e-6
