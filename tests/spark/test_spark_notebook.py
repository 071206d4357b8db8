"""notebooks/05_spark.ipynb runs top to bottom: local mode, a standalone cluster it starts and an
S3 server it starts, printing the numbers of the dissect output each time, and stops what it
started."""

from __future__ import annotations

import glob
import importlib.util
import re
from pathlib import Path

import pytest

import amqpcap
from amqpcap.pipeline import dissect

ROOT = Path(__file__).resolve().parents[2]
NB = ROOT / "notebooks" / "05_spark.ipynb"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_notebooks", ROOT / "tools" / "gen_notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_spark_notebook_runs_locally_on_a_cluster_and_on_s3_and_prints_what_dissect_gives(
    spark, tmp_path
):
    pytest.importorskip("moto", reason="the test extra installs moto[server]")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NB, as_version=4)
    nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(NB.parent)}}
    ).execute()
    out = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not [o for o in out if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in out if o.get("output_type") == "stream")
    s = dict(
        re.findall(r"(\w+)=(\S+)", "\n".join(ln for ln in text.splitlines() if ln.startswith("SUMMARY ")))
    )
    want = str(tmp_path / "want")
    dissect(sorted(glob.glob(str(ROOT / "captures" / "*.pcap"))), want, frames=True)
    t = amqpcap.load(want)
    assert int(s["connections"]) == len(t.connections) > 0
    assert int(s["methods"]) == len(t.methods)
    assert int(s["frames"]) == len(t.frames) > 0
    assert int(s["publishes"]) == int((t.messages["method"] == "basic.publish").sum()) > 0
    assert int(s["split"]) >= 1 and int(s["tasks"]) > 2
    assert sum("text/html" in o.get("data", {}) for o in out) >= 4  # the Spark SQL results, as tables
    # the cluster and the S3 run wrote the rows local mode wrote; every process started was stopped
    rows = int(s["local_rows"])
    assert rows == len(t.connections) + len(t.methods) + len(t.messages) + len(t.anomalies) + len(t.frames)
    assert int(s["cluster_rows"]) == int(s["s3_rows"]) == rows
    assert int(s["cluster_tasks"]) > 2 and int(s["s3_captures"]) == len(
        glob.glob(str(ROOT / "captures" / "*.pcap"))
    )
    done, started = map(int, s["stopped"].split("/"))
    assert done == started == 4
    assert "with 2 workers" in text


def test_the_spark_notebook_is_committed_as_generated_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    assert NB.read_text(encoding="utf-8") == _gen().render(NB.name), "run python tools/gen_notebooks.py"
    nb = nbformat.read(NB, as_version=4)
    assert all(c.outputs == [] and c.execution_count is None for c in nb.cells if c.cell_type == "code")
