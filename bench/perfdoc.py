"""docs/performance.md: the one file of benchmark figures.  Each bench script owns the block
between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` (NAME: the script's stem) and
rewrites only that block; the file or the block is created when missing."""

from __future__ import annotations

import os
import platform
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(os.path.dirname(HERE), "docs", "performance.md")
HEAD = "# Performance\n\nFigures measured by the scripts in bench/; each script rewrites its own block.\n"


def write_block(name: str, text: str, doc: str = DOC) -> None:
    """Replace the block ``name`` of ``doc`` with ``text`` (appended if the block is new)."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{text.rstrip()}\n{end}"
    try:
        with open(doc, encoding="utf-8") as f:
            old = f.read()
    except FileNotFoundError:
        old = HEAD
    i, j = old.find(start), old.find(end)
    if i >= 0 and j > i:
        new = old[:i] + block + old[j + len(end) :]
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    tmp = doc + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, doc)


def _first_line(cmd: list) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "not installed"
    return out.splitlines()[0].strip() if out else "unknown"


def machine() -> str:
    """One line: CPU model, cores, memory, load average."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            kb = int(f.readline().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GB"
    except (OSError, ValueError, IndexError):
        pass
    load = ", load average %.1f / %.1f / %.1f" % os.getloadavg()
    return f"{model}, {os.cpu_count()} cores{mem}{load} when measured"


def versions(amqpcap_parts: str) -> list[str]:
    """Lines naming the tools measured: Python, pyarrow, tshark, amqpcap's compiled parts."""
    try:
        import pyarrow

        arrow = pyarrow.__version__
    except ImportError:
        arrow = "not installed"
    return [
        f"- Python {platform.python_version()} ({platform.python_implementation()})",
        f"- pyarrow {arrow}",
        f"- {_first_line(['tshark', '--version'])}",
        f"- amqpcap: {amqpcap_parts}",
    ]
