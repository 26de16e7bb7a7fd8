"""The HTML report: one self-contained page, charts inline, journal text escaped; and the chart bucketing rule."""

from __future__ import annotations

import re
from typing import Any

from berth.pipeline.advice import AdviceSettings, JournalStats
from berth.pipeline.charts import bucket_hours, bucket_label
from berth.pipeline.report import render_report
from berth.pipeline.report_data import GapHistogram, ReportData

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
SUSPICIOUS_GROUP = '<script>alert("x")</script>'


def summary_row(group: str, rebalances: int) -> dict[str, Any]:
    return {
        "group_id": group,
        "events": 100,
        "rebalances": rebalances,
        "rebalances_avoided": 40,
        "rebalances_if_dynamic": 44,
        "static_restarts": 22,
        "rebalancing_ms": 4_410,
        "partitions_moved": 7,
    }


def report_data(**changes: Any) -> ReportData:
    data = ReportData(
        journal_path="/var/lib/berth/journal",
        generated_at_ms=T0 + 3 * HOUR,
        journal=JournalStats(events=200, malformed_lines=1, first_ts_ms=T0, last_ts_ms=T0 + 2 * HOUR),
        settings=AdviceSettings(),
        rebalances_by_hour=[(T0, "new_member", 3), (T0, "member_expired", 1), (T0 + 2 * HOUR, "member_left", 2)],
        moved_by_hour=[(T0, 4, 2), (T0 + 2 * HOUR, 3, 1)],
        gap_histograms=[
            GapHistogram(
                group_id=SUSPICIOUS_GROUP,
                bins=[(7_943.0, 10_000.0, 5), (10_000.0, 12_589.0, 2)],
                samples=7,
                restart_gap_p_ms=12_000,
                advised_session_timeout_ms=21_000,
                confident=False,
            )
        ],
        groups=[summary_row("orders", 5), summary_row(SUSPICIOUS_GROUP, 1)],
        advice=[
            {
                "group_id": SUSPICIOUS_GROUP,
                "advised_session_timeout_ms": 21_000,
                "samples": 7,
                "restart_gap_p_ms": 12_000,
                "confident": False,
                "reason": "p99 of 7 restart gaps is 12.0 s; x1.5 + 3.0 s heartbeat = 21.0 s; only 7 samples",
            }
        ],
    )
    return ReportData(**{**data.__dict__, **changes})


def test_the_page_is_self_contained_with_its_three_kinds_of_chart_inline() -> None:
    page = render_report(report_data())

    assert page.startswith("<!doctype html>")
    assert page.count("<svg") == 3
    for fetch in ("<script", "<link", "<img", "src=", "@import"):
        assert fetch not in page, fetch
    # References stay inside the page (clip paths, tick markers).
    assert not re.findall(r"url\((?!#)", page)
    assert set(re.findall(r'href="(.)', page)) <= {"#"}
    # The only URLs are XML namespaces, which nothing fetches.
    assert set(re.findall(r'"(https?://[^"]+)"', page)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }


def test_the_page_says_what_matters_in_words_and_numbers() -> None:
    page = render_report(report_data())

    for text in (
        "Rebalances over time, by cause",
        "Session-timeout advice",
        "advised timeout 21.0 s",  # marked on the restart-gap chart
        "p99 12.0 s",
        "Partitions moved",
        "static restarts would have cost 88 rebalances as dynamic members",
        "1 malformed lines",
        "2026-01-01 00:00 UTC to 2026-01-01 02:00 UTC",
        "8.8 s",  # 2 x 4 410 ms spent rebalancing
    ):
        assert text in page, text


def test_journal_text_is_escaped_everywhere() -> None:
    page = render_report(report_data())

    assert SUSPICIOUS_GROUP not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_an_empty_journal_still_renders_a_page_that_says_so() -> None:
    page = render_report(report_data(rebalances_by_hour=[], moved_by_hour=[], gap_histograms=[], advice=[]))

    assert "No rebalance in this journal." in page
    assert "No assignment in this journal." in page
    assert "nothing to size a session timeout from yet" in page


def test_bars_are_bucketed_so_that_a_chart_holds_at_most_120() -> None:
    def hours(span: int) -> list[int]:
        return [T0, T0 + (span - 1) * HOUR]

    assert [bucket_hours(hours(span)) for span in (1, 120, 121, 360, 361, 24 * 120, 24 * 121)] == [
        1,
        1,
        3,
        3,
        6,
        24,
        7 * 24,
    ]
    assert [bucket_label(h) for h in (1, 6, 24, 168)] == ["hour", "6 hours", "day", "7 days"]
