"""A StatefulSet, its pods and their kubelet, played on the signal lab's clock, behind the operator's ``WorkloadPort``.

The signal lab (``signal_lab``) runs the operator's real pass against a real coordinator or broker; what stands in
for Kubernetes is this: a StatefulSet controller (OrderedReady or Parallel, rolling one pod at a time, highest
ordinal first), a kubelet (a pod's process starts a moment after the pod is created, is Ready a moment later, stops
at once when the pod is deleted — a static member sends no leave — and the pod object goes once its grace period is
over; a crashed container restarts in place after its outage), a PodDisruptionBudget of maxUnavailable 1 for
evictions, and the pods' times as the operator reads them. Each pod's process is a member of the group, played by
the lab's ``Members`` (started with the pod's environment as the operator planned it, stopped with the process).

Time is the lab's (``now_ms``, the coordinator's manual clock or the wall clock); nothing here sleeps. What happened
is logged (:attr:`SimFleet.log`) for the oracle: which process of which pod started and stopped, and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from berth.operator.planners.manifest_hash import planned_hash
from berth.operator.planners.observations import PodTimes
from berth.operator.planners.statefulset import PlannedWorkload
from berth.operator.ports import Applied, ApplyResult, WorkloadObservation, WorkloadView

#: How long after its pod is created a process starts, and after that it is Ready (the lab's ms).
START_MS = 300
READY_MS = 300
#: How long a deleted pod stays Terminating (its process stopped at once).
GRACE_MS = 1_000


class Members(Protocol):
    """The processes' group membership: a member starts with its process and stops (silently) with it."""

    def start(self, instance_id: str, env: Mapping[str, str]) -> None: ...

    def stop(self, instance_id: str) -> None: ...


@dataclass
class Pod:
    name: str
    ordinal: int
    revision: str
    created_ms: int
    started_ms: int | None = None  # the current process's start; None: not started yet (or down)
    ready: bool = False
    deleted_ms: int | None = None  # deletionTimestamp: the process stopped then
    previous_ended_ms: int | None = None  # a restart in place: when the previous process ended
    down_until_ms: int | None = None  # a crashed container: back at this time

    @property
    def running(self) -> bool:
        return self.started_ms is not None and self.deleted_ms is None and self.down_until_ms is None


@dataclass(frozen=True, slots=True)
class Happened:
    at_ms: int
    what: str  # "started", "stopped"
    pod: str
    why: str  # "created", "deleted", "evicted", "crashed", "rolled", "scaled down", "restarted"


