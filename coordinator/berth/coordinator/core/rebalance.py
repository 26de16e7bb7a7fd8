"""Member lifecycle and the rebalance machinery of a classic group (Kafka's GroupMetadataManager, classic part).

Names follow Kafka's so the port can be checked line by line: ``prepare_rebalance``,
``maybe_complete_join_phase``, ``complete_join``, ``expire_heartbeat``, ``expire_pending_sync`` ...
Berth's additions are marked: pre-registered instance ids gate early completion of a join phase (docs/api.md
§7), requests Kafka would leave unanswered are answered, and a fenced member is journaled once per episode
(docs/api.md §11).
"""

from __future__ import annotations

from berth.coordinator.core.events import EventType, ExpiryPhase, RebalanceCause
from berth.coordinator.core.group import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Group,
)
from berth.coordinator.core.journal_bounds import rebalance_completed_fields
from berth.coordinator.core.member import Member
from berth.coordinator.core.records import new_group_record
from berth.coordinator.core.state import (
    SESSION_EXPIRY,
    CompleteJoin,
    CoreState,
    InitialRebalanceDelay,
    SyncExpiry,
    heartbeat_key,
    join_key,
    sync_key,
)
from berth.coordinator.protocol import Error, GroupId, InstanceId, JoinResponse, MemberId, SyncResponse

FENCED_REASON = "a newer member joined with the same group.instance.id"

# ------------------------------------------------------------------------------------------ member checks


def validate_member(
    core: CoreState, group: Group, member_id: MemberId, group_instance_id: InstanceId | None
) -> Error | None:
    """Kafka's validateMember: the instance id must map to this member id, and the member must exist."""
    if group_instance_id is not None:
        existing = group.static_members.get(group_instance_id)
        if existing is None:
            return Error.UNKNOWN_MEMBER_ID
        if existing != member_id:
            journal_fenced(core, group, group_instance_id, member_id)
            count_fenced(core, group)
            return Error.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return Error.UNKNOWN_MEMBER_ID
    return None


def count_fenced(core: CoreState, group: Group, answers: int = 1) -> None:
    """Count answers carrying FENCED_INSTANCE_ID (``berth_fenced_members_total``, and the group's own count for its
    per-group series): every such answer, not once per episode as the journal does. Two increments, nothing more."""
    core.fenced_answers += answers
    group.fenced_answers += answers


def journal_fenced(core: CoreState, group: Group, group_instance_id: InstanceId, member_id: MemberId) -> None:
    """Journal a fenced member once per episode, not per request: a duplicate that keeps heartbeating with a
    superseded member id would otherwise turn every heartbeat into a durable write."""
    if group.note_fenced(group_instance_id, member_id):
        core.event(
            group,
            EventType.MEMBER_FENCED,
            member_id=member_id,
            group_instance_id=group_instance_id,
            reason=FENCED_REASON,
        )


def reschedule_heartbeat(core: CoreState, group: Group, member: Member, timeout_ms: int | None = None) -> None:
    timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
    core.timers.schedule(heartbeat_key(group.group_id, member.member_id), core.now_ms + timeout, SESSION_EXPIRY)


def supersede_parked_join(core: CoreState, member: Member) -> None:
    """Berth: a parked join replaced by a newer one from the same member is answered, not dropped."""
    if member.join_ticket is not None:
        core.reply(member.join_ticket, JoinResponse(Error.REBALANCE_IN_PROGRESS, member_id=member.member_id))


def supersede_parked_sync(core: CoreState, member: Member) -> None:
    if member.sync_ticket is not None:
        core.reply(member.sync_ticket, SyncResponse(Error.REBALANCE_IN_PROGRESS))


def fence_parked_requests(core: CoreState, group: Group, member: Member) -> bool:
    """Answer the parked join/sync of a member whose instance id was taken over (FENCED_INSTANCE_ID).

    Returns whether anything was answered; the caller journals the fence once the new member is in place.
    """
    parked_join = group.take_join_ticket(member)
    if parked_join is not None:
        core.reply(parked_join, JoinResponse(Error.FENCED_INSTANCE_ID, member_id=member.member_id))
    parked_sync = group.take_sync_ticket(member)
    if parked_sync is not None:
        core.reply(parked_sync, SyncResponse(Error.FENCED_INSTANCE_ID))
    answered = (parked_join is not None) + (parked_sync is not None)
    if answered:
        count_fenced(core, group, answered)
    return answered > 0


def answer_parked_of_removed_member(core: CoreState, group: Group, member: Member) -> None:
    """A removed member's parked join is answered UNKNOWN_MEMBER_ID (Kafka); so is its parked sync (Berth)."""
    ticket = group.take_join_ticket(member)
    if ticket is not None:
        core.reply(ticket, JoinResponse(Error.UNKNOWN_MEMBER_ID))
    ticket = group.take_sync_ticket(member)
    if ticket is not None:
        core.reply(ticket, SyncResponse(Error.UNKNOWN_MEMBER_ID))


# ------------------------------------------------------------------------------------ starting rebalances


