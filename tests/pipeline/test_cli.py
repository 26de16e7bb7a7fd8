"""``berth-analyze`` end to end on a small journal directory laid out as the coordinator writes it.

The journal: ``orders`` is a static fleet of two whose members restart in place twice, then one stays away past
its session timeout (expired, rejoined: two rebalances); ``billing`` is one dynamic member that leaves and comes
back (a dynamic restart that cost two rebalances: the group emptied before the new process joined). One line of
the second segment is garbage. Every number below follows from those events by hand.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from berth.pipeline.cluster import CODEGEN_FACTORY_MODE
from berth.pipeline.main import main

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
GARBAGE = '{"seq": 99, "ts_ms": oops'


def encoded(partitions: dict[str, list[int]]) -> str:
    document = {"partitions": partitions, "user_data": None, "version": 1}
    return base64.b64encode(json.dumps(document, separators=(",", ":"), sort_keys=True).encode()).decode()


def member(member_id: str, instance_id: str | None) -> dict[str, Any]:
    return {"member_id": member_id, "group_instance_id": instance_id}


def owns(member_id: str, instance_id: str | None, partitions: dict[str, list[int]]) -> dict[str, Any]:
    return {**member(member_id, instance_id), "assignment": encoded(partitions)}


def orders_events() -> list[tuple[int, dict[str, Any]]]:
    def joined(ts: int, member_id: str, instance: str, generation: int) -> tuple[int, dict[str, Any]]:
        fields = {"member_id": member_id, "group_instance_id": instance, "static": True, "client_id": "consumer"}
        return ts, {"type": "member_joined", "generation_id": generation, **fields}

    def replaced(ts: int, new: str, old: str, instance: str, offline_ms: int) -> tuple[int, dict[str, Any]]:
        fields = {"member_id": new, "group_instance_id": instance, "old_member_id": old, "offline_ms": offline_ms}
        return ts, {"type": "static_member_replaced", "generation_id": 1, **fields, "rebalance": False}

    both_gen_1 = [member("orders-0-a", "orders-0"), member("orders-1-a", "orders-1")]
    return [
        (T0, {"type": "group_created", "generation_id": 0}),
        joined(T0 + 10, "orders-0-a", "orders-0", 0),
        (T0 + 10, {"type": "rebalance_started", "generation_id": 0, "cause": "new_member"}),
        joined(T0 + 20, "orders-1-a", "orders-1", 0),
        (
            T0 + 3_010,
            {
                "type": "rebalance_completed",
                "generation_id": 1,
                "leader": "orders-0-a",
                "protocol_name": "range",
                "members": both_gen_1,
            },
        ),
        (
            T0 + 3_050,
            {
                "type": "assignment_stored",
                "generation_id": 1,
                "member_id": "orders-0-a",
                "assignments": [
                    owns("orders-0-a", "orders-0", {"orders": [0, 1]}),
                    owns("orders-1-a", "orders-1", {"orders": [2, 3]}),
                ],
            },
        ),
        replaced(T0 + HOUR, "orders-0-b", "orders-0-a", "orders-0", 8_000),
        replaced(T0 + HOUR + 60_000, "orders-1-b", "orders-1-a", "orders-1", 12_000),
        (
            T0 + 2 * HOUR,
            {"type": "member_expired", "generation_id": 1, **member("orders-1-b", "orders-1"), "phase": "session"},
        ),
        (T0 + 2 * HOUR, {"type": "rebalance_started", "generation_id": 1, "cause": "member_expired"}),
        (
            T0 + 2 * HOUR + 500,
            {
                "type": "rebalance_completed",
                "generation_id": 2,
                "leader": "orders-0-b",
                "protocol_name": "range",
                "members": [member("orders-0-b", "orders-0")],
            },
        ),
        (
            T0 + 2 * HOUR + 520,
            {
                "type": "assignment_stored",
                "generation_id": 2,
                "member_id": "orders-0-b",
                "assignments": [owns("orders-0-b", "orders-0", {"orders": [0, 1, 2, 3]})],
            },
        ),
        joined(T0 + 2 * HOUR + 40_000, "orders-1-c", "orders-1", 2),
        (T0 + 2 * HOUR + 40_000, {"type": "rebalance_started", "generation_id": 2, "cause": "new_member"}),
        (
            T0 + 2 * HOUR + 40_800,
            {
                "type": "rebalance_completed",
                "generation_id": 3,
                "leader": "orders-0-b",
                "protocol_name": "range",
                "members": [member("orders-0-b", "orders-0"), member("orders-1-c", "orders-1")],
            },
        ),
        (
            T0 + 2 * HOUR + 40_850,
            {
                "type": "assignment_stored",
                "generation_id": 3,
                "member_id": "orders-0-b",
                "assignments": [
                    owns("orders-0-b", "orders-0", {"orders": [0, 1]}),
                    owns("orders-1-c", "orders-1", {"orders": [2, 3]}),
                ],
            },
        ),
    ]


def billing_events() -> list[tuple[int, dict[str, Any]]]:
    def dynamic_join(ts: int, member_id: str, generation: int) -> list[tuple[int, dict[str, Any]]]:
        return [
            (ts, {"type": "member_id_required", "generation_id": generation, **member(member_id, None)}),
            (
                ts + 1,
                {
                    "type": "member_joined",
                    "generation_id": generation,
                    **member(member_id, None),
                    "static": False,
                    "client_id": "billing",
                },
            ),
            (ts + 1, {"type": "rebalance_started", "generation_id": generation, "cause": "new_member"}),
            (
                ts + 101,
                {
                    "type": "rebalance_completed",
                    "generation_id": generation + 1,
                    "leader": member_id,
                    "protocol_name": "range",
                    "members": [member(member_id, None)],
                },
            ),
            (
                ts + 105,
                {
                    "type": "assignment_stored",
                    "generation_id": generation + 1,
                    "member_id": member_id,
                    "assignments": [owns(member_id, None, {"ledger": [0]})],
                },
            ),
        ]

    return [
        (T0 + 5, {"type": "group_created", "generation_id": 0}),
        *dynamic_join(T0 + 5, "c-1", 0),
        (T0 + HOUR + 5, {"type": "member_left", "generation_id": 1, **member("c-1", None), "via": "leave"}),
        (T0 + HOUR + 5, {"type": "rebalance_started", "generation_id": 1, "cause": "member_left"}),
        (T0 + HOUR + 5, {"type": "group_emptied", "generation_id": 1}),
        *dynamic_join(T0 + HOUR + 9_000, "c-2", 1),
    ]


@pytest.fixture
def journal_dir(tmp_path: Path) -> Path:
    """Two segments as the coordinator writes them: seq in time order, JSON Lines, named by first seq."""
    timed = sorted(
        [(ts, "orders", e) for ts, e in orders_events()] + [(ts, "billing", e) for ts, e in billing_events()],
        key=lambda item: item[0],
    )
    lines = [
        json.dumps({"seq": seq, "ts_ms": ts, "group_id": group, **e}, separators=(",", ":"))
        for seq, (ts, group, e) in enumerate(timed, start=1)
    ]
    directory = tmp_path / "journal"
    directory.mkdir()
    (directory / "segment-00000000000000000001.jsonl").write_text("\n".join(lines[:10]) + "\n")
    (directory / "segment-00000000000000000011.jsonl").write_text("\n".join([*lines[10:], GARBAGE]) + "\n")
    return directory


EXPECTED_ORDERS_ADVICE = {
    "advised_session_timeout_ms": 63_000,
    "samples": 3,
    "percentile": 0.99,
    "restart_gap_p_ms": 40_000,
    "safety_margin": 1.5,
    "heartbeat_interval_ms": 3000,
    "min_ms": 6000,
    "max_ms": 1_800_000,
    "confident": True,
    "reason": "p99 of 3 restart gaps is 40.0 s; x1.5 + 3.0 s heartbeat = 63.0 s",
}

EXPECTED_SUMMARY = [
    {
        "group_id": "billing",
        "events": 14,
        "first_ts_ms": T0 + 5,
        "last_ts_ms": T0 + HOUR + 9_105,
        "rebalances_by_cause": [("member_left", 1), ("new_member", 2)],
        "rebalances": 3,
        "static_restarts": 0,
        "restarts_without_rebalance": 0,
        "dynamic_restarts": 1,  # c-1 left, c-2 joined
        "dynamic_restart_rebalances": 2,  # member_left, then new_member: c-2 came after the group had emptied
        "rebalances_if_dynamic": 0,
        "rebalances_avoided": 0,
        "restart_gap_samples": 0,
        "rebalancing_ms": 208,  # 104 + 0 (emptied at once) + 104
        "assignments": 2,
        "partitions_moved": 0,  # ledger-0 went from c-1 to c-2, its replacement in the same process slot
        "unknown_assignments": 0,
        "restart_gap_p50_ms": None,
        "restart_gap_p_ms": None,
        "restart_gap_max_ms": None,
        "longest_rebalance_ms": 104,
        "advised_session_timeout_ms": None,
        "advice_confident": None,
    },
    {
        "group_id": "orders",
        "events": 16,
        "first_ts_ms": T0,
        "last_ts_ms": T0 + 2 * HOUR + 40_850,
        "rebalances_by_cause": [("member_expired", 1), ("new_member", 2)],
        "rebalances": 3,
        "static_restarts": 2,
        "restarts_without_rebalance": 2,
        "dynamic_restarts": 0,
        "dynamic_restart_rebalances": 0,
        "rebalances_if_dynamic": 4,  # 2 restarts x the 2 rebalances billing's dynamic restart cost
        "rebalances_avoided": 4,
        "restart_gap_samples": 3,
        "rebalancing_ms": 4_410,  # 3 040 + 520 + 850
        "assignments": 3,
        "partitions_moved": 4,  # orders-2 and -3 to orders-0 on the expiry, and back on the rejoin
        "unknown_assignments": 0,
        "restart_gap_p50_ms": 12_000,
        "restart_gap_p_ms": 40_000,
        "restart_gap_max_ms": 40_000,
        "longest_rebalance_ms": 3_040,
        "advised_session_timeout_ms": 63_000,
        "advice_confident": True,
    },
]


def run(*args: str) -> int:
    return main([*args, "--quiet"])


@pytest.fixture(params=["compiled", "interpreted"])
def code_generation(spark: SparkSession, request: pytest.FixtureRequest) -> Iterator[str]:
    """The session as a large journal's run has it (generated code), or as a small journal's (``size_sql``: no
    whole-stage code generation, expressions interpreted): the outputs must not differ by a byte."""
    settings = {"spark.sql.codegen.wholeStage": "false", CODEGEN_FACTORY_MODE: "NO_CODEGEN"}
    before = {key: spark.conf.get(key) for key in settings}
    if request.param == "interpreted":
        for key, value in settings.items():
            spark.conf.set(key, value)
    try:
        yield request.param
    finally:
        for key, value in before.items():
            spark.conf.set(key, value or "")


def test_the_journal_directory_is_all_it_needs(
    spark: SparkSession, journal_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], code_generation: str
) -> None:
    out = tmp_path / "out"

    code = main(["--journal", str(journal_dir), "--out", str(out), "--confident-samples", "3"])

    assert code == 0
    advice = json.loads((out / "advice.json").read_text())
    assert isinstance(advice.pop("generated_at_ms"), int)
    assert advice == {
        "version": 1,
        "journal": {"events": 30, "malformed_lines": 1, "first_ts_ms": T0, "last_ts_ms": T0 + 2 * HOUR + 40_850},
        "groups": {"orders": EXPECTED_ORDERS_ADVICE},  # billing's members are dynamic: no restart gap
    }
    assert pq.read_table(out / "summary.parquet").to_pylist() == EXPECTED_SUMMARY
    report = (out / "report.html").read_text()
    # restart costs, rebalances over time, partitions moved, two group timelines, the advice overview, orders'
    # restart gaps, the groups overview
    assert report.count("<svg") == 8
    assert "advised timeout 63.0 s" in report
    progress = capsys.readouterr().err
    assert "read 30 events, 1 malformed lines" in progress
    assert f"malformed: {GARBAGE}" in progress


def test_since_drops_earlier_events_and_parquet_gives_the_same_advice(
    spark: SparkSession, journal_dir: Path, tmp_path: Path
) -> None:
    converted = tmp_path / "parquet"
    assert run("convert", "--journal", str(journal_dir), "--out", str(converted)) == 0
    out = tmp_path / "out"

    code = run("--journal", str(converted), "--out", str(out), "--since", "2026-01-01T01:00:00Z", "--no-report")

    assert code == 0
    advice = json.loads((out / "advice.json").read_text())
    # From 01:00 on, orders has both in-place restarts but its expiry's rejoin only: the same three gaps.
    assert advice["journal"] == {
        "events": 18,
        "malformed_lines": 1,
        "first_ts_ms": T0 + HOUR,
        "last_ts_ms": T0 + 2 * HOUR + 40_850,
    }
    assert advice["groups"]["orders"]["restart_gap_p_ms"] == 40_000
    assert advice["groups"]["orders"]["confident"] is False
    assert not (out / "report.html").exists()


def test_a_missing_or_empty_journal_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()

    assert run("--journal", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")) == 1
    assert capsys.readouterr().err == f"berth-analyze: error: journal not found: {tmp_path / 'nowhere'}\n"
    assert run("--journal", str(tmp_path / "empty"), "--out", str(tmp_path / "out")) == 1
    assert capsys.readouterr().err == (
        f"berth-analyze: error: journal is empty: no *.jsonl segment or Parquet files in {tmp_path / 'empty'}\n"
    )
    assert not (tmp_path / "out").exists()


def test_a_journal_of_garbage_only_is_an_error_too(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "segment-00000000000000000001.jsonl").write_text(f"{GARBAGE}\n")

    assert run("--journal", str(tmp_path), "--out", str(tmp_path / "out")) == 1
    assert capsys.readouterr().err.endswith(f"no events in journal {tmp_path} (1 malformed lines)\n")


def test_nonsense_settings_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run("--journal", str(tmp_path), "--out", str(tmp_path), "--percentile", "99")

    assert exit_info.value.code == 2
    assert "percentile must be in (0, 1], got 99.0" in capsys.readouterr().err
