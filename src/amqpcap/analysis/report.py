"""The HTML report: matplotlib PNGs and one self-contained page embedding them.

``write_report(t, out_dir)`` writes ``throughput.png``, ``latency.png``,
``errors.png``, ``timeline.png``, ``unacked.png`` and ``index.html`` (the PNGs
inlined as base64, so the page alone can be mailed around).  No pyplot: the
figures use the Agg canvas directly, so calling this from a notebook does not
touch the notebook's backend.
"""

from __future__ import annotations

import base64
import functools
import gc
import html
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from amqpcap.analysis._common import NAT, malloc_pool, ns, ordered, records, release_memory, si
from amqpcap.analysis.batches import is_output_dir, shared_reads
from amqpcap.analysis.connection_health import UNACKED_ACK_COLS
from amqpcap.analysis.connection_health import blocked as blocked_frame
from amqpcap.analysis.connection_health import unacked as unacked_frame
from amqpcap.analysis.failures import errors as errors_frame
from amqpcap.analysis.forked import Forked, TakenInTurn, can_fork
from amqpcap.analysis.latency import LATENCY_FUNCTIONS
from amqpcap.analysis.summary import (
    ASIDE,
    LATENCY_KINDS,
    connection_cells,
    connections_table,
    error_tables,
    frames_note,
    pool_threshold,
    section_tables,
    small_output,
    span_duration,
    stats_of_parts,
    stats_parts,
    stats_source,
    throughput_cells,
    throughput_summary,
)
from amqpcap.analysis.timespan import span_parts
from amqpcap.analysis.traffic import totals, totals_at
from amqpcap.analysis.unacked_counts import Timeline

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["write_report", "pick_bucket", "FIGURES", "LatencyDrawn", "latency_drawn"]

FIGURES = ("throughput", "latency", "errors", "timeline", "unacked")
STATS_BUCKET = "1s"  # the bucket of stats' throughput (stats_parts' default)
TOP_CONNECTIONS = 40
TOP_CHANNELS = 8
C2S, S2C = "#1f77b4", "#d62728"

_NICE = [
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    21600,
    43200,
    86400,
]


def pick_bucket(span_s: float | None, target: int = 120) -> str:
    """A round bucket width giving about ``target`` buckets over ``span_s`` seconds."""
    if not span_s or span_s <= 0:
        return "1s"
    want = span_s / target
    b = next((x for x in _NICE if x >= want), _NICE[-1])
    return f"{int(round(b * 1000))}ms" if b < 1 else f"{int(b)}s"


def _axis_si(v: float, unit: str = "") -> str:
    if abs(v) >= 1000:
        return si(v, unit).replace(".00 ", " ")
    return (f"{v:g} {unit}" if v == int(v) else f"{v:.3g} {unit}").rstrip()


def _fmt_bucket(bucket: str) -> str:
    s = pd.Timedelta(bucket).total_seconds()
    return f"{s * 1000:g} ms" if s < 1 else f"{s:g} s"


DPI = 100  # the figures' resolution (their size in inches x 100: pixels)
# zlib's level for the PNGs: its fastest compresses a figure's runs of flat colour within ~2% of
# the default level's (6) bytes, in about half the time
PNG_LEVEL = 1


def _figure(**kw) -> Figure:
    """A matplotlib figure on its Agg canvas (imported here, where a figure is drawn: a process
    computing no figure, e.g. a forked stats part, never loads it).  The canvas from the start:
    :func:`_tight` measures the texts with the renderer that then draws them at :data:`DPI`
    (the one :func:`_save` draws with), so each text is laid out once, not once more for a
    renderer of its own."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(dpi=DPI, **kw)
    FigureCanvasAgg(fig)
    return fig


# Fixed subplot margins (figure fractions) of the figures whose tick labels have a bounded width:
# no tight layout measures every text first.  Room for their titles, axis labels and tick labels
# of up to 6 characters (latency counts "999 k", "1.50 M", latencies "0.0205"; unacked counts) or
# up to 10 (throughput "12.50 kB/s").
LATENCY_MARGINS = {"left": 0.075, "right": 0.975, "bottom": 0.085, "top": 0.9, "wspace": 0.3, "hspace": 0.33}
THROUGHPUT_MARGINS = {"left": 0.095, "right": 0.985, "bottom": 0.09, "top": 0.91, "hspace": 0.16}
UNACKED_MARGINS = {"left": 0.07, "right": 0.985, "bottom": 0.11, "top": 0.92}


# Each linear axis of a figure gets at most this many intervals between its major ticks
# (matplotlib's "auto" gives up to 10 on a tall panel: each tick is a label and two lines made,
# laid out and drawn, most of a figure's drawing).
TICK_BINS = 5
# Glyphs drawn unhinted: FreeType's hinting of each glyph was a third of the texts' drawing.
TEXT_RC = {"text.hinting": "no_hinting"}


def _drawing(fig: Figure):
    """The settings ``fig`` is laid out and drawn with (:data:`TICK_BINS`, :data:`TEXT_RC`; the
    latter for the ``with`` block only: a notebook's own figures are left as they were)."""
    from matplotlib import rc_context
    from matplotlib.ticker import MaxNLocator

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            locator = axis.get_major_locator()
            if isinstance(locator, MaxNLocator):  # (AutoLocator too; not a log or fixed axis)
                locator.set_params(nbins=TICK_BINS)
    return rc_context(TEXT_RC)


def _tight(fig: Figure) -> None:
    """``fig``'s subplots placed as ``fig.tight_layout()`` places them (with the texts measured as
    :func:`_save` draws them), by a layout engine that is not left on the figure."""
    from matplotlib.layout_engine import TightLayoutEngine

    with _drawing(fig):
        TightLayoutEngine().execute(fig)


def _integer_ticks(axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _si_ticks(axis, unit: str) -> None:
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _axis_si(v, unit)))


def _save(fig: Figure, path: Path) -> Path:
    """``fig`` drawn on its canvas (:func:`_figure`: at :data:`DPI`) and written as a PNG of its
    pixels, as ``savefig`` writes them but without an alpha channel when every pixel is opaque
    (a report's figure on its white face: a quarter of the bytes to compress) and at
    :data:`PNG_LEVEL`."""
    from PIL import Image

    with _drawing(fig):
        fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    opaque = bool((rgba[..., 3] == 255).all())
    Image.fromarray(rgba[..., :3] if opaque else rgba).save(path, format="png", compress_level=PNG_LEVEL)
    return path


# A title's height on its axes (the default).  Given, matplotlib places the title there at once;
# left to it, it measures the y axis' tick labels first (every draw and layout, each axes), to
# lift the title over the axis' offset text ("1e6"), which an axis with no ticks, categories or
# k / M / G labels (:func:`_si_ticks`) never has: the same place, ~20% of the latency figure's
# drawing.  Other axes' titles are left to matplotlib.
TITLE_Y = 1.0


def _empty(fig: Figure, title: str, text: str):
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title(title, y=TITLE_Y)
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=13, color="#555", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _t0(t) -> pd.Timestamp | None:
    """The first packet's time of loaded tables (None when nothing is stamped)."""
    vals = []
    for df in (t.connections, t.methods, t.messages, t.frames):
        if len(df) and df["ts"].notna().any():
            vals.append(df["ts"].min())
    return min(vals) if vals else None


# --------------------------------------------------------------------------- figures


