"""pandas computations and matplotlib plots on the dissect tables.

    import amqpcap
    t = amqpcap.load("out/")                  # or a capture file: dissected to a cache
    from amqpcap import analysis as A
    A.method_rtt(t); A.confirms(t); A.consumer_acks(t); A.transit(t); A.rpc(t); A.connection_setup(t)
    A.throughput(t, bucket="1s", by="connection")
    A.errors(t); A.heartbeat_gaps(t); A.blocked(t); A.flow(t); A.unacked(t)
    s = A.stats(t); print(A.render_text(s, t)); A.write_report(t, "report/")

Definitions: docs/analysis.md.  Every function takes a ``Tables`` (or a path,
loaded on the fly).  The submodules ``errors`` and ``health`` are shadowed here
by their functions of the same name (``importlib.import_module`` reaches the
modules); ``stats`` is the submodule, callable as the function.
"""
# Import every submodule first, then bind the functions: binding after the imports
# keeps ``analysis.errors`` / ``analysis.health`` the functions, not the modules.
from amqpcap.analysis import errors as _errors_mod, health as _health_mod  # noqa: F401
from amqpcap.analysis import latency as _latency_mod, stats as _stats_mod, throughput as _tp_mod  # noqa: F401
from amqpcap.analysis.load import Tables, from_frames, load
from amqpcap.analysis.latency import (
    all_latencies, confirms, connection_setup, consumer_acks, consumers, method_rtt, rpc, transit,
)
from amqpcap.analysis.throughput import message_queues, throughput, totals
from amqpcap.analysis.errors import errors
from amqpcap.analysis.health import (
    blocked, flow, health, heartbeat_gaps, heartbeat_source, heartbeat_summary, unacked, zero_windows,
)
from amqpcap.analysis.stats import latency_summary, render_text

# ``stats`` stays the submodule, which is callable: ``analysis.stats(t)`` is the
# summary function and ``analysis.stats.render_text`` / ``analysis.stats.stats`` work too.
stats = _stats_mod


def write_report(t, out_dir, **kwargs) -> str:
    """Write the PNG figures and a self-contained ``index.html`` into ``out_dir``; return its path.

    See :func:`amqpcap.analysis.report.write_report` (imported lazily: matplotlib)."""
    from amqpcap.analysis.report import write_report as _write

    return _write(t, out_dir, **kwargs)


__all__ = [
    "Tables", "load", "from_frames",
    "method_rtt", "confirms", "consumer_acks", "transit", "rpc", "connection_setup", "consumers", "all_latencies",
    "throughput", "totals", "message_queues", "errors",
    "heartbeat_gaps", "heartbeat_summary", "heartbeat_source", "blocked", "flow", "unacked", "zero_windows", "health",
    "stats", "render_text", "latency_summary", "write_report",
]
