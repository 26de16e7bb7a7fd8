"""Plan the scaling of a fleet: the ordered actions that move it from what is observed towards what is desired.

Owns the scale-down, scale-up and deletion stories (docs/architecture.md, "Scaling"). :func:`plan_scaling` is a
pure function of one observation; the driver executes the actions in order, stops at the first failure, and plans
again on the next reconcile. Nothing is remembered between calls except what the actions write into ``status``,
so an operator that restarts anywhere resumes from status and observations alone. Rules:

- Departing ids (``status.departing``) are the ids at or beyond the desired size that may still be members: the
  StatefulSet's ordinals beyond it, pods that still exist, and ids the coordinator or the last pre-registration
  still lists. They are recorded *before* anything shrinks; an id back within the desired size is not left (a
  scale back up cancels its departure), and stays recorded until the StatefulSet covers it again
  (:func:`recorded_departing`), so that no record of it is lost if the fleet shrinks again before it grew.
- Expected members (``preRegister``) are set to the desired ids *before* the StatefulSet changes size: widened
  first on a scale-up (one rebalance for k new pods), narrowed first on a scale-down (no rebalance waits for a
  pod that is going away). The recorded list is forgotten (null) before the coordinator's is changed, so that a
  crash between the change and its record makes the next plan put it again instead of trusting a stale record;
  the new list is recorded with the pass's next status write (a record nothing after it depends on).
- The leave comes only once the StatefulSet's controller acts on the new size and none of the departing pods exists
  (what it waits for is said as it is: a pod Terminating, a pod the controller has not deleted yet, or, under
  OrderedReady, a pod that is not Ready and so keeps the controller from deleting any):
  ONE batch leave by instance id for all of them — except that a pod stuck Terminating longer than its grace period
  plus ``stuck_allowance`` (its node is likely gone) whose member the group no longer lists (its session expired:
  it does not run as a member) holds nobody any longer: it leaves with those already gone, a Warning says so, and
  the departing pods still running leave in a later batch. A stuck pod whose member is still listed may still run
  (a node cut off from the API server, not from the coordinator): it is not left, and the wait says so, naming its
  node (docs/failure-modes.md); :func:`record_scale_down` then
  writes ``lastScaleDown`` and clears the ids the coordinator no longer has (UNKNOWN_MEMBER_ID means already
  gone: fine). The leave names each departing pod's id and every member id the group lists as ``<pod>-<digits>``
  (Kafka Streams, Camel and others append a thread index to ``group.instance.id``); it never names an id of a pod
  that stays, and is never empty.
- A removal never targets a member the fleet did not create, whatever its id looks like: the departing ids come
  from the fleet's own records only — the ordinals its StatefulSet has, its pods that exist, the ids status already
  holds as departing or pre-registered (:func:`own_instance_ids`) — never from the group's member list. A member
  the group lists beyond those (another team's consumer named ``<fleet>-7``, a dynamic member, or one of the
  fleet's own whose record was lost) is *foreign* (:func:`foreign_members`): it is never left, and its session
  expires on its own if it was the fleet's.
- ``leaveOnScaleDown: false``: no leave; once the departing pods are gone ``lastScaleDown`` says so with
  ``removed: []`` (nobody was removed) and ``expiring``: the ids the group still lists, which it keeps until their
  session timeout. Those stay the fleet's own (:func:`own_instance_ids`: never foreign, never departing again) until
  the group no longer lists them or the fleet scales back over them, when ``expiring`` forgets them.
- A coordinator whose kind does not pre-register (Kafka) gets no expected-members actions at all.
- Deletion scales to zero, clears the expected members, leaves everyone it created (whatever ``leaveOnScaleDown``
  says: a group with members cannot be deleted) and deletes the group when ``delete_group`` says so and no foreign
  member is in it (deleting a group deletes its committed offsets: on Kafka the default is to keep it, and a group
  with members the fleet did not create is always kept); a group that is kept is released instead where the kind
  records owners (its owner record at Berth's coordinator is let go, ``planners.ownership``), last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from berth.operator.planners.conditions import format_time, parse_time
from berth.operator.planners.coordinator_kind import BERTH, CoordinatorKind
from berth.operator.planners.instances import instance_ids, ordinal_of, pod_of_member, sorted_by_ordinal

#: Per-id leave results meaning the id is no longer a member of the group.
LEFT_RESULTS = frozenset({"NONE", "UNKNOWN_MEMBER_ID"})

# Keys of the fleet's status this planner owns.
DEPARTING = "departing"
DEPARTING_SINCE = "departingSince"
EXPECTED_MEMBERS = "expectedMembers"
LAST_SCALE_DOWN = "lastScaleDown"


@dataclass(frozen=True, slots=True)
class PatchStatus:
    """Merge ``patch`` into the fleet's ``.status``: now, durably, before the next action (``durable``); or, for a
    record of what the actions before did that nothing after depends on, with the pass's next status write."""

    patch: Mapping[str, Any]
    durable: bool = True


