"""The reconcile service runs on its ports alone: the real ``FleetPass`` over in-memory ports (``fake_ports``), no
Kubernetes, no coordinator. What differs between coordinators comes from the port's kind, never from the adapter:
Berth's kind claims, pre-registers, names the owner on every write and is followed through its journal; a Kafka
kind does none of that; a group of a protocol the operator does not manage is refused before anything is created,
and its deletion sends nothing. A failed platform call is the ports' ``ApiCallFailed``, reported and retried."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import pytest
from fake_ports import InMemoryCoordinator, InMemoryRecords, NamesFleet, RecordedEvents, Secrets, pass_context

from berth.operator.local.demo_support import InMemoryStatus
from berth.operator.planners.claims import ClaimKey, GroupClaim
from berth.operator.planners.coordinator_kind import BERTH, KAFKA_CLASSIC
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import GroupOwnerRef, GroupProtocol
from berth.operator.ports import ApiCallFailed
from berth.operator.reconcile.context import PassResult, RetryLater
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.spec import KafkaDefaults, OperatorDefaults

FleetBody = Callable[..., dict[str, Any]]
BERTH_DEFAULTS = OperatorDefaults(coordinator_url="http://berth-coordinator.berth:9094")
KAFKA_DEFAULTS = OperatorDefaults(kafka=KafkaDefaults("kafka-0.kafka.data:9092"))
KAFKA_SPEC = {"coordinator": {"kafka": {}}, "sessionTimeout": {"policy": "Fixed", "fixedMs": 30_000}}
KAFKA_IDENTITY = "kafka://kafka-0.kafka.data:9092"


class Stage:
    """One fleet on in-memory ports: its body (status kept by the status port), workload, coordinator, Events."""

    def __init__(
        self,
        body: dict[str, Any],
        coordinator: InMemoryCoordinator,
        defaults: OperatorDefaults,
        now: datetime,
        secrets: Secrets | None = None,
        *,
        records: InMemoryRecords | None = None,
        claims: Callable[[ClaimKey], Iterable[GroupClaim]] = lambda key: (),
    ) -> None:
        self.body = body
        self.workload = NamesFleet(body["metadata"]["name"])
        self.coordinator = coordinator
        self.status = InMemoryStatus()
        self.events = RecordedEvents()
        self.context = pass_context(
            workload=self.workload,
            coordinator=coordinator,
            status=self.status,
            events=self.events,
            defaults=defaults,
            now=now,
            secrets=secrets,
            records=records,
        )
        self.claims = claims
        self.foreign: set[str] = set()

    def fresh(self) -> dict[str, Any]:
        return {**self.body, "status": dict(self.status.status)}

    async def run(self) -> PassResult:
        result = await FleetPass(self.context, self.fresh(), claims=self.claims).run()
        # The pods (re)join; consumers of others (``foreign``) stay in the group.
        self.coordinator.members[self.group] = set(self.workload.members) | self.foreign
        return result

    async def converge(self, replicas: int) -> PassResult:
        self.body["spec"]["replicas"] = replicas
        for _ in range(10):
            result = await self.run()
            if result.waiting is None:
                return result
        raise AssertionError(f"did not converge: {result.waiting}")

    async def finalize(self) -> str | None:
        return await FleetPass(self.context, self.fresh(), claims=self.claims).finalize()

    @property
    def uid(self) -> str:
        return str(self.body["metadata"]["uid"])

    @property
    def group(self) -> str:
        return str(self.body["spec"].get("groupId") or self.body["metadata"]["name"])

    def condition(self, condition_type: str) -> Mapping[str, Any]:
        return next(c for c in self.status.status["conditions"] if c["type"] == condition_type)


async def test_on_berths_kind_the_pass_claims_pre_registers_names_the_owner_and_follows_the_journal(
    fleet_body: FleetBody, now: datetime
) -> None:
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    uid = stage.body["metadata"]["uid"]

    result = await stage.converge(5)

    assert stage.coordinator.owners["orders"].uid == uid
    assert stage.coordinator.expected["orders"] == tuple(f"orders-{o}" for o in range(5))
    assert set(stage.coordinator.owner_uids) == {uid}
    assert result.follows == ("memory://", "orders")
    assert "PreRegistration" not in {c["type"] for c in stage.status.status["conditions"]}

    await stage.converge(3)
    assert stage.coordinator.leaves == [("orders", ("orders-3", "orders-4"))]


async def test_on_a_kafka_kind_nothing_is_pre_registered_the_operator_records_the_owner_and_one_removal_follows(
    fleet_body: FleetBody, now: datetime
) -> None:
    records = InMemoryRecords()
    stage = Stage(fleet_body(spec=KAFKA_SPEC), InMemoryCoordinator(KAFKA_CLASSIC), KAFKA_DEFAULTS, now, records=records)

    result = await stage.converge(5)
    await stage.converge(3)

    assert stage.coordinator.expected == {} and stage.coordinator.owners == {}
    assert records.records == {(KAFKA_IDENTITY, "orders"): GroupOwnerRef("shop", "orders", stage.uid)}
    assert stage.status.status["ownedGroups"] == [{"coordinator": KAFKA_IDENTITY, "groupId": "orders"}]
    assert stage.coordinator.leaves == [("orders", ("orders-3", "orders-4"))]
    assert set(stage.coordinator.owner_uids) == {None}  # Kafka records no owners: no write names one
    assert result.follows is None  # no journal to follow
    assert stage.condition("PreRegistration")["status"] == "False"
    assert isinstance(stage.context.coordinators.connected[0], KafkaConnection)  # type: ignore[attr-defined]


async def test_a_group_of_an_unmanaged_protocol_is_refused_before_anything_is_created_and_released_untouched(
    fleet_body: FleetBody, now: datetime
) -> None:
    coordinator = InMemoryCoordinator(KAFKA_CLASSIC, protocol=GroupProtocol.CONSUMER)
    stage = Stage(fleet_body(spec=KAFKA_SPEC), coordinator, KAFKA_DEFAULTS, now)

    result = await stage.run()

    assert result.refused
    assert stage.workload.planned is None  # nothing applied
    spec_valid = stage.condition("SpecValid")
    assert (spec_valid["status"], spec_valid["reason"]) == ("False", "ConsumerProtocolGroup")
    assert "KIP-848" in spec_valid["message"] and "kafka://kafka-0.kafka.data:9092" in spec_valid["message"]
    assert stage.events.said[-1][:2] == ("Warning", "ConsumerProtocolGroup")

    stage.workload.replicas = 0  # as if a StatefulSet had been created before the group changed protocol
    assert await stage.finalize() is None
    assert stage.events.said[-1][0:2] == ("Warning", "ConsumerProtocolGroup")
    assert stage.events.said[-1][2].endswith(": releasing the fleet")
    assert coordinator.leaves == [] and coordinator.owner_uids == []  # nothing sent for the group


async def test_a_kafka_fleets_credentials_are_read_by_name_and_a_missing_key_is_named(
    fleet_body: FleetBody, now: datetime
) -> None:
    spec = {
        **KAFKA_SPEC,
        "coordinator": {
            "kafka": {
                "securityProtocol": "SASL_PLAINTEXT",
                "saslMechanism": "SCRAM-SHA-512",
                "credentialsSecretRef": {"name": "orders-kafka"},
            }
        },
    }
    secrets = Secrets({("shop", "orders-kafka"): {"username": "orders"}})
    stage = Stage(fleet_body(spec=spec), InMemoryCoordinator(KAFKA_CLASSIC), KAFKA_DEFAULTS, now, secrets)

    result = await stage.run()

    assert result.refused and secrets.read_names == ["orders-kafka"]
    spec_valid = stage.condition("SpecValid")
    assert (spec_valid["reason"], spec_valid["message"]) == (
        "CredentialsMissing",
        "Secret shop/orders-kafka has no key password",
    )

    secrets.secrets[("shop", "orders-kafka")] = {"username": "orders", "password": "s3cret"}
    await stage.run()
    (connection,) = stage.context.coordinators.connected  # type: ignore[attr-defined]
    assert isinstance(connection, KafkaConnection)
    assert connection.principal == "the credentials in Secret shop/orders-kafka"
    assert "s3cret" not in repr(connection)


async def test_a_failed_platform_call_is_reported_once_as_such_and_retried(
    fleet_body: FleetBody, now: datetime
) -> None:
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)

    async def refuse(patch: Mapping[str, Any]) -> Mapping[str, Any]:
        raise ApiCallFailed("HTTP 500: etcdserver: request timed out")

    stage.status.patch_status = refuse  # type: ignore[method-assign]
    with pytest.raises(RetryLater, match="etcdserver"):
        await stage.run()
    assert stage.events.said[-1] == (
        "Warning",
        "KubernetesApiError",
        "a Kubernetes API call failed: HTTP 500: etcdserver: request timed out",
    )
