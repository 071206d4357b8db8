"""amqpcap command line: dissect, show, stats, report (README.md, "Command line").

Exit codes: ``amqpcap.exitcodes`` (the one table; every ``--help`` prints it).

Adding a subcommand (the Spark and scapy front ends do): put its name and module in
``SUBCOMMAND_MODULES``; the module's ``register(sub)`` calls ``sub.add_parser(...)`` and
``set_defaults(run=handler)`` where ``handler(args) -> int`` is the exit code.
Keep that module's imports light: ``amqpcap --help`` and an unknown command import it.
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import errno
import gc
import importlib
import importlib.util
import os
import signal
import sys
import types

from amqpcap import __version__
from amqpcap.exitcodes import TABLE as EXIT_TABLE
from amqpcap.exitcodes import Exit

#: Subcommand -> the module whose ``register(sub)`` adds it (see the module docstring).
SUBCOMMAND_MODULES: dict[str, str] = {"spark": "amqpcap.spark.cli", "live": "amqpcap.live"}

STDIN = "-"


class _Parser(argparse.ArgumentParser):
    # argparse makes a help formatter for every add_argument (to check its nargs), and a formatter
    # asks for the terminal's width (shutil's import: ~1.5 ms of every start).  While the parsers
    # are built nothing is printed: a fixed width then, the terminal's for what is printed.
    building = False

    def _get_formatter(self):
        if _Parser.building:
            return self.formatter_class(prog=self.prog, width=80)
        return super()._get_formatter()

    def error(self, message):  # one line, and a usage exit code distinct from the capture errors
        self.exit(Exit.USAGE, f"amqpcap: {message}\n")


def port_list(text: str):
    try:
        ports = [int(p) for p in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port list: {text!r}") from None
    if any(not 0 < p < 65536 for p in ports):
        raise argparse.ArgumentTypeError(f"port out of range in {text!r}")
    return ports


def nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return v


def _epilog(*examples: str) -> str:
    return "examples:\n" + "\n".join(f"  {e}" for e in examples) + "\n\n" + EXIT_TABLE


def add_command(sub, name: str, help: str, examples, run) -> argparse.ArgumentParser:
    """A subparser with the house style: help, examples and exit codes in ``--help``."""
    p = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=_epilog(*examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(run=run)
    return p


_CAPTURE_HELP = (
    "pcap or pcapng file, gzip-compressed or not; - reads standard input (a pipe from tcpdump -w -)"
)
# dissect's and spark's CAPTURE: the same behaviour with an input that cannot be read
SEVERAL_HELP = (
    "; several make one dataset: one that cannot be read is named on stderr and left out, "
    "the others are written and the exit code is the first unreadable one's"
)
_ANALYSE_HELP = (
    "a dissect output directory, or a capture (dissected into the cache, "
    "$XDG_CACHE_HOME/amqpcap or else ~/.cache/amqpcap: delete that directory to clear it; "
    "- reads standard input)"
)


class _Version(argparse.Action):
    """``--version``: the version and which 0-8/0-9/0-9-1 decoder runs (compiled or pure Python,
    and why), decided only when asked (the check imports the extension and hashes its sources)."""

    def __init__(self, option_strings, dest, **kw) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from amqpcap import compiled

        print(f"amqpcap {__version__} ({compiled.describe()})")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``amqpcap`` parser: every subcommand, or only ``command``'s if it names one (what
    ``main`` builds for a command: the other parsers, with the modules that add them, were
    ~2.5 ms of every start; help and errors of the command read the same)."""
    _Parser.building = True
    try:
        p = _Parser(
            prog="amqpcap",
            description="AMQP packet-capture dissector and traffic analyser",
            epilog=EXIT_TABLE,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        version_help = "show the version and which compiled parts run (or why not), and exit"
        p.add_argument("--version", action=_Version, help=version_help)
        sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser, metavar="COMMAND")
        wanted = [command] if command in COMMANDS else list(COMMANDS)
        for name in wanted:
            COMMANDS[name](sub)
    finally:
        _Parser.building = False
    return p


