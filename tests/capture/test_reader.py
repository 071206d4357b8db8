"""open_capture: pcap / pcapng / gzip variants, cut files, anomalies, errors."""

import gzip
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from fixtures import pcapgen as g
from fixtures.compiled import on_the_other_side

from amqpcap.capture import reader
from amqpcap.capture.link import parse_packet
from amqpcap.capture.reader import (
    EXIT_NOT_A_CAPTURE,
    EXIT_UNREADABLE,
    CaptureError,
    open_capture,
)

T0 = 1_700_000_000_123_456_789  # ns
T_2040 = 2_200_000_000_987_654_321  # seconds field above 2**31


def frames(n=4, linktype=1):
    """n distinct frames of different sizes."""
    out = []
    for i in range(n):
        ip = g.tcp_ip("10.0.0.1", "10.0.0.2", 40000 + i, 5672, seq=i, payload=bytes([65 + i]) * (i * 37))
        out.append(g.frame(linktype, ip))
    return out


def read(path):
    src = open_capture(path)
    return src, list(src)


def save(tmp_path, blob, name="c.cap"):
    return g.write(tmp_path / name, blob)


# -- classic pcap --------------------------------------------------------------------


@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_every_magic_gives_exact_timestamps_numbers_and_bytes(tmp_path, endian, nano):
    f = frames(3)
    pk = [(T0, 1, f[0]), (T0 + 1_000_000_001, 1, f[1]), (T_2040, 1, f[2])]
    src, recs = read(save(tmp_path, g.pcap_bytes(pk, nano=nano, endian=endian)))
    if nano:
        ts = [T0, T0 + 1_000_000_001, T_2040]
    else:
        ts = [1_700_000_000_123_456_000, 1_700_000_001_123_456_000, 2_200_000_000_987_654_000]
    assert recs == [
        (1, ts[0], 1, f[0], len(f[0])),
        (2, ts[1], 1, f[1], len(f[1])),
        (3, ts[2], 1, f[2], len(f[2])),
    ]
    assert src.format == "pcap"
    assert src.linktypes == [1]
    assert src.snaplen == 262144
    assert src.anomalies == []


def test_modified_kuznetzov_pcap_records_are_read(tmp_path):
    f = frames(2, 113)
    src, recs = read(
        save(tmp_path, g.pcap_bytes([(T0, 113, f[0]), (T0 + 5000, 113, f[1])], modified=True, endian=">"))
    )
    assert recs == [
        (1, 1_700_000_000_123_456_000, 113, f[0], len(f[0])),
        (2, 1_700_000_000_123_461_000, 113, f[1], len(f[1])),
    ]


def test_pcap_linktype_word_fcs_bits_are_masked(tmp_path):
    f = frames(1)
    src, recs = read(save(tmp_path, g.pcap_bytes([(T0, 1, f[0])], network_extra=0x24000000)))
    assert src.linktypes == [1] and recs[0][2] == 1


def test_pcap_snaplen_cut_packets_keep_wire_length(tmp_path):
    f = frames(3)
    pk = [g.snap((T0, 1, f[2]), 60), (T0 + 1, 1, b"", 0), (T0 + 2, 1, f[1])]
    src, recs = read(save(tmp_path, g.pcap_bytes(pk, snaplen=60, nano=True)))
    assert recs == [(1, T0, 1, f[2][:60], len(f[2])), (2, T0 + 1, 1, b"", 0), (3, T0 + 2, 1, f[1], len(f[1]))]
    assert src.snaplen == 60
    r = parse_packet(1, recs[0][3])
    assert r[9] == f[2][54:60] and r[10] == len(f[2]) - 60


def test_packets_larger_than_64k_are_not_truncated(tmp_path):
    # scapy's RawPcapReader cuts every packet to 65535 bytes; we must not.
    big = g.tcp_ip("10.0.0.1", "10.0.0.2", 1, 2, payload=b"x" * 65000)
    data = g.loop(big) + b"\x00" * 600
    src, recs = read(save(tmp_path, g.pcap_bytes([(T0, 108, data)], nano=True)))
    assert len(data) > 65535
    assert recs == [(1, T0, 108, data, len(data))]
    b = save(tmp_path, g.pcapng_bytes([(T0, 108, data)]), "b.pcapng")
    assert [r[3] for r in open_capture(b)] == [data]


# -- pcapng --------------------------------------------------------------------------


