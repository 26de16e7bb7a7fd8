"""Mirroring the coordinator's view into status.group and the fleet's conditions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from berth.operator.planners.conditions import Condition, format_time, merge_conditions
from berth.operator.planners.fleet_status import merge_patch, token_secret_blocked, view_patch
from berth.operator.planners.observations import GroupDescription, GroupMember
from berth.operator.planners.status import PodsBlocked, plan_group_status
from berth.operator.spec.fleet import parse_fleet

FLEET_IDS = tuple(f"orders-{o}" for o in range(5))
EARLIER = "2026-03-01T11:00:00Z"
NOW_TEXT = "2026-03-01T12:00:00Z"


def describe(state: str, generation: int, *instances: str | None, leader: int | None = 0) -> GroupDescription:
    """A describe whose member ids are ``m-<instance>`` (``dyn-<n>`` for dynamic members)."""
    members = tuple(
        GroupMember(member_id=f"m-{instance}" if instance else f"dyn-{n}", group_instance_id=instance)
        for n, instance in enumerate(instances)
    )
    return GroupDescription(
        group_id="orders",
        state=state,
        generation=generation,
        leader=members[leader].member_id if leader is not None and members else None,
        members=members,
    )


def condition(type_: str, status: str, reason: str, message: str, since: str = NOW_TEXT) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": 3,
    }


def test_a_stable_full_group(now: datetime) -> None:
    plan = plan_group_status(
        "orders",
        describe("Stable", 7, *reversed(FLEET_IDS), leader=2),
        instance_ids=FLEET_IDS,
        departing=(),
        previous_conditions=None,
        now=now,
        observed_generation=3,
        ready_replicas=5,
    )

    assert plan.group == {"state": "Stable", "generation": 7, "leader": "orders-2", "members": list(FLEET_IDS)}
    assert plan.missing == ()
    assert plan.conditions == [
        condition("Ready", "True", "GroupStable", "all 5 instances are members of the Stable group at generation 7"),
        condition("CoordinatorReachable", "True", "Reachable", "group orders is Stable at generation 7"),
        condition("Rebalancing", "False", "Stable", "the group is Stable"),
        condition("ScaleDownPending", "False", "NoneDeparting", "no instance is waiting to leave the group"),
    ]


def test_a_condition_keeps_its_transition_time_while_its_status_holds(now: datetime) -> None:
    previous = [
        condition("Ready", "True", "GroupStable", "generation 6", since=EARLIER),
        condition("Rebalancing", "False", "Stable", "the group is Stable", since=EARLIER),
    ]

    plan = plan_group_status(
        "orders",
        describe("PreparingRebalance", 7, *FLEET_IDS),
        instance_ids=FLEET_IDS,
        departing=(),
        previous_conditions=previous,
        now=now,
        observed_generation=3,
    )

    by_type = {c["type"]: c for c in plan.conditions}
    assert by_type["Ready"] == condition("Ready", "False", "GroupRebalancing", "the group is in PreparingRebalance")
    assert by_type["Rebalancing"] == condition(
        "Rebalancing", "True", "PreparingRebalance", "rebalancing from generation 7"
    )

    settled = plan_group_status(
        "orders",
        describe("CompletingRebalance", 7, *FLEET_IDS),
        instance_ids=FLEET_IDS,
        departing=(),
        previous_conditions=plan.conditions,
        now=now + timedelta(seconds=3),
        observed_generation=3,
    )
    rebalancing = next(c for c in settled.conditions if c["type"] == "Rebalancing")
    assert rebalancing["reason"] == "CompletingRebalance"
    assert rebalancing["lastTransitionTime"] == NOW_TEXT  # still True: no transition


def test_missing_members_are_named(now: datetime) -> None:
    plan = plan_group_status(
        "orders",
        describe("Stable", 4, "orders-0", "orders-1", "orders-2"),
        instance_ids=FLEET_IDS,
        departing=(),
        previous_conditions=None,
        now=now,
    )

    assert plan.missing == ("orders-3", "orders-4")
    assert plan.conditions[0] == {
        "type": "Ready",
        "status": "False",
        "reason": "MembersMissing",
        "message": "not in the group: orders-3, orders-4",
        "lastTransitionTime": NOW_TEXT,
    }


def test_pods_not_ready_keep_the_fleet_unready(now: datetime) -> None:
    plan = plan_group_status(
        "orders",
        describe("Stable", 4, *FLEET_IDS),
        instance_ids=FLEET_IDS,
        departing=(),
        previous_conditions=None,
        now=now,
        ready_replicas=4,
    )

    assert (plan.conditions[0]["reason"], plan.conditions[0]["message"]) == ("PodsNotReady", "4 of 5 pods are ready")


def test_pods_not_ready_are_named_and_what_keeps_them_from_starting_comes_first(now: datetime) -> None:
    def ready(**known: object) -> tuple[str, str]:
        plan = plan_group_status(
            "orders",
            describe("Stable", 4, *FLEET_IDS),
            instance_ids=FLEET_IDS,
            departing=(),
            previous_conditions=None,
            now=now,
            ready_replicas=3,
            **known,  # type: ignore[arg-type]
        )
        return plan.conditions[0]["reason"], plan.conditions[0]["message"]

    assert ready(not_ready=("orders-3", "orders-4")) == (
        "PodsNotReady",
        "3 of 5 pods are ready (not ready: orders-3, orders-4)",
    )
    blocked = PodsBlocked(
        "TokenSecretMissing", "Secret shop/orders-token (spec.coordinator.tokenSecretRef) does not exist"
    )
    assert ready(not_ready=("orders-3", "orders-4"), blocked=blocked) == (
        "TokenSecretMissing",
        "Secret shop/orders-token (spec.coordinator.tokenSecretRef) does not exist; 3 of 5 pods are ready",
    )
    many = tuple(f"orders-{n}" for n in range(12))
    assert ready(not_ready=many)[1].endswith("orders-8, orders-9 and 2 more)")


def test_a_missing_token_secret_or_key_is_what_keeps_the_pods_from_starting(
    fleet_body: Callable[..., dict[str, Any]],
) -> None:
    fleet = parse_fleet(fleet_body(spec={"coordinator": {"tokenSecretRef": {"name": "orders-token", "key": "token"}}}))
    # As the kubelet words it in the pods' status (CreateContainerConfigError).
    missing = token_secret_blocked(fleet, ['secret "orders-token" not found'])
    assert missing is not None and missing.reason == "TokenSecretMissing"
    assert missing.message.startswith("Secret shop/orders-token (spec.coordinator.tokenSecretRef) does not exist")
    no_key = token_secret_blocked(fleet, ["couldn't find key token in Secret shop/orders-token"])
    assert no_key is not None and "has no key token: the pods cannot start until it does" in no_key.message
    assert token_secret_blocked(fleet, []) is None
    assert token_secret_blocked(fleet, ['secret "other" not found']) is None  # another Secret: not the token's


def test_departing_ids_make_a_scale_down_pending(now: datetime) -> None:
    plan = plan_group_status(
        "orders",
        describe("Stable", 9, *FLEET_IDS),
        instance_ids=FLEET_IDS[:3],
        departing=("orders-3", "orders-4"),
        previous_conditions=None,
        now=now,
    )

    assert plan.conditions[-1] == {
        "type": "ScaleDownPending",
        "status": "True",
        "reason": "AwaitingLeave",
        "message": "orders-3, orders-4 will leave the group once their pods are gone",
        "lastTransitionTime": NOW_TEXT,
    }


def test_an_unreachable_coordinator_keeps_the_last_group_and_makes_conditions_unknown(now: datetime) -> None:
    previous = [
        {"type": "SpecValid", "status": "True", "reason": "Parsed", "message": "ok", "lastTransitionTime": EARLIER},
        condition("CoordinatorReachable", "True", "Reachable", "group orders is Stable", since=EARLIER),
    ]

    plan = plan_group_status(
        "orders",
        None,
        instance_ids=FLEET_IDS,
        departing=("orders-5",),
        previous_conditions=previous,
        now=now,
        observed_generation=3,
        unreachable_reason="connection refused: http://berth-coordinator.berth:9094",
    )

    message = "connection refused: http://berth-coordinator.berth:9094"
    assert plan.group is None
    assert plan.missing == ()
    assert plan.conditions == [
        previous[0],  # another handler's condition, untouched and in place
        condition("CoordinatorReachable", "False", "Unreachable", message),
        condition("Ready", "Unknown", "CoordinatorUnreachable", message),
        condition("Rebalancing", "Unknown", "CoordinatorUnreachable", message),
        condition(
            "ScaleDownPending", "True", "AwaitingLeave", "orders-5 will leave the group once their pods are gone"
        ),
    ]


@pytest.mark.parametrize("state", ["Empty", "Dead"])
def test_a_fleet_scaled_to_zero_with_an_idle_group_is_ready(now: datetime, state: str) -> None:
    plan = plan_group_status(
        "orders",
        describe(state, -1 if state == "Dead" else 12, leader=None),
        instance_ids=(),
        departing=(),
        previous_conditions=None,
        now=now,
    )

    # What the coordinator says, or nothing: a group it does not know (Dead, generation -1) has no block at all.
    idle = {"state": state, "generation": 12, "leader": None, "members": []}
    assert plan.group == (None if state == "Dead" else idle)
    assert plan.conditions[0]["status"] == "True"
    assert plan.conditions[0]["reason"] == "ScaledToZero"


def test_members_sort_by_ordinal_then_others_by_name_and_a_dynamic_leader_shows_its_member_id(now: datetime) -> None:
    instances = ("orders-10", "orders-9", None, "billing-1", "orders-0")

    plan = plan_group_status(
        "orders",
        describe("Stable", 2, *instances, leader=2),
        instance_ids=("orders-0",),
        departing=(),
        previous_conditions=None,
        now=now,
    )

    assert plan.group is not None
    assert plan.group["members"] == ["orders-0", "orders-9", "orders-10", "billing-1", "dyn-2"]
    assert plan.group["leader"] == "dyn-2"


def test_merge_conditions_appends_new_types_and_times_are_utc_seconds() -> None:
    moment = datetime(2026, 3, 1, 13, 30, 5, 999_000, tzinfo=UTC)

    merged = merge_conditions(
        [], [Condition("SpecValid", "False", "InvalidSpec", "spec.replicas: is required")], now=moment
    )

    assert merged == [
        {
            "type": "SpecValid",
            "status": "False",
            "reason": "InvalidSpec",
            "message": "spec.replicas: is required",
            "lastTransitionTime": "2026-03-01T13:30:05Z",
        }
    ]


def test_format_time_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        format_time(datetime(2026, 3, 1, 12, 0))


def test_status_group_assignment_keeps_no_entry_of_a_member_gone_or_owning_nothing(now: datetime) -> None:
    """Regression (found by the Kafka signal lab): status.group was merge-patched into the last one, so after a
    scale-down 4 -> 1 status.group.assignment still named the three departed pods as owning partitions, and a member
    owning nothing mid-rebalance kept its old partitions there."""

    def view(description: GroupDescription, status: dict[str, Any]) -> dict[str, Any]:
        patch = view_patch(
            fleet_name="orders",
            group_id="orders",
            desired_replicas=len(description.members),
            status=status,
            selector="berth.dev/fleet=orders",
            running=len(description.members),
            ready=len(description.members),
            description=description,
            unreachable_reason="",
            now=now,
            generation=3,
        )
        return merge_patch(status, patch)  # as the API server applies it

    def owning(*owned: tuple[str, tuple[str, ...]]) -> GroupDescription:
        members = tuple(GroupMember(f"m-{name}", name, assignment=partitions) for name, partitions in owned)
        return GroupDescription("orders", "Stable", 5, None, members)

    four = owning(*((f"orders-{o}", (f"t:{o}",)) for o in range(4)))
    status = view(four, {})
    assert status["group"]["assignment"] == {f"orders-{o}": f"t:{o}" for o in range(4)}

    status = view(owning(("orders-0", ("t:0", "t:1", "t:2", "t:3"))), status)
    assert status["group"]["assignment"] == {"orders-0": "t:0,1,2,3"}

    status = view(owning(("orders-0", ()), ("orders-1", ("t:0",))), status)
    assert status["group"]["assignment"] == {"orders-1": "t:0"}
    assert status["group"]["members"] == ["orders-0", "orders-1"]

    status = view(owning(("orders-0", ()), ("orders-1", ())), status)
    assert "assignment" not in status["group"]
