#!/usr/bin/env python3
"""Generate the example notebooks in ``notebooks/`` (without outputs).

    python tools/gen_notebooks.py            # (re)write notebooks/*.ipynb
    python tools/gen_notebooks.py --check    # exit 1 if the committed notebooks drifted

Each notebook runs top to bottom from the ``notebooks/`` directory on the shipped
captures (``../captures/...``).  Captures are dissected once into a cache:
``$AMQPCAP_CACHE`` if set, else a directory under the system temp dir, so running
them never writes to ``~/.cache``.  Cell ids are deterministic so regenerating
gives byte-identical files (tests/test_notebooks.py checks that).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"

SETUP = """\
import os
import tempfile
from pathlib import Path

import pandas as pd

import amqpcap
from amqpcap import analysis as A

CAPTURES = Path("..") / "captures"   # paths are relative to the notebooks/ directory
# Captures are dissected once into a cache; keep it out of ~/.cache.
CACHE = os.environ.get("AMQPCAP_CACHE") or os.path.join(tempfile.gettempdir(), "amqpcap-notebooks-cache")
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 30)
pd.set_option("display.max_colwidth", 60)"""

SETUP_MD = (
    "## Setup\n\n"
    "`amqpcap.load` accepts a dissect output directory or a capture file. A capture is dissected "
    "once into `cache_dir` (keyed by the file's content and options) and reused afterwards. "
    "Set the `AMQPCAP_CACHE` environment variable to choose the cache directory."
)


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str):
    return new_code_cell(text.strip("\n"))


def quickstart():
    return [
        md("""
# 01 — Quickstart: load a capture and look at the tables

This notebook loads `rabbitmq091_pika_full.pcap` (one pika 0-9-1 connection exercising
nearly every method: publishes, consumers, confirms, acks/nacks, returns and channel errors)
and walks through the five tables `amqpcap` produces:

| table | one row per |
|---|---|
| `connections` | TCP conversation (negotiated version, peers, tune values, close) |
| `methods` | AMQP method frame (`channel.open`, `basic.publish`, …) |
| `messages` | content (publish / deliver / get-ok / return) with its properties and body |
| `anomalies` | something the dissector could not decode cleanly |
| `frames` | every frame, when dissected with `frames=True` |

Column definitions: `docs/schema.md`.
"""),
        md(SETUP_MD),
        code(SETUP),
        code("""
t = amqpcap.load(CAPTURES / "rabbitmq091_pika_full.pcap", cache_dir=CACHE)
print("source:", t.source)
for name in ["connections", "methods", "messages", "anomalies", "frames"]:
    print(f"{name:12s} {len(getattr(t, name)):5d} rows")"""),
        md("""
## Connections

One row per TCP conversation: who talked to whom, which protocol version was negotiated,
the tune values and how the connection ended.
"""),
        code("""
t.connections[["tcp_stream", "client_ip", "client_port", "server_ip", "server_port", "version",
               "server_product", "server_product_version", "user", "vhost",
               "channel_max", "frame_max", "heartbeat", "closed_by", "close_reply_code"]]"""),
        md("""
## Methods

Every method frame, in wire order. `frame_number` is the packet number in the capture
(the same number Wireshark shows), `direction` is `c2s` (client → server) or `s2c`.
Which methods appear, and how often:
"""),
        code("""
m = t.methods
m.groupby(["direction", "method"]).size().rename("count").reset_index().sort_values(["direction", "count"], ascending=[True, False])"""),
        md("""
### Filtering methods by name and channel

The tables are plain pandas DataFrames, so filtering is ordinary boolean indexing.
All `basic.publish` methods on channel 2 (the channel in confirm mode):
"""),
        code("""
cols = ["frame_number", "ts", "direction", "channel", "method", "exchange", "routing_key", "mandatory"]
m[(m["method"] == "basic.publish") & (m["channel"] == 2)][cols]"""),
        md("Everything that happened on one channel, in order, and methods matching a pattern:"),
        code("""
m[m["channel"] == 4][["frame_number", "direction", "method", "queue", "exchange", "reply_code", "reply_text"]]"""),
        code("""
m[m["method"].str.startswith("queue.")][["frame_number", "channel", "direction", "method", "queue", "message_count", "consumer_count"]]"""),
        md("""
## Messages and their properties

`messages` has one row per content-carrying method with the decoded basic properties
(`content_type`, `delivery_mode`, `correlation_id`, `reply_to`, `message_id`, `headers`, …),
the declared `body_size` and a `body_hash`.
"""),
        code("""
msg = t.messages
msg[["frame_number", "direction", "channel", "method", "exchange", "routing_key", "content_type",
     "delivery_mode", "priority", "message_id", "correlation_id", "reply_to", "body_size"]].head(15)"""),
        md(
            "Messages that carry application headers, and the largest body (a 300 KiB publish split over several body frames):"
        ),
        code("""
with_headers = msg[msg["headers"].notna()]
print(len(with_headers), "messages with headers")
with_headers[["frame_number", "method", "routing_key", "headers"]].head()"""),
        code("""
msg.sort_values("body_size", ascending=False)[["frame_number", "first_frame_number", "last_frame_number", "method", "body_size", "body_frames", "complete"]].head(3)"""),
        md("""
## Anomalies

Anything the dissector flagged: malformed frames, gaps in the TCP stream, unknown
methods… A clean capture has none.
"""),
        code("""
print(len(t.anomalies), "anomalies")
t.anomalies.head()"""),
        md("""
## One packet in scapy