@dataclass(frozen=True, slots=True)
class PutExpectedMembers:
    instance_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClearExpectedMembers:
    pass


@dataclass(frozen=True, slots=True)
class ScaleWorkload:
    replicas: int


@dataclass(frozen=True, slots=True)
class BatchLeave:
    """One LeaveGroup v3+ by instance id (empty member ids); then write :func:`record_scale_down`'s patch."""

    instance_ids: tuple[str, ...]  # the departing pods' ids (what status tracks)
    departing_since: str | None  # when these ids started departing, for lastScaleDown.seconds
    #: The leave removes every member (the fleet is being deleted): the group empties instead of rebalancing.
    everyone: bool = False
    #: The group.instance.ids to send: ``instance_ids`` plus the thread-suffixed members of those pods
    #: (``<pod>-<digits>``) the group lists. Empty means the same as ``instance_ids``.
    thread_member_ids: tuple[str, ...] = ()
    #: Of ``instance_ids``, the pods still Terminating past their grace period and the allowance: they leave
    #: without being waited for any longer (their node is likely gone), and a Warning Event says so.
    stuck: tuple[str, ...] = ()
    #: Departing ids this leave does not name (their pods still run behind a stuck one): they stay departing.
    later: tuple[str, ...] = ()
    #: The group's generation (epoch) when the leave was planned, where the coordinator reports one: the
    #: rebalances it costs are counted from it (:func:`rebalances_since_leave`), not assumed.
    from_generation: int | None = None
    #: The ids the previous ``lastScaleDown.results`` names: the new record says nothing of them (a merge patch
    #: would keep them otherwise). Bookkeeping: not part of what the leave is (not compared).
    forget: tuple[str, ...] = field(default=(), compare=False)

    @property
    def member_ids(self) -> tuple[str, ...]:
        """Every group.instance.id this leave names, each departing pod's own id first; never empty."""
        return (*self.instance_ids, *self.thread_member_ids)


@dataclass(frozen=True, slots=True)
class DeleteGroup:
    """Delete the fleet's group; GROUP_ID_NOT_FOUND means already deleted."""


@dataclass(frozen=True, slots=True)
class ReleaseGroup:
    """Let go of the fleet's claim on its group (docs/api.md §7a), which is kept with its committed offsets."""


Action = (
    PatchStatus | PutExpectedMembers | ClearExpectedMembers | ScaleWorkload | BatchLeave | DeleteGroup | ReleaseGroup
)


@dataclass(frozen=True, slots=True)
class ScalingStatus:
    """The part of ``status`` this planner reads back: what it wrote before, possibly before a restart."""

    departing: tuple[str, ...] = ()
    departing_since: str | None = None
    expected_members: tuple[str, ...] | None = None  # None: never set (or unknown)
    last_removed: tuple[str, ...] = ()  # the ids the last batch leave removed (lastScaleDown.removed)
    #: The ids the last scale-down left to expire (``leaveOnScaleDown: false``) that the group still listed
    #: (lastScaleDown.expiring): still the fleet's own members until the group lets them go.
    expiring: tuple[str, ...] = ()
    #: The ids the last scale-down's results name (lastScaleDown.results).
    last_results: tuple[str, ...] = ()

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> ScalingStatus:
        status = status or {}
        expected = status.get(EXPECTED_MEMBERS)
        last = status.get(LAST_SCALE_DOWN)
        removed = last.get("removed") if isinstance(last, Mapping) else None
        expiring = last.get("expiring") if isinstance(last, Mapping) else None
        return cls(
            departing=tuple(status.get(DEPARTING) or ()),
            departing_since=status.get(DEPARTING_SINCE),
            expected_members=None if expected is None else tuple(expected),
            last_removed=tuple(str(name) for name in removed or ()),
            expiring=tuple(str(name) for name in expiring or ()) if isinstance(expiring, list) else (),
            last_results=tuple(str(name) for name in results) if isinstance(results := _results(last), Mapping) else (),
        )


