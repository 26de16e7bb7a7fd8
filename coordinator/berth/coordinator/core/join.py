"""JoinGroup (API 11): Kafka's classicGroupJoin decision table, KIP-345 static members, KIP-394 pending ids,
KIP-814 SkipAssignment, and Berth's group creation write.

The six member.id x group.instance.id cases of KIP-345's closing comments map to:
known id (dynamic or static) -> ``join_existing_member``; unknown non-empty id -> UNKNOWN_MEMBER_ID (from
``validate_member``); empty id + no instance id -> MEMBER_ID_REQUIRED (v4+, ``join_new_dynamic_member``);
empty id + instance id -> a new static member, or a replacement of the instance's current member
(``join_new_static_member``).
"""

from __future__ import annotations

import msgspec

from berth.coordinator.core.bounds import join_refused, make_room_for_pending, note_pending, refuse_new_group
from berth.coordinator.core.events import EventType, LeaveVia, RebalanceCause
from berth.coordinator.core.group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Group,
)
from berth.coordinator.core.member import Member
from berth.coordinator.core.rebalance import (
    fence_parked_requests,
    journal_fenced,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    prepare_rebalance,
    reschedule_heartbeat,
    supersede_parked_join,
    validate_member,
)
from berth.coordinator.core.records import new_empty_group_record, new_static_replacement_record
from berth.coordinator.core.state import SESSION_EXPIRY, CoreState, heartbeat_key, join_key, sync_key
from berth.coordinator.protocol import (
    JOIN_MEMBER_ID_REQUIRED_VERSION,
    JOIN_SKIP_ASSIGNMENT_VERSION,
    Error,
    GroupId,
    JoinRequest,
    JoinResponse,
    MemberId,
    group_id_too_long,
)


class Join(msgspec.Struct, frozen=True, gc=False):
    """A join as the core handles it: the request and what the adapter knows about it."""

    group_id: GroupId
    request: JoinRequest
    version: int
    client_host: str


def handle_join(
    core: CoreState, group_id: GroupId, req: JoinRequest, version: int, ticket: int, host: str, tenant: str | None
) -> None:
    cfg = core.config
    if group_id_too_long(group_id):
        core.reply(ticket, JoinResponse(Error.INVALID_GROUP_ID, member_id=req.member_id))
        return
    if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
        core.reply(ticket, JoinResponse(Error.INVALID_SESSION_TIMEOUT, member_id=req.member_id))
        return

    join = Join(group_id, req, version, host)
    is_unknown_member = req.member_id == ""
    group = core.groups.get(group_id)
    is_new_group = group is None
    if group is None and not is_unknown_member:
        core.reply(ticket, JoinResponse(Error.UNKNOWN_MEMBER_ID, member_id=req.member_id))
        return
    if join_refused(core, group, req, tenant):
        core.reply(ticket, JoinResponse(Error.GROUP_MAX_SIZE_REACHED, member_id=req.member_id))
        return
    if group is None:
        if refuse_new_group(core, tenant):
            core.reply(ticket, JoinResponse(Error.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id))
            return
        group = core.new_group(group_id, tenant)

    if not accept_joining_member(core, group, req.member_id):
        removed = group.remove(req.member_id)
        if removed is not None:
            core.cancel(heartbeat_key(group.group_id, removed.member_id))
            core.event(
                group,
                EventType.MEMBER_LEFT,
                member_id=removed.member_id,
                group_instance_id=removed.group_instance_id,
                via=LeaveVia.GROUP_MAX_SIZE,
            )
        core.reply(ticket, JoinResponse(Error.GROUP_MAX_SIZE_REACHED))
    elif is_unknown_member:
        join_new_member(core, join, group, ticket)
    else:
        join_existing_member(core, join, group, ticket)

    if is_new_group and not core.call_persists_records:
        persist_new_group(core, group, ticket)


def accept_joining_member(core: CoreState, group: Group, member_id: MemberId) -> bool:
    """KIP-389: new members are accepted only up to ``group_max_size``."""
    max_size = core.config.group_max_size
    if max_size is None or group.state in (EMPTY, DEAD):
        return True
    member = group.members.get(member_id)
    if group.state is PREPARING_REBALANCE:
        # Counting members awaiting the join (not the group size, which may exceed a lowered max) lets the
        # last members to rejoin be the ones turned away.
        return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < max_size
    return member is not None or len(group.members) < max_size


