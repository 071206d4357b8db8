"""amqpcap: AMQP packet-capture dissector and traffic analyser."""

__version__ = "0.1.0"


def load(path, **kwargs):
    """Load a dissect output directory (or dissect a capture to a cache) as pandas tables."""
    from amqpcap.analysis.tables import load as _load

    return _load(path, **kwargs)


def dissect_packets(packets, out=None, **options):
    """Dissect an iterable of scapy packets (``rdpcap``, ``sniff``, crafted) into the tables ``load``
    returns; see :func:`amqpcap.scapy.source.dissect_packets`."""
    from amqpcap.scapy.source import dissect_packets as _dissect_packets

    return _dissect_packets(packets, out, **options)