@dataclass(frozen=True, slots=True)
class ScalingObservation:
    fleet_name: str
    desired_replicas: int  # spec.replicas (ignored when deleting)
    workload_replicas: int | None  # the StatefulSet's spec.replicas; None when it does not exist
    existing_pods: frozenset[str]  # names of the fleet's pods that still exist (terminating ones too)
    #: The workload's controller has acted on ``workload_replicas`` (StatefulSet: status.observedGeneration has
    #: caught up with metadata.generation). Until then it may still create a pod the old size wanted.
    workload_settled: bool = True
    status: ScalingStatus = field(default_factory=ScalingStatus)
    pre_register: bool = True
    leave_on_scale_down: bool = True
    deleting: bool = False
    #: Instance ids the coordinator lists as members, when it was asked: the thread-suffixed ids of departing pods
    #: are left with them; members the fleet did not create are foreign (never left, and the group is kept).
    group_members: frozenset[str] | None = None
    #: Member ids of the group's dynamic members (no instance id): never the fleet's pods, so always foreign.
    dynamic_members: tuple[str, ...] = ()
    #: What the coordinator does for the group: expected-members actions only where it pre-registers, and a
    #: deletion that keeps the group ends by releasing the fleet's owner record where it records owners.
    kind: CoordinatorKind = BERTH
    #: Deletion ends by deleting the group (spec.deleteGroupOnDelete, or the kind's default).
    delete_group: bool = True
    #: Pods being deleted -> when their grace period ends (a pod's deletionTimestamp).
    terminating: Mapping[str, datetime] = field(default_factory=dict)
    #: How long past its grace period a Terminating pod is waited for before its id leaves anyway.
    stuck_allowance: timedelta = timedelta(minutes=2)
    #: Pods that run and are not Ready: under OrderedReady the StatefulSet controller deletes no pod while one of
    #: them is unhealthy (it waits for it to be Running and Ready first).
    unready: frozenset[str] = frozenset()
    ordered_ready: bool = True
    #: The group's generation (or epoch) as described, where the coordinator reports one.
    group_generation: int | None = None
    #: Pods -> the node they were scheduled to (where known), to name it when a stuck pod is waited for.
    nodes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ScalingPlan:
    actions: tuple[Action, ...]
    waiting: str | None = None  # why more remains to do after these actions; None: they finish the job
    #: Members of the group the fleet did not create (instance ids, then dynamic member ids): never left.
    foreign_members: tuple[str, ...] = ()

    @property
    def done(self) -> bool:
        """Once the actions succeed, the fleet has converged (for a deletion: the finalizer may go)."""
        return self.waiting is None