def persist_new_group(core: CoreState, group: Group, ticket: int) -> None:
    """A group is persisted at creation (Java coordinator); if that write fails the group never existed."""
    core.persist(new_empty_group_record(group))
    held = core.withdraw_reply(ticket)

    def on_persisted() -> None:
        if held is not None:
            core.reply(ticket, held)

    def on_failed() -> None:
        if core.groups.get(group.group_id) is group:
            core.forget(group.group_id)
            core.cancel(join_key(group.group_id))
            core.cancel(sync_key(group.group_id))
            for member_id in [*group.members, *group.pending_join_members]:
                core.cancel(heartbeat_key(group.group_id, member_id))
            for member in group.members.values():
                parked = group.take_join_ticket(member)
                if parked is not None:
                    core.reply(parked, JoinResponse(Error.COORDINATOR_NOT_AVAILABLE, member_id=member.member_id))
        if isinstance(held, JoinResponse):
            core.reply(ticket, JoinResponse(Error.COORDINATOR_NOT_AVAILABLE, member_id=held.member_id))

    core.when_persisted(on_persisted)
    core.when_persist_failed(on_failed)


def join_new_member(core: CoreState, join: Join, group: Group, ticket: int) -> None:
    req = join.request
    if not group.supports_protocols(req.protocol_type, req.protocol_names()):
        core.reply(ticket, JoinResponse(Error.INCONSISTENT_GROUP_PROTOCOL))
        return
    new_member_id = core.generate_member_id(req.client_id, req.group_instance_id)
    if req.group_instance_id is not None:
        join_new_static_member(core, join, group, new_member_id, ticket)
    else:
        join_new_dynamic_member(core, join, group, new_member_id, ticket)


def join_new_static_member(core: CoreState, join: Join, group: Group, new_member_id: MemberId, ticket: int) -> None:
    instance_id = join.request.group_instance_id
    assert instance_id is not None
    existing_member_id = group.static_member_id(instance_id)
    if existing_member_id is not None:
        replace_static_member_then_rebalance_or_complete_join(
            core, join, group, existing_member_id, new_member_id, ticket
        )
    else:
        add_member_then_rebalance_or_complete_join(core, join, group, new_member_id, ticket)


def join_new_dynamic_member(core: CoreState, join: Join, group: Group, new_member_id: MemberId, ticket: int) -> None:
    req = join.request
    if join.version < JOIN_MEMBER_ID_REQUIRED_VERSION:
        add_member_then_rebalance_or_complete_join(core, join, group, new_member_id, ticket)
        return
    # Berth: KIP-394 bounds pending ids only by their expiry; a flood of anonymous joins pushes out its own oldest
    # ids instead (``bounds``), and an id lives at most ``pending_member_timeout_ms``.
    make_room_for_pending(core, group)
    group.add_pending(new_member_id)
    note_pending(core, group.group_id, new_member_id)
    lifetime = min(req.session_timeout_ms, core.config.pending_member_timeout_ms)
    core.schedule(heartbeat_key(group.group_id, new_member_id), lifetime, SESSION_EXPIRY)
    core.event(group, EventType.MEMBER_ID_REQUIRED, member_id=new_member_id, group_instance_id=None)
    core.reply(ticket, JoinResponse(Error.MEMBER_ID_REQUIRED, member_id=new_member_id))


