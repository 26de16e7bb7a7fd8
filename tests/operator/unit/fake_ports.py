"""In-memory implementations of the operator's ports, typed against the Protocols (``pass_context`` hands them to
the service as its ports: ``mypy tests/operator/unit/fake_ports.py`` checks them structurally), so the reconcile
service runs with no Kubernetes and no coordinator."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from support.signal_lab import InMemoryRecords

from berth.operator.local.demo_support import InMemoryStatus
from berth.operator.planners.advice import AdviceReading
from berth.operator.planners.coordinator_kind import BERTH, CoordinatorKind
from berth.operator.planners.coordinator_target import BerthTarget
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.manifest_hash import planned_hash, template_hash
from berth.operator.planners.observations import (
    CoordinatorBounds,
    GroupDescription,
    GroupLag,
    GroupMember,
    GroupOwnerRef,
    GroupProtocol,
    PartitionLag,
    PodTimes,
)
from berth.operator.planners.roll_pacing import RollPacer
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.planners.statefulset import PlannedWorkload
from berth.operator.ports import (
    Applied,
    ApplyResult,
    CoordinatorPort,
    GroupOwned,
    GroupRecords,
    WorkloadObservation,
    WorkloadView,
)
from berth.operator.reconcile.context import PassContext, Ports, Settings
from berth.operator.spec.fleet import Fleet, OperatorDefaults


class NamesFleet:
    """A WorkloadPort whose members are names in a set (the local-process fleet, minus the processes)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.replicas: int | None = None
        self.members: set[str] = set()
        self.planned: PlannedWorkload | None = None
        #: The pods' process times, by name, where a test gives them (none: every pod's process counts as replaced).
        self.times: dict[str, PodTimes] = {}

    async def apply(self, planned: PlannedWorkload, *, hold: bool = False) -> ApplyResult:
        first = self.planned is None
        if hold and self.planned is not None:
            held = planned_hash(planned.statefulset) != planned_hash(self.planned.statefulset)
            return ApplyResult(Applied.HELD if held else Applied.UNCHANGED)
        self.planned = planned
        if first:
            await self.scale(planned.replicas)
        return ApplyResult(Applied.CREATED if first else Applied.UNCHANGED)

    async def scale(self, replicas: int) -> None:
        self.replicas = replicas
        self.members = {f"{self.name}-{o}" for o in range(replicas)}

    async def observe(self, *, fresh: bool = False) -> WorkloadView:
        seen = WorkloadObservation(
            replicas=self.replicas,
            settled=True,
            existing=frozenset(self.members),
            ready=len(self.members),
            times=dict(self.times),
        )
        applied = planned_hash(self.planned.statefulset) if self.planned is not None else None
        template = template_hash(self.planned.statefulset) if self.planned is not None else None
        return WorkloadView(seen, applied, len(self.members), template_hash=template)


