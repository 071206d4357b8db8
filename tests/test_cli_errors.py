"""Exit codes (one table), one-line errors, signals, --version and --help of every command."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures import pcapgen as g

from amqpcap.exitcodes import MEANING, Exit

ROOT = Path(__file__).resolve().parents[1]
CAP = ROOT / "captures" / "rabbitmq091_pika_full.pcap"
AMQPCAP = [sys.executable, "-m", "amqpcap.cli"]
COMMANDS = ("dissect", "show", "stats", "report")


def run(*args, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(
        AMQPCAP + [str(a) for a in args], capture_output=True, text=True, env=e, timeout=120, **kw
    )


def one_line(r):
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.fixture()
def cache(tmp_path):
    return {"XDG_CACHE_HOME": str(tmp_path / "cache")}


# -- stats and report get dissect's codes --------------------------------------------------


@pytest.mark.parametrize("cmd", ["stats", "report"])
def test_missing_path_is_unreadable_3_like_dissect(cmd, tmp_path, cache):
    extra = ["-o", tmp_path / "r"] if cmd == "report" else []
    r = run(cmd, "/nope", *extra, env=cache)
    assert r.returncode == Exit.UNREADABLE == run("dissect", "/nope", "-o", tmp_path / "d").returncode
    assert "/nope: no such file" in one_line(r)


@pytest.mark.parametrize("cmd", ["stats", "report"])
def test_a_directory_that_is_not_a_dissect_output_is_3(cmd, tmp_path, cache):
    extra = ["-o", tmp_path / "r"] if cmd == "report" else []
    r = run(cmd, tmp_path, *extra, env=cache)
    assert r.returncode == Exit.UNREADABLE
    assert "not a dissect output" in one_line(r)


@pytest.mark.parametrize("cmd", ["stats", "report"])
def test_a_dissect_output_missing_a_table_is_3_naming_the_directory_and_the_table(cmd, tmp_path, cache):
    out = tmp_path / "out"
    assert run("dissect", CAP, "-o", out).returncode == 0
    shutil.rmtree(out / "messages")
    extra = ["-o", tmp_path / "r"] if cmd == "report" else []
    r = run(cmd, out, *extra, env=cache)
    assert r.returncode == Exit.UNREADABLE
    assert one_line(r) == f"amqpcap: {out}: no messages/ table (not a dissect output?)"


def _cut_footer(data: bytes) -> bytes:
    return data[:-40]  # what a torn copy leaves: pyarrow's ArrowInvalid, no Parquet footer


def _damaged_pages(data: bytes) -> bytes:
    # every column chunk overwritten, the footer whole: the footer reads, the pages do not
    # (pyarrow's OSError with no file named)
    footer = int.from_bytes(data[-8:-4], "little")
    end = len(data) - 8 - footer
    return data[:4] + b"\xff" * (end - 4) + data[end:]


@pytest.mark.parametrize("cmd", ["stats", "report"])
@pytest.mark.parametrize("table", ["methods", "connections"])
@pytest.mark.parametrize("damage", [_cut_footer, _damaged_pages])
def test_a_damaged_table_of_a_dissect_output_is_3_naming_its_file(cmd, table, damage, tmp_path, cache):
    out = tmp_path / "out"
    assert run("dissect", CAP, "-o", out).returncode == 0
    (part,) = (out / table).glob("*.parquet")
    part.write_bytes(damage(part.read_bytes()))
    extra = ["-o", tmp_path / "r"] if cmd == "report" else []
    r = run(cmd, out, *extra, env=cache)
    assert r.returncode == Exit.UNREADABLE, r.stderr
    assert one_line(r).startswith(f"amqpcap: {part}: a table cannot be read (")


@pytest.mark.parametrize("cmd", ["stats", "report"])
def test_an_arrow_error_of_the_analysis_is_an_internal_error_not_an_unreadable_table(
    cmd, tmp_path, monkeypatch, capsys
):
    """Only a read of a table is exit 3: an ArrowInvalid of what the analysis computes is a bug."""
    import pyarrow as pa

    from amqpcap import analysis, cli
    from amqpcap.analysis import report

    out = tmp_path / "out"
    assert run("dissect", CAP, "-o", out).returncode == 0

    def analysis_bug(*a, **kw):
        raise pa.ArrowInvalid("an analysis bug")

    monkeypatch.setattr(analysis, "stats", analysis_bug)
    monkeypatch.setattr(report, "write_report", analysis_bug)
    monkeypatch.delenv("AMQPCAP_DEBUG", raising=False)
    extra = ["-o", str(tmp_path / "r")] if cmd == "report" else []
    code = cli.main([cmd, str(out), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == Exit.INTERNAL
    assert err == ["amqpcap: internal error: ArrowInvalid: an analysis bug (set AMQPCAP_DEBUG=1 for details)"]


def test_a_dissect_of_what_is_not_a_capture_says_so_before_importing_pyarrow(tmp_path):
    """pyarrow is imported to write the first batch, not before: bad input gets its one-line
    error from a process that never loaded it."""
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    probe = (
        "import sys; from amqpcap import cli\n"
        "sys.argv = ['amqpcap'] + sys.argv[1:]\n"
        "code = cli.main()\n"
        "print(code, 'pyarrow' in sys.modules)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe, "dissect", str(p), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.split() == [str(int(Exit.NOT_A_CAPTURE)), "False"], r.stdout + r.stderr
    assert "not a pcap/pcapng capture" in one_line(r)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["notes.txt"]


def test_dissect_of_several_inputs_writes_the_readable_ones_and_names_each_unreadable_one(tmp_path):
    """Like spark: what can be read is written, one line per input left out, the first one's code."""
    import pyarrow.parquet as pq

    from amqpcap.pipeline import dissect

    empty, missing = tmp_path / "empty.pcap", tmp_path / "missing.pcap"
    empty.write_bytes(b"")
    other = ROOT / "captures" / "rabbitmq091_pika_refused.pcap"
    r = run("dissect", CAP, empty, other, missing, "-o", tmp_path / "out")
    assert r.returncode == Exit.NOT_A_CAPTURE, r.stderr
    assert r.stderr.splitlines() == [
        f"amqpcap: {empty}: empty file, not a capture",
        f"amqpcap: {missing}: no such file",
    ]
    assert "2 capture(s)" in r.stdout
    dissect([str(CAP), str(other)], str(tmp_path / "want"))
    for table in ("connections", "methods", "messages", "anomalies"):
        got = pq.read_table(tmp_path / "out" / table).drop(["capture"])
        want = pq.read_table(tmp_path / "want" / table).drop(["capture"])
        assert got.equals(want), table