def _add_dissect(sub) -> None:
    d = add_command(
        sub,
        "dissect",
        "dissect captures into a Parquet dataset",
        (
            "amqpcap dissect captures/rabbitmq091_pika_full.pcap -o out",
            "ssh host tcpdump -i eth0 -w - port 5672 | amqpcap dissect - -o out --force",
        ),
        _dissect,
    )
    d.add_argument("captures", nargs="+", metavar="CAPTURE", help=_CAPTURE_HELP + SEVERAL_HELP)
    d.add_argument("-o", "--out", required=True, help="output directory (one dataset directory per table)")
    d.add_argument(
        "--body-bytes",
        type=nonneg_int,
        default=64,
        metavar="N",
        help="bytes of each body kept in messages.body (default 64; a SHA-256 of the whole body "
        "is always kept)",
    )
    d.add_argument(
        "--ports", type=port_list, default=[], help="extra TCP ports to treat as AMQP (comma separated)"
    )
    d.add_argument(
        "--frames", action="store_true", help="also write the frames table (one row per AMQP frame)"
    )
    d.add_argument(
        "--keep-secrets", action="store_true", help="keep passwords from start-ok/secure-ok (off by default)"
    )
    d.add_argument("--force", action="store_true", help="replace OUT if it exists")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")


def _add_show(sub) -> None:
    s = add_command(
        sub,
        "show",
        "one line per method, like a protocol analyser's packet list",
        (
            "amqpcap show captures/rabbitmq091_pika_full.pcap --method Basic.Publish --routing-key work",
            "tcpdump -i eth0 -U -w - port 5672 | amqpcap show -",
            "amqpcap show capture.pcap --json | jq .arguments",
            "amqpcap show capture.pcap --json --method basic.publish | jq .properties",
        ),
        _show,
    )
    s.add_argument("capture", metavar="CAPTURE", help=_CAPTURE_HELP)
    from amqpcap import filters  # show's alone (with difflib): not imported for the other commands

    filters.add_arguments(s)
    s.add_argument("--ports", type=port_list, default=[], help="extra TCP ports to treat as AMQP")
    s.add_argument(
        "--absolute",
        action="store_true",
        help="absolute UTC times instead of seconds since the capture's first packet",
    )
    s.add_argument("--frames", action="store_true", help="also show heartbeat frames")
    s.add_argument("--keep-secrets", action="store_true", help="show passwords (PLAIN / AMQPLAIN) in clear")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json",
        dest="fmt",
        action="store_const",
        const="json",
        help="JSON Lines: one object per method with all its arguments (and a message's "
        "body_size and properties)",
    )
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv", help="CSV with a header row")
    s.set_defaults(fmt="text")


def _add_stats(sub) -> None:
    st = add_command(
        sub,
        "stats",
        "latency, throughput and error summary of a dissect output or a capture",
        (
            "amqpcap stats out",
            "amqpcap stats captures/rabbitmq091_pika_full.pcap --json",
        ),
        _stats,
    )
    st.add_argument("path", metavar="OUT_OR_CAPTURE", help=_ANALYSE_HELP)
    st.add_argument("--json", action="store_true", help="one JSON object on stdout (docs/analysis.md)")
    st.add_argument(
        "--ports", type=port_list, default=[], help="extra TCP ports to treat as AMQP (a capture)"
    )
    from amqpcap.spark import cli as spark_cli  # `stats --spark` (light: no pyspark import)

    spark_cli.add_stats_options(st)


def _add_report(sub) -> None:
    r = add_command(
        sub,
        "report",
        "PNG figures and one HTML page",
        (
            "amqpcap report out -o report",
            "amqpcap report captures/rabbitmq091_pika_throughput.pcap -o report --force",
        ),
        _report,
    )
    r.add_argument("path", metavar="OUT_OR_CAPTURE", help=_ANALYSE_HELP)
    r.add_argument("-o", "--out", required=True, help="report directory (created)")
    r.add_argument("--force", action="store_true", help="write into OUT even if it is not empty")
    r.add_argument("--ports", type=port_list, default=[], help="extra TCP ports to treat as AMQP (a capture)")


def _registered(module: str):
    """Adds the subcommand of ``module`` (its ``register``), importing it only then."""
    return lambda sub: importlib.import_module(module).register(sub)


# Every subcommand, in the order of ``--help``: name -> what adds its parser.
COMMANDS = {"dissect": _add_dissect, "show": _add_show, "stats": _add_stats, "report": _add_report}
COMMANDS.update((name, _registered(module)) for name, module in SUBCOMMAND_MODULES.items())


# -- errors and signals ---------------------------------------------------------------------


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C, so partial output is removed on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum, _frame):
    raise Stopped(signum)