For packet-level work, `import amqpcap.scapy` teaches scapy AMQP: each frame is a layer named
after its method, with the specification's field names. Packet 8 of the capture (index 7) is
the client's `connection.start-ok`; its password is redacted as in the tables (the user stays),
unless `amqpcap.scapy.keep_secrets()` is called (or `with keep_secrets():` for a block):
"""),
        code("""
import amqpcap.scapy
from amqpcap.scapy import AMQP
from scapy.all import rdpcap

pkt = rdpcap(str(CAPTURES / "rabbitmq091_pika_full.pcap"))[7]
pkt[AMQP].show()
print(pkt[AMQP].method, pkt[AMQP].fields["mechanism"].decode())"""),
        md("## Summary\n\nThe same numbers `amqpcap stats` prints:"),
        code("""
s = A.stats(t)
print(A.render_text(s, t))"""),
        code("""
print(f"SUMMARY connections={len(t.connections)} methods={len(t.methods)} messages={len(t.messages)} "
      f"publishes={int((t.methods['method'] == 'basic.publish').sum())} anomalies={len(t.anomalies)}")"""),
    ]


def latency():
    return [
        md("""
# 02 — Latency: round trips, confirms, acks, transit and RPC

Uses `rabbitmq091_pika_throughput.pcap`: a consumer connection (prefetch 50, acking
every 10th delivery with `multiple`) and a publisher connection sending 1200 messages,
every 100th an RPC request (`reply_to` + `correlation_id`) answered by the consumer.

Every pairing returns one row per request with `request_frame` / `response_frame`
(packet numbers), timestamps and `latency_ms`. Definitions: `docs/analysis.md`.
"""),
        md(SETUP_MD),
        code("%matplotlib inline\nimport matplotlib.pyplot as plt\n\n" + SETUP),
        code('''
t = amqpcap.load(CAPTURES / "rabbitmq091_pika_throughput.pcap", cache_dir=CACHE)
PCTS = [0.5, 0.9, 0.99]

def pct(df, col="latency_ms"):
    """count and percentiles (ms) of a latency column, unanswered rows dropped."""
    return df[col].dropna().describe(percentiles=PCTS)[["count", "min", "50%", "90%", "99%", "max"]]'''),
        md("""
## Method round trips

Synchronous requests (`queue.declare` → `queue.declare-ok`, `basic.consume` → `consume-ok`, …)
paired with their answer from the peer.
"""),
        code("""
rtt = A.method_rtt(t)
rtt.groupby(["request_method", "status"])["latency_ms"].describe(percentiles=PCTS)[["count", "50%", "90%", "max"]]"""),
        md("""
## Consumer acks

Each `basic.deliver` is outstanding until the consumer's `basic.ack` covers it. With
`multiple=true` acks every 10 deliveries, the first of each batch waits longest.
"""),
        code("""
acks = A.consumer_acks(t)
print(acks["outcome"].value_counts().to_string())
pct(acks)"""),
        md("""
## Publisher confirms

This capture does not use confirm mode, so the table is empty; see `03_errors.ipynb` for
a capture with acks and nacks. On a capture with confirms, `outcome` is `ack`, `nack` or `unconfirmed`.
"""),
        code("""
conf = A.confirms(t)
print(len(conf), "confirm rows")
conf.head()"""),
        md("""
## Broker transit

A publish matched to its delivery (by `message_id`, else exchange + routing key + body hash):
the time the message spent inside the broker, as seen on the wire.
"""),
        code("""
tr = A.transit(t)
print(tr["match"].value_counts().to_string())
pct(tr)"""),
        md("""
## Application RPC

Requests with `reply_to` + `correlation_id`, paired with the reply published to the
`reply_to` queue. `latency_ms` is until the responder's publish; `client_latency_ms`
until the reply is delivered back to the requester.
"""),
        code("""
r = A.rpc(t)
print(r["status"].value_counts().to_string())
r[["correlation_id", "reply_to", "request_frame", "response_frame", "delivered_frame", "latency_ms", "client_latency_ms"]].head()"""),
        md("## Percentiles side by side"),
        code("""
summary = pd.DataFrame({
    "method round trip": pct(rtt),
    "consumer ack": pct(acks),
    "broker transit": pct(tr),
    "rpc (responder)": pct(r),
    "rpc (client)": pct(r, "client_latency_ms"),
}).T
summary"""),
        md("## Histogram of broker transit time"),
        code("""
fig, ax = plt.subplots(figsize=(8, 4))
ax.hist(tr["latency_ms"].dropna(), bins=50, color="tab:blue")
ax.axvline(tr["latency_ms"].quantile(0.99), color="tab:red", linestyle="--", label="p99")
ax.set_xlabel("broker transit, publish → deliver (ms)")
ax.set_ylabel("messages")
ax.set_title("rabbitmq091_pika_throughput: transit time")
ax.legend()
plt.show()"""),
        code("""
print(f"SUMMARY transit={len(tr)} acks={len(acks)} rpc={len(r)} rpc_ok={int(r['status'].isin(['ok', 'ok-delivery']).sum())} "
      f"confirms={len(conf)} rtt={len(rtt)}")"""),
    ]


def errors():
    return [
        md("""
# 03 — Errors: channel closes, returns, nacks

`A.errors(t)` lists every failure in capture order: `connection.close` / `channel.close`
with an error code, `basic.return` (unroutable mandatory publish, 312 NO_ROUTE),
publisher and consumer `basic.nack` / `basic.reject`, and for AMQP 0-10 execution
exceptions, rejects and detaches. `failing_method` says what the peer objected to.
"""),
        md(SETUP_MD),
        code(SETUP),
        code("""
