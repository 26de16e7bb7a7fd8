"""``report.html``: one self-contained page a person would rather look at than read.

Owns the page's layout and words. Rules: everything inline (CSS in a ``<style>``, charts as ``<svg>``), no script,
no link, no font or image fetched from anywhere; every value from the journal is HTML-escaped (group ids are
user input). Lists of groups are charts of the first ``charts.CHART_ROWS`` groups, their numbers in a table
folded under the chart (``<details>``), and the page says where the rest is. Charts take the column's full width.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from html import escape
from typing import Any

from berth.pipeline import charts
from berth.pipeline.report_data import ReportData

TABLE_ROWS = charts.CHART_ROWS

_CSS = """
:root { --ink:#1f2933; --muted:#52606d; --line:#d9e2ec; --card:#f5f7fa; --accent:#c2410c; --good:#15803d; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); }
main { max-width: 1080px; margin: 0 auto; padding: 32px 24px 64px; }
h1 { font-size: 28px; margin: 0 0 4px; } h2 { font-size: 20px; margin: 40px 0 8px; }
.sub, .note { color: var(--muted); } .note { font-size: 13px; max-width: 80ch; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(155px, 1fr)); gap: 12px; margin-top: 24px; }
.card { background: var(--card); border-radius: 10px; padding: 14px 16px; }
.card .value { font-size: 26px; font-weight: 650; } .card .label { color: var(--muted); font-size: 13px; }
.card.highlight .value { color: var(--good); }
svg { max-width: 100%; height: auto; display: block; }
.gaps > div { margin-top: 16px; }
details { margin-top: 8px; } summary { cursor: pointer; color: var(--muted); font-size: 13px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin-top: 8px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.yes { color: var(--good); font-weight: 600; } .no { color: var(--accent); font-weight: 600; }
footer { margin-top: 48px; color: var(--muted); font-size: 13px; }
"""


def render_report(data: ReportData) -> str:
    """The whole page as one HTML string."""
    per = charts.bucket_label(data.bucket_ms)
    span = (data.journal.first_ts_ms, data.journal.last_ts_ms)
    body = "\n".join(
        [
            _header(data),
            _cards(data),
            _restarts_section(data),
            _section(
                "Rebalances over time, by cause",
                charts.rebalances_over_time(data.rebalances_by_bucket, data.bucket_ms, span),
                f"Every rebalance_started of every group, per {per} (buckets sized to the journal's span), stacked by "
                "the cause the coordinator gave.",
            ),
            _section(
                "Partitions moved",
                charts.partitions_moved_over_time(data.moved_by_bucket, data.bucket_ms, span),
                f"Partitions whose process slot changed from the group's previous assignment, per {per}. A slot is a "
                "static member's instance id; a dynamic member that replaces one departed member keeps its slot. "
                "A restart that gets its partitions back moves nothing; a scale-down or scale-up moves some.",
            ),
            _timelines_section(data),
            _advice_section(data),
            _groups_section(data),
            _footer(),
        ]
    )
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>Berth journal report</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n{body}\n"
        "</main>\n</body>\n</html>\n"
    )


def _header(data: ReportData) -> str:
    span = f"{_utc(data.journal.first_ts_ms)} to {_utc(data.journal.last_ts_ms)}"
    return (
        "<h1>Berth journal report</h1>\n"
        f'<p class="sub">{escape(data.journal_path)} &middot; events from {span} &middot; '
        f"generated {_utc(data.generated_at_ms)}</p>"
    )


def _cards(data: ReportData) -> str:
    groups = data.groups
    costs = _RestartCosts(groups)
    cards = [
        ("Events", f"{data.journal.events:,}", f"{data.journal.malformed_lines:,} malformed lines", False),
        ("Groups", f"{len(groups):,}", f"{len(data.advice):,} with restart gaps to advise on", False),
        ("Rebalances", f"{_total(groups, 'rebalances'):,}", "rebalance_started events", False),
        ("Rebalances avoided", costs.avoided_value(), costs.avoided_detail(), True),
        ("Time rebalancing", _duration(_total(groups, "rebalancing_ms")), "summed over groups", False),
        ("Partitions moved", f"{_total(groups, 'partitions_moved'):,}", "between process slots", False),
    ]
    return '<section class="cards">\n' + "\n".join(_card(*card) for card in cards) + "\n</section>"


def headline(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """What the report's cards say of the journal in one JSON object (``headline.json`` beside the report, for a
    program that prints a line of it, as ``berth-demo`` does): the rebalances, and those avoided, in the report's
    words."""
    costs = _RestartCosts(groups)
    return {
        "rebalances": _total(groups, "rebalances"),
        "rebalances_avoided": costs.avoided_value(),
        "rebalances_avoided_detail": costs.avoided_detail(),
    }


class _RestartCosts:
    """The journal's restarts and what they cost, as the summary measured them (restarts.py states the model)."""

    def __init__(self, groups: list[dict[str, Any]]) -> None:
        self.static = _total(groups, "static_restarts")
        self.static_rebalances = self.static - _total(groups, "restarts_without_rebalance")
        self.dynamic = _total(groups, "dynamic_restarts")
        self.dynamic_rebalances = _total(groups, "dynamic_restart_rebalances")
        self.if_dynamic = _total(groups, "rebalances_if_dynamic")
        self.avoided = _total(groups, "rebalances_avoided")

    def avoided_value(self) -> str:
        return f"{self.avoided:,}" if self.dynamic or not self.static else f"at least {self.avoided:,}"

    def avoided_detail(self) -> str:
        spent = f"{self.static:,} static restarts cost {self.static_rebalances:,} rebalances"
        if not self.static:
            return "no static member restarted"
        if self.dynamic:
            rate = self.dynamic_rebalances / self.dynamic
            return (
                f"{spent}; as dynamic members {self.if_dynamic:,} ({rate:.1f} per restart, measured over "
                f"{self.dynamic:,} dynamic restarts)"
            )
        return f"{spent}; as dynamic members at least {self.if_dynamic:,} (no dynamic restart measured)"