def fig_throughput(t, path: Path, bucket: str, t0) -> Path:
    """The throughput figure of the tables ``t`` (:func:`throughput_figure` of their totals)."""
    return throughput_figure(totals(t, bucket=bucket), path, bucket, t0)


def throughput_figure(tot: pd.DataFrame, path: Path, bucket: str, t0) -> Path:
    """Messages and bytes per second over time, per direction; ``tot``: the
    :func:`~amqpcap.analysis.traffic.totals` per ``bucket``."""
    fig = _figure(figsize=(11, 6.5))
    if len(tot) == 0 or t0 is None:
        _empty(fig, "Throughput", "no AMQP traffic")
        return _save(fig, path)
    secs = pd.Timedelta(bucket).total_seconds()
    x = (pd.to_datetime(tot["bucket"], utc=True) - t0).dt.total_seconds().to_numpy()
    ax1 = fig.add_subplot(2, 1, 1)
    ax2 = fig.add_subplot(2, 1, 2, sharex=ax1)
    # client → server wide and under, server → client narrow on top: equal rates (a broker
    # forwarding what it gets) show both lines, not one
    for d, color, label, width in (
        ("c2s", C2S, "client → server", 3.2),
        ("s2c", S2C, "server → client", 1.1),
    ):
        ax1.step(x, tot[f"messages_{d}"] / secs, where="post", color=color, label=label, linewidth=width)
        ax2.step(
            x,
            tot[f"wire_bytes_{d}"] / secs,
            where="post",
            color=color,
            label=f"wire, {label}",
            linewidth=width,
        )
        ax2.step(
            x,
            tot[f"body_bytes_{d}"] / secs,
            where="post",
            color=color,
            linestyle="--",
            linewidth=width,
            alpha=0.7,
            label=f"body, {label}",
        )
    ax1.set_ylabel("messages / s")
    ax1.set_title(
        f"Throughput per {_fmt_bucket(bucket)} bucket\n({frames_note(tot.attrs.get('frames_source'))})",
        fontsize=10,
        y=TITLE_Y,  # (its y axis in k / M / G)
    )
    ax1.legend(loc="upper right", fontsize=8)
    ax2.set_ylabel("bytes / s (wire solid, body dashed)")
    ax2.set_xlabel(f"time since first packet (s; t0 = {t0:%Y-%m-%d %H:%M:%S} UTC)")
    ax2.legend(loc="upper right", fontsize=8, ncol=2)
    # k / M / G only: a sparse capture's 0.014 msg/s must not read "14m" (milli)
    _si_ticks(ax1.yaxis, "")
    _si_ticks(ax2.yaxis, "B/s")
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    fig.subplots_adjust(**THROUGHPUT_MARGINS)
    return _save(fig, path)


_KIND_TITLES = {
    "method_rtt": "method round trip",
    "confirm": "publisher confirm",
    "consumer_ack": "consumer ack",
    "transit": "broker transit",
    "rpc": "application RPC",
    "connection_setup": "connection setup (SYN → open-ok)",
}


def _ok_latencies(kind: str, df: pd.DataFrame) -> np.ndarray:
    if len(df) == 0:
        return np.zeros(0)
    if kind == "method_rtt" or kind == "connection_setup":
        df = df[df["status"] == "ok"]
    elif kind == "confirm":
        df = df[df["outcome"].isin(["ack", "nack"])]
    elif kind == "consumer_ack":
        df = df[df["outcome"].isin(["ack", "nack", "reject"])]
    elif kind == "transit":
        df = df[df["first"].fillna(False).astype(bool)]
    a = df["latency_ms"].to_numpy(dtype=float)
    return a[np.isfinite(a)]


