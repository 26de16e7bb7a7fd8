"""The operator's two ports: the workload a fleet runs on, and the coordinator its group lives in.

Handlers and the driver that executes the scaling planner's actions see only these Protocols. Implementations:
the Kubernetes StatefulSet adapter and the local-process fleet (``berth-demo``: N member processes named
``<fleet>-0..N-1`` on one machine) for :class:`WorkloadPort`; a ``berth.coordinator.client``-based adapter for
:class:`CoordinatorPort` (the operator talks to the coordinator through the client only). Rules:

- Methods are async and idempotent: the driver may repeat any call after a crash or a retry.
- A :class:`WorkloadPort` instance serves one fleet; :class:`CoordinatorPort` takes the group id per call.
- Protocol outcomes the planners need are returned as Kafka error names (``"NONE"``, ``"UNKNOWN_MEMBER_ID"``...);
  a coordinator that could not be asked at all raises :class:`CoordinatorUnavailable`.

How the driver maps the scaling planner's actions (``planners.scaling``) onto the ports:

==========================  =====================================================================================
``PatchStatus(patch)``      merge into ``.status`` through the API right away (not Kopf's deferred ``patch``):
                            departing ids must be durable before the StatefulSet shrinks
``PutExpectedMembers(ids)`` ``coordinator.put_expected_members(group, ids)``
``ClearExpectedMembers()``  ``coordinator.delete_expected_members(group)``
``ScaleWorkload(n)``        ``workload.scale(n)``
``BatchLeave(ids, since)``  ``results = coordinator.leave_instances(group, ids)``, then write
                            ``record_scale_down(action, results, now=...)``'s patch
``DeleteGroup()``           ``coordinator.delete_group(group)``: NONE or GROUP_ID_NOT_FOUND is done,
                            NON_EMPTY_GROUP is a failure to retry
==========================  =====================================================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from berth.operator.planners.observations import CoordinatorBounds, GroupDescription
from berth.operator.planners.statefulset import PlannedWorkload


class CoordinatorUnavailable(Exception):
    """The coordinator could not be asked (connection refused, timeout, HTTP 5xx, 401/403)."""


@dataclass(frozen=True, slots=True)
class WorkloadObservation:
    """One consistent look at a fleet's workload."""

    replicas: int | None  # the size the workload is set to (StatefulSet spec.replicas); None: not created yet
    #: Its controller has acted on ``replicas`` (StatefulSet: status.observedGeneration >= metadata.generation);
    #: a local fleet, which scales synchronously, is always settled.
    settled: bool
    existing: frozenset[str]  # names of the members/pods that exist now, terminating ones included
    ready: int  # how many of them are ready


class WorkloadPort(Protocol):
    """Runs one fleet's members: pods of a StatefulSet, or local processes."""

    async def apply(self, planned: PlannedWorkload) -> None:
        """Create or update the workload as planned (size ``planned.replicas``, env ``planned.environment_for``).

        The Kubernetes adapter applies ``planned.statefulset`` and ``planned.service``; a local fleet uses the
        environment and ignores the manifests.
        """
        ...

    async def scale(self, replicas: int) -> None:
        """Set the workload's size; members beyond it stop highest ordinal first, new ones get the next ordinals."""
        ...

    async def observe(self) -> WorkloadObservation:
        """The workload's size, the members that exist and how many are ready, read together."""
        ...


class CoordinatorPort(Protocol):
    """The coordinator's admin surface the operator uses (docs/api.md §4, §7 and ``GET /v1/config``)."""

    async def get_config(self) -> CoordinatorBounds:
        """The session-timeout bounds from ``GET /v1/config``."""
        ...

    async def put_expected_members(self, group_id: str, instance_ids: Sequence[str]) -> None:
        """Pre-register the group's static members (docs/api.md §7); creates the group when it does not exist."""
        ...

    async def delete_expected_members(self, group_id: str) -> None:
        """Clear the pre-registration (plain Kafka behaviour again)."""
        ...

    async def leave_instances(self, group_id: str, instance_ids: Sequence[str]) -> Mapping[str, str]:
        """One LeaveGroup v3+ batch by instance id with empty member ids (the admin path).

        Returns each instance id's error name: ``"NONE"`` when it was removed, ``"UNKNOWN_MEMBER_ID"`` when it
        was not a member. A group-level error (or no answer) raises instead, so nothing is recorded as left.
        """
        ...

    async def describe(self, group_id: str) -> GroupDescription:
        """DescribeGroups; an unknown group is state ``"Dead"``, generation -1."""
        ...

    async def delete_group(self, group_id: str) -> str:
        """DeleteGroups: ``"NONE"``, ``"GROUP_ID_NOT_FOUND"`` or ``"NON_EMPTY_GROUP"``."""
        ...
