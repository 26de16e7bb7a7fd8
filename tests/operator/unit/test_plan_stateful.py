"""Stateful fleets, planned: what the spec means, what an update of the StatefulSet sets, the disruption budget, and
which claims a scale-down leaves behind (and what status and Events say of them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from berth.operator.planners.disruption_budget import describe_budget
from berth.operator.planners.statefulset import describe_rollout, plan_statefulset, updatable_spec
from berth.operator.planners.volume_claims import (
    claims_on_deletion,
    report_retained_claims,
    retained_claims,
)
from berth.operator.spec.fleet import Fleet, OperatorDefaults, SpecError, parse_fleet
from berth.operator.spec.stateful import (
    ClaimRetention,
    ClaimRetentionPolicy,
    DisruptionBudget,
    StatefulSpec,
    UpdateStrategy,
    UpdateStrategyType,
)

FleetBody = Callable[..., dict[str, Any]]
DEFAULTS = OperatorDefaults(coordinator_url="http://berth-coordinator.berth:9094")
CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def claims(*names: str) -> list[dict[str, Any]]:
    return [{"metadata": {"name": name}, "spec": CLAIM_SPEC} for name in names]


def stateful_fleet(fleet_body: FleetBody, replicas: int = 3, **spec: Any) -> Fleet:
    return parse_fleet(fleet_body(spec={"replicas": replicas, "volumeClaimTemplates": claims("data", "cache"), **spec}))


# --- the spec ------------------------------------------------------------------------------------------------------


def test_a_fleet_that_says_nothing_gets_retained_claims_rolling_updates_and_a_budget_of_one(
    fleet_body: FleetBody,
) -> None:
    assert parse_fleet(fleet_body()).spec.stateful == StatefulSpec(
        volume_claim_templates=(),
        claim_retention=ClaimRetentionPolicy(ClaimRetention.RETAIN, ClaimRetention.RETAIN),
        update_strategy=None,
        disruption_budget=DisruptionBudget(enabled=True, max_unavailable=1),
    )


def test_the_stateful_fields_parse_field_for_field(fleet_body: FleetBody) -> None:
    stateful = stateful_fleet(
        fleet_body,
        persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete"},
        updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2, "maxUnavailable": 2}},
        podDisruptionBudget={"enabled": False, "maxUnavailable": "10%"},
    ).spec.stateful
    assert stateful.claim_template_names == ("data", "cache")
    assert stateful.claim_retention == ClaimRetentionPolicy(ClaimRetention.RETAIN, ClaimRetention.DELETE)
    assert stateful.update_strategy == UpdateStrategy(UpdateStrategyType.ROLLING_UPDATE, 2, 2)
    assert stateful.disruption_budget == DisruptionBudget(enabled=False, max_unavailable="10%")


def test_claim_templates_are_private_copies(fleet_body: FleetBody) -> None:
    body = fleet_body(spec={"volumeClaimTemplates": claims("data")})
    fleet = parse_fleet(body)
    body["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] = "9Gi"
    assert fleet.spec.stateful.volume_claim_templates[0]["spec"] == CLAIM_SPEC


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        ({"volumeClaimTemplates": {"data": CLAIM_SPEC}}, "spec.volumeClaimTemplates", "must be a list"),
        ({"volumeClaimTemplates": [{"spec": CLAIM_SPEC}]}, "spec.volumeClaimTemplates[0].metadata", "is required"),
        ({"volumeClaimTemplates": [{"metadata": {"name": "data"}}]}, "spec.volumeClaimTemplates[0].spec", "required"),
        ({"volumeClaimTemplates": claims("Data")}, "spec.volumeClaimTemplates[0].metadata.name", "DNS label"),
        ({"volumeClaimTemplates": claims("d" * 64)}, "spec.volumeClaimTemplates[0].metadata.name", "at most 63"),
        ({"volumeClaimTemplates": claims("data", "data")}, "spec.volumeClaimTemplates[1].metadata.name", "two"),
        ({"volumeClaimTemplates": claims(*(f"d{i}" for i in range(17)))}, "spec.volumeClaimTemplates", "at most 16"),
        (
            {"persistentVolumeClaimRetentionPolicy": {"whenScaled": "Archive"}},
            "spec.persistentVolumeClaimRetentionPolicy.whenScaled",
            "not one of Retain, Delete",
        ),
        ({"updateStrategy": {"type": "Recreate"}}, "spec.updateStrategy.type", "not one of RollingUpdate, OnDelete"),
        (
            {"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}}},
            "spec.updateStrategy.rollingUpdate",
            "applies only to type RollingUpdate",
        ),
        ({"updateStrategy": {"rollingUpdate": {"partition": -1}}}, "rollingUpdate.partition", "below the minimum 0"),
        ({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0}}}, "rollingUpdate.maxUnavailable", "minimum 1"),
        ({"updateStrategy": {"rollingUpdate": {"maxUnavailable": "0%"}}}, "rollingUpdate.maxUnavailable", "1% to"),
        ({"podDisruptionBudget": {"maxUnavailable": "101%"}}, "spec.podDisruptionBudget.maxUnavailable", "0% to 100%"),
        ({"podDisruptionBudget": {"maxUnavailable": "half"}}, "spec.podDisruptionBudget.maxUnavailable", "percentage"),
        ({"podDisruptionBudget": {"maxUnavailable": True}}, "spec.podDisruptionBudget.maxUnavailable", "integer"),
        ({"podDisruptionBudget": {"enabled": "yes"}}, "spec.podDisruptionBudget.enabled", "true or false"),
    ],
)
def test_an_invalid_stateful_field_is_named(
    fleet_body: FleetBody, spec: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(SpecError) as raised:
        parse_fleet(fleet_body(spec=spec))
    assert field in raised.value.field and problem in raised.value.problem, raised.value


# --- what the StatefulSet gets, and what an update sets ------------------------------------------------------------


def test_a_fleet_without_claims_or_strategy_plans_none_of_the_statefulsets_optional_fields(
    fleet_body: FleetBody,
) -> None:
    """So that an operator upgrade changes no existing StatefulSet (and rolls no pods)."""
    spec = plan_statefulset(
        parse_fleet(fleet_body()), operator_defaults=DEFAULTS, session_timeout_ms=30_000, replicas=1
    )
    assert (
        not {"volumeClaimTemplates", "persistentVolumeClaimRetentionPolicy", "updateStrategy"}
        & spec.statefulset["spec"].keys()
    )


def test_an_update_sets_what_is_planned_and_puts_kubernetes_defaults_back_for_what_is_not(
    fleet_body: FleetBody,
) -> None:
    plain = plan_statefulset(
        parse_fleet(fleet_body()), operator_defaults=DEFAULTS, session_timeout_ms=30_000, replicas=1
    )
    updates = updatable_spec(plain.statefulset)
    assert updates == {
        "template": plain.statefulset["spec"]["template"],
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
    }
    on_delete = stateful_fleet(
        fleet_body,
        updateStrategy={"type": "OnDelete"},
        persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete", "whenDeleted": "Delete"},
    )
    planned = plan_statefulset(on_delete, operator_defaults=DEFAULTS, session_timeout_ms=30_000, replicas=1)
    updates = updatable_spec(planned.statefulset)
    assert updates["updateStrategy"] == {"type": "OnDelete"}
    assert updates["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Delete"}
    # The claim templates are fixed at creation: never part of an update.
    assert "volumeClaimTemplates" not in updates


def test_the_updated_event_says_how_the_template_reaches_the_pods() -> None:
    assert describe_rollout(None) == "its pods restart one at a time and rejoin as themselves, without a rebalance"
    assert describe_rollout(UpdateStrategy(UpdateStrategyType.ROLLING_UPDATE, partition=0)) == describe_rollout(None)
    assert describe_rollout(UpdateStrategy(UpdateStrategyType.ROLLING_UPDATE, partition=2)) == (
        "its pods from ordinal 2 up restart one at a time and rejoin as themselves, without a rebalance; those below"
        " keep the old template (partition 2)"
    )
    assert describe_rollout(UpdateStrategy(UpdateStrategyType.ON_DELETE)).startswith(
        "each pod takes it when it is next deleted (updateStrategy OnDelete)"
    )


def test_a_disabled_budget_is_planned_as_none(fleet_body: FleetBody) -> None:
    fleet = parse_fleet(fleet_body(spec={"podDisruptionBudget": {"enabled": False}}))
    planned = plan_statefulset(fleet, operator_defaults=DEFAULTS, session_timeout_ms=30_000, replicas=1)
    assert planned.disruption_budget is None


def test_the_budgets_events_say_what_was_done() -> None:
    budget = DisruptionBudget(max_unavailable="25%")
    assert describe_budget("created", "orders", budget) == (
        "Created",
        "created PodDisruptionBudget orders (maxUnavailable 25%; unhealthy pods always evictable)",
    )
    assert describe_budget("updated", "orders", budget) == (
        "Updated",
        "updated PodDisruptionBudget orders (maxUnavailable 25%)",
    )
    assert describe_budget("deleted", "orders", budget) == (
        "Deleted",
        "deleted PodDisruptionBudget orders: spec.podDisruptionBudget.enabled is false",
    )
    assert describe_budget("unchanged", "orders", budget) is None


# --- claims a scale-down leaves behind -----------------------------------------------------------------------------


def test_claims_of_departed_pods_are_retained_once_their_pods_are_gone(fleet_body: FleetBody) -> None:
    fleet = stateful_fleet(fleet_body, replicas=3)
    every = [f"{t}-orders-{o}" for t in ("data", "cache") for o in range(5)]
    # orders-4 is still terminating: its claims are not left behind yet.
    pods = ["orders-0", "orders-1", "orders-2", "orders-4"]
    assert retained_claims(fleet, claims=every, existing_pods=pods) == ("data-orders-3", "cache-orders-3")
    gone = pods[:3]
    assert retained_claims(fleet, claims=every, existing_pods=gone) == (
        "data-orders-3",
        "cache-orders-3",
        "data-orders-4",
        "cache-orders-4",
    )


def test_retained_claims_are_in_ordinal_order_and_other_claims_are_not_the_fleets(fleet_body: FleetBody) -> None:
    fleet = stateful_fleet(fleet_body, replicas=0)
    found = ["data-orders-10", "data-orders-9", "data-orders-01", "data-payments-1", "logs-orders-2", "data-orders-x"]
    assert retained_claims(fleet, claims=found, existing_pods=[]) == ("data-orders-9", "data-orders-10")


def test_a_scale_up_pending_keeps_the_claims_its_pods_will_get_back(fleet_body: FleetBody) -> None:
    fleet = stateful_fleet(fleet_body, replicas=5)
    found = [f"data-orders-{o}" for o in range(5)]
    assert retained_claims(fleet, claims=found, existing_pods=["orders-0", "orders-1", "orders-2"]) == ()


def test_status_lists_retained_claims_and_an_event_names_each_once(fleet_body: FleetBody) -> None:
    fleet = parse_fleet(fleet_body(spec={"replicas": 3, "volumeClaimTemplates": claims("data")}))
    every = [f"data-orders-{o}" for o in range(5)]
    pods = ["orders-0", "orders-1", "orders-2"]

    first = report_retained_claims(fleet, {"retainedClaims": []}, claims=every, existing_pods=pods)
    assert first.patch == {"retainedClaims": ["data-orders-3", "data-orders-4"]}
    assert first.event == (
        "kept volume claims data-orders-3, data-orders-4 of departed pods orders-3, orders-4"
        " (persistentVolumeClaimRetentionPolicy.whenScaled: Retain): a pod that comes back gets its claims again;"
        " `kubectl delete pvc data-orders-3 data-orders-4` frees the storage"
    )
    again = report_retained_claims(fleet, first.patch, claims=every, existing_pods=pods)
    assert again.patch == {} and again.event is None
    # orders-3 came back; data-orders-4 was deleted by someone: the list follows, with nothing new to announce.
    back = report_retained_claims(fleet, first.patch, claims=every[:4], existing_pods=[*pods, "orders-3"])
    assert back.patch == {"retainedClaims": []} and back.event is None


def test_a_fleet_without_claim_templates_writes_no_retained_claims(fleet_body: FleetBody) -> None:
    fleet = parse_fleet(fleet_body())
    assert report_retained_claims(fleet, {}, claims=[], existing_pods=[]).patch == {}
    assert report_retained_claims(fleet, {"retainedClaims": []}, claims=[], existing_pods=[]).patch == {
        "retainedClaims": None
    }


def test_the_deletion_says_what_becomes_of_the_claims(fleet_body: FleetBody) -> None:
    assert claims_on_deletion(parse_fleet(fleet_body())) == ""
    kept = stateful_fleet(fleet_body)
    assert claims_on_deletion(kept) == (
        "; its pods' volume claims stay (persistentVolumeClaimRetentionPolicy.whenDeleted: Retain):"
        " `kubectl delete pvc -l berth.dev/fleet=orders` frees them"
    )
    with_set = stateful_fleet(fleet_body, persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete"})
    assert "go with its StatefulSet" in claims_on_deletion(with_set)
    # The deletion scales to zero first, so whenScaled: Delete already took them.
    scaled = stateful_fleet(fleet_body, persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete"})
    assert "went with them (whenScaled: Delete)" in claims_on_deletion(scaled)