def _install_signal_handlers() -> dict:
    """SIGTERM and SIGHUP raise ``Stopped``; returns the previous handlers."""
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, _raise_stopped)
        except (ValueError, OSError):  # not the main thread (amqpcap.cli.main called from a library)
            pass
    return previous


def _stop_message(e: KeyboardInterrupt) -> tuple[str, int]:
    signum = getattr(e, "signum", signal.SIGINT)
    name = signal.Signals(signum).name
    code = {signal.SIGTERM: Exit.TERMINATED, signal.SIGHUP: Exit.HANGUP}.get(signum, Exit.INTERRUPTED)
    what = "interrupted" if signum == signal.SIGINT else f"stopped by {name}"
    return f"amqpcap: {what} (partial output removed)", code


# Commands whose whole path is capture -> Parquet.  pyarrow imports numpy whenever it is
# installed (~40-100 ms and a pool of OpenBLAS threads, ~10 MB of a run), and nothing these
# commands run uses it: the ``amqpcap`` process leaves it out for them (numpy is optional to
# pyarrow).  ``main`` called from Python (a notebook, the tests) never does.
WITHOUT_NUMPY = ("dissect", "show")


# Commands whose start-up runs without the cyclic GC: the imports (~60 ms, pyarrow's and
# amqpcap's) make objects that live as long as the process, and the collections among them were
# ~4 ms of a dissect's start.  The packet loop sets its own threshold (pipeline._hot_loop: a
# threshold of 0 is below it), so the GC is back on for the run; stats and report put it back
# once their imports are done (:func:`imports_done`): pandas' and matplotlib's too, ~0.05 s of
# collections of a report's start, before it can fork its second process.
QUIET_START = ("dissect", "stats", "report")
_QUIET: list = []  # the threshold of the first generation that lean() set to 0


# Commands whose process writes Parquet with Arrow's jemalloc pool (unless
# ARROW_DEFAULT_MEMORY_POOL says otherwise), not its default mimalloc: mimalloc asks for huge
# pages, and once the closing thread and the Parquet thread encode the last batches side by side,
# their first touches could wait for the kernel to compact memory (a 42 MB capture: close 34 ms
# median, 55 ms worst, against 11 and 14 with jemalloc); peak RSS 106-111 -> 82-86 MB on 42 MB
# captures and 200k small packets, time the same or less.  Arrow reads the variable when it
# makes its default pool (C++'s, which the Parquet writer uses: pyarrow.set_memory_pool does
# not reach it), so it is set before pyarrow is imported.  Not for ``main`` called from Python.
ARROW_POOL = {"dissect": "jemalloc"}


# Commands whose numpy does no linear algebra: OpenBLAS (numpy's BLAS) starts a thread per core
# at numpy's import, which a stats or report process never hands work (their sums, sorts and
# histograms are numpy's own loops); with one thread none is started: numpy's import ~0.06 s
# of CPU less (~0.12 -> ~0.06 s), before the report can fork.  Set before numpy is imported;
# OPENBLAS_NUM_THREADS given wins.  Not OMP_NUM_THREADS: Arrow sizes its thread pool by it.
ONE_BLAS_THREAD = ("stats", "report")


# Modules a command's imports bring in that its run does not use: loaded on first use, not at
# import (``Deferred``).  ``pickle``, ``decimal``, ``copy``: pyarrow imports them for values a
# dissect never makes.  ``socket``: pyarrow.util's, for a function a dissect does not call
# (link.py takes inet_ntop from _socket, what socket re-exports); ``selectors``: socket's.
# ``bz2``, ``lzma``: shutil (argparse's terminal width) imports them to know its archive formats.
# (``inspect`` is not imported: no class of a dissect is made by dataclasses, values.py.)
LAZY = {"dissect": ("pickle", "decimal", "copy", "socket", "selectors", "bz2", "lzma")}


# Commands whose process binds the functions of the shared libraries it loads at their first call
# (RTLD_LAZY), not all at load (RTLD_NOW, Python's default): a dissect loads amqpcap's compiled
# parts and pyarrow's extension modules with the Arrow C++ libraries they link, and calls few of
# the functions they import: the dynamic loader's work at load is about a quarter less.  A library
# that asks to be bound at load (BIND_NOW: libcrypto) still is.
LAZY_BINDING = ("dissect",)


