"""Static restarts and rolls, counted per fleet: the benefit of static membership, shown where people look.

A pod that restarts and rejoins as itself within its session timeout costs no rebalance; the journal says so
(``static_member_replaced`` with ``rebalance: false``, docs/formats.md), and on Kafka the operator's own evidence
does (``planners.evidence``). This module owns what the operator makes of those events:

- :class:`GroupActivity`: one group's membership activity in a stretch of events, by instance id — static restarts
  without a rebalance, restarts that caused one, static members that expired (their restart outlasted the session
  timeout), and the rebalances started, each attributed to the member event right before it (the coordinator writes
  a rebalance right after the event that caused it; the Kafka evidence does the same). :func:`activity_by_group`
  reads a page of events (every group of the page appears, with nothing in it when nothing of interest happened to
  it, so the page still says which groups changed).
- Only the fleet's own pods restart (:meth:`GroupActivity.of`): a member back as itself is a restart of one of
  the fleet's ids (exact pod names: a thread-suffixed member of a pod is not counted again), an expiry only of a pod
  that stays (within ``spec.replicas``, not departing): a departed pod's member expiring (``leaveOnScaleDown:
  false``) is no restart. Nor is the expiry of a member whose pod still runs the process it was last heard from
  (:func:`expired_by_restart`): a stalled client (a long pause, a starved process) expires without restarting.
- A burst is charged only the rebalances its restarts caused (:func:`charged`): a restarted member's return with
  new metadata, its expiry, and its rejoin after expiring — never a scale-up's new member, a scale-down's leave, a
  departed pod's expiry, or a rebalance whose cause no event names (an Event that blamed restarts for a scale's
  rebalances taught people to ignore it).
- ``status.restarts`` (:func:`plan_restarts`): running totals (``static``, ``rebalancing``, ``expired``,
  ``rolls``), the burst in progress (``ongoing``) and the last one (``last``). A **burst** opens with the first
  restart (or a rollout seen in progress) and closes at the first pass that finds the fleet quiet (every pod
  Ready, the group Stable with every instance id, no rollout in progress) a session timeout after its last restart
  and its last pod start (:func:`plan_restarts` says why). One Event per burst, not one per pod:
  ``3 pods restarted statically (rollout), 0 rebalances``. A burst is an **eviction** (``kubectl drain``, the
  cluster autoscaler) when a pass saw one of its pods evicted through the Eviction API, and no rollout. A burst is a
  **rollout** when a pass saw the
  StatefulSet rolling, or its update revision differs from the one recorded at the last quiet pass (a one-pod
  fleet's roll is over before a pass sees it in progress).
- Counted while the operator follows the journal (from its end, when it starts; docs/operator.md): restarts during
  an operator's absence are not counted, and counts are never recounted.

Pure: the previous block, the activity and what the pass observed in; the patch, the Event and the increments out.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from berth.coordinator.formats.journal import EventType, RebalanceCause
from berth.operator.planners.conditions import format_time, parse_time
from berth.operator.planners.observations import PodTimes

#: The key of ``status`` this planner owns.
RESTARTS = "restarts"
#: The Event posted when a burst ends.
RESTARTED = "Restarted"
#: The expired members a burst remembers (their rejoin is a rebalance the burst caused); beyond it, not charged.
MAX_EXPIRED_IDS = 100
#: Kubernetes records a container's start to the second: a process that started up to this long before a moment may
#: be recorded as starting after it.
TIME_RESOLUTION_MS = 1_000


@dataclass(frozen=True, slots=True)
class Rebalance:
    """A rebalance the group started: its ``cause``, and the instance id of the member event right before it in the
    journal (the event that caused it: the coordinator writes a rebalance right after its cause), None when none
    names one (a page began with it, the cause is the group's own, or the operator saw no member change)."""

    cause: str
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class Expiry:
    """A static member whose session expired, and the earliest it can have been last heard from (the event's time
    less its ``offline_ms``: exact on Berth's coordinator, a bound on the Kafka evidence); None where the event does
    not say (a journal written before it did)."""

    instance_id: str
    heard_ms: int | None = None


def expired_by_restart(expiry: Expiry, running: PodTimes | None) -> bool:
    """Whether ``expiry`` is a restart's: the process its member was is gone. So it is when the pod runs no process
    now (``running`` None: gone, terminating, on a node gone silent), or when its current process, or the pod
    itself, began after the member was last heard from. A pod still running the process its member was heard from
    had a client that stalled (a long pause, a poll loop past its interval, a starved process): its expiry is no
    restart. Counted when the event does not say when it was heard."""
    if expiry.heard_ms is None or running is None:
        return True
    began = max(running.started, running.previous_end)
    return began.timestamp() * 1000 > expiry.heard_ms - TIME_RESOLUTION_MS


@dataclass(frozen=True, slots=True)
class GroupActivity:
    """What happened to one group's members in a stretch of the journal, by instance id (one entry per event)."""

    static: tuple[str, ...] = ()  # static members back under a new member id without a rebalance
    rebalancing: tuple[str, ...] = ()  # static members back under a new member id whose return started a rebalance
    expired: tuple[Expiry, ...] = ()  # static members whose session expired (gone longer than the session timeout)
    rebalances: tuple[Rebalance, ...] = ()  # rebalances started, whatever the cause, with the member that caused it

    def __add__(self, other: GroupActivity) -> GroupActivity:
        return GroupActivity(
            self.static + other.static,
            self.rebalancing + other.rebalancing,
            self.expired + other.expired,
            self.rebalances + other.rebalances,
        )

    @property
    def restarts(self) -> int:
        """Restarts of any kind: back as itself (with or without a rebalance), or expired meanwhile."""
        return len(self.static) + len(self.rebalancing) + len(self.expired)

    def of(
        self, own: Container[str], staying: Container[str], running: Mapping[str, PodTimes] | None = None
    ) -> GroupActivity:
        """The restarts of the fleet's pods only: a member back as itself when it is one of the fleet's ``own`` ids
        (its pods that stay, depart or were left to expire: a process replaced is a restart whatever the pod's
        fate), an expiry only when the pod is ``staying`` (a departed pod's member expiring is no restart) and its
        process was replaced (:func:`expired_by_restart`; ``running``: the times of the pods running now, by name).
        Rebalances are kept, for :func:`charged` to attribute."""
        now_running = running or {}
        return GroupActivity(
            tuple(i for i in self.static if i in own),
            tuple(i for i in self.rebalancing if i in own),
            tuple(
                e
                for e in self.expired
                if e.instance_id in staying and expired_by_restart(e, now_running.get(e.instance_id))
            ),
            self.rebalances,
        )


NOTHING = GroupActivity()

#: The causes a static member's return with new metadata starts a rebalance with (``rebalance: true``).
RETURN_CAUSES = frozenset(
    {RebalanceCause.STATIC_REPLACEMENT, RebalanceCause.LEADER_REJOIN, RebalanceCause.METADATA_CHANGE}
)
#: Which member event causes a rebalance of which cause (the event that comes right before it).
_CAUSED_BY: dict[str, frozenset[RebalanceCause]] = {
    EventType.STATIC_MEMBER_REPLACED: RETURN_CAUSES,
    EventType.MEMBER_EXPIRED: frozenset({RebalanceCause.MEMBER_EXPIRED}),
    EventType.MEMBER_JOINED: frozenset({RebalanceCause.NEW_MEMBER}),
    EventType.MEMBER_LEFT: frozenset({RebalanceCause.MEMBER_LEFT}),
}


def activity_by_group(events: Iterable[Mapping[str, Any]]) -> dict[str, GroupActivity]:
    """Each group the events mention, with its activity (zero counts when nothing of interest happened to it, so
    the page still says which groups changed); each rebalance attributed to the member event right before it in
    its group, when that event is of the kind that causes it."""
    found: dict[str, GroupActivity] = {}
    previous: dict[str, Mapping[str, Any]] = {}
    for event in events:
        group = str(event.get("group_id"))
        found[group] = found.get(group, NOTHING) + _activity_of(event, previous.get(group))
        previous[group] = event
    return found


def _activity_of(event: Mapping[str, Any], previous: Mapping[str, Any] | None) -> GroupActivity:
    kind = event.get("type")
    instance_id = event.get("group_instance_id")
    if kind == EventType.STATIC_MEMBER_REPLACED and isinstance(instance_id, str):
        return (
            GroupActivity(rebalancing=(instance_id,))
            if event.get("rebalance")
            else GroupActivity(static=(instance_id,))
        )
    if kind == EventType.MEMBER_EXPIRED and isinstance(instance_id, str) and event.get("phase") == "session":
        at, offline = event.get("ts_ms"), event.get("offline_ms")
        heard = at - offline if isinstance(at, int) and isinstance(offline, int) else None
        return GroupActivity(expired=(Expiry(instance_id, heard),))
    if kind == EventType.REBALANCE_STARTED:
        cause = str(event.get("cause"))
        by = None
        if previous is not None and cause in _CAUSED_BY.get(str(previous.get("type")), frozenset()):
            by = previous.get("group_instance_id")
        return GroupActivity(rebalances=(Rebalance(cause, by if isinstance(by, str) else None),))
    return NOTHING


def charged(activity: GroupActivity, expired_before: Container[str]) -> int:
    """The rebalances ``activity``'s restarts caused (``activity`` holds only the restarts counted: see
    :meth:`GroupActivity.of`): the return of a restarted member with new metadata, the expiry of one, and the
    rejoin of one that expired (here or earlier in the burst: ``expired_before``). Never a rebalance caused by
    anything else (a scale-up's new member, a scale-down's leave, a departed pod's expiry), nor one whose cause is
    not known."""
    returned, expired = set(activity.rebalancing), {e.instance_id for e in activity.expired}
    count = 0
    for rebalance in activity.rebalances:
        by = rebalance.instance_id
        if by is None:
            continue
        if (
            (rebalance.cause in RETURN_CAUSES and by in returned)
            or (rebalance.cause == RebalanceCause.MEMBER_EXPIRED and by in expired)
            or (rebalance.cause == RebalanceCause.NEW_MEMBER and (by in expired or by in expired_before))
        ):
            count += 1
    return count


@dataclass(frozen=True, slots=True)
class RestartsPlan:
    patch: dict[str, Any]  # {"restarts": {...}}, null where a key goes (write it trimmed to what changes)
    event: tuple[str, str, str] | None  # (type, reason, message) when a burst ended
    static: int  # static restarts newly counted (the metric's increment)
    rolls: int  # rollouts newly ended (0 or 1)
    #: When time alone may end what is open (a burst, or a quiet fleet's revision not recorded yet: a session timeout
    #: after the last restart), which no watched change announces: the pass asks to run again then. None: nothing
    #: is open, or a change will announce its end (pods becoming Ready, a rollout moving, the group settling).
    due: datetime | None = None


def plan_restarts(
    status: Mapping[str, Any],
    activity: GroupActivity,
    *,
    revision: str | None,
    rolling: bool,
    quiet: bool,
    last_started: datetime | None,
    settle: timedelta,
    now: datetime,
    evicted: bool = False,
) -> RestartsPlan:
    """The ``restarts`` block after a pass that found ``activity`` and observed the workload at ``revision`` (the
    StatefulSet's update revision; None where there is none), ``rolling`` (a rollout in progress), ``quiet`` (every
    pod Ready and the group Stable with every member) and ``last_started`` (the latest start of a pod's container).

    A quiet fleet may still have a member that has not come back: a pod is Ready before its process joins (readiness
    must not wait for the group), and the coordinator lists a static member until its session expires. Within one
    session timeout (``settle``) of its pod starting, that member has rejoined or expired, and either is counted; so
    a burst ends once the fleet is quiet and ``settle`` has passed since the last restart counted and the last pod
    started. ``evicted``: the pass saw a pod being evicted (its DisruptionTarget condition says the Eviction API:
    a drain, the cluster autoscaler): it opens a burst too, and a burst that saw one and no rollout is an
    ``eviction``."""
    before = status.get(RESTARTS)
    block: dict[str, Any] = dict(before) if isinstance(before, Mapping) else {}
    for key in ("static", "rebalancing", "expired", "rolls"):
        block[key] = _count(block.get(key))
    block["static"] += len(activity.static)
    block["rebalancing"] += len(activity.rebalancing)
    block["expired"] += len(activity.expired)
    ongoing = block.get("ongoing") if isinstance(block.get("ongoing"), Mapping) else None
    quiet_revision = block.get("revision") if isinstance(block.get("revision"), str) else None
    new_revision = revision is not None and quiet_revision is not None and revision != quiet_revision
    if ongoing is None and (activity.restarts or rolling or evicted):
        ongoing = {"since": format_time(now)}
    event = None
    rolls = 0
    if ongoing is not None:
        since = str(ongoing.get("since") or format_time(now))
        latest = parse_time(ongoing.get("latest")) or parse_time(since) or now
        if activity.restarts:
            latest = now
        expired_before = _ids(ongoing.get("expiredIds"))
        expired_ids = (
            *expired_before,
            *(e.instance_id for e in activity.expired if e.instance_id not in expired_before),
        )
        ongoing = {
            "restarts": _count(ongoing.get("restarts")) + activity.restarts,
            "static": _count(ongoing.get("static")) + len(activity.static),
            "rebalances": _count(ongoing.get("rebalances")) + charged(activity, expired_before),
            "since": since,
            "latest": format_time(latest),
            "rollout": bool(ongoing.get("rollout")) or rolling or new_revision,
            # The burst's expired members (at most MAX_EXPIRED_IDS): their return costs a rebalance they caused.
            "expiredIds": list(expired_ids[:MAX_EXPIRED_IDS]) or None,
            "eviction": bool(ongoing.get("eviction")) or evicted,
        }
        settled_at = max(latest, last_started or latest) + settle
        if quiet and not rolling and now >= settled_at:
            event, last = _ended(ongoing, now)
            if last is not None:
                block["last"] = last
                rolls = 1 if ongoing["rollout"] else 0
                block["rolls"] += rolls
            ongoing = None
    block["ongoing"] = ongoing
    settled = quiet and not rolling and (last_started is None or now >= last_started + settle)
    if ongoing is None and settled and revision is not None:
        # Recorded only once settled: a rollout is a move away from it, and pods that rolled before a pass saw them
        # restart (a one-pod fleet, a quick roll) started within the last session timeout.
        block["revision"] = revision
    due = None
    if ongoing is not None:
        # Not quiet yet: the change that makes it quiet announces itself; a session timeout later is the backstop.
        due = settled_at if quiet and not rolling and settled_at > now else now + settle
    elif quiet and revision is not None and block.get("revision") != revision and last_started is not None:
        due = last_started + settle
    return RestartsPlan({RESTARTS: block}, event, len(activity.static), rolls, due)


def _ended(burst: Mapping[str, Any], now: datetime) -> tuple[tuple[str, str, str] | None, dict[str, Any] | None]:
    """The Event and ``last`` for a burst that ended now; neither when it saw no restart (a rollout whose
    restarts went uncounted, e.g. before the operator started)."""
    restarts, static, rebalances = burst["restarts"], burst["static"], burst["rebalances"]
    if not restarts:
        return None, None
    cause = "rollout" if burst["rollout"] else "eviction" if burst.get("eviction") else "restart"
    started, latest = parse_time(burst["since"]), parse_time(burst["latest"])
    last = {
        "restarts": restarts,
        "static": static,
        "rebalances": rebalances,
        "cause": cause,
        "since": burst["since"],
        "until": burst["latest"],
        # From the first restart counted to the last (the burst is announced a session timeout later).
        "seconds": max(0, int((latest - started).total_seconds())) if started and latest else 0,
    }
    return (("Normal" if rebalances == 0 else "Warning"), RESTARTED, restart_message(last)), last


def restart_message(last: Mapping[str, Any]) -> str:
    """``3 pods restarted statically (rollout), 0 rebalances``; a burst that cost rebalances says how many
    restarts were not static."""
    restarts, static, rebalances = last["restarts"], last["static"], last["rebalances"]
    cause = f" ({last['cause']})" if last["cause"] in ("rollout", "eviction") else ""
    rebalanced = f"{rebalances} rebalance{'' if rebalances == 1 else 's'}"
    if static == restarts:
        return f"{restarts} pod{'' if restarts == 1 else 's'} restarted statically{cause}, {rebalanced}"
    return (
        f"{restarts} pod restart{'' if restarts == 1 else 's'}{cause}: {static} static, {restarts - static} not"
        f" (back after the session timeout, or changed): {rebalanced}"
    )


def _ids(value: object) -> tuple[str, ...]:
    return tuple(str(i) for i in value) if isinstance(value, list) else ()


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