def test_pcapng_interfaces_carry_their_own_linktype_and_tsresol(tmp_path):
    f = frames(1)[0]
    ip = f[14:]
    w = g.PcapNg()
    w.interface(1)  # default: microseconds
    w.interface(113, tsresol=9)  # nanoseconds
    w.interface(101, tsresol=3)  # milliseconds
    w.interface(0, tsresol=0x94)  # 2**-20 s
    w.interface(
        276,
        tsresol=12,  # picoseconds (since the offset:
        tsoffset=1_700_000_000,
    )  # ps since 1970 overflow 64 bits)
    w.interface(229, tsresol=0x80)  # 2**0 = whole seconds
    w.interface(228, tsresol=9, tsoffset=1_600_000_000)
    half = 1_700_000_000_750_000_000  # .75 s: exact in 2**-20
    w.epb(0, T0, f)
    w.epb(1, T0, g.sll(ip))
    w.epb(2, T0, ip)
    w.epb(3, half, g.null(ip))
    w.epb(4, T0, g.sll2(ip))
    w.epb(5, T0, ip)
    w.epb(6, T0, ip)
    w.epb(3, T0, g.null(ip))
    src, recs = read(save(tmp_path, w.getvalue()))
    assert [(r[0], r[1], r[2]) for r in recs] == [
        (1, 1_700_000_000_123_456_000, 1),
        (2, T0, 113),
        (3, 1_700_000_000_123_000_000, 101),
        (4, half, 0),
        (5, T0, 276),
        (6, 1_700_000_000_000_000_000, 229),
        (7, T0, 228),
        # floor(T0 * 2**20 / 1e9) ticks -> floor(ticks * 1e9 / 2**20) ns
        (8, 1_700_000_000_123_456_001, 0),
    ]
    assert [r[3] for r in recs] == [f, g.sll(ip), ip, g.null(ip), g.sll2(ip), ip, ip, g.null(ip)]
    assert src.format == "pcapng"
    assert src.linktypes == [1, 113, 101, 0, 276, 229, 228]
    assert src.snaplen is None
    assert src.anomalies == []


@pytest.mark.parametrize("endian", ["<", ">"])
def test_pcapng_simple_packet_blocks_take_previous_timestamp_and_block_wirelen(tmp_path, endian):
    f = frames(3)
    w = g.PcapNg(endian)
    w.interface(1, snaplen=64, tsresol=9)
    w.spb(f[0])  # before any timestamped packet: ts 0
    w.epb(0, T0, f[1])
    w.spb(f[2][:64], wirelen=len(f[2]))  # cut by snaplen 64
    w.spb(f[0][:50])  # wirelen 50 < snaplen
    src, recs = read(save(tmp_path, w.getvalue()))
    assert recs == [
        (1, 0, 1, f[0][:64], len(f[0])),
        (2, T0, 1, f[1], len(f[1])),
        (3, T0, 1, f[2][:64], len(f[2])),
        (4, T0, 1, f[0][:50], 50),
    ]
    assert src.anomalies == []


def test_pcapng_simple_packet_block_with_unlimited_snaplen_keeps_all_bytes(tmp_path):
    # scapy's RawPcapNgReader returns b"" here (min(wirelen, snaplen=0)).
    f = frames(3)
    blob = g.pcapng_bytes([(T0, 1, f[0]), (T0 + 7000, 1, f[1]), (T0 + 9000, 1, f[2])], spb=[1])
    _, recs = read(save(tmp_path, blob))
    assert [(r[0], r[1], r[3]) for r in recs] == [
        (1, 1_700_000_000_123_456_000, f[0]),
        (2, 1_700_000_000_123_456_000, f[1]),
        (3, 1_700_000_000_123_465_000, f[2]),
    ]


def test_pcapng_unknown_blocks_are_skipped_and_reported_known_ones_silently(tmp_path):
    f = frames(3)
    w = g.PcapNg()
    w.interface(1, tsresol=9)
    w.block(0x4242, b"before any packet")
    w.epb(0, T0, f[0])
    w.block(4, b"\x00" * 4)  # name resolution
    w.block(5, b"\x00" * 12)  # interface statistics
    w.block(0x00000BAD, b"\x00\x00\x7f\x00data")  # custom block
    w.block(10, b"TLSK" + b"\x00" * 4)  # decryption secrets
    w.block(0x7FFF0001, b"x" * 100)
    w.epb(0, T0 + 10, f[1])
    w.epb(0, T0 + 20, f[2])
    src, recs = read(save(tmp_path, w.getvalue()))
    assert [(r[0], r[1], r[3]) for r in recs] == [(1, T0, f[0]), (2, T0 + 10, f[1]), (3, T0 + 20, f[2])]
    assert src.anomalies == [
        (1, 0, "pcapng-unknown-block", "skipped unknown block type 0x00004242 (32 bytes)"),
        (2, T0, "pcapng-unknown-block", "skipped unknown block type 0x7fff0001 (112 bytes)"),
    ]


