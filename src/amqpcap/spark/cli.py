"""``amqpcap spark`` and ``amqpcap stats --spark`` (hooked into amqpcap.cli), and
``python -m amqpcap.spark`` (the same arguments, for spark-submit).

Exit codes are amqpcap's (README): in addition, ``spark`` writes the captures it
could read and exits with the code of the first capture it could not (2, 3 or 4)
after one line per such capture on stderr; 7 when Spark cannot start.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys

from amqpcap.exitcodes import Exit

EXIT_OK, EXIT_NO_SPARK, EXIT_UNREADABLE, EXIT_EXISTS = (
    Exit.OK,
    Exit.SPARK,
    Exit.UNREADABLE,
    Exit.OUTPUT_EXISTS,
)


def _size(text: str) -> int:
    from amqpcap.spark.plan import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _conf(text: str):
    k, sep, v = text.partition("=")
    if not sep or not k:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return k, v


def add_arguments(p) -> None:
    from amqpcap.cli import SEVERAL_HELP, nonneg_int, port_list

    p.add_argument(
        "captures",
        nargs="+",
        metavar="CAPTURE_OR_DIR",
        help="capture files, directories (searched for *.pcap, *.pcapng, *.cap, *.dmp, *.pcap.gz, "
        "*.pcapng.gz, *.cap.gz) or globs; paths every executor can read, or URIs (s3://, gs://, "
        "hdfs://, file://); - or a FIFO: read once by the driver and handed on" + SEVERAL_HELP,
    )
    p.add_argument("-o", "--out", required=True, help="output directory or URI (dissect's layout)")
    add_session_options(p)
    p.add_argument(
        "--split-size",
        type=_size,
        default="128M",
        metavar="SIZE",
        help="index plain captures larger than SIZE in byte ranges of about SIZE and split them by "
        "TCP conversation into at most two tasks a core; pack smaller ones into about two tasks "
        "a core, balanced by bytes (default 128M)",
    )
    p.add_argument(
        "--conf",
        type=_conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )
    p.add_argument("--body-bytes", type=nonneg_int, default=64, metavar="N", help="as for dissect")
    p.add_argument("--ports", type=port_list, default=[], help="as for dissect")
    p.add_argument("--frames", action="store_true", help="also write the frames table")
    p.add_argument("--keep-secrets", action="store_true", help="as for dissect")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")


def add_session_options(p, master_default=None) -> None:
    p.add_argument(
        "--master",
        default=master_default,
        help="Spark master URL (default local[*]; under spark-submit, its --master)",
    )
    p.add_argument("--remote", metavar="sc://HOST:PORT", help="a Spark Connect server instead of --master")
    p.add_argument("--verbose", action="store_true", help="show the JVM's and Spark's own output on stderr")


def register(sub) -> None:
    """Add the ``spark`` subcommand to amqpcap's subparsers."""
    from amqpcap.cli import add_command

    p = add_command(
        sub,
        "spark",
        "dissect many or huge captures on Spark (same tables as dissect)",
        (
            "amqpcap spark captures/ -o out --force",
            "amqpcap spark big.pcap -o out --split-size 256M --master spark://host:7077",
        ),
        run_args,
    )
    add_arguments(p)


def _size_or_zero(text: str) -> int:
    return 0 if text.strip() == "0" else _size(text)


def add_stats_options(st) -> None:
    """``--spark``, ``--spark-from`` and the session's options of ``amqpcap stats`` (its parser ``st``)."""
    from amqpcap.spark.stats_tasks import SPARK_FROM

    st.add_argument(
        "--spark",
        action="store_true",
        help="compute with Spark tasks (a dissect or spark output directory or URI)",
    )
    st.add_argument(
        "--spark-from",
        type=_size_or_zero,
        default=SPARK_FROM,
        metavar="SIZE",
        help="with --spark: start Spark only for outputs of at least SIZE bytes of files (default "
        f"{SPARK_FROM >> 30}G; 0: always, e.g. on a cluster with many cores); smaller ones are "
        "computed as stats computes them, without a JVM",
    )
    add_session_options(st, "local[*]")


def _session(a, app, background: bool = False):
    """(session, ours): an active session (a notebook, a test) is used and left running; (None,
    False) when none starts (one line says why). ``background``: a local session is started in
    a thread, a ``Starting`` returned (the job works on the driver meanwhile); its error is the
    caller's to report (``_cannot_start``)."""
    try:
        return _open_session(a, app, background)
    except Exception as e:
        _cannot_start(e)
    return None, False


def _open_session(a, app, background: bool = False):
    """(session, ours), or the reason none starts raised."""
    from pyspark.sql import SparkSession

    from amqpcap.spark import session

    active = SparkSession.getActiveSession()
    if active is not None and not getattr(a, "remote", None):
        return active, False
    conf = dict(getattr(a, "conf", []) or [])
    quiet = not getattr(a, "verbose", False)
    master = session.default_master(a.master)
    remote = getattr(a, "remote", None)
    if background and not remote and master and master.startswith("local"):
        return session.start(master, app=app, conf=conf, quiet=quiet), True
    return session.build(master, app=app, conf=conf, quiet=quiet, remote=remote), True