def latency_bins(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """The histogram of the latencies ``a`` (finite, ms) the figure draws: (counts, bin edges,
    whether the x axis is logarithmic: 39 log-spaced bins when the positive values span more
    than a factor of 20, the values below the smallest positive one counted in the first, as that
    one is).  No copy of ``a`` is made (a mask of it: a byte a value)."""
    lo = np.min(a, where=a > 0, initial=np.inf) if len(a) else np.inf
    if np.isfinite(lo) and a.max() / lo > 20:
        bins = np.logspace(math.log10(lo), math.log10(a.max()) + 1e-9, 40)
        counts, edges = np.histogram(a, bins=bins)  # (values below the first edge not counted)
        if lo >= edges[0]:
            counts[0] += np.count_nonzero(a < lo)
        return counts, edges, True
    return *np.histogram(a, bins=min(40, max(5, len(a)))), False


class LatencyDrawn(NamedTuple):
    """What the latency figure draws of one kind's matched latencies: their number, the histogram
    (:func:`latency_bins`: counts, bin edges, logarithmic x) and their p50 and p99 (ms)."""

    n: int
    counts: np.ndarray
    edges: np.ndarray
    log: bool
    p50_p99: np.ndarray


def latency_drawn(a: np.ndarray, own: bool = False) -> LatencyDrawn:
    """:class:`LatencyDrawn` of the latencies ``a`` (finite, ms): a few numbers in place of one a
    pair (a forked process sends these, not its arrays).  ``own``: ``a`` may be reordered in place
    (no copy of it is made)."""
    if len(a) == 0:
        return LatencyDrawn(0, np.zeros(0), np.zeros(0), False, np.zeros(0))
    return LatencyDrawn(len(a), *latency_bins(a), np.percentile(a, [50, 99], overwrite_input=own))


def fig_latency(lat: dict, path: Path) -> Path:
    """Histograms per latency kind; ``lat``: kind -> its pairing frame, the matched pairs'
    latencies (ms) already taken from it, or their :class:`LatencyDrawn`.  Each drawn from its
    bins' counts as one filled step outline (not a bar a bin, nor a value per pair); the counts
    in k / M / G, so the six panels' margins are fixed (:data:`LATENCY_MARGINS`), not measured
    from every tick label by a tight layout."""
    fig = _figure(figsize=(12, 7))
    fig.subplots_adjust(**LATENCY_MARGINS)
    kinds = list(LATENCY_KINDS)
    for i, kind in enumerate(kinds):
        ax = fig.add_subplot(2, 3, i + 1)
        v = lat[kind]
        if not isinstance(v, LatencyDrawn):
            v = latency_drawn(
                _ok_latencies(kind, v) if isinstance(v, pd.DataFrame) else np.asarray(v, dtype=float)
            )
        ax.set_title(f"{_KIND_TITLES[kind]} (n={v.n:,})", fontsize=10, y=TITLE_Y)  # (k / M / G or no ticks)
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("pairs")
        if v.n == 0:
            ax.text(0.5, 0.5, "no pairs", ha="center", va="center", color="#777", transform=ax.transAxes)
            ax.set_yticks([])
            ax.set_xticks([])
            continue
        _integer_ticks(ax.yaxis)
        _si_ticks(ax.yaxis, "")
        ax.stairs(v.counts, v.edges, fill=True, color="#4c72b0")
        if v.log:
            ax.set_xscale("log")
        for q, style, p in zip((50, 99), ("-", ":"), v.p50_p99):
            ax.axvline(p, color="k", linestyle=style, linewidth=1, label=f"p{q} = {p:,.3f} ms")
        ax.legend(fontsize=7, loc="upper right")
        ax.grid(True, alpha=0.3)
    fig.suptitle("Latency distributions (matched pairs only)")
    return _save(fig, path)


def fig_errors(err: pd.DataFrame, path: Path, top: int = 20) -> Path:
    if len(err) == 0:
        fig = _figure(figsize=(9, 2.5))
        _empty(fig, "Errors", "no errors")
        return _save(fig, path)
    e = err.copy()

    def label(c, n, m, k):
        head = (
            " ".join(x for x in ("" if pd.isna(c) else str(int(c)), n if isinstance(n, str) else "") if x)
            or k
        )
        return f"{head} ({m})" if isinstance(m, str) and m != head else head

    e["label"] = [label(c, n, m, k) for c, n, m, k in zip(e["code"], e["name"], e["method"], e["kind"])]
    counts = (
        e.groupby(["label", "class"], dropna=False, observed=True)
        .size()
        .reset_index(name="n")
        .sort_values("n", ascending=True)
    )
    more = len(counts) - top
    counts = counts.tail(top)
    fig = _figure(figsize=(10, max(2.5, 0.38 * len(counts) + 1.3)))
    ax = fig.add_subplot(1, 1, 1)
    colors = [
        "#d62728" if c == "hard" else ("#ff7f0e" if c == "soft" else "#7f7f7f") for c in counts["class"]
    ]
    ax.barh(counts["label"], counts["n"], color=colors)
    for y, n in enumerate(counts["n"]):
        ax.text(n, y, f" {n}", va="center", fontsize=8)
    ax.set_xlabel("occurrences (count)")
    ax.set_title(
        "Errors by code (red: hard, orange: soft, grey: no class)"
        + (f" — top {top}, {more} more in the table" if more > 0 else ""),
        y=TITLE_Y,  # (its y axis: categories)
    )
    _integer_ticks(ax.xaxis)
    ax.grid(True, axis="x", alpha=0.3)
    _tight(fig)
    return _save(fig, path)


def channel_lifetimes(t) -> pd.DataFrame:
    """(capture, tcp_stream, channel, start_ns, end_ns or NAT): channel.open -> channel.close-ok
    (0-10: session.attach -> session.detached)."""
    m = ordered(t.methods, ["channel.open", "channel.close-ok", "session.attach", "session.detached"])
    rows = []
    open_: dict = {}
    for cap, st, ch, name, ts in records(m, ["capture", "tcp_stream", "channel", "method", "ts"]):
        k = (cap, st, ch)
        if name in ("channel.open", "session.attach"):
            open_.setdefault(k, ts)
        elif k in open_:
            rows.append((cap, st, ch, open_.pop(k), ts))
    rows += [(k[0], k[1], k[2], v, None) for k, v in open_.items()]
    cols = ["capture", "tcp_stream", "channel", "start", "end"]
    return pd.DataFrame({c: pd.Series([r[i] for r in rows], dtype=object) for i, c in enumerate(cols)})


# a step line of more points is drawn as its envelope: 2,000 spans of the axis' x, each under a
# pixel of a figure's ~1,000-1,100 px wide axes, so the envelope covers the pixels the whole line
# would
STEP_POINTS = 8_000


def step_envelope(
    x: np.ndarray, y: np.ndarray, most: int = STEP_POINTS, axis: tuple | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The points of a step line drawn ``where="post"`` (``x`` ascending) worth drawing: those
    whose value differs from the one before (a repeated value draws nothing of its own: a run of
    missing values is one gap), and the last.  Past ``most`` of them (all values finite), in each of
    ``most // 4`` equal spans of the axis' x (``axis``: its first and last x, e.g. of all the lines
    it draws; default the line's own) that has more than 4 of them, the first, the last, and the
    first at the span's highest and lowest value (a million connections: a few MB to draw, not
    hundreds; a line over a seventh of the axis: at most a seventh of ``most``)."""
    if len(y) < 3 or not (x[1:] >= x[:-1]).all():  # (x not ascending: drawn as it is)
        return x, y
    same = y[1:] == y[:-1]
    if y.dtype.kind == "f":
        same |= np.isnan(y[1:]) & np.isnan(y[:-1])
    same[-1] = False  # (the last point: the line's end)
    if same.any():
        keep = np.r_[True, ~same]
        x, y = x[keep], y[keep]
    n = len(x)
    if (n <= most and axis is None) or not np.isfinite(x[[0, -1]]).all() or not np.isfinite(y).all():
        return x, y
    bins = most // 4
    lo, hi = (x[0], x[-1]) if axis is None else (min(axis[0], x[0]), max(axis[1], x[-1]))
    width = max(float(hi - lo), 1e-300)
    b = np.minimum(((x - lo) / width * bins).astype(np.int64), bins - 1)
    if n <= min(most, 4 * (b[-1] - b[0] + 1)):  # (no more than the envelope of the spans it crosses)
        return x, y
    starts = np.r_[0, np.flatnonzero(np.diff(b)) + 1]
    seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    keep = [starts, np.r_[starts[1:], n] - 1]
    for extreme in (np.maximum, np.minimum):
        at = np.flatnonzero(y == extreme.reduceat(y, starts)[seg])
        keep.append(at[np.unique(seg[at], return_index=True)[1]])
    idx = np.unique(np.concatenate(keep))
    return x[idx], y[idx]


def fig_timeline(t, err: pd.DataFrame, path: Path, t0, top: int = TOP_CONNECTIONS) -> Path:
    c = t.connections
    if len(c) == 0 or t0 is None:
        fig = _figure(figsize=(10, 2.5))
        _empty(fig, "Connections", "no connections")
        return _save(fig, path)
    t0n = int(pd.Timestamp(t0).value)
    start = ns(c["ts"])
    end = ns(c["end_ts"].fillna(c["ts"]))
    c = c.assign(
        x_s=(start - t0n) / 1e9,
        x_e=(end - t0n) / 1e9,
        x_b=(c["bytes_c2s"].fillna(0).astype("int64") + c["bytes_s2c"].fillna(0).astype("int64")).to_numpy(),
    )
    n = len(c)
    # the busiest ``top`` (bytes, then start; ties in table order) taken alone, not the whole table sorted
    busiest = np.lexsort((c["x_s"].to_numpy(dtype=np.float64), -c["x_b"].to_numpy(dtype=np.int64)))[:top]
    shown = c.iloc[busiest].sort_values("x_s")
    fig = _figure(figsize=(12, 3 + 0.28 * len(shown)))
    gs = fig.add_gridspec(2, 1, height_ratios=[1, max(1.5, 0.28 * len(shown) / 2)])
    ax0 = fig.add_subplot(gs[0])
    ax = fig.add_subplot(gs[1], sharex=ax0)
    # concurrency of every connection and channel (aggregate: readable at any scale)
    x = np.concatenate([c["x_s"].to_numpy(), c["x_e"].to_numpy()])
    step = np.r_[np.ones(n), -np.ones(n)]
    order = np.lexsort((step, x))  # (a close before an open at the same time)
    ax0.step(
        *step_envelope(x[order], np.cumsum(step[order])),
        where="post",
        color="#2ca02c",
        label="open connections",
    )
    del x, step, order
    ch = channel_lifetimes(t)
    if len(ch):
        cs = (np.asarray(ch["start"], dtype=np.int64) - t0n) / 1e9
        ends = np.array(
            [e if e is not None and not pd.isna(e) else np.iinfo(np.int64).min for e in ch["end"]],
            dtype=np.int64,
        )
        conn_end = dict(zip(zip(c["capture"], c["tcp_stream"]), end))
        fb = np.array(
            [conn_end.get((a, b), np.int64(t0n)) for a, b in zip(ch["capture"], ch["tcp_stream"])],
            dtype=np.int64,
        )
        ce = (np.where(ends == np.iinfo(np.int64).min, fb, ends) - t0n) / 1e9
        e2 = np.concatenate([np.c_[cs, np.ones(len(cs))], np.c_[ce, -np.ones(len(ce))]])
        e2 = e2[np.lexsort((e2[:, 1], e2[:, 0]))]
        ax0.step(
            *step_envelope(e2[:, 0], np.cumsum(e2[:, 1])),
            where="post",
            color="#9467bd",
            label="open channels / sessions",
        )
    # connection.blocked periods, shaded on both panels (a still-blocked one: to its conversation's end)
    bl = blocked_frame(t)
    if len(bl):
        conn_end_ts = dict(zip(zip(c["capture"], c["tcp_stream"]), end))
        pos = {(a, b): i for i, (a, b) in enumerate(zip(shown["capture"], shown["tcp_stream"]))}
        for k, (cap, st, b0, b1) in enumerate(
            zip(bl["capture"], bl["tcp_stream"], ns(bl["blocked_ts"]), ns(bl["unblocked_ts"]))
        ):
            stop = b1 if b1 != NAT else conn_end_ts.get((cap, st), b0)
            x0, x1 = (b0 - t0n) / 1e9, (max(stop, b0) - t0n) / 1e9
            ax0.axvspan(
                x0, x1, color="#ff7f0e", alpha=0.25, lw=0, label="connection.blocked" if k == 0 else None
            )
            if (cap, st) in pos:
                y = pos[(cap, st)]
                ax.barh(
                    y,
                    max(x1 - x0, 1e-6),
                    left=x0,
                    height=0.9,
                    color="#ff7f0e",
                    alpha=0.45,
                    zorder=3,
                    label="blocked" if k == 0 else None,
                )
    ax0.set_ylabel("open (count)")
    ax0.set_title(
        f"{n:,} connection(s)"
        + (f"; timeline below: the {len(shown)} with most bytes" if n > len(shown) else "")
    )
    ax0.legend(loc="upper right", fontsize=8)
    ax0.grid(True, alpha=0.3)
    ax0.set_ylim(bottom=0)
    # per-connection bars with their channels and errors
    labels = []
    chmap = {}
    if len(ch):
        for cap, st, chn, s, e in ch.itertuples(index=False, name=None):
            chmap.setdefault((cap, st), []).append((chn, s, e))
    for y, r in enumerate(shown.itertuples(index=False)):
        ax.barh(y, max(r.x_e - r.x_s, 1e-6), left=r.x_s, height=0.7, color="#c7d9ef", edgecolor="#4c72b0")
        lst = chmap.get((r.capture, r.tcp_stream), [])
        for i, (_chn, s, e) in enumerate(sorted(lst, key=lambda x: x[1])[:6]):
            s_ = (s - t0n) / 1e9
            e_ = ((e if e is not None and not pd.isna(e) else r.x_e * 1e9 + t0n) - t0n) / 1e9
            yy = y - 0.28 + i * 0.1
            ax.plot([s_, e_], [yy, yy], color="#9467bd", linewidth=1.5, solid_capstyle="butt")
        name = r.connection_name if isinstance(r.connection_name, str) and r.connection_name else ""
        labels.append(
            f"#{r.tcp_stream} {r.client_ip}:{r.client_port}"
            + (f" {name[:24]}" if name else "")
            + (f" [{r.capture[-18:]}]" if t.connections["capture"].nunique() > 1 else "")
        )
    if len(err):
        pos = {(a, b): i for i, (a, b) in enumerate(zip(shown["capture"], shown["tcp_stream"]))}
        ex, ey = [], []
        for cap, st, ts in zip(err["capture"], err["tcp_stream"], err["ts"]):
            if (cap, st) in pos and not pd.isna(ts):
                ex.append((pd.Timestamp(ts).value - t0n) / 1e9)
                ey.append(pos[(cap, st)])
        if ex:
            ax.scatter(ex, ey, marker="x", color="#d62728", zorder=5, label="error")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right", fontsize=8)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7 if len(labels) > 20 else 8)
    ax.invert_yaxis()
    ax.set_xlabel(f"time since first packet (s; t0 = {t0:%Y-%m-%d %H:%M:%S} UTC); purple lines: channels")
    ax.grid(True, axis="x", alpha=0.3)
    _tight(fig)
    return _save(fig, path)


_CHANNEL = ["capture", "tcp_stream", "channel"]


def _channel_codes(un: pd.DataFrame) -> np.ndarray:
    """Each row's channel (capture, tcp_stream, channel; a missing value a key of its own) as a
    code 0, 1, ... in order of first row: one int64 per row, no grouping of the frame."""
    cap = un["capture"]
    if isinstance(cap.dtype, pd.CategoricalDtype):
        key = cap.cat.codes.to_numpy().astype(np.int64)
    else:
        key = pd.factorize(cap, use_na_sentinel=False)[0].astype(np.int64)
    for c, bits in (("tcp_stream", 33), ("channel", 17)):  # (stream + 1 < 2**33, channel + 1 < 2**17)
        key <<= bits
        key += un[c].astype("Int64").fillna(-1).to_numpy(dtype=np.int64) + 1
    return pd.factorize(key)[0].astype(np.int64)


def _changes(codes: np.ndarray, counts: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
    """Each row's change of its channel's count (``codes``, ``counts``), channel by channel in
    row order (a channel's first row: its count), a chunk of rows at a time."""
    d = np.empty(len(counts), dtype=np.int64)
    last = np.zeros(int(codes.max()) + 1 if len(codes) else 0, dtype=np.int64)
    for s in range(0, len(counts), chunk):
        g, v = codes[s : s + chunk], counts[s : s + chunk]
        o = np.argsort(g, kind="stable")
        gs, vs = g[o], v[o]
        same = gs[1:] == gs[:-1]
        prev = np.r_[0, vs[:-1]]
        first = np.r_[True, ~same]
        prev[first] = last[gs[first]]
        d[s + o] = vs - prev
        end = np.r_[~same, True]
        last[gs[end]] = vs[end]
    return d


def total_unacked(
    un: pd.DataFrame, t0n: int, codes: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The unacknowledged deliveries of every channel together after each event of an
    :func:`~amqpcap.analysis.connection_health.unacked` frame, in time order: (seconds since
    ``t0n`` ns, total).  Each channel's changes summed in time order, from column arrays and the
    rows' channel ``codes`` (:func:`_channel_codes`), no grouping or copy of the frame."""
    d = _changes(_channel_codes(un) if codes is None else codes, un["unacked"].to_numpy(dtype=np.int64))
    ts = ns(un["ts"])
    if len(ts) > 1 and not (ts[1:] >= ts[:-1]).all():  # (in time order already: no reordering)
        order = np.argsort(ts, kind="stable")
        ts, d = ts[order], d[order]
        del order
    np.cumsum(d, out=d)
    y = d.astype(float)
    del d
    return (ts - t0n) / 1e9, y


def _channel_rows(un: pd.DataFrame, codes: np.ndarray) -> dict:
    """Each channel's rows of ``un`` in order (positions), by its key (capture, tcp_stream,
    channel), from the rows' channel ``codes`` (:func:`_channel_codes`), no comparison of the
    frame's columns a channel; None: no row (a key with a missing value matches no row, as a
    comparison with it matches none)."""
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes))
    starts = np.r_[0, ends[:-1]]
    keys = un.iloc[order[starts]][_CHANNEL].itertuples(index=False, name=None)
    rows = {k: order[a:b] for k, a, b in zip(keys, starts, ends) if not any(pd.isna(v) for v in k)}
    rows[None] = order[:0]
    return rows


def _per_channel(un: pd.DataFrame, codes: np.ndarray) -> tuple[pd.Series, pd.Series]:
    """Each channel's peak unacked count and largest prefetch (0 when none), indexed and ordered
    as a groupby of the frame by channel gives them, from a row a channel."""
    n = int(codes.max()) + 1
    peak = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(peak, codes, un["unacked"].to_numpy(dtype=np.int64))
    pf = np.full(n, -1, dtype=np.int64)  # (a prefetch count is >= 0: -1 is none)
    np.maximum.at(pf, codes, un["prefetch_count"].astype("Int64").fillna(-1).to_numpy(dtype=np.int64))
    first = np.unique(codes, return_index=True)[1]
    return _peaks(un.iloc[first][_CHANNEL], peak, pf)


def _peaks(one: pd.DataFrame, peak: np.ndarray, pf: np.ndarray) -> tuple[pd.Series, pd.Series]:
    """:func:`_per_channel` of a channel a row: ``one``'s keys (capture, tcp_stream, channel), each
    one's peak count and largest prefetch count (-1: none)."""
    one = one.assign(
        unacked=peak, prefetch_count=pd.array(np.where(pf >= 0, pf, 0), dtype="Int64").astype(float)
    )
    by = one.groupby(_CHANNEL, dropna=False, observed=True)
    return by["unacked"].max().sort_values(ascending=False), by["prefetch_count"].max()


def fig_unacked(un: pd.DataFrame | Timeline, path: Path, t0, top: int = TOP_CHANNELS) -> Path:
    """Up to ``top`` channels: each channel's unacked count over time with its prefetch.
    More channels: the total over time, and each channel's peak against its prefetch.  ``un``:
    :func:`~amqpcap.analysis.connection_health.unacked`'s capture, tcp_stream, channel, ts, event,
    unacked and prefetch_count, or the :class:`~amqpcap.analysis.unacked_counts.Timeline` of a
    consumer-ack pass (more than ``top`` channels: drawn from its steps' arrays, no frame, and
    the steps let go)."""
    steps = un if isinstance(un, Timeline) else None
    if steps is not None:
        some = steps.delivered()
    else:
        some = len(un) and bool((un["event"] != "qos").any())
    if not some or t0 is None:
        fig = _figure(figsize=(10, 2.5))
        _empty(fig, "Unacknowledged deliveries", "no acknowledged-mode deliveries")
        return _save(fig, path)
    t0n = int(pd.Timestamp(t0).value)
    xlabel = f"time since first packet (s; t0 = {t0:%Y-%m-%d %H:%M:%S} UTC)"
    if steps is not None:
        ids, peak, pf = steps.channels()
        if len(ids) > top:
            peak, pf = _peaks(pd.DataFrame(steps.channel_keys(ids)), peak, pf)
            ends = (np.array(steps.span()) - t0n) / 1e9
            pieces = (((ts - t0n) / 1e9, total.astype(float)) for ts, total in steps.total())
            return _unacked_total(pieces, len(steps), ends, peak, pf, path, xlabel)
        un = steps.frame()
    codes = _channel_codes(un)
    peak, pf = _per_channel(un, codes)
    if len(peak) <= top:
        fig = _figure(figsize=(11, 5))
        ax = fig.add_subplot(1, 1, 1)
        rows = _channel_rows(un, codes)
        ts, counts = ns(un["ts"]), un["unacked"].to_numpy(dtype=float)
        prefetch = un["prefetch_count"].astype("Float64").fillna(0).astype(float).to_numpy()
        xs = {k: (ts[rows.get(k, rows[None])] - t0n) / 1e9 for k in peak.index}
        ends = [x[[0, -1]] for x in xs.values() if len(x)]
        axis = (min(e[0] for e in ends), max(e[1] for e in ends)) if ends else None
        for i, k in enumerate(peak.index):
            g = rows.get(k, rows[None])
            x = xs[k]
            col = f"C{i % 10}"
            ax.step(
                *step_envelope(x, counts[g], axis=axis),
                where="post",
                color=col,
                label=f"stream {k[1]} ch {k[2]}",
            )
            pc = prefetch[g]
            if (pc > 0).any():
                ax.step(
                    *step_envelope(x, np.where(pc > 0, pc, np.nan), axis=axis),
                    where="post",
                    color=col,
                    linestyle="--",
                    alpha=0.8,
                    label=f"prefetch, stream {k[1]} ch {k[2]}",
                )
        ax.set_xlabel(xlabel)
        ax.set_ylabel("unacknowledged deliveries (count)")
        ax.set_title("Unacknowledged deliveries per channel (solid) vs basic.qos prefetch-count (dashed)")
        _integer_ticks(ax.yaxis)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right", ncol=2)
        fig.subplots_adjust(**UNACKED_MARGINS)
        return _save(fig, path)
    x, y = total_unacked(un, t0n, codes)
    del codes, un
    return _unacked_total([(x, y)], len(x), x[[0, -1]], peak, pf, path, xlabel)


def _bucket_maxima(pieces, x0: float, width: float) -> tuple[np.ndarray, np.ndarray]:
    """The start and the maximum of each bucket of ``width`` seconds from ``x0`` that a step
    falls in, of a step line given in ``pieces`` (x, y) in x order."""
    starts: list = []
    tops: list = []
    for x, y in pieces:
        if not len(x):
            continue
        b = np.floor((x - x0) / width)
        at = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])  # (x ascending: each bucket one run)
        top = np.maximum.reduceat(y, at)
        b = b[at]
        if starts and starts[-1][-1] == b[0]:  # (a bucket over two pieces)
            tops[-1][-1] = max(tops[-1][-1], top[0])
            b, top = b[1:], top[1:]
        if len(b):
            starts.append(b)
            tops.append(top)
    return x0 + np.concatenate(starts) * width, np.concatenate(tops)


