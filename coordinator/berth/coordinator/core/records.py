"""What the core persists, and how a group is rebuilt from it (Kafka's group metadata records and replay).

Formats (docs/formats.md "Group records"), each a typed value with Kafka-style additive versioning: a newer
Berth may add optional fields with defaults; a reader ignores fields it does not know and fills in defaults for
fields an older writer did not write, so older and newer code read each other's records. ``version`` says
which fields the writer knew; it is never a reason to refuse a record.

- ``GroupRecord``: a whole group, its own fields (``GroupMetadata``) and exactly these members
  (``MemberMetadata``: only the selected protocol's subscription, and the assignment). ``value is None`` is the
  tombstone of a deleted group. Written when a group is created, empties, or stores an assignment.
- ``GroupDeltaRecord``: the group's own fields as they now are, and the members that changed since the last
  record. Written by a static member's restart, so that its cost does not grow with the group, and (with no
  member change) when the group's owner changes.
- ``OffsetRecord``: one partition's committed offset (``None``: deleted). ``ExpectedMembersRecord``: Berth's
  pre-registration list (empty: cleared).

Replaying the records in the order they were written rebuilds the groups (``Coordinator.replay``).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from berth.coordinator.core.group import EMPTY, STABLE, Group
from berth.coordinator.core.member import Member
from berth.coordinator.protocol import GroupId, GroupOwner, InstanceId, JoinProtocol, MemberId, OffsetAndMetadata

#: The newest group record format this code writes (docs/formats.md "Group records"); 3 added ``owner``, 4 ``tenant``.
GROUP_RECORD_VERSION = 4


class RecordFormatError(ValueError):
    """A persisted record this version of Berth cannot read (malformed, not merely newer)."""


class MemberMetadata(msgspec.Struct, frozen=True, gc=False):
    member_id: MemberId
    group_instance_id: InstanceId | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 0
    session_timeout_ms: int = 0
    subscription: bytes = b""  # for the group's selected protocol
    assignment: bytes = b""


class GroupMetadata(msgspec.Struct, frozen=True, gc=False):
    # Any version a Berth wrote is read (additive versioning); below 1 no Berth ever wrote: a malformed record.
    version: Annotated[int, msgspec.Meta(ge=1)] = GROUP_RECORD_VERSION
    protocol_type: str = ""
    generation: int = 0
    protocol: str | None = None
    leader: MemberId | None = None
    current_state_timestamp: int = -1
    owner: GroupOwner | None = None  # since version 3: the fleet the group belongs to (docs/api.md §7a)
    tenant: str | None = None  # since version 4: the non-admin token that created it (docs/api.md §6)


class GroupRecord(msgspec.Struct, frozen=True, gc=False):
    group_id: GroupId
    value: GroupMetadata | None  # None: tombstone
    members: tuple[MemberMetadata, ...] = ()


class GroupDeltaRecord(msgspec.Struct, frozen=True, gc=False):
    group_id: GroupId
    value: GroupMetadata
    upserted: tuple[MemberMetadata, ...] = ()
    removed: tuple[MemberId, ...] = ()


class OffsetRecord(msgspec.Struct, frozen=True, gc=False):
    group_id: GroupId
    topic: str
    partition: int
    value: OffsetAndMetadata | None  # None: tombstone


class ExpectedMembersRecord(msgspec.Struct, frozen=True, gc=False):
    group_id: GroupId
    group_instance_ids: tuple[InstanceId, ...]  # empty: the list is cleared


Record = GroupRecord | GroupDeltaRecord | OffsetRecord | ExpectedMembersRecord


# ------------------------------------------------------------------------------------------------ writing


def group_metadata(group: Group, *, empty: bool = False) -> GroupMetadata:
    return GroupMetadata(
        protocol_type=group.protocol_type or "",
        generation=0 if empty else group.generation_id,
        protocol=None if empty else group.protocol_name,
        leader=group.leader_id if group.members and not empty else None,
        current_state_timestamp=group.state_timestamp_ms,
        owner=group.owner,
        tenant=group.tenant,
    )


def member_metadata(member: Member, protocol: str | None, assignment: bytes | None = None) -> MemberMetadata:
    return MemberMetadata(
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        session_timeout_ms=member.session_timeout_ms,
        subscription=member.metadata(protocol),
        assignment=member.assignment if assignment is None else assignment,
    )


def new_group_record(group: Group, assignments: dict[MemberId, bytes] | None = None) -> GroupRecord:
    """The whole group; ``assignments`` overrides the members' stored assignments (the leader's sync)."""
    protocol = group.protocol_name
    members = tuple(
        member_metadata(m, protocol, None if assignments is None else assignments.get(m.member_id, b""))
        for m in group.members.values()
    )
    return GroupRecord(group.group_id, group_metadata(group), members)


def new_empty_group_record(group: Group) -> GroupRecord:
    """What Kafka writes when a group is created: no members, generation 0."""
    return GroupRecord(group.group_id, group_metadata(group, empty=True))


def new_static_replacement_record(group: Group, old_member_id: MemberId, new_member: Member) -> GroupDeltaRecord:
    """A static member's new member id, in O(1): the group's fields (the leader may have moved) and one swap."""
    return GroupDeltaRecord(
        group.group_id,
        group_metadata(group),
        upserted=(member_metadata(new_member, group.protocol_name),),
        removed=(old_member_id,),
    )


def new_group_fields_record(group: Group) -> GroupDeltaRecord:
    """The group's own fields (its owner, say) and no member change: O(1) whatever the group's size."""
    return GroupDeltaRecord(group.group_id, group_metadata(group))


def new_group_tombstone(group_id: GroupId) -> GroupRecord:
    return GroupRecord(group_id, None)


# ------------------------------------------------------------------------------------------------ reading


def group_from_record(record: GroupRecord, now_ms: int) -> Group:
    """Rebuild a group as Kafka's replay does: Stable with its members, or Empty; no timers, nothing parked."""
    value = record.value
    assert value is not None, "a tombstone rebuilds no group"
    if record.members and value.leader not in {m.member_id for m in record.members}:
        raise RecordFormatError(f"group {record.group_id!r}: its leader {value.leader!r} is not one of its members")
    group = Group(
        record.group_id,
        now_ms=value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms,
        state=STABLE if record.members else EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader if record.members else None,
        tenant=value.tenant,
    )
    group.owner = value.owner
    for stored in record.members:
        add_stored_member(group, stored, now_ms)
    return group


def apply_delta(group: Group, record: GroupDeltaRecord, now_ms: int) -> None:
    """Replay a delta onto the group rebuilt from the records before it."""
    for member_id in record.removed:
        group.remove(member_id)
    for stored in record.upserted:
        group.remove(stored.member_id)
        add_stored_member(group, stored, now_ms)
    value = record.value
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    group.owner = value.owner
    group.state = STABLE if group.members else EMPTY


def add_stored_member(group: Group, stored: MemberMetadata, now_ms: int) -> None:
    if group.protocol_name is None:
        raise RecordFormatError(f"group {group.group_id!r}: a member but no selected protocol")
    member = Member(
        stored.member_id,
        stored.group_instance_id,
        stored.client_id,
        stored.client_host,
        stored.rebalance_timeout_ms,
        stored.session_timeout_ms,
        group.protocol_type or "",
        (JoinProtocol(group.protocol_name, stored.subscription),),
        stored.assignment,
        last_heard_ms=now_ms,
    )
    try:
        group.add(member)
    except AssertionError as exc:
        raise RecordFormatError(f"group {group.group_id!r}: {exc}") from exc