def _active_session(a):
    """(the active session, False) of a notebook or a test, or None (none without pyspark
    imported: the command line's own process)."""
    if getattr(a, "remote", None) or "pyspark.sql" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    return None if active is None else (active, False)


def _cannot_start(e: Exception) -> None:
    """The one line of a session that did not start."""
    from amqpcap.spark import errors

    if isinstance(e, ImportError):
        missing = getattr(e, "name", None) or "pyspark"
        print(
            f"amqpcap: the spark command needs {missing}: pip install 'amqpcap[spark]' (and Java 17+)",
            file=sys.stderr,
        )
    elif isinstance(e, RuntimeError):
        print(f"amqpcap: {e}", file=sys.stderr)
    else:  # the JVM did not start, the master or server is not there, ...
        known = errors.explain(e)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(
            f"amqpcap: {known[0]}"
            if known and "task failed" not in known[0]
            else f"amqpcap: cannot start Spark ({msg[:200]}); the spark command needs Java 17+ and "
            "pip install 'amqpcap[spark]'",
            file=sys.stderr,
        )


def _stop(spark, ours: bool) -> None:
    if ours:
        try:
            spark.stop()
        except Exception:  # a session whose JVM or server is gone already
            pass


def _left_up(_spark, _ours: bool) -> None:
    """The session is not stopped: its JVM ends with the process (``session.let_go``)."""


def _failed(e: BaseException) -> int:
    """One line for a failure Spark reported (None: not one of those; re-raised)."""
    from amqpcap.spark import errors

    known = errors.explain(e)
    if known is None:
        raise e
    print(f"amqpcap: {known[0]}", file=sys.stderr)
    return known[1]


@contextlib.contextmanager
def _signals_noted():
    """SIGINT, SIGTERM and SIGHUP raise ``cli.Stopped`` as the command line's handlers do, and
    are noted: py4j turns an interruption inside a call to the JVM into its own network error,
    which must still end as the signal's exit code."""
    from amqpcap.cli import Stopped

    noted: list = []

    def stop(signum, _frame):
        noted.append(signum)
        raise Stopped(signum)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, stop)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        yield noted
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_args(a) -> int:
    """``amqpcap spark``.  A process that ends once it returns (``a.leaving``: the command line)
    ends its local session's JVM as it leaves (``session.let_go``) rather than stopping the
    session first: the same stop, done by the JVM's shutdown hook, without pyspark's."""
    with _signals_noted() as noted:
        code = _run_job(a, noted)
    if getattr(a, "leaving", False):
        from amqpcap.spark import session

        session.let_go()
    return code


def _run_job(a, noted: list) -> int:
    from amqpcap.cli import Stopped
    from amqpcap.spark.job import remove_scratch, run
    from amqpcap.spark.plan import InputError

    if "://" not in a.out and os.path.exists(a.out) and not a.force:  # before paying for a JVM start
        print(f"amqpcap: output {a.out} exists (use --force to replace it)", file=sys.stderr)
        return EXIT_EXISTS
    spark, ours = _session(a, "amqpcap spark", background=True)
    if spark is None:
        return EXIT_NO_SPARK
    from amqpcap.spark.errors import EXECUTORS_LOST
    from amqpcap.spark.starting import Starting
    from amqpcap.spark.watch import Executors

    starting = spark if isinstance(spark, Starting) else None
    watch = Executors(spark).start() if starting is None else None  # (local mode: nothing to watch)
    done = False
    try:
        try:
            s = run(
                spark,
                a.captures,
                a.out,
                split_size=a.split_size,
                body_bytes=a.body_bytes,
                frames=a.frames,
                ports=a.ports,
                keep_secrets=a.keep_secrets,
                force=a.force,
                progress=not a.quiet and sys.stderr.isatty(),
            )
            done = True
        finally:  # before any line on stderr (a session starting points it at the JVM's log)
            if watch is not None:
                watch.close()
            if starting is not None:  # stopped if up; a JVM still launching ended, not waited for
                # (a job done in a process that leaves next: its JVM ends as it leaves, run_args)
                starting.give_up(_left_up if done and getattr(a, "leaving", False) else _stop)
            else:
                _stop(spark, ours)
            remove_scratch(a.out)  # what tasks still running wrote after the job gave up
    except InputError as e:
        print(f"amqpcap: {e}", file=sys.stderr)
        return EXIT_UNREADABLE
    except KeyboardInterrupt:
        raise
    except Exception as e:
        if noted:
            raise Stopped(noted[0]) from None
        if starting is not None and starting.error is e:
            _cannot_start(e)
            return EXIT_NO_SPARK
        return _failed(RuntimeError(EXECUTORS_LOST) if watch is not None and watch.lost else e)
    for _capture, msg, _code in s.errors:
        print(f"amqpcap: {msg}", file=sys.stderr)
    if not a.quiet:
        r, mb = s.rows, s.bytes / 1e6
        split = f", {len(s.split)} split by conversation" if s.split else ""
        ahead = f" (+{s.driver_units} on the driver while Spark started)" if s.driver_units else ""
        print(
            f"{s.captures} capture(s){split}, {s.tasks} task(s){ahead}, {s.packets:,} packets, {mb:,.1f} MB "
            f"in {s.seconds:.2f} s ({mb / max(s.seconds, 1e-9):,.1f} MB/s)"
        )
        print(
            f"connections {r.get('connections', 0):,}  methods {r.get('methods', 0):,}  "
            f"messages {r.get('messages', 0):,}  anomalies {r.get('anomalies', 0):,}"
            + (f"  frames {r['frames']:,}" if "frames" in r else "")
        )
        print(f"written to {a.out}/")
    return s.errors[0][2] if s.errors else EXIT_OK


