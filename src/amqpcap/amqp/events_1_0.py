"""Events of the AMQP 1.0 codec (codec_1_0.py), next to the shared ones of events.py.

A 1.0 conversation also emits the shared ``Frame``, ``Heartbeat`` (an empty frame),
``ProtocolHeader`` (the SASL layer's second header) and ``Anomaly`` events.  Its performatives
and SASL frames are ``Performative`` events and its reassembled messages ``Delivery`` events:
they carry what the link state knows (the link a handle names, a delivery's settlement), which
a 0-9 ``Method`` / ``Content`` has no place for.  Their classes are generated (values_1_0.py,
tools/gen_classes.py), as the shared events' are.  The records layer builds their rows
(records/rows_1_0.py).
"""

from __future__ import annotations

from amqpcap.values_1_0 import CONTENT, Delivery, Performative

__all__ = ["CONTENT", "Delivery", "Performative", "creation_time"]


def creation_time(sections: dict):
    """The properties section's creation-time (ms since the epoch), if it is an integer (a
    boolean is not), else None."""
    props = sections.get("properties")
    value = props.get("creation-time") if isinstance(props, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
