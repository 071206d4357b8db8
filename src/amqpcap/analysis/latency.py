"""Latency pairings: one row per matched pair, ``latency_ms`` in milliseconds.

Every result frame has the keys to find both packets: ``capture``,
``tcp_stream``, ``channel``, ``request_frame`` / ``response_frame`` (packet
numbers, Wireshark ``frame.number``), ``request_ts`` / ``response_ts``,
``request_method`` / ``response_method``, and ``status`` / ``outcome``.
Unmatched requests are rows too, with NaN latency.  docs/analysis.md has the
exact definitions.

Each pairing lives in a module of its own: :mod:`round_trips` (method round trips, connection
setup), :mod:`publisher_confirms`, :mod:`deliveries` (consumers), :mod:`acknowledgements`
(consumer acks), :mod:`message_transit`, :mod:`rpc_replies`; :mod:`pairing` holds what they share.
This module gathers them by the kind names of the stats JSON.
"""

from __future__ import annotations

import pandas as pd

from amqpcap.analysis.acknowledgements import ACK_COLS, ACK_METHODS, consumer_acks
from amqpcap.analysis.deliveries import CONSUMER_COLS, consumers
from amqpcap.analysis.message_transit import TRANSIT_COLS, transit
from amqpcap.analysis.publisher_confirms import CONFIRM_COLS, CONFIRM_METHODS, confirms
from amqpcap.analysis.round_trips import RTT_COLS, SETUP_COLS, connection_setup, method_rtt
from amqpcap.analysis.rpc_replies import RPC_COLS, rpc
from amqpcap.analysis.tables import as_tables

__all__ = [
    "method_rtt",
    "confirms",
    "consumer_acks",
    "transit",
    "rpc",
    "connection_setup",
    "consumers",
    "all_latencies",
    "LATENCY_FUNCTIONS",
    "ACK_METHODS",
    "CONFIRM_METHODS",
    "RESULT_COLUMNS",
]

# every latency kind, keyed as in the stats JSON, and its pairing
LATENCY_FUNCTIONS = {
    "method_rtt": method_rtt,
    "confirm": confirms,
    "consumer_ack": consumer_acks,
    "transit": transit,
    "rpc": rpc,
    "connection_setup": connection_setup,
}

# the result columns (name -> dtype) of every pairing, and of consumers
RESULT_COLUMNS = {
    "method_rtt": RTT_COLS,
    "confirm": CONFIRM_COLS,
    "consumer_ack": ACK_COLS,
    "transit": TRANSIT_COLS,
    "rpc": RPC_COLS,
    "connection_setup": SETUP_COLS,
    "consumers": CONSUMER_COLS,
}


def all_latencies(t) -> dict[str, pd.DataFrame]:
    """Every latency kind, keyed as in the stats JSON."""
    t = as_tables(t)
    return {kind: pairing(t) for kind, pairing in LATENCY_FUNCTIONS.items()}