def test_dissect_of_inputs_none_of_which_can_be_read_names_each_and_writes_nothing(tmp_path):
    empty, text = tmp_path / "empty.pcap", tmp_path / "notes.txt"
    empty.write_bytes(b"")
    text.write_text("hello\n")
    r = run("dissect", empty, text, "-o", tmp_path / "out")
    assert r.returncode == Exit.NOT_A_CAPTURE
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and str(empty) in lines[0] and str(text) in lines[1]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cmd", ["dissect", "spark"])
def test_dissect_and_spark_help_say_what_happens_to_an_input_that_cannot_be_read(cmd):
    text = " ".join(run(cmd, "--help").stdout.split())
    assert "one that cannot be read is named on stderr and left out, the others are written" in text


def test_spark_help_lists_every_suffix_its_directory_search_takes():
    from amqpcap.spark.plan import CAPTURE_SUFFIXES

    text = " ".join(run("spark", "--help").stdout.split())
    assert all(f"*{s}" in text for s in CAPTURE_SUFFIXES)


@pytest.mark.parametrize("cmd", ["stats", "report"])
def test_help_says_where_the_cache_is_how_to_move_it_and_how_to_clear_it(cmd):
    text = " ".join(run(cmd, "--help").stdout.split())
    assert "$XDG_CACHE_HOME/amqpcap" in text and "~/.cache/amqpcap" in text
    assert "delete that directory to clear it" in text
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "rm -rf ~/.cache/amqpcap" in readme and "XDG_CACHE_HOME=" in readme


def test_stats_of_a_text_file_is_not_a_capture_2(tmp_path, cache):
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    r = run("stats", p, env=cache)
    assert r.returncode == Exit.NOT_A_CAPTURE and "not a pcap/pcapng capture" in one_line(r)


def test_report_onto_an_existing_file_is_output_exists_5(tmp_path, cache):
    f = tmp_path / "existing-file"
    f.write_text("keep me")
    r = run("report", CAP, "-o", f, env=cache)
    assert r.returncode == Exit.OUTPUT_EXISTS and "--force" in one_line(r)
    assert f.read_text() == "keep me"


def test_report_with_force_replaces_an_existing_file_as_dissect_does(tmp_path, cache):
    f = tmp_path / "existing-file"
    f.write_text("replace me")
    r = run("report", CAP, "-o", f, "--force", env=cache)
    assert r.returncode == 0, r.stderr
    assert (f / "index.html").is_file()


