"""Mirror the coordinator's view of a fleet's group into ``status.group`` and the fleet's conditions.

Owns the ``status.group`` block (state, generation, leader, members; for a KIP-848 group its epoch, assignment
epoch and who owns which partitions) and the conditions Ready, CoordinatorReachable, Rebalancing and
ScaleDownPending. Rules:

- What the coordinator says, or nothing: a generation only where it reports one (classic Kafka's DescribeGroups
  has none: no -1), no block at all for a group it does not know (no "Dead" while the group forms).

- Members are shown by instance id (static members) or, for a dynamic member, by its member id; the fleet's ids
  come first in ordinal order, then any others sorted. The leader is shown the same way.
- Missing instance ids are the fleet's ids that are not members.
- When the coordinator could not be asked, ``group`` is None (keep the last known block) and the conditions that
  depend on it are Unknown; ScaleDownPending depends only on the fleet's own ``departing`` list.
- Ready means: the group is Stable, every instance id of the fleet is a member and (when known) every pod is ready;
  pods not ready are named before members missing (they are why members are missing), and what keeps them from
  starting before that, when it is known (``PodsBlocked``: a Secret the pods need that does not exist).
  A fleet scaled to zero is Ready when its group is Empty or gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from berth.operator.planners.conditions import Condition, merge_conditions
from berth.operator.planners.instances import ordinal_of, pod_of_member
from berth.operator.planners.observations import GroupDescription

READY = "Ready"
COORDINATOR_REACHABLE = "CoordinatorReachable"
REBALANCING = "Rebalancing"
SCALE_DOWN_PENDING = "ScaleDownPending"
#: Classic rebalances, and a KIP-848 group computing (Assigning) or handing out (Reconciling) a new assignment.
REBALANCING_STATES = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})
#: How many characters of partitions status shows per member (a compact list; berth-groups shows them all).
ASSIGNMENT_CHARS = 200
IDLE_STATES = frozenset({"Empty", "Dead"})


#: Named in a PodsNotReady message at most.
NAMED_PODS = 10


@dataclass(frozen=True, slots=True)
class PodsBlocked:
    """Why the fleet's pods cannot start, as the operator found it: the Ready reason and a sentence."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class GroupStatusPlan:
    #: status.group; None: the coordinator was not reachable (keep the last one), or knows no such group (removed:
    #: ``known`` says which)
    group: dict[str, Any] | None
    missing: tuple[str, ...]  # the fleet's instance ids that are not members (empty when unknown)
    conditions: list[dict[str, Any]]  # status.conditions, merged with the previous ones


def plan_group_status(
    fleet_name: str,
    description: GroupDescription | None,
    *,
    instance_ids: Sequence[str],
    departing: Sequence[str],
    previous_conditions: Sequence[Mapping[str, Any]] | None,
    now: datetime,
    observed_generation: int | None = None,
    unreachable_reason: str = "the coordinator did not answer",
    ready_replicas: int | None = None,
    reachable_reason: str = "Unreachable",
    not_ready: Sequence[str] = (),
    blocked: PodsBlocked | None = None,
) -> GroupStatusPlan:
    """``description`` is the coordinator's describe of the fleet's group, None when it could not be asked."""
    updates = [_scale_down_pending(departing)]
    if description is None:
        updates += [
            Condition(READY, "Unknown", "CoordinatorUnreachable", unreachable_reason),
            Condition(COORDINATOR_REACHABLE, "False", reachable_reason, unreachable_reason),
            Condition(REBALANCING, "Unknown", "CoordinatorUnreachable", unreachable_reason),
        ]
        return GroupStatusPlan(
            None,
            (),
            merge_conditions(previous_conditions, _ordered(updates), now=now, observed_generation=observed_generation),
        )

    names = {m.member_id: m.group_instance_id or m.member_id for m in description.members}
    members = _sorted_names(fleet_name, names.values())
    # A pod whose threads are members (``<pod>-<n>``) is in the group too.
    present = set(names.values()) | {pod for name in names.values() if (pod := pod_of_member(fleet_name, name))}
    missing = tuple(instance for instance in instance_ids if instance not in present)
    group = group_block(fleet_name, description, names, members)
    updates += [
        _ready(description, instance_ids, missing, ready_replicas, not_ready, blocked),
        Condition(
            COORDINATOR_REACHABLE,
            "True",
            "Reachable",
            (
                f"group {description.group_id} is {description.state}"
                + (f" at generation {description.generation}" if description.generation >= 0 else "")
            )
            if description.known
            else f"group {description.group_id} does not exist yet (its members have not joined)",
        ),
        _rebalancing(description),
    ]
    conditions = merge_conditions(
        previous_conditions, _ordered(updates), now=now, observed_generation=observed_generation
    )
    return GroupStatusPlan(group, missing, conditions)


