"""amqpcap show: one line per method, filters by stream, channel and method."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from amqpcap.pipeline import dissect

CAP = Path(__file__).resolve().parents[1] / "captures" / "rabbitmq091_pika_full.pcap"


def _show(*args, cap=CAP, headers=False):
    r = subprocess.run(
        [sys.executable, "-m", "amqpcap.cli", "show", str(cap), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in r.stdout.splitlines() if line.strip() and (headers or not line.startswith("#"))]


def test_show_prints_one_line_per_method_row(tmp_path):
    dissect([str(CAP)], str(tmp_path / "o"))
    methods = pd.read_parquet(tmp_path / "o" / "methods")
    lines = _show()
    assert len(lines) == len(methods)
    # Packet number and method name of each line match the rows, in order.
    got = [(int(l.split()[1]), l.split()[5]) for l in lines]
    assert got == list(zip(methods.frame_number.astype(int), methods.method))


def test_show_never_imports_pyarrow():
    """show prints the decoder's rows: the schema's column names, no Arrow (its process starts in
    about half the time and memory of one that imports pyarrow)."""
    probe = (
        "import sys; from amqpcap import cli\n"
        "sys.argv = ['amqpcap', 'show'] + sys.argv[1:]\n"
        "code = cli.main()\n"
        "print('pyarrow loaded:', 'pyarrow' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", probe, str(CAP)], capture_output=True, text=True, check=True)
    lines = r.stdout.splitlines()
    assert lines[-1] == "pyarrow loaded: False"
    assert sum(" basic.publish " in line for line in lines) > 0


def test_method_prefix_and_channel_filters(tmp_path):
    dissect([str(CAP)], str(tmp_path / "o"))
    m = pd.read_parquet(tmp_path / "o" / "methods")
    lines = _show("--method", "basic.")
    assert len(lines) == int(m.method.str.startswith("basic.").sum()) > 0
    assert all(l.split()[5].startswith("basic.") for l in lines)
    lines = _show("--method", "basic.publish", "--channel", "1")
    assert len(lines) == int(((m.method == "basic.publish") & (m.channel == 1)).sum())
    publish = m[m.method == "basic.publish"].iloc[0]
    first = _show("--method", "basic.publish")[0]
    assert f"routing-key={publish.routing_key}" in first


def test_password_never_shown():
    r = subprocess.run(
        [sys.executable, "-m", "amqpcap.cli", "show", str(CAP)], capture_output=True, text=True
    )
    assert "s3cret-pw" not in r.stdout and "start-ok" in r.stdout


CAPS = CAP.parent


def _frame_line(lines, frame):
    return [l for l in lines if not l.startswith("#") and int(l.split()[1]) == frame]


def test_relative_time_is_wiresharks_frame_time_relative_whatever_the_filter():
    # tshark -r rabbitmq091_pika_throughput.pcap -Y frame.number==41 -e frame.time_relative: 0.019679282
    cap = CAPS / "rabbitmq091_pika_throughput.pcap"
    for args in ((), ("--stream", "1"), ("--method", "basic.publish")):
        (line,) = _frame_line(_show(*args, cap=cap), 41)
        assert line.split()[0] == "0.019679", args


def test_relative_time_matches_tshark_for_every_line():
    import shutil

    cap = CAPS / "rabbitmq091_pika_blocked.pcap"
    if shutil.which("tshark") is None:
        import os

        import pytest

        (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)("needs tshark")
    out = subprocess.run(
        ["tshark", "-r", str(cap), "-T", "fields", "-e", "frame.number", "-e", "frame.time_relative"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rel = {int(n): float(t) for n, t in (l.split() for l in out.splitlines())}
    lines = _show("--channel", "1", cap=cap)
    assert len(lines) > 10
    for l in lines:
        assert abs(float(l.split()[0]) - rel[int(l.split()[1])]) < 1e-6


def test_each_stream_gets_a_header_line_with_client_and_server_addresses(tmp_path):
    dissect([str(CAP)], str(tmp_path / "o"))
    c = pd.read_parquet(tmp_path / "o" / "connections").iloc[0]
    lines = _show(headers=True)
    assert lines[0] == f"# stream 0: {c.client_ip}:{c.client_port} -> {c.server_ip}:{c.server_port}"
    assert sum(l.startswith("#") for l in lines) == 1


def test_method_filter_is_case_insensitive():
    assert _show("--method", "Basic.Publish") == _show("--method", "basic.publish") != []
    assert _show("--method", "BASIC.") == _show("--method", "basic.")


def test_exchange_queue_and_routing_key_filters(tmp_path):
    dissect([str(CAP)], str(tmp_path / "o"))
    m = pd.read_parquet(tmp_path / "o" / "methods")
    for opt, col in (("--exchange", "exchange"), ("--queue", "queue"), ("--routing-key", "routing_key")):
        value = m[col].dropna().loc[lambda v: v != ""].value_counts().index[0]
        want = m[m[col] == value]
        lines = _show(opt, value)
        assert [int(l.split()[1]) for l in lines] == list(want.frame_number), opt
        assert 0 < len(lines) < len(m)


def test_key_arguments_exchange_type_bind_source_and_blocked_reason():
    lines = _show("--method", "exchange.")
    assert any("exchange=amqpcap.direct type=direct" in l for l in lines)
    assert any("exchange.bind" in l and "source=amqpcap.topic destination=amqpcap.fanout" in l for l in lines)
    (blocked,) = _show("--method", "connection.blocked", cap=CAPS / "rabbitmq091_pika_blocked.pcap")
    assert blocked.endswith("reason=low on memory")


def test_key_arguments_stand_in_key_order_numbers_and_flags_as_json(tmp_path):
    """A line's arguments follow show.KEY_ARGS whatever order the method has them in; an int is
    its digits and a flag ``true`` / ``false`` (JSON), as in the JSON output."""
    dissect([str(CAP)], str(tmp_path / "o"))
    m = pd.read_parquet(tmp_path / "o" / "methods")
    acks = m[m.method == "basic.ack"]
    want = [
        f"delivery-tag={int(t)} multiple={'true' if mu else 'false'}"
        for t, mu in zip(acks.delivery_tag, acks.multiple)
    ]
    assert [line.split(None, 6)[6] for line in _show("--method", "basic.ack")] == want and len(want) > 1
    # queue.bind has queue, exchange, routing-key; the line puts them in KEY_ARGS order
    bind = _show("--method", "queue.bind")[0].split(None, 6)[6]
    assert bind.startswith("exchange=") and bind.index(" routing-key=") < bind.index(" queue=")


def test_reply_text_is_shown_whole_when_piped():
    lines = _show("--method", "connection.close", cap=CAPS / "rabbitmq091_pika_refused.pcap")
    text = (
        "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
        "For details see the broker logfile."
    )
    assert any(l.endswith("reply-text=" + text) for l in lines)


def test_refused_protocol_negotiation_shows_both_headers():
    lines = _show(cap=CAPS / "rabbitmq08_rejected.pcap")
    assert len(lines) == 2
    assert all("protocol-header" in l and "server answered AMQP 0 0 9 1 (0-9-1)" in l for l in lines)
    assert "client sent AMQP 0 0 8 0" in lines[1]


def test_heartbeats_are_shown_with_frames_only(tmp_path):
    dissect([str(CAP)], str(tmp_path / "o"), frames=True)
    f = pd.read_parquet(tmp_path / "o" / "frames")
    beats = f[f.type_name == "heartbeat"]
    assert len(beats) > 0
    assert not any(l.split()[5] == "heartbeat" for l in _show())
    lines = _show("--frames", "--method", "heartbeat")
    assert [int(l.split()[1]) for l in lines] == list(beats.frame_number)


def test_keep_secrets_shows_decoded_plain_and_amqplain_credentials():
    cap = CAPS / "rabbitmq091_pika_refused.pcap"
    hidden = [l for l in _show("--method", "connection.start-ok", cap=cap)]
    assert len(hidden) == 3 and all("user=amqpcap" in l and "password" not in l for l in hidden)
    shown = _show("--method", "connection.start-ok", "--keep-secrets", cap=cap)
    assert [l.split("mechanism=")[1] for l in shown] == [
        "PLAIN user=amqpcap password=wrong-pw-0000",
        "PLAIN user=amqpcap password=s3cret-pw",
        "AMQPLAIN user=amqpcap password=wrong-pw-0000",
    ]
    assert "$b64" not in "".join(shown)


def test_json_lines_carry_every_argument_and_the_addresses(tmp_path):
    import json

    dissect([str(CAP)], str(tmp_path / "o"))
    m = pd.read_parquet(tmp_path / "o" / "methods")
    c = pd.read_parquet(tmp_path / "o" / "connections").iloc[0]
    objs = [json.loads(l) for l in _show("--json")]
    assert len(objs) == len(m)
    for o, (_, row) in zip(objs, m.iterrows()):
        assert (o["frame"], o["method"], o["stream"], o["channel"]) == (
            row.frame_number,
            row.method,
            row.tcp_stream,
            row.channel,
        )
        want = json.loads(row.arguments)
        want.pop("response", None)
        assert {k: v for k, v in o["arguments"].items() if k not in ("user",)} == want
    assert objs[0]["client"] == f"{c.client_ip}:{c.client_port}"
    assert objs[0]["server"] == f"{c.server_ip}:{c.server_port}"


def test_csv_has_a_header_and_one_row_per_method(tmp_path):
    import csv
    import io

    dissect([str(CAP)], str(tmp_path / "o"))
    m = pd.read_parquet(tmp_path / "o" / "methods")
    r = subprocess.run(
        [sys.executable, "-m", "amqpcap.cli", "show", str(CAP), "--csv"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert list(rows[0]) == [
        "time",
        "frame",
        "stream",
        "direction",
        "channel",
        "method",
        "client",
        "server",
        "arguments",
        "body_size",
        "content_type",
        "delivery_mode",
        "correlation_id",
        "reply_to",
        "message_id",
        "properties",
    ]
    assert [(int(x["frame"]), x["method"]) for x in rows] == list(zip(m.frame_number, m.method))


def test_a_terminal_gets_a_header_row_and_a_pipe_does_not():
    import os
    import pty

    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(
            [sys.executable, "-m", "amqpcap.cli", "show", str(CAP), "--method", "basic.qos"],
            stdout=slave,
            stderr=subprocess.PIPE,
        )
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        p.wait(30)
    finally:
        os.close(master)
    lines = out.decode().splitlines()
    assert lines[0].split() == ["time", "frame", "strm", "dir", "ch", "method", "arguments"]
    assert lines[1].startswith("# stream 0: ") and "basic.qos" in lines[2]
    piped = _show("--method", "basic.qos", headers=True)
    assert piped[0].startswith("# stream 0: ") and "time" not in piped[0]


CAPTURES = Path(__file__).resolve().parents[1] / "captures"
# one capture of each version, with the messages its content-carrying methods carry
BY_VERSION = {
    "0-8": "rabbitmq08_amqplib.pcap",
    "0-9": "netamqp09_offline.pcap",
    "0-9-1": "rabbitmq091_pika_full.pcap",
    "0-10": "qpid010_basic.pcap",
}


@pytest.mark.parametrize("version", list(BY_VERSION))
def test_json_lines_of_content_methods_carry_the_messages_properties_and_body_size(version, tmp_path):
    import json

    cap = CAPTURES / BY_VERSION[version]
    dissect([str(cap)], str(tmp_path / "o"), ports=[5673])
    msgs = pd.read_parquet(tmp_path / "o" / "messages")
    objs = [json.loads(l) for l in _show("--json", "--ports", "5673", cap=cap)]
    ours = sorted(
        (o["frame"], o["method"], o["body_size"], json.dumps(o["properties"], sort_keys=True))
        + (o["message_id"], o["correlation_id"], o["reply_to"])
        for o in objs
        if "body_size" in o
    )
    want = sorted(
        (
            r.first_frame_number,
            r.method,
            r.body_size,
            json.dumps(json.loads(r.properties or "{}"), sort_keys=True),
        )
        + tuple(None if pd.isna(v) else v for v in (r.message_id, r.correlation_id, r.reply_to))
        for r in msgs.itertuples()
    )
    assert ours == want and len(ours) > 0
    # the lines stay in frame order
    frames = [o["frame"] for o in objs]
    assert frames == sorted(frames)


def test_csv_rows_of_publishes_read_with_pandas_give_each_messages_columns(tmp_path):
    import io

    dissect([str(CAP)], str(tmp_path / "o"))
    msgs = pd.read_parquet(tmp_path / "o" / "messages")
    r = subprocess.run(
        [sys.executable, "-m", "amqpcap.cli", "show", str(CAP), "--csv", "--method", "basic.publish"],
        capture_output=True,
        text=True,
        check=True,
    )
    df = pd.read_csv(io.StringIO(r.stdout))
    want = msgs[msgs.method == "basic.publish"]
    assert list(df.frame) == list(want.first_frame_number)
    assert list(df.body_size) == list(want.body_size)
    assert list(df.message_id.fillna("")) == list(want.message_id.fillna(""))
    assert list(df.delivery_mode.astype("Int64")) == list(want.delivery_mode.astype("Int64"))


def test_tshark_reads_the_same_message_ids_and_body_sizes():
    """tshark (AMQP 0-9-1 content headers) against the JSON lines of show."""
    import json
    import shutil

    exe = shutil.which("tshark")
    if exe is None:
        pytest.skip("tshark not installed")

    def field(name):
        out = subprocess.run(
            [exe, "-n", "-r", str(CAP), "-Y", "amqp.type == 2", "-T", "fields", "-E", "occurrence=a"]
            + ["-e", name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return sorted(v for line in out.splitlines() for v in line.split(",") if v)

    objs = [json.loads(l) for l in _show("--json")]
    sizes = sorted(str(o["body_size"]) for o in objs if "body_size" in o)
    ids = sorted(o["message_id"] for o in objs if o.get("message_id"))
    assert sizes == field("amqp.header.body-size") and len(sizes) > 10
    assert ids == field("amqp.method.properties.message_id") and len(ids) > 2


@pytest.mark.parametrize(
    ("value", "suggested"),
    [
        ("basic.bogus", "basic.qos"),
        ("Basic.Publsh", "basic.publish"),
        ("mesage.transfer", "message.transfer"),
    ],
)
def test_a_method_no_version_has_is_a_usage_error_naming_the_closest(value, suggested):
    r = subprocess.run(
        [sys.executable, "-m", "amqpcap.cli", "show", str(CAP), "--method", value],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 64 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert repr(value) in line and "did you mean" in line and suggested in line.split("did you mean")[1]


def test_method_names_and_classes_of_every_version_are_accepted():
    # 0-9 file/stream classes, 0-10 commands and controls, show's heartbeat lines
    values = ["file.open", "stream.", "message.transfer", "session.attach", "execution", "heartbeat"]
    lines = _show(*[a for v in values for a in ("--method", v)])
    assert lines == []  # none of them in this 0-9-1 capture, and no error
