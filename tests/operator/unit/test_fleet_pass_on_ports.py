"""The reconcile service runs on its ports alone: the real ``FleetPass`` over in-memory ports (``fake_ports``), no
Kubernetes, no coordinator. What differs between coordinators comes from the port's kind, never from the adapter:
Berth's kind claims, pre-registers, names the owner on every write and is followed through its journal; a Kafka
kind does none of that; a group of a protocol the operator does not manage is refused before anything is created,
and its deletion sends nothing. A failed platform call is the ports' ``ApiCallFailed``, reported and retried.
Restarts are counted from Berth's journal or from the Kafka evidence alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest
from fake_ports import InMemoryCoordinator, NamesFleet, RecordedEvents, Secrets, pass_context
from support.signal_lab import InMemoryRecords

from berth.operator.local.demo_support import InMemoryStatus
from berth.operator.planners.claims import ClaimKey, GroupClaim, ListedClaims
from berth.operator.planners.coordinator_kind import BERTH, KAFKA_CLASSIC
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.manifest_hash import planned_hash
from berth.operator.planners.observations import GroupDescription, GroupMember, GroupOwnerRef, GroupProtocol
from berth.operator.planners.restarts import GroupActivity
from berth.operator.ports import ApiCallFailed, WorkloadObservation, WorkloadView
from berth.operator.reconcile.context import PassResult, RetryLater
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.memory import FleetMemory
from berth.operator.spec.fleet import KafkaDefaults, OperatorDefaults

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
        self.claims = ListedClaims(claims)
        self.memory = FleetMemory()
        self.foreign: set[str] = set()

    def fresh(self) -> dict[str, Any]:
        return {**self.body, "status": dict(self.status.status)}

    async def run(self) -> PassResult:
        result = await FleetPass(self.context, self.fresh(), self.claims, self.memory).run()
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
        return await FleetPass(self.context, self.fresh(), self.claims, self.memory).finalize()

    def with_ports(self, **changes: Any) -> None:
        """The same stage with some of its ports changed (``Ports`` fields)."""
        self.context = dataclasses.replace(self.context, ports=dataclasses.replace(self.context.ports, **changes))

    def with_settings(self, **changes: Any) -> None:
        self.context = dataclasses.replace(self.context, settings=dataclasses.replace(self.context.settings, **changes))

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
    assert isinstance(stage.context.ports.coordinators.connected[0], KafkaConnection)  # type: ignore[attr-defined]


async def test_a_group_of_an_unmanaged_protocol_is_refused_before_anything_is_created_and_released_untouched(
    fleet_body: FleetBody, now: datetime
) -> None:
    coordinator = InMemoryCoordinator(KAFKA_CLASSIC, protocol=GroupProtocol.STREAMS)
    stage = Stage(fleet_body(spec=KAFKA_SPEC), coordinator, KAFKA_DEFAULTS, now)

    result = await stage.run()

    assert result.refused
    assert stage.workload.planned is None  # nothing applied
    spec_valid = stage.condition("SpecValid")
    assert (spec_valid["status"], spec_valid["reason"]) == ("False", "StreamsProtocolGroup")
    assert "no admin removal" in spec_valid["message"] and "kafka://kafka-0.kafka.data:9092" in spec_valid["message"]
    assert stage.events.said[-1][:2] == ("Warning", "StreamsProtocolGroup")

    stage.workload.replicas = 0  # as if a StatefulSet had been created before the group changed protocol
    assert await stage.finalize() is None
    assert stage.events.said[-1][0:2] == ("Warning", "StreamsProtocolGroup")
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
        "Secret shop/orders-kafka has no key password (its credentials)",
    )

    secrets.secrets[("shop", "orders-kafka")] = {"username": "orders", "password": "s3cret"}
    await stage.run()
    (connection,) = stage.context.ports.coordinators.connected  # type: ignore[attr-defined]
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


async def test_restarts_the_journal_told_of_are_counted_at_the_next_pass_and_kept_when_status_cannot_be_written(
    fleet_body: FleetBody, now: datetime
) -> None:
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    await stage.converge(3)
    assert stage.status.status["restarts"]["static"] == 0
    # What the journal follower read: two of this fleet's pods back as themselves.
    # (what the reconciler keeps for the group the fleet follows)
    stage.memory.activity = GroupActivity(static=("orders-0", "orders-2"))

    writes = stage.status.patch_status

    async def refuse_restarts(patch: Mapping[str, Any]) -> Mapping[str, Any]:
        if "restarts" in patch:
            raise ApiCallFailed("HTTP 500: etcdserver: request timed out")
        return await writes(patch)

    stage.status.patch_status = refuse_restarts  # type: ignore[method-assign]
    with pytest.raises(RetryLater):
        await stage.run()
    stage.status.patch_status = writes  # type: ignore[method-assign]
    await stage.run()
    assert stage.status.status["restarts"]["static"] == 2  # counted once, by the pass that could write it
    assert "Restarted" not in stage.events.reasons()  # the burst ends a session timeout later
    stage.with_ports(now=lambda: now + timedelta(minutes=5))
    await stage.run()
    assert stage.events.said[-1] == ("Normal", "Restarted", "2 pods restarted statically, 0 rebalances")


class RestartingKafka(InMemoryCoordinator):
    """A Kafka coordinator whose members come back under new member ids when restarted."""

    def __init__(self) -> None:
        super().__init__(KAFKA_CLASSIC)
        self.incarnation: dict[str, int] = {}

    async def describe(self, group_id: str) -> GroupDescription:
        described = await super().describe(group_id)
        members = tuple(
            GroupMember(f"{m.member_id}-{self.incarnation.get(m.group_instance_id or '', 0)}", m.group_instance_id)
            for m in described.members
        )
        return dataclasses.replace(described, members=members)


async def test_on_kafka_a_static_restart_seen_between_two_describes_is_counted(
    fleet_body: FleetBody, now: datetime
) -> None:
    coordinator = RestartingKafka()
    stage = Stage(fleet_body(spec=KAFKA_SPEC), coordinator, KAFKA_DEFAULTS, now)
    await stage.converge(3)
    await stage.run()  # the pods' members seen once
    coordinator.incarnation["orders-1"] = 1  # back under a new member id, no rebalance
    await stage.run()
    assert stage.status.status["restarts"]["static"] == 1
    stage.with_ports(now=lambda: now + timedelta(minutes=5))
    await stage.run()
    assert stage.events.said[-1] == ("Normal", "Restarted", "1 pod restarted statically, 0 rebalances")


async def test_a_paused_fleet_gets_its_condition_and_nothing_else_until_the_annotation_goes(
    fleet_body: FleetBody, now: datetime
) -> None:
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    await stage.converge(3)
    leaves, writes = list(stage.coordinator.leaves), list(stage.coordinator.owner_uids)
    for value in ("true", "True"):
        stage.body["metadata"]["annotations"] = {"berth.dev/paused": value}
        stage.body["spec"]["replicas"] = 1
        assert await stage.run() == PassResult()
        assert stage.workload.replicas == 3  # not scaled
        assert (stage.coordinator.leaves, stage.coordinator.owner_uids) == (leaves, writes)  # nothing sent
    assert (stage.condition("Paused")["status"], stage.condition("Ready")["reason"]) == ("True", "Paused")
    assert [said for said in stage.events.said if said[1] == "Paused"] == [
        ("Normal", "Paused", stage.condition("Paused")["message"])
    ]  # once, on the transition

    stage.body["metadata"]["annotations"] = {"berth.dev/paused": "false"}  # anything else is not paused
    await stage.converge(1)
    assert stage.coordinator.leaves[-1] == ("orders", ("orders-1", "orders-2"))
    assert stage.condition("Paused")["status"] == "False" and "Resumed" in stage.events.reasons()


async def test_a_consumer_protocol_group_gets_its_session_timeout_as_a_group_config_and_its_pods_none(
    fleet_body: FleetBody, now: datetime
) -> None:
    spec = {"coordinator": {"kafka": {"groupProtocol": "consumer"}}}
    coordinator = InMemoryCoordinator(KAFKA_CLASSIC, protocol=GroupProtocol.CONSUMER)
    stage = Stage(fleet_body(spec=spec), coordinator, KAFKA_DEFAULTS, now)

    await stage.converge(5)
    await stage.converge(3)

    # (30 s grace + 10 s scheduling) x 1.5 = 60 s, within Kafka's default bounds (45-60 s); the heartbeat within
    # the broker's 5-15 s and below the session.
    assert coordinator.group_timeouts == {"orders": (60_000, 5_000)}
    assert stage.status.status["sessionTimeoutMs"] == 60_000
    assert stage.workload.planned is not None
    env = stage.workload.planned.member_env
    assert env["BERTH_KAFKA_GROUP_PROTOCOL"] == "consumer"
    assert "BERTH_SESSION_TIMEOUT_MS" not in env and "BERTH_HEARTBEAT_INTERVAL_MS" not in env
    # Removal by instance id all the same, once.
    assert coordinator.leaves == [("orders", ("orders-3", "orders-4"))]
    assert stage.condition("GroupProtocol")["reason"] == "AsDeclared"
    assert stage.condition("SessionTimeoutSufficient")["status"] == "True"
    assert stage.condition("InstanceIdConflict")["status"] == "False"


async def test_a_pass_that_fails_after_sizing_still_records_the_session_timeout_its_pods_were_given(
    fleet_body: FleetBody, now: datetime
) -> None:
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    await stage.converge(1)
    stage.status.status.pop("sessionTimeoutMs")  # as if written by a version that did not record it

    async def refuse(replicas: int) -> None:
        raise ApiCallFailed("HTTP 500: etcdserver: request timed out")

    stage.body["spec"]["replicas"] = 2
    stage.workload.scale = refuse  # type: ignore[method-assign]  # sized and pre-registered; the scale fails
    with pytest.raises(RetryLater, match="etcdserver"):
        await stage.run()
    applied = stage.workload.planned
    assert applied is not None
    assert stage.status.status["sessionTimeoutMs"] == int(applied.member_env["BERTH_SESSION_TIMEOUT_MS"])


class CachedFleet(NamesFleet):
    """A workload observed through a cache of watched objects, as the operator observes it: a view says it came
    from the cache unless asked ``fresh``, and the cache may not have seen a pod yet (``unseen``: absent from its
    views though it exists). A scaled-down pod stays until :meth:`gone` (it is Terminating meanwhile)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.lingering: set[str] = set()
        self.unseen: set[str] = set()
        self.fresh_looks = 0

    async def scale(self, replicas: int) -> None:
        before = set(self.members)
        await super().scale(replicas)
        self.lingering |= before - self.members

    def gone(self, pod: str) -> None:
        self.lingering.discard(pod)

    async def observe(self, *, fresh: bool = False) -> WorkloadView:
        self.fresh_looks += fresh
        existing = frozenset((self.members | self.lingering) - (set() if fresh else self.unseen))
        seen = WorkloadObservation(replicas=self.replicas, settled=True, existing=existing, ready=len(self.members))
        applied = planned_hash(self.planned.statefulset) if self.planned is not None else None
        return WorkloadView(seen, applied, len(self.members), from_cache=not fresh)


