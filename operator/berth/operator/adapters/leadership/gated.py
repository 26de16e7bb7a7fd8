"""The coordinator ports behind the leader's gate: a replica that does not hold the Lease asks the coordinators
what it likes and changes nothing there.

Kubernetes writes pass the same gate in the clients themselves (``kube.calls.GatedApiClient``, ``kube.api_session``);
a coordinator's writes go through :class:`GatedCoordinators`, which the composition root puts in front of the
directory of coordinator ports. Rules: every write method (claim, release, expected members, leave, delete, a
group's session timeout) checks the gate before it starts and raises :class:`~berth.operator.ports.NotLeading`
instead; reads (describe, config, lag, the journal) pass. A Berth coordinator's client also checks the gate again
for each attempt, once connected and right before the request is written (:func:`gated_session`: the member
library retries an unavailable coordinator for seconds, and a retry must not go out after the deadline); a Kafka
fleet's calls are checked when they start (kafka-python's connections are its own).

Failpoints (``berth.coordinator.daemon.failpoints``, tests only): ``operator.before_leave`` is hit before a batch
leave is checked and sent, ``operator.after_leave`` once the coordinator answered it (a crash there leaves the
leave done and nothing recorded; ``sleep`` before it freezes the operator's event loop at the step, ``delay`` holds
the step alone while the replica goes on renewing its Lease).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import aiohttp

from berth.coordinator.daemon import failpoints
from berth.operator.adapters.leadership.gated_http import bounded_connector, gated_request_class
from berth.operator.planners.coordinator_kind import CoordinatorKind
from berth.operator.planners.coordinator_target import BerthTarget
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import CoordinatorBounds, GroupDescription, GroupLag, GroupOwnerRef
from berth.operator.ports import CoordinatorDirectory, CoordinatorPort, WriteGate


class GatedCoordinatorPort:
    def __init__(self, port: CoordinatorPort, gate: WriteGate) -> None:
        self.port = port
        self.gate = gate

    @property
    def kind(self) -> CoordinatorKind:
        return self.port.kind

    @property
    def endpoint(self) -> str:
        return self.port.endpoint

    async def claim_group(self, group_id: str, owner: GroupOwnerRef, *, adopt: bool) -> None:
        self.gate.check()
        await self.port.claim_group(group_id, owner, adopt=adopt)

    async def release_group(self, group_id: str, owner_uid: str) -> None:
        self.gate.check()
        await self.port.release_group(group_id, owner_uid)

    async def get_config(self) -> CoordinatorBounds:
        return await self.port.get_config()

    async def put_expected_members(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> None:
        self.gate.check()
        await self.port.put_expected_members(group_id, instance_ids, owner_uid=owner_uid)

    async def delete_expected_members(self, group_id: str, *, owner_uid: str | None = None) -> None:
        self.gate.check()
        await self.port.delete_expected_members(group_id, owner_uid=owner_uid)

    async def leave_instances(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> Mapping[str, str]:
        await failpoints.reached("operator.before_leave")
        self.gate.check()
        left = await self.port.leave_instances(group_id, instance_ids, owner_uid=owner_uid)
        await failpoints.reached("operator.after_leave")
        return left

    async def describe(self, group_id: str) -> GroupDescription:
        return await self.port.describe(group_id)

    async def delete_group(self, group_id: str, *, owner_uid: str | None = None) -> str:
        self.gate.check()
        return await self.port.delete_group(group_id, owner_uid=owner_uid)

    async def set_group_session_timeout(
        self, group_id: str, session_timeout_ms: int, heartbeat_interval_ms: int
    ) -> None:
        self.gate.check()
        await self.port.set_group_session_timeout(group_id, session_timeout_ms, heartbeat_interval_ms)

    async def group_lag(self, group_id: str, description: GroupDescription) -> GroupLag | None:
        return await self.port.group_lag(group_id, description)

    async def committed_partitions(self, group_id: str, topics: Collection[str] | None, limit: int) -> tuple[str, ...]:
        return await self.port.committed_partitions(group_id, topics, limit)


class GatedCoordinators:
    """A :class:`~berth.operator.ports.CoordinatorDirectory` whose ports pass ``gate`` before every write."""

    def __init__(self, directory: CoordinatorDirectory, gate: WriteGate) -> None:
        self.directory = directory
        self.gate = gate

    async def connect(self, endpoint: BerthTarget | KafkaConnection) -> CoordinatorPort:
        return GatedCoordinatorPort(await self.directory.connect(endpoint), self.gate)

    async def bounds_of(self, port: CoordinatorPort) -> CoordinatorBounds:
        inner = port.port if isinstance(port, GatedCoordinatorPort) else port
        return await self.directory.bounds_of(inner)


def gated_session(gate: WriteGate, write_bound_s: float | None) -> Callable[[], aiohttp.ClientSession]:
    """A factory of aiohttp sessions for a coordinator's client: every write checks ``gate`` right before it is
    written, every connection carries ``TCP_USER_TIMEOUT`` (``gated_http``)."""

    def session() -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=bounded_connector(write_bound_s),
            request_class=gated_request_class(gate),
            auto_decompress=False,
        )

    return session
