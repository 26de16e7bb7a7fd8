"""The report's charts, drawn with matplotlib and returned as inline SVG text.

Owns the look of the charts. Rules: no network, no files: each function takes plain Python values and returns
one ``<svg>`` element as a string; text stays text (``svg.fonttype = none``) and ids are salted deterministically,
so the same data draws the same bytes. Every chart is ``WIDTH_IN`` wide, the page's column at 96 px per inch, so
the browser shows it at its own size: labels stay at ``FONT_PT`` (13 px), never scaled down. Time axes are UTC;
a bar covers its bucket from its start (``align="edge"``), so bars of different charts line up on the same times.
"""

from __future__ import annotations

import functools
import io
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC
from typing import Any, ParamSpec

from matplotlib import rc_context
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from berth.pipeline.report_data import GapHistogram, GroupTimeline
from berth.pipeline.schema import DAY_MS, HOUR_MS

WIDTH_IN = 10.5  # 1,008 px: the page's 1,032 px column, less the room bbox_inches="tight" adds
FONT_PT = 10
CHART_ROWS = 40
_INK = "#1f2933"
_MUTED = "#52606d"
_GRID = "#d9e2ec"
_ACCENT = "#c2410c"
_GOOD = "#15803d"
_MOVED = "#0f766e"
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
# Timeline markers: (marker, colour, legend text) per kind of coming or going.
_MOVES = {
    "joined": ("^", "#2563eb", "joined"),
    "replaced": ("o", "#16a34a", "restarted in place (static)"),
    "left": ("v", "#f59e0b", "left"),
    "removed": ("v", "#7c3aed", "removed (scale-down)"),
    "expired": ("X", "#dc2626", "session expired"),
}
_GAP_COLOUR = "#64748b"
_MAX_GAP_LANES = 8
_LABELLED_BARS = 40  # more bars than this leave no room for a number above each
P = ParamSpec("P")

