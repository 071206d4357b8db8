"""Stage 1: capture files -> packets -> TCP segments.

Contract used by the rest of the pipeline (kept small and tuple-based because
it is the per-packet hot path):

``reader.open_capture(path) -> PacketSource``
    ``path`` may be ``"-"`` (standard input), a pipe or a FIFO: the input is
    opened once and read as it arrives.  Raises ``reader.CaptureError`` (with
    ``exit_code``) for anything that is not a readable capture.  Iterating a
    PacketSource yields ``(number, ts_ns, linktype, data, wirelen)`` per
    packet: ``number`` is 1-based like Wireshark's frame.number, ``ts_ns`` is
    int ns since the epoch, ``data`` the captured bytes (may be shorter than
    ``wirelen``).  ``source.anomalies`` collects file-level problems found
    while reading (cut file, unknown pcapng block, ...) as
    ``(number, ts_ns, kind, detail)``.

``link.parse_packet(linktype, data)``
    -> ``None`` for non-IP / non-TCP packets;
    -> ``link.Malformed`` (a ``str``) naming why an IP/TCP packet is malformed;
    -> ``link.Packet`` (a NamedTuple: ``ip_version, src, dst, sport, dport,
       seq, ack, flags, window, payload, missing``) with ``src``/``dst`` as
       packed address bytes, ``payload`` the TCP payload bytes that were
       captured and ``missing`` the number of payload bytes the snapshot
       length cut off (from the IP length).
"""
