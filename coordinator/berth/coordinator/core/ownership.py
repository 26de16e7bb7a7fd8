"""Who a group belongs to (docs/api.md §7a): Berth's owner records, so that one fleet cannot act on another's group.

A group may have one owner, a Kubernetes object named by namespace, name and uid; the uid is its identity. Rules:

- **Claim** (``PUT .../owner``): a group nobody owns is claimed when it does not exist (it is created, Empty, and
  counts towards ``max_groups``), when it is *vacant* (no members, no pending KIP-394 ids, no committed offsets),
  or when the claim says ``adopt``. The same uid again is answered with the owner as it is (idempotent). A group
  owned by another uid, or nobody's but in use without ``adopt``, is refused (``OwnerRefusal``: HTTP 409
  GROUP_OWNED) and nothing changes.
- **Release** (``DELETE .../owner``): the owner's uid lets go; another uid is refused as above; a group with no
  owner (or none at all) is answered with no owner.
- **Assertion** (the ``Berth-Owner-Uid`` header of an admin write): refused when the group is owned by another
  uid, or owned by nobody and not vacant; fine when the group does not exist, is the asserting uid's, or is
  nobody's and vacant. Without the header nothing is checked (what older clients and ``berth-groups`` send).
- The owner is one of the group's own fields (``GroupMetadata.owner``): a claim or release writes only those
  (``new_group_fields_record``), and deleting the group deletes it. ``owner_claimed`` and ``owner_released`` are
  journaled. A failed write leaves the owner as it was.

The refusal checks are pure queries the adapter makes right before the write, in the same turn of its event loop,
so nothing can change in between; the handlers check again and would answer COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.coordinator.core.bounds import refuse_new_group
from berth.coordinator.core.events import EventType, OwnerRecord
from berth.coordinator.core.group import EMPTY, Group
from berth.coordinator.core.records import new_empty_group_record, new_group_fields_record
from berth.coordinator.core.state import CoreState
from berth.coordinator.protocol import Error, GroupId, GroupOwner, OwnerResponse, group_id_too_long


@dataclass(frozen=True, slots=True)
class OwnerRefusal:
    """Why an ownership check refused: the group's owner (None: nobody's, but in use) and a sentence."""

    owner: GroupOwner | None
    message: str


def is_vacant(core: CoreState, group: Group) -> bool:
    """Nothing in the group another fleet could lose: no members, no pending ids, no committed offsets."""
    return (
        group.state is EMPTY
        and not group.members
        and not group.pending_join_members
        and group.group_id not in core.offsets
    )


def assertion_refusal(core: CoreState, group_id: GroupId, uid: str) -> OwnerRefusal | None:
    """A write asserting ``uid`` as the group's owner (``Berth-Owner-Uid``)."""
    return _refusal(core, group_id, uid, False, "has no owner and is in use: claim it (adopt) first")


def claim_refusal(core: CoreState, group_id: GroupId, uid: str, adopt: bool) -> OwnerRefusal | None:
    """A claim by ``uid``: a missing, vacant or own group, or one in use and unowned with ``adopt``."""
    in_use = "has no owner but has members or committed offsets: claim it with adopt: true"
    return _refusal(core, group_id, uid, adopt, in_use)


def _refusal(core: CoreState, group_id: GroupId, uid: str, adopt: bool, in_use: str) -> OwnerRefusal | None:
    group = core.groups.get(group_id)
    if group is None:
        return None
    if group.owner is not None:
        if group.owner.uid == uid:
            return None
        return OwnerRefusal(group.owner, f"group {group_id!r} belongs to {_named(group.owner)}")
    if adopt or is_vacant(core, group):
        return None
    return OwnerRefusal(None, f"group {group_id!r} {in_use}")


def release_refusal(core: CoreState, group_id: GroupId, uid: str) -> OwnerRefusal | None:
    group = core.groups.get(group_id)
    if group is None or group.owner is None or group.owner.uid == uid:
        return None
    return OwnerRefusal(group.owner, f"group {group_id!r} belongs to {_named(group.owner)}, not to uid {uid!r}")


def handle_claim(core: CoreState, group_id: GroupId, owner: GroupOwner, adopt: bool, ticket: int) -> None:
    if group_id_too_long(group_id):
        core.reply(ticket, OwnerResponse(Error.INVALID_GROUP_ID))
        return
    if claim_refusal(core, group_id, owner.uid, adopt) is not None:
        core.reply(ticket, OwnerResponse(Error.COORDINATOR_NOT_AVAILABLE))  # the adapter checked: cannot happen
        return
    group = core.groups.get(group_id)
    if group is not None and group.owner is not None:
        core.reply(ticket, OwnerResponse(Error.NONE, owner=group.owner))  # the same uid again
        return
    created = group is None
    adopted = False
    if group is None:
        if refuse_new_group(core, None):
            core.reply(ticket, OwnerResponse(Error.COORDINATOR_NOT_AVAILABLE))
            return
        group = core.new_group(group_id)
        group.owner = owner
        core.persist(new_empty_group_record(group))
    else:
        adopted = not is_vacant(core, group)
        group.owner = owner
        core.persist(new_group_fields_record(group))
    core.event(group, EventType.OWNER_CLAIMED, owner=_fields(owner), adopted=adopted)
    claimed = group

    def on_failed() -> None:
        if core.groups.get(group_id) is claimed and claimed.owner == owner:
            if created and is_vacant(core, claimed) and not claimed.has_expected_instance_ids:
                core.forget(group_id)
            else:
                claimed.owner = None
        core.reply(ticket, OwnerResponse(Error.COORDINATOR_NOT_AVAILABLE))

    core.when_persisted(lambda: core.reply(ticket, OwnerResponse(Error.NONE, owner=owner)))
    core.when_persist_failed(on_failed)


def handle_release(core: CoreState, group_id: GroupId, uid: str, ticket: int) -> None:
    if group_id_too_long(group_id):
        core.reply(ticket, OwnerResponse(Error.INVALID_GROUP_ID))
        return
    if release_refusal(core, group_id, uid) is not None:
        core.reply(ticket, OwnerResponse(Error.COORDINATOR_NOT_AVAILABLE))  # the adapter checked: cannot happen
        return
    group = core.groups.get(group_id)
    if group is None or group.owner is None:
        core.reply(ticket, OwnerResponse(Error.NONE))
        return
    released = group
    owner = group.owner
    group.owner = None
    core.persist(new_group_fields_record(group))
    core.event(group, EventType.OWNER_RELEASED, owner=_fields(owner))

    def on_failed() -> None:
        if core.groups.get(group_id) is released and released.owner is None:
            released.owner = owner
        core.reply(ticket, OwnerResponse(Error.COORDINATOR_NOT_AVAILABLE))

    core.when_persisted(lambda: core.reply(ticket, OwnerResponse(Error.NONE)))
    core.when_persist_failed(on_failed)


def _named(owner: GroupOwner) -> str:
    return f"{owner.namespace}/{owner.name} (uid {owner.uid})"


def _fields(owner: GroupOwner) -> OwnerRecord:
    return {"namespace": owner.namespace, "name": owner.name, "uid": owner.uid}
