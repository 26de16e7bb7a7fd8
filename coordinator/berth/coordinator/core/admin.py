"""DescribeGroups (15), ListGroups (16), DeleteGroups (42) and Berth's pre-registration (docs/api.md §7).

Pre-registration: a group's expected instance ids make a join phase wait for the missing ones before it may
complete early (``Group.has_all_members_joined``); any change re-evaluates a waiting join phase at once.
"""

from __future__ import annotations

from collections.abc import Iterable

from berth.coordinator.core.bounds import refuse_new_group
from berth.coordinator.core.events import EventType, GroupDeletedVia
from berth.coordinator.core.group import EMPTY, STABLE, Group
from berth.coordinator.core.rebalance import maybe_complete_join_phase
from berth.coordinator.core.records import (
    ExpectedMembersRecord,
    OffsetRecord,
    new_empty_group_record,
    new_group_tombstone,
)
from berth.coordinator.core.state import CoreState, heartbeat_key, join_key, sync_key
from berth.coordinator.protocol import (
    DeleteResponse,
    DescribedMember,
    DescribeResponse,
    Error,
    ExpectedMembersResponse,
    GroupId,
    InstanceId,
    ListedGroup,
    ListResponse,
    group_id_too_long,
)


def describe_group(core: CoreState, group_id: GroupId) -> DescribeResponse:
    if group_id_too_long(group_id):
        return DescribeResponse(Error.INVALID_GROUP_ID, group_id=group_id)
    group = core.groups.get(group_id)
    if group is None:
        return DescribeResponse(Error.NONE, group_id=group_id)
    stable = group.state is STABLE
    members = tuple(
        DescribedMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=m.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_metadata=m.metadata(group.protocol_name) if stable else b"",
            member_assignment=m.assignment,  # outside Stable too: the stored assignment (Java coordinator)
        )
        for m in group.members.values()
    )
    return DescribeResponse(
        Error.NONE,
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        generation_id=group.generation_id,
        leader=None if group.state is EMPTY else group.leader_id,
        members=members,
        owner=group.owner,
    )


def list_groups(core: CoreState, states: Iterable[str] = ()) -> ListResponse:
    wanted = {s.lower() for s in states}
    return ListResponse(
        Error.NONE,
        groups=tuple(
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in sorted(core.groups.values(), key=lambda g: g.group_id)
            if not wanted or g.state.value.lower() in wanted
        ),
    )


def handle_delete(core: CoreState, group_id: GroupId, ticket: int) -> None:
    if group_id_too_long(group_id):
        core.reply(ticket, DeleteResponse(Error.INVALID_GROUP_ID))
        return
    group = core.groups.get(group_id)
    if group is None:
        core.reply(ticket, DeleteResponse(Error.GROUP_ID_NOT_FOUND))
        return
    if group.state is not EMPTY:
        core.reply(ticket, DeleteResponse(Error.NON_EMPTY_GROUP))
        return
    core.forget(group_id)
    core.cancel(join_key(group_id))
    core.cancel(sync_key(group_id))
    for pending_id in group.pending_join_members:
        core.cancel(heartbeat_key(group_id, pending_id))
    group.pending_join_members.clear()
    offsets = core.offsets.pop(group_id, {})  # their figures stay with the group object, uncounted with it
    for topic, partitions in offsets.items():
        for partition in partitions:
            core.persist(OffsetRecord(group_id, topic, partition, None))
    core.persist(new_group_tombstone(group_id))
    if group.has_expected_instance_ids:
        core.persist(ExpectedMembersRecord(group_id, ()))
    core.event(group, EventType.GROUP_DELETED, via=GroupDeletedVia.ADMIN)

    def on_failed() -> None:
        if group_id not in core.groups:
            core.register(group)
            if offsets:
                core.offsets.setdefault(group_id, offsets)
        core.reply(ticket, DeleteResponse(Error.COORDINATOR_NOT_AVAILABLE))

    core.when_persisted(lambda: core.reply(ticket, DeleteResponse(Error.NONE)))
    core.when_persist_failed(on_failed)


def get_expected_members(core: CoreState, group_id: GroupId) -> ExpectedMembersResponse:
    if group_id_too_long(group_id):
        return ExpectedMembersResponse(Error.INVALID_GROUP_ID)
    group = core.groups.get(group_id)
    return ExpectedMembersResponse(Error.NONE, group_instance_ids=group.expected_instance_ids if group else ())


def handle_put_expected_members(core: CoreState, group_id: GroupId, ids: Iterable[InstanceId], ticket: int) -> None:
    if group_id_too_long(group_id):
        core.reply(ticket, ExpectedMembersResponse(Error.INVALID_GROUP_ID))
        return
    expected = tuple(dict.fromkeys(ids))
    group = core.groups.get(group_id)
    if group is None and not expected:
        core.reply(ticket, ExpectedMembersResponse(Error.NONE))
        return
    created = group is None
    if group is None:
        if refuse_new_group(core, None):
            core.reply(ticket, ExpectedMembersResponse(Error.COORDINATOR_NOT_AVAILABLE))
            return
        group = core.new_group(group_id)
        core.persist(new_empty_group_record(group))
    previous = group.expected_instance_ids
    if previous == expected and not created:
        core.reply(ticket, ExpectedMembersResponse(Error.NONE, group_instance_ids=expected))
        return
    _set_expected(core, group, expected)
    core.persist(ExpectedMembersRecord(group_id, expected))
    _journal_expected_change(core, group, previous, expected)

    def on_failed() -> None:
        if core.groups.get(group_id) is group:
            if created and not group.members and not group.pending_join_members:
                core.forget(group_id)
            else:
                _set_expected(core, group, previous)
        core.reply(ticket, ExpectedMembersResponse(Error.COORDINATOR_NOT_AVAILABLE))

    core.when_persisted(lambda: core.reply(ticket, ExpectedMembersResponse(Error.NONE, group_instance_ids=expected)))
    core.when_persist_failed(on_failed)


#: An ``expected_members_changed`` event names at most this many added and removed ids (it counts them all).
EVENT_MAX_IDS = 100


def _journal_expected_change(
    core: CoreState, group: Group, previous: tuple[InstanceId, ...], expected: tuple[InstanceId, ...]
) -> None:
    """Journal a change of the expected members: how many there are now, and which ids came and went (bounded)."""
    before, after = set(previous), set(expected)
    added = [i for i in expected if i not in before]
    removed = [i for i in previous if i not in after]
    core.event(
        group,
        EventType.EXPECTED_MEMBERS_CHANGED,
        count=len(expected),
        added=added[:EVENT_MAX_IDS],
        added_count=len(added),
        removed=removed[:EVENT_MAX_IDS],
        removed_count=len(removed),
    )


def _set_expected(core: CoreState, group: Group, ids: tuple[InstanceId, ...]) -> None:
    group.set_expected_instance_ids(ids)
    maybe_complete_join_phase(core, group)  # a change re-evaluates a waiting join phase at once