class InMemoryCoordinator:
    """A CoordinatorPort of any kind; ``protocol`` is what its groups describe as."""

    def __init__(self, kind: CoordinatorKind = BERTH, protocol: GroupProtocol = GroupProtocol.CLASSIC) -> None:
        self._kind = kind
        self.protocol = protocol
        self.group_timeouts: dict[str, tuple[int, int]] = {}  # what set_group_session_timeout set, per group
        self.members: dict[str, set[str]] = {}
        self.expected: dict[str, tuple[str, ...]] = {}
        self.leaves: list[tuple[str, tuple[str, ...]]] = []
        self.owners: dict[str, GroupOwnerRef] = {}
        self.owner_uids: list[str | None] = []  # the owner every write named, in order
        #: Groups -> partitions with a committed offset (consumers stopped, their progress kept): read by group_lag.
        self.committed: dict[str, int] = {}
        #: Groups that do not exist (described as GROUP_ID_NOT_FOUND while they have no member).
        self.absent: set[str] = set()

    @property
    def kind(self) -> CoordinatorKind:
        return self._kind

    @property
    def endpoint(self) -> str:
        return "memory://"

    async def get_config(self) -> CoordinatorBounds:
        return CoordinatorBounds(6_000, 1_800_000)

    async def claim_group(self, group_id: str, owner: GroupOwnerRef, *, adopt: bool) -> None:
        """As Berth's coordinator decides (docs/api.md §7a): another uid's group, or one in use without ``adopt``,
        is refused."""
        recorded = self.owners.get(group_id)
        if recorded is not None and recorded.uid != owner.uid:
            raise GroupOwned(group_id, recorded)
        if recorded is None and (self.members.get(group_id) or self.committed.get(group_id)) and not adopt:
            raise GroupOwned(group_id, None)
        self.owners[group_id] = owner

    async def release_group(self, group_id: str, owner_uid: str) -> None:
        recorded = self.owners.get(group_id)
        if recorded is not None and recorded.uid != owner_uid:
            raise GroupOwned(group_id, recorded)
        self.owners.pop(group_id, None)

    async def put_expected_members(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> None:
        self.owner_uids.append(owner_uid)
        self.expected[group_id] = tuple(instance_ids)

    async def delete_expected_members(self, group_id: str, *, owner_uid: str | None = None) -> None:
        self.owner_uids.append(owner_uid)
        self.expected.pop(group_id, None)

    async def leave_instances(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> Mapping[str, str]:
        self.owner_uids.append(owner_uid)
        self.leaves.append((group_id, tuple(instance_ids)))
        group = self.members.setdefault(group_id, set())
        results = {i: "NONE" if i in group else "UNKNOWN_MEMBER_ID" for i in instance_ids}
        group.difference_update(instance_ids)
        return results

    async def describe(self, group_id: str) -> GroupDescription:
        members = tuple(GroupMember(f"{i}-id", i) for i in sorted(self.members.get(group_id, ())))
        if group_id in self.absent and not members:
            return GroupDescription(group_id, "Dead", -1, None, (), exists=False)  # Kafka's GROUP_ID_NOT_FOUND
        return GroupDescription(
            group_id, "Stable" if members else "Empty", 1, None, members, self.owners.get(group_id), self.protocol
        )

    async def delete_group(self, group_id: str, *, owner_uid: str | None = None) -> str:
        self.owner_uids.append(owner_uid)
        if self.members.get(group_id):
            return "NON_EMPTY_GROUP"
        known = self.members.pop(group_id, None) is not None
        return "NONE" if self.committed.pop(group_id, None) is not None or known else "GROUP_ID_NOT_FOUND"

    async def set_group_session_timeout(
        self, group_id: str, session_timeout_ms: int, heartbeat_interval_ms: int
    ) -> None:
        self.group_timeouts[group_id] = (session_timeout_ms, heartbeat_interval_ms)

    async def group_lag(self, group_id: str, description: GroupDescription) -> GroupLag | None:
        if group_id not in self.committed:
            return None
        return GroupLag(tuple(PartitionLag("orders", p, 5, 5) for p in range(self.committed[group_id])))

    async def committed_partitions(self, group_id: str, topics: Collection[str] | None, limit: int) -> tuple[str, ...]:
        committed = [f"orders:{p}" for p in range(self.committed.get(group_id, 0))]
        return tuple(committed if topics is None or "orders" in topics else ())[:limit]


class Fleets:
    """A FleetReader over bodies by (namespace, name)."""

    def __init__(self, *bodies: Mapping[str, Any]) -> None:
        self.bodies = {(b["metadata"]["namespace"], b["metadata"]["name"]): dict(b) for b in bodies}

    async def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.bodies.get((namespace, name))


class OneCoordinator:
    """A CoordinatorDirectory that hands out one coordinator whatever the endpoint (and remembers which)."""

    def __init__(self, coordinator: CoordinatorPort) -> None:
        self.coordinator = coordinator
        self.connected: list[BerthTarget | KafkaConnection] = []

    async def connect(self, endpoint: BerthTarget | KafkaConnection) -> CoordinatorPort:
        self.connected.append(endpoint)
        return self.coordinator

    async def bounds_of(self, port: CoordinatorPort) -> CoordinatorBounds:
        return await port.get_config()


class RecordedEvents:
    """Every Event said, as it is said (each pass's flush counted)."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str, str]] = []  # (Normal|Warning, reason, message)
        self.flushes = 0

    def info(self, reason: str, message: str) -> None:
        self.said.append(("Normal", reason, message))

    def warning(self, reason: str, message: str) -> None:
        self.said.append(("Warning", reason, message))

    def flush(self) -> None:
        self.flushes += 1

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.said]


class NoAdvice:
    async def current(self) -> AdviceReading:
        return AdviceReading(None)


class Secrets:
    def __init__(self, secrets: Mapping[tuple[str, str], Mapping[str, str]] | None = None) -> None:
        self.secrets = dict(secrets or {})
        self.read_names: list[str] = []

    async def read(self, namespace: str, name: str) -> Mapping[str, str] | None:
        self.read_names.append(name)
        return self.secrets.get((namespace, name))


def pass_context(
    *,
    workload: NamesFleet,
    coordinator: CoordinatorPort,
    status: InMemoryStatus,
    events: RecordedEvents,
    defaults: OperatorDefaults,
    now: datetime,
    secrets: Secrets | None = None,
    records: GroupRecords | None = None,
    rolls: RollPacer | None = None,
) -> PassContext:
    def workload_for(fleet: Fleet) -> NamesFleet:
        return workload

    def status_for(body: Mapping[str, Any]) -> InMemoryStatus:
        return status

    def events_for(body: Mapping[str, Any]) -> RecordedEvents:
        return events

    ports = Ports(
        status_for=status_for,
        workload_for=workload_for,
        events_for=events_for,
        coordinators=OneCoordinator(coordinator),
        advice=NoAdvice(),
        now=lambda: now,
        secrets=secrets,
        records=InMemoryRecords() if records is None else records,
        rolls=rolls,
    )
    return PassContext(ports, Settings(defaults, OperatorSessionBounds(1_000, 3_600_000)))
