"""Fleets on Kafka, in the pure parts: the spec, the trust rule, the pods' environment, the scaling plan's removal
(thread-suffixed ids, never an empty list, no pre-registration) and the evidence the operator records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from berth.operator.command.options import OptionsError, parse_options
from berth.operator.planners.coordinator_kind import KAFKA_CLASSIC
from berth.operator.planners.coordinator_target import (
    BerthTarget,
    KafkaTarget,
    UntrustedEndpoint,
    resolve_target,
)
from berth.operator.planners.endpoints import Endpoint
from berth.operator.planners.evidence import EvidenceState, observe_group, removal_events
from berth.operator.planners.observations import GroupDescription, GroupMember
from berth.operator.planners.scaling import (
    BatchLeave,
    DeleteGroup,
    ScaleWorkload,
    ScalingObservation,
    ScalingStatus,
    plan_scaling,
    record_scale_down,
)
from berth.operator.planners.statefulset import plan_statefulset
from berth.operator.spec.fleet import KafkaDefaults, OperatorDefaults, SecurityProtocol, SpecError, parse_fleet

FleetBody = Callable[..., dict[str, Any]]
KAFKA = OperatorDefaults(
    kafka=KafkaDefaults("kafka-0.kafka.data:9092,kafka-1.kafka.data:9092"),
    kafka_trusted=("analytics-kafka.data:9093",),
)


def kafka_spec(**kafka: Any) -> dict[str, Any]:
    return {"coordinator": {"kafka": kafka}}


# --- the spec and the trust rule --------------------------------------------------------------------------------


def test_an_empty_kafka_block_uses_the_operators_default_connection(fleet_body: FleetBody) -> None:
    target = resolve_target(parse_fleet(fleet_body(spec=kafka_spec())), KAFKA)
    assert isinstance(target, KafkaTarget)
    assert target.bootstrap_servers == "kafka-0.kafka.data:9092,kafka-1.kafka.data:9092"
    assert target.security_protocol is SecurityProtocol.PLAINTEXT
    assert target.identity == "kafka://kafka-0.kafka.data:9092,kafka-1.kafka.data:9092"


def test_a_subset_or_alias_of_a_trusted_cluster_is_that_cluster(fleet_body: FleetBody) -> None:
    spec = kafka_spec(bootstrapServers="KAFKA-1.kafka.data.:9092")
    target = resolve_target(parse_fleet(fleet_body(spec=spec)), KAFKA)
    assert isinstance(target, KafkaTarget)
    assert target.bootstrap_servers == "kafka-1.kafka.data:9092"
    # Claims key on the trusted cluster, so two fleets naming different brokers of it still share one group.
    assert target.identity == "kafka://kafka-0.kafka.data:9092,kafka-1.kafka.data:9092"
    other = resolve_target(
        parse_fleet(fleet_body(spec=kafka_spec(bootstrapServers="analytics-kafka.data:9093"))), KAFKA
    )
    assert isinstance(other, KafkaTarget) and other.identity == "kafka://analytics-kafka.data:9093"


@pytest.mark.parametrize(
    "bootstrap",
    [
        "kafka.other-team:9092",  # another cluster
        "kafka-0.kafka.data:9092,kafka.other-team:9092",  # one trusted broker does not vouch for another
        "kafka-0.kafka.data:9093",  # another port
    ],
)
def test_a_cluster_the_operator_does_not_trust_is_refused(fleet_body: FleetBody, bootstrap: str) -> None:
    with pytest.raises(UntrustedEndpoint, match="not a cluster the operator trusts"):
        resolve_target(parse_fleet(fleet_body(spec=kafka_spec(bootstrapServers=bootstrap))), KAFKA)


def test_an_operator_without_kafka_trusts_no_cluster(fleet_body: FleetBody) -> None:
    fleet = parse_fleet(fleet_body(spec=kafka_spec(bootstrapServers="kafka:9092")))
    with pytest.raises(UntrustedEndpoint, match="trusts no Kafka cluster"):
        resolve_target(fleet, OperatorDefaults())


@pytest.mark.parametrize(
    ("coordinator", "field"),
    [
        ({"url": "http://c:9094", "kafka": {}}, "spec.coordinator.url"),
        ({"tokenSecretRef": {"name": "t", "key": "k"}, "kafka": {}}, "spec.coordinator.tokenSecretRef"),
        ({"kafka": {"securityProtocol": "TLS"}}, "spec.coordinator.kafka.securityProtocol"),
        ({"kafka": {"saslMechanism": "GSSAPI"}}, "spec.coordinator.kafka.saslMechanism"),
    ],
)
def test_invalid_kafka_specs_name_the_field(fleet_body: FleetBody, coordinator: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_fleet(fleet_body(spec={"coordinator": coordinator}))
    assert raised.value.field == field


def test_sasl_needs_the_fleets_own_credentials(fleet_body: FleetBody) -> None:
    spec = kafka_spec(securityProtocol="SASL_SSL", saslMechanism="SCRAM-SHA-512")
    with pytest.raises(SpecError, match="the fleet's own principal") as raised:
        resolve_target(parse_fleet(fleet_body(spec=spec)), KAFKA)
    assert raised.value.field == "spec.coordinator.kafka.credentialsSecretRef"


def test_a_fleet_without_kafka_stays_on_berths_coordinator(fleet_body: FleetBody) -> None:
    target = resolve_target(parse_fleet(fleet_body()), OperatorDefaults(coordinator_url="http://c:9094"))
    assert target == BerthTarget("http://c:9094", Endpoint("http", "c", 9094))


def test_kafka_pods_get_the_bootstrap_list_and_their_principal_through_secret_refs(fleet_body: FleetBody) -> None:
    spec = {
        **kafka_spec(
            securityProtocol="SASL_SSL",
            saslMechanism="SCRAM-SHA-512",
            credentialsSecretRef={"name": "orders-kafka"},
            caSecretRef={"name": "kafka-ca", "key": "ca.crt"},
        ),
        "podManagementPolicy": "Parallel",
    }
    planned = plan_statefulset(
        parse_fleet(fleet_body(spec=spec)), operator_defaults=KAFKA, session_timeout_ms=30000, replicas=0
    )
    assert planned.statefulset["spec"]["podManagementPolicy"] == "Parallel"
    (container,) = planned.statefulset["spec"]["template"]["spec"]["containers"]
    env = {var["name"]: var for var in container["env"]}
    assert env["BERTH_KAFKA_BOOTSTRAP_SERVERS"]["value"] == "kafka-0.kafka.data:9092,kafka-1.kafka.data:9092"
    assert env["BERTH_KAFKA_SECURITY_PROTOCOL"]["value"] == "SASL_SSL"
    assert env["BERTH_KAFKA_SASL_MECHANISM"]["value"] == "SCRAM-SHA-512"
    assert env["BERTH_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "orders-kafka", "key": "password"}
    assert env["BERTH_KAFKA_SSL_CA_PEM"]["valueFrom"]["secretKeyRef"] == {"name": "kafka-ca", "key": "ca.crt"}
    assert "BERTH_COORDINATOR_URL" not in env
    assert all("value" not in env[name] for name in ("BERTH_KAFKA_SASL_USERNAME", "BERTH_KAFKA_SASL_PASSWORD"))


def test_the_operators_kafka_flags(tmp_path: Any) -> None:
    options = parse_options(
        [
            "--kafka-bootstrap-servers",
            "Kafka.data.svc.cluster.local:9092",
            "--kafka-security-protocol",
            "SASL_SSL",
            "--kafka-sasl-mechanism",
            "PLAIN",
            "--kafka-trusted-bootstrap",
            "b:9092,a:9092",
        ],
        {},
        service_account_namespace_file=tmp_path / "none",
    )
    assert options.kafka == KafkaDefaults("kafka.data:9092", SecurityProtocol.SASL_SSL, "PLAIN")
    assert options.kafka_trusted == ("a:9092,b:9092",)
    with pytest.raises(OptionsError, match="--kafka-bootstrap-servers"):
        parse_options(["--kafka-bootstrap-servers", "user@k:9092"], {}, service_account_namespace_file=tmp_path / "x")


# --- the scaling plan on Kafka --------------------------------------------------------------------------------


def kafka_observation(**overrides: Any) -> ScalingObservation:
    values: dict[str, Any] = {
        "fleet_name": "orders",
        "desired_replicas": 3,
        "workload_replicas": 3,
        "existing_pods": frozenset({"orders-0", "orders-1", "orders-2"}),
        "status": ScalingStatus(departing=("orders-3", "orders-4"), departing_since="2026-03-01T11:59:50Z"),
        "kind": KAFKA_CLASSIC,
        **overrides,
    }
    return ScalingObservation(**values)


def test_the_removal_names_each_departed_pods_threads_and_nobody_elses(now: datetime) -> None:
    # orders-1-2 is thread 2 of pod orders-1 (staying), not pod 12.
    members = frozenset({"orders-0-1", "orders-1-2", "orders-3-1", "orders-3-2", "orders-4"})
    plan = plan_scaling(kafka_observation(group_members=members), now=now)
    (leave,) = [action for action in plan.actions if isinstance(action, BatchLeave)]
    assert leave.instance_ids == ("orders-3", "orders-4")
    assert leave.member_ids == ("orders-3", "orders-4", "orders-3-1", "orders-3-2")
    results = {"orders-3": "UNKNOWN_MEMBER_ID", "orders-4": "NONE", "orders-3-1": "NONE", "orders-3-2": "NONE"}
    record = record_scale_down(leave, results, now=now + timedelta(seconds=1))
    assert record.patch["lastScaleDown"]["removed"] == ["orders-3", "orders-4"]
    assert record.patch["departing"] == []


def test_a_pod_whose_thread_was_not_removed_stays_departing(now: datetime) -> None:
    leave = BatchLeave(("orders-3",), None, thread_member_ids=("orders-3-1", "orders-3-2"))
    record = record_scale_down(leave, {"orders-3": "NONE", "orders-3-1": "NONE"}, now=now)
    assert record.patch["departing"] == ["orders-3"]


def test_a_thread_suffixed_member_of_a_pod_the_fleet_never_had_is_foreign_and_never_removed(now: datetime) -> None:
    plan = plan_scaling(
        kafka_observation(status=ScalingStatus(), group_members=frozenset({"orders-0-1", "orders-5-1"})), now=now
    )
    assert plan.actions == ()
    assert plan.foreign_members == ("orders-5-1",)


def test_kafka_gets_no_expected_members_and_scale_up_just_scales(now: datetime) -> None:
    plan = plan_scaling(
        kafka_observation(desired_replicas=5, status=ScalingStatus(), existing_pods=frozenset()), now=now
    )
    assert plan.actions == (ScaleWorkload(5),)


def test_deleting_a_kafka_fleet_leaves_everyone_and_keeps_the_group_unless_asked(now: datetime) -> None:
    observation = kafka_observation(
        workload_replicas=0,
        existing_pods=frozenset(),
        deleting=True,
        delete_group=False,
        status=ScalingStatus(departing=("orders-0", "orders-1")),  # recorded while the pods were the fleet's
        group_members=frozenset({"orders-0", "orders-1"}),
    )
    plan = plan_scaling(observation, now=now)
    assert plan.done
    assert [type(action).__name__ for action in plan.actions] == ["PatchStatus", "BatchLeave"]
    assert plan_scaling(replace(observation, delete_group=True), now=now).actions[-1] == DeleteGroup()


def test_a_deletion_never_removes_nor_deletes_what_the_fleet_did_not_create(now: datetime) -> None:
    # Another team's consumer (named like a pod of this fleet) and a dynamic member share the group.
    observation = kafka_observation(
        workload_replicas=0,
        existing_pods=frozenset(),
        deleting=True,
        delete_group=True,
        status=ScalingStatus(departing=("orders-0",)),
        group_members=frozenset({"orders-0", "orders-7"}),
        dynamic_members=("consumer-1-abc",),
    )
    plan = plan_scaling(observation, now=now)
    (leave,) = [action for action in plan.actions if isinstance(action, BatchLeave)]
    assert leave.member_ids == ("orders-0",) and not leave.everyone
    assert not any(isinstance(action, DeleteGroup) for action in plan.actions) and plan.done
    assert plan.foreign_members == ("orders-7", "consumer-1-abc")


# --- evidence -----------------------------------------------------------------------------------------------


def described(state: str, **members: str) -> GroupDescription:
    return GroupDescription("orders", state, -1, None, tuple(GroupMember(mid, iid) for iid, mid in members.items()))


def test_evidence_records_a_restart_an_expiry_a_rebalance_and_the_operators_removal() -> None:
    first, events = observe_group(
        EvidenceState(), described("Stable", **{"o-0": "a", "o-1": "b"}), now_ms=1_000, key="orders"
    )
    assert events == []  # the first look is the baseline
    state, events = observe_group(first, described("Stable", **{"o-0": "a2", "o-1": "b"}), now_ms=4_000, key="orders")
    (replaced,) = events
    assert (replaced["type"], replaced["group_instance_id"], replaced["offline_ms"]) == (
        "static_member_replaced",
        "o-0",
        3_000,
    )
    assert (replaced["member_id"], replaced["old_member_id"], replaced["rebalance"]) == ("a2", "a", False)
    state, events = observe_group(state, described("PreparingRebalance", **{"o-0": "a2"}), now_ms=9_000, key="orders")
    assert [(e["type"], e.get("cause")) for e in events] == [
        ("member_expired", None),
        ("rebalance_started", "member_expired"),
    ]
    state, events = removal_events(
        state, "orders", {"o-0": "NONE", "o-9": "UNKNOWN_MEMBER_ID"}, everyone=True, now_ms=9_500
    )
    assert [(e["type"], e.get("group_instance_id"), e.get("via")) for e in events] == [
        ("member_left", "o-0", "admin"),
        ("group_emptied", None, None),
    ]
    assert all(e["generation_id"] == -1 and e["group_id"] == "orders" for e in events)
