"""Who sent a connection's FIN, RST or connection.close, and in which frame: amqpcap's tables,
errors and text against tshark (the truth) on every shipped capture and on a recording where
the client's FIN is answered by the server's RST.

tshark must be installed in CI (scripts/test.sh installs it); elsewhere the test skips, unless
AMQPCAP_REQUIRE_TOOLS is set.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
from fixtures.tshark import tshark

from amqpcap import analysis
from amqpcap.pipeline import dissect

ROOT = Path(__file__).resolve().parents[1]
CAPS = sorted((ROOT / "captures").glob("*.pcap")) + [
    ROOT / "tests" / "captures" / "rabbitmq091_client_fin_server_rst.pcap"
]


def tshark_ends(capture: Path) -> dict[int, dict]:
    """tcp.stream -> the first FIN and the first RST: (frame.number, source port)."""
    out = subprocess.run(
        [tshark(), "-n", "-r", str(capture), "-Y", "tcp.flags.fin == 1 || tcp.flags.reset == 1"]
        + ["-T", "fields", "-e", "frame.number", "-e", "tcp.stream", "-e", "tcp.srcport"]
        + ["-e", "tcp.flags.fin", "-e", "tcp.flags.reset"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    ends: dict[int, dict] = {}
    for line in out.splitlines():
        frame, stream, sport, fin, rst = line.split("\t")
        kind = "rst" if rst in ("1", "True") else "fin"
        ends.setdefault(int(stream), {}).setdefault(kind, (int(frame), int(sport)))
    return ends


@pytest.fixture(scope="module")
def dissected(tmp_path_factory):
    out = {}
    for cap in CAPS:
        d = tmp_path_factory.mktemp(cap.stem) / "out"
        dissect([str(cap)], str(d))
        out[cap.name] = analysis.load(str(d))
    return out


@pytest.mark.parametrize("capture", CAPS, ids=[c.name for c in CAPS])
def test_reset_sender_and_frame_are_tsharks(capture, dissected):
    t = dissected[capture.name]
    ends = tshark_ends(capture)
    conns = t.connections.set_index("tcp_stream")
    for stream, c in conns.iterrows():

        def side(port, server_port=c["server_port"]):
            return "server" if port == server_port else "client"

        rst = ends.get(stream, {}).get("rst")
        assert (c["rst_by"] if pd.notna(c["rst_by"]) else None) == (rst and side(rst[1]))
        assert (int(c["rst_frame"]) if pd.notna(c["rst_frame"]) else None) == (rst and rst[0])
        closed = c["closed_by"] if pd.notna(c["closed_by"]) else ""
        if closed.endswith(("-fin", "-rst")):  # the first FIN or RST closed it
            first = min(v for v in ends[stream].values())
            assert (int(c["close_frame"]), closed) == (
                first[0],
                f"{side(first[1])}-{'rst' if first == rst else 'fin'}",
            )
    err = analysis.errors(t)
    for r in err[err["kind"] == "tcp-reset"].itertuples():
        frame, port = ends[r.tcp_stream]["rst"]
        who = "server" if port == conns.loc[r.tcp_stream, "server_port"] else "client"
        assert (r.frame_number, r.direction, r.text) == (
            frame,
            {"client": "c2s", "server": "s2c"}[who],
            f"reset by {who}",
        )


def test_server_reset_after_a_client_fin_is_the_servers_in_stats_and_report(dissected):
    t = dissected["rabbitmq091_client_fin_server_rst.pcap"]
    (fin_frame, _), (rst_frame, sport) = tshark_ends(CAPS[-1])[0].values()
    assert sport == 5672 and rst_frame > fin_frame
    summary = analysis.error_summary(t)
    row = summary[summary["kind"] == "tcp-reset"].iloc[0]
    assert (row["text"], row["first_frame"]) == ("reset by server", rst_frame)
    (closed,) = analysis.connections_table(t)["closed"]
    assert closed == f"client-fin #{fin_frame}, server-rst #{rst_frame}"
    text = analysis.render_text(analysis.stats(t), t)
    line = next(x for x in text.splitlines() if "tcp-reset" in x)
    assert line.endswith("reset by server") and f" {rst_frame} " in line