class Deferred(types.ModuleType):
    """A module in sys.modules whose code runs on first use of one of its attributes: the
    module is then imported and its namespace copied here (a global it rebinds later is not seen
    here; none of LAZY's does).  Not importlib.util.LazyLoader: its module loads on any
    attribute, and every ``import`` statement of it reads ``__spec__``."""

    def __getattr__(self, attr):  # only for what the module's namespace lacks: all but __spec__
        name = self.__spec__.name
        with _CLAIM:  # one thread takes it out of sys.modules (no import under this lock)
            mine = sys.modules.get(name) is self
            if mine:
                del sys.modules[name]
        try:  # the import system's own locks: a thread importing it meanwhile is waited for
            module = importlib.import_module(name)
        except BaseException:
            if mine:
                sys.modules.setdefault(name, self)  # as an import of it would: the next use tries again
            raise
        if mine:
            self.__dict__.update(vars(module))
        return getattr(module, attr)


_CLAIM = _thread.allocate_lock()


def lean(command: str) -> None:
    """Set this process up for ``command`` (a process of its own: the command, the bench's
    child), before anything imports pyarrow: numpy left out if the command does not use it,
    no cyclic collection until its work starts (``QUIET_START``), one BLAS thread
    (``ONE_BLAS_THREAD``), Arrow's memory pool (``ARROW_POOL``), shared libraries bound lazily
    (``LAZY_BINDING``), modules it does not use left unloaded (``LAZY``)."""
    if command in WITHOUT_NUMPY and "numpy" not in sys.modules:
        sys.modules["numpy"] = None  # an import of it now fails, and pyarrow goes without
    if command in QUIET_START and not _QUIET:
        _QUIET.append(gc.get_threshold()[0])
        gc.set_threshold(0, *gc.get_threshold()[1:])  # 0: no automatic collection
    if command in ONE_BLAS_THREAD and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    pool = ARROW_POOL.get(command)
    if pool and "pyarrow" not in sys.modules and pool in arrow_pools():
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", pool)
    if command in LAZY_BINDING:
        sys.setdlopenflags(sys.getdlopenflags() & ~os.RTLD_NOW | os.RTLD_LAZY)
    for name in LAZY.get(command, ()):
        if name not in sys.modules and (spec := importlib.util.find_spec(name)) is not None:
            sys.modules[name] = module = Deferred(name)
            module.__spec__ = spec


def imports_done() -> None:
    """The cyclic GC back on, as before :func:`lean` turned it off for a quiet start (else
    nothing changes): the objects made so far, which the process keeps, frozen first (never
    walked by a collection, as if collected at each import)."""
    if _QUIET:
        gc.freeze()
        gc.set_threshold(_QUIET.pop(), *gc.get_threshold()[1:])


def arrow_pools() -> set:
    """The optional memory pools the installed Arrow was built with, read from its build
    configuration without importing pyarrow (an unknown pool in ARROW_DEFAULT_MEMORY_POOL is a
    warning on stderr)."""
    try:
        spec = importlib.util.find_spec("pyarrow")
        config = os.path.join(spec.submodule_search_locations[0], "include", "arrow", "util", "config.h")
        with open(config, encoding="utf-8") as f:
            text = f.read()
    except (ImportError, AttributeError, TypeError, OSError, ValueError):
        return set()
    return {name for name in ("jemalloc", "mimalloc") if f"#define ARROW_{name.upper()}\n" in text}


# Commands whose process has nothing left to do once ``main`` returns (everything written and
# closed, no thread at work, no child process: ``main`` is told the process leaves, and spark's
# ends its JVM, ``session.let_go``): it leaves without tearing the interpreter down.
LEAVE_AT_ONCE = ("dissect", "spark")

# Commands that leave so too when no process of theirs is left for an exit handler to end (their
# output written and closed when ``main`` returns; the teardown of pandas' and matplotlib's
# objects is about 0.2 s of CPU after a report): see :func:`alone`.
LEAVE_WHEN_ALONE = ("stats", "report")


def alone() -> bool:
    """No process left that an exit handler ends: no Spark JVM (pyspark never loaded: its handler
    ends the JVM) and no forked analysis process alive (multiprocessing's ends a daemon child,
    e.g. one still computing when its parent failed)."""
    if "pyspark" in sys.modules:
        return False
    mp = sys.modules.get("multiprocessing")
    return mp is None or not mp.active_children()


