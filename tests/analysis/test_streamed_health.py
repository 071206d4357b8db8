"""stats' heartbeat counts found in one pass over a dissect output (first and last stamp and the
long silences of each table per conversation direction) equal those of heartbeat_gaps over the
loaded tables, on real captures with and without the frames table, with batches small enough
that every table takes several, and at thresholds low enough that most gaps count."""

import os
import struct

import pytest

import amqpcap
from amqpcap.analysis import batches
from amqpcap.analysis.batches import OutOfOrder
from amqpcap.analysis.connection_health import gap_counts, heartbeat_gaps
from amqpcap.analysis.streamed_health import heartbeat_counts
from amqpcap.analysis.summary import SECTIONS, stats
from amqpcap.analysis.tables import dissect_cached, load_section

HERE = os.path.dirname(__file__)
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "..", "captures"))
# captures whose connections negotiate heartbeats: late and unknown silences, liveness columns
CONNECTIONS = SECTIONS["health"][0]["connections"]
HEARTBEATS = ["rabbitmq091_pika_full.pcap", "qpid010_basic.pcap", "rabbitmq09_anyevent.pcap"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("health")
    out = {}
    for i, name in enumerate(HEARTBEATS):
        for frames in (False, True):
            path = os.path.join(CAPTURES, name)
            out[(name, frames)] = str(dissect_cached(path, cache_dir=tmp / f"c{i}{frames}", frames=frames))
    return out


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(batches, "BATCH_ROWS", 7)  # every table in several batches (the rows it reads by)


def _loaded_counts(directory, late):
    return gap_counts(heartbeat_gaps(load_section(directory, *SECTIONS["health"]), late=late))


@pytest.mark.parametrize("frames", [False, True], ids=["liveness", "frames"])
@pytest.mark.parametrize("name", HEARTBEATS)
def test_heartbeat_counts_of_a_pass_equal_those_of_the_loaded_gaps(outputs, name, frames):
    directory = outputs[(name, frames)]
    conns = load_section(directory, {"connections": CONNECTIONS})
    seen = 0
    for late in (1.5, 0.1, 0.001):
        got = heartbeat_counts(directory, conns, late=late)
        assert got == _loaded_counts(directory, late)
        seen += sum(got.values())
    assert seen > 0  # the capture has silences to count


def test_stamps_back_in_time_end_the_pass(tmp_path):
    src = os.path.join(CAPTURES, "rabbitmq091_pika_full.pcap")
    data = bytearray(open(src, "rb").read())
    pos = 24
    for _ in range(29):  # the 30th packet, inside the first conversation, stamped 1970
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    struct.pack_into("<II", data, pos, 0, 0)
    path = tmp_path / "epoch.pcap"
    path.write_bytes(bytes(data))
    directory = str(dissect_cached(str(path), cache_dir=tmp_path / "c"))
    with pytest.raises(OutOfOrder):
        heartbeat_counts(directory, load_section(directory, {"connections": CONNECTIONS}), late=0.001)
    # stats then counts from the loaded tables
    assert stats(directory)["health"] == stats(amqpcap.load(directory))["health"]