# Applied per figure (rc_context), never to matplotlib's global state: pyplot is not used at all, so no
# backend or display is involved and figures are freed with their last reference.
_STYLE: dict[Any, Any] = {
    "date.converter": "concise",
    "timezone": "UTC",
    "svg.fonttype": "none",
    "svg.hashsalt": "berth",
    "font.family": "sans-serif",
    "font.size": FONT_PT,
    "axes.titlesize": FONT_PT + 1,
    "legend.fontsize": FONT_PT,
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


def bucket_label(bucket_ms: int) -> str:
    """``second``, ``5 seconds``, ``15 minutes``, ``hour``, ``day``, ``7 days``: what "per bucket" reads as."""
    for unit_ms, unit in ((DAY_MS, "day"), (HOUR_MS, "hour"), (60_000, "minute"), (1_000, "second")):
        if bucket_ms % unit_ms == 0:
            n = bucket_ms // unit_ms
            return unit if n == 1 else f"{n} {unit}s"
    return f"{bucket_ms} ms"


@_styled
def rebalances_over_time(rows: list[tuple[int, str, int]], bucket_ms: int, span: tuple[int, int]) -> str:
    """``(bucket_start_ms, cause, rebalances)`` -> stacked bars of rebalances per bucket, one colour per cause,
    on an axis over the journal's ``span`` (first and last event, ms)."""
    if not rows:
        return _empty_chart("No rebalance in this journal.")
    counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for start, cause, n in rows:
        counts[cause][start] += n
    buckets = sorted({b for per_cause in counts.values() for b in per_cause})
    causes = sorted(counts, key=lambda c: (-sum(counts[c].values()), c))
    fig, ax = _figure()
    bottoms = [0] * len(buckets)
    for cause in causes:
        heights = [counts[cause].get(b, 0) for b in buckets]
        colour = _CAUSE_COLOURS.get(cause, _OTHER_COLOUR)
        ax.bar(_days(buckets), heights, width=_bar_width(bucket_ms), bottom=bottoms, color=colour, align="edge")
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_ylabel(f"rebalances per {bucket_label(bucket_ms)}")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(
        handles=[Patch(color=_CAUSE_COLOURS.get(c, _OTHER_COLOUR), label=c) for c in causes],
        frameon=False,
        ncol=min(len(causes), 5),
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
    )
    _time_axis(ax, span, bucket_ms)
    return _svg(fig)


@_styled
def partitions_moved_over_time(rows: list[tuple[int, int, int]], bucket_ms: int, span: tuple[int, int]) -> str:
    """``(bucket_start_ms, partitions_moved, assignments)`` -> bars of partitions that changed slot per bucket,
    the assignments compared marked above them, on the same axis as ``rebalances_over_time``."""
    if not rows:
        return _empty_chart("No assignment in this journal.")
    buckets = [r[0] for r in rows]
    fig, ax = _figure()
    ax.bar(_days(buckets), [r[1] for r in rows], width=_bar_width(bucket_ms), color=_MOVED, align="edge")
    ax.set_ylabel(f"partitions moved per {bucket_label(bucket_ms)}")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    for start, moved, assignments in rows if len(rows) <= _LABELLED_BARS else []:
        ax.annotate(
            f"{assignments}",
            (_day(start) + _bar_width(bucket_ms) / 2, moved),  # the bar's middle
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            color=_MUTED,
            fontsize=FONT_PT - 1,
        )
    ax.set_ylim(0, max(1, max(r[1] for r in rows)) * 1.2)
    if len(rows) <= _LABELLED_BARS:
        ax.set_title("above each bar: assignments compared", loc="right", color=_MUTED, fontsize=FONT_PT - 1)
    _time_axis(ax, span, bucket_ms)
    return _svg(fig)


@_styled
def restart_gap_distribution(histogram: GapHistogram, percentile_label: str) -> str:
    """One group's restart gaps on a log axis, with its percentile and its advised session timeout marked."""
    fig, ax = _figure(height=3.0)
    for low, high, n in histogram.bins:
        ax.bar(low / 1000, n, width=(high - low) / 1000, align="edge", color=_GAP_COLOUR, edgecolor="white")
    ax.set_xscale("log")
    # Ticks at 1-2-5 steps read as seconds ("20 s"), not as powers of ten.
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda seconds, _pos: f"{seconds:g} s"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
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


@_styled
def restart_costs(static_restarts: int, static_rebalances: int, dynamic_restarts: int, dynamic_rebalances: int) -> str:
    """Static against dynamic membership: the restarts of each kind the journal measured, and the rebalances
    they cost, side by side."""
    if static_restarts == 0 and dynamic_restarts == 0:
        return _empty_chart("No restart in this journal.")
    kinds = [("static members: restarted in place", static_restarts, static_rebalances)]
    if dynamic_restarts:
        kinds.append(("dynamic members: left and rejoined", dynamic_restarts, dynamic_rebalances))
    fig, ax = _figure(height=0.9 + 0.8 * len(kinds))
    ys = list(range(len(kinds)))[::-1]
    bar = 0.36
    for y, (_label, restarts, rebalances) in zip(ys, kinds, strict=True):
        ax.barh(y + bar / 2, restarts, height=bar, color="#cbd5e1")
        ax.barh(y - bar / 2, rebalances, height=bar, color=_ACCENT if rebalances else _GOOD)
        _label_after(ax, f"{restarts:,} restarts", restarts, y + bar / 2)
        per = f" ({_ratio(rebalances / restarts)} per restart)" if restarts else ""
        _label_after(ax, f"{rebalances:,} rebalances{per}", rebalances, y - bar / 2)
    ax.set_yticks(ys, [k[0] for k in kinds])
    ax.set_xlim(0, max(max(k[1], k[2]) for k in kinds) * 1.45 or 1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", visible=False)
    ax.grid(axis="x", color=_GRID, linewidth=0.6)
    if not dynamic_restarts:
        ax.set_title(
            "no dynamic restart in this journal to compare with: one would cost at least one rebalance",
            loc="left",
            color=_MUTED,
        )
    return _svg(fig)


@_styled
def group_timeline(timeline: GroupTimeline) -> str:
    """One group's history on a time axis: rebalances as spans coloured by cause, joins and departures as
    markers, and each instance's restart gaps as the time it was away."""
    gap_lanes = sorted({who for _s, _e, who, _k in timeline.restart_gaps})
    if len(gap_lanes) > _MAX_GAP_LANES:
        gap_lanes = ["restart gaps (all instances)"]
    lanes = ["rebalances", "joins and departures", *(f"{who} away" for who in gap_lanes)]
    y_of = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}
    times = [t for t, _w, _who in timeline.comings_and_goings] + [r[0] for r in timeline.rebalances]
    times += [t for r in timeline.rebalances if r[1] is not None for t in (r[1],)]
    times += [t for g in timeline.restart_gaps for t in g[:2]]
    end = max(times) if times else 0
    fig, ax = _figure(height=1.3 + 0.42 * len(lanes))
    causes_seen: list[str] = []
    for started, ended, cause in timeline.rebalances:
        colour = _CAUSE_COLOURS.get(cause, _OTHER_COLOUR)
        span = (ended if ended is not None else end) - started
        # Edges in the fill colour: a rebalance of a second on a day-long axis still shows as a hairline.
        ax.broken_barh(
            [(_day(started), span / DAY_MS)],
            (y_of["rebalances"] - 0.3, 0.6),
            facecolors=colour,
            edgecolors=colour,
            linewidth=0.5,
        )
        if cause not in causes_seen:
            causes_seen.append(cause)
    # A tick at every start, in the cause's colour, tells back-to-back rebalances (a rolling restart's) apart
    # and keeps a short rebalance on a long axis visible.
    for cause in causes_seen:
        starts = [r[0] for r in timeline.rebalances if r[2] == cause]
        ax.plot(
            _days(starts),
            [y_of["rebalances"]] * len(starts),
            marker="|",
            markersize=18,
            markeredgewidth=1.5,
            color=_CAUSE_COLOURS.get(cause, _OTHER_COLOUR),
            linestyle="none",
        )
    ax.plot(
        _days(r[0] for r in timeline.rebalances),
        [y_of["rebalances"]] * len(timeline.rebalances),
        marker="|",
        markersize=12,
        markeredgewidth=0.8,
        color="white",
        linestyle="none",
    )
    kinds_seen: list[str] = []
    for ts, what, _who in timeline.comings_and_goings:
        marker, colour, _text = _MOVES[what]
        ax.plot(_day(ts), y_of["joins and departures"], marker=marker, color=colour, markersize=8, linestyle="none")
        if what not in kinds_seen:
            kinds_seen.append(what)
    for away_from, back, who, _kind in timeline.restart_gaps:
        lane = f"{who} away" if f"{who} away" in y_of else lanes[-1]
        ax.broken_barh(
            [(_day(away_from), (back - away_from) / DAY_MS)],
            (y_of[lane] - 0.25, 0.5),
            facecolors=_GAP_COLOUR,
            edgecolors=_GAP_COLOUR,
            linewidth=1,  # a gap of a few ms on an hour-long axis still shows as a hairline
        )
    ax.set_yticks([y_of[lane] for lane in lanes], lanes)
    ax.set_ylim(-0.7, len(lanes) - 0.3)
    ax.grid(axis="y", visible=False)
    ax.grid(axis="x", color=_GRID, linewidth=0.6)
    handles: list[Artist] = [
        Patch(color=_CAUSE_COLOURS.get(c, _OTHER_COLOUR), label=f"rebalance: {c}") for c in causes_seen
    ]
    handles += [
        Line2D([], [], marker=_MOVES[k][0], color=_MOVES[k][1], linestyle="none", markersize=8, label=_MOVES[k][2])
        for k in kinds_seen
    ]
    if handles:
        ax.legend(handles=handles, frameon=False, ncol=3, loc="lower left", bbox_to_anchor=(0, 1.0))
    shown = " (latest events only)" if timeline.truncated else ""
    ax.set_title(f"{timeline.group_id}{shown}", loc="right", color=_INK)
    ax.xaxis_date(tz=UTC)
    ax.set_xlabel("time (UTC)")
    return _svg(fig)


@_styled
def advice_overview(advice: Sequence[dict[str, Any]], percentile_label: str, min_ms: int, max_ms: int) -> str:
    """Each group's restart-gap percentile and advised session timeout on one log axis, the groups with the most
    samples first (at most ``CHART_ROWS``); confident advice in green."""
    rows = sorted(advice, key=lambda r: (-int(r["samples"]), str(r["group_id"])))[:CHART_ROWS]
    if not rows:
        return _empty_chart("No advice: no group has a restart gap.")
    fig, ax = _figure(height=1.2 + 0.3 * len(rows))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows, strict=True):
        gap_s, advised_s = r["restart_gap_p_ms"] / 1000, r["advised_session_timeout_ms"] / 1000
        colour = _GOOD if r["confident"] else _OTHER_COLOUR
        ax.plot([gap_s, advised_s], [y, y], color=colour, linewidth=2)
        ax.plot(gap_s, y, marker="o", color=_INK, markersize=6, linestyle="none")
        ax.plot(advised_s, y, marker="D", color=colour, markersize=7, linestyle="none")
        sure = "" if r["confident"] else ", not confident"
        _label_after(ax, f"{advised_s:.1f} s ({int(r['samples']):,} gaps{sure})", advised_s, y)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda seconds, _pos: f"{seconds:g} s"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    lowest = min(min(r["restart_gap_p_ms"] for r in rows), min_ms) / 1000
    highest = max(r["advised_session_timeout_ms"] for r in rows) / 1000
    ax.set_xlim(max(lowest / 1.5, 0.001), highest * 6)
    for bound_ms, text in ((min_ms, "lowest"), (max_ms, "highest")):
        if lowest / 1.5 <= bound_ms / 1000 <= highest * 6:
            ax.axvline(bound_ms / 1000, color=_MUTED, linestyle=":", linewidth=1)
            ax.text(
                bound_ms / 1000,
                0.0,
                f"{text} allowed {bound_ms / 1000:g} s ",
                transform=ax.get_xaxis_transform(),
                color=_MUTED,
                ha="right",
                va="bottom",
                fontsize=FONT_PT - 1,
            )
    ax.set_yticks(ys, [str(r["group_id"]) for r in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.grid(axis="y", visible=False)
    ax.grid(axis="x", color=_GRID, linewidth=0.6)
    ax.legend(
        handles=[
            Line2D([], [], marker="o", color=_INK, linestyle="none", label=f"{percentile_label} restart gap"),
            Line2D([], [], marker="D", color=_GOOD, linestyle="none", label="advised timeout (confident)"),
            Line2D([], [], marker="D", color=_OTHER_COLOUR, linestyle="none", label="advised timeout (few samples)"),
        ],
        frameon=False,
        ncol=3,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
    )
    ax.set_xlabel("seconds (log scale)")
    return _svg(fig)


@_styled
def groups_overview(groups: Sequence[dict[str, Any]], duration: Callable[[int], str]) -> str:
    """The most rebalanced groups (at most ``CHART_ROWS``): rebalances stacked by cause, with the time spent
    rebalancing and the partitions moved written beside each bar."""
    rows = sorted(groups, key=lambda r: (-int(r["rebalances"]), str(r["group_id"])))[:CHART_ROWS]
    rows = [r for r in rows if int(r["rebalances"]) > 0]
    if not rows:
        return _empty_chart("No group rebalanced.")
    fig, ax = _figure(height=1.2 + 0.3 * len(rows))
    ys = list(range(len(rows)))[::-1]
    causes_seen: list[str] = []
    for y, r in zip(ys, rows, strict=True):
        left = 0
        for cause, n in sorted(_causes(r["rebalances_by_cause"]), key=lambda item: (-item[1], item[0])):
            ax.barh(y, n, left=left, height=0.6, color=_CAUSE_COLOURS.get(cause, _OTHER_COLOUR))
            left += n
            if cause not in causes_seen:
                causes_seen.append(cause)
        detail = f"{int(r['rebalances']):,}: {duration(int(r['rebalancing_ms']))} rebalancing"
        _label_after(ax, f"{detail}, {int(r['partitions_moved']):,} partitions moved", left, y)
    ax.set_yticks(ys, [str(r["group_id"]) for r in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlim(0, max(int(r["rebalances"]) for r in rows) * 1.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("rebalances")
    ax.grid(axis="y", visible=False)
    ax.grid(axis="x", color=_GRID, linewidth=0.6)
    ax.legend(
        handles=[Patch(color=_CAUSE_COLOURS.get(c, _OTHER_COLOUR), label=c) for c in causes_seen],
        frameon=False,
        ncol=min(len(causes_seen), 5),
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
    )
    return _svg(fig)


def _ratio(value: float) -> str:
    """1.0, 2.0, 0.03: two significant digits below 0.1, where one decimal would read as zero."""
    return f"{value:.1f}" if value == 0 or value >= 0.1 else f"{value:.2g}"


def _causes(by_cause: Any) -> list[tuple[str, int]]:
    """A summary row's ``rebalances_by_cause``: a dict, or the (cause, n) pairs Arrow gives for a map."""
    pairs: Iterable[tuple[str, int]] = by_cause.items() if isinstance(by_cause, dict) else by_cause or []
    return [(str(c), int(n)) for c, n in pairs]


def _day(ms: int) -> float:
    """Epoch ms -> matplotlib's date number: days since its epoch, the Unix epoch since matplotlib 3.3."""
    return ms / DAY_MS


def _days(ms: Iterable[int]) -> list[float]:
    return [_day(m) for m in ms]


def _bar_width(bucket_ms: int) -> float:
    return bucket_ms / DAY_MS * 0.9  # matplotlib dates are in days; leave a sliver between bars


def _figure(height: float = 3.2) -> tuple[Figure, Axes]:
    # Constrained layout: the axes take all the width their labels leave, so the chart fills the page's column.
    fig = Figure(figsize=(WIDTH_IN, height), layout="constrained")
    ax = fig.subplots()
    ax.grid(axis="y", color=_GRID, linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax


def _time_axis(ax: Axes, span: tuple[int, int], bucket_ms: int) -> None:
    """UTC date ticks (concise: the style's date.converter) over the buckets of the journal's span, half a bucket
    spare: every time chart has the same axis, so their bars line up."""
    first, last = (ms - ms % bucket_ms for ms in span)
    ax.xaxis_date(tz=UTC)
    ax.set_xlim(_day(first - bucket_ms // 2), _day(last + bucket_ms + bucket_ms // 2))
    ax.set_xlabel("time (UTC)")


def _marker_label(ax: Axes, x: float, text: str, colour: str = _INK, lower: bool = False) -> None:
    y = 0.62 if lower else 0.9
    ax.annotate(
        text,
        (x, y),
        xycoords=ax.get_xaxis_transform(),
        xytext=(4, 0),
        textcoords="offset points",
        color=colour,
        va="center",
    )


def _label_after(ax: Axes, text: str, x: float, y: float) -> None:
    """Text just right of a point or a bar's end (an offset in points: SVG text drops leading spaces)."""
    ax.annotate(text, (x, y), xytext=(6, 0), textcoords="offset points", va="center", color=_INK)


@_styled
def _empty_chart(message: str) -> str:
    fig, ax = _figure(height=1.0)
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