def test_pcapng_unknown_block_from_pcapng_bytes_helper(tmp_path):
    f = frames(2)
    blob = g.pcapng_bytes([(T0, 1, f[0]), (T0 + 1000, 1, f[1])], unknown_after={0: 0x99})
    src, recs = read(save(tmp_path, blob))
    assert [r[0] for r in recs] == [1, 2]
    assert [a[:3] for a in src.anomalies] == [(2, 1_700_000_000_123_456_000, "pcapng-unknown-block")]


def test_pcapng_sections_reset_interfaces_and_may_change_byte_order(tmp_path):
    f = frames(4)
    w = g.PcapNg("<")
    w.interface(1, tsresol=9)
    w.interface(113, tsresol=9)
    w.epb(1, T0, g.sll(f[0][14:]))
    w.section(">")
    w.interface(1, tsresol=6)
    w.epb(0, T0 + 1000, f[1])
    w.epb(1, T0 + 2000, f[2])  # interface 1 belonged to the previous section
    w.epb(0, T0 + 3000, f[3])
    src = open_capture(save(tmp_path, w.getvalue()))
    assert src.linktypes == [1, 113]
    recs = list(src)
    assert [(r[0], r[1], r[2]) for r in recs] == [
        (1, T0, 113),
        (2, 1_700_000_000_123_457_000, 1),
        (4, 1_700_000_000_123_459_000, 1),
    ]
    assert src.anomalies == [
        (
            3,
            1_700_000_000_123_457_000,
            "pcapng-bad-interface",
            "packet names interface 1; the section describes 1",
        )
    ]


def test_pcapng_linktypes_known_at_open_and_extended_while_reading(tmp_path):
    f = frames(2)
    w = g.PcapNg()
    w.interface(1)
    w.epb(0, T0, f[0])
    w.interface(113)
    w.epb(1, T0, g.sll(f[1][14:]))
    src = open_capture(save(tmp_path, w.getvalue()))
    assert src.linktypes == [1]
    assert [r[2] for r in src] == [1, 113]
    assert src.linktypes == [1, 113]


def test_pcapng_obsolete_packet_block_and_journal_block_consume_numbers(tmp_path):
    f = frames(3)
    w = g.PcapNg(">")
    w.interface(1, tsresol=9)
    w.pb(0, T0, f[0])
    w.block(9, b"__REALTIME_TIMESTAMP=1\n")
    w.epb(0, T0 + 5, f[1], wirelen=1500)
    src, recs = read(save(tmp_path, w.getvalue()))
    assert recs == [(1, T0, 1, f[0], len(f[0])), (3, T0 + 5, 1, f[1], 1500)]
    assert src.anomalies == [(2, T0, "skipped-record", "systemd journal export block (not a packet)")]


def test_pcapng_block_with_impossible_captured_length_is_skipped(tmp_path):
    f = frames(2)
    w = g.PcapNg()
    w.interface(1, tsresol=9)
    w.epb(0, T0, f[0])
    bad = len(w.getvalue())
    w.epb(0, T0 + 1, f[1])
    blob = bytearray(w.getvalue())
    blob[bad + 20 : bad + 24] = (5000).to_bytes(4, "little")  # caplen field
    w2 = g.PcapNg()
    w2.interface(1, tsresol=9)
    w2.epb(0, T0 + 2, f[0])
    blob += w2.getvalue()[28:]  # continue with one more EPB in the same section
    src, recs = read(save(tmp_path, bytes(blob)))
    assert [(r[0], r[1]) for r in recs] == [(1, T0), (3, T0 + 2)]
    assert [a[:3] for a in src.anomalies] == [(2, T0, "corrupt-block")]


@pytest.mark.parametrize("how", ["length-not-multiple-of-4", "trailer-mismatch", "tiny"])
def test_pcapng_broken_block_framing_stops_with_anomaly(tmp_path, how):
    f = frames(2)
    w = g.PcapNg()
    w.interface(1, tsresol=9)
    w.epb(0, T0, f[0])
    at = len(w.getvalue())
    w.epb(0, T0 + 1, f[1])
    blob = bytearray(w.getvalue())
    if how == "length-not-multiple-of-4":
        blob[at + 4 : at + 8] = (len(blob) - at - 2).to_bytes(4, "little")
    elif how == "trailer-mismatch":
        blob[-4:] = (8).to_bytes(4, "little")
    else:
        blob[at + 4 : at + 8] = (8).to_bytes(4, "little")
    src, recs = read(save(tmp_path, bytes(blob)))
    assert [r[0] for r in recs] == [1]
    assert len(src.anomalies) == 1
    assert src.anomalies[0][:3] == (2, T0, "corrupt-block")
    assert "stopped reading" in src.anomalies[0][3]


# -- oversize records: memory stays bounded --------------------------------------------


