"""Whose group it is: the claim a fleet makes on its group, who may adopt a group in use, and what is said, as data.

Owns the ownership story of docs/operator.md ("Group ownership"). Every group a fleet acts on is recorded as that
fleet's (by uid): at Berth's coordinator with the group itself (docs/api.md §7a), on Kafka, whose broker keeps no
owner, in the operator's own records (``ports.GroupRecords``: one object per (cluster, group), created atomically,
so two fleets cannot both win). The operator acts on a group only once it is recorded as its fleet's. Rules:

- **Claim** (:func:`plan_claim`, :func:`record_decision`): a group that does not exist, or is vacant, is claimed; a
  group *in use* and owned by nobody (members or committed offsets, on Kafka as at Berth's coordinator:
  :func:`in_use_on_kafka`) is claimed only when
  the administrator's :class:`AdoptionPolicy` (``--adopt-groups``) lists the fleet's namespace and the group, or when
  this operator already ran the fleet on that group before owners were recorded (its status names the group and
  its workload: the upgrade path). Another fleet's group is never claimed — unless that fleet no longer exists
  (:func:`is_stale`: the owner's namespace and name hold no fleet of its uid), which makes the record reclaimable;
  reclaimed from an earlier fleet of the claimant's own namespace and name (:func:`is_predecessor`: deleted without
  the operator and created again), a group in use is taken back as if adopted.
- ``spec.coordinator.adoptGroup`` is deprecated: a spec field any namespace editor controls grants nothing; a fleet
  that sets it gets a condition saying so (:func:`adopt_group_notes`).
- A deletion never claims: :func:`owns` says whether the leave, the delete or the release may be sent at all. On
  Kafka a fleet deletes only a group it created (:func:`may_delete`: the group did not exist when it was claimed,
  ``created`` in its claim in status); one it adopted, or claimed in an earlier version, is kept with its offsets.
- Every write to Berth's coordinator after the claim carries the fleet's uid (``Berth-Owner-Uid``), so a group that
  changed hands in between is refused by the coordinator, not changed; on Kafka the record is checked every pass.
- Messages name the owning fleet only when the record has the shape of Kubernetes names; anything else is "another
  fleet" (the record is the coordinator's data, not ours to repeat).
- What a fleet claimed is kept in its status (:data:`OWNED_GROUPS`), so every claim is released when the fleet is
  deleted, whatever state it was in, and a claim left behind by a ``groupId`` edit is released once the fleet's
  members are gone from that group.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berth.operator.planners.conditions import Condition
from berth.operator.planners.observations import GroupDescription, GroupOwnerRef
from berth.operator.spec.fleet import Fleet

#: The refusal's condition reason and Warning Event reason: the group is another fleet's.
GROUP_OWNED = "GroupOwned"
#: The group is in use by consumers no fleet owns, and the administrator has not let this fleet adopt it.
GROUP_IN_USE = "GroupInUse"
#: The condition a fleet setting the deprecated spec.coordinator.adoptGroup gets.
DEPRECATED_FIELD = "DeprecatedField"
#: status key: the groups this fleet claimed, ``[{"coordinator": <identity>, "groupId": <id>}]``.
OWNED_GROUPS = "ownedGroups"
#: At most this many claims are kept per fleet: older ones (left behind by groupId edits) are released first.
MAX_OWNED_GROUPS = 8

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class AdoptionRule:
    """Fleets in ``namespace`` may adopt groups in use whose id matches one of ``groups`` (shell-style globs)."""

    namespace: str
    groups: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.namespace}={','.join(self.groups)}"


@dataclass(frozen=True, slots=True)
class AdoptionPolicy:
    """The administrator's decision of which groups in use fleets may take over (``--adopt-groups``)."""

    rules: tuple[AdoptionRule, ...] = ()

    def allows(self, namespace: str, group_id: str) -> bool:
        return any(
            rule.namespace == namespace and any(fnmatch.fnmatchcase(group_id, glob) for glob in rule.groups)
            for rule in self.rules
        )

    def describe(self) -> str:
        return "; ".join(str(rule) for rule in self.rules) or "none"


