"""Whose group it is: the claim a fleet makes on its group at Berth's coordinator, decided as data.

Owns the ownership story of docs/operator.md ("Group ownership"). On Berth's coordinator a group belongs to at
most one fleet, recorded with the group (docs/api.md §7a: ``PUT /v1/groups/{g}/owner``); the operator acts on a
group only once the coordinator records it as its fleet's. Rules:

- :func:`plan_claim` is a pure function of what describe showed and the fleet: nothing to do when the group is
  already this fleet's (same uid); else one :class:`ClaimGroup`, adopting (taking over a group that has members or
  committed offsets and no owner) only when the spec says so (``spec.coordinator.adoptGroup``) or when this
  operator already ran the fleet on this group before owners were recorded (its status names the group and its
  workload: the upgrade path). The coordinator decides: a group owned by another uid, or in use and owned by
  nobody without ``adopt``, is refused (HTTP 409), and the fleet is refused with :data:`GROUP_OWNED`.
- A deletion never claims: :func:`owns` says whether the leave, the delete or the release may be sent at all.
- Every write after the claim carries the fleet's uid (``Berth-Owner-Uid``), so a group that changed hands in
  between is refused by the coordinator, not changed.
- Messages name the owning fleet only when the coordinator's record has the shape of Kubernetes names; anything
  else is "another fleet" (the record is the coordinator's data, not ours to repeat).
- Kafka keeps no owner record: there the operator's one-fleet-per-group claim (``planners.claims``) is what holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berth.operator.planners.observations import GroupDescription, GroupOwnerRef

#: The refusal's condition reason and Warning Event reason.
GROUP_OWNED = "GroupOwned"

_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class ClaimGroup:
    """``PUT /v1/groups/{group_id}/owner`` with the fleet as owner (``adopt``: take over a group in use)."""

    owner: GroupOwnerRef
    adopt: bool


def owns(description: GroupDescription, uid: str) -> bool:
    """Whether the coordinator records the group as the fleet's (by uid)."""
    return description.owner is not None and bool(uid) and description.owner.uid == uid


def plan_claim(
    description: GroupDescription,
    me: GroupOwnerRef,
    *,
    adopt: bool,
    status: Mapping[str, Any] | None = None,
) -> ClaimGroup | None:
    """The claim to make before anything else is sent for the fleet; None when the group is already its own."""
    if owns(description, me.uid):
        return None
    return ClaimGroup(me, adopt=adopt or ran_on_group(status, description.group_id))


def ran_on_group(status: Mapping[str, Any] | None, group_id: str) -> bool:
    """This operator already ran the fleet on this group: status (written by the operator alone) names the group
    and the fleet's workload. A fleet whose groupId was just edited has the old group in status."""
    status = status or {}
    return bool(status.get("selector")) and status.get("groupId") == group_id


def owner_name(owner: GroupOwnerRef | None) -> str:
    """``fleet NAMESPACE/NAME`` when the record has the shape of Kubernetes names, else ``another fleet``."""
    if owner is None:
        return "no fleet"
    if _NAMESPACE.match(owner.namespace) and _NAME.match(owner.name):
        return f"fleet {owner.fleet}"
    return "another fleet"


def group_owned_message(group_id: str, endpoint: str, owner: GroupOwnerRef | None) -> str:
    """Why the fleet is refused: the group is another fleet's, or in use by nobody's without ``adoptGroup``."""
    if owner is None:
        return (
            f"group {group_id} on {endpoint} is in use (members or committed offsets) and owned by no fleet: set"
            " spec.coordinator.adoptGroup: true to take it over; nothing is sent for this fleet until then"
        )
    return (
        f"group {group_id} on {endpoint} belongs to {owner_name(owner)}: nothing is sent for this fleet while that"
        " one owns it"
    )
