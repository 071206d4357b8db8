"""Body digests (the SHA-256 of each message body), as the other stages see them.

The reference decoder hashes with hashlib (``stream.Pending``).  The compiled walker has its
own SHA-256 (fast09, ``amqp/digests.pxi``: OpenSSL's functions without hashlib's objects,
large bodies hashed on a thread of its own) and, in a dissect into compiled table buffers,
hands on a digest still being computed (``codec_0_9.direct_output``).  A table buffer that
takes such digests asks here how to write one, not the decoder's module.
"""

from __future__ import annotations

from amqpcap import compiled


def deferred_text():
    """The capsule ("amqpcap.deferred_text", ``deferred.pxi``) with which a table buffer writes
    a compiled walker's digest still being computed, or None when that walker is not built
    from the current sources.  Whether the process runs it or not (AMQPCAP_PURE): the tests
    run it explicitly."""
    walker = compiled.select("fast09") or compiled.current_build("fast09")[0]
    return None if walker is None else walker.DEFERRED_DIGEST