def plan_scaling(observation: ScalingObservation, *, now: datetime) -> ScalingPlan:
    """The next actions, in order; executing them and planning again converges on the desired size."""
    obs = observation
    if obs.workload_replicas is None and not obs.deleting:
        return ScalingPlan((), "the StatefulSet does not exist yet: apply it (at 0 replicas) first")
    desired = 0 if obs.deleting else obs.desired_replicas
    workload = obs.workload_replicas or 0
    actions: list[Action] = []

    departing = departing_ids(obs, desired)
    recorded = recorded_departing(obs, desired, departing)
    since = _departing_since(obs.status, departing, now)
    if recorded != obs.status.departing or since != obs.status.departing_since:
        actions.append(PatchStatus({DEPARTING: list(recorded), DEPARTING_SINCE: since}))

    actions += _expected_members_actions(obs, desired)

    if workload != desired:
        actions.append(ScaleWorkload(desired))

    foreign = foreign_members(obs)
    waiting = None
    if departing:
        stuck = stuck_pods(obs, departing, now)
        still_there = [name for name in departing if name in obs.existing_pods and name not in stuck]
        leaving = tuple(name for name in departing if name not in still_there)
        if workload != desired or not obs.workload_settled:
            # Not before the shrink is in effect: a pod the StatefulSet still wants would be recreated and rejoin.
            waiting = f"waiting for the StatefulSet to reach {desired} replicas before {_ids(departing)} leave"
            waiting += _blocked_by_unready(obs, departing)
        elif still_there and not stuck:
            waiting = _waiting_for_pods(obs, still_there, now)
        elif obs.leave_on_scale_down or obs.deleting:
            # ONE leave once every departing pod is gone; a pod stuck Terminating past its allowance does not hold
            # the others back forever: the gone and the stuck leave now, any still running leave in a later batch.
            threads = thread_member_ids(obs.fleet_name, leaving, obs.group_members or frozenset())
            everyone = obs.deleting and not still_there and not foreign
            actions.append(
                BatchLeave(
                    leaving,
                    since,
                    everyone=everyone,
                    thread_member_ids=threads,
                    stuck=stuck,
                    later=tuple(still_there),
                    from_generation=obs.group_generation,
                    forget=obs.status.last_results,
                )
            )
            if still_there:
                waiting = f"waiting for {_ids(still_there)} to terminate before they leave the group too"
        else:
            # No leave: their sessions expire on their own. Recorded all the same, removing nobody: the ids the group
            # still lists are left to expire, and stay the fleet's own (never foreign) until it lets them go.
            earlier = [n for n in obs.status.expiring if n not in departing and not _within(obs, n, desired)]
            listed = [name for name in (*earlier, *departing) if _listed(obs, name)]
            record = _scale_down_record(
                departing, departing, {}, since, now, removed=(), forget=obs.status.last_results
            )
            record[LAST_SCALE_DOWN] |= {"expiring": listed or None}
            actions.append(PatchStatus(record))
    elif obs.status.expiring and not obs.deleting:
        # What a scale-down left to expire, once the group has let it go (or the fleet took it back) is not
        # listed any more.
        still = [name for name in obs.status.expiring if _listed(obs, name) and not _within(obs, name, desired)]
        if tuple(still) != obs.status.expiring:
            actions.append(PatchStatus({LAST_SCALE_DOWN: {"expiring": still or None}}))

    if obs.deleting and waiting is None:
        if not obs.workload_settled:
            # A controller still acting on an older size could start a pod that joins the group again.
            waiting = "waiting for the StatefulSet to reach 0 replicas before the " + (
                "group is deleted" if obs.delete_group else "fleet is released"
            )
        elif obs.delete_group and not foreign:
            actions.append(DeleteGroup())
        elif obs.kind.records_owners:
            actions.append(ReleaseGroup())
    return ScalingPlan(_merge_adjacent_patches(actions), waiting, foreign)


def _blocked_by_unready(obs: ScalingObservation, departing: Sequence[str]) -> str:
    """Why an OrderedReady StatefulSet does not shrink, when a pod that stays is not Ready (with its node, where
    known: a pod on a node that stopped reporting is never Ready again until the node is dealt with)."""
    blocking = sorted_by_ordinal(obs.fleet_name, obs.unready - set(departing)) if obs.ordered_ready else ()
    if not blocking:
        return ""
    where = ", ".join(f"{name} on node {obs.nodes[name]}" if obs.nodes.get(name) else name for name in blocking)
    one = len(blocking) == 1
    return f": it deletes no pod while {where} {'is' if one else 'are'} not Ready (podManagementPolicy OrderedReady)"