t = amqpcap.load(CAPTURES / "rabbitmq091_pika_full.pcap", cache_dir=CACHE)
err = A.errors(t)
err[["frame_number", "ts", "direction", "channel", "kind", "method", "code", "name", "class", "failing_method", "text"]]"""),
        md("## Errors by kind and code"),
        code("""
err.groupby(["kind", "code", "name"], dropna=False).size().rename("count").reset_index()"""),
        md("""
## Channel errors (404, 406, 403)

The broker closed channel 4 three times: a passive declare of a missing queue (404
NOT_FOUND), a redeclare with different arguments (406 PRECONDITION_FAILED) and a
reserved `amq.` exchange name (403 ACCESS_REFUSED). The failing request and the close
are both in `method_rtt` with `status == "error"`:
"""),
        code("""
closes = err[err["kind"] == "channel-close"]
rtt = A.method_rtt(t)
rtt[rtt["status"] == "error"][["request_method", "request_frame", "response_method", "response_frame", "latency_ms"]]"""),
        md("""
## Publisher confirms: acks and nacks

Channel 2 is in confirm mode; two publishes were nacked (`x-overflow: reject-publish` on a
full queue).
"""),
        code("""
conf = A.confirms(t)
print(conf["outcome"].value_counts().to_string())
conf[["delivery_tag", "request_frame", "response_frame", "response_method", "outcome", "routing_key", "latency_ms"]]"""),
        md("""
## Finding the packets in Wireshark

`frame_number` is Wireshark's packet number. A display filter that selects exactly the
failure packets (paste it into Wireshark, or use `tshark -Y`):
"""),
        code("""
frames = sorted(int(f) for f in err["frame_number"].dropna())
wireshark_filter = "frame.number in {" + " ".join(map(str, frames)) + "}"
print(wireshark_filter)
print("tshark -r captures/rabbitmq091_pika_full.pcap -Y '" + wireshark_filter + "'")"""),
        md("""
## AMQP 0-10 (Qpid)

The same table for the 0-10 capture: codes come from the 0-10 tables of the method
(here a `message.reject` with its reject code).
"""),
        code("""
q = amqpcap.load(CAPTURES / "qpid010_basic.pcap", cache_dir=CACHE)
qerr = A.errors(q)
qerr[["frame_number", "channel", "version", "kind", "method", "code", "name", "failing_method", "text"]]"""),
        code("""
counts = err["kind"].value_counts()
codes = sorted(int(c) for c in closes["code"])
print(f"SUMMARY channel_close_codes={codes} returns={int(counts.get('return', 0))} "
      f"confirm_ack={int((conf['outcome'] == 'ack').sum())} confirm_nack={int((conf['outcome'] == 'nack').sum())} "
      f"qpid_errors={len(qerr)}")"""),
    ]


def throughput():
    return [
        md("""
# 04 — Throughput over time

`A.throughput(t, bucket=..., by=...)` counts messages, body bytes, frames and wire bytes
per time bucket and direction, grouped by `connection`, `channel`, `exchange`,
`routing_key`, `queue` or `total`. Uses `rabbitmq091_pika_throughput.pcap`
(1200 publishes plus their deliveries and the RPC traffic).
"""),
        md(SETUP_MD),
        code("%matplotlib inline\nimport matplotlib.pyplot as plt\n\n" + SETUP),
        code("""
t = amqpcap.load(CAPTURES / "rabbitmq091_pika_throughput.pcap", cache_dir=CACHE)
start, end = t.methods["ts"].min(), t.methods["ts"].max()
print("capture spans", end - start)"""),
        md("""
## By exchange

Buckets of 100 ms. `frames` / `wire_bytes` are estimated when the capture was not dissected
with `frames=True` (`attrs["frames_source"]` says which).
"""),
        code("""
tp_ex = A.throughput(t, bucket="100ms", by="exchange")
print("frames source:", tp_ex.attrs.get("frames_source"))
tp_ex.groupby(["exchange", "direction"], dropna=False)[["messages", "body_bytes", "frames", "wire_bytes"]].sum()"""),
        md("## By routing key"),
        code("""
tp_rk = A.throughput(t, bucket="100ms", by="routing_key")
tp_rk.groupby(["routing_key", "direction"], dropna=False)[["messages", "body_bytes"]].sum()"""),
        md("""
## Plot: messages per second by routing key and direction

Pivot the long table into one column per (routing key, direction) and scale the
100 ms counts to a per-second rate. `throughput` lists only non-empty buckets:
reindex over every bucket with zeros, or a step plot draws a flat line across a
pause (bursty traffic would look steady).
"""),
        code("""
bucket_s = 0.1
wide = (tp_rk.assign(series=tp_rk["routing_key"].fillna("(none)") + " " + tp_rk["direction"])
        .pivot_table(index="bucket", columns="series", values="messages", aggfunc="sum", fill_value=0)
        / bucket_s)
every = pd.date_range(wide.index.min(), wide.index.max(), freq="100ms")  # a small capture: every bucket
wide = wide.reindex(every, fill_value=0)
elapsed = (wide.index - wide.index.min()).total_seconds()
fig, ax = plt.subplots(figsize=(9, 4))
for col in wide.columns:
    ax.plot(elapsed, wide[col], drawstyle="steps-post", label=col)
