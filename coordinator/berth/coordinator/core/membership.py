"""SyncGroup (14), Heartbeat (12) and LeaveGroup (13), as Kafka's classic coordinator handles them.

Sync: the leader's assignment is persisted before anyone hears it (the group turns Stable only then).
Heartbeat: moves the member's session deadline (O(1), see ``timers``) and writes nothing, except the journal
event of a fenced member, once per episode (docs/api.md §8).
Leave: a batch of member ids and/or instance ids (KIP-345), with per-member results; an entry with an empty
member id and an instance id is the admin "remove members" path. A group that does not exist answers NONE at
the top level and UNKNOWN_MEMBER_ID for each member, as Kafka does.
"""

from __future__ import annotations

from berth.coordinator.core.bounds import assignment_refused
from berth.coordinator.core.events import EventType, LeaveVia, RebalanceCause
from berth.coordinator.core.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, Group
from berth.coordinator.core.journal_bounds import assignment_stored_fields
from berth.coordinator.core.rebalance import (
    complete_stored_assignment,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    remove_current_member,
    remove_pending_sync_member,
    reschedule_heartbeat,
    reset_and_propagate_assignment_with_error,
    supersede_parked_sync,
    validate_member,
)
from berth.coordinator.core.records import new_group_record
from berth.coordinator.core.state import CoreState, heartbeat_key
from berth.coordinator.protocol import (
    SYNC_PROTOCOL_FIELDS_VERSION,
    Error,
    GroupId,
    HeartbeatRequest,
    HeartbeatResponse,
    InstanceId,
    LeaveMemberResult,
    LeaveRequest,
    LeaveResponse,
    MemberId,
    SyncRequest,
    SyncResponse,
    group_id_too_long,
)

# ------------------------------------------------------------------------------------------------- sync


def _protocol_inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def handle_sync(core: CoreState, group_id: GroupId, req: SyncRequest, version: int, ticket: int) -> None:
    if group_id_too_long(group_id):
        core.reply(ticket, SyncResponse(Error.INVALID_GROUP_ID))
        return
    if version >= SYNC_PROTOCOL_FIELDS_VERSION and (req.protocol_type is None or req.protocol_name is None):
        core.reply(ticket, SyncResponse(Error.INCONSISTENT_GROUP_PROTOCOL))  # KIP-559, checked by Kafka's API layer
        return
    group = core.groups.get(group_id)
    if group is None or group.state is EMPTY:
        core.reply(ticket, SyncResponse(Error.UNKNOWN_MEMBER_ID))
        return
    error = validate_member(core, group, req.member_id, req.group_instance_id)
    if error is None and req.generation_id != group.generation_id:
        error = Error.ILLEGAL_GENERATION
    if error is None and (
        _protocol_inconsistent(req.protocol_type, group.protocol_type)
        or _protocol_inconsistent(req.protocol_name, group.protocol_name)
    ):
        error = Error.INCONSISTENT_GROUP_PROTOCOL
    if error is not None:
        core.reply(ticket, SyncResponse(error))
        return

    member = group.members[req.member_id]
    member.last_heard_ms = core.now_ms
    if group.state is PREPARING_REBALANCE:
        core.reply(ticket, SyncResponse(Error.REBALANCE_IN_PROGRESS))
    elif group.state is COMPLETING_REBALANCE:
        supersede_parked_sync(core, member)
        member.sync_ticket = ticket
        remove_pending_sync_member(core, group, req.member_id)
        if group.is_leader(req.member_id):
            store_leader_assignment(core, group, req)
    elif group.state is STABLE:
        # A Stable sync returns the stored assignment and, as in the Java coordinator, leaves the session alone.
        remove_pending_sync_member(core, group, req.member_id)
        core.reply(
            ticket,
            SyncResponse(
                Error.NONE,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                assignment=member.assignment,
            ),
        )


def store_leader_assignment(core: CoreState, group: Group, req: SyncRequest) -> None:
    """Persist the leader's assignment; the group turns Stable and everyone hears it once it is durable."""
    given = {a.member_id: a.assignment for a in req.assignments}
    assignment = {member_id: given.get(member_id, b"") for member_id in group.members}
    generation_id = group.generation_id
    if assignment_refused(core, group, assignment):
        # Kafka: a group record over message.max.bytes fails its append (RECORD_TOO_LARGE), which the group
        # coordinator answers UNKNOWN_SERVER_ERROR to every member before it rebalances; nothing is stored.
        reset_and_propagate_assignment_with_error(core, group, Error.UNKNOWN_SERVER_ERROR)
        maybe_prepare_rebalance_or_complete_join(core, group, RebalanceCause.PERSIST_FAILURE)
        return
    core.persist(new_group_record(group, assignment))
    core.event(
        group,
        EventType.ASSIGNMENT_STORED,
        member_id=req.member_id,
        **assignment_stored_fields(group.members.values(), assignment, core.config.journal_event_max_bytes),
    )

    def still_waiting() -> bool:
        # Another member may have started a rebalance while the write was in flight.
        return (
            core.groups.get(group.group_id) is group
            and group.state is COMPLETING_REBALANCE
            and group.generation_id == generation_id
        )

    def on_persisted() -> None:
        if still_waiting():
            complete_stored_assignment(core, group, assignment)

    def on_failed() -> None:
        if still_waiting():
            reset_and_propagate_assignment_with_error(core, group, Error.COORDINATOR_NOT_AVAILABLE)
            maybe_prepare_rebalance_or_complete_join(core, group, RebalanceCause.PERSIST_FAILURE)

    core.when_persisted(on_persisted)
    core.when_persist_failed(on_failed)