def _waiting_for_pods(obs: ScalingObservation, still_there: Sequence[str], now: datetime) -> str:
    """What the departing pods that still exist wait for, as it is."""
    pods = "pod" if len(still_there) == 1 else "pods"
    listed = past_allowance(obs, still_there, now)
    if listed:
        where = "; ".join(f"{name} on node {obs.nodes.get(name) or 'unknown'}" for name in listed)
        one = len(listed) == 1
        return (
            f"{where}: Terminating past {'its' if one else 'their'} grace period and the allowance, not confirmed"
            f" gone (the node may be lost), and {'its member is' if one else 'their members are'} still in the"
            f" group, so {'the pod' if one else 'they'} may still run: no member is removed until"
            f" {'its pod is' if one else 'the pods are'} gone or {'its' if one else 'their'} session"
            f" expire{'s' if one else ''} (docs/failure-modes.md: the out-of-service taint)"
        )
    if any(name in obs.terminating for name in still_there):
        where = ", ".join(f"{name} on node {obs.nodes[name]}" for name in still_there if obs.nodes.get(name))
        return f"waiting for {pods} {_ids(still_there)} to terminate before they leave the group" + (
            f" ({where})" if where else ""
        )
    # Not deleted yet. Under OrderedReady the StatefulSet controller deletes one pod at a time, only once the one
    # before is gone, and none at all while a pod is not Ready.
    if obs.ordered_ready:
        going = sorted_by_ordinal(obs.fleet_name, set(obs.terminating) - set(still_there))
        if going:
            return (
                f"waiting for the StatefulSet to delete {pods} {_ids(still_there)}, which it does once {_ids(going)}"
                f" {'is' if len(going) == 1 else 'are'} gone (podManagementPolicy OrderedReady)"
            )
        blocking = sorted_by_ordinal(obs.fleet_name, obs.unready - set(still_there))
        if blocking:
            return (
                f"the StatefulSet deletes no pod while {_ids(blocking)} {'is' if len(blocking) == 1 else 'are'} not"
                f" Ready (podManagementPolicy OrderedReady): {_ids(still_there)}"
                f" leave{'s' if len(still_there) == 1 else ''} the group once deleted"
            )
    return f"waiting for the StatefulSet to delete {pods} {_ids(still_there)} before they leave the group"


def past_allowance(observation: ScalingObservation, departing: Sequence[str], now: datetime) -> tuple[str, ...]:
    """Departing pods still Terminating longer than their grace period plus the allowance, in ordinal order."""
    obs = observation
    return tuple(
        name
        for name in departing
        if name in obs.existing_pods
        and (deadline := obs.terminating.get(name)) is not None
        and now > deadline + obs.stuck_allowance
    )


def stuck_pods(observation: ScalingObservation, departing: Sequence[str], now: datetime) -> tuple[str, ...]:
    """The pods past their allowance that no longer hold the leave: those whose member the group does not list
    (where the group was described), in ordinal order."""
    obs = observation
    listed = {pod_of_member(obs.fleet_name, member) for member in obs.group_members or ()}
    return tuple(name for name in past_allowance(obs, departing, now) if name not in listed)


def own_instance_ids(observation: ScalingObservation) -> frozenset[str]:
    """The ids this fleet created, from its own records only: the ordinals its StatefulSet has, its pods that exist
    (the workload adapter lists only pods of the fleet's StatefulSet), and the ids status holds as departing,
    pre-registered or left to expire (written by the operator while they were the fleet's). Never the group's
    member list."""
    obs = observation
    own: set[str] = set(instance_ids(obs.fleet_name, obs.workload_replicas or 0))
    own |= obs.existing_pods | set(obs.status.departing) | set(obs.status.expected_members or ())
    return frozenset(own | set(obs.status.expiring))


def foreign_members(observation: ScalingObservation) -> tuple[str, ...]:
    """Members of the group the fleet did not create (module rules): static ids that are neither one of
    :func:`own_instance_ids` nor a thread (``<pod>-<n>``) of one, sorted; then every dynamic member."""
    obs = observation
    own = own_instance_ids(obs)
    foreign = sorted(
        member
        for member in obs.group_members or ()
        if member not in own and pod_of_member(obs.fleet_name, member) not in own
    )
    return (*foreign, *sorted(obs.dynamic_members))