def console() -> None:
    """The ``amqpcap`` command (pyproject's script): ``main`` in a process of its own."""
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    lean(command)
    try:
        code = main(leaving=command in LEAVE_AT_ONCE)
    except BrokenPipeError:
        # --version or --help read by a reader that went away (amqpcap --version | head -c 9)
        sys.stdout = None
        code = Exit.OK
    if command in LEAVE_AT_ONCE or (command in LEAVE_WHEN_ALONE and alone()):
        leave(code)
    sys.exit(code)


def leave(code: int) -> None:
    """Exit with ``code`` now: standard output and error flushed, then ``os._exit``, skipping
    the interpreter's teardown (a last collection of every object, every module's cleanup:
    10-20 ms of a 0.4 s dissect).  No atexit handler of this package is skipped (it has none)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (BrokenPipeError, ValueError):  # the reader went away (not an error); closed
            pass
    os._exit(code)


def main(argv=None, *, leaving: bool = False) -> int:
    """The command ``argv`` names; ``leaving``: the process ends once it returns (``console``),
    which a command may rely on to leave its work's end to the process's (``args.leaving``)."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    args.leaving = leaving
    previous = _install_signal_handlers()
    try:
        return _run(args)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args) -> int:
    from amqpcap.capture.reader import CaptureError
    from amqpcap.records.writer import OutputExists

    try:
        return int(args.run(args))
    except CaptureError as e:
        print(f"amqpcap: {e}", file=sys.stderr)
        return int(e.exit_code)
    except OutputExists as e:
        print(f"amqpcap: {e}", file=sys.stderr)
        return Exit.OUTPUT_EXISTS
    except KeyboardInterrupt as e:
        msg, code = _stop_message(e)
        print(msg, file=sys.stderr)
        return code
    except BrokenPipeError:
        # The reader went away (amqpcap show ... | head): not an error.
        sys.stdout = None  # no flush of what the reader will never read at exit
        return Exit.OK
    except OSError as e:
        if e.filename is None and e.errno not in WRITE_FAILURES:
            return _internal(e)
        reason = (os.strerror(e.errno) if e.filename is None else e.strerror or str(e)).lower()
        print(f"amqpcap: {e.filename or 'cannot write'}: {reason}", file=sys.stderr)
        return Exit.UNREADABLE
    except Exception as e:  # never a traceback for the user; AMQPCAP_DEBUG=1 shows it
        return _internal(e)


# Errors of the system a write went to, not of amqpcap: with no file named (standard output,
# pyarrow's I/O errors) they still exit 3 ("a path cannot be read or written"), not 1 (a bug).
WRITE_FAILURES = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def _internal(e: BaseException) -> int:
    if os.environ.get("AMQPCAP_DEBUG"):
        raise e
    print(
        f"amqpcap: internal error: {type(e).__name__}: {e} (set AMQPCAP_DEBUG=1 for details)", file=sys.stderr
    )
    return Exit.INTERNAL