def test_report_refuses_a_non_empty_directory_without_force(tmp_path, cache):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "mine.txt").write_text("x")
    r = run("report", CAP, "-o", out, env=cache)
    assert r.returncode == Exit.OUTPUT_EXISTS and "--force" in one_line(r)
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    r = run("report", CAP, "-o", out, "--force", env=cache)
    assert r.returncode == 0, r.stderr
    assert (out / "index.html").exists()


def test_unwritable_output_path_is_3_not_internal(tmp_path, cache):
    # Under a regular file nothing can be created, even as root (ENOTDIR).
    f = tmp_path / "file"
    f.write_text("x")
    for args in (("dissect", CAP, "-o", f / "out"), ("report", CAP, "-o", f / "rep")):
        r = run(*args, env=cache)
        assert r.returncode == Exit.UNREADABLE, (args, r.stderr)
        assert one_line(r) == f"amqpcap: {args[-1]}: not a directory"  # OUT, not a temporary name


def test_stats_on_a_capture_says_it_dissects_it_and_where_it_caches_it(tmp_path, cache):
    r = run("stats", CAP, env=cache)
    assert r.returncode == 0
    cached = Path(cache["XDG_CACHE_HOME"]) / "amqpcap"
    (entry,) = [p for p in cached.iterdir() if not p.name.startswith(".")]
    assert one_line(r) == f"amqpcap: dissecting {CAP} (cached in {entry})"
    r = run("stats", CAP, env=cache)
    assert one_line(r) == f"amqpcap: using the dissection of {CAP} cached in {entry}"