async def test_a_leave_planned_from_the_cache_is_planned_again_from_a_fresh_look_and_waits_for_a_pod_it_missed(
    fleet_body: FleetBody, now: datetime
) -> None:
    """The leave cannot be taken back: a departing pod the cache does not show (not seen yet) must not pass for one
    that is gone while it still runs; the pass looks again through the API and waits, then leaves once it is gone."""
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    workload = stage.workload = CachedFleet("orders")
    stage.with_ports(workload_for=lambda fleet: workload)
    await stage.converge(3)
    stage.body["spec"]["replicas"] = 2
    await stage.run()  # departing recorded, expected members narrowed, the StatefulSet shrunk
    assert workload.replicas == 2 and workload.lingering == {"orders-2"}
    workload.unseen = {"orders-2"}  # still Terminating, and missing from the cache

    for _ in range(3):
        await stage.run()
    assert stage.coordinator.leaves == []  # planned from the cache, confirmed fresh: it still runs
    assert workload.fresh_looks == 3
    assert stage.status.status["departing"] == ["orders-2"]

    workload.gone("orders-2")
    await stage.run()
    assert stage.coordinator.leaves == [("orders", ("orders-2",))]


@pytest.mark.parametrize("kafka", [False, True], ids=["berth", "kafka"])
async def test_a_converged_fleets_passes_write_nothing_and_say_nothing(
    fleet_body: FleetBody, now: datetime, kafka: bool
) -> None:
    """Every status write is a watch event for every client: a pass that finds nothing changed writes no status
    (each piece trimmed to what changes, one write at most) and posts no Event."""
    if kafka:
        stage = Stage(fleet_body(spec=KAFKA_SPEC), InMemoryCoordinator(KAFKA_CLASSIC), KAFKA_DEFAULTS, now)
    else:
        stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    await stage.converge(3)
    await stage.run()  # the group as its members formed it
    writes: list[Mapping[str, Any]] = []
    written = stage.status.patch_status

    async def counted(patch: Mapping[str, Any]) -> Mapping[str, Any]:
        writes.append(patch)
        return await written(patch)

    stage.status.patch_status = counted  # type: ignore[method-assign]
    said = len(stage.events.said)
    for _ in range(3):
        assert (await stage.run()).waiting is None
    assert writes == []
    assert stage.events.said[said:] == []
