"""The HTML report: one self-contained page, charts inline, journal text escaped; and the time bucketing rule."""

from __future__ import annotations

import re
from typing import Any

from berth.pipeline.advice import AdviceSettings, JournalStats
from berth.pipeline.charts import bucket_label
from berth.pipeline.report import render_report
from berth.pipeline.report_data import GapHistogram, GroupTimeline, ReportData, bucket_ms_for

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
SUSPICIOUS_GROUP = '<script>alert("x")</script>'


def summary_row(group: str, rebalances: int, dynamic_restarts: int = 0) -> dict[str, Any]:
    return {
        "group_id": group,
        "events": 100,
        "rebalances": rebalances,
        "rebalances_by_cause": [("new_member", rebalances)],
        "rebalances_avoided": 40,
        "rebalances_if_dynamic": 44,
        "static_restarts": 22,
        "restarts_without_rebalance": 18,
        "dynamic_restarts": dynamic_restarts,
        "dynamic_restart_rebalances": 2 * dynamic_restarts,
        "rebalancing_ms": 4_410,
        "partitions_moved": 7,
    }


def report_data(**changes: Any) -> ReportData:
    data = ReportData(
        journal_path="/var/lib/berth/journal",
        generated_at_ms=T0 + 3 * HOUR,
        journal=JournalStats(events=200, malformed_lines=1, first_ts_ms=T0, last_ts_ms=T0 + 2 * HOUR),
        settings=AdviceSettings(),
        bucket_ms=HOUR,
        rebalances_by_bucket=[(T0, "new_member", 3), (T0, "member_expired", 1), (T0 + 2 * HOUR, "member_left", 2)],
        moved_by_bucket=[(T0, 4, 2), (T0 + 2 * HOUR, 3, 1)],
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
        groups=[summary_row("orders", 5), summary_row(SUSPICIOUS_GROUP, 1, dynamic_restarts=3)],
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
        timelines=[
            GroupTimeline(
                group_id="orders",
                comings_and_goings=[(T0, "joined", "orders-0"), (T0 + HOUR, "replaced", "orders-0")],
                rebalances=[(T0, T0 + 3_000, "new_member"), (T0 + 2 * HOUR, None, "member_left")],
                restart_gaps=[(T0 + HOUR - 8_000, T0 + HOUR, "orders-0", "static_replacement")],
            )
        ],
    )
    return ReportData(**{**data.__dict__, **changes})


def test_the_page_is_self_contained_with_every_chart_inline() -> None:
    page = render_report(report_data())

    assert page.startswith("<!doctype html>")
    # restart costs, rebalances over time, partitions moved, a timeline, the advice overview, a restart-gap
    # distribution, the groups overview
    assert page.count("<svg") == 7
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
        "44 static restarts cost 8 rebalances; as dynamic members 88 (2.0 per restart, measured over 3 dynamic",
        "Restarts: static against dynamic membership",
        "Group timelines",
        "1 malformed lines",
        "2026-01-01 00:00:00 UTC to 2026-01-01 02:00:00 UTC",
        "8.8 s",  # 2 x 4 410 ms spent rebalancing
    ):
        assert text in page, text


def test_journal_text_is_escaped_everywhere() -> None:
    page = render_report(report_data())

    assert SUSPICIOUS_GROUP not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_an_empty_journal_still_renders_a_page_that_says_so() -> None:
    page = render_report(
        report_data(rebalances_by_bucket=[], moved_by_bucket=[], gap_histograms=[], advice=[], groups=[], timelines=[])
    )

    assert "No rebalance in this journal." in page
    assert "No assignment in this journal." in page
    assert "nothing to size a session timeout from yet" in page
    assert "No restart in this journal." in page
    assert "No group rebalanced." in page


def test_without_a_measured_dynamic_restart_the_avoided_rebalances_are_a_lower_bound() -> None:
    page = render_report(report_data(groups=[summary_row("orders", 5)]))

    assert "at least 40" in page
    assert "as dynamic members at least 44 (no dynamic restart measured)" in page


def test_time_buckets_are_sized_to_the_journals_span_at_most_120_bars() -> None:
    second, minute = 1_000, 60_000

    def width(span_ms: int) -> int:
        return bucket_ms_for(T0, T0 + span_ms)

    # berth-demo's journal lasts about 25 s: one-second bars, not one hour-wide bar
    assert [width(s) for s in (25 * second, 119 * second, 120 * second, 9 * minute, HOUR)] == [
        second,
        second,
        2 * second,
        5 * second,
        minute,
    ]
    assert [width(s) for s in (119 * HOUR, 120 * HOUR, 30 * 24 * HOUR, 365 * 24 * HOUR)] == [
        HOUR,
        3 * HOUR,  # 120 h touch 121 hour buckets
        12 * HOUR,
        7 * 24 * HOUR,
    ]
    assert [bucket_label(ms) for ms in (second, 5 * second, minute, 15 * minute, HOUR, 6 * HOUR, 24 * HOUR)] == [
        "second",
        "5 seconds",
        "minute",
        "15 minutes",
        "hour",
        "6 hours",
        "day",
    ]
