"""The recorded AMQP 1.0 captures hold exactly the bytes their clients logged.

For every 1.0 connection of captures/rabbitmq10_*.pcap, each direction's TCP payload (as
tshark's follow,tcp,raw reassembles it) is the client's logged protocol headers and frames
(``hex`` of every frame marked on the wire) in order, plus only the frames the recorder noted
as arriving after the client stopped reading. So the truth files describe these very captures,
byte for byte, independently of amqpcap's decoder.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from fixtures.tshark import tshark

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
RECORDED = sorted(CAPTURES.glob("rabbitmq10_*.pcap"))


def follow(pcap: Path, stream: int) -> dict[str, bytes]:
    """Each direction's reassembled TCP payload of one stream (tshark -z follow,tcp,raw)."""
    out = subprocess.run(
        [tshark(), "-r", str(pcap), "-q", "-z", "follow,tcp,raw,%d" % stream],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = {"c2s": bytearray(), "s2c": bytearray()}
    for line in out.splitlines():
        if re.fullmatch(r"\t?[0-9a-f]+", line):
            data["s2c" if line.startswith("\t") else "c2s"] += bytes.fromhex(line.strip())
    return {k: bytes(v) for k, v in data.items()}


def logged_bytes(conn: dict, direction: str) -> bytes:
    """SASL header, SASL frames, AMQP header, the other frames: as the client logged them."""
    heads = {h["protocol_id"]: h for h in conn["headers"] if h["dir"] == direction and h.get("on_wire", True)}
    frames = [f for f in conn["frames"] if f["dir"] == direction and f.get("on_wire", True)]
    out = b""
    for pid, sasl in ((3, True), (0, False)):
        if pid in heads:
            h = heads[pid]
            out += b"AMQP" + bytes([pid, h["major"], h["minor"], h["revision"]])
        for f in frames:
            if f["performative"].startswith("sasl.") == sasl:
                out += bytes.fromhex(f["hex"])
    return out


def unlogged(truth: dict, stream: int, direction: str) -> int:
    pattern = rf"tcp\.stream {stream} {direction}: the capture has (\d+) frame\(s\) after"
    return sum(int(m.group(1)) for n in truth["notes"] if (m := re.match(pattern, n)))


def test_there_are_captures_of_both_clients():
    clients = {json.loads(p.with_suffix(".truth.json").read_text())["client"]["name"] for p in RECORDED}
    assert clients == {"rhea", "qpid-proton"}


@pytest.mark.parametrize("pcap", RECORDED, ids=[p.stem for p in RECORDED])
def test_each_direction_is_the_logged_bytes(pcap):
    truth = json.loads(pcap.with_suffix(".truth.json").read_text())
    checked = 0
    for conn in truth["connections"]:
        if conn["protocol"] != "AMQP 1.0":
            continue
        wire = follow(pcap, conn["tcp_stream"])
        for d in ("c2s", "s2c"):
            mine = logged_bytes(conn, d)
            assert wire[d][: len(mine)] == mine, (conn["tcp_stream"], d)
            rest = wire[d][len(mine) :]
            n = 0
            while rest:  # only whole frames the client did not log, as many as noted
                size = int.from_bytes(rest[:4], "big")
                assert 8 <= size <= len(rest), (conn["tcp_stream"], d, rest[:16].hex())
                rest = rest[size:]
                n += 1
            assert n == unlogged(truth, conn["tcp_stream"], d), (conn["tcp_stream"], d)
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize("pcap", RECORDED, ids=[p.stem for p in RECORDED])
def test_every_logged_message_has_its_transfers(pcap):
    """Each message a client sent or received is delivered by transfer frames of its delivery-id
    on its link (named by the attach of the same channel and handle); the last of them has
    more=false, the others more=true; and every delivery on the wire is a logged message."""
    truth = json.loads(pcap.with_suffix(".truth.json").read_text())
    for conn in truth["connections"]:
        if conn["protocol"] != "AMQP 1.0":
            continue
        for key, d in (("sends", "c2s"), ("receives", "s2c")):
            links = {}  # (channel, handle) -> link name, from the attach frames of this direction
            transfers = []
            for f in conn["frames"]:
                if f["dir"] != d:
                    continue
                if f["performative"] == "attach":
                    links[(f["channel"], f["fields"]["handle"])] = f["fields"]["name"]
                elif f["performative"] == "transfer":
                    transfers.append((links.get((f["channel"], f["fields"]["handle"])), f["fields"]))
            logged = {(m["link"], m["delivery_id"]) for m in conn[key] if not m.get("error")}
            deliveries = {(link, t["delivery-id"]) for link, t in transfers if "delivery-id" in t}
            assert deliveries == logged, (conn["tcp_stream"], key, deliveries ^ logged)
            for m in conn[key]:
                if m.get("error"):
                    continue
                mine = [
                    t
                    for link, t in transfers
                    if link == m["link"] and t.get("delivery-id") == m["delivery_id"]
                ]
                assert mine, (conn["tcp_stream"], key, m["link"], m["delivery_id"])
                assert [bool(t.get("more")) for t in mine] == [True] * (len(mine) - 1) + [False]
                assert mine[0]["delivery-tag"]["binary_hex"] == m["delivery_tag_hex"]