def departing_ids(observation: ScalingObservation, desired: int) -> tuple[str, ...]:
    """Every id of the fleet's own at or beyond ``desired`` that may still be a member and was not yet left, in
    ordinal order."""
    obs = observation
    candidates: set[str] = set(own_instance_ids(obs))
    # A pod that already left while stuck Terminating is on its way out: it does not depart (and leave) again.
    candidates -= {name for name in obs.status.last_removed if name in obs.terminating} - set(obs.group_members or ())
    if not (obs.leave_on_scale_down or obs.deleting):
        # Left to expire by an earlier scale-down: departed already (one whose pod exists again, or that the
        # StatefulSet has again, departs anew).
        again = obs.existing_pods | set(instance_ids(obs.fleet_name, obs.workload_replicas or 0))
        candidates -= set(obs.status.expiring) - again
    return tuple(
        name
        for name in sorted_by_ordinal(obs.fleet_name, candidates)
        if (ordinal := ordinal_of(obs.fleet_name, name)) is not None and ordinal >= desired
    )


def _listed(obs: ScalingObservation, name: str) -> bool:
    """Whether the group lists ``name`` (or a thread of it) as a member; True when the group was not asked."""
    if obs.group_members is None:
        return True
    return name in obs.group_members or any(pod_of_member(obs.fleet_name, m) == name for m in obs.group_members)


def _within(obs: ScalingObservation, name: str, desired: int) -> bool:
    ordinal = ordinal_of(obs.fleet_name, name)
    return ordinal is not None and ordinal < desired


def recorded_departing(observation: ScalingObservation, desired: int, departing: Sequence[str]) -> tuple[str, ...]:
    """What ``status.departing`` records: the departing ids, and the ids a scale back up took off the list that no
    lasting record of the fleet covers yet: the StatefulSet has not grown back to them (a pod of theirs that still
    exists is no such record: the StatefulSet's controller deletes it). Dropped at once, such an id would be
    nobody's if the operator stopped before the StatefulSet grew and the fleet was scaled down again meanwhile: a
    member of its own left to its session timeout. Kept, it is not left (it is within the desired size), and it
    goes once the StatefulSet covers it."""
    obs = observation
    workload = obs.workload_replicas or 0
    cancelled = [
        name
        for name in obs.status.departing
        if name not in departing
        and (ordinal := ordinal_of(obs.fleet_name, name)) is not None
        and workload <= ordinal < desired
    ]
    return tuple(sorted_by_ordinal(obs.fleet_name, {*departing, *cancelled}))


def thread_member_ids(fleet_name: str, pods: Sequence[str], members: frozenset[str]) -> tuple[str, ...]:
    """The members that are ``<pod>-<digits>`` for one of ``pods`` (thread-suffixed instance ids), sorted.

    A fleet's own ids never match another pod of the fleet: ``orders-1-2`` is thread 2 of pod ``orders-1``, and
    ``orders-12`` (pod 12) has no second dash after the fleet name.
    """
    wanted = set(pods)
    found = []
    for member in members:
        pod, dash, suffix = member.rpartition("-")
        if dash and pod in wanted and suffix.isascii() and suffix.isdigit() and ordinal_of(fleet_name, pod) is not None:
            found.append(member)
    return tuple(sorted(found, key=lambda m: (m.rpartition("-")[0], int(m.rpartition("-")[2]))))


def record_scale_down(leave: BatchLeave, results: Mapping[str, str], *, now: datetime) -> PatchStatus:
    """The status patch after ``leave`` was answered with ``results`` (instance id -> error name).

    Ids whose result is neither NONE nor UNKNOWN_MEMBER_ID stay departing, so the next plan leaves them again.
    """
    answered = {name: results.get(name, "NO_RESULT") for name in leave.member_ids}
    # A pod has left once its own id and each of its threads' ids are gone.
    left = tuple(
        name
        for name in leave.instance_ids
        if all(
            answered[member] in LEFT_RESULTS
            for member in leave.member_ids
            if member == name or member.rpartition("-")[0] == name
        )
    )
    # Removed by this leave: a pod of which the group let go of a member (NONE); UNKNOWN_MEMBER_ID alone means it
    # was not a member any more (never joined, expired, already left): gone, but not removed by this leave.
    removed = tuple(
        name
        for name in left
        if any(
            answered[member] == "NONE"
            for member in leave.member_ids
            if member == name or member.rpartition("-")[0] == name
        )
    )
    departing = (*leave.instance_ids, *leave.later)
    record = _scale_down_record(
        departing, left, answered, leave.departing_since, now, removed=removed, forget=leave.forget
    )
    if leave.from_generation is not None and removed and not leave.everyone:
        record[LAST_SCALE_DOWN]["fromGeneration"] = leave.from_generation
    return PatchStatus(record)