ax.set_xlabel("time since first bucket (s)")
ax.set_ylabel("messages per second")
ax.set_title("rabbitmq091_pika_throughput: message rate by routing key")
ax.legend(fontsize="small")
plt.show()"""),
        md("## Totals per connection, and bytes over time"),
        code("""
tp_conn = A.throughput(t, bucket="1s", by="connection")
tp_conn.groupby(["tcp_stream", "direction"])[["messages", "body_bytes", "frames", "wire_bytes"]].sum()"""),
        code("""
tot = A.throughput(t, bucket="100ms", by="total")
wb = tot.pivot_table(index="bucket", columns="direction", values="wire_bytes", aggfunc="sum", fill_value=0) / bucket_s / 1024
wb = wb.reindex(pd.date_range(wb.index.min(), wb.index.max(), freq="100ms"), fill_value=0)  # pauses: zeros
fig, ax = plt.subplots(figsize=(9, 3))
wb.set_index((wb.index - wb.index.min()).total_seconds()).plot(ax=ax, drawstyle="steps-post")
ax.set_xlabel("time since first bucket (s)")
ax.set_ylabel("wire KiB per second")
ax.set_title("AMQP wire bytes per direction")
plt.show()"""),
        code("""
by_dir = tot.groupby("direction")["messages"].sum()
print(f"SUMMARY messages_c2s={int(by_dir.get('c2s', 0))} messages_s2c={int(by_dir.get('s2c', 0))} "
      f"publishes={int((t.messages['method'] == 'basic.publish').sum())}")"""),
    ]


def spark_local_cells():
    """Notebook 05: the session, the cluster's start and the local-mode run."""
    return [
        md("""
# 05 — Spark: the dissect job and Spark SQL

`amqpcap.spark.run(spark, inputs, out)` dissects captures in Spark tasks into the same
tables `amqpcap dissect` writes (same schema, same rows). Here on all the bundled captures,
three ways: in local mode, on a standalone cluster (a master and two workers started on this
machine's loopback, as a cluster's nodes start them) and with the captures and the dataset on
S3 (an S3 API server on loopback: moto's). Only the session and the URIs change.
`amqpcap.spark.stats(spark, out)` (`amqpcap stats OUT --spark`) computes the whole `stats`
report with Spark jobs.

Needs Java 17+ and `pip install -e '.[spark,test]'` (pyspark; moto's S3 server and boto3).
"""),
        code("""
import atexit
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark

from amqpcap.spark import run, session

CAPTURES = Path("..") / "captures"
WORK = Path(tempfile.mkdtemp(prefix="amqpcap-nb05-"))
spark = session.build("local[2]", app="amqpcap notebook", quiet=True,  # the JVM's chatter to a log file
                      conf={"spark.sql.shuffle.partitions": "4", "spark.local.dir": str(WORK / "spark")})
spark.conf.get("spark.sql.session.timeZone")  # times shown in UTC"""),
        md("""
## A cluster to run on later

A master and two one-core workers, started from pyspark's own `bin/spark-class` on
loopback (on a real cluster each node runs its part, e.g. `sbin/start-master.sh` and
`sbin/start-worker.sh spark://head:7077`). They start in the background while local mode
runs below.
"""),
        code("""
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, ready, procs, timeout=180):
    t0 = time.monotonic()
    while not ready():
        if any(p.poll() is not None for p in procs) or time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.5)


SPARK_HOME = os.path.dirname(pyspark.__file__)
node_env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_JAVA_OPTS=session.JVM_FLAGS,
                SPARK_LOG_DIR=str(WORK / "cluster"), SPARK_WORKER_DIR=str(WORK / "cluster" / "work"))
(WORK / "cluster").mkdir()
node_log = WORK / "cluster" / "nodes.log"
spark_class = os.path.join(SPARK_HOME, "bin", "spark-class")
port = free_port()
master_url = f"spark://127.0.0.1:{port}"
with open(node_log, "w") as log:
    nodes = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(free_port())],
                              env=node_env, stdout=log, stderr=subprocess.STDOUT)]
    nodes += [subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                                "--cores", "1", "--memory", "1g", "--webui-port", str(free_port())],
                               env=node_env, stdout=log, stderr=subprocess.STDOUT) for _ in range(2)]
atexit.register(lambda: [p.terminate() for p in nodes if p.poll() is None])  # even if a cell below fails
master_url"""),
        md("""
## Local mode

Small captures are packed into tasks; `split_size` is tiny here so the captures above
200 kB are indexed by byte range in parallel and dissected conversation by conversation,
as a huge capture would be.
"""),
        code("""
out = str(WORK / "out")
summary = run(spark, [str(CAPTURES)], out, split_size=200_000, frames=True)
print(f"{summary.captures} captures, {summary.tasks} tasks, split: {summary.split}")
summary.rows"""),
    ]