def test_pcap_record_claiming_huge_length_stops_with_anomaly(tmp_path):
    f = frames(2)
    blob = g.pcap_bytes([(T0, 1, f[0])], nano=True)
    blob += (1).to_bytes(4, "little") * 2 + (0xFFFFFFF0).to_bytes(4, "little") * 2 + b"x" * 100
    src, recs = read(save(tmp_path, blob))
    assert [r[0] for r in recs] == [1]
    assert src.anomalies == [
        (
            2,
            1_000_000_001,
            "oversize-record",
            "record claims 4294967280 captured bytes (limit 268435456); stopped reading",
        )
    ]


def test_pcapng_block_claiming_huge_length_stops_with_anomaly(tmp_path):
    f = frames(1)
    blob = g.pcapng_bytes([(T0, 1, f[0])], tsresol={1: 9})
    blob += (6).to_bytes(4, "little") + (0x40000000).to_bytes(4, "little") + b"\x00" * 64
    src, recs = read(save(tmp_path, blob))
    assert [r[0] for r in recs] == [1]
    assert [a[:3] for a in src.anomalies] == [(2, T0, "oversize-record")]


# -- cut files: every byte -------------------------------------------------------


def _record_ends(blob, first, hdr_len, lenfield):
    ends, pos = [], first
    while pos < len(blob):
        pos += lenfield(blob, pos)
        ends.append(pos)
    return ends


def test_pcap_cut_at_every_byte_yields_complete_records_then_reports(tmp_path):
    f = frames(4)
    full = g.pcap_bytes([(T0 + i, 1, x) for i, x in enumerate(f)], nano=True)
    ends = _record_ends(full, 24, 16, lambda b, p: 16 + int.from_bytes(b[p + 8 : p + 12], "little"))
    assert ends[-1] == len(full)
    path = tmp_path / "cut.pcap"
    for n in range(24, len(full) + 1):
        g.write(path, full[:n])
        src, recs = read(path)
        k = sum(1 for e in ends if e <= n)
        assert [r[3] for r in recs] == f[:k], n
        assert [r[0] for r in recs] == list(range(1, k + 1))
        if n in ends or n == 24:
            assert src.anomalies == [], n
        else:
            start = ends[k - 1] if k else 24
            assert len(src.anomalies) == 1
            num, ts, kind, detail = src.anomalies[0]
            assert (num, kind) == (k + 1, "truncated-file"), n
            assert detail.startswith(f"file ends {n - start} bytes into"), (n, detail)
            if n - start >= 16:
                assert ts == T0 + k  # the cut record's own timestamp


def test_pcap_cut_inside_file_header_is_not_a_capture(tmp_path):
    full = g.pcap_bytes([(T0, 1, frames(1)[0])])
    for n in (1, 4, 23):
        with pytest.raises(CaptureError) as ei:
            open_capture(g.write(tmp_path / "h.pcap", full[:n]))
        assert ei.value.exit_code == EXIT_NOT_A_CAPTURE


