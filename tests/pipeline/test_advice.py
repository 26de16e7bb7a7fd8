"""Session-timeout advice: the rule, its clamps and confidence, its reason in words, and the advice.json document."""

from __future__ import annotations

from typing import Any

import pytest
from pipeline_builders import rows
from pyspark.sql import DataFrame, SparkSession

from berth.pipeline.advice import (
    AdviceSettings,
    JournalStats,
    advice_document,
    restart_gap_stats,
    session_timeout_advice,
)


def gaps(spark: SparkSession, by_group: dict[str, list[int]]) -> DataFrame:
    return spark.createDataFrame(
        [(group, gap) for group, values in by_group.items() for gap in values], "group_id string, gap_ms long"
    )


def advice_row(group: str, advised: int, samples: int, gap_p: int, confident: bool, reason: str) -> dict[str, Any]:
    return {
        "group_id": group,
        "advised_session_timeout_ms": advised,
        "samples": samples,
        "percentile": 0.99,
        "restart_gap_p_ms": gap_p,
        "safety_margin": 1.5,
        "heartbeat_interval_ms": 3000,
        "min_ms": 6000,
        "max_ms": 1_800_000,
        "confident": confident,
        "reason": reason,
    }


@pytest.mark.spark
def test_gap_stats_give_count_median_chosen_percentile_and_longest_gap_per_group(spark: SparkSession) -> None:
    stats = restart_gap_stats(gaps(spark, {"orders": [1_000 * i for i in range(1, 11)], "billing": [7_000]}), 0.9)

    assert rows(stats) == [
        {
            "group_id": "billing",
            "samples": 1,
            "restart_gap_p50_ms": 7_000,
            "restart_gap_p_ms": 7_000,
            "restart_gap_max_ms": 7_000,
        },
        {
            "group_id": "orders",
            "samples": 10,
            "restart_gap_p50_ms": 5_000,
            "restart_gap_p_ms": 9_000,
            "restart_gap_max_ms": 10_000,
        },
    ]


@pytest.mark.spark
def test_p99_of_restart_gaps_times_the_margin_plus_a_heartbeat(spark: SparkSession) -> None:
    thirty_gaps = [1_000 * i for i in range(1, 31)]  # 1 s .. 30 s

    advice = session_timeout_advice(gaps(spark, {"orders": thirty_gaps}), AdviceSettings())

    assert rows(advice) == [
        advice_row(
            "orders",
            advised=48_000,
            samples=30,
            gap_p=30_000,
            confident=True,
            reason="p99 of 30 restart gaps is 30.0 s; x1.5 + 3.0 s heartbeat = 48.0 s",
        )
    ]


@pytest.mark.spark
def test_advice_is_clamped_to_the_bounds_and_not_confident_on_few_samples(spark: SparkSession) -> None:
    advice = session_timeout_advice(
        gaps(spark, {"quick": [1_000], "slow": [2_000_000, 2_000_000]}),
        AdviceSettings(),
    )

    assert rows(advice) == [
        advice_row(
            "quick",
            advised=6_000,
            samples=1,
            gap_p=1_000,
            confident=False,
            reason="p99 of 1 restart gap is 1.0 s; x1.5 + 3.0 s heartbeat = 4.5 s, raised to the minimum 6.0 s; "
            "only 1 sample, fewer than 30: not confident",
        ),
        advice_row(
            "slow",
            advised=1_800_000,
            samples=2,
            gap_p=2_000_000,
            confident=False,
            reason="p99 of 2 restart gaps is 2000.0 s; x1.5 + 3.0 s heartbeat = 3003.0 s, lowered to the maximum "
            "1800.0 s; only 2 samples, fewer than 30: not confident",
        ),
    ]


@pytest.mark.spark
def test_the_settings_change_the_rule_and_the_advice_rounds_up_to_the_next_millisecond(spark: SparkSession) -> None:
    settings = AdviceSettings(
        percentile=0.5, safety_margin=2.0, heartbeat_interval_ms=1_001, min_ms=1_000, max_ms=60_000, confident_samples=3
    )

    advice = session_timeout_advice(gaps(spark, {"orders": [1_000, 2_501, 9_000]}), settings)

    assert rows(advice) == [
        {
            "group_id": "orders",
            "advised_session_timeout_ms": 6_003,  # 2 501 x 2 + 1 001
            "samples": 3,
            "percentile": 0.5,
            "restart_gap_p_ms": 2_501,
            "safety_margin": 2.0,
            "heartbeat_interval_ms": 1_001,
            "min_ms": 1_000,
            "max_ms": 60_000,
            "confident": True,
            "reason": "p50 of 3 restart gaps is 2.5 s; x2 + 1.0 s heartbeat = 6.0 s",
        }
    ]


def test_percentile_labels_read_as_people_write_them() -> None:
    assert [AdviceSettings(percentile=p).percentile_label for p in (0.99, 0.999, 0.5, 0.95, 1.0)] == [
        "p99",
        "p99.9",
        "p50",
        "p95",
        "p100",
    ]


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        ({"percentile": 0.0}, "percentile must be in"),
        ({"percentile": 1.5}, "percentile must be in"),
        ({"safety_margin": 0.5}, "safety margin must be at least 1"),
        ({"min_ms": 0}, "need 0 < min"),
        ({"min_ms": 10_000, "max_ms": 9_000}, "need 0 < min"),
    ],
)
def test_settings_that_make_no_sense_are_refused(settings: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        AdviceSettings(**settings)


def test_the_advice_document_is_the_format_the_operator_reads() -> None:
    row = advice_row("orders", 45_000, 240, 28_000, True, "p99 of 240 restart gaps is 28.0 s; ...")
    other = advice_row("billing", 6_000, 2, 1_000, False, "...")

    document = advice_document(
        [row, other],
        JournalStats(events=123_456, malformed_lines=2, first_ts_ms=10, last_ts_ms=20),
        generated_at_ms=1_795_000_000_000,
    )

    assert document == {
        "version": 1,
        "generated_at_ms": 1_795_000_000_000,
        "journal": {"events": 123_456, "malformed_lines": 2, "first_ts_ms": 10, "last_ts_ms": 20},
        "groups": {
            "billing": {k: v for k, v in other.items() if k != "group_id"},
            "orders": {
                "advised_session_timeout_ms": 45_000,
                "samples": 240,
                "percentile": 0.99,
                "restart_gap_p_ms": 28_000,
                "safety_margin": 1.5,
                "heartbeat_interval_ms": 3000,
                "min_ms": 6000,
                "max_ms": 1_800_000,
                "confident": True,
                "reason": "p99 of 240 restart gaps is 28.0 s; ...",
            },
        },
    }
    assert list(document["groups"]) == ["billing", "orders"]
