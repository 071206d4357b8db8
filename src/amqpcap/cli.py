"""amqpcap command line: dissect, show, stats, report.

Exit codes (docs/cli.md):
  0 success; 1 internal error; 2 not a capture (unknown format, empty file);
  3 path unreadable; 4 unsupported link type; 5 output exists (use --force);
  64 bad usage; 130 interrupted.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys

EXIT_OK, EXIT_INTERNAL, EXIT_EXISTS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 5, 64, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, and a usage exit code distinct from the capture errors
        self.exit(EXIT_USAGE, f"amqpcap: {message}\n")


def _ports(text: str):
    try:
        ports = [int(p) for p in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port list: {text!r}") from None
    if any(not 0 < p < 65536 for p in ports):
        raise argparse.ArgumentTypeError(f"port out of range in {text!r}")
    return ports


def _nonneg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="amqpcap", description="AMQP packet-capture dissector and traffic analyser")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    d = sub.add_parser("dissect", help="dissect captures into a Parquet dataset")
    d.add_argument("captures", nargs="+", metavar="CAPTURE")
    d.add_argument("-o", "--out", required=True, help="output directory (one dataset directory per table)")
    d.add_argument("--body-bytes", type=_nonneg, default=64, metavar="N",
                   help="bytes of each body kept in messages.body (default 64; a SHA-256 of the whole body is always kept)")
    d.add_argument("--ports", type=_ports, default=[], help="extra TCP ports to treat as AMQP (comma separated)")
    d.add_argument("--frames", action="store_true", help="also write the frames table (one row per AMQP frame)")
    d.add_argument("--keep-secrets", action="store_true", help="keep passwords from start-ok/secure-ok (off by default)")
    d.add_argument("--force", action="store_true", help="replace OUT if it exists")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")

    s = sub.add_parser("show", help="one line per method, like a protocol analyser's packet list")
    s.add_argument("capture", metavar="CAPTURE")
    s.add_argument("--stream", type=int, action="append", help="only this tcp stream (repeatable)")
    s.add_argument("--channel", type=int, action="append", help="only this channel (repeatable)")
    s.add_argument("--method", action="append",
                   help="only methods matching this name or prefix, e.g. basic.publish or basic. (repeatable)")
    s.add_argument("--ports", type=_ports, default=[], help="extra TCP ports to treat as AMQP")
    s.add_argument("--absolute", action="store_true", help="absolute UTC times instead of seconds since the first packet")

    st = sub.add_parser("stats", help="latency, throughput and error summary of a dissect output or a capture")
    st.add_argument("path", metavar="OUT_OR_CAPTURE")
    st.add_argument("--json", action="store_true", help="one JSON object on stdout (docs/analysis.md)")

    r = sub.add_parser("report", help="PNG figures and one HTML page")
    r.add_argument("path", metavar="OUT_OR_CAPTURE")
    r.add_argument("-o", "--out", required=True, help="report directory")
    from amqpcap import live  # amqpcap live: src/amqpcap/live.py registers itself

    live.register(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from amqpcap.capture.reader import CaptureError
    from amqpcap.records.writer import OutputExists

    try:
        if getattr(args, "run", None):  # subcommands registered by their own module (live)
            return args.run(args)
        return {"dissect": _dissect, "show": _show, "stats": _stats, "report": _report}[args.cmd](args)
    except CaptureError as e:
        print(f"amqpcap: {e}", file=sys.stderr)
        return e.exit_code
    except OutputExists as e:
        print(f"amqpcap: {e}", file=sys.stderr)
        return EXIT_EXISTS
    except KeyboardInterrupt:
        print("amqpcap: interrupted (no output written)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        try:
            sys.stdout = None
        finally:
            return EXIT_OK
    except Exception as e:  # never a traceback for the user; AMQPCAP_DEBUG=1 shows it
        if os.environ.get("AMQPCAP_DEBUG"):
            raise
        print(f"amqpcap: internal error: {type(e).__name__}: {e} (set AMQPCAP_DEBUG=1 for details)",
              file=sys.stderr)
        return EXIT_INTERNAL


def _dissect(a) -> int:
    from amqpcap.pipeline import dissect

    summary = dissect(a.captures, a.out, body_bytes=a.body_bytes, frames=a.frames, ports=a.ports,
                      keep_secrets=a.keep_secrets, force=a.force,
                      progress=not a.quiet and sys.stderr.isatty())
    if not a.quiet:
        r = summary.rows
        mb = summary.bytes / 1e6
        print(f"{summary.captures} capture(s), {summary.packets:,} packets, {mb:,.1f} MB in {summary.seconds:.2f} s "
              f"({mb / max(summary.seconds, 1e-9):,.1f} MB/s)")
        print(f"connections {r.get('connections', 0):,}  methods {r.get('methods', 0):,}  "
              f"messages {r.get('messages', 0):,}  anomalies {r.get('anomalies', 0):,}"
              + (f"  frames {r['frames']:,}" if "frames" in r else ""))
        print(f"written to {a.out}/")
    return EXIT_OK


# -- show ---------------------------------------------------------------------------------

_KEY_ARGS = ("exchange", "routing-key", "queue", "consumer-tag", "delivery-tag", "multiple", "requeue",
             "reply-code", "reply-text", "prefetch-count", "destination", "message-count", "virtual-host",
             "mechanism", "frame-max", "heartbeat", "channel-max", "error-code", "description", "command-id")


class _ShowSink:
    """Stands in for DatasetWriter: prints method rows as the dissector produces them."""

    class _Print:
        def __init__(self, show):
            self.show = show
            self.rows = 0

        def append(self, row):
            self.show(row)

    class _Null:
        rows = 0

        def append(self, row):
            pass

    def __init__(self, a):
        self.a = a
        self.t0 = None
        from amqpcap.records.schema import COLUMNS

        self.ix = {c: i for i, c in enumerate(COLUMNS["methods"])}
        self.tables = {"connections": self._Null(), "methods": self._Print(self._method),
                       "messages": self._Null(), "anomalies": self._Print(self._anomaly)}

    def __getitem__(self, name):
        return self.tables[name]

    def _time(self, ts):
        if self.a.absolute:
            return _dt.datetime.fromtimestamp(ts / 1e9, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if self.t0 is None:
            self.t0 = ts
        return f"{(ts - self.t0) / 1e9:12.6f}"

    def _keep(self, stream, channel, method):
        a = self.a
        if a.stream and stream not in a.stream:
            return False
        if a.channel and channel not in a.channel:
            return False
        if a.method and method is not None and not any(method == m or (m.endswith(".") and method.startswith(m))
                                                         or method.startswith(m + ".") for m in a.method):
            return False
        return True

    def _method(self, row):
        ix = self.ix
        stream, channel, name = row[ix["tcp_stream"]], row[ix["channel"]], row[ix["method"]]
        if not self._keep(stream, channel, name):
            return
        args = json.loads(row[ix["arguments"]] or "{}")
        shown = " ".join(f"{k}={_short(args[k])}" for k in _KEY_ARGS if k in args and args[k] not in ("", None))
        print(f"{self._time(row[ix['ts']])} {row[ix['frame_number']]:>7} {stream:>4} {row[ix['direction']]} "
              f"ch{channel:<3} {name:<26} {shown}")

    def _anomaly(self, row):
        stream, channel = row[1], row[5]
        if not self._keep(stream, channel, None) or self.a.method:
            return
        print(f"{self._time(row[3])} {row[2]:>7} {stream if stream is not None else '-':>4} "
              f"{row[4] or '---'} {'':5} !{row[8]:<25} {row[9]}")


ShowSink = _ShowSink  # public: amqpcap live prints in show's format


def _short(v, n=60):
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v
    return s if len(s) <= n else s[:n - 1] + "…"


def _show(a) -> int:
    from amqpcap.capture.reader import open_capture
    from amqpcap.pipeline import DEFAULT_PORTS, Dissector, Options

    source = open_capture(a.capture)
    sink = _ShowSink(a)
    Dissector(a.capture, sink, Options(body_bytes=0, ports=DEFAULT_PORTS | frozenset(a.ports))).run(source)
    return EXIT_OK


# -- stats and report -------------------------------------------------------------------------

def _stats(a) -> int:
    import amqpcap
    from amqpcap.analysis import stats as S

    tables = amqpcap.load(a.path)
    result = S.stats(tables)
    if a.json:
        json.dump(result, sys.stdout, indent=None, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(S.render_text(result, tables))
    return EXIT_OK


def _report(a) -> int:
    import amqpcap
    from amqpcap.analysis.report import write_report

    tables = amqpcap.load(a.path)
    path = write_report(tables, a.out)
    print(f"report written to {path}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
