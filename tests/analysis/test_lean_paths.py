"""The memory-lean paths of the analysis give the frames of the straightforward ones, on the real
captures: pairings asked for a few columns, throughput summed a slice at a time, a selection
ordered alone, the heartbeat analysis' signs of life held as int arrays."""

import os

import pandas as pd
import pytest

import amqpcap
from amqpcap.analysis import confirms, consumer_acks, rpc, traffic, transit
from amqpcap.analysis import connection_health as ch
from amqpcap.analysis._common import ns, ordered
from amqpcap.analysis.summary import LATENCY_COLUMNS

HERE = os.path.dirname(__file__)
CAPTURES = os.path.normpath(os.path.join(HERE, "..", "..", "captures"))
NAMES = sorted(n for n in os.listdir(CAPTURES) if n.endswith(".pcap"))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Every shipped capture, loaded as stats loads it (compact) and with its frames table."""
    cache = tmp_path_factory.mktemp("cache")
    return {
        n: amqpcap.load(os.path.join(CAPTURES, n), cache_dir=cache, frames=True, columns="compact")
        for n in NAMES
    }


PAIRINGS = {"confirm": confirms, "consumer_ack": consumer_acks, "transit": transit, "rpc": rpc}


def test_a_pairing_asked_for_some_columns_gives_those_columns_of_its_full_frame(loaded):
    seen = dict.fromkeys(PAIRINGS, 0)
    for name, t in loaded.items():
        for kind, pairing in PAIRINGS.items():
            full = pairing(t)
            seen[kind] += len(full)
            for cols in (LATENCY_COLUMNS[kind], list(full.columns)[::3], ["latency_ms"]):
                want = [c for c in full.columns if c in cols]
                pd.testing.assert_frame_equal(pairing(t, columns=cols), full[want], obj=f"{name} {kind}")
    assert all(seen.values()), seen  # every pairing has rows on some capture


def test_throughput_summed_a_slice_at_a_time_equals_one_pass(loaded, monkeypatch):
    whole = {
        (n, by): traffic.throughput(t, by=by) for n, t in loaded.items() for by in ("connection", "total")
    }
    monkeypatch.setattr(traffic, "CHUNK_ROWS", 7)  # many slices, ragged last one
    for (name, by), expected in whole.items():
        got = traffic.throughput(loaded[name], by=by)
        pd.testing.assert_frame_equal(got, expected, obj=f"{name} by {by}")
        assert got.attrs == expected.attrs
    assert sum(len(df) for df in whole.values()) > 0


def test_a_selection_ordered_alone_is_in_the_whole_table_order(loaded):
    names = ["basic.publish", "basic.ack", "connection.close", "channel.open", "queue.declare"]
    for name, t in loaded.items():
        alone = ordered(t.methods, names)  # the table's order not known yet: the selection's keys
        ordered(t.methods)  # now the whole table's order is kept
        pd.testing.assert_frame_equal(ordered(t.methods, names), alone, obj=name)
        assert set(alone["method"]) <= set(names) and len(alone) == t.methods["method"].isin(names).sum()


def test_signs_of_life_are_each_packet_once_in_time_order(loaded):
    checked = 0
    for name, t in loaded.items():
        cols = ["capture", "tcp_stream", "direction", "ts", "frame_number"]
        parts = [df[cols] for df in (t.frames, t.methods, t.messages) if len(df)]
        if not parts:  # (a capture with no AMQP traffic)
            assert ch.Activity(parts).marks(name, 0, "c2s") == []
            continue
        act = ch.Activity(parts)
        a = pd.concat([p.astype({"capture": object, "direction": object}) for p in parts], ignore_index=True)
        a = a.drop_duplicates(["capture", "tcp_stream", "direction", "frame_number"])
        a = a.assign(_ts=ns(a["ts"])).sort_values(["_ts", "frame_number"], kind="stable")
        for (cap, st, d), g in a.groupby(["capture", "tcp_stream", "direction"], sort=False):
            want = list(zip(g["_ts"].tolist(), g["frame_number"].tolist()))
            assert act.marks(cap, int(st), d) == want, (name, st, d)
            checked += 1
        assert act.marks(name, 10**6, "c2s") == [] and act.marks("no such capture", 0, "c2s") == []
    assert checked > 20