def join_existing_member(core: CoreState, join: Join, group: Group, ticket: int) -> None:
    req = join.request
    member_id = req.member_id
    if not group.supports_protocols(req.protocol_type, req.protocol_names()):
        core.reply(ticket, JoinResponse(Error.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        return
    if group.is_pending(member_id):
        if req.group_instance_id is not None:
            # Kafka raises IllegalStateException here (pending ids are only handed to dynamic members),
            # which reaches the client as UNKNOWN_SERVER_ERROR with nothing changed.
            core.reply(ticket, JoinResponse(Error.UNKNOWN_SERVER_ERROR, member_id=member_id))
            return
        core.pending_ids.pop((group.group_id, member_id), None)
        add_member_then_rebalance_or_complete_join(core, join, group, member_id, ticket)
        return

    error = validate_member(core, group, member_id, req.group_instance_id)
    if error is not None:
        core.reply(ticket, JoinResponse(error, member_id=member_id))
        return

    member = group.members[member_id]
    member.last_heard_ms = core.now_ms
    metadata_change = RebalanceCause.METADATA_CHANGE
    if group.state is PREPARING_REBALANCE:
        update_member_then_rebalance_or_complete_join(core, req, group, member, ticket, metadata_change)
    elif group.state is COMPLETING_REBALANCE:
        if member.matches(req.protocols):
            # The member lost the join response: hand it the current generation again.
            core.reply(ticket, current_generation_response(group, member_id, with_members=group.is_leader(member_id)))
        else:
            update_member_then_rebalance_or_complete_join(core, req, group, member, ticket, metadata_change)
    elif group.state is STABLE:
        if group.is_leader(member_id):
            # The leader rejoins to make the group notice changes that affect assignment (topic metadata).
            cause = RebalanceCause.LEADER_REJOIN
            update_member_then_rebalance_or_complete_join(core, req, group, member, ticket, cause)
        elif not member.matches(req.protocols):
            update_member_then_rebalance_or_complete_join(core, req, group, member, ticket, metadata_change)
        else:
            core.reply(ticket, current_generation_response(group, member_id, with_members=False))
    else:
        core.reply(ticket, JoinResponse(Error.UNKNOWN_MEMBER_ID, member_id=member_id))


def current_generation_response(group: Group, member_id: MemberId, with_members: bool) -> JoinResponse:
    return JoinResponse(
        Error.NONE,
        member_id=member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        members=group.current_join_members() if with_members else (),
    )


def update_member_then_rebalance_or_complete_join(
    core: CoreState, req: JoinRequest, group: Group, member: Member, ticket: int, cause: RebalanceCause
) -> None:
    supersede_parked_join(core, member)
    group.update_member(member, req.protocols, req.effective_rebalance_timeout_ms, req.session_timeout_ms, ticket)
    maybe_prepare_rebalance_or_complete_join(core, group, cause)


def add_member_then_rebalance_or_complete_join(
    core: CoreState, join: Join, group: Group, member_id: MemberId, ticket: int
) -> None:
    req = join.request
    member = Member(
        member_id,
        req.group_instance_id,
        req.client_id or "",
        join.client_host,
        req.effective_rebalance_timeout_ms,
        req.session_timeout_ms,
        req.protocol_type,
        req.protocols,
        last_heard_ms=core.now_ms,
    )
    member.is_new = True
    if group.state is PREPARING_REBALANCE and group.previous_state is EMPTY:
        group.new_member_added = True  # extends the initial rebalance delay
    group.add(member, ticket)
    # A parked new member cannot heartbeat and its disconnect goes unseen: bound its join instead.
    reschedule_heartbeat(core, group, member, core.config.new_member_join_timeout_ms)
    core.event(
        group,
        EventType.MEMBER_JOINED,
        member_id=member_id,
        group_instance_id=req.group_instance_id,
        static=req.group_instance_id is not None,
        client_id=req.client_id or "",
    )
    maybe_prepare_rebalance_or_complete_join(core, group, RebalanceCause.NEW_MEMBER)


def replace_static_member_then_rebalance_or_complete_join(
    core: CoreState, join: Join, group: Group, old_member_id: MemberId, new_member_id: MemberId, ticket: int
) -> None:
    """A static member restarted (empty member id, known instance id): swap in its new member id (KIP-345).

    In a Stable group whose selected protocol stays, this costs the same in a group of 10 or 10,000: the
    protocol vote is kept incrementally and only the swap is persisted (``new_static_replacement_record``).
    """
    req = join.request
    instance_id = req.group_instance_id
    assert instance_id is not None
    current_leader = group.leader_id
    old_member = group.members[old_member_id]
    offline_ms = core.now_ms - old_member.last_heard_ms
    fenced_parked = fence_parked_requests(core, group, old_member)
    new_member = group.replace_static_member(instance_id, old_member_id, new_member_id)
    if fenced_parked:
        journal_fenced(core, group, instance_id, old_member_id)
    core.cancel(heartbeat_key(group.group_id, old_member_id))
    reschedule_heartbeat(core, group, new_member)

    old_protocols = new_member.protocols
    old_rebalance_timeout_ms = new_member.rebalance_timeout_ms
    old_session_timeout_ms = new_member.session_timeout_ms
    group.update_member(new_member, req.protocols, req.effective_rebalance_timeout_ms, req.session_timeout_ms, ticket)
    new_member.last_heard_ms = core.now_ms

    def journal_replacement(rebalance: bool) -> None:
        core.event(
            group,
            EventType.STATIC_MEMBER_REPLACED,
            member_id=new_member_id,
            group_instance_id=instance_id,
            old_member_id=old_member_id,
            offline_ms=offline_ms,
            rebalance=rebalance,
        )

    if group.state is STABLE:
        if group.protocol_name == group.select_protocol():
            # The restart changes nothing the assignment depends on: no rebalance, just persist the new id.
            journal_replacement(rebalance=False)
            core.persist(new_static_replacement_record(group, old_member_id, new_member))
            skip_assignment_supported = join.version >= JOIN_SKIP_ASSIGNMENT_VERSION

            def on_persisted() -> None:
                if group.members.get(new_member_id) is not new_member or group.state is not STABLE:
                    return  # the group moved on meanwhile; the parked join completes with that rebalance
                # What the answer reveals besides the new member id: the generation and protocol (a Stable group
                # got them from a durable write: it turns Stable once its assignment is), and the leader. Unless
                # it is the member list or a leader replaced since the join (writes still in flight, maybe), all
                # of it is durable with this write, and the answer need not wait for the group's later writes.
                is_leader = group.is_leader(new_member_id)
                reply = (
                    core.reply
                    if is_leader or (skip_assignment_supported and group.leader_id != current_leader)
                    else core.reply_on_own_write
                )
                if skip_assignment_supported:
                    # KIP-814: a restarted static leader learns it leads, with the member list, but must not
                    # compute a new assignment.
                    response = msgspec.structs.replace(
                        current_generation_response(group, new_member_id, with_members=is_leader),
                        skip_assignment=is_leader,
                    )
                else:
                    # Before KIP-814 the restarted leader is not told it leads: old leader id, no member list.
                    response = JoinResponse(
                        Error.NONE,
                        member_id=new_member_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=current_leader or "",
                    )
                parked = group.take_join_ticket(new_member)
                if parked is not None:
                    reply(parked, response)

            def on_failed() -> None:
                still_parked = new_member.join_ticket == ticket
                if core.groups.get(group.group_id) is group and group.members.get(new_member_id) is new_member:
                    group.update_member(
                        new_member, old_protocols, old_rebalance_timeout_ms, old_session_timeout_ms, None
                    )
                    restored = group.replace_static_member(instance_id, new_member_id, old_member_id)
                    core.cancel(heartbeat_key(group.group_id, new_member_id))
                    reschedule_heartbeat(core, group, restored)
                if still_parked:
                    core.reply(
                        ticket,
                        JoinResponse(
                            Error.COORDINATOR_NOT_AVAILABLE,
                            generation_id=group.generation_id,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            leader=current_leader or "",
                        ),
                    )

            core.when_persisted(on_persisted)
            core.when_persist_failed(on_failed)
        else:
            journal_replacement(rebalance=group.can_rebalance())
            maybe_prepare_rebalance_or_complete_join(core, group, RebalanceCause.STATIC_REPLACEMENT)
    elif group.state is COMPLETING_REBALANCE:
        # The leader may already be assigning for the old member id: the new id would get nothing. Rebalance.
        journal_replacement(rebalance=True)
        prepare_rebalance(core, group, RebalanceCause.STATIC_REPLACEMENT)
    else:
        journal_replacement(rebalance=False)
        maybe_complete_join_phase(core, group)