def _restarts_section(data: ReportData) -> str:
    costs = _RestartCosts(data.groups)
    chart = charts.restart_costs(costs.static, costs.static_rebalances, costs.dynamic, costs.dynamic_rebalances)
    note = (
        "A static member restarting in place keeps its partitions: it costs a rebalance only when the coordinator "
        "had to start one (changed subscription metadata). A dynamic member's restart is a departure and a join: "
        "one rebalance when the new process joins within the departure's rebalance, two when it comes later. "
        "Dynamic restarts are measured where the journal shows a departure followed by a join."
    )
    return _section("Restarts: static against dynamic membership", chart, note)


def _timelines_section(data: ReportData) -> str:
    if not data.timelines:
        return ""
    drawn = "\n".join(f"<div>{charts.group_timeline(t)}</div>" for t in data.timelines)
    note = (
        "The most rebalanced groups, event by event: rebalances from their start to the assignment that ended them, "
        "coloured by cause; joins and departures; and, per instance, the time it was away before it came back."
    )
    return (
        f'<section>\n<h2>Group timelines</h2>\n<p class="note">{escape(note)}</p>\n<div class="gaps">\n{drawn}\n'
        "</div>\n</section>"
    )


def _card(label: str, value: str, detail: str, highlight: bool) -> str:
    css = "card highlight" if highlight else "card"
    return (
        f'<div class="{css}"><div class="label">{escape(label)}</div><div class="value">{escape(value)}</div>'
        f'<div class="label">{escape(detail)}</div></div>'
    )


def _section(title: str, svg: str, note: str) -> str:
    return f'<section>\n<h2>{escape(title)}</h2>\n{svg}\n<p class="note">{escape(note)}</p>\n</section>'


