"""pandas computations and matplotlib plots on the dissect tables.

    import amqpcap
    t = amqpcap.load("out/")                  # or a capture file: dissected to a cache
    from amqpcap import analysis as A
    A.method_rtt(t); A.confirms(t); A.consumer_acks(t); A.transit(t); A.rpc(t); A.connection_setup(t)
    A.throughput(t, bucket="1s", by="connection")
    A.errors(t); A.heartbeat_gaps(t); A.blocked(t); A.flow(t); A.unacked(t)
    A.settlement(t); A.error_conditions(t)           # AMQP 1.0 deliveries and errors
    A.credit_stalls(t); A.drains(t); A.idle_gaps(t)   # AMQP 1.0 links and liveness
    s = A.stats(t); print(A.render_text(s, t)); A.write_report(t, "report/")

Definitions: docs/analysis.md.  Every function takes a ``Tables`` (or a path,
loaded on the fly).  The public API is the names in ``__all__``; the modules
behind them (``tables``, ``latency`` and the pairings it gathers: ``round_trips``,
``publisher_confirms``, ``deliveries``, ``acknowledgements``, ``message_transit``,
``rpc_replies``, ``pairing``; ``traffic``, ``failures``, ``connection_health``, ``summary``,
``report``) are named apart from the functions, so no function hides a module.
"""

from amqpcap.analysis.amqp10 import error_conditions, idle_gaps, settlement
from amqpcap.analysis.amqp10_credit import credit_stalls, drains
from amqpcap.analysis.connection_health import (
    blocked,
    flow,
    health,
    heartbeat_gaps,
    heartbeat_source,
    heartbeat_summary,
    unacked,
    zero_windows,
)
from amqpcap.analysis.failures import error_summary, errors
from amqpcap.analysis.latency import (
    all_latencies,
    confirms,
    connection_setup,
    consumer_acks,
    consumers,
    method_rtt,
    rpc,
    transit,
)
from amqpcap.analysis.summary import connections_table, latency_summary, render_text, stats, time_outliers
from amqpcap.analysis.tables import Tables, from_frames, load
from amqpcap.analysis.traffic import message_queues, throughput, totals


def write_report(t, out_dir, **kwargs) -> str:
    """Write the PNG figures and a self-contained ``index.html`` into ``out_dir``; return its path.

    See :func:`amqpcap.analysis.report.write_report` (imported lazily: matplotlib)."""
    from amqpcap.analysis.report import write_report as _write

    return _write(t, out_dir, **kwargs)


__all__ = [
    "Tables",
    "load",
    "from_frames",
    "method_rtt",
    "confirms",
    "consumer_acks",
    "transit",
    "rpc",
    "connection_setup",
    "consumers",
    "all_latencies",
    "throughput",
    "totals",
    "message_queues",
    "errors",
    "error_summary",
    "heartbeat_gaps",
    "heartbeat_summary",
    "heartbeat_source",
    "blocked",
    "flow",
    "unacked",
    "zero_windows",
    "health",
    "settlement",
    "error_conditions",
    "credit_stalls",
    "drains",
    "idle_gaps",
    "stats",
    "render_text",
    "latency_summary",
    "connections_table",
    "time_outliers",
    "write_report",
]