def spark_sql_cells():
    """Notebook 05: the local dataset explored with Spark SQL."""
    return [
        md("## Explore with Spark SQL"),
        code('''
for name in ("connections", "methods", "messages", "anomalies", "frames"):
    spark.read.parquet(f"{out}/{name}").createOrReplaceTempView(name)
spark.sql("""
    SELECT version, count(*) AS connections, sum(frames_c2s + frames_s2c) AS frames
    FROM connections GROUP BY version ORDER BY version""").toPandas()'''),
        code('''
spark.sql("""
    SELECT method, count(*) AS n FROM methods
    GROUP BY method ORDER BY n DESC, method LIMIT 10""").toPandas()'''),
        md("""
Every time column is a Spark `TIMESTAMP` (microseconds, UTC), so `window`, `date_trunc` and
the other time functions take it as it is: publishes per second.
"""),
        code('''
spark.sql("""
    SELECT window.start AS second, count(*) AS publishes FROM messages
    WHERE method = 'basic.publish'
    GROUP BY window(ts, '1 second') ORDER BY publishes DESC, second LIMIT 5""").toPandas()'''),
        md("""
The nanoseconds past the microsecond are in `X_nanos` beside each time column `X`:
`unix_micros(X) * 1000 + X_nanos` is the exact time in ns, and differences are exact. Here,
per connection, the time from the first packet to `connection.open-ok` and the publish count.
"""),
        code('''
spark.sql("""
    SELECT c.capture, c.tcp_stream,
           ((unix_micros(c.open_ts) * 1000 + c.open_ts_nanos) - (unix_micros(c.ts) * 1000 + c.ts_nanos)) / 1e6
               AS open_ms,
           count_if(m.method = 'basic.publish') AS publishes
    FROM connections c LEFT JOIN methods m ON m.capture = c.capture AND m.tcp_stream = c.tcp_stream
    GROUP BY c.capture, c.tcp_stream, c.open_ts, c.open_ts_nanos, c.ts, c.ts_nanos
    ORDER BY publishes DESC, c.capture, c.tcp_stream LIMIT 8""").toPandas()'''),
        md("""
Heartbeats are only in the `frames` table (written with `frames=True`): the longest silence
between two frames of a direction, per connection that negotiated a heartbeat.
"""),
        code('''
spark.sql("""
    WITH n AS (SELECT capture, tcp_stream, direction, unix_micros(ts) * 1000 + ts_nanos AS ns FROM frames),
         f AS (SELECT capture, tcp_stream, direction,
                      ns - lag(ns) OVER (PARTITION BY capture, tcp_stream, direction ORDER BY ns) AS gap
               FROM n)
    SELECT f.capture, f.tcp_stream, f.direction, c.heartbeat, max(f.gap) / 1e9 AS longest_silence_s
    FROM f JOIN connections c USING (capture, tcp_stream)
    WHERE c.heartbeat > 0
    GROUP BY f.capture, f.tcp_stream, f.direction, c.heartbeat
    ORDER BY longest_silence_s DESC LIMIT 6""").toPandas()'''),
        code('''
n = spark.sql("""SELECT (SELECT count(*) FROM connections) AS connections, (SELECT count(*) FROM methods) AS methods,
                        (SELECT count(*) FROM frames) AS frames,
                        (SELECT count(*) FROM messages WHERE method = 'basic.publish') AS publishes""").first()
print(f"SUMMARY connections={n.connections} methods={n.methods} frames={n.frames} publishes={n.publishes} "
      f"tasks={summary.tasks} split={len(summary.split)}")
spark.stop()'''),
    ]


def spark_elsewhere_cells():
    """Notebook 05: the same job on the standalone cluster and on S3; everything stopped."""
    return [
        md("""
## A standalone cluster

Reached at `master_url` once its nodes have registered with it. Executors need amqpcap and
pyarrow: here they run this notebook's Python (`spark.pyspark.python`); on other machines,
install the wheel on every node or ship a packed virtual environment (README, Spark).
"""),
        code("""
def workers():  # a worker that hears nothing back in time registers again: count addresses
    return set(re.findall(r"Registering worker (\\S+)", node_log.read_text()))


wait_for("the cluster", lambda: len(workers()) >= 2, nodes)
print(master_url, "with", len(workers()), "workers")"""),
        code("""
spark = session.build(master_url, app="amqpcap notebook", quiet=True,
                      conf={"spark.pyspark.python": sys.executable, "spark.sql.shuffle.partitions": "4",
                            "spark.executor.extraJavaOptions": session.JVM_FLAGS})
cluster_out = str(WORK / "cluster-out")
on_cluster = run(spark, [str(CAPTURES)], cluster_out, split_size=200_000, frames=True)
print(f"{spark.sparkContext.master}: {on_cluster.captures} captures, {on_cluster.tasks} tasks, "
      f"{len(on_cluster.split)} split, the same rows as local mode: {on_cluster.rows == summary.rows}")
on_cluster.rows"""),
        md("""
## S3

Inputs and the output as `s3://` URIs, opened through `pyarrow.fs` by the driver and the
tasks alike; the endpoint and credentials come from the standard AWS environment, so the same
code reaches AWS, MinIO or Ceph. Here an S3 API server on loopback (moto's standalone server)
holds a bucket with the captures, and the job runs on the cluster above.
"""),
        code("""
import boto3

s3_port = free_port()
s3_server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
atexit.register(lambda: s3_server.poll() is None and s3_server.terminate())
os.environ.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{s3_port}", AWS_ACCESS_KEY_ID="testing",
                  AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1")


def listening():
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", s3_port)) == 0


wait_for("the S3 server", listening, [s3_server], timeout=60)
s3 = boto3.client("s3")
s3.create_bucket(Bucket="amqpcap")
for p in sorted(CAPTURES.glob("*.pcap")):
    s3.upload_file(str(p), "amqpcap", f"captures/{p.name}")
print(len(s3.list_objects_v2(Bucket="amqpcap", Prefix="captures/")["Contents"]), "captures in s3://amqpcap/captures/")"""),
        code("""
on_s3 = run(spark, ["s3://amqpcap/captures/"], "s3://amqpcap/datasets/all", split_size=200_000, frames=True)
keys = [o["Key"] for o in s3.list_objects_v2(Bucket="amqpcap", Prefix="datasets/all/")["Contents"]]
print(f"{on_s3.captures} captures, {on_s3.tasks} tasks, {len(on_s3.split)} split, the same rows as local mode: "
      f"{on_s3.rows == summary.rows}; {len(keys)} objects written, _SUCCESS last: {'datasets/all/_SUCCESS' in keys}")
on_s3.rows"""),
        md("""
Any S3-aware reader takes the dataset from there, e.g. pyarrow (`spark.read.parquet("s3a://...")`
works too where Spark has the `hadoop-aws` jars):
"""),
        code("""
import pyarrow.dataset as ds

methods = ds.dataset("s3://amqpcap/datasets/all/methods", format="parquet").to_table(columns=["version", "method"])
methods.group_by("version").aggregate([("method", "count")]).to_pandas()"""),
        md("Stop what this notebook started: the session, the cluster's nodes and the S3 server."),
        code("""
spark.stop()
for p in [*nodes, s3_server]:
    p.terminate()
codes = [p.wait(30) for p in [*nodes, s3_server]]
print(f"SUMMARY cluster_rows={sum(on_cluster.rows.values())} s3_rows={sum(on_s3.rows.values())} "
      f"local_rows={sum(summary.rows.values())} cluster_tasks={on_cluster.tasks} s3_captures={on_s3.captures} "
      f"stopped={sum(c is not None for c in codes)}/{len(codes)}")"""),
    ]