def stats_args(a) -> int:
    """``amqpcap stats OUT --spark [--json]``."""
    from amqpcap.spark.stats_tasks import PARTS_UP_TO, output_bytes
    from amqpcap.spark.storage import StorageError

    try:
        size = output_bytes(a.path) if "://" in a.path or os.path.isdir(a.path) else None
    except StorageError as e:
        print(f"amqpcap: {e}", file=sys.stderr)
        return EXIT_UNREADABLE
    if size is None or ("://" in a.path and size == 0):
        print(f"amqpcap: {a.path}: stats --spark reads a dissect or spark output directory", file=sys.stderr)
        return EXIT_UNREADABLE
    from amqpcap.cli import no_amqp

    if "://" not in a.path and no_amqp(a.path, a):
        return Exit.NO_AMQP
    if "://" in a.path and size > PARTS_UP_TO:  # (the per-conversation jobs read with Spark's reader)
        print(
            f"amqpcap: {a.path}: stats --spark of an output over {PARTS_UP_TO >> 30} GiB reads it with "
            "Spark's Parquet reader: give a path mounted alike on the driver and every executor",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    return stats_report(a, size, lambda result, table: _print_stats(a, result, table))


def stats_report(a, size: int, show, stop=None) -> int:
    """The report of ``stats --spark`` (``a``: its arguments; ``size``: the output's bytes) handed
    to ``show(result, connections table)``, whose exit code it returns.  An output under
    ``a.spark_from`` bytes is computed as ``stats`` computes it, no session started (unless one
    is active); else the driver computes the report's parts while the session starts; Spark
    tasks take those left once it is up (none left: the session is given up after ``show``).
    ``stop(session, ours)``: how the session ends (:func:`_stop`)."""
    from amqpcap.spark.starting import Starting
    from amqpcap.spark.stats_tasks import PARTS_UP_TO, Report, stats_and_connections, without_spark

    stop = stop or _stop
    active = _active_session(a)  # (in this thread: the JVM keeps a thread's active session)
    if active is None and size < getattr(a, "spark_from", 0):  # (the JVM's start would not pay)
        if sys.stderr.isatty():
            print(
                f"amqpcap stats: {size / 1e6:,.1f} MB of tables, under --spark-from: computed without Spark",
                file=sys.stderr,
            )
        return show(*without_spark(a.path, connections=not a.json))
    report = Report(a.path, connections=not a.json).start() if size <= PARTS_UP_TO else None
    starting = Starting(lambda: active or _open_session(a, "amqpcap stats"))
    try:
        while report is not None and not starting.ready.is_set():
            if report.wait(0.05):  # every part computed before Spark was up: no Spark needed
                code = show(*report.result())
                sys.stdout.flush()
                starting.give_up(stop)
                return code
    except BaseException:
        starting.give_up(stop)
        raise
    try:
        spark, ours = starting.result()
    except Exception as e:
        _cannot_start(e)
        return EXIT_NO_SPARK
    try:
        if report is not None:
            report.finish(spark, progress=sys.stderr.isatty())
            got = report.result()
        else:
            got = stats_and_connections(spark, a.path, connections=not a.json, progress=sys.stderr.isatty())
    except KeyboardInterrupt:
        raise
    except Exception as e:
        return _failed(e)
    finally:
        stop(spark, ours)
    return show(*got)


def _print_stats(a, result: dict, connections) -> int:
    import json

    from amqpcap.analysis import render_text

    if a.json:
        json.dump(result, sys.stdout, indent=None, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(result, connections=connections))
    return EXIT_OK


def main(argv=None) -> int:
    """``python -m amqpcap.spark`` / spark-submit: the ``amqpcap spark`` arguments."""
    from amqpcap.cli import main as amqpcap_main

    return amqpcap_main(["spark"] + list(sys.argv[1:] if argv is None else argv))
