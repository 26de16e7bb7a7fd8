"""The report's charts, drawn with matplotlib and returned as inline SVG text.

Owns the look of the charts. Rules: no network, no files: each function takes plain Python values and returns
one ``<svg>`` element as a string; text stays text (``svg.fonttype = none``) and ids are salted deterministically,
so the same data draws the same bytes; time axes are UTC; bars are bucketed so that a chart never holds more than
about ``MAX_BARS`` bars, whatever the journal's span.
"""

from __future__ import annotations

import functools
import io
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC
from typing import Any, ParamSpec

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from berth.pipeline.report_data import GapHistogram
from berth.pipeline.schema import DAY_MS, HOUR_MS

MAX_BARS = 120
_BUCKET_HOURS = (1, 3, 6, 12, 24, 7 * 24, 30 * 24)
_INK = "#1f2933"
_GRID = "#d9e2ec"
_ACCENT = "#c2410c"
_CAUSE_COLOURS = {
    "new_member": "#2563eb",
    "member_left": "#f59e0b",
    "member_expired": "#dc2626",
    "static_replacement": "#16a34a",
    "leader_rejoin": "#7c3aed",
    "metadata_change": "#0891b2",
    "sync_timeout": "#db2777",
    "persist_failure": "#57534e",
    "group_max_size": "#a16207",
}
_OTHER_COLOUR = "#94a3b8"
P = ParamSpec("P")

# Applied per figure (rc_context), never to matplotlib's global state: pyplot is not used at all, so no
# backend or display is involved and figures are freed with their last reference.
_STYLE: dict[Any, Any] = {
    "date.converter": "concise",
    "timezone": "UTC",
    "svg.fonttype": "none",
    "svg.hashsalt": "berth",
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.edgecolor": _GRID,
    "axes.labelcolor": _INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.color": _INK,
    "ytick.color": _INK,
}


def _styled(draw: Callable[P, str]) -> Callable[P, str]:
    """Draw under the report's style (rc parameters apply when artists are created, so the whole chart)."""

    @functools.wraps(draw)
    def styled(*args: P.args, **kwargs: P.kwargs) -> str:
        with rc_context(_STYLE):
            return draw(*args, **kwargs)

    return styled


def bucket_hours(hours: Iterable[int]) -> int:
    """The smallest bucket (in hours, from 1 h to 30 days) that keeps the span within ``MAX_BARS`` bars."""
    starts = list(hours)
    if not starts:
        return 1
    span_hours = (max(starts) - min(starts)) // HOUR_MS + 1
    return next((b for b in _BUCKET_HOURS if span_hours / b <= MAX_BARS), _BUCKET_HOURS[-1])


def bucket_label(hours: int) -> str:
    if hours % 24 == 0:
        days = hours // 24
        return "day" if days == 1 else f"{days} days"
    return "hour" if hours == 1 else f"{hours} hours"


@_styled
def rebalances_over_time(rows: list[tuple[int, str, int]]) -> str:
    """``(hour_start_ms, cause, rebalances)`` -> stacked bars of rebalances per bucket, one colour per cause."""
    if not rows:
        return _empty_chart("No rebalance in this journal.")
    width_h = bucket_hours(r[0] for r in rows)
    counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for hour_ms, cause, n in rows:
        counts[cause][_bucket_start(hour_ms, width_h)] += n
    buckets = sorted({b for per_cause in counts.values() for b in per_cause})
    causes = sorted(counts, key=lambda c: -sum(counts[c].values()))
    fig, ax = _figure()
    xs = [_utc(b) for b in buckets]
    bottoms = [0] * len(buckets)
    for cause in causes:
        heights = [counts[cause].get(b, 0) for b in buckets]
        colour = _CAUSE_COLOURS.get(cause, _OTHER_COLOUR)
        ax.bar(xs, heights, width=_bar_width(width_h), bottom=bottoms, color=colour, label=cause, align="edge")
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_ylabel(f"rebalances per {bucket_label(width_h)}")
    ax.legend(frameon=False, ncol=min(len(causes), 5), loc="upper left", bbox_to_anchor=(0, 1.16))
    _time_axis(ax)
    return _svg(fig)