def spark_job():
    return spark_local_cells() + spark_sql_cells() + spark_elsewhere_cells()


def amqp10_settlement_cells():
    """Notebook 06: a 1.0 capture's tables, settlement latency and outcomes."""
    return [
        md("""
# 06 — AMQP 1.0: settlement, outcomes, errors, link credit, liveness

AMQP 1.0 has no `basic.publish` or `basic.ack`: a sender **transfers** a delivery on a link, the
receiver **settles** it with a **disposition** that carries its outcome (`accepted`, `rejected`
with an error, `released`, `modified`), and the sender may only send while the receiver has
granted it **link credit** (`flow`). The tables keep one methods row per performative (with
`link_name`, `delivery_id`, `settled`, `outcome`, `condition`, `link_credit`, ...) and one
messages row per delivery, its transfers reassembled. This notebook reads the 1.0 captures
recorded against RabbitMQ's 1.0 plugin with two client libraries (rhea, Qpid Proton; the
`.truth.json` beside each capture is what the client itself logged; `captures/README.md`):

| capture | shows |
|---|---|
| `rabbitmq10_rhea_outcomes.pcap` | a publisher (one link pre-settled), consumers that accept, reject, release and modify |
| `rabbitmq10_rhea_errors.pcap`, `rabbitmq10_proton_errors.pcap` | a refused login, links to a missing queue / exchange and a bad address |
| `rabbitmq10_rhea_multiplex.pcap` | two sessions on one connection, a receiver attached with no credit while messages wait, a drain, idle-time-out 1 s |
| `rabbitmq10_proton_pika.pcap` | a 1.0 publisher and a 0-9-1 consumer of one queue |

Definitions: `docs/analysis.md` (AMQP 1.0 links and liveness; `stats`' `settlement`, `outcomes`, `errors`).
"""),
        md(SETUP_MD),
        code("%matplotlib inline\nimport matplotlib.pyplot as plt\n\n" + SETUP),
        code("""
t = amqpcap.load(CAPTURES / "rabbitmq10_rhea_outcomes.pcap", cache_dir=CACHE)
t.connections[["tcp_stream", "version", "client_container_id", "server_container_id", "server_product",
               "server_product_version", "mechanism", "user", "frame_max", "client_idle_timeout_ms",
               "server_idle_timeout_ms", "closed_by"]]"""),
        md("""
## Links and deliveries

An `attach` names a link and its role; every later performative of the link carries its
`link_name`. The deliveries each link carried, and how they ended:
"""),
        code("""
m = t.methods
m[m["method"] == "attach"][["frame_number", "tcp_stream", "direction", "handle", "link_name", "role", "source", "target"]]"""),
        code("""
m[m["method"].isin(["transfer", "disposition"])][
    ["frame_number", "tcp_stream", "direction", "method", "link_name", "delivery_id", "id_ranges", "settled",
     "outcome", "condition"]].head(12)"""),
        md("""
## Settlement latency, per link and per outcome

`A.settlement(t)`: one row per delivery, from its first transfer to the disposition that
settles it. Deliveries sent settled (`presettled`, the `rhea-presettled-sender` link) have no
latency; deliveries never settled in the capture have none either. `A.stats(t)` summarises the
same values (`latency.settlement`, with `by_link` and `by_outcome`).
"""),
        code("""
s = A.settlement(t)
s[["tcp_stream", "direction", "link_name", "delivery_id", "outcome", "condition", "presettled", "settled",
   "latency_ms"]]"""),
        code("""
st = A.stats(t)
lat = st["latency"]["settlement"]
by = pd.concat({"link": pd.DataFrame(lat["by_link"]).T, "outcome": pd.DataFrame(lat["by_outcome"]).T})
by[["count", "p50_ms", "p90_ms", "max_ms"]]"""),
        code("""
colors = {"accepted": "tab:green", "rejected": "tab:red", "released": "tab:orange", "modified": "tab:purple"}
timed = s[s["latency_ms"].notna()]
links = sorted(timed["link_name"].unique())
fig, ax = plt.subplots(figsize=(9, 3.5))
for outcome, g in timed.groupby("outcome"):
    ax.scatter(g["latency_ms"], g["link_name"].map(links.index), label=outcome, color=colors.get(outcome, "grey"),
               s=40, alpha=0.8)
ax.set_yticks(range(len(links)), links)
ax.set_xscale("log")
ax.set_xlabel("settlement latency: first transfer → settling disposition (ms, log)")
ax.set_title("rabbitmq10_rhea_outcomes: settlement per link and outcome")
ax.legend(fontsize="small")
ax.grid(True, axis="x", alpha=0.3)
plt.show()"""),
        md("""
The sender's deliveries (c2s) are settled by the broker within a millisecond; the broker's
deliveries to the consumers (s2c) wait for the application, and the `modified` one for the
consumer's own timer.

## Outcomes by direction

`stats`' `outcomes`: per direction (`c2s`: the client's deliveries, settled by the broker;
`s2c`: the broker's, settled by the client), the count of each outcome, of deliveries sent
settled and of those never settled in the capture (here two: their session was ended by the
broker first).
"""),
        code("""
outcomes = pd.DataFrame(st["outcomes"]).T
outcomes"""),
        code("""
shades = {**colors, "received": "tab:olive", "pre-settled": "tab:blue", "unsettled": "tab:grey"}
fig, ax = plt.subplots(figsize=(8, 2.8))
left = pd.Series(0, index=outcomes.index)
for col in outcomes.columns:
    if outcomes[col].sum():
        ax.barh(outcomes.index, outcomes[col], left=left, label=col, color=shades[col])
        left += outcomes[col]
ax.set_xlabel("deliveries")
ax.set_title("outcomes by direction (c2s: settled by the broker, s2c: by the client)")
ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
plt.show()"""),
    ]