def group_block(
    fleet_name: str, description: GroupDescription, names: Mapping[str, str], members: Sequence[str]
) -> dict[str, Any] | None:
    """``status.group``: what the coordinator said of the group; None for a group it does not know."""
    if not description.known:
        return None
    block: dict[str, Any] = {
        "state": description.state,
        "leader": names.get(description.leader, description.leader) if description.leader else None,
        "members": list(members),
    }
    if description.generation >= 0:
        block["generation"] = description.generation
    if description.assignment_epoch is not None:
        block["assignmentEpoch"] = description.assignment_epoch
    owned = {names.get(m.member_id, m.member_id): m.assignment for m in description.members if m.assignment}
    if owned:
        block["assignment"] = {name: compact_partitions(owned[name]) for name in _sorted_names(fleet_name, owned)}
    return block


def compact_partitions(partitions: Sequence[str]) -> str:
    """``orders:0,3,5; audit:1`` (topic by topic, in the order given), cut at :data:`ASSIGNMENT_CHARS`."""
    by_topic: dict[str, list[str]] = {}
    for name in partitions:
        topic, _, partition = name.rpartition(":")
        by_topic.setdefault(topic, []).append(partition)
    text = "; ".join(f"{topic}:{','.join(found)}" for topic, found in by_topic.items())
    return text if len(text) <= ASSIGNMENT_CHARS else text[: ASSIGNMENT_CHARS - 1] + "…"


def _ready(
    description: GroupDescription,
    instance_ids: Sequence[str],
    missing: Sequence[str],
    ready_replicas: int | None,
    not_ready: Sequence[str],
    blocked: PodsBlocked | None,
) -> Condition:
    if not instance_ids and description.state in IDLE_STATES:
        return Condition(READY, "True", "ScaledToZero", "the fleet has no members and its group is idle")
    if description.state in REBALANCING_STATES:
        return Condition(READY, "False", "GroupRebalancing", f"the group is in {description.state}")
    # Pods that are not ready (Pending, starting) are why their members are missing: name the cause, not the effect.
    if ready_replicas is not None and ready_replicas < len(instance_ids):
        counted = f"{ready_replicas} of {len(instance_ids)} pods are ready"
        if blocked is not None:
            return Condition(READY, "False", blocked.reason, f"{blocked.message}; {counted}")
        return Condition(READY, "False", "PodsNotReady", counted + _named(not_ready))
    if missing:
        return Condition(READY, "False", "MembersMissing", f"not in the group: {', '.join(missing)}")
    if description.state != "Stable":
        return Condition(READY, "False", f"Group{description.state}", f"the group is {description.state}")
    at = f" at generation {description.generation}" if description.generation >= 0 else ""
    return Condition(
        READY, "True", "GroupStable", f"all {len(instance_ids)} instances are members of the Stable group{at}"
    )


def _named(pods: Sequence[str]) -> str:
    if not pods:
        return ""
    shown = ", ".join(pods[:NAMED_PODS]) + (f" and {len(pods) - NAMED_PODS} more" if len(pods) > NAMED_PODS else "")
    return f" (not ready: {shown})"


def _rebalancing(description: GroupDescription) -> Condition:
    if description.state in REBALANCING_STATES:
        since = f" from generation {description.generation}" if description.generation >= 0 else ""
        return Condition(REBALANCING, "True", description.state, f"rebalancing{since}")
    if not description.known:
        return Condition(REBALANCING, "False", "NoGroup", f"group {description.group_id} does not exist yet")
    return Condition(REBALANCING, "False", description.state, f"the group is {description.state}")


def _scale_down_pending(departing: Sequence[str]) -> Condition:
    if departing:
        return Condition(
            SCALE_DOWN_PENDING,
            "True",
            "AwaitingLeave",
            f"{', '.join(departing)} will leave the group once their pods are gone",
        )
    return Condition(SCALE_DOWN_PENDING, "False", "NoneDeparting", "no instance is waiting to leave the group")


def _ordered(updates: list[Condition]) -> list[Condition]:
    # A fixed order keeps `kubectl describe` stable whichever condition changed first.
    order = {READY: 0, COORDINATOR_REACHABLE: 1, REBALANCING: 2, SCALE_DOWN_PENDING: 3}
    return sorted(updates, key=lambda condition: order[condition.type])


def _sorted_names(fleet_name: str, names: Iterable[str]) -> tuple[str, ...]:
    def key(name: str) -> tuple[int, int, str]:
        ordinal = ordinal_of(fleet_name, name)
        return (0, ordinal, "") if ordinal is not None else (1, 0, name)

    return tuple(sorted(set(names), key=key))