@_styled
def partitions_moved_over_time(rows: list[tuple[int, int, int]]) -> str:
    """``(hour_start_ms, partitions_moved, assignments)`` -> bars of partitions that changed owner per bucket."""
    if not rows:
        return _empty_chart("No assignment in this journal.")
    width_h = bucket_hours(r[0] for r in rows)
    moved: dict[int, int] = defaultdict(int)
    for hour_ms, n, _assignments in rows:
        moved[_bucket_start(hour_ms, width_h)] += n
    buckets = sorted(moved)
    fig, ax = _figure()
    ax.bar([_utc(b) for b in buckets], [moved[b] for b in buckets], width=_bar_width(width_h), color="#0f766e")
    ax.set_ylabel(f"partitions moved per {bucket_label(width_h)}")
    _time_axis(ax)
    return _svg(fig)


@_styled
def restart_gap_distribution(histogram: GapHistogram, percentile_label: str) -> str:
    """One group's restart gaps on a log axis, with its percentile and its advised session timeout marked."""
    fig, ax = _figure(height=2.6)
    for low, high, n in histogram.bins:
        ax.bar(low / 1000, n, width=(high - low) / 1000, align="edge", color="#64748b", edgecolor="white")
    ax.set_xscale("log")
    # Ticks at 1-2-5 steps read as seconds ("20 s"), not as powers of ten.
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda seconds, _pos: f"{seconds:g} s"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("restart gap (log scale)")
    ax.set_ylabel("restarts")
    if histogram.restart_gap_p_ms is not None:
        ax.axvline(histogram.restart_gap_p_ms / 1000, color=_INK, linestyle="--", linewidth=1)
        _marker_label(
            ax, histogram.restart_gap_p_ms / 1000, f"{percentile_label} {histogram.restart_gap_p_ms / 1000:.1f} s"
        )
    if histogram.advised_session_timeout_ms is not None:
        advised_s = histogram.advised_session_timeout_ms / 1000
        ax.axvline(advised_s, color=_ACCENT, linewidth=2)
        _marker_label(ax, advised_s, f"advised timeout {advised_s:.1f} s", colour=_ACCENT, lower=True)
    confidence = "" if histogram.confident else " (few samples: not confident)"
    ax.set_title(f"{histogram.group_id}: {histogram.samples:,} restart gaps{confidence}", loc="left", color=_INK)
    return _svg(fig)


def _bucket_start(hour_ms: int, width_h: int) -> int:
    return hour_ms - hour_ms % (width_h * HOUR_MS)


def _bar_width(width_h: int) -> float:
    return width_h / 24 * 0.9  # matplotlib dates are in days; leave a sliver between bars


def _utc(ms: int) -> float:
    """Epoch ms -> matplotlib's date number: days since its epoch, the Unix epoch since matplotlib 3.3."""
    return ms / DAY_MS


def _figure(height: float = 3.2) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(9.5, height))
    ax = fig.subplots()
    ax.grid(axis="y", color=_GRID, linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax


def _time_axis(ax: Axes) -> None:
    ax.xaxis_date(tz=UTC)  # concise date ticks: the style's date.converter
    ax.set_xlabel("time (UTC)")


def _marker_label(ax: Axes, x: float, text: str, colour: str = _INK, lower: bool = False) -> None:
    y = 0.62 if lower else 0.9
    ax.text(x, y, f" {text}", transform=ax.get_xaxis_transform(), color=colour, fontsize=8, va="center")


@_styled
def _empty_chart(message: str) -> str:
    fig, ax = _figure(height=1.2)
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", color=_INK, transform=ax.transAxes)
    return _svg(fig)


def _svg(fig: Figure) -> str:
    buffer = io.StringIO()
    # No metadata: it would add dates (breaking reproducible output) and RDF namespaces nobody reads.
    no_metadata = {"Creator": None, "Date": None, "Format": None, "Type": None}
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata=no_metadata)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML declaration and doctype: the SVG sits inside HTML
