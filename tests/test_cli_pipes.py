"""Captures through pipes, FIFOs and standard input: opened once, read as the bytes arrive."""

import gzip
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from fixtures import amqp09 as A

ROOT = Path(__file__).resolve().parents[1]
CAP = ROOT / "captures" / "rabbitmq091_pika_blocked.pcap"
AMQPCAP = [sys.executable, "-m", "amqpcap.cli"]


def _lines(text):
    return [line for line in text.splitlines() if line.strip()]


def _show_file(path=CAP):
    r = subprocess.run(AMQPCAP + ["show", str(path)], capture_output=True, text=True, check=True)
    return _lines(r.stdout)


def _piped(args, feed: bytes):
    """``cat | amqpcap ARGS``: a real pipe between two processes."""
    cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    r = subprocess.Popen(
        AMQPCAP + args, stdin=cat.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    cat.stdout.close()
    cat.stdin.write(feed)
    cat.stdin.close()
    out, err = r.communicate(timeout=60)
    cat.wait(10)
    return r.returncode, out, err


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_show_reads_a_capture_piped_to_standard_input(name):
    want = _show_file()
    assert len(want) == 25 and want[0].startswith("# stream 0: ")  # the stream's header line, 24 methods
    rc, out, err = _piped(["show", name], CAP.read_bytes())
    assert rc == 0, err
    assert _lines(out) == want


def test_show_reads_gzip_from_standard_input():
    rc, out, err = _piped(["show", "-"], gzip.compress(CAP.read_bytes()))
    assert rc == 0, err
    assert _lines(out) == _show_file()


def _table(out, name):
    df = pd.read_parquet(Path(out) / name)
    return df.sort_values(["tcp_stream", "frame_number"]).reset_index(drop=True)


def test_dissect_from_standard_input_writes_the_same_dataset_as_from_the_file(tmp_path):
    subprocess.run(AMQPCAP + ["dissect", str(CAP), "-o", str(tmp_path / "file"), "-q"], check=True)
    rc, _out, err = _piped(["dissect", "-", "-o", str(tmp_path / "pipe"), "-q"], CAP.read_bytes())
    assert rc == 0, err
    for t in ("methods", "messages", "connections"):
        a = _table(tmp_path / "file", t).drop(columns="capture")
        b = _table(tmp_path / "pipe", t).drop(columns="capture")
        assert len(a) > 0
        pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("command", ["dissect", "show"])
def test_dissect_leaves_without_teardown_with_its_output_flushed_and_written(tmp_path, command):
    """cli.leave: ``dissect`` exits with os._exit once main returns (no interpreter teardown:
    an atexit handler does not run), its summary flushed into the pipe and its dataset whole;
    other commands exit normally."""
    args = [command, str(CAP)] + (["-o", str(tmp_path / "out")] if command == "dissect" else [])
    code = (
        "import atexit, sys; atexit.register(lambda: print('TEARDOWN', flush=True)); "
        f"sys.argv = ['amqpcap'] + {args!r}; from amqpcap.cli import console; console()"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    if command == "dissect":
        assert "TEARDOWN" not in r.stdout
        assert "written to" in r.stdout + r.stderr and "methods" in r.stdout + r.stderr
        assert len(_table(tmp_path / "out", "methods")) > 0
    else:
        assert r.stdout.rstrip().endswith("TEARDOWN") and len(_lines(r.stdout)) > 10


@pytest.mark.parametrize("command", ["stats", "report"])
def test_stats_and_report_leave_without_teardown_with_their_output_whole(tmp_path, command):
    """cli.LEAVE_WHEN_ALONE: once main returns, with no Spark JVM and no forked process alive,
    ``stats`` and ``report`` exit with os._exit (an atexit handler does not run), stats' JSON
    flushed into the pipe whole and the report's files written."""
    out = tmp_path / "out"
    subprocess.run(AMQPCAP + ["dissect", str(CAP), "-o", str(out)], check=True, capture_output=True)
    args = [command, str(out)] + (["--json"] if command == "stats" else ["-o", str(tmp_path / "rep")])
    code = (
        "import atexit, sys; atexit.register(lambda: print('TEARDOWN', flush=True)); "
        f"sys.argv = ['amqpcap'] + {args!r}; from amqpcap.cli import console; console()"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "TEARDOWN" not in r.stdout
    if command == "stats":
        assert json.loads(r.stdout)["connections"] >= 1
    else:
        assert r.stdout.startswith("report written to")
        assert (tmp_path / "rep" / "index.html").stat().st_size > 10_000


def test_a_forked_child_alive_or_a_spark_jvm_keeps_the_exit_handlers():
    code = (
        "import multiprocessing, sys, time\n"
        "from amqpcap.cli import alone\n"
        "assert alone()\n"
        "child = multiprocessing.get_context('fork').Process(target=time.sleep, args=(30,), daemon=True)\n"
        "child.start()\n"
        "assert not alone()  # (its handler ends the child)\n"
        "child.terminate(); child.join()\n"
        "assert alone()\n"
        "sys.modules['pyspark'] = sys  # (a session may have started a JVM)\n"
        "assert not alone()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_dissect_reads_a_fifo(tmp_path):
    fifo = tmp_path / "cap.fifo"
    os.mkfifo(fifo)
    data = CAP.read_bytes()

    def writer():
        with open(fifo, "wb") as f:
            f.write(data)

    t = threading.Thread(target=writer)
    t.start()
    r = subprocess.run(
        AMQPCAP + ["dissect", str(fifo), "-o", str(tmp_path / "o"), "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    t.join(10)
    assert r.returncode == 0, r.stderr
    assert len(pd.read_parquet(tmp_path / "o" / "methods")) == 24


def test_process_substitution_path_is_read_once(tmp_path):
    if not shutil.which("bash"):
        pytest.fail("bash is needed for <(...)")
    cmd = f"{sys.executable} -m amqpcap.cli dissect <(cat {CAP}) -o {tmp_path / 'o'} -q"
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(pd.read_parquet(tmp_path / "o" / "methods")) == 24


class _Lines:
    """Lines of a child's stdout as they come (a thread reads them: select() cannot see Python's buffer)."""

    def __init__(self, f):
        self.q = queue.Queue()

        def pump():
            for line in iter(f.readline, b""):
                self.q.put(line)

        threading.Thread(target=pump, daemon=True).start()

    def next(self, timeout):
        """The next line that is not a stream header ("# stream N: ..."), or None after ``timeout``."""
        while True:
            try:
                line = self.q.get(timeout=timeout)
            except queue.Empty:
                return None
            if not line.startswith(b"#"):
                return line


def test_show_prints_each_method_while_the_pipe_is_still_open():
    data = CAP.read_bytes()
    p = subprocess.Popen(
        AMQPCAP + ["show", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        # The pcap header and the first third of the packets; the pipe stays open.
        p.stdin.write(data[: len(data) // 3])
        p.stdin.flush()
        first = _Lines(p.stdout).next(30)
        assert first is not None, "show printed nothing before its input ended"
        assert b"connection.start" in first
        assert p.poll() is None
    finally:
        p.stdin.close()
        p.wait(30)
    assert p.returncode == 0


def test_a_pipe_cannot_be_iterated_twice_and_says_so():
    from amqpcap.capture.reader import CaptureError, open_capture

    r, w = os.pipe()
    with os.fdopen(w, "wb") as f:
        f.write(CAP.read_bytes()[:4096])
    src = open_capture(f"/dev/fd/{r}")
    try:
        assert len(list(src)) > 0
        with pytest.raises(CaptureError, match="only once"):
            list(src)
    finally:
        src.close()
        os.close(r)


def test_standard_input_on_a_terminal_is_refused_in_one_line():
    import pty

    master, slave = pty.openpty()
    try:
        r = subprocess.run(AMQPCAP + ["show", "-"], stdin=slave, capture_output=True, text=True, timeout=30)
    finally:
        os.close(master)
        os.close(slave)
    assert r.returncode == 2
    assert _lines(r.stderr) == [r.stderr.strip()] and "terminal" in r.stderr


# -- a real tcpdump writing to a pipe ---------------------------------------------------------


def _need_tcpdump():
    # scripts/test.sh installs tcpdump and sets AMQPCAP_REQUIRE_TOOLS in CI: a missing tool fails
    if shutil.which("tcpdump") is None or os.geteuid() != 0:
        (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)("needs tcpdump and root")


def _tcpdump_to(args, port, stdout=subprocess.PIPE):
    td = subprocess.Popen(
        [
            "tcpdump",
            "-i",
            "lo",
            "-U",
            "--immediate-mode",
            "-n",
            "-s",
            "0",
            "-w",
            "-",
            "tcp",
            "port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    line = td.stderr.readline()  # "listening on lo, ..."
    if b"listening" not in line:
        td.kill()
        (pytest.fail if os.environ.get("AMQPCAP_REQUIRE_TOOLS") else pytest.skip)(
            f"tcpdump did not start: {line!r}"
        )
    amq = subprocess.Popen(AMQPCAP + args, stdin=td.stdout, stdout=stdout, stderr=subprocess.PIPE)
    td.stdout.close()
    return td, amq


def _amqp_exchange(port):
    """A client sends the 0-9-1 header; the server answers connection.start, then close."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(1)
    start = A.method_frame(
        0,
        "connection.start",
        version_major=0,
        version_minor=9,
        server_properties={"product": "pipe-test"},
        mechanisms=b"PLAIN",
        locales=b"en_US",
    )
    close = A.method_frame(0, "connection.close", reply_code=320, reply_text="bye", class_id=0, method_id=0)

    def serve():
        c, _ = srv.accept()
        c.recv(8)
        c.sendall(start)
        time.sleep(0.3)
        c.sendall(close)
        try:
            c.recv(100)
        except OSError:  # the client may reset the connection first
            pass
        c.close()

    t = threading.Thread(target=serve)
    t.start()
    cli = socket.create_connection(("127.0.0.1", port))
    cli.sendall(A.protocol_header("0-9-1"))
    return srv, cli, t


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_tcpdump_write_to_stdout_piped_into_show_prints_as_packets_arrive():
    _need_tcpdump()
    port = _free_port()
    td, amq = _tcpdump_to(["show", "-", "--ports", str(port)], port)
    lines = _Lines(amq.stdout)
    try:
        srv, cli, t = _amqp_exchange(port)
        # connection.start is printed while tcpdump is still capturing
        line = lines.next(20)
        assert line is not None and b"connection.start" in line, line
        assert td.poll() is None
        time.sleep(0.5)
        cli.sendall(b"x")
        cli.close()
        t.join(5)
        srv.close()
        line = lines.next(20)
        assert line is not None and b"connection.close" in line and b"reply-code=320" in line
    finally:
        td.send_signal(signal.SIGINT)
        td.wait(10)
        amq.wait(20)
    assert amq.returncode == 0, amq.stderr.read()


def test_tcpdump_write_to_stdout_piped_into_dissect(tmp_path):
    _need_tcpdump()
    port = _free_port()
    td, amq = _tcpdump_to(
        ["dissect", "-", "-o", str(tmp_path / "o"), "-q", "--ports", str(port)],
        port,
        stdout=subprocess.DEVNULL,
    )
    try:
        srv, cli, t = _amqp_exchange(port)
        time.sleep(0.5)
        cli.sendall(b"x")
        cli.close()
        t.join(5)
        srv.close()
        time.sleep(0.5)
    finally:
        td.send_signal(signal.SIGINT)
        td.wait(10)
        amq.wait(30)
    assert amq.returncode == 0, amq.stderr.read()
    m = pd.read_parquet(tmp_path / "o" / "methods")
    assert list(m.method) == ["connection.start", "connection.close"]
    c = pd.read_parquet(tmp_path / "o" / "connections")
    assert list(c.server_port) == [port] and c.iloc[0].client_header is not None


def test_show_decompresses_gzip_from_a_pipe_as_it_arrives():
    data = gzip.compress(CAP.read_bytes())
    p = subprocess.Popen(
        AMQPCAP + ["show", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        p.stdin.write(data[: len(data) // 2])
        p.stdin.flush()
        first = _Lines(p.stdout).next(30)
        assert first is not None and b"connection.start" in first
        assert p.poll() is None
    finally:
        p.stdin.close()
        p.wait(30)


def test_dissect_closes_every_input_when_it_refuses_to_write(tmp_path):
    from amqpcap.pipeline import dissect
    from amqpcap.records.writer import OutputExists

    (tmp_path / "out").mkdir()
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OutputExists):
        dissect([str(CAP), str(CAP)], str(tmp_path / "out"))
    assert len(os.listdir("/proc/self/fd")) == before


def test_stats_of_a_process_substitution_is_dissected_once_and_not_cached(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    want = subprocess.run(
        AMQPCAP + ["stats", str(CAP), "--json"], capture_output=True, text=True, env=env, check=True
    ).stdout
    cmd = f"{sys.executable} -m amqpcap.cli stats <(cat {CAP}) --json"
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "(a pipe: not cached)" in r.stderr
    import json

    got, want = json.loads(r.stdout), json.loads(want)
    got.pop("captures"), want.pop("captures")
    assert got == want


@pytest.mark.parametrize("args", [["--version"], ["dissect", "--help"]])
def test_a_reader_that_went_away_is_not_an_error(args):
    """``amqpcap --version | head -c 0``: the pipe's reader is gone before the text is written."""
    read, write = os.pipe()
    os.close(read)
    r = subprocess.run(AMQPCAP + args, stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    os.close(write)
    assert r.returncode == 0
    assert "Traceback" not in r.stderr and "Error" not in r.stderr
