"""Reading what the operator observes: instance ids, the coordinator's JSON, and the pipeline's advice.json."""

from __future__ import annotations

from typing import Any

import pytest

from berth.coordinator.formats.advice import AdviceError, GroupAdvice, parse_advice
from berth.operator.planners.instances import instance_ids, ordinal_of, sorted_by_ordinal
from berth.operator.planners.observations import CoordinatorBounds, GroupDescription, GroupMember

ADVICE_EXAMPLE: dict[str, Any] = {  # docs/formats.md, verbatim
    "version": 1,
    "generated_at_ms": 1795000000000,
    "journal": {"events": 123456, "malformed_lines": 0, "first_ts_ms": 0, "last_ts_ms": 0},
    "groups": {
        "orders": {
            "advised_session_timeout_ms": 45000,
            "samples": 240,
            "percentile": 0.99,
            "restart_gap_p_ms": 28000,
            "safety_margin": 1.5,
            "heartbeat_interval_ms": 3000,
            "min_ms": 6000,
            "max_ms": 1800000,
            "confident": True,
            "reason": "p99 of 240 restart gaps is 28.0 s; x1.5 + 3.0 s heartbeat = 45.0 s",
        }
    },
}


def test_instance_ids_are_pod_names_in_ordinal_order() -> None:
    assert instance_ids("orders", 3) == ("orders-0", "orders-1", "orders-2")
    assert instance_ids("orders", 0) == ()
    assert sorted_by_ordinal("orders", ["orders-10", "orders-9", "orders-9", "other-1"]) == ("orders-9", "orders-10")


@pytest.mark.parametrize(
    ("name", "ordinal"),
    [
        ("orders-0", 0),
        ("orders-12", 12),
        ("orders-01", None),
        ("orders-", None),
        ("orders-eu-1", None),
        ("orders-+1", None),
        ("orders-\u0661", None),  # an Arabic-Indic digit: isdigit() but not an ordinal
        ("order-1", None),
    ],
)
def test_only_names_the_statefulset_would_give_have_an_ordinal(name: str, ordinal: int | None) -> None:
    assert ordinal_of("orders", name) == ordinal


def test_the_example_advice_reads_as_a_confident_45_second_timeout() -> None:
    advice = parse_advice(ADVICE_EXAMPLE)

    assert advice.generated_at_ms == 1795000000000
    assert advice.for_group("orders") == GroupAdvice(
        advised_session_timeout_ms=45000,
        samples=240,
        confident=True,
        reason="p99 of 240 restart gaps is 28.0 s; x1.5 + 3.0 s heartbeat = 45.0 s",
    )
    assert advice.for_group("payments") is None


def test_a_newer_advice_version_with_unknown_fields_is_read_and_a_broken_entry_skipped() -> None:
    document = {
        "version": 2,
        "groups": {
            "orders": {**ADVICE_EXAMPLE["groups"]["orders"], "new_field": [1, 2]},
            "broken": {"advised_session_timeout_ms": "45000", "samples": 3, "confident": True},
        },
    }

    advice = parse_advice(document)

    assert set(advice.groups) == {"orders"}


@pytest.mark.parametrize(
    ("document", "problem"),
    [({"groups": {}}, "version must be an integer >= 1, not None"), ({"version": 1}, "groups must be a mapping")],
)
def test_a_document_that_is_not_advice_is_refused(document: dict[str, Any], problem: str) -> None:
    with pytest.raises(AdviceError, match=problem):
        parse_advice(document)


def test_coordinator_bounds_come_from_get_config() -> None:
    config = {"group_min_session_timeout_ms": 6000, "group_max_session_timeout_ms": 1800000, "group_max_size": None}

    assert CoordinatorBounds.from_wire(config) == CoordinatorBounds(6000, 1800000)
    with pytest.raises(ValueError, match="group_min/max_session_timeout_ms"):
        CoordinatorBounds.from_wire({"group_min_session_timeout_ms": 6000})


def test_a_describe_response_reads_into_a_group_description() -> None:
    response = {
        "error_code": 0,
        "error": "NONE",
        "group_id": "orders",
        "group_state": "Stable",
        "protocol_type": "consumer",
        "protocol_data": "range",
        "generation_id": 7,
        "leader": "orders-0-1b2c",
        "members": [
            {"member_id": "orders-0-1b2c", "group_instance_id": "orders-0", "client_id": "c"},
            {"member_id": "member-9f", "group_instance_id": None, "client_id": ""},
        ],
    }

    description = GroupDescription.from_wire(response)

    assert description == GroupDescription(
        group_id="orders",
        state="Stable",
        generation=7,
        leader="orders-0-1b2c",
        members=(GroupMember("orders-0-1b2c", "orders-0"), GroupMember("member-9f", None)),
    )
    assert description.static_instance_ids() == frozenset({"orders-0"})


def test_a_dead_group_has_no_leader() -> None:
    dead = {"group_id": "gone", "group_state": "Dead", "generation_id": -1, "leader": None, "members": []}

    assert GroupDescription.from_wire(dead) == GroupDescription("gone", "Dead", -1, None, ())
