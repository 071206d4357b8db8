"""AMQP for scapy: ``import amqpcap.scapy`` and scapy dissects AMQP frames.

* TCP ports 5672 and 5671 carry AMQP (``bind_port`` adds more); on any other port a
  payload that starts with ``AMQP`` (a protocol header) is AMQP too, and so is the rest
  of that TCP conversation once its header has been dissected.
* 0-8, 0-9 and 0-9-1 frames are read by the version the conversation's protocol header
  named (0-9-1 when no header was seen); 0-10 and 1.0 by their framing.  1.0 frames
  (performatives, SASL frames, empty frames) are ``AMQP10`` layers; after a 1.0 TLS header
  (``AMQP 2 1 0 0``) the rest is ``TLSRecords``.
* One frame is one layer, the frames of a packet a chain of layers; a frame cut by the
  end of the packet is an ``AMQPFragment``.  ``pkt[AMQP]`` is the first frame,
  ``pkt[AMQP].method`` its "class.method", ``pkt[AMQP].fields`` its fields and
  ``pkt[AMQP].arguments`` the arguments by their specification names (1.0: the
  performative's name and fields).
* ``show()`` and ``repr`` of a start-ok / secure-ok / update-secret (1.0: sasl-init,
  sasl-response) redact the password as the tables do (the user stays);
  ``keep_secrets()`` (or ``with keep_secrets():``) shows it.

The layer is for interactive work; the dissector (``amqpcap dissect``) does not use it.
"""

from __future__ import annotations

from scapy.layers.inet import TCP
from scapy.packet import Packet, bind_layers

from amqpcap.scapy.fields import keep_secrets
from amqpcap.scapy.layers import (
    AMQP,
    AMQP010,
    AMQP10,
    DEFAULT_VERSION,
    METHOD_CLASSES,
    OP_CLASSES_010,
    AMQPBody,
    AMQPFragment,
    AMQPHeartbeat,
    AMQPMethod,
    AMQPProtocolHeader,
    header_class,
    known_version,
    method_class,
)

AMQP_PORTS = (5672, 5671)


def bind_port(port: int) -> None:
    """Dissect TCP ``port`` as AMQP (both directions)."""
    bind_layers(TCP, AMQP, dport=port)
    bind_layers(TCP, AMQP, sport=port)


def _guess_tcp_payload(self, payload):
    """TCP's payload guess, then AMQP for a payload that starts with a protocol header or
    belongs to a conversation whose header was seen."""
    cls = _tcp_guess(self, payload)
    if cls is AMQP or not payload:
        return cls
    if payload[:4] == b"AMQP" or known_version(self) is not None:
        return AMQP
    return cls


for _port in AMQP_PORTS:
    bind_port(_port)
if getattr(TCP.guess_payload_class, "__name__", "") != _guess_tcp_payload.__name__:
    _tcp_guess = (
        TCP.guess_payload_class if "guess_payload_class" in TCP.__dict__ else Packet.guess_payload_class
    )
    TCP.guess_payload_class = _guess_tcp_payload
else:  # re-imported (importlib.reload): keep the original guess
    _tcp_guess = TCP.guess_payload_class.__globals__["_tcp_guess"]

__all__ = [
    "AMQP",
    "AMQP010",
    "AMQP10",
    "AMQPBody",
    "AMQPFragment",
    "AMQPHeartbeat",
    "AMQPMethod",
    "AMQPProtocolHeader",
    "DEFAULT_VERSION",
    "METHOD_CLASSES",
    "OP_CLASSES_010",
    "bind_port",
    "header_class",
    "keep_secrets",
    "method_class",
]