def test_pcapng_cut_at_every_byte_yields_complete_records_then_reports(tmp_path):
    f = frames(3)
    w = g.PcapNg()
    w.interface(1, tsresol=9)
    w.epb(0, T0, f[0])
    w.block(0x4242, b"zz")
    w.spb(f[1])
    w.epb(0, T0 + 9, f[2])
    full = w.getvalue()
    ends = _record_ends(full, 0, 8, lambda b, p: int.from_bytes(b[p + 4 : p + 8], "little"))
    packet_ends = [ends[2], ends[4], ends[5]]  # SHB, IDB, EPB, unknown, SPB, EPB
    path = tmp_path / "cut.pcapng"
    for n in range(28, len(full) + 1):
        g.write(path, full[:n])
        src, recs = read(path)
        k = sum(1 for e in packet_ends if e <= n)
        assert [r[3] for r in recs] == f[:k], n
        kinds = [a[2] for a in src.anomalies]
        if n in ends:
            assert "truncated-file" not in kinds, n
        else:
            assert kinds[-1] == "truncated-file", n
            assert src.anomalies[-1][0] == k + 1


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_cut_gzip_yields_what_was_decompressed_and_reports(tmp_path, fmt):
    f = frames(4) * 30
    pk = [(T0 + i, 1, x) for i, x in enumerate(f)]
    raw = g.pcap_bytes(pk, nano=True) if fmt == "pcap" else g.pcapng_bytes(pk)
    full = g.gzip_bytes(raw)
    path = tmp_path / "cut.gz"
    seen = set()
    for n in list(range(2, len(full), max(1, len(full) // 80))) + [len(full) - 1]:
        g.write(path, full[:n])
        if len(zlib.decompressobj(31).decompress(full[:n])) < 28:
            # not even the file header survived
            with pytest.raises(CaptureError) as ei:
                open_capture(path)
            assert ei.value.exit_code == EXIT_NOT_A_CAPTURE
            continue
        src, recs = read(path)
        assert [r[3] for r in recs] == f[: len(recs)]
        assert src.anomalies and src.anomalies[-1][2] == "truncated-file", n
        assert src.anomalies[-1][0] == len(recs) + 1
        assert "gzip stream cut short" in src.anomalies[-1][3]
        seen.add(len(recs))
    assert len(seen) > 10  # cuts really fall at many places
    assert max(seen) >= len(f) - 10


def test_gzip_with_bad_checksum_yields_all_packets_then_reports_corrupt_file(tmp_path):
    f = frames(4) * 5
    full = bytearray(g.gzip_bytes(g.pcap_bytes([(T0, 1, x) for x in f])))
    full[-8] ^= 0xFF  # CRC32 in the trailer
    src, recs = read(save(tmp_path, bytes(full)))
    assert [r[3] for r in recs] == f
    assert [a[2] for a in src.anomalies] == ["corrupt-file"]
    assert "corrupt gzip data" in src.anomalies[0][3]


def test_gzip_corrupt_in_the_middle_never_raises(tmp_path):
    rnd = random.Random(7)
    f = [g.ether(g.tcp_ip("10.0.0.1", "10.0.0.2", 1, 2, payload=rnd.randbytes(500))) for _ in range(200)]
    full = bytearray(g.gzip_bytes(g.pcap_bytes([(T0, 1, x) for x in f])))
    full[len(full) // 2 : len(full) // 2 + 40] = b"\xff" * 40
    src, recs = read(save(tmp_path, bytes(full)))
    assert recs[:50] == [(i + 1, T0 // 1000 * 1000, 1, f[i], len(f[i])) for i in range(50)]
    assert src.anomalies  # whatever garbage decompressed, the problem is reported


# -- gzip ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("members", [1, 3])
def test_gzip_compressed_captures_read_like_the_plain_ones(tmp_path, fmt, members):
    f = frames(4) * 10
    pk = [(T0 + 1000 * i, 1, x) for i, x in enumerate(f)]
    raw = g.pcap_bytes(pk, nano=True) if fmt == "pcap" else g.pcapng_bytes(pk, tsresol={1: 9})
    _, plain = read(save(tmp_path, raw, "plain"))
    src, zipped = read(save(tmp_path, g.gzip_bytes(raw, members) + b"\x00" * 8, "z"))
    assert zipped == plain
    assert len(plain) == 40 and plain[39][1] == T0 + 39000
    assert src.format == fmt + "+gzip"
    assert src.anomalies == []


@pytest.mark.parametrize("chunk", [29, 64, 1000])
@pytest.mark.parametrize("fmt", ["pcap", "pcapng", "pcap.gz", "pcapng.gz"])
def test_records_straddling_read_chunks_are_reassembled(tmp_path, monkeypatch, fmt, chunk):
    f = frames(4) * 25
    pk = [(T0 + i, 1, x) for i, x in enumerate(f)]
    raw = (
        g.pcap_bytes(pk, nano=True)
        if fmt.startswith("pcap.") or fmt == "pcap"
        else g.pcapng_bytes(pk, tsresol={1: 9}, spb=[5, 6], unknown_after={3: 77})
    )
    if fmt.endswith(".gz"):
        raw = g.gzip_bytes(raw)
    path = save(tmp_path, raw)
    _, want = read(path)
    monkeypatch.setattr(reader, "CHUNK", chunk)
    src, got = read(path)
    assert got == want
    assert len(got) == 100 and [r[3] for r in got] == f


@pytest.mark.parametrize("chunk", [29, 1000, reader.CHUNK])
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_batches_are_the_records_in_order_in_non_empty_lists(tmp_path, monkeypatch, fmt, chunk):
    f = frames(4) * 25
    pk = [(T0 + i, 1, x) for i, x in enumerate(f)]
    raw = g.pcap_bytes(pk) if fmt == "pcap" else g.pcapng_bytes(pk, spb=[5, 6], unknown_after={3: 77})
    path = save(tmp_path, raw)
    plain, want = read(path)
    monkeypatch.setattr(reader, "CHUNK", chunk)
    with open_capture(path) as src:
        batches = list(src.batches())
        assert [r for b in batches for r in b] == want
        assert all(type(b) is list and b for b in batches)
        assert src.anomalies == plain.anomalies and len(src.anomalies) == (fmt == "pcapng")
    if chunk == reader.CHUNK:  # a chunk's records in one list, by the compiled walk or its reference
        assert len(batches) < len(want) // 2


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_chunks_locate_each_record_in_the_buffer_it_was_read_into(tmp_path, fmt):
    """chunks(): (buf, records) with each packet's caplen bytes at buf[start], not copied out of it:
    the records iteration yields, with the simple packet blocks the walk leaves to the reader
    (pcapng) and a chunk's records sharing its one buffer."""
    f = frames(4) * 250
    pk = [(T0 + i, 1, x) for i, x in enumerate(f)]
    raw = g.pcap_bytes(pk) if fmt == "pcap" else g.pcapng_bytes(pk, spb=[5, 6], unknown_after={3: 77})
    path = save(tmp_path, raw)
    _, want = read(path)
    with open_capture(path) as src:
        chunks = list(src.chunks())
        got = [(n, ts, lt, buf[at : at + cap], w) for buf, recs in chunks for n, ts, lt, at, cap, w in recs]
        assert got == want
        assert all(type(buf) is bytes and len(buf) >= r[3] + r[4] for buf, recs in chunks for r in recs)
        assert len(chunks) < len(want) // 10  # the walk's records located in the chunk read, not one by one


def test_a_source_can_be_iterated_twice_and_anomalies_reset(tmp_path):
    f = frames(2)
    blob = g.pcapng_bytes([(T0, 1, f[0]), (T0, 1, f[1])], unknown_after={0: 0x77})
    with open_capture(save(tmp_path, blob)) as src:
        first = list(src)
        assert len(src.anomalies) == 1
        second = list(src)
        assert first == second and len(first) == 2
        assert len(src.anomalies) == 1


# -- errors ------------------------------------------------------------------------


def _err(path):
    with pytest.raises(CaptureError) as ei:
        open_capture(path)
    e = ei.value
    assert "\n" not in str(e) and str(e).startswith(str(path) + ": ")
    return e


def test_error_exit_codes_are_documented_constants():
    assert (EXIT_NOT_A_CAPTURE, EXIT_UNREADABLE) == (2, 3)


def test_empty_file_is_not_a_capture(tmp_path):
    e = _err(save(tmp_path, b""))
    assert e.exit_code == 2 and "empty" in e.reason


@pytest.mark.parametrize(
    "blob,words",
    [
        (b"hello, this is a text file\n", "not a pcap/pcapng capture"),
        (b"snoop\0\0\0\0\0\0\x02\0\0\0\x04", "snoop"),
        (gzip.compress(b"just text inside gzip"), "gzip-compressed file is not"),
        (b"\x1f\x8b\x08\x00garbage-not-deflate", "gzip file is not a capture"),
        (b"\x0a\x0d\x0d\x0a\x1c\0\0\0\x11\x22\x33\x44" + b"\0" * 16, "byte-order magic"),
        (g.PcapNg().section(major=2).getvalue()[28:], "pcapng version 2"),
    ],
)
def test_files_that_are_not_captures_exit_2(tmp_path, blob, words):
    e = _err(save(tmp_path, blob))
    assert e.exit_code == 2
    assert words in str(e)


def test_missing_path_exits_3(tmp_path):
    e = _err(tmp_path / "nope.pcap")
    assert e.exit_code == 3 and e.reason == "no such file"


def test_directory_exits_3(tmp_path):
    e = _err(tmp_path)
    assert e.exit_code == 3 and "directory" in e.reason


def test_permission_denied_exits_3(tmp_path):
    path = save(tmp_path, g.pcap_bytes([(T0, 1, frames(1)[0])]))
    os.chmod(path, 0)
    if os.geteuid() != 0:
        e = _err(path)
        assert e.exit_code == 3 and e.reason == "permission denied"
        return
    # root reads anything: ask again without the capabilities that let it (capsh, as the live tests;
    # a patched module-level `open` would not reach the compiled reader)
    if shutil.which("capsh") is None:
        (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)("needs capsh as root")
    code = (
        "import sys; from amqpcap.capture.reader import open_capture, CaptureError\n"
        "try: open_capture(sys.argv[1])\n"
        "except CaptureError as e: print(e.exit_code, e.reason, str(e).startswith(sys.argv[1] + ': '))"
    )
    shell = f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} {shlex.quote(str(path))}"
    r = subprocess.run(
        ["capsh", "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", shell],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip() == "3 permission denied True", r.stderr


# -- cross-checks with tools --------------------------------------------------------


# scripts/test.sh installs tshark and sets AMQPCAP_REQUIRE_TOOLS in CI: a missing tool fails
@pytest.mark.skipif(
    shutil.which("tshark") is None and not os.environ.get("AMQPCAP_REQUIRE_TOOLS"),
    reason="tshark not installed",
)
def test_pcapng_matches_tshark_numbers_timestamps_and_lengths(tmp_path):
    f = frames(3)
    ip = f[1][14:]
    w = g.PcapNg()
    w.interface(1, tsresol=0x94, snaplen=0)  # 2**-20
    w.interface(113, tsresol=9)
    w.interface(101, tsresol=3)
    w.epb(0, T0, f[0])
    w.block(0x4242, b"unknown")
    w.epb(1, T0 + 77, g.sll(ip), wirelen=2000)
    w.spb(f[2])
    w.epb(2, T0 + 5_000_000, ip)
    w.epb(0, 1_700_000_001_000_000_007, f[1])
    path = save(tmp_path, w.getvalue(), "x.pcapng")
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(path),
            "-T",
            "fields",
            "-E",
            "separator=,",
            "-e",
            "frame.number",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    want = [tuple(line.split(",")) for line in out]
    got = [
        (str(n), f"{ts // 10**9}.{ts % 10**9:09d}", str(wl), str(len(d)))
        for n, ts, _lt, d, wl in open_capture(path)
    ]
    assert len(got) == 5
    for w_, g_ in zip(want, got):
        assert w_[0] == g_[0] and w_[2:] == g_[2:]
        if g_[0] != "3":  # tshark shows no/zero time for a simple packet block
            assert w_[1] == g_[1]


# scripts/test.sh installs tcpdump and sets AMQPCAP_REQUIRE_TOOLS in CI (run as root there):
# a missing tool fails the run instead of skipping the test.
@pytest.mark.skipif(
    (shutil.which("tcpdump") is None or os.geteuid() != 0) and not os.environ.get("AMQPCAP_REQUIRE_TOOLS"),
    reason="needs tcpdump and root",
)
@pytest.mark.parametrize("nano", [False, True])
def test_tcpdump_loopback_capture_matches_scapy_and_sent_bytes(tmp_path, nano):
    from scapy.utils import rdpcap

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    path = tmp_path / "lo.pcap"
    # -Z root: do not drop to user "tcpdump", who cannot write into tmp_path
    # --immediate-mode: packets still in the TPACKET_V3 ring when SIGINT comes are lost
    cmd = ["tcpdump", "-i", "lo", "-U", "--immediate-mode", "-n", "-Z", "root", "-s", "0", "-w", str(path)]
    if nano:
        cmd += ["--time-stamp-precision=nano"]
    cmd += ["tcp", "port", str(port)]
    td = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        line = td.stderr.readline()  # "listening on lo, ..."
        if b"listening" not in line:
            (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)(
                f"tcpdump did not start: {line!r}"
            )
        request = b"AMQP\x00\x00\x09\x01" + bytes(range(256)) * 300  # > 64 KiB
        reply = b"R" * 5000
        received = []

        def serve():
            c, _ = srv.accept()
            buf = b""
            while len(buf) < len(request):
                buf += c.recv(65536)
            received.append(buf)
            c.sendall(reply)
            c.close()

        t = threading.Thread(target=serve)
        t.start()
        cli = socket.create_connection(("127.0.0.1", port))
        cli.sendall(request)
        got_reply = b""
        while len(got_reply) < len(reply):
            chunk = cli.recv(65536)
            if not chunk:
                break
            got_reply += chunk
        cli.close()
        t.join(5)
        time.sleep(0.5)
    finally:
        td.send_signal(signal.SIGINT)
        td.wait(10)
        srv.close()
    assert received == [request] and got_reply == reply

    src, recs = read(path)
    assert src.format == "pcap" and src.linktypes == [1]
    scapy_pkts = rdpcap(str(path))
    assert len(recs) == len(scapy_pkts) > 5
    for (_num, ts, _lt, data, wirelen), sp in zip(recs, scapy_pkts):
        assert bytes(sp) == data
        assert wirelen == sp.wirelen
        assert ts == int(sp.time * 10**9)  # scapy keeps pcap times as exact decimals
        if not nano:
            assert ts % 1000 == 0
    streams = {port: b"", "c": b""}
    for _num, _ts, lt, data, _wirelen in recs:
        r = parse_packet(lt, data)
        assert isinstance(r, tuple) and r[10] == 0
        streams[port if r[4] == port else "c"] += r[9]
    assert request in streams[port] and reply in streams["c"]


# -- robustness: damaged files never raise during iteration -------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_FUZZ_BASE = {}


def _fuzz_base(kind):
    if kind not in _FUZZ_BASE:
        f = frames(4)
        pk = [(T0 + i, 1, x) for i, x in enumerate(f)]
        if kind == "pcap":
            blob = g.pcap_bytes(pk)
        elif kind == "pcapng":
            blob = g.pcapng_bytes(pk + [(T0 + 9, 113, g.sll(f[0][14:]))], spb=[1], unknown_after={2: 0x31})
        else:
            blob = g.gzip_bytes(g.pcap_bytes(pk))
        _FUZZ_BASE[kind] = blob
    return _FUZZ_BASE[kind]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["pcap", "pcapng", "gz"]),
    edits=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=6),
    cut_at=st.one_of(st.none(), st.integers(0, 2000)),
)
def test_damaged_files_either_fail_to_open_or_iterate_without_raising(tmp_path, kind, edits, cut_at):
    blob = bytearray(_fuzz_base(kind))
    for off, val in edits:
        if off < len(blob):
            blob[off] = val
    if cut_at is not None:
        blob = blob[:cut_at]
    path = g.write(tmp_path / "fuzz", bytes(blob))
    try:
        src = open_capture(path)
    except CaptureError as e:
        assert e.exit_code == EXIT_NOT_A_CAPTURE
        return
    last = 0
    for num, ts, lt, data, wirelen in src:
        assert num > last and isinstance(ts, int) and isinstance(data, bytes)
        assert isinstance(lt, int) and isinstance(wirelen, int)
        assert len(data) <= len(blob) or kind == "gz"
        last = num
    for num, _ts, kind_, detail in src.anomalies:
        assert isinstance(num, int) and isinstance(kind_, str) and "\n" not in detail


def test_compiled_walk_yields_the_reference_records_of_every_shipped_capture():
    """Every record (number, ts, link type, bytes, wire length) and every anomaly of each shipped
    capture, the compiled walk against the record-by-record reference (one of them in a process
    of the other implementations), also with small reads."""
    caps = sorted((Path(__file__).parents[2] / "captures").glob("*.pcap*"))
    assert len(caps) >= 12
    chunks = (reader.CHUNK, 1000)
    here = _records_and_anomalies(caps, chunks)
    there = on_the_other_side(_records_and_anomalies, caps, chunks)
    assert len(here) == len(caps) * len(chunks)
    for i, got in enumerate(here):
        assert got == there[i], caps[i // len(chunks)]


@pytest.mark.compiled("fastread")
@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("tsresol", [None, 9, 0x83])
def test_compiled_walk_yields_the_reference_records_of_pcapng_files(tmp_path, monkeypatch, endian, tsresol):
    """The packets of a shipped capture rewritten as pcapng (both byte orders; microsecond,
    nanosecond and 2^-3 s resolution; simple packet blocks and unknown blocks among the
    enhanced ones): the compiled walk against the reference (a pure-Python process), also with
    small reads."""
    cap = Path(__file__).parents[2] / "captures" / "rabbitmq091_pika_full.pcap"
    with open_capture(str(cap)) as src:
        pk = [(ts, lt, data, wirelen) for _n, ts, lt, data, wirelen in src]
    raw = g.pcapng_bytes(
        pk, endian=endian, tsresol={1: tsresol}, spb=[3, 40], unknown_after={10: 0x77, 100: 0x78}
    )
    path = save(tmp_path, raw)
    chunks = (reader.CHUNK, 999)
    here = _records_and_anomalies([path], chunks)
    assert here == on_the_other_side(_records_and_anomalies, [path], chunks)
    assert [len(got[0]) for got in here] == [len(pk)] * len(chunks)
    # and the compiled walk took most of the packets itself (not the reader's loop)
    walk, taken = reader._pcapng_records, []
    monkeypatch.setattr(reader, "_pcapng_records", lambda *a: taken.append(len((r := walk(*a))[0])) or r)
    with open_capture(str(path)) as src:
        assert len(list(src)) == len(pk)
    assert sum(taken) > 0.9 * len(pk)  # not: simple packet blocks, a block after a refill


def _records_and_anomalies(caps, chunks) -> list:
    """[(records, anomalies)] of each capture read with each chunk size, by this process's walk."""
    before = reader.CHUNK
    out = []
    try:
        for cap in caps:
            for chunk in chunks:
                reader.CHUNK = chunk
                with open_capture(str(cap)) as src:
                    out.append((list(src), list(src.anomalies)))
    finally:
        reader.CHUNK = before
    return out


def test_a_pcapng_timestamp_beyond_64_bits_reads_with_the_previous_time_and_an_anomaly(tmp_path):
    """A nanosecond timestamp past 2**63 - 1 (year 2262) fits no timestamp column: the packet gets
    the previous packet's time and a timestamp-out-of-range anomaly, in either walk."""
    f = frames(3)
    late = 2**63 + 5
    raw = g.pcapng_bytes([(T0, 1, f[0]), (late, 1, f[1]), (T0 + 1, 1, f[2])], tsresol={1: 9})
    src, got = read(save(tmp_path, raw))
    assert [r[1] for r in got] == [T0, T0, T0 + 1]
    assert [r[3] for r in got] == f
    ((number, ts, kind, detail),) = src.anomalies
    assert (number, ts, kind) == (2, T0, "timestamp-out-of-range") and str(late) in detail