def maybe_prepare_rebalance_or_complete_join(core: CoreState, group: Group, cause: RebalanceCause) -> None:
    if group.can_rebalance():
        prepare_rebalance(core, group, cause)
    else:
        maybe_complete_join_phase(core, group)


def prepare_rebalance(core: CoreState, group: Group, cause: RebalanceCause) -> None:
    if group.state is COMPLETING_REBALANCE:
        reset_and_propagate_assignment_with_error(core, group, Error.REBALANCE_IN_PROGRESS)
    remove_sync_expiration(core, group)
    is_initial = group.state is EMPTY
    if is_initial:
        delay = core.config.group_initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms() - delay, 0)
        core.schedule(join_key(group.group_id), delay, InitialRebalanceDelay(delay, remaining))
    group.transition_to(PREPARING_REBALANCE, core.now_ms)
    core.rebalances_by_cause[cause] += 1
    core.event(group, EventType.REBALANCE_STARTED, cause=cause)
    if is_initial:
        maybe_complete_join_phase(core, group)  # Berth: a fully joined pre-registered fleet forms at once
    else:
        maybe_complete_join_else_schedule(core, group)


def maybe_complete_join_else_schedule(core: CoreState, group: Group) -> None:
    if group.has_all_members_joined():
        complete_join(core, group)
    else:
        core.schedule(join_key(group.group_id), group.rebalance_timeout_ms(), CompleteJoin())


def maybe_complete_join_phase(core: CoreState, group: Group) -> None:
    """Complete the join phase early once everyone it waits for has joined.

    Kafka never completes an initial rebalance (entered from Empty) early: its delay chain runs out first.
    Berth: with expected instance ids registered, the phase also waits for every missing expected id
    (``has_all_members_joined``), and once they are all in, even an initial rebalance completes at once.
    """
    if group.state is not PREPARING_REBALANCE or not group.has_all_members_joined():
        return
    if group.previous_state is EMPTY and not group.has_expected_instance_ids:
        return
    complete_join(core, group)


def try_complete_initial_rebalance_else_schedule(
    core: CoreState, group: Group, delay_ms: int, remaining_ms: int
) -> None:
    if group.new_member_added and remaining_ms != 0:
        group.new_member_added = False
        new_delay = min(core.config.group_initial_rebalance_delay_ms, remaining_ms)
        new_remaining = max(remaining_ms - delay_ms, 0)  # sic: Kafka subtracts the previous delay
        core.schedule(join_key(group.group_id), new_delay, InitialRebalanceDelay(new_delay, new_remaining))
    elif group.has_expected_instance_ids and not group.has_all_members_joined():
        # Berth: a pre-registered fleet forms once, with every expected id, however slowly its pods start (a
        # StatefulSet starts them one at a time); only the rebalance timeout bounds that wait, as for a scale-up.
        core.schedule(join_key(group.group_id), max(remaining_ms, 1), CompleteJoin())
    else:
        complete_join(core, group)


# --------------------------------------------------------------------------------------- completing joins


def complete_join(core: CoreState, group: Group) -> None:
    """End the join phase: drop dynamic members that did not rejoin and start the next generation."""
    if group.state is not PREPARING_REBALANCE:
        return
    core.cancel(join_key(group.group_id))
    for member in [m for m in group.not_yet_rejoined() if not m.is_static]:
        group.remove(member.member_id)
        core.cancel(heartbeat_key(group.group_id, member.member_id))
        core.event(
            group,
            EventType.MEMBER_EXPIRED,
            member_id=member.member_id,
            group_instance_id=None,
            phase=ExpiryPhase.REBALANCE,
        )

    if not group.maybe_elect_new_joined_leader() and group.members:
        # Nobody rejoined, only absent static members remain: wait another rebalance timeout for them
        # (or for their sessions to expire) instead of forming a generation without anyone in it.
        core.schedule(join_key(group.group_id), group.rebalance_timeout_ms(), CompleteJoin())
        return

    group.init_next_generation(core.now_ms)
    if group.state is EMPTY:
        core.persist(new_group_record(group))
        core.event(group, EventType.GROUP_EMPTIED)
        return

    members = group.current_join_members()
    for member in group.members.values():
        ticket = group.take_join_ticket(member)
        if ticket is not None:
            is_leader = group.is_leader(member.member_id)
            core.reply(
                ticket,
                JoinResponse(
                    Error.NONE,
                    member_id=member.member_id,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=group.leader_id or "",
                    members=members if is_leader else (),
                ),
            )
        reschedule_heartbeat(core, group, member)
        member.is_new = False
        group.pending_sync_members.add(member.member_id)
    core.event(
        group,
        EventType.REBALANCE_COMPLETED,
        leader=group.leader_id,
        protocol_name=group.protocol_name,
        **rebalance_completed_fields(
            ((m.member_id, m.group_instance_id) for m in members), core.config.journal_event_max_bytes
        ),
    )
    schedule_pending_sync(core, group)


# ------------------------------------------------------------------------------------------- sync phase


