"""scapy packets in: the pipeline over any iterable of scapy packets.

``PacketsSource(packets)`` yields what a capture file's ``PacketSource`` yields,
``(number, ts_ns, linktype, data, wirelen)``, so ``Dissector.run`` takes it
unchanged; ``dissect_packets`` runs the whole pipeline and returns the tables
``amqpcap.load`` returns.
"""

from __future__ import annotations

import dataclasses
import decimal
import os
import shutil
import tempfile

from scapy.config import conf

_NS = 10**9
UNKNOWN_LINKTYPE = -1  # a packet scapy could not place on a link layer (reported, not dropped)


def timestamp_ns(t) -> int:
    """scapy's packet time (EDecimal from files, float from sniff) as int nanoseconds."""
    if isinstance(t, decimal.Decimal):
        return int(t * _NS)
    return int(decimal.Decimal(repr(float(t))) * _NS)


def linktype_of(pkt) -> int:
    """The DLT of a packet's first layer, as scapy writes it to pcap files."""
    lt = conf.l2types.layer2num.get(type(pkt))
    return UNKNOWN_LINKTYPE if lt is None else lt


class PacketsSource:
    """An iterable of scapy packets as a packet source (numbered from 1 in iteration order)."""

    def __init__(self, packets) -> None:
        self.packets = packets
        self.anomalies: list = []  # file-level problems: none, there is no file

    def __iter__(self):
        from amqpcap.capture.reader import ts_fits

        last = 0
        for number, pkt in enumerate(self.packets, 1):
            data = bytes(pkt)
            wirelen = getattr(pkt, "wirelen", None)
            try:
                ts = timestamp_ns(pkt.time)
            except (ArithmeticError, ValueError, TypeError):  # nan, inf, not a number
                ts = None
            if not ts_fits(ts):
                self.anomalies.append(
                    (
                        number,
                        last,
                        "timestamp-out-of-range",
                        f"packet time {pkt.time!r} is outside what a timestamp holds; "
                        "read with the previous packet's time",
                    )
                )
                ts = last
            last = ts
            yield number, ts, linktype_of(pkt), data, wirelen or len(data)


def dissect_packets_to(
    packets,
    out: str,
    *,
    capture: str = "packets",
    body_bytes: int = 64,
    frames: bool = False,
    ports=(),
    keep_secrets: bool = False,
    force: bool = False,
):
    """Dissect ``packets`` into the Parquet dataset directory ``out`` (as ``amqpcap dissect`` writes
    one capture); returns the row counts per table."""
    from amqpcap.pipeline import DEFAULT_PORTS, Dissector, Options
    from amqpcap.records.writer import DatasetWriter

    opts = Options(
        body_bytes=body_bytes,
        frames=frames,
        ports=DEFAULT_PORTS | frozenset(ports),
        keep_secrets=keep_secrets,
    )
    tables = ["connections", "methods", "messages", "anomalies"] + (["frames"] if frames else [])
    writer = DatasetWriter(out, tables, force=force)
    try:
        Dissector(capture, writer, opts).run(PacketsSource(packets))
        return writer.close()
    except BaseException:
        writer.abort()
        raise


def dissect_packets(packets, out=None, **options):
    """The tables of ``packets`` (any iterable of scapy packets: ``rdpcap``, ``sniff``, crafted).

    With ``out`` the Parquet dataset is written there too (``force=True`` to replace it);
    ``capture`` names the packets in the tables' ``capture`` column (default "packets");
    ``body_bytes``, ``frames``, ``ports``, ``keep_secrets`` as for ``amqpcap dissect``.

    Packets must start with a link layer scapy knows (Ether, CookedLinux, Loopback, IP, IPv6,
    ...): packets that ``rdpcap`` read as ``Raw`` (scapy's layers not loaded yet) cannot be
    placed; they are reported as an ``unsupported-link-type`` anomaly, and if nothing else
    could be read, a ``CaptureError`` is raised as for a file of an unknown link type.
    """
    from amqpcap.analysis.tables import load_dir

    if out is not None:
        dissect_packets_to(packets, os.fspath(out), **options)
        return load_dir(out)
    tmp = tempfile.mkdtemp(prefix="amqpcap-packets-")
    try:
        target = os.path.join(tmp, "out")
        dissect_packets_to(packets, target, **options)
        tables = load_dir(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dataclasses.replace(tables, source=None)  # the directory is gone