def rebalances_since_leave(status: Mapping[str, Any] | None, *, state: str, generation: int) -> int | None:
    """Once the group is Stable again after the last scale-down's leave, the rebalances it went through since
    (generations, or KIP-848 epochs, counted from ``lastScaleDown.fromGeneration``); None when there is nothing to
    count yet or any more (already counted, no generation reported, not Stable)."""
    last = (status or {}).get(LAST_SCALE_DOWN)
    if not isinstance(last, Mapping) or last.get("rebalances") is not None:
        return None
    start = last.get("fromGeneration")
    if not isinstance(start, int) or isinstance(start, bool) or state != "Stable" or generation < start:
        return None
    return generation - start


def _scale_down_record(
    departing: Sequence[str],
    gone: Sequence[str],
    results: Mapping[str, str],
    since: str | None,
    now: datetime,
    *,
    removed: Sequence[str],
    forget: Sequence[str] = (),
) -> dict[str, Any]:
    """The status patch of a scale-down's end: ``departing`` without the ids ``gone`` from the group, and
    ``lastScaleDown`` (``removed``: the ids this leave removed) replaced whole (a merge patch merges objects: what the
    previous record said and this one does not, its ``results`` of other ids and its ``expiring``, is nulled)."""
    remaining = [name for name in departing if name not in gone]
    at = format_time(now)
    return {
        DEPARTING: remaining,
        DEPARTING_SINCE: since if remaining else None,
        LAST_SCALE_DOWN: {
            "removed": list(removed),
            "results": {**dict.fromkeys(forget), **results},
            "expiring": None,
            # Whole seconds: departingSince has second precision (metav1.Time).
            "seconds": _seconds_between(since, at),
            "at": at,
            # A merge patch: what the previous scale-down counted goes (this one is counted when it settles).
            "fromGeneration": None,
            "rebalances": None,
        },
    }


def _results(last: object) -> object:
    return last.get("results") if isinstance(last, Mapping) else None


def _expected_members_actions(obs: ScalingObservation, desired: int) -> list[Action]:
    if not obs.kind.pre_registers:
        return []
    target = instance_ids(obs.fleet_name, desired) if obs.pre_register and not obs.deleting else ()
    if obs.status.expected_members == target:
        return []
    # Unknown (None) is reconciled too: a list left behind by an earlier preRegister would hold up rebalances.
    put: Action = PutExpectedMembers(target) if target else ClearExpectedMembers()
    # Forget the recorded list before changing it: after a crash between the change and its record, status would
    # otherwise claim an old list that may come back as the target, and the coordinator's list would go stale. The
    # record after the change need not be durable at once: lost, it is unknown (null), and the next plan puts again.
    return [
        PatchStatus({EXPECTED_MEMBERS: None}),
        put,
        PatchStatus({EXPECTED_MEMBERS: list(target)}, durable=False),
    ]


def _merge_adjacent_patches(actions: Sequence[Action]) -> tuple[Action, ...]:
    """One status write where the plan has several in a row (their order is kept within the merged patch)."""
    merged: list[Action] = []
    for action in actions:
        previous = merged[-1] if merged else None
        if isinstance(action, PatchStatus) and isinstance(previous, PatchStatus):
            merged[-1] = PatchStatus({**previous.patch, **action.patch}, durable=previous.durable or action.durable)
        else:
            merged.append(action)
    return tuple(merged)


def _departing_since(status: ScalingStatus, departing: Sequence[str], now: datetime) -> str | None:
    if not departing:
        return None
    return status.departing_since if status.departing and status.departing_since else format_time(now)


def _seconds_between(since: str | None, at: str) -> int:
    started, ended = parse_time(since), parse_time(at)
    if started is None or ended is None:  # a hand-edited status: the duration is unknown, not a reason to stall
        return 0
    return max(0, int((ended - started).total_seconds()))


def _ids(names: Sequence[str]) -> str:
    return ", ".join(names)