def schedule_pending_sync(core: CoreState, group: Group) -> None:
    core.schedule(sync_key(group.group_id), group.rebalance_timeout_ms(), SyncExpiry(group.generation_id))


def remove_sync_expiration(core: CoreState, group: Group) -> None:
    group.pending_sync_members.clear()
    core.cancel(sync_key(group.group_id))


def remove_pending_sync_member(core: CoreState, group: Group, member_id: MemberId) -> None:
    group.pending_sync_members.discard(member_id)
    if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync_members:
        core.cancel(sync_key(group.group_id))


def expire_pending_sync(core: CoreState, group: Group, generation_id: int) -> None:
    if generation_id != group.generation_id or group.state not in (COMPLETING_REBALANCE, STABLE):
        return
    if not group.pending_sync_members:
        return
    for member_id in list(group.pending_sync_members):
        member = group.remove(member_id)
        core.cancel(heartbeat_key(group.group_id, member_id))
        if member is not None:
            answer_parked_of_removed_member(core, group, member)
            core.event(
                group,
                EventType.MEMBER_EXPIRED,
                member_id=member_id,
                group_instance_id=member.group_instance_id,
                phase=ExpiryPhase.SYNC,
            )
    prepare_rebalance(core, group, RebalanceCause.SYNC_TIMEOUT)


def propagate_assignment(core: CoreState, group: Group, error: Error) -> None:
    protocol_type = group.protocol_type if error == Error.NONE else None
    protocol_name = group.protocol_name if error == Error.NONE else None
    for member in group.members.values():
        ticket = group.take_sync_ticket(member)
        if ticket is not None:
            core.reply(
                ticket,
                SyncResponse(
                    error, protocol_type=protocol_type, protocol_name=protocol_name, assignment=member.assignment
                ),
            )
            # Kafka resets the session after answering a sync: an expiry that fired while the member
            # waited was ignored and scheduled nothing.
            reschedule_heartbeat(core, group, member)


def reset_and_propagate_assignment_with_error(core: CoreState, group: Group, error: Error) -> None:
    assert group.state is COMPLETING_REBALANCE, group
    for member in group.members.values():
        group.set_assignment(member, b"")
    propagate_assignment(core, group, error)


def set_and_propagate_assignment(core: CoreState, group: Group, assignment: dict[MemberId, bytes]) -> None:
    assert group.state is COMPLETING_REBALANCE, group
    for member in group.members.values():
        group.set_assignment(member, assignment.get(member.member_id, b""))
    propagate_assignment(core, group, Error.NONE)


def complete_stored_assignment(core: CoreState, group: Group, assignment: dict[MemberId, bytes]) -> None:
    set_and_propagate_assignment(core, group, assignment)
    group.transition_to(STABLE, core.now_ms)


# ------------------------------------------------------------------------------------------ expirations


def expire_heartbeat(core: CoreState, group_id: GroupId, member_id: MemberId) -> None:
    group = core.groups.get(group_id)
    if group is None:
        return
    if group.is_pending(member_id):
        core.pending_ids.pop((group_id, member_id), None)
        core.event(
            group, EventType.MEMBER_EXPIRED, member_id=member_id, group_instance_id=None, phase=ExpiryPhase.PENDING
        )
        remove_pending_member_and_update_group(core, group, member_id)
        return
    member = group.members.get(member_id)
    if member is None or member.has_satisfied_heartbeat():
        return
    phase = ExpiryPhase.NEW_MEMBER_JOIN if member.is_new else ExpiryPhase.SESSION
    remove_member_and_update_group(core, group, member, phase)


def remove_member_and_update_group(core: CoreState, group: Group, member: Member, phase: ExpiryPhase) -> None:
    """A member's time ran out: it goes, and the group rebalances without it."""
    answer_parked_of_removed_member(core, group, member)
    group.remove(member.member_id)
    core.cancel(heartbeat_key(group.group_id, member.member_id))
    core.event(
        group,
        EventType.MEMBER_EXPIRED,
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
        phase=phase,
        # How long it was silent: whether its process had been replaced by then is the operator's question.
        offline_ms=core.now_ms - member.last_heard_ms,
    )
    if group.state in (STABLE, COMPLETING_REBALANCE):
        maybe_prepare_rebalance_or_complete_join(core, group, RebalanceCause.MEMBER_EXPIRED)
    elif group.state is PREPARING_REBALANCE and group.has_all_members_joined():
        complete_join(core, group)


def remove_pending_member_and_update_group(core: CoreState, group: Group, member_id: MemberId) -> None:
    group.remove(member_id)
    if group.state is PREPARING_REBALANCE and group.has_all_members_joined():
        complete_join(core, group)


def remove_current_member(core: CoreState, group: Group, member: Member) -> None:
    """A member leaving (or removed by an admin): cancel its session and answer what it had parked."""
    core.cancel(heartbeat_key(group.group_id, member.member_id))
    answer_parked_of_removed_member(core, group, member)
    group.remove(member.member_id)