def parse_adoption_rule(text: str) -> AdoptionRule:
    """``NAMESPACE=GLOB[,GLOB...]``; ``ValueError`` naming what is wrong."""
    namespace, equals, globs = text.strip().partition("=")
    namespace = namespace.strip()
    groups = tuple(glob.strip() for glob in globs.split(",") if glob.strip())
    if not equals or not groups:
        raise ValueError(f"{text!r} is not NAMESPACE=GLOB[,GLOB...]")
    if not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"{namespace!r} is not a namespace name")
    return AdoptionRule(namespace, groups)


@dataclass(frozen=True, slots=True)
class ClaimGroup:
    """``PUT /v1/groups/{group_id}/owner`` with the fleet as owner (``adopt``: take over a group in use)."""

    owner: GroupOwnerRef
    adopt: bool


def owns(description: GroupDescription, uid: str) -> bool:
    """Whether the coordinator records the group as the fleet's (by uid)."""
    return description.owner is not None and bool(uid) and description.owner.uid == uid


def may_adopt(policy: AdoptionPolicy, fleet: Fleet, status: Mapping[str, Any] | None) -> bool:
    """The administrator lets this fleet take over its group in use, or the operator already ran it there."""
    return policy.allows(fleet.namespace, fleet.spec.group_id) or ran_on_group(status, fleet.spec.group_id)


def plan_claim(description: GroupDescription, me: GroupOwnerRef, *, adopt: bool) -> ClaimGroup | None:
    """The claim to make at Berth's coordinator before anything else is sent for the fleet; None when the group is
    already its own. ``adopt``: :func:`may_adopt`. The coordinator decides vacancy and refuses the rest (409)."""
    if owns(description, me.uid):
        return None
    return ClaimGroup(me, adopt=adopt)


def ran_on_group(status: Mapping[str, Any] | None, group_id: str) -> bool:
    """This operator already ran the fleet on this group: status (written by the operator alone) names the group
    and the fleet's workload. A fleet whose groupId was just edited has the old group in status."""
    status = status or {}
    return bool(status.get("selector")) and status.get("groupId") == group_id


def in_use_on_kafka(description: GroupDescription, *, committed_offsets: bool) -> bool:
    """A Kafka group is in use while it has members or committed offsets, as at Berth's coordinator: an Empty group
    whose consumers are all stopped still holds their progress, which a fleet that took it over could delete
    (``committed_offsets``: the group has at least one, as the cluster answered; asked only of a group that exists
    with no member and no record)."""
    return bool(description.members) or (description.exists and committed_offsets)


def may_delete(status: Mapping[str, Any] | None, claimed: OwnedGroup, *, records_owners: bool) -> bool:
    """Whether a deletion may delete the fleet's group (besides spec.deleteGroupOnDelete and foreign members): where
    the coordinator records owners (Berth's) its record rules; on Kafka only a group the fleet created, which its
    claim says (the group did not exist when the fleet claimed it). A claim made before this was recorded (an
    operator upgrade) counts as not created: the group is kept."""
    if records_owners:
        return True
    return any(group == claimed and group.created for group in owned_groups(status))


@dataclass(frozen=True, slots=True)
class RecordDecision:
    """What to do about the operator's own record of a group (Kafka): nothing (already the fleet's), create it, or
    refuse the fleet (``owner``: the record's owner; None: in use by nobody's fleet and not adoptable)."""

    create: bool = False
    refuse: bool = False
    owner: GroupOwnerRef | None = None


def record_decision(recorded: GroupOwnerRef | None, in_use: bool, me: GroupOwnerRef, *, adopt: bool) -> RecordDecision:
    """The claim on the operator's record of a group, from what is recorded (a stale owner already removed) and
    whether the group is in use (:func:`in_use_on_kafka`)."""
    if recorded is not None:
        return RecordDecision() if recorded.uid == me.uid else RecordDecision(refuse=True, owner=recorded)
    if in_use and not adopt:
        return RecordDecision(refuse=True)
    return RecordDecision(create=True)


