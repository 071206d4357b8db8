"""The example notebooks run top to bottom and show the right numbers; they match the generator."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
CAPTURES = ROOT / "captures"
NAMES = [
    "01_quickstart.ipynb",
    "02_latency.ipynb",
    "03_errors.ipynb",
    "04_throughput.ipynb",
    "06_amqp10.ipynb",
]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_notebooks", ROOT / "tools" / "gen_notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _truth(name):
    return json.loads((CAPTURES / name).read_text())


@pytest.fixture(scope="session")
def nb_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("amqpcap-nb-cache"))


@pytest.fixture(scope="session")
def executed(nb_cache):
    """Execute every notebook once (kernel python3, cwd notebooks/); name -> executed notebook."""
    old = os.environ.get("AMQPCAP_CACHE")
    os.environ["AMQPCAP_CACHE"] = nb_cache  # inherited by the kernel process
    os.environ.setdefault("MPLBACKEND", "Agg")
    out = {}
    try:
        for name in NAMES:
            nb = nbformat.read(NB_DIR / name, as_version=4)
            client = nbclient.NotebookClient(
                nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(NB_DIR)}}
            )
            client.execute()  # raises CellExecutionError on any cell error
            out[name] = nb
    finally:
        if old is None:
            os.environ.pop("AMQPCAP_CACHE", None)
        else:
            os.environ["AMQPCAP_CACHE"] = old
    return out


def _stdout(nb) -> str:
    return "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )


def _summary(nb) -> dict:
    """The ``SUMMARY k=v ...`` line printed by the last cell."""
    lines = [ln for ln in _stdout(nb).splitlines() if ln.startswith("SUMMARY ")]
    assert lines, "no SUMMARY line printed"
    return dict(re.findall(r"(\w+)=(\[[^\]]*\]|\S+)", lines[-1]))


def _errors_in(nb):
    return [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_without_errors(executed, name, nb_cache):
    nb = executed[name]
    assert not _errors_in(nb)
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
    assert os.listdir(nb_cache), "captures should be dissected into AMQPCAP_CACHE"


def test_quickstart_facts(executed, nb_cache):
    import amqpcap

    t = amqpcap.load(CAPTURES / "rabbitmq091_pika_full.pcap", cache_dir=nb_cache)
    truth = _truth("rabbitmq091_pika_full.truth.json")
    s = _summary(executed["01_quickstart.ipynb"])
    assert int(s["connections"]) == len(truth["connections"])
    assert int(s["publishes"]) == sum(
        c["c2s_method_counts"].get("basic.publish", 0) for c in truth["connections"]
    )
    assert int(s["anomalies"]) == len(t.anomalies) == 0
    assert int(s["methods"]) == len(t.methods) and int(s["messages"]) == len(t.messages)
    # the scapy cell: packet 8 is the client's start-ok, its fields named as in the specification
    out = _stdout(executed["01_quickstart.ipynb"])
    assert "connection.start-ok PLAIN" in out.splitlines()
    assert "client_properties" in out
    # its password redacted as the tables have it (the truth's password is on the wire)
    password = truth["credentials"]["password"]
    assert password not in out and "response  = {'user': 'amqpcap', 'password': '<redacted>'}" in out


def test_latency_facts(executed, nb_cache):
    import amqpcap
    from amqpcap import analysis as A

    truth = _truth("rabbitmq091_pika_throughput.truth.json")
    publishes = sum(c["c2s_publish_count"] for c in truth["connections"])
    t = amqpcap.load(CAPTURES / "rabbitmq091_pika_throughput.pcap", cache_dir=nb_cache)
    s = _summary(executed["02_latency.ipynb"])
    assert int(s["transit"]) == publishes == len(A.transit(t))
    assert int(s["acks"]) == len(A.consumer_acks(t)) > 0
    r = A.rpc(t)
    assert int(s["rpc"]) == len(r) > 0
    assert int(s["rpc_ok"]) == len(r)  # every RPC request was answered
    assert int(s["confirms"]) == 0
    assert int(s["rtt"]) == len(A.method_rtt(t))
    # the histogram was rendered inline
    nb = executed["02_latency.ipynb"]
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def test_errors_facts(executed, nb_cache):
    import amqpcap
    from amqpcap import analysis as A

    truth = _truth("rabbitmq091_pika_full.truth.json")
    conn = truth["connections"][0]
    s = _summary(executed["03_errors.ipynb"])
    assert int(s["confirm_ack"]) == conn["confirms"]["acks"] == 5
    assert int(s["confirm_nack"]) == conn["confirms"]["nacks"] == 2
    codes = sorted(e["reply_code"] for e in conn["errors"] if e.get("level") == "channel")
    assert json.loads(s["channel_close_codes"].replace(" ", "")) == codes == [403, 404, 406]
    assert int(s["returns"]) == sum(1 for e in conn["errors"] if e.get("method") == "basic.return")
    q = amqpcap.load(CAPTURES / "qpid010_basic.pcap", cache_dir=nb_cache)
    assert int(s["qpid_errors"]) == len(A.errors(q))
    # the Wireshark filter lists the error packets
    t = amqpcap.load(CAPTURES / "rabbitmq091_pika_full.pcap", cache_dir=nb_cache)
    frames = sorted(int(f) for f in A.errors(t)["frame_number"].dropna())
    assert "frame.number in {" + " ".join(map(str, frames)) + "}" in _stdout(executed["03_errors.ipynb"])


def test_throughput_facts(executed):
    truth = _truth("rabbitmq091_pika_throughput.truth.json")
    publishes = sum(c["c2s_publish_count"] for c in truth["connections"])
    s = _summary(executed["04_throughput.ipynb"])
    assert int(s["messages_c2s"]) == publishes
    assert int(s["publishes"]) == publishes
    assert int(s["messages_s2c"]) >= 1200
    nb = executed["04_throughput.ipynb"]
    assert sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", [])) >= 2


def test_amqp10_facts(executed):
    """Every figure the 1.0 notebook prints is what the clients logged (the truth files)."""
    s = _summary(executed["06_amqp10.ipynb"])
    outcomes = _truth("rabbitmq10_rhea_outcomes.truth.json")["connections"]
    settles = Counter(d["outcome"] for c in outcomes for d in c["settles"])  # the consumers' dispositions
    for outcome in ("accepted", "rejected", "released", "modified"):
        assert int(s[f"s2c_{outcome}"]) == settles[outcome] > 0
    seen = [o["outcome"] for c in outcomes for o in c["outcomes"]]  # the broker's, as the publisher saw them
    assert int(s["c2s_accepted"]) == seen.count("accepted") > 0
    sent_settled = sum(1 for c in outcomes for m in c["sends"] if m["settled"])
    assert int(s["c2s_presettled"]) == sent_settled == 3
    assert int(s["settled"]) == sum(settles.values()) + len(seen)  # every disposition-settled delivery
    received = sum(len(c["receives"]) for c in outcomes)
    assert int(s["s2c_unsettled"]) == received - sum(settles.values())  # their session ended first
    conditions = set()  # the errors of the frames on the wire, and a refused login's SASL code
    for name in ("rabbitmq10_rhea_errors", "rabbitmq10_proton_errors"):
        for c in _truth(f"{name}.truth.json")["connections"]:
            for f in c["frames"]:
                fields = f.get("fields") or {}
                if isinstance(fields.get("error"), dict):
                    conditions.add(fields["error"]["condition"])
                if f["performative"] == "sasl.outcome" and fields.get("code") == 1:
                    conditions.add("sasl:auth")
    assert set(json.loads(s["conditions"].replace("'", '"'))) == conditions
    mux = _truth("rabbitmq10_rhea_multiplex.truth.json")["connections"][0]["frames"]
    assert int(s["empty_frames_s2c"]) == sum(f["dir"] == "s2c" and f["performative"] == "empty" for f in mux)
    drains = sum(f["dir"] == "c2s" and f.get("fields", {}).get("drain") is True for f in mux)
    assert int(s["drains"]) == drains == 1
    assert int(s["stalls"]) >= int(s["stalled"]) >= 1  # the receiver attached with no credit while 4 waited
    assert int(s["idle_late"]) == 0  # the broker's empty frames kept every silence under the idle-time-out
    cross = _truth("rabbitmq10_proton_pika.truth.json")["connections"]
    sent = [c for c in cross if c["protocol"] == "AMQP 1.0"][0]["sends"]
    assert int(s["transit"]) == int(s["transit_across"]) == len(sent) == 4
    nb = executed["06_amqp10.ipynb"]
    assert sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", [])) == 6


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_match_generator(name):
    gen = _gen()
    assert (NB_DIR / name).read_text(encoding="utf-8") == gen.render(name), (
        f"{name} drifted: run python tools/gen_notebooks.py"
    )


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_have_no_outputs(name):
    nb = nbformat.read(NB_DIR / name, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None


def test_the_notebooks_readme_counts_and_names_every_notebook_and_what_executes_it():
    readme = (NB_DIR / "README.md").read_text()
    notebooks = sorted(p.name for p in NB_DIR.glob("*.ipynb"))
    words = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}
    assert readme.startswith("# Example notebooks\n\n" + words[len(notebooks)].capitalize() + " notebooks")
    assert all(f"`{n}`" in readme for n in notebooks)
    spark = (ROOT / "tests" / "spark" / "test_spark_notebook.py").read_text()
    executed_by = {n: "tests/test_notebooks.py" for n in NAMES}
    executed_by.update({n: "tests/spark/test_spark_notebook.py" for n in notebooks if n in spark})
    assert sorted(executed_by) == notebooks  # each one executed by some test
    for count, word in words.items():  # no count of notebooks that is not theirs
        if count != len(notebooks):
            assert f"all {word}" not in readme.lower() and f"{word} notebooks" not in readme.lower()
    spark_only = sorted(set(notebooks) - set(NAMES))
    but = ", ".join(f"`{n}`" for n in spark_only)
    assert f"`tests/test_notebooks.py` executes every notebook but {but}" in readme