def no_amqp_message(tcp_conversations, server_ports, amqp_ports=frozenset()) -> str:
    """The one line for a run that found no AMQP conversation (``amqp_ports``: the ports the run
    already took as AMQP, the defaults and --ports: no use suggesting them)."""
    if not tcp_conversations:
        return "no AMQP conversations found; no TCP conversations seen"
    ports = sorted(server_ports.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    seen = ", ".join(str(p) for p, _ in ports)
    others = [str(p) for p, _ in ports if p not in amqp_ports]
    hint = (
        f"try --ports {','.join(others)} if AMQP runs there"
        if others
        else "nothing there decoded as AMQP (a cut protocol header? another protocol?)"
    )
    head = f"no AMQP conversations found; {tcp_conversations} TCP conversation(s) seen"
    return f"{head} (server ports {seen}); {hint}"


# -- dissect --------------------------------------------------------------------------------


def _dissect(a) -> int:
    from amqpcap.pipeline import UnreadableCaptures, dissect

    if a.captures.count(STDIN) > 1:
        print("amqpcap: standard input (-) can be given once", file=sys.stderr)
        return Exit.USAGE
    try:
        summary = dissect(
            a.captures,
            a.out,
            body_bytes=a.body_bytes,
            frames=a.frames,
            ports=a.ports,
            keep_secrets=a.keep_secrets,
            force=a.force,
            progress=not a.quiet and sys.stderr.isatty(),
        )
    except UnreadableCaptures as e:
        for err in e.errors:
            print(f"amqpcap: {err}", file=sys.stderr)
        return e.exit_code
    for err in summary.errors:  # one line per input left out; the exit code is the first's
        print(f"amqpcap: {err}", file=sys.stderr)
    if not a.quiet:
        r = summary.rows
        mb = summary.bytes / 1e6
        print(
            f"{summary.captures} capture(s), {summary.packets:,} packets, {mb:,.1f} MB "
            f"in {summary.seconds:.2f} s "
            f"({mb / max(summary.seconds, 1e-9):,.1f} MB/s)"
        )
        print(
            f"connections {r.get('connections', 0):,}  methods {r.get('methods', 0):,}  "
            f"messages {r.get('messages', 0):,}  anomalies {r.get('anomalies', 0):,}"
            + (f"  frames {r['frames']:,}" if "frames" in r else "")
        )
        print(f"written to {a.out}/")
    if summary.errors:
        return summary.errors[0].exit_code
    if not summary.rows.get("connections"):
        from amqpcap.pipeline import DEFAULT_PORTS

        taken = DEFAULT_PORTS | frozenset(a.ports)
        print(
            f"amqpcap: {no_amqp_message(summary.tcp_streams, summary.server_ports, taken)}", file=sys.stderr
        )
        return Exit.NO_AMQP
    return Exit.OK


# -- show -----------------------------------------------------------------------------------


def _show(a) -> int:
    from amqpcap.capture.reader import open_capture
    from amqpcap.pipeline import DEFAULT_PORTS, Dissector, Options
    from amqpcap.show import ShowSink

    source = open_capture(a.capture)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # a pipe sees each line as its packet arrives
    sink = ShowSink(a, header=sys.stdout.isatty())
    opts = Options(
        body_bytes=0, frames=a.frames, ports=DEFAULT_PORTS | frozenset(a.ports), keep_secrets=a.keep_secrets
    )
    d = Dissector(a.capture, sink, opts)
    d.on_conversation = sink.conversation
    try:
        d.run(sink.first_packet(source))
    finally:
        source.close()
        sink.flush()
    if not sink.amqp_conversations:
        print(f"amqpcap: {no_amqp_message(d.nstreams, d.server_ports, opts.ports)}", file=sys.stderr)
        return Exit.NO_AMQP
    return Exit.OK


# -- stats and report -----------------------------------------------------------------------


@contextlib.contextmanager
def _readable_tables():
    """A Parquet file of the dissect output that cannot be read (``UnreadableTable``, raised where
    the analysis opens and reads the tables) is the one-line error of an unreadable path, exit 3;
    any other error of the analysis is a bug (exit 1)."""
    from amqpcap.analysis.tables import UnreadableTable
    from amqpcap.capture.reader import CaptureError

    try:
        yield
    except UnreadableTable as e:
        raise CaptureError(e.path, f"a table cannot be read ({e.reason})", Exit.UNREADABLE) from None


def _output_dir(a, temp: list) -> str:
    """The dissect output directory of ``a.path``: itself, or a capture dissected into the cache
    (standard input or another pipe: into a temporary directory appended to ``temp``).  Nothing is
    loaded: stats and report load what each section reads."""
    from amqpcap.analysis.tables import cache_key, default_cache_dir, dissect_cached
    from amqpcap.capture.reader import CaptureError, open_capture

    path = a.path
    opts = {"ports": a.ports} if a.ports else {}
    progress = sys.stderr.isatty()
    if path != STDIN and os.path.isdir(path):
        if not os.path.isdir(os.path.join(path, "connections")):
            raise CaptureError(
                path, "is a directory but not a dissect output (no connections/ table)", Exit.UNREADABLE
            )
        return path
    if path == STDIN or (os.path.exists(path) and not os.path.isfile(path)):
        # A pipe or FIFO can be read once: no content hash for the cache, a temporary dissection.
        import tempfile  # here: every invocation imports this module (~1.6 ms)

        from amqpcap.pipeline import dissect

        tmp = tempfile.mkdtemp(prefix="amqpcap-stdin-")
        temp.append(tmp)
        name = "standard input" if path == STDIN else path
        print(f"amqpcap: dissecting {name} (a pipe: not cached)", file=sys.stderr)
        summary = dissect([path], os.path.join(tmp, "out"), progress=progress, **opts)
        a.census = (summary.tcp_streams, summary.server_ports)
        return os.path.join(tmp, "out")
    open_capture(path).close()  # a one-line error (exit 2 or 3) before anything else
    out = default_cache_dir() / cache_key(path, **opts)
    if out.is_dir():
        print(f"amqpcap: using the dissection of {path} cached in {out}", file=sys.stderr)
    else:
        print(f"amqpcap: dissecting {path} (cached in {out})", file=sys.stderr)
    return os.fspath(dissect_cached(path, progress=progress, **opts))


class _Discard:
    """A table that keeps nothing."""

    rows = 0

    def append(self, row) -> None:
        pass


class _CensusSink:
    """A writer for ``Dissector`` that keeps no rows: only the TCP conversation census is wanted."""

    def __init__(self) -> None:
        self.tables = {name: _Discard() for name in ("connections", "methods", "messages", "anomalies")}

    def __getitem__(self, name):
        return self.tables[name]


def _census(path, ports):
    """(TCP conversations, server port counts) of a capture: a second, row-less pass for the hint."""
    from amqpcap.capture.reader import open_capture
    from amqpcap.pipeline import DEFAULT_PORTS, Dissector, Options

    d = Dissector(path, _CensusSink(), Options(body_bytes=0, ports=DEFAULT_PORTS | frozenset(ports)))
    with open_capture(path) as source:
        d.run(source)
    return d.nstreams, d.server_ports


def no_amqp(out: str, a) -> bool:
    """True, with the one line that says so printed, when output ``out`` has no AMQP conversation
    (``stats``, ``report`` and ``stats --spark`` exit NO_AMQP then)."""
    from amqpcap.analysis.tables import count_rows

    if count_rows(out, "connections"):
        return False
    census = getattr(a, "census", None)
    if census is None and os.path.isfile(a.path):
        census = _census(a.path, a.ports)
    if census is None:  # a dissect output: the TCP conversations were not recorded
        msg = (
            f"no AMQP conversations found in {a.path}; "
            "try dissect --ports PORT,... if AMQP runs on other ports"
        )
    else:
        from amqpcap.pipeline import DEFAULT_PORTS

        msg = no_amqp_message(*census, DEFAULT_PORTS | frozenset(a.ports or ()))
    print(f"amqpcap: {msg}", file=sys.stderr)
    return True


def _stats(a) -> int:
    if a.spark:
        from amqpcap.spark.cli import stats_args

        imports_done()
        return stats_args(a)
    import shutil  # here, not at the top: every invocation imports this module

    from amqpcap.analysis import render_text, stats
    from amqpcap.analysis.summary import section_tables

    imports_done()

    temp: list = []
    try:
        out = _output_dir(a, temp)
        with _readable_tables():
            if no_amqp(out, a):
                return Exit.NO_AMQP
            result = stats(out)
            if a.json:
                import json

                json.dump(result, sys.stdout, indent=None, default=str)
                sys.stdout.write("\n")
            else:  # (the connections table's columns: loaded once the stats are done)
                sys.stdout.write(render_text(result, section_tables(out, "text")))
    finally:
        for tmp in temp:
            shutil.rmtree(tmp, ignore_errors=True)
    return Exit.OK


def _report(a) -> int:
    import shutil

    from amqpcap.analysis.report import write_report
    from amqpcap.records.writer import OutputExists

    imports_done()

    if os.path.lexists(a.out):
        if not os.path.isdir(a.out):
            if not a.force:
                raise OutputExists(
                    f"output {a.out} exists and is not a directory (use --force to replace it)"
                )
            os.remove(a.out)  # as dissect --force replaces a file with its output
        elif os.listdir(a.out) and not a.force:
            raise OutputExists(f"output {a.out} exists and is not empty (use --force to write into it)")
    created = not os.path.lexists(a.out)
    os.makedirs(a.out, exist_ok=True)  # an unwritable OUT fails now, before the dissection
    temp: list = []
    try:
        out = _output_dir(a, temp)
        with _readable_tables():
            if no_amqp(out, a):
                if created:
                    os.rmdir(a.out)
                return Exit.NO_AMQP
            path = write_report(out, a.out)
    except BaseException:
        if created:
            shutil.rmtree(a.out, ignore_errors=True)
        raise
    finally:
        for tmp in temp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"report written to {path}")
    return Exit.OK


if __name__ == "__main__":
    console()
