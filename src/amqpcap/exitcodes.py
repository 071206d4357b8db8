"""Exit codes of the ``amqpcap`` command line: the one table.

Every stage that can end a run with a user-facing error names its code here
(``CaptureError.exit_code``, ``OutputExists``, the CLI); ``--help`` and the
README print ``TABLE``.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    INTERNAL = 1
    NOT_A_CAPTURE = 2
    UNREADABLE = 3
    LINKTYPE = 4
    OUTPUT_EXISTS = 5
    NO_AMQP = 6
    SPARK = 7
    USAGE = 64
    NO_INTERFACE = 66  # live: EX_NOINPUT
    NO_PRIVILEGE = 77  # live: EX_NOPERM
    HANGUP = 129  # 128 + SIGHUP
    INTERRUPTED = 130  # 128 + SIGINT (Ctrl-C)
    TERMINATED = 143  # 128 + SIGTERM


MEANING = {
    Exit.OK: "success",
    Exit.INTERNAL: "internal error (a bug; AMQPCAP_DEBUG=1 shows the traceback)",
    Exit.NOT_A_CAPTURE: "not a capture (unknown format, empty file)",
    Exit.UNREADABLE: (
        "a path cannot be read or written (missing, permission denied, disk full, "
        "not a dissect output directory, a damaged table file in one: the line names the file)"
    ),
    Exit.LINKTYPE: "unsupported link type",
    Exit.OUTPUT_EXISTS: "output exists (use --force)",
    Exit.NO_AMQP: "no AMQP conversation found (the output is still written; try --ports)",
    Exit.SPARK: (
        "spark: the cluster failed the job (executors without amqpcap, master unreachable, "
        "a worker lost, a task out of memory: the line names the cause and the fix)"
    ),
    Exit.USAGE: "bad usage",
    Exit.NO_INTERFACE: "live: no such interface",
    Exit.NO_PRIVILEGE: "live: no privilege to capture (run as root or give the interpreter CAP_NET_RAW)",
    Exit.HANGUP: "stopped by SIGHUP (partial output removed)",
    Exit.INTERRUPTED: "interrupted by Ctrl-C / SIGINT (partial output removed)",
    Exit.TERMINATED: "stopped by SIGTERM (partial output removed)",
}

TABLE = "exit codes:\n" + "\n".join(f"  {int(code):>3}  {text}" for code, text in MEANING.items())