def amqp10_errors_cells():
    """Notebook 06: error conditions of two clients' failing links and logins."""
    return [
        md("""
## Errors: conditions

An AMQP 1.0 error is a **condition** (a symbol such as `amqp:not-found`) with a description,
carried by the performative that ends something (`close`, `end`, `detach`) or by a
`rejected` outcome; a refused login is a SASL outcome code. The methods table has them in
`condition` and `reply_text`; `A.stats(t)["errors"]` groups them (items of `kind` `amqp-1.0`)
next to the TCP resets.
"""),
        code("""
errs = []
for name in ["rabbitmq10_rhea_errors.pcap", "rabbitmq10_proton_errors.pcap"]:
    e = amqpcap.load(CAPTURES / name, cache_dir=CACHE)
    for item in A.stats(e)["errors"]:
        errs.append({"capture": name, "kind": item["kind"], "condition": item.get("condition"),
                     "method": item["method"], "count": item["count"], "first_frame": item["first_frame"]})
    em = e.methods
    print(name)
    print(em[em["condition"].notna()][["frame_number", "tcp_stream", "direction", "channel", "method", "condition",
                                          "reply_text"]].to_string(max_colwidth=50), "\\n")
errs = pd.DataFrame(errs)
errs"""),
        code("""
by_cond = (errs[errs["kind"] == "amqp-1.0"]
           .pivot_table(index="condition", columns="capture", values="count", aggfunc="sum", fill_value=0))
fig, ax = plt.subplots(figsize=(8, 3))
by_cond.plot.barh(ax=ax)
ax.set_xlabel("occurrences")
ax.set_ylabel("")
ax.set_title("AMQP 1.0 error conditions (sasl:auth: a refused login)")
ax.legend(fontsize="small")
plt.show()"""),
    ]


def amqp10_links_cells():
    """Notebook 06: link credit, drain and liveness of one multiplexed connection."""
    return [
        md("""
## Link credit and stalls

`A.credit_stalls(t)` walks each link's credit over its attach, flow and transfer rows and
lists every period the sender had **zero credit**; `backlog` is the largest `available` the
sender reported meanwhile (messages it had and could not send): `stalled` when it is above
zero. `A.drains(t)` lists the drain cycles. In `rabbitmq10_rhea_multiplex.pcap` a receiver
attaches with no credit while 4 messages wait, grants 2, then 5 with drain.
"""),
        code("""
mx = amqpcap.load(CAPTURES / "rabbitmq10_rhea_multiplex.pcap", cache_dir=CACHE, frames=True)
fm = mx.methods
fm[fm["method"] == "flow"][["frame_number", "direction", "channel", "link_name", "link_credit", "delivery_count",
                            "drain", "available"]]"""),
        code("""
stalls = A.credit_stalls(mx)
stalls[["link_name", "sender", "cause", "start_frame", "end_frame", "duration_ms", "status", "backlog", "stalled"]]"""),
        code("""
drains = A.drains(mx)
drains[["link_name", "request_frame", "credit", "available", "deliveries", "end_frame", "duration_ms", "status"]]"""),
        code("""
t0 = mx.connections["ts"].min()
names = sorted(stalls["link_name"].unique())
fig, ax = plt.subplots(figsize=(9, 3))
for r, waiting in zip(stalls.itertuples(), stalls["stalled"].fillna(False)):  # (null: not reported)
    start = (r.start_ts - t0).total_seconds()
    width = max(r.duration_ms / 1000, 0.01)  # (a few ms: still visible)
    ax.broken_barh([(start, width)], (names.index(r.link_name) - 0.35, 0.7), color="tab:red" if waiting else "tab:grey")
ax.set_yticks(range(len(names)), names)
ax.set_xlabel("time since the first packet (s)")
ax.set_title("zero-credit periods per link (red: the sender had messages waiting)")
ax.grid(True, axis="x", alpha=0.3)
plt.show()"""),
        md("""
## Liveness: empty frames against the idle-time-out

Each peer's `open` states the longest silence it accepts (`idle-time-out`); here the client
asked for 1 s, so the broker sends **empty frames** (1.0 heartbeats) while the connection
idles. `A.idle_gaps(t)` lists the silences over the idle-time-out (`missed`: over two, past
the peer's limit); with `all_gaps=True` every silence. Dissected with `frames=True`, every
frame is evidence (`evidence == "frames"`).
"""),
        code("""
print("empty frames by direction:", mx.frames[mx.frames["type_name"] == "heartbeat"].groupby("direction").size().to_dict())
late = A.idle_gaps(mx)
print(len(late), "silences over the idle-time-out")
gaps = A.idle_gaps(mx, all_gaps=True)
gaps.groupby(["direction", "idle_timeout_ms", "evidence"])["gap_s"].describe()[["count", "50%", "max"]]"""),
        code("""
server = gaps[gaps["direction"] == "s2c"]
idle_s = server["idle_timeout_ms"].iloc[0] / 1000
fig, ax = plt.subplots(figsize=(9, 3))
ax.plot((server["end_ts"] - t0).dt.total_seconds(), server["gap_s"], "o", ms=4, label="the broker's silences")
ax.axhline(idle_s, color="tab:orange", linestyle="--", label="idle-time-out the client asked for")
ax.axhline(2 * idle_s, color="tab:red", linestyle=":", label="missed (2 x)")
ax.set_xlabel("time since the first packet (s)")
ax.set_ylabel("silence (s)")
ax.set_title("rabbitmq10_rhea_multiplex: the broker's silences, empty frames included")
ax.legend(fontsize="small", loc="upper left")
plt.show()"""),
    ]


