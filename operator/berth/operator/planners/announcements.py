"""What the operator says in Events about what a pass did to a fleet's objects and group: reasons and messages as
data (``(reason, message)`` pairs), for the reconcile steps to post; and how what one pass said becomes Events
(:func:`coalesced`).

Rules: pure; a message says what happened in words a person understands and names what it is about (the
StatefulSet, the group, the coordinator); none carries a secret or text a coordinator sent (an owner's name only
through ``planners.ownership.owner_name``). What a pass says is posted as at most one Event per type (Normal,
Warning): a first pass claims a group, creates the workload, sizes its session timeout, pre-registers its members
and scales it, and that is one Event, not five (each Event is a write to the API server, and a burst of a thousand
new fleets paid for five thousand of them); a message too long for one Event starts another.
"""

from __future__ import annotations

from collections.abc import Sequence

from berth.operator.planners.coordinator_kind import CoordinatorKind, deletes_group
from berth.operator.planners.disruption_budget import describe_budget
from berth.operator.planners.observations import GroupOwnerRef
from berth.operator.planners.ownership import owner_name
from berth.operator.planners.scaling import DeleteGroup, ScalingPlan
from berth.operator.planners.statefulset import PlannedWorkload, describe_rollout
from berth.operator.planners.volume_claims import claims_on_deletion
from berth.operator.spec.fleet import Fleet

Announcement = tuple[str, str]  # (reason, message)
#: An Event as posted: (type, reason, message), the type "Normal" or "Warning".
Said = tuple[str, str, str]
#: The longest message an Event carries whole (Kopf cuts longer ones in the middle).
EVENT_MESSAGE_LIMIT = 1024
#: Between the parts of a coalesced Event's message.
SEPARATOR = "; "


def coalesced(said: Sequence[Said], *, limit: int = EVENT_MESSAGE_LIMIT) -> list[Said]:
    """What one pass said, as the Events to post: those of one type as one Event (types in the order they were
    first said), named for the first thing said; a lone Event as it was, several with each part after its reason
    (``GroupClaimed: group orders on ... is this fleet's; Created: created StatefulSet orders ...``). The same thing
    said twice is said once. Parts that would not fit ``limit`` characters together start another Event of their
    type (a part longer than that alone is an Event alone)."""
    unique = list(dict.fromkeys(said))
    events: list[Said] = []
    for event_type in dict.fromkeys(kind for kind, _, _ in unique):
        parts = [(reason, message) for kind, reason, message in unique if kind == event_type]
        for group in _fitting(parts, limit):
            if len(group) == 1:
                events.append((event_type, *group[0]))
            else:
                events.append((event_type, group[0][0], SEPARATOR.join(f"{r}: {m}" for r, m in group)))
    return events


def _fitting(parts: list[Announcement], limit: int) -> list[list[Announcement]]:
    """``parts`` in order, in as few consecutive groups as fit ``limit`` characters each once joined."""
    groups: list[list[Announcement]] = []
    length = 0
    for reason, message in parts:
        size = len(reason) + 2 + len(message)
        if groups and length + len(SEPARATOR) + size <= limit:
            groups[-1].append((reason, message))
            length += len(SEPARATOR) + size
        else:
            groups.append([(reason, message)])
            length = size
    return groups


def applied(
    fleet: Fleet,
    planned: PlannedWorkload,
    *,
    statefulset: str,
    service: str,
    budget: str,
    session_timeout_ms: int,
    on_group: bool = False,
) -> list[Announcement]:
    """What applying the planned workload did (``ports.Applied`` values: created, updated, unchanged, deleted): one
    announcement per reason (a new fleet's StatefulSet, Service and budget are one ``Created`` Event, not three).
    The session timeout named is the one the pass decided: in the pods' environment, or (``on_group``: KIP-848's
    consumer protocol) the group's config, which no pod carries."""
    name = fleet.name
    timeout = f"{session_timeout_ms} ms" + (", on the group" if on_group else "")
    said: list[Announcement] = []
    if statefulset == "created":
        said.append(
            (
                "Created",
                f"created StatefulSet {name} at {planned.replicas} replicas"
                f" ({planned.statefulset['spec']['podManagementPolicy']}, session timeout"
                f" {timeout}); the scaling step sizes it next",
            )
        )
    elif statefulset == "updated":
        said.append(
            (
                "Updated",
                f"updated the pod template of StatefulSet {name} (session timeout {timeout}):"
                f" {describe_rollout(fleet.spec.stateful.update_strategy)}",
            )
        )
    if service == "created":
        said.append(("Created", f"created headless Service {name}"))
    elif service == "updated":
        said.append(("Updated", f"updated headless Service {name}"))
    said_of_budget = describe_budget(budget, name, fleet.spec.stateful.disruption_budget)
    if said_of_budget is not None:
        said.append(said_of_budget)
    return _one_per_reason(said)


def _one_per_reason(said: list[Announcement]) -> list[Announcement]:
    """The messages of each reason joined in one announcement, in the order the reasons first came."""
    merged: dict[str, list[str]] = {}
    for reason, message in said:
        merged.setdefault(reason, []).append(message)
    return [(reason, "; ".join(messages)) for reason, messages in merged.items()]


def left_untouched(fleet: Fleet, where: str, owner: GroupOwnerRef | None) -> str:
    """The ``Released`` message of a deletion whose group is not the fleet's at its coordinator."""
    return (
        f"group {fleet.spec.group_id} on {where} is not this fleet's (owned by {owner_name(owner)}):"
        f" left it untouched{claims_on_deletion(fleet)}"
    )


def finalized(fleet: Fleet, plan: ScalingPlan, kind: CoordinatorKind, *, created: bool = True) -> str:
    """The ``Finalized`` message once the deletion's plan is done (every claim of the fleet is released with it;
    ``created``: the fleet may delete the group as far as ownership goes, ``planners.ownership.may_delete``)."""
    group = fleet.spec.group_id
    if any(isinstance(action, DeleteGroup) for action in plan.actions):
        what = f"left and deleted group {group}"
    elif plan.foreign_members and deletes_group(fleet, kind):
        what = (
            f"left group {group} (kept, with its committed offsets: it has members this fleet did not create;"
            " released: owned by no fleet)"
        )
    elif not created and deletes_group(fleet, kind):
        what = (
            f"left group {group} (kept, with its committed offsets: it existed before this fleet claimed it, and a"
            " fleet deletes only a Kafka group it created; released: owned by no fleet)"
        )
    else:
        what = (
            f"left group {group} (kept, with its committed offsets: spec.deleteGroupOnDelete; released: owned by no"
            " fleet)"
        )
    return f"scaled to 0, {what}: releasing the fleet{claims_on_deletion(fleet)}"