def _advice_section(data: ReportData) -> str:
    s = data.settings
    label = s.percentile_label
    if not data.advice:
        return (
            "<section>\n<h2>Session-timeout advice</h2>\n<p>No restart gap in this journal: no static member "
            "restarted, so there is nothing to size a session timeout from yet.</p>\n</section>"
        )
    rule = (
        f"Advised session timeout = {label} of the group's restart gaps x{s.safety_margin:g} + one "
        f"{s.heartbeat_interval_ms / 1000:.1f} s heartbeat, within [{s.min_ms / 1000:.1f} s, "
        f"{s.max_ms / 1000:.1f} s]; confident from {s.confident_samples} samples. In each distribution the dashed "
        f"line is the {label}, the solid one the advice: restarts left of it keep their partitions without a rebalance."
    )
    rows = sorted(data.advice, key=lambda r: (-int(r["samples"]), str(r["group_id"])))
    overview = charts.advice_overview(rows, label, s.min_ms, s.max_ms)
    table = _table(
        ["group", "advised timeout", "samples", f"{label} gap", "confident", "reason"],
        (
            [
                _text(str(r["group_id"])),
                _num(_seconds(r["advised_session_timeout_ms"])),
                _num(f"{r['samples']:,}"),
                _num(_seconds(r["restart_gap_p_ms"])),
                '<td><span class="yes">yes</span></td>' if r["confident"] else '<td><span class="no">no</span></td>',
                _text(str(r["reason"])),
            ]
            for r in rows[:TABLE_ROWS]
        ),
        numeric={1, 2, 3},
    )
    histograms = "\n".join(f"<div>{charts.restart_gap_distribution(h, label)}</div>" for h in data.gap_histograms)
    return (
        f'<section>\n<h2>Session-timeout advice</h2>\n<p class="note">{escape(rule)}</p>\n{overview}\n'
        f"{_folded(table, 'The advice in numbers')}\n{_more_rows(len(rows), 'advice.json')}\n"
        f'<h3>Restart gaps of the groups with the most samples</h3>\n<div class="gaps">\n{histograms}\n</div>\n'
        "</section>"
    )


def _groups_section(data: ReportData) -> str:
    rows = sorted(data.groups, key=lambda r: (-int(r["rebalances"]), str(r["group_id"])))
    table = _table(
        ["group", "events", "rebalances", "avoided", "static restarts", "time rebalancing", "partitions moved"],
        (
            [
                _text(str(r["group_id"])),
                _num(f"{r['events']:,}"),
                _num(f"{r['rebalances']:,}"),
                _num(f"{r['rebalances_avoided']:,}"),
                _num(f"{r['static_restarts']:,}"),
                _num(_duration(int(r["rebalancing_ms"]))),
                _num(f"{r['partitions_moved']:,}"),
            ]
            for r in rows[:TABLE_ROWS]
        ),
        numeric={1, 2, 3, 4, 5, 6},
    )
    more = _more_rows(len(rows), "summary.parquet")
    chart = charts.groups_overview(rows, _duration)
    return (
        f"<section>\n<h2>Groups, most rebalanced first</h2>\n{chart}\n{_folded(table, 'The groups in numbers')}\n"
        f"{more}\n</section>"
    )


def _folded(table: str, title: str) -> str:
    return f"<details><summary>{escape(title)}</summary>\n{table}\n</details>"


def _footer() -> str:
    return (
        "<footer>Rebalances avoided: each static replacement would have cost, under dynamic membership, what the "
        "journal's dynamic restarts cost on average (at least one, the departure's, when none was measured), and "
        "cost one only when the coordinator had to rebalance. "
        "Restart gaps: offline time of static replacements, and leave or session expiry to rejoin of the same "
        "instance id (an expiry's gap from when its member was last heard from). All times UTC. "
        "Written by berth-analyze; the numbers behind this page are in advice.json and summary.parquet.</footer>"
    )


def _table(headers: list[str], rows: Iterable[list[str]], numeric: set[int]) -> str:
    """``rows`` are lists of ready ``<td>`` cells; the header cells of ``numeric`` columns align right too."""
    head = "".join(
        f'<th class="num">{escape(h)}</th>' if i in numeric else f"<th>{escape(h)}</th>" for i, h in enumerate(headers)
    )
    body = "\n".join("<tr>" + "".join(cells) + "</tr>" for cells in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _text(text: str) -> str:
    return f"<td>{escape(text)}</td>"


def _num(text: str) -> str:
    return f'<td class="num">{escape(text)}</td>'


def _more_rows(total: int, where: str) -> str:
    if total <= TABLE_ROWS:
        return ""
    return f'<p class="note">Showing {TABLE_ROWS} of {total:,} groups; all of them are in {escape(where)}.</p>'


def _total(rows: list[dict[str, Any]], column: str) -> int:
    return sum(int(r[column] or 0) for r in rows)


def _seconds(ms: int | None) -> str:
    return "n/a" if ms is None else f"{ms / 1000:.1f} s"


def _duration(ms: int) -> str:
    """A duration a person reads at a glance: ``850 ms``, ``42.0 s``, ``12 min 5 s``, ``3 h 20 min``."""
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