def amqp10_transit_cells():
    """Notebook 06: a message's transit from a 1.0 publisher to a 0-9-1 consumer, the summary."""
    return [
        md("""
## Across protocols: a 1.0 publisher, a 0-9-1 consumer

RabbitMQ serves 1.0 and 0-9-1 on the same queues. In `rabbitmq10_proton_pika.pcap` Proton
sends 4 messages to `/amq/queue/amqpcap10-proton-cross` and pika takes them with `basic.get`;
`A.transit(t)` pairs each 1.0 `transfer` with the 0-9-1 `basic.get-ok` by message-id (the
broker hands the 1.0 message-id on as the 0-9-1 `message_id` property).
"""),
        code("""
x = amqpcap.load(CAPTURES / "rabbitmq10_proton_pika.pcap", cache_dir=CACHE)
versions = x.connections.set_index("tcp_stream")["version"].astype(str)
tr = A.transit(x)
tr = tr.assign(from_version=tr["tcp_stream"].map(versions), to_version=tr["response_tcp_stream"].map(versions))
tr[["message_id", "from_version", "request_method", "request_frame", "to_version", "response_method",
    "response_frame", "latency_ms", "match"]]"""),
        code("""
fig, ax = plt.subplots(figsize=(7, 2.6))
ax.barh(tr["message_id"], tr["latency_ms"], color="tab:blue")
ax.invert_yaxis()
ax.set_xlabel("broker transit (ms): 1.0 transfer → 0-9-1 basic.get-ok")
ax.set_title("rabbitmq10_proton_pika: one queue, two protocols")
plt.show()"""),
        code("""
conds = sorted(set(errs.loc[errs["kind"] == "amqp-1.0", "condition"]))
oc = st["outcomes"]
print(f"SUMMARY settled={lat['count']} s2c_accepted={oc['s2c']['accepted']} s2c_rejected={oc['s2c']['rejected']} "
      f"s2c_released={oc['s2c']['released']} s2c_modified={oc['s2c']['modified']} s2c_unsettled={oc['s2c']['unsettled']} "
      f"c2s_accepted={oc['c2s']['accepted']} c2s_presettled={oc['c2s']['pre-settled']} "
      f"conditions={conds} stalls={len(stalls)} stalled={int(stalls['stalled'].fillna(False).sum())} "
      f"drains={len(drains)} idle_late={len(late)} "
      f"empty_frames_s2c={int(((mx.frames['type_name'] == 'heartbeat') & (mx.frames['direction'] == 's2c')).sum())} "
      f"transit={len(tr)} transit_across={int((tr['from_version'] != tr['to_version']).sum())}")"""),
    ]


def amqp10():
    return amqp10_settlement_cells() + amqp10_errors_cells() + amqp10_links_cells() + amqp10_transit_cells()


NOTEBOOKS = {
    "01_quickstart.ipynb": quickstart,
    "02_latency.ipynb": latency,
    "03_errors.ipynb": errors,
    "04_throughput.ipynb": throughput,
    "05_spark.ipynb": spark_job,
    "06_amqp10.ipynb": amqp10,
}


def build(name: str) -> nbformat.NotebookNode:
    cells = NOTEBOOKS[name]()
    stem = name.split(".")[0]
    for i, c in enumerate(cells):
        c["id"] = f"{stem}-{i:02d}"  # deterministic ids: no drift between runs
    nb = new_notebook(cells=cells)
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


def render(name: str) -> str:
    nb = build(name)
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    NB_DIR.mkdir(exist_ok=True)
    drift = []
    for name in NOTEBOOKS:
        text = render(name)
        path = NB_DIR / name
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                drift.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print("wrote", path.relative_to(ROOT))
    if drift:
        print("out of date (run python tools/gen_notebooks.py):", ", ".join(drift))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