def _unacked_total(pieces, n: int, ends, peak: pd.Series, pf: pd.Series, path: Path, xlabel: str) -> Path:
    """:func:`fig_unacked` of many channels: the total over time (``pieces``: (x, y) in x order,
    ``n`` of them in all, x from ``ends[0]`` to ``ends[1]``: seconds since the first packet, y:
    the total after each step) and each channel's ``peak`` against its ``pf``."""
    fig = _figure(figsize=(12, 5))
    ax1 = fig.add_subplot(1, 2, 1)
    ax2 = fig.add_subplot(1, 2, 2)
    if n > 2000:  # too many steps to draw legibly: the maximum per bucket
        span = float(ends[1] - ends[0]) or 1.0
        width = pd.Timedelta(pick_bucket(span, target=300)).total_seconds()
        ax1.step(
            *_bucket_maxima(pieces, ends[0], width),
            where="post",
            color="#4c72b0",
            label=f"maximum per {_fmt_bucket(pick_bucket(span, target=300))}",
        )
        ax1.legend(fontsize=8, loc="upper right")
    else:
        x, y = (np.concatenate(v) for v in zip(*pieces))
        ax1.step(x, y, where="post", color="#4c72b0")
    ax1.set_xlabel(xlabel)
    ax1.set_ylabel("unacknowledged deliveries, all channels (count)")
    ax1.set_title(f"Total unacknowledged over {len(peak):,} channels")
    _integer_ticks(ax1.yaxis)
    ax1.set_ylim(bottom=0)
    ax1.grid(True, alpha=0.3)
    pk = peak.reindex(pf.index).astype(float)
    over = pk.to_numpy() > np.where(pf.to_numpy() > 0, pf.to_numpy(), np.inf)
    rng = np.random.default_rng(0)  # jitter: integer counts pile up on each other
    jx = pf.to_numpy() + rng.uniform(-0.2, 0.2, len(pf))
    jy = pk.to_numpy() + rng.uniform(-0.2, 0.2, len(pk))
    ax2.scatter(jx[~over], jy[~over], s=8, alpha=0.4, color="#4c72b0", label="within prefetch (or no limit)")
    if over.any():
        ax2.scatter(
            jx[over], jy[over], s=12, alpha=0.8, color="#d62728", label=f"over prefetch ({int(over.sum())})"
        )
    hi = max(1.0, float(np.nanmax(pk.to_numpy())), float(np.nanmax(pf.to_numpy())))
    ax2.plot([0, hi], [0, hi], color="#777", linestyle="--", linewidth=1, label="peak = prefetch")
    ax2.set_xlabel("basic.qos prefetch-count (0 = none set / unlimited)")
    ax2.set_ylabel("peak unacknowledged deliveries (count)")
    ax2.set_title("Per channel: peak unacked vs prefetch")
    ax2.legend(fontsize=8, loc="upper left")
    ax2.grid(True, alpha=0.3)
    _tight(fig)
    return _save(fig, path)


