"""``groups_reset``: the partitions a reset names and the offsets it plans, without a coordinator."""

from __future__ import annotations

import re

import pytest

from berth.coordinator.groups.groups_reset import (
    MAX_OFFSET,
    PlannedReset,
    ResetError,
    ResetMethod,
    TopicSelection,
    parse_topic,
    plan_reset,
    selected_partitions,
)

COMMITTED = {("events", 0): 100, ("events", 1): 30, ("audit", 0): 9}


@pytest.mark.parametrize(
    ("text", "selection"),
    [
        ("events", TopicSelection("events", None)),
        ("events:0", TopicSelection("events", (0,))),
        ("events:3,0-2,2", TopicSelection("events", (0, 1, 2, 3))),
        ("events: 1 , 4", TopicSelection("events", (1, 4))),
    ],
)
def test_topics_are_kafkas_form_with_ranges(text: str, selection: TopicSelection) -> None:
    assert parse_topic(text) == selection


@pytest.mark.parametrize("text", [":0", "events:", "events:a", "events:-1", "events:3-1", "events:0-100000"])
def test_a_malformed_topic_is_refused(text: str) -> None:
    with pytest.raises(ResetError, match="--topic"):
        parse_topic(text)


def test_a_topic_without_partitions_names_its_committed_ones_and_all_topics_every_one() -> None:
    assert selected_partitions([TopicSelection("events", None)], COMMITTED) == [("events", 0), ("events", 1)]
    assert selected_partitions(None, COMMITTED) == [("audit", 0), ("events", 0), ("events", 1)]
    assert selected_partitions([TopicSelection("new", (5,))], COMMITTED) == [("new", 5)]
    with pytest.raises(ResetError, match=re.escape("name them, e.g. --topic new:0,1,2")):
        selected_partitions([TopicSelection("new", None)], COMMITTED)
    with pytest.raises(ResetError, match="no committed offsets"):
        selected_partitions(None, {})


def test_each_method_plans_its_offsets() -> None:
    partitions = [("events", 0), ("events", 1)]
    assert [p.new for p in plan_reset(partitions, COMMITTED, ResetMethod("to-earliest"))] == [0, 0]
    assert [p.new for p in plan_reset(partitions, COMMITTED, ResetMethod("to-offset", 42))] == [42, 42]
    assert [p.new for p in plan_reset(partitions, COMMITTED, ResetMethod("to-current"))] == [100, 30]
    assert plan_reset(partitions, COMMITTED, ResetMethod("shift-by", -50)) == [
        PlannedReset("events", 0, 100, 50),
        PlannedReset("events", 1, 30, 0),  # clamped at the log's lowest offset, as Kafka clamps to its start
    ]
    assert plan_reset([("events", 0)], {("events", 0): MAX_OFFSET - 1}, ResetMethod("shift-by", 5))[0].new == MAX_OFFSET


def test_latest_is_refused_and_shifts_need_a_committed_offset() -> None:
    with pytest.raises(ResetError, match=r"latest .* offset is not known here"):
        plan_reset([("events", 0)], COMMITTED, ResetMethod("to-latest"))
    with pytest.raises(ResetError, match="--shift-by: no committed offset to start from on new:0"):
        plan_reset([("new", 0)], COMMITTED, ResetMethod("shift-by", 1))
    assert plan_reset([("new", 0)], COMMITTED, ResetMethod("to-offset", 3)) == [PlannedReset("new", 0, None, 3)]