def is_predecessor(owner: GroupOwnerRef, me: GroupOwnerRef) -> bool:
    """Whether ``owner`` is an earlier fleet of the claimant's namespace and name (another uid): the fleet deleted
    without the operator (docs/install.md, "Fleets left behind") and created again. A stale record of it is taken
    back with the group's offsets, as an adoption: only that namespace's editors could have made either fleet."""
    return owner.namespace == me.namespace and owner.name == me.name and owner.uid != me.uid


def is_stale(owner: GroupOwnerRef, found_uid: str | None) -> bool:
    """Whether an owner record names a fleet that no longer exists: the object at the owner's namespace and name is
    gone (``found_uid`` None) or is another fleet (another uid). Only records with the shape of Kubernetes names are
    ever judged stale; the caller treats a fleet it could not read as alive."""
    return bool(owner.uid) and has_kubernetes_names(owner) and found_uid != owner.uid


def has_kubernetes_names(owner: GroupOwnerRef) -> bool:
    return bool(_NAMESPACE.fullmatch(owner.namespace) and _NAME.fullmatch(owner.name))


def owner_name(owner: GroupOwnerRef | None) -> str:
    """``fleet NAMESPACE/NAME`` when the record has the shape of Kubernetes names, else ``another fleet``."""
    if owner is None:
        return "no fleet"
    if has_kubernetes_names(owner):
        return f"fleet {owner.fleet}"
    return "another fleet"


def group_owned_message(
    group_id: str,
    endpoint: str,
    owner: GroupOwnerRef | None,
    *,
    adopt_group: bool = False,
    me: GroupOwnerRef | None = None,
) -> str:
    """Why the fleet is refused: the group is another fleet's (an earlier fleet of its own name: :func:`is_predecessor`,
    whose members are still in the group), or in use by nobody's and not the fleet's to adopt."""
    if owner is not None and me is not None and is_predecessor(owner, me) and has_kubernetes_names(owner):
        return (
            f"group {group_id} on {endpoint} belongs to an earlier fleet {owner.fleet} (uid {owner.uid}), deleted"
            " without the operator, whose members are still in the group: this fleet takes it back, with its offsets,"
            " once they are gone (their session timeout after their pods went)"
        )
    if owner is None:
        deprecated = " (spec.coordinator.adoptGroup is deprecated and grants nothing)" if adopt_group else ""
        return (
            f"group {group_id} on {endpoint} is in use by consumers no fleet owns: taking it over is the"
            " administrator's decision (the operator's --adopt-groups, chart value operator.adoptGroups, listing this"
            f" fleet's namespace and group){deprecated}; nothing is sent for this fleet until then"
        )
    return (
        f"group {group_id} on {endpoint} belongs to {owner_name(owner)}: nothing is sent for this fleet while that"
        " one owns it"
    )


def refusal_reason(owner: GroupOwnerRef | None) -> str:
    return GROUP_OWNED if owner is not None else GROUP_IN_USE


def adopt_group_notes(fleet: Fleet, status: Mapping[str, Any]) -> tuple[Condition, ...]:
    """The condition of a fleet that sets the deprecated ``spec.coordinator.adoptGroup`` (False once it no longer
    does; none for a fleet that never did)."""
    if not fleet.spec.coordinator.adopt_group:
        had = any(isinstance(c, Mapping) and c.get("type") == DEPRECATED_FIELD for c in status.get("conditions") or ())
        return (Condition(DEPRECATED_FIELD, "False", "NoneSet", "no deprecated field is set"),) if had else ()
    return (
        Condition(
            DEPRECATED_FIELD,
            "True",
            "AdoptGroupIgnored",
            "spec.coordinator.adoptGroup is deprecated and ignored: taking over a group in use is the administrator's"
            " decision (the operator's --adopt-groups, chart value operator.adoptGroups)",
        ),
    )


