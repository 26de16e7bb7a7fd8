"""Parsing ConsumerFleet objects: defaults as docs/architecture.md states them, and errors that name the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from berth.operator.spec.fleet import (
    CoordinatorRef,
    Fleet,
    OperatorDefaults,
    SecretKeyRef,
    SessionTimeoutPolicy,
    SessionTimeoutSpec,
    SpecError,
    parse_fleet,
    resolve_coordinator_url,
)

FleetBody = Callable[..., dict[str, Any]]


def test_a_fleet_with_only_replicas_and_template_gets_every_default(fleet_body: FleetBody) -> None:
    fleet = parse_fleet(fleet_body())

    assert fleet.name == "orders"
    assert fleet.namespace == "shop"
    assert fleet.uid == "6f1c2c1e-8d1a-4c55-9d59-0d7b9f2c1a11"
    assert fleet.generation == 3
    spec = fleet.spec
    assert spec.group_id == "orders"
    assert spec.replicas == 5
    assert spec.coordinator == CoordinatorRef(url=None, token_secret_ref=None)
    assert spec.session_timeout == SessionTimeoutSpec(
        policy=SessionTimeoutPolicy.AUTO, min_ms=6000, max_ms=1_800_000, safety_factor=1.5, fixed_ms=None
    )
    assert spec.rebalance_timeout_ms == 300_000
    assert spec.pre_register is True
    assert spec.leave_on_scale_down is True
    assert spec.template == fleet_body()["spec"]["template"]


def test_the_design_example_parses_field_for_field(fleet_body: FleetBody) -> None:
    body = fleet_body(
        spec={
            "groupId": "orders-v2",
            "replicas": 7,
            "coordinator": {
                "url": "http://berth-coordinator.berth:9094",
                "tokenSecretRef": {"name": "orders-token", "key": "token"},
            },
            "sessionTimeout": {"policy": "Fixed", "fixedMs": 45000, "minMs": 10000, "maxMs": 600000},
            "rebalanceTimeoutMs": 120000,
            "preRegister": False,
            "leaveOnScaleDown": False,
        }
    )

    spec = parse_fleet(body).spec

    assert spec.group_id == "orders-v2"
    assert spec.replicas == 7
    assert spec.coordinator == CoordinatorRef(
        url="http://berth-coordinator.berth:9094", token_secret_ref=SecretKeyRef(name="orders-token", key="token")
    )
    assert spec.session_timeout == SessionTimeoutSpec(
        policy=SessionTimeoutPolicy.FIXED, min_ms=10000, max_ms=600000, safety_factor=1.5, fixed_ms=45000
    )
    assert (spec.rebalance_timeout_ms, spec.pre_register, spec.leave_on_scale_down) == (120000, False, False)


def test_zero_replicas_is_a_valid_fleet(fleet_body: FleetBody) -> None:
    assert parse_fleet(fleet_body(spec={"replicas": 0})).spec.replicas == 0


def test_the_template_is_a_private_copy(fleet_body: FleetBody) -> None:
    body = fleet_body()
    fleet = parse_fleet(body)

    body["spec"]["template"]["spec"]["containers"][0]["image"] = "changed"

    assert fleet.spec.template["spec"]["containers"][0]["image"] == "registry.example/orders-consumer:1.4.2"


def test_a_namespace_left_out_means_default(fleet_body: FleetBody) -> None:
    body = fleet_body()
    del body["metadata"]["namespace"]
    assert parse_fleet(body).namespace == "default"


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        ({"replicas": None}, "spec.replicas", "is required"),
        ({"replicas": -1}, "spec.replicas", "-1 is below the minimum 0"),
        ({"replicas": True}, "spec.replicas", "must be an integer, not True"),
        ({"replicas": "3"}, "spec.replicas", "must be an integer, not '3'"),
        ({"groupId": ""}, "spec.groupId", "must be a non-empty string, not ''"),
        ({"groupId": "g" * 256}, "spec.groupId", "is 256 characters; at most 255"),
        ({"groupId": "orders/eu"}, "spec.groupId", "may hold only ASCII letters, digits, '.', '_' and '-'"),
        ({"groupId": "commandes-é"}, "spec.groupId", "may hold only ASCII letters"),
        ({"coordinator": {"url": "berth:9094"}}, "spec.coordinator.url", "is not an http:// or https:// URL"),
        ({"coordinator": {"tokenSecretRef": {"name": "t"}}}, "spec.coordinator.tokenSecretRef.key", "is required"),
        ({"sessionTimeout": {"policy": "Manual"}}, "spec.sessionTimeout.policy", "'Manual' is not one of Auto, Fixed"),
        ({"sessionTimeout": {"policy": "Fixed"}}, "spec.sessionTimeout.fixedMs", "is required when policy is Fixed"),
        ({"sessionTimeout": {"minMs": 999}}, "spec.sessionTimeout.minMs", "999 is below the minimum 1000"),
        ({"sessionTimeout": {"maxMs": 1_800_001}}, "spec.sessionTimeout.maxMs", "1800001 is above the maximum 1800000"),
        (
            {"sessionTimeout": {"policy": "Fixed", "fixedMs": 2_000_000}},
            "spec.sessionTimeout.fixedMs",
            "2000000 is above the maximum 1800000",
        ),
        ({"sessionTimeout": {"fixedMs": 45000}}, "spec.sessionTimeout.fixedMs", "applies only to policy Fixed"),
        ({"sessionTimeout": {"minMs": 9000, "maxMs": 8000}}, "spec.sessionTimeout.maxMs", "8000 is below minMs 9000"),
        ({"sessionTimeout": {"safetyFactor": 0.9}}, "spec.sessionTimeout.safetyFactor", "0.9 is below the minimum 1.0"),
        ({"sessionTimeout": {"safetyFactor": "2"}}, "spec.sessionTimeout.safetyFactor", "must be a number"),
        ({"rebalanceTimeoutMs": 2**31}, "spec.rebalanceTimeoutMs", "2147483648 is above the maximum 2147483647"),
        ({"rebalanceTimeoutMs": 500}, "spec.rebalanceTimeoutMs", "500 is below the minimum 1000"),
        ({"preRegister": "yes"}, "spec.preRegister", "must be true or false, not 'yes'"),
        ({"leaveOnScaleDown": 1}, "spec.leaveOnScaleDown", "must be true or false, not 1"),
        ({"template": None}, "spec.template", "is required"),
        ({"template": {"spec": {"containers": []}}}, "spec.template.spec.containers", "must list at least one"),
        ({"template": {"spec": {"containers": [{"image": "x"}]}}}, "spec.template.spec.containers[0].name", "required"),
        ({"template": {"spec": {"containers": [{"name": "c"}]}}}, "spec.template.spec.containers[0].image", "required"),
        (
            {"template": {"spec": {"containers": [{"name": "c", "image": "i", "env": {"A": "1"}}]}}},
            "spec.template.spec.containers[0].env",
            "must be a list",
        ),
        (
            {"template": {"metadata": {"labels": {"tier": 1}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "spec.template.metadata.labels['tier']",
            "must be a string, not 1",
        ),
    ],
)
def test_an_invalid_spec_names_its_field(fleet_body: FleetBody, spec: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_fleet(fleet_body(spec=spec))

    assert raised.value.field == field
    assert problem in raised.value.problem
    assert str(raised.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a" * 53, "is 53 characters; at most 52"),
        ("Orders", "must be lowercase letters, digits and '-', starting with a letter"),
        ("0rders", "starting with a letter"),
        ("orders.eu", "must be lowercase letters"),
    ],
)
def test_a_fleet_name_that_cannot_name_its_pods_and_service_is_refused(
    fleet_body: FleetBody, name: str, problem: str
) -> None:
    with pytest.raises(SpecError, match=r"^metadata\.name: ") as raised:
        parse_fleet(fleet_body(name=name))
    assert problem in raised.value.problem


def test_a_missing_spec_is_named(fleet_body: FleetBody) -> None:
    body = fleet_body()
    del body["spec"]
    with pytest.raises(SpecError, match=r"^spec: is required$"):
        parse_fleet(body)


def test_the_coordinator_url_falls_back_to_the_operators_default(fleet_body: FleetBody) -> None:
    defaults = OperatorDefaults(coordinator_url="http://berth-coordinator.berth:9094")
    own = parse_fleet(fleet_body(spec={"coordinator": {"url": "https://coord.example:9443"}}))
    plain = parse_fleet(fleet_body())

    assert resolve_coordinator_url(own, defaults) == "https://coord.example:9443"
    assert resolve_coordinator_url(plain, defaults) == "http://berth-coordinator.berth:9094"


def test_no_coordinator_url_anywhere_is_a_spec_error(fleet_body: FleetBody) -> None:
    fleet: Fleet = parse_fleet(fleet_body())
    with pytest.raises(SpecError) as raised:
        resolve_coordinator_url(fleet, OperatorDefaults())
    assert raised.value.field == "spec.coordinator.url"
    assert "--coordinator-url or BERTH_COORDINATOR_URL" in raised.value.problem