# -------------------------------------------------------------------------------------------- heartbeat


HEARTBEAT_ANSWERS = {error: HeartbeatResponse(error) for error in Error}  # never changed: made once


def heartbeat(core: CoreState, group_id: GroupId, req: HeartbeatRequest) -> Error:
    """Kafka's classic heartbeat; the only effect besides the session timer is journaling a fenced member."""
    group = core.groups.get(group_id)
    if group is None:
        return Error.INVALID_GROUP_ID if group_id_too_long(group_id) else Error.UNKNOWN_MEMBER_ID
    error = validate_member(core, group, req.member_id, req.group_instance_id)
    if error is not None:
        return error
    if req.generation_id != group.generation_id:
        return Error.ILLEGAL_GENERATION
    if group.state is EMPTY:
        return Error.UNKNOWN_MEMBER_ID
    member = group.members[req.member_id]
    member.last_heard_ms = core.now_ms
    reschedule_heartbeat(core, group, member)
    if group.state is PREPARING_REBALANCE:
        return Error.REBALANCE_IN_PROGRESS
    return Error.NONE


# ------------------------------------------------------------------------------------------------ leave


def handle_leave(core: CoreState, group_id: GroupId, req: LeaveRequest, version: int, ticket: int) -> None:
    if group_id_too_long(group_id):
        core.reply(ticket, LeaveResponse(Error.INVALID_GROUP_ID))
        return
    leaving = req.leaving()
    group = core.groups.get(group_id)
    if group is None:
        # Kafka: no such group means no such member, for each of them; the request as such is fine.
        unknown = tuple(LeaveMemberResult(m.member_id, m.group_instance_id, Error.UNKNOWN_MEMBER_ID) for m in leaving)
        core.reply(ticket, LeaveResponse(Error.NONE, members=unknown))
        return
    results = tuple(leave_one(core, group, identity.member_id, identity.group_instance_id) for identity in leaving)
    if any(r.error == Error.NONE for r in results):
        if group.state in (STABLE, COMPLETING_REBALANCE):
            maybe_prepare_rebalance_or_complete_join(core, group, RebalanceCause.MEMBER_LEFT)
        elif group.state is PREPARING_REBALANCE:
            maybe_complete_join_phase(core, group)
    core.reply(ticket, LeaveResponse(Error.NONE, members=results))


def leave_one(core: CoreState, group: Group, member_id: MemberId, instance_id: InstanceId | None) -> LeaveMemberResult:
    if member_id == "":
        # Admin removal by instance id (KIP-345's removeMembersFromConsumerGroup).
        static_member_id = group.static_member_id(instance_id) if instance_id is not None else None
        if static_member_id is None:
            return LeaveMemberResult(member_id, instance_id, Error.UNKNOWN_MEMBER_ID)
        remove_current_member(core, group, group.members[static_member_id])
        core.event(
            group, EventType.MEMBER_LEFT, member_id=static_member_id, group_instance_id=instance_id, via=LeaveVia.ADMIN
        )
        return LeaveMemberResult(member_id, instance_id, Error.NONE)
    if group.is_pending(member_id):
        group.remove(member_id)
        core.pending_ids.pop((group.group_id, member_id), None)
        core.cancel(heartbeat_key(group.group_id, member_id))
        core.event(group, EventType.MEMBER_LEFT, member_id=member_id, group_instance_id=instance_id, via=LeaveVia.LEAVE)
        return LeaveMemberResult(member_id, instance_id, Error.NONE)
    error = validate_member(core, group, member_id, instance_id)
    if error is not None:
        return LeaveMemberResult(member_id, instance_id, error)
    member = group.members[member_id]
    # A static member leaving by member id alone is the KIP-345 downgrade path: its instance mapping goes too.
    remove_current_member(core, group, member)
    core.event(
        group,
        EventType.MEMBER_LEFT,
        member_id=member_id,
        group_instance_id=member.group_instance_id,
        via=LeaveVia.LEAVE,
    )
    return LeaveMemberResult(member_id, instance_id, Error.NONE)
