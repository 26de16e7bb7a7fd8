"""Members that hold a fleet pod's ``group.instance.id`` without being that pod's process, told from what the operator
observes of the group and of the pods: a restarted pod refused UNRELEASED_INSTANCE_ID, and two processes fencing
each other; the ``InstanceIdConflict`` condition, and which stale members a release removes.

- **Unreleased** (kinds whose instance ids are held until the member's session expires: KIP-848's consumer
  protocol): the pod's current process started after the operator first saw the member that holds its instance id
  now, and that member did not leave (its epoch is not -2, a static member's leave): it is the previous process's,
  which died with it (a crash, a kill, a lost node), and the new process is refused UNRELEASED_INSTANCE_ID until
  that member's session expires (PostHog#65809: the pod stays Ready while consuming nothing). A member the operator
  first saw after the pod started is never taken for stale (an operator restarted meanwhile sees nothing wrong).
- **Fencing**: the member id under one instance id changed :data:`FENCING_CHANGES` times within
  :data:`FENCING_WINDOW` while the pod's process did not restart: two processes use the id (a second copy of the
  pod, a second consumer with the same ``group.instance.id``), each fencing the other (FENCED_INSTANCE_ID).
- **Release** (``spec.coordinator.kafka.releaseStaleInstances``): an unreleased instance id is removed with one
  LeaveGroup by instance id, once per stale member (``released``); its pod was replaced, so no live process is
  cut off. Fencing is only reported: which of two live processes should go is not the operator's to decide.
- Pure: a state and an observation in, the next state and the findings out; times are parameters (Kubernetes'
  times are whole seconds, hence the second of slack when comparing them with the operator's clock).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from berth.operator.planners.conditions import Condition
from berth.operator.planners.coordinator_kind import CoordinatorKind
from berth.operator.planners.instances import pod_of_member
from berth.operator.planners.observations import GroupDescription, PodTimes

INSTANCE_ID_CONFLICT = "InstanceIdConflict"
UNRELEASED = "UnreleasedInstanceId"
FENCING = "InstanceIdFencing"
#: KIP-848: the epoch a static member leaves with (it keeps its assignment until it rejoins or expires).
LEAVE_STATIC_EPOCH = -2
FENCING_CHANGES = 3
FENCING_WINDOW = timedelta(minutes=5)
SLACK = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class Holder:
    """The member holding an instance id, since when the operator has seen it there."""

    member_id: str
    since: datetime
    pod_started: datetime | None  # the pod's process start when this member was first seen


@dataclass(frozen=True, slots=True)
class ConflictState:
    holders: Mapping[str, Holder] = field(default_factory=dict)  # instance id -> its member
    changes: Mapping[str, tuple[datetime, ...]] = field(default_factory=dict)  # member-id changes without a restart
    released: frozenset[tuple[str, str]] = frozenset()  # (instance id, member id) already released


@dataclass(frozen=True, slots=True)
class Conflict:
    instance_id: str
    pod: str
    reason: str  # UNRELEASED or FENCING
    member_id: str
    message: str


def observe_instances(
    state: ConflictState,
    *,
    fleet_name: str,
    description: GroupDescription,
    pods: Mapping[str, PodTimes],
    kind: CoordinatorKind,
    now: datetime,
) -> tuple[ConflictState, tuple[Conflict, ...]]:
    """The next state, and the conflicts this look at the group shows (ordered by instance id)."""
    holders: dict[str, Holder] = {}
    changes: dict[str, tuple[datetime, ...]] = {}
    conflicts = []
    for member in sorted(description.members, key=lambda m: m.group_instance_id or ""):
        instance = member.group_instance_id
        pod = pod_of_member(fleet_name, instance) if instance else None
        if instance is None or pod is None:
            continue
        times = pods.get(pod)
        before = state.holders.get(instance)
        recent = tuple(t for t in state.changes.get(instance, ()) if now - t <= FENCING_WINDOW)
        if before is not None and before.member_id == member.member_id:
            holder = before
        else:
            holder = Holder(member.member_id, now, times.started if times is not None else None)
            restarted = times is None or before is None or before.pod_started is None
            if not restarted and times is not None and before is not None and before.pod_started is not None:
                restarted = times.started > before.pod_started + SLACK
            if before is not None and not restarted:
                recent = (*recent, now)
        holders[instance] = holder
        if recent:
            changes[instance] = recent
        if (
            kind.instance_ids_held_until_expiry
            and times is not None
            and times.started > holder.since + SLACK
            and member.member_epoch != LEAVE_STATIC_EPOCH
        ):
            conflicts.append(
                Conflict(
                    instance,
                    pod,
                    UNRELEASED,
                    member.member_id,
                    f"{pod}: its process started at {_clock(times.started)} but group {description.group_id} still"
                    f" holds its previous member (seen since {_clock(holder.since)}, epoch {member.member_epoch}:"
                    " it never left), so the new consumer is refused UNRELEASED_INSTANCE_ID until that member's"
                    " session expires",
                )
            )
        elif len(recent) >= FENCING_CHANGES:
            conflicts.append(
                Conflict(
                    instance,
                    pod,
                    FENCING,
                    member.member_id,
                    f"{pod}: the member holding group.instance.id {instance} changed {len(recent)} times in"
                    f" {int(FENCING_WINDOW.total_seconds() // 60)} minutes while its pod's process did not restart:"
                    " two processes use that instance id and fence each other (FENCED_INSTANCE_ID)",
                )
            )
    released = frozenset((i, m) for i, m in state.released if i in holders and holders[i].member_id == m)
    return ConflictState(holders, changes, released), tuple(conflicts)


def to_release(state: ConflictState, conflicts: Iterable[Conflict]) -> tuple[Conflict, ...]:
    """The unreleased conflicts not released yet (each stale member at most once)."""
    return tuple(c for c in conflicts if c.reason == UNRELEASED and (c.instance_id, c.member_id) not in state.released)


def mark_released(state: ConflictState, released: Iterable[Conflict]) -> ConflictState:
    return replace(state, released=state.released | {(c.instance_id, c.member_id) for c in released})


def conflict_condition(conflicts: Iterable[Conflict], *, release: bool) -> Condition:
    """``InstanceIdConflict``: True naming each pod and why, False when every instance id is its pod's."""
    found = list(conflicts)
    if not found:
        return Condition(
            INSTANCE_ID_CONFLICT, "False", "NoConflict", "every member holding a pod's instance id is that pod's"
        )
    reason = found[0].reason if len({c.reason for c in found}) == 1 else "Several"
    advice = (
        "; releasing the stale members (releaseStaleInstances)"
        if release and any(c.reason == UNRELEASED for c in found)
        else "; spec.coordinator.kafka.releaseStaleInstances: true would release them"
        if any(c.reason == UNRELEASED for c in found)
        else ""
    )
    return Condition(INSTANCE_ID_CONFLICT, "True", reason, "; ".join(c.message for c in found) + advice)


def _clock(moment: datetime) -> str:
    return moment.strftime("%H:%M:%S")
