"""One dashboard panel drawn as Grafana's time series panel would draw it, from what Prometheus answered: an HTML
page with an SVG, for ``benchmarks.dashboard_look`` to screenshot with Chromium (no Grafana needed).

What it honours of the panel: its title, each query's series and legend, and ``fieldConfig.defaults`` — the unit
(``s`` or a count), ``custom.drawStyle`` (``bars``: one bar per step ending at its point, as ``barAlignment: -1``
draws it; ``points``; else lines, broken where a point is missing) and ``custom.stacking.mode`` (``normal`` stacks
bars). Legends say what a reader would count: a bar series' total, a line's last and largest values. Pure: no I/O.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

WIDTH, HEIGHT = 1200, 320
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 20, 40
COLOURS = ("#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9", "#705da0", "#508642")


@dataclass(frozen=True, slots=True)
class Series:
    legend: str
    points: tuple[tuple[float, float], ...]  # (unix seconds, value), NaN-free


def render(panel: dict[str, Any], series: Sequence[Series], *, start: float, end: float, step: float) -> str:
    defaults = (panel.get("fieldConfig") or {}).get("defaults") or {}
    custom = defaults.get("custom") or {}
    style = custom.get("drawStyle", "line")
    stacked = style == "bars" and (custom.get("stacking") or {}).get("mode") == "normal"
    unit = defaults.get("unit", "short")
    top = _top(series, stacked)
    width, height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + (t - start) / max(end - start, 1e-9) * width

    def y(v: float) -> float:
        return TOP + height - v / top * height

    shapes: list[str] = []
    base: dict[float, float] = {}
    slot = max(2.0, step / max(end - start, 1e-9) * width)
    for n, one in enumerate(series):
        colour = COLOURS[n % len(COLOURS)]
        if style == "bars":
            lanes = 1 if stacked else len(series)
            bar = max(1.5, slot / lanes - 1)
            for t, v in one.points:
                below = base.get(t, 0.0) if stacked else 0.0
                left = x(t) - slot + (0 if stacked else n * (slot / lanes))
                shapes.append(
                    f'<rect x="{left:.1f}" y="{y(below + v):.1f}" width="{bar:.1f}" '
                    f'height="{max(0.0, y(below) - y(below + v)):.1f}" fill="{colour}" fill-opacity="0.85"/>'
                )
                if stacked:
                    base[t] = below + v
        elif style == "points":
            shapes += [f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="5" fill="{colour}"/>' for t, v in one.points]
        else:
            for run in _runs(one.points, step):
                path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in run)
                if len(run) == 1:
                    shapes.append(f'<circle cx="{x(run[0][0]):.1f}" cy="{y(run[0][1]):.1f}" r="2" fill="{colour}"/>')
                else:
                    shapes.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
    axes = _axes(start, end, top, unit, x, y)
    legends = (
        "".join(
            f'<div class="legend"><span style="background:{COLOURS[n % len(COLOURS)]}"></span>'
            f"{html.escape(one.legend)}: {html.escape(_summary(one, style, unit))}</div>"
            for n, one in enumerate(series)
        )
        or '<div class="legend">No data</div>'
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><style>"
        "body{background:#181b1f;color:#ccccdc;font:13px sans-serif;margin:12px}"
        "h1{font-size:15px;margin:0 0 6px}.legend{display:inline-block;margin:4px 14px 0 0}"
        ".legend span{display:inline-block;width:14px;height:4px;margin-right:6px;vertical-align:middle}"
        "</style></head><body>"
        f"<h1>{html.escape(panel.get('title', ''))}</h1>"
        f'<svg width="{WIDTH}" height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg">{axes}{"".join(shapes)}</svg>'
        f"<div>{legends}</div></body></html>"
    )


def _top(series: Sequence[Series], stacked: bool) -> float:
    if stacked:
        totals: dict[float, float] = {}
        for one in series:
            for t, v in one.points:
                totals[t] = totals.get(t, 0.0) + v
        peak = max(totals.values(), default=0.0)
    else:
        peak = max((v for one in series for _, v in one.points), default=0.0)
    if peak <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(peak))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= peak)


def _runs(points: Sequence[tuple[float, float]], step: float) -> list[list[tuple[float, float]]]:
    runs: list[list[tuple[float, float]]] = []
    for t, v in points:
        if runs and t - runs[-1][-1][0] <= step * 1.5:
            runs[-1].append((t, v))
        else:
            runs.append([(t, v)])
    return runs


def _axes(start: float, end: float, top: float, unit: str, x: Any, y: Any) -> str:
    parts = [
        f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{WIDTH - RIGHT}" y2="{y(0):.1f}" stroke="#555"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{y(0):.1f}" stroke="#555"/>',
    ]
    for k in range(5):
        v = top * k / 4
        parts.append(f'<line x1="{LEFT}" y1="{y(v):.1f}" x2="{WIDTH - RIGHT}" y2="{y(v):.1f}" stroke="#2c2f33"/>')
        parts.append(f'<text x="{LEFT - 8}" y="{y(v) + 4:.1f}" fill="#999" text-anchor="end">{_value(v, unit)}</text>')
    tick = 10 if end - start <= 120 else 60
    second = math.ceil(start / tick) * tick
    while second <= end:
        parts.append(
            f'<text x="{x(second):.1f}" y="{HEIGHT - 12}" fill="#999" text-anchor="middle">'
            f"+{second - start:.0f}s</text>"
        )
        second += tick
    return "".join(parts)


def _value(v: float, unit: str) -> str:
    if unit == "s":
        return f"{v:g} s" if v >= 1 or v == 0 else f"{v * 1000:g} ms"
    return f"{v:g}"


def _summary(one: Series, style: str, unit: str) -> str:
    values = [v for _, v in one.points]
    if not values:
        return "no points"
    if style == "bars":
        return f"total {sum(values):g}"
    if style == "points":
        return ", ".join(_value(v, unit) for v in values[:6]) + (" ..." if len(values) > 6 else "")
    return f"last {_value(values[-1], unit)}, max {_value(max(values), unit)}"
