"""The Spark job writes a packet time that no timestamp column holds as dissect does: the rows
whose time is that packet's have a null time, the rest are the same."""

from fixtures import hostile as H
from fixtures import pcapgen as P

from amqpcap.pipeline import dissect

CLI, SRV = H.conversation_09()
PACKETS = P.to_packets(P.tcp_conversation(client_chunks=CLI, server_chunks=SRV), 1)


def test_spark_writes_the_rows_of_a_packet_time_past_64_bits_with_a_null_time(spark, tmp_path):
    from amqpcap.spark import run

    cap = tmp_path / "late.pcapng"
    cap.write_bytes(H.pcapng_ticks(PACKETS, {5: 0xFFFFFFFF_00000007}))
    run(spark, [str(cap)], str(tmp_path / "spark"))
    dissect([str(cap)], str(tmp_path / "dissect"))
    got, want = H.tables(tmp_path / "spark"), H.tables(tmp_path / "dissect")
    for name in ("methods", "messages", "anomalies", "connections"):
        key = lambda r: (r["frame_number"], str(r))  # noqa: E731
        assert sorted(got[name], key=key) == sorted(want[name], key=key), name
    late = [r for name in ("methods", "anomalies") for r in got[name] if r["frame_number"] == 6]
    assert len(late) == 2 and all(r["ts"] is None for r in late)