# --------------------------------------------------------------------------- HTML


def _html_table(headers, rows, numeric=None) -> str:
    numeric = numeric or set()
    out = [
        "<table><thead><tr>"
        + "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
        + "</tr></thead><tbody>"
    ]
    for r in rows:
        cells = []
        for i, v in enumerate(r):
            cls = ' class="num"' if i in numeric else ""
            cells.append(f"<td{cls}>{html.escape('' if v is None else str(v))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _ms(v):
    return "–" if v is None else f"{v:,.3f}"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;
  color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f5f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.note{color:#666;font-size:.9em}
"""


# publisher and consumer nacks are different failures: the broker refused a message / a consumer did
_KIND_LABELS = {
    ("nack", "basic.publish"): "publisher nack",
    ("nack", "basic.deliver"): "consumer nack",
    ("reject", "basic.deliver"): "consumer reject",
}


_PAGE_LIMIT = 50  # rows of the page's tables (connections, methods, errors)


def _img(alt: str, image: str) -> str:
    return f"<img alt='{alt}' src='data:image/png;base64,{image}'>"


def _head(s: dict) -> list:
    """The page's head and its captures' line."""
    span = s.get("span", {})
    return [
        "<!doctype html><html><head><meta charset='utf-8'><title>amqpcap report</title>"
        f"<style>{_CSS}</style></head><body>",
        "<h1>amqpcap report</h1>",
        f"<p>Captures: {html.escape(', '.join(s.get('captures', [])) or '–')}<br>"
        f"{s['connections']:,} connection(s); versions: "
        + html.escape(", ".join(f"{k} ×{v}" for k, v in s.get("versions", {}).items()) or "–")
        + (
            f"; span {span['duration_s']:.3f} s ({html.escape(span['start'])} → {html.escape(span['end'])})"
            if span.get("duration_s") is not None
            else ""
        )
        + "</p>",
    ]


def _latency_section(s: dict, image: str, limit: int) -> list:
    rows = []
    for kind in LATENCY_KINDS:
        d = s["latency"][kind]
        extra = ", ".join(
            f"{k}={v}"
            for k, v in d.items()
            if k not in ("count", "p50_ms", "p90_ms", "p99_ms", "max_ms", "by_method") and v
        )
        rows.append(
            [
                _KIND_TITLES[kind],
                f"{d['count']:,}",
                _ms(d["p50_ms"]),
                _ms(d["p90_ms"]),
                _ms(d["p99_ms"]),
                _ms(d["max_ms"]),
                extra,
            ]
        )
    parts = [
        "<h2>Latency</h2>",
        _html_table(
            ["kind", "pairs", "p50 ms", "p90 ms", "p99 ms", "max ms", "other"], rows, numeric={1, 2, 3, 4, 5}
        ),
        _img("latency distributions", image),
    ]
    by_m = s["latency"]["method_rtt"].get("by_method", {})
    if by_m:
        items = sorted(by_m.items(), key=lambda kv: -kv[1]["count"])[:limit]
        parts += [
            "<h3>Method round trips by request</h3>",
            _html_table(
                ["request", "pairs", "p50 ms", "p90 ms", "p99 ms", "max ms"],
                [
                    [k, d["count"], _ms(d["p50_ms"]), _ms(d["p90_ms"]), _ms(d["p99_ms"]), _ms(d["max_ms"])]
                    for k, d in items
                ],
                numeric={1, 2, 3, 4, 5},
            ),
        ]
    return parts


def _throughput_section(s: dict, image: str, plot_bucket: str) -> list:
    tp = s["throughput"]
    heads, trows = throughput_cells(tp, "→")
    return [
        "<h2>Throughput</h2>",
        f"<p class='note'>Table: mean and peak over {tp['bucket_s']:g} s buckets "
        "(as <code>amqpcap stats</code>); "
        f"the plot below uses {html.escape(_fmt_bucket(plot_bucket))} buckets, so its peaks differ "
        f"(shorter buckets show higher peaks); {html.escape(frames_note(tp['frames_source']))}.</p>",
        _html_table(
            heads,
            trows,
            numeric={1, 2, 3, 4, 5, 6, 7},
        ),
        _img("throughput over time", image),
    ]


def _errors_section(s: dict, image: str, limit: int) -> list:
    errs = s["errors"]
    parts = ["<h2>Errors</h2>"]
    if errs:
        several = len(s.get("captures", [])) > 1
        erows = []
        for e in errs[:limit]:
            for x in e.get("texts") or [dict(e, text=None)]:
                erows.append(
                    [
                        x["count"],
                        e["code"],
                        e["name"],
                        e["class"],
                        e["method"],
                        e.get("failing_method"),
                        _KIND_LABELS.get((e["kind"], e.get("failing_method")), e["kind"]),
                    ]
                    + ([x.get("first_capture")] if several else [])
                    + [x.get("first_tcp_stream"), x.get("first_frame"), x.get("text")]
                )
        parts.append(
            _html_table(
                ["count", "code", "name", "class", "method", "on", "kind"]
                + (["capture"] if several else [])
                + ["stream", "first frame", "reply text"],
                erows,
                numeric={0, 1, 7 + several, 8 + several},
            )
        )
        parts.append(
            "<p class='note'>first frame: Wireshark <code>frame.number</code> of the first occurrence.</p>"
        )
    else:
        parts.append("<p>No errors.</p>")
    parts.append(_img("errors by code", image))
    return parts


def _connections_section(s: dict, ct: pd.DataFrame, image: str) -> list:
    parts = ["<h2>Connections and channels</h2>"]
    n = ct.attrs["total"]
    if len(ct):
        if n > len(ct):
            parts.append(f"<p class='note'>The {len(ct)} busiest of {n:,} connections.</p>")
        several = len(s.get("captures", [])) > 1
        heads, crow = connection_cells(ct, several)
        first = 1 if several else 0
        parts.append(_html_table(heads, crow, numeric={first + i for i in (0, 6, 7, 8, 9)}))
    parts.append(_img("connection and channel timeline", image))
    return parts


def _health_section(s: dict, image: str) -> list:
    return [
        "<h2>Health</h2>",
        _html_table(["measure", "value"], [[k, v] for k, v in s.get("health", {}).items()], numeric={1}),
        "<p class='note'>Heartbeat gaps use every frame when the output has the frames table, else methods "
        "and contents only (heartbeat frames then invisible: gaps are upper bounds). TCP zero-window periods "
        "are not in the tables.</p>",
        _img("unacknowledged deliveries vs prefetch", image),
    ]


def _methods_sections(s: dict, limit: int) -> list:
    """The Methods and the Anomalies sections."""
    meths = list(s.get("methods", {}).items())
    an = s.get("anomalies", {})
    return [
        "<h2>Methods</h2>",
        _html_table(["method", "count"], [[k, f"{v:,}"] for k, v in meths[:limit]], numeric={1})
        + (f"<p class='note'>{len(meths) - limit} more in stats --json.</p>" if len(meths) > limit else ""),
        "<h2>Anomalies</h2>",
        _html_table(["kind", "count"], list(map(list, an.items())), numeric={1}) if an else "<p>None.</p>",
    ]


def _page(s: dict, ct: pd.DataFrame, images: dict, limit: int = _PAGE_LIMIT, plot_bucket: str = "1s") -> str:
    """The report page: its sections in order; ``ct``: :func:`connections_table` (its busiest
    ``limit``), ``images``: figure name -> its PNG in base64."""
    parts = [
        *_head(s),
        *_latency_section(s, images["latency"], limit),
        *_throughput_section(s, images["throughput"], plot_bucket),
        *_errors_section(s, images["errors"], limit),
        *_connections_section(s, ct, images["timeline"]),
        *_health_section(s, images["unacked"]),
        *_methods_sections(s, limit),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_report(t, out_dir, *, bucket: str | None = None, stats: dict | None = None) -> str:
    """Write the PNGs and ``index.html`` into ``out_dir`` (created); return the HTML path.

    ``bucket``: throughput plot bucket (default: picked for ~120 buckets over
    the capture); ``stats``: a precomputed :func:`amqpcap.analysis.stats` dict.
    """
    with malloc_pool(pool_threshold(t), keep=small_output(t)):
        return _write_report(t, out_dir, bucket, stats)


# the stats parts the report computes beside the figures drawn of the same loads: errors in the
# figures' process (:func:`_beside`: its errors and timeline figures), throughput from the totals
# of the throughput figure (one pass for stats' 1 s buckets and the plot's)
BESIDE = ("errors", "throughput")


def matched_latencies(kind: str, df) -> np.ndarray:
    """The matched pairs' latencies (ms) a pairing hands ``on_latency``: of its frame, or the
    values of a pairing computed in a pass (the caller's to reorder: a float64 array of a pass,
    all finite, is that array itself, no copy of it; its values in any order give the figure)."""
    if isinstance(df, pd.DataFrame):
        return _ok_latencies(kind, df)
    if isinstance(df, np.ndarray) and df.dtype == np.float64 and df.flags.writeable:
        # (all finite when the extremes are: no mask of a byte per value)
        if len(df) == 0 or (np.isfinite(df.max()) and np.isfinite(df.min())):
            return df
    a = np.asarray(df, dtype=float)
    return a[np.isfinite(a)]


def _write_report(t, out_dir, bucket: str | None, stats: dict | None) -> str:
    """The body of :func:`write_report`: one forked second process draws the figures (of a small
    output every one: only it imports matplotlib, while this one computes; :func:`_beside`) from
    its own passes over the tables (stats' errors part; of a larger output, :func:`_drawn_aside`,
    stats' other :data:`ASIDE` parts too) and from what this one sends it: the throughput totals
    of the plot's bucket, the unacked counts of its consumer-ack pass (of a larger output drawn
    here) and what the latency figure draws of its pairings, while it computes the rest of stats
    (two processes: the report needs no third beside stats').  Of a small output, the pairings
    are taken in turn (:data:`EITHER`): the figures' process computes those this one has not
    begun once it has drawn every figure but the latency one."""
    src = stats_source(t)  # a directory: each figure loads what it reads (section_tables)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0, duration = _origin(src)
    bucket = bucket or pick_bucket(duration)
    fork = is_output_dir(src) and can_fork()
    aside = _drawn_aside(src) if fork and stats is None else ()
    # the unacked counts of a larger output are drawn here: what the figures' process would be
    # sent of them grows with the deliveries (21 bytes a step: ~130 MB of a 4 GB capture's)
    unacked_aside = fork and small_output(src)
    either = TakenInTurn(len(EITHER)) if fork and stats is None and not aside else None
    beside = functools.partial(_beside, src, out, bucket, t0, stats is None, aside, unacked_aside, either)
    forked = Forked(functools.partial(beside, forked=True), inbox=True) if fork else None
    here: dict = {}  # the figures drawn by this process: name -> path

    def draw_unacked(un):
        here["unacked"] = fig_unacked(un, out / "unacked.png", t0)

    try:  # (this side's passes, of every group of OWN_ORDER, share their column reads)
        with shared_reads(small_output(src)):
            stats, paths, ct = _computed(
                src, bucket, stats, aside, beside, forked, None if unacked_aside else draw_unacked, either
            )
    except BaseException:
        if forked is not None:  # (it would wait for what this process sends)
            forked.stop()
        raise
    paths.update(here)
    images = {k: base64.b64encode(Path(paths[k]).read_bytes()).decode("ascii") for k in FIGURES}
    index = out / "index.html"
    index.write_text(_page(stats, ct, images, plot_bucket=bucket), encoding="utf-8")
    return os.fspath(index)


# The report's own stats parts (but BESIDE and those computed aside), in the order of what the
# figures' process waits for: the consumer acks' pass (the unacked figure; health reads its
# counts), the other pairings (the latency figure), then the parts no figure draws.
OWN_ORDER = (
    ("consumer_ack", "health"),
    ("transit", "rpc", "method_rtt", "connection_setup", "confirm"),
    ("span", "counts", "errors", "throughput", "amqp10"),
)

# The pairings either process computes (:class:`~amqpcap.analysis.forked.TakenInTurn`), of a small
# output: this one takes them from the front, the costliest first, the figures' process from the
# back once it waits for the latencies only; which one waits for the other then depends on the
# machine's load, so neither waits long.  This one then computes the errors part too, first (the
# figures' process draws two figures of it, the first thing it sends): what would wait for it
# there is balanced by the pairings the figures' process takes.
EITHER = ("transit", "confirm", "method_rtt", "connection_setup", "rpc")


def _own_groups(either: TakenInTurn | None):
    """This side's groups of parts (:data:`OWN_ORDER`'s), in order, each with whether every
    pairing of this side is done after it; with ``either``, the pairings one at a time, each
    taken just before it is computed."""
    acks, pairings, rest = OWN_ORDER
    yield acks, False
    if either is None:
        yield pairings, True
    else:
        while (i := either.first()) is not None:
            yield (EITHER[i],), False
        yield (), True
    yield rest, False


def _errors_sent(src, post) -> dict:
    """Stats' errors part (its dict, as :func:`stats_parts` gives it) computed here, and the errors
    the figures' process draws sent to it (:func:`_write_report`, of a small output)."""

    def sent(section, load):
        post(errors_frame(error_tables(load(), src)))

    return stats_parts(src, ("errors",), on_section=sent)


def _computed(
    src, bucket: str, stats: dict | None, aside: tuple, beside, forked, draw_unacked, either=None
) -> tuple:
    """This process' side of :func:`_write_report`: stats (``stats`` or the summary of its parts
    and the figures' process' ones), the figures' paths and the page's Connections table (made
    here at the end, while the figures' process draws); ``draw_unacked``: the unacked counts drawn
    here by it (None: sent to the figures' process); ``either``: the pairings taken in turn."""
    sent: list = []  # what is sent to the figures' process: totals, unacked counts, latencies
    post = forked.send if forked is not None else sent.append
    errors = _errors_sent(src, post) if either is not None else {}
    buckets = list(dict.fromkeys(([STATS_BUCKET] if stats is None else []) + [bucket]))
    tot = dict(zip(buckets, totals_at(section_tables(src, "throughput"), buckets)))
    post(tot[bucket])
    throughput = throughput_summary(tot[STATS_BUCKET], STATS_BUCKET) if stats is None else None
    del tot
    values: dict = {}  # kind -> what the figure draws of its matched latencies (no array of them)
    kept: dict = {}

    def keep(kind, df):
        values[kind] = latency_drawn(matched_latencies(kind, df), own=True)
        if kind == "consumer_ack" and isinstance(df, pd.DataFrame):
            kept[kind] = df[UNACKED_ACK_COLS]  # all unacked reads of the frame (no copy)

    def unacked(section, load):  # the pass' unacked counts, else the pairing kept and the qos rows
        if section == "consumer_ack":
            un = kept.pop("unacked", None)
            (draw_unacked or post)(unacked_frame(load(), acks=kept.pop("consumer_ack")) if un is None else un)

    if stats is None:
        got: dict = {"latency": {}, **errors}
        for group, paired in _own_groups(either):
            if group:
                part = stats_parts(
                    src,
                    tuple(p for p in group if p not in BESIDE and p not in aside),
                    on_latency=keep,
                    on_section=unacked,
                    on_unacked=lambda un: kept.__setitem__("unacked", un),
                    aside=(),
                )
                got["latency"].update(part.pop("latency"))
                got.update(part)
            if paired:  # every pairing of this side done
                post(values)
    else:
        for kind, pairing in LATENCY_FUNCTIONS.items():
            keep(kind, pairing(section_tables(src, kind)))
        unacked("consumer_ack", lambda: section_tables(src, "unacked"))
        post(values)
    ct = connections_table(src, _PAGE_LIMIT)
    their_parts, paths = beside(lambda: sent.pop(0)) if forked is None else forked.result()
    if stats is None:
        got["latency"].update(their_parts.pop("latency"))
        got.update(their_parts, throughput=throughput)
        stats = stats_of_parts(got)
    return stats, paths, ct


def _drawn_aside(src) -> tuple:
    """The stats parts (of :data:`ASIDE`, but :data:`BESIDE`) the figures' process computes too:
    none of a small output (its fixed costs, matplotlib's import and five figures, are then about
    half of the report's CPU), those of stats' second process of a larger one."""
    return () if small_output(src) else tuple(p for p in ASIDE if p not in BESIDE)


def _origin(src) -> tuple:
    """The figures' time origin (the first packet's time, None when nothing is stamped) and the
    span's ``duration_s`` as stats gives it, from one read of the ``ts`` columns."""
    if not is_output_dir(src):
        return _t0(src), span_duration(src)
    ends, first = span_parts(src)
    duration = round(pd.Timedelta(max(ends) - min(ends)).total_seconds(), 6) if ends else None
    return (None if first is None else pd.Timestamp(first, tz="UTC")), duration


def _beside(
    src, out: Path, bucket: str, t0, parts: bool, aside: tuple, small: bool, either, receive, *, forked=False
):
    """The figures of the report's forked process (:func:`_write_report`): (``parts``) the stats
    parts of ``aside`` and the errors part, or the pairings it takes of ``either`` (their dict, as
    :func:`stats_parts` gives it), and every figure (name -> path; ``small``: the unacked figure
    too).  ``receive()``, in turn: (``either``) the errors of the caller's errors part, the
    throughput totals of the plot's bucket, (``small``) the unacked counts of the consumer-ack
    pass (:func:`fig_unacked`'s), the :class:`LatencyDrawn` of the caller's pairings by kind.
    ``forked``: this is the report's forked process."""
    _import_matplotlib(freeze=forked)
    got: dict = {"latency": {}}
    latencies: dict = {}
    found: dict = {}

    def drawn(kind, df):
        latencies[kind] = latency_drawn(matched_latencies(kind, df), own=True)

    def errors(section, load):
        if section == "errors":
            found["err"] = errors_frame(error_tables(load(), src))

    if either is not None:  # (the caller's errors part: what the figures draw, the first it sends)
        found["err"] = receive()
    elif parts:
        got.update(
            stats_parts(
                src,
                aside + ("errors",),
                on_latency=drawn,
                on_section=errors,
            )
        )
    else:
        errors("errors", lambda: section_tables(src, "errors"))
    err = found.pop("err")
    paths = {"errors": fig_errors(err, out / "errors.png")}
    paths["timeline"] = fig_timeline(section_tables(src, "timeline"), err, out / "timeline.png", t0)
    del err
    release_memory()
    paths["throughput"] = throughput_figure(receive(), out / "throughput.png", bucket, t0)
    if small:
        paths["unacked"] = fig_unacked(receive(), out / "unacked.png", t0)
    if either is not None:
        _pairings_taken(src, either, got, drawn)
    latencies.update(receive())
    paths["latency"] = fig_latency(latencies, out / "latency.png")
    return got, paths


def _pairings_taken(src, either: TakenInTurn, got: dict, drawn) -> None:
    """The pairings of :data:`EITHER` the figures' process takes (from the back, those the caller
    has not begun): their parts put in ``got``, what the figure draws of each handed ``drawn``."""
    while (i := either.last()) is not None:
        part = stats_parts(src, (EITHER[i],), on_latency=drawn)
        got["latency"].update(part.pop("latency"))
        got.update(part)


def _import_matplotlib(freeze: bool = False) -> None:
    """matplotlib's modules the figures draw with, imported without cyclic collections (its
    ~70k objects live as long as the process: as the CLI imports, ``cli.QUIET_START``; ~5% of the
    import's CPU); the collector's state then as it was.  ``freeze`` (a process of the report's
    own, which ends with it): the import's objects frozen, so the collections while the figures
    are drawn do not walk them (two thirds of their CPU)."""
    was = gc.isenabled()
    gc.disable()
    try:
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
    finally:
        if was:
            if freeze:
                gc.freeze()
            gc.enable()