@dataclass(frozen=True, slots=True, order=True)
class OwnedGroup:
    """One claim a fleet holds: a group on a coordinator (its canonical identity, ``CoordinatorTarget.identity``);
    ``created``: on a coordinator that records no owners (Kafka), the group did not exist when the fleet claimed it
    (not part of the claim's identity: the same claim, whatever it says)."""

    coordinator: str
    group_id: str
    created: bool = field(default=False, compare=False)

    def as_status(self) -> dict[str, Any]:
        found: dict[str, Any] = {"coordinator": self.coordinator, "groupId": self.group_id}
        if self.created:
            found["created"] = True
        return found


def owned_groups(status: Mapping[str, Any] | None) -> tuple[OwnedGroup, ...]:
    """The claims status records (entries of another shape are skipped)."""
    found = []
    for entry in (status or {}).get(OWNED_GROUPS) or ():
        if (
            isinstance(entry, Mapping)
            and isinstance(entry.get("coordinator"), str)
            and isinstance(entry.get("groupId"), str)
        ):
            found.append(OwnedGroup(entry["coordinator"], entry["groupId"], created=entry.get("created") is True))
    return tuple(dict.fromkeys(found))


def owned_patch(current: Sequence[OwnedGroup], claimed: OwnedGroup) -> dict[str, Any]:
    """The status patch recording ``claimed`` (newest last); {} when status already has it."""
    if claimed in current:
        return {}
    return {OWNED_GROUPS: [group.as_status() for group in (*current, claimed)]}


def released_patch(current: Sequence[OwnedGroup], released: Sequence[OwnedGroup]) -> dict[str, Any]:
    """The status patch forgetting ``released`` claims; {} when none of them is recorded."""
    if not set(released) & set(current):
        return {}
    return {OWNED_GROUPS: [group.as_status() for group in current if group not in released]}


def to_release(current: Sequence[OwnedGroup], keeping: OwnedGroup | None) -> tuple[OwnedGroup, ...]:
    """Claims beyond :data:`MAX_OWNED_GROUPS` (oldest first, never ``keeping``): released without waiting."""
    others = [group for group in current if group != keeping]
    excess = len(others) - (MAX_OWNED_GROUPS - 1)
    return tuple(others[:excess]) if excess > 0 else ()


#: status key: members of the fleet's group the fleet did not create (``planners.scaling.foreign_members``).
FOREIGN_MEMBERS = "foreignMembers"
FOREIGN_MEMBERS_EVENT = "ForeignMembers"
#: How many foreign member ids status and the Event name; ids that are not plain names are counted, not shown.
MAX_SHOWN_MEMBERS = 20
_SHOWN_ID = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True, slots=True)
class ForeignReport:
    patch: dict[str, Any]
    event: str | None = None  # a Warning Event's message when the foreign members changed


def foreign_report(group_id: str, status: Mapping[str, Any], foreign: Sequence[str]) -> ForeignReport:
    """``status.foreignMembers`` (the displayable ids, at most :data:`MAX_SHOWN_MEMBERS`) and, when they changed, the
    Warning that says what the fleet will not do about them. Client-chosen ids reach status only when they are
    plain names."""
    shown = [member for member in foreign if _SHOWN_ID.fullmatch(member)][:MAX_SHOWN_MEMBERS]
    before = status.get(FOREIGN_MEMBERS)
    if not foreign:
        return ForeignReport({FOREIGN_MEMBERS: None} if before is not None else {})
    if before is not None and before == shown:
        return ForeignReport({})
    others = len(foreign) - len(shown)
    named = ", ".join(shown)
    if others:
        named = f"{named} and {others} more" if shown else f"ids not shown: {others}"
    noun = "member" if len(foreign) == 1 else "members"
    return ForeignReport(
        {FOREIGN_MEMBERS: shown},
        f"group {group_id} has {len(foreign)} {noun} this fleet did not create ({named}): this fleet never removes"
        " them, and never deletes the group while they are in it",
    )