@dataclass
class SimFleet:
    """The workload port of one fleet in the lab; :meth:`tick` moves its controller and kubelet to ``now_ms``."""

    name: str
    members: Members
    ordered_ready: bool = True
    now_ms: int = 0
    replicas: int | None = None  # the StatefulSet's spec.replicas; None: not created
    settled: bool = True
    revision: str = "r1"
    pods: dict[str, Pod] = field(default_factory=dict)
    planned: PlannedWorkload | None = None
    log: list[Happened] = field(default_factory=list)

    # --------------------------------------------------------------------------------------- WorkloadPort

    async def apply(self, planned: PlannedWorkload, *, hold: bool = False) -> ApplyResult:
        first = self.planned is None
        changed = not first and planned_hash(planned.statefulset) != planned_hash(self.planned.statefulset)
        self.planned = planned
        if first:
            self.replicas = planned.replicas
            self.settled = False
            return ApplyResult(Applied.CREATED, Applied.CREATED)
        if changed:  # a new pod template: a rollout
            self.revision = f"r{int(self.revision[1:]) + 1}"
            return ApplyResult(Applied.UPDATED)
        return ApplyResult(Applied.UNCHANGED)

    async def scale(self, replicas: int) -> None:
        if replicas != self.replicas:
            self.replicas = replicas
            self.settled = False

    async def observe(self, *, fresh: bool = False) -> WorkloadView:
        pods = list(self.pods.values())
        observation = WorkloadObservation(
            replicas=self.replicas,
            settled=self.settled,
            existing=frozenset(p.name for p in pods),
            ready=sum(1 for p in pods if p.ready and p.deleted_ms is None),
            terminating={p.name: _time(p.deleted_ms + GRACE_MS) for p in pods if p.deleted_ms is not None},
            unready=frozenset(p.name for p in pods if p.deleted_ms is None and not p.ready),
            times={
                p.name: PodTimes(
                    _time(p.created_ms),
                    _time(p.started_ms),
                    None if p.previous_ended_ms is None else _time(p.previous_ended_ms),
                )
                for p in pods
                if p.started_ms is not None and p.deleted_ms is None
            },
        )
        started = [p.started_ms for p in pods if p.started_ms is not None and p.deleted_ms is None]
        return WorkloadView(
            observation,
            None if self.planned is None else planned_hash(self.planned.statefulset),
            sum(1 for p in pods if p.deleted_ms is None),
            revision=self.revision,
            rolling=self.rolling,
            last_started=_time(max(started)) if started else None,
        )

    @property
    def rolling(self) -> bool:
        return any(p.revision != self.revision for p in self.pods.values() if p.deleted_ms is None)

    # --------------------------------------------------------------------------------------- what happens

    def roll(self) -> None:
        """``kubectl rollout restart``: a new revision; the controller replaces the pods one by one."""
        self.revision = f"r{int(self.revision[1:]) + 1}"

    def delete(self, pod: str, why: str = "deleted") -> bool:
        found = self.pods.get(pod)
        if found is None or found.deleted_ms is not None:
            return False
        self._stop(found, why)
        found.deleted_ms = self.now_ms
        found.ready = False
        return True

    def evict(self, pod: str) -> bool:
        """A drain's eviction: refused while the budget (maxUnavailable 1) has no room."""
        unavailable = [p for p in self.pods.values() if p.deleted_ms is not None or not p.ready]
        if self.replicas is None or unavailable or pod not in self.pods:
            return False
        return self.delete(pod, "evicted")

    def crash(self, pod: str, outage_ms: int) -> bool:
        """The container dies and the kubelet restarts it in place after ``outage_ms``."""
        found = self.pods.get(pod)
        if found is None or not found.running:
            return False
        self._stop(found, "crashed")
        found.previous_ended_ms = self.now_ms
        found.started_ms = None
        found.ready = False
        found.down_until_ms = self.now_ms + outage_ms
        return True

    def tick(self, now_ms: int) -> None:
        """The controller and the kubelet, caught up to ``now_ms``."""
        self.now_ms = now_ms
        self._kubelet()
        if self.replicas is not None:
            self._controller()
            self._kubelet()

    def _controller(self) -> None:
        """The StatefulSet controller's pass: pods below the size first, in ordinal order (OrderedReady: stop at the
        first that is missing, Terminating or not Ready, creating it when missing), then the pods at or beyond the
        size, highest first (OrderedReady: one at a time), then the rollout: the highest-ordinal pod of an older
        revision, once every pod is Ready."""
        assert self.replicas is not None
        self.settled = True
        by_ordinal = {p.ordinal: p for p in self.pods.values()}
        blocked = False
        for ordinal in range(self.replicas):
            pod = by_ordinal.get(ordinal)
            if pod is None:
                name = f"{self.name}-{ordinal}"
                self.pods[name] = Pod(name, ordinal, self.revision, self.now_ms)
                blocked = True
            elif pod.deleted_ms is not None or not pod.ready:
                blocked = True
            if blocked and self.ordered_ready:
                return
        for pod in sorted((p for p in self.pods.values() if p.ordinal >= self.replicas), key=lambda p: -p.ordinal):
            if pod.deleted_ms is None:
                self.delete(pod.name, "scaled down")
            if self.ordered_ready:
                return
        if blocked:
            return
        old = sorted((p for p in self.pods.values() if p.revision != self.revision), key=lambda p: -p.ordinal)
        if old:
            self.delete(old[0].name, "rolled")

    def _kubelet(self) -> None:
        for pod in list(self.pods.values()):
            if pod.deleted_ms is not None:
                if self.now_ms >= pod.deleted_ms + GRACE_MS:
                    del self.pods[pod.name]
                continue
            if pod.down_until_ms is not None and self.now_ms >= pod.down_until_ms:
                pod.down_until_ms = None
                self._start(pod, "restarted")
            elif pod.started_ms is None and pod.down_until_ms is None and self.now_ms >= pod.created_ms + START_MS:
                self._start(pod, "created")
            started_ms = pod.started_ms
            if pod.running and not pod.ready and started_ms is not None and self.now_ms >= started_ms + READY_MS:
                pod.ready = True

    def _start(self, pod: Pod, why: str) -> None:
        pod.started_ms = self.now_ms
        assert self.planned is not None
        self.members.start(pod.name, self.planned.environment_for(pod.name))
        self.log.append(Happened(self.now_ms, "started", pod.name, why))

    def _stop(self, pod: Pod, why: str) -> None:
        if pod.running:
            self.members.stop(pod.name)
            self.log.append(Happened(self.now_ms, "stopped", pod.name, why))


def _time(ms: int | None) -> datetime:
    assert ms is not None
    return datetime.fromtimestamp(ms / 1000, UTC)
