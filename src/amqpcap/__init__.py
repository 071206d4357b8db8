"""amqpcap: AMQP packet-capture dissector and traffic analyser."""
__version__ = "0.1.0"


def load(path, **kwargs):
    """Load a dissect output directory (or dissect a capture to a cache) as pandas tables."""
    from amqpcap.analysis.tables import load as _load

    return _load(path, **kwargs)
