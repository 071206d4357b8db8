"""AMQP 1.0 in stats: settlement latency, outcomes by direction, error conditions in errors."""

from fixtures import pcapgen as P
from test_amqp10_pipeline import conversation
from test_differential_tshark_1_0 import synthetic_outcomes

from amqpcap.analysis import amqp10, load
from amqpcap.analysis.summary import stats
from amqpcap.pipeline import dissect


def _out(tmp_path, segs):
    tmp_path.mkdir(exist_ok=True)
    cap = P.write(tmp_path / "c.pcap", P.pcap_bytes(P.to_packets(segs)))
    dissect([str(cap)], str(tmp_path / "out"))
    return tmp_path / "out"


def test_outcomes_count_every_delivery_by_direction(tmp_path):
    s = stats(str(_out(tmp_path, synthetic_outcomes())))
    assert s["outcomes"]["c2s"] == {
        "accepted": 2,
        "rejected": 1,
        "released": 2,
        "modified": 1,
        "received": 0,
        "pre-settled": 1,
        "unsettled": 0,
    }
    assert s["outcomes"]["s2c"]["released"] == 1


def test_settlement_latency_is_first_transfer_to_settling_disposition(tmp_path):
    out = _out(tmp_path, synthetic_outcomes())
    t = load(str(out))
    rows = amqp10.settlement(t)
    settled = rows[rows["latency_ms"].notna()]
    assert len(settled) == 7  # the pre-settled one has no settlement latency
    for r in settled.to_dict("records"):
        assert r["latency_ms"] == (r["settle_ts"] - r["first_ts"]).total_seconds() * 1000 > 0
    lat = stats(str(out))["latency"]["settlement"]
    assert lat["count"] == 7
    assert {k: v["count"] for k, v in lat["by_outcome"].items()} == {
        "accepted": 2,
        "modified": 1,
        "rejected": 1,
        "released": 3,
    }
    assert lat["max_ms"] == max(settled["latency_ms"])


def test_error_conditions_join_the_errors_list(tmp_path):
    s = stats(str(_out(tmp_path, conversation())))
    (e,) = [x for x in s["errors"] if x["kind"] == "amqp-1.0"]
    assert (e["condition"], e["name"], e["method"], e["count"]) == (
        "amqp:not-found",
        "not-found",
        "detach",
        1,
    )
    assert e["descriptions"][0]["description"] == "no queue 'nope'"
    rej = stats(str(_out(tmp_path / "b", synthetic_outcomes())))["errors"]
    assert [(x["condition"], x["method"]) for x in rej if x["kind"] == "amqp-1.0"] == [("x:y", "disposition")]


def _shipped(tmp_path, name):
    from pathlib import Path

    tmp_path.mkdir(exist_ok=True)
    cap = Path(__file__).resolve().parents[2] / "captures" / name
    dissect([str(cap)], str(tmp_path / "out"))
    return tmp_path / "out"


def test_errors_has_a_row_per_1_0_error_as_stats_counts_it_and_stats_of_tables_counts_each_once(tmp_path):
    from collections import Counter

    from amqpcap.analysis import errors

    outs = [
        _out(tmp_path / "detach", conversation()),  # a detach's amqp:not-found
        _out(tmp_path / "outcomes", synthetic_outcomes()),  # a rejected outcome's condition
        _shipped(tmp_path / "rhea", "rabbitmq10_rhea_errors.pcap"),  # a refused login: sasl:auth
        _shipped(tmp_path / "proton", "rabbitmq10_proton_errors.pcap"),
    ]
    seen = set()
    for out in outs:
        s = stats(str(out))
        want = Counter()
        for e in s["errors"]:
            if e["kind"] == "amqp-1.0":
                for d in e["descriptions"]:
                    want[(e["condition"], e["name"], e["method"], d["description"], d["first_frame"])] += d[
                        "count"
                    ]
        t = load(str(out))
        err = errors(t)
        rows = err[err["kind"] == "amqp-1.0"].astype(object).where(lambda x: x.notna(), None)
        got = Counter()
        for r in rows.to_dict("records"):
            assert r["version"] == "1.0" and r["code"] is None and r["text"] == r["description"]
            got[(r["condition"], r["name"], r["method"], r["description"])] += 1
        assert got == Counter({k[:4]: n for k, n in want.items()}) and got, out
        assert all(
            (k[0], k[4]) in {(c, f) for c, f in zip(rows["condition"], rows["frame_number"])} for k in want
        )
        assert stats(t)["errors"] == s["errors"]  # the 1.0 errors of loaded tables counted once
        seen |= {k[0] for k in got}
    assert {"amqp:not-found", "x:y", "sasl:auth", "amqp:invalid-field"} <= seen