def test_stats_reads_standard_input(tmp_path, cache):
    want = run("stats", CAP, "--json", env=cache).stdout
    r = subprocess.run(
        AMQPCAP + ["stats", "-", "--json"],
        input=CAP.read_bytes(),
        capture_output=True,
        env={**os.environ, **cache},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    want = json.loads(want)
    assert got.pop("captures") == ["-"] and want.pop("captures") == [str(CAP)]
    # each error names the capture it first happened in: standard input is "-"
    text = json.dumps(got).replace('"first_capture": "-"', f'"first_capture": {json.dumps(str(CAP))}')
    assert '"first_capture": "-"' in json.dumps(got)
    assert json.loads(text) == want and got["connections"] > 0


# -- no AMQP in the capture ------------------------------------------------------------------


def _http_only(tmp_path):
    segs = g.tcp_conversation(
        [("c", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ("s", b"HTTP/1.1 200 OK\r\n\r\n")],
        client=("10.0.0.1", 40000),
        server=("10.0.0.2", 8080),
    )
    path = tmp_path / "http.pcap"
    g.write(path, g.pcap_bytes(g.to_packets(segs)))
    return path


@pytest.mark.parametrize("cmd", COMMANDS)
def test_no_amqp_says_so_in_one_line_with_exit_6(cmd, tmp_path, cache):
    cap = _http_only(tmp_path)
    extra = {"dissect": ["-o", tmp_path / "o", "-q"], "report": ["-o", tmp_path / "r"]}.get(cmd, [])
    r = run(cmd, cap, *extra, env=cache)
    assert r.returncode == Exit.NO_AMQP
    # stats and report first say that they dissect the capture
    lines = r.stderr.strip().splitlines()
    assert len(lines) == (1 if cmd in ("dissect", "show") else 2) and "Traceback" not in r.stderr
    line = lines[-1]
    assert line.startswith("amqpcap: no AMQP conversations found")
    assert "--ports" in line
    assert "1 TCP conversation(s) seen (server ports 8080); try --ports 8080" in line
    if cmd == "report":
        assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_amqp_on_an_unknown_port_is_found_with_ports(tmp_path):
    from fixtures import amqp09 as A

    segs = g.tcp_conversation(
        [
            ("s", A.method_frame(0, "connection.tune", channel_max=0, frame_max=131072, heartbeat=60)),
            ("c", A.method_frame(0, "connection.tune-ok", channel_max=0, frame_max=131072, heartbeat=60)),
        ],
        client=("10.0.0.1", 40000),
        server=("10.0.0.2", 15999),
        handshake=False,
    )
    cap = tmp_path / "odd.pcap"
    g.write(cap, g.pcap_bytes(g.to_packets(segs)))
    r = run("show", cap)
    assert r.returncode == Exit.NO_AMQP and "try --ports 15999" in one_line(r)
    r = run("show", cap, "--ports", "15999")
    assert r.returncode == 0 and "connection.tune-ok" in r.stdout


# -- signals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sig, code",
    [(signal.SIGTERM, Exit.TERMINATED), (signal.SIGHUP, Exit.HANGUP), (signal.SIGINT, Exit.INTERRUPTED)],
)
def test_signal_to_a_running_dissect_removes_the_partial_output(tmp_path, sig, code):
    fifo = tmp_path / "cap.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    p = subprocess.Popen(
        AMQPCAP + ["dissect", str(fifo), "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with open(fifo, "wb") as w:
        w.write(CAP.read_bytes())  # the whole capture, but the pipe stays open: dissect keeps running
        w.flush()
        deadline = time.monotonic() + 30
        while not list(tmp_path.glob("out.tmp-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(tmp_path.glob("out.tmp-*")), "dissect did not start writing"
        time.sleep(0.3)
        assert p.poll() is None
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
    assert p.returncode == code
    assert len(err.strip().splitlines()) == 1 and "partial output removed" in err, err
    assert sorted(x.name for x in tmp_path.iterdir()) == ["cap.fifo"]


def test_force_over_an_existing_file_leaves_no_old_copy(tmp_path):
    f = tmp_path / "existing-file"
    f.write_text("x")
    r = run("dissect", CAP, "-o", f, "--force", "-q")
    assert r.returncode == 0, r.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["existing-file"] and f.is_dir()


# -- --version and --help --------------------------------------------------------------------


def test_version_names_the_decoder_that_runs():
    from amqpcap import __version__, compiled

    r = run("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"amqpcap {__version__} ({compiled.describe()})"
    r = run("--version", env={**os.environ, "AMQPCAP_PURE": "1"})
    pure = "pure Python (AMQPCAP_PURE is set)"
    parts = "; ".join(f"{p.what}: {pure}" for p in compiled.PARTS.values())
    assert r.stdout.strip() == f"amqpcap {__version__} ({parts})"
    assert "decoder: " in parts and "row builder: " in parts and "link parser: " in parts


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_of_every_command_names_each_positional_gives_examples_and_exit_codes(cmd):
    from amqpcap.cli import build_parser

    r = run(cmd, "--help")
    assert r.returncode == 0
    sub = build_parser()._subparsers._group_actions[0].choices[cmd]
    positionals = [a for a in sub._actions if not a.option_strings]
    assert positionals
    text = " ".join(r.stdout.split())
    for a in positionals:
        assert a.metavar in text and a.help and a.help[:30] in text, a.metavar
    assert f"amqpcap {cmd} " in r.stdout.split("examples:")[1]
    for code, text in MEANING.items():
        assert f"{int(code):>3}  {text}" in r.stdout


def test_exit_code_table_is_the_one_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for code, text in MEANING.items():
        assert f"| {int(code)} | {text} |" in readme


def test_stats_of_a_dissect_output_without_amqp_says_so(tmp_path, cache):
    cap = _http_only(tmp_path)
    assert run("dissect", cap, "-o", tmp_path / "o", "-q").returncode == Exit.NO_AMQP
    for spark in ([], ["--spark"]):  # (--spark: said before any JVM is started)
        r = run("stats", tmp_path / "o", *spark, env=cache)
        assert r.returncode == Exit.NO_AMQP
        assert one_line(r).startswith(
            f"amqpcap: no AMQP conversations found in {tmp_path / 'o'}; try dissect --ports"
        )


def test_stats_from_standard_input_without_amqp_counts_the_tcp_conversations(tmp_path, cache):
    cap = _http_only(tmp_path)
    r = subprocess.run(
        AMQPCAP + ["stats", "-"],
        input=cap.read_bytes(),
        capture_output=True,
        env={**os.environ, **cache},
        timeout=120,
    )
    assert r.returncode == Exit.NO_AMQP
    last = r.stderr.decode().strip().splitlines()[-1]
    assert last.endswith("(server ports 8080); try --ports 8080 if AMQP runs there")


@pytest.mark.parametrize("cmd", ["dissect", "report"])
def test_permission_denied_on_the_output_is_3_in_one_line(cmd, tmp_path, monkeypatch, capsys):
    # Root ignores directory modes, so the refusal is simulated where the output is created.
    from amqpcap import cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "ro" / "out"
    real_makedirs = os.makedirs

    def makedirs(path, *a, **kw):
        if str(path).startswith(str(tmp_path / "ro")):
            raise PermissionError(13, "Permission denied", str(path))
        return real_makedirs(path, *a, **kw)

    monkeypatch.setattr(os, "makedirs", makedirs)
    code = cli.main([cmd, str(CAP), "-o", str(out)] + (["-q"] if cmd == "dissect" else []))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == Exit.UNREADABLE
    assert err[-1].startswith("amqpcap: ") and err[-1].endswith(": permission denied")


ARGS = {  # arguments each command parses
    "dissect": ["a.pcap", "-o", "out", "--ports", "5673"],
    "show": ["a.pcap", "--json", "--method", "basic."],
    "stats": ["out", "--spark"],
    "report": ["out", "-o", "r"],
    "spark": ["captures", "-o", "out"],
    "live": ["-i", "lo"],
}


@pytest.mark.parametrize("cmd", list(ARGS))
def test_a_command_alone_gets_the_parser_the_full_one_gives_it(cmd):
    from amqpcap.cli import COMMANDS, build_parser

    def subparser(parser):
        return parser._subparsers._group_actions[0].choices

    alone, full = subparser(build_parser(cmd)), subparser(build_parser())
    assert list(alone) == [cmd] and list(full) == list(COMMANDS)
    assert alone[cmd].format_help() == full[cmd].format_help()
    assert build_parser(cmd).parse_args([cmd, *ARGS[cmd]]) == build_parser().parse_args([cmd, *ARGS[cmd]])


def after_the_dissect_parser(expr: str) -> str:
    """What ``print(expr)`` prints in a fresh process that built and used the dissect parser."""
    code = (
        "import sys; from amqpcap import cli; "
        "cli.build_parser('dissect').parse_args(['dissect', 'a', '-o', 'b']); "
        f"print({expr})"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_building_the_parser_asks_no_terminal_width_and_help_still_fits_the_terminal():
    """A formatter made while the parsers are built (one per add_argument) has a fixed width, so
    building them imports no shutil; what is printed is wrapped to the terminal (COLUMNS)."""
    out = after_the_dissect_parser("'shutil' in sys.modules, cli._Parser.building")
    assert out.split() == ["False", "False"], out
    narrow = run("dissect", "--help", env={**os.environ, "COLUMNS": "50"})
    wide = run("dissect", "--help", env={**os.environ, "COLUMNS": "200"})
    assert narrow.returncode == wide.returncode == 0
    usage_narrow, usage_wide = (r.stdout.split("\n\n")[0].splitlines() for r in (narrow, wide))
    assert len(usage_narrow) > 1 and max(map(len, usage_narrow)) <= 50
    assert len(usage_wide) == 1 and len(usage_wide[0]) > 50


def test_the_dissect_process_imports_no_other_command():
    out = after_the_dissect_parser("[m for m in sys.modules if m in ('amqpcap.live', 'amqpcap.spark.cli')]")
    assert "amqpcap" not in out, out


@pytest.mark.parametrize("background", [True, False], ids=["parquet-thread", "foreground"])
def test_a_full_disk_is_an_output_that_cannot_be_written_not_an_internal_error(tmp_path, background):
    """pyarrow's I/O errors name no file: the writer names the one it was writing (exit 3)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    probe = (
        "import sys; from amqpcap import cli; from amqpcap.records import writer\n"
        f"writer.BACKGROUND = {background}\n"
        "opened = writer.open_parquet\n"
        "def full(path, schema, reference=False):  # every write of the methods table: ENOSPC\n"
        "    return opened('/dev/full' if '/methods/' in path else path, schema, reference)\n"
        "writer.open_parquet = full\n"
        "sys.argv = ['amqpcap'] + sys.argv[1:]; cli.console()\n"
    )
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-c", probe, "dissect", str(CAP), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == Exit.UNREADABLE, r.stderr
    line = one_line(r)
    assert line.endswith("methods/part-00000.parquet: no space left on device"), line
    assert "internal error" not in line
    assert os.listdir(tmp_path) == []  # the partial output removed


@pytest.mark.parametrize("cmd", ["show", "stats"])
def test_standard_output_on_a_full_disk_exits_3_in_one_line(cmd, cache):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            AMQPCAP + [cmd, str(CAP)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **cache},
        )
    assert r.returncode == Exit.UNREADABLE
    lines = [line for line in r.stderr.splitlines() if not line.startswith("amqpcap: dissecting")]
    assert lines == ["amqpcap: cannot write: no space left on device"], r.stderr
