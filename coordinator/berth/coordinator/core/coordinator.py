"""The coordinator core's public face: one method per request kind, each framed as one call.

Every call takes the current time (``now_ms``) and, for requests that are answered through ``Effects``, the
adapter's ticket; it returns the call's ``Effects``. Reads (describe, list, fetch, expected members) answer
directly. Nothing here blocks, sleeps or reads a clock: the adapter (``http``) or a test drives time by
firing due timers. ``replay`` rebuilds groups from persisted records; ``on_loaded`` then arms their sessions
as Kafka's reload does (no rebalance, except a group over a lowered ``group_max_size``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Concatenate, ParamSpec

from berth.coordinator.core import admin, expiry, join, membership, offsets, ownership, rebalance
from berth.coordinator.core.config import CoordinatorConfig
from berth.coordinator.core.effects import Effects
from berth.coordinator.core.events import RebalanceCause
from berth.coordinator.core.group import Group
from berth.coordinator.core.ownership import OwnerRefusal
from berth.coordinator.core.records import (
    ExpectedMembersRecord,
    GroupDeltaRecord,
    GroupRecord,
    OffsetRecord,
    Record,
    RecordFormatError,
    apply_delta,
    group_from_record,
)
from berth.coordinator.core.state import (
    CompleteJoin,
    CoreState,
    ExpireGroups,
    InitialRebalanceDelay,
    SessionExpiry,
    SyncExpiry,
    TimerPayload,
    heartbeat_key,
    join_key,
    sync_key,
)
from berth.coordinator.core.timers import DueTimer
from berth.coordinator.protocol import (
    FETCH_DEFAULT_LIMIT,
    DescribeResponse,
    Error,
    ExpectedMembersResponse,
    GroupId,
    GroupOwner,
    HeartbeatRequest,
    InstanceId,
    JoinRequest,
    JoinResponse,
    LeaveRequest,
    ListResponse,
    MemberId,
    OffsetCommitRequest,
    OffsetFetchResponse,
    SyncRequest,
    SyncResponse,
    TopicPartition,
)

P = ParamSpec("P")


class Coordinator(CoreState):
    def __init__(self, config: CoordinatorConfig | None = None, new_uuid: Callable[[], str] | None = None) -> None:
        super().__init__(config or CoordinatorConfig(), new_uuid)

    def _call(
        self, now_ms: int, handler: Callable[Concatenate[CoreState, P], None], *args: P.args, **kwargs: P.kwargs
    ) -> Effects:
        """Frame one call: ``handler(self, *args)`` at ``now_ms``, returning everything it asked for."""
        self.begin(now_ms)
        handler(self, *args, **kwargs)
        return self.finish()

    # --------------------------------------------------------------------------------- group protocol
    # ``version`` is the request's API version, resolved by the adapter (an absent one is the newest).

    # ``tenant``: the non-admin token the request came with (None: an admin's, or no tokens): a group the call creates
    # counts towards that tenant's bounds (``bounds``, docs/api.md §6).

    def join(
        self,
        group_id: GroupId,
        req: JoinRequest,
        version: int,
        ticket: int,
        now_ms: int,
        client_host: str = "",
        tenant: str | None = None,
    ) -> Effects:
        return self._call(now_ms, join.handle_join, group_id, req, version, ticket, client_host, tenant)

    def sync(self, group_id: GroupId, req: SyncRequest, version: int, ticket: int, now_ms: int) -> Effects:
        return self._call(now_ms, membership.handle_sync, group_id, req, version, ticket)

    def heartbeat(self, group_id: GroupId, req: HeartbeatRequest, version: int, ticket: int, now_ms: int) -> Effects:
        # The hottest call, framed by hand: a heartbeat only replies, unless it journals a fenced member.
        self.now_ms = now_ms
        error = membership.heartbeat(self, group_id, req)
        if self._events is None:
            return Effects([(ticket, membership.HEARTBEAT_ANSWERS[error])])
        self.reply(ticket, membership.HEARTBEAT_ANSWERS[error])
        return self.finish()

    def leave(self, group_id: GroupId, req: LeaveRequest, version: int, ticket: int, now_ms: int) -> Effects:
        return self._call(now_ms, membership.handle_leave, group_id, req, version, ticket)

    def commit_offsets(
        self,
        group_id: GroupId,
        req: OffsetCommitRequest,
        version: int,
        ticket: int,
        now_ms: int,
        tenant: str | None = None,
    ) -> Effects:
        return self._call(now_ms, offsets.handle_commit, group_id, req, version, ticket, tenant)

    def fetch_offsets(
        self,
        group_id: GroupId,
        topics: tuple[str, ...] | None = None,
        after: TopicPartition | None = None,
        limit: int = FETCH_DEFAULT_LIMIT,
    ) -> OffsetFetchResponse:
        """One page of the group's offsets (``next``: the cursor of the rest, docs/api.md §4)."""
        return offsets.fetch_offsets(self, group_id, topics, after, limit)

    # ------------------------------------------------------------------------------------------ admin

    def describe(self, group_id: GroupId) -> DescribeResponse:
        return admin.describe_group(self, group_id)

    def list_groups(self, states: Iterable[str] = ()) -> ListResponse:
        return admin.list_groups(self, states)

    def delete_group(self, group_id: GroupId, ticket: int, now_ms: int) -> Effects:
        return self._call(now_ms, admin.handle_delete, group_id, ticket)

    def get_expected_members(self, group_id: GroupId) -> ExpectedMembersResponse:
        return admin.get_expected_members(self, group_id)

    def put_expected_members(self, group_id: GroupId, ids: Iterable[InstanceId], ticket: int, now_ms: int) -> Effects:
        return self._call(now_ms, admin.handle_put_expected_members, group_id, tuple(ids), ticket)

    def delete_expected_members(self, group_id: GroupId, ticket: int, now_ms: int) -> Effects:
        return self._call(now_ms, admin.handle_put_expected_members, group_id, (), ticket)

    # ------------------------------------------------------------------------------------------ owners
    # The refusals are pure queries; the adapter asks right before the call, in the same turn of its loop.

    def owner_assertion_refusal(self, group_id: GroupId, uid: str) -> OwnerRefusal | None:
        return ownership.assertion_refusal(self, group_id, uid)

    def owner_claim_refusal(self, group_id: GroupId, uid: str, adopt: bool) -> OwnerRefusal | None:
        return ownership.claim_refusal(self, group_id, uid, adopt)

    def owner_release_refusal(self, group_id: GroupId, uid: str) -> OwnerRefusal | None:
        return ownership.release_refusal(self, group_id, uid)

    def claim_owner(self, group_id: GroupId, owner: GroupOwner, adopt: bool, ticket: int, now_ms: int) -> Effects:
        return self._call(now_ms, ownership.handle_claim, group_id, owner, adopt, ticket)

    def release_owner(self, group_id: GroupId, uid: str, ticket: int, now_ms: int) -> Effects:
        return self._call(now_ms, ownership.handle_release, group_id, uid, ticket)

    # ----------------------------------------------------------------------------------- time, writes

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def pop_due_timer(self, now_ms: int) -> DueTimer[TimerPayload] | None:
        return self.timers.pop_due(now_ms)

    def run_timer(self, due: DueTimer[TimerPayload], now_ms: int) -> Effects:
        return self._call(now_ms, _dispatch_timer, due)

    def fire_due_timers(self, now_ms: int) -> Effects:
        """Run every timer due at ``now_ms`` in deadline order (the real-clock driver's path)."""
        fx = Effects()
        while (due := self.pop_due_timer(now_ms)) is not None:
            fx.extend(self.run_timer(due, now_ms))
        return fx

    def on_write_done(self, token: int, ok: bool, now_ms: int) -> Effects:
        """The adapter reports a write durable (``ok``) or failed; run what the call left waiting on it."""
        return self._call(now_ms, CoreState.run_continuations, token, ok)

    def discard_write(self, token: int) -> None:
        """Forget what a call left waiting on its write, without running it: the adapter reloads the write's groups
        from the store instead (``unload_group``, ``load_group``), which knows what became durable."""
        self.drop_continuations(token)

    def unload_group(self, group_id: GroupId, now_ms: int) -> Effects:
        """Stop holding the group, its offsets and its timers; answer its parked joins and syncs
        COORDINATOR_NOT_AVAILABLE. A write of the group failed, so memory may hold what the store does not: the
        adapter answers the group's other requests the same way until ``load_group`` brings it back."""
        return self._call(now_ms, _unload_group, group_id)

    def load_group(self, group_id: GroupId, records: Iterable[Record], now_ms: int) -> Effects:
        """Bring one group back from its persisted records (after ``unload_group``), as a load would: sessions start
        again from now, no rebalance."""
        self.now_ms = now_ms
        for record in records:
            if record.group_id != group_id:
                raise RecordFormatError(f"group {group_id!r}: a record of group {record.group_id!r} in its reload")
            self.replay(record)
        return self._call(now_ms, _on_group_loaded, group_id)

    def shutdown(self, now_ms: int) -> Effects:
        """Answer every parked join and sync COORDINATOR_NOT_AVAILABLE (docs/api.md §10, SIGTERM)."""
        return self._call(now_ms, _answer_all_parked)

    # -------------------------------------------------------------------------------------------- load

    def replay(self, record: Record) -> None:
        """Apply one persisted record (Kafka's replay); call ``on_loaded`` after the last one."""
        if isinstance(record, GroupRecord):
            previous = self.forget(record.group_id)
            if record.value is not None:
                group = group_from_record(record, self.now_ms)
                if previous is not None:
                    group.set_expected_instance_ids(previous.expected_instance_ids)
                    group.usage = previous.usage  # its offsets are the group id's, whichever record came last
                self.register(group)
            elif previous is not None:
                self.offsets.pop(record.group_id, None)  # as the delete that wrote the tombstone did
        elif isinstance(record, GroupDeltaRecord):
            existing = self.groups.get(record.group_id)
            if existing is None:
                raise RecordFormatError(f"group {record.group_id!r}: a member delta without its group")
            apply_delta(existing, record, self.now_ms)
        elif isinstance(record, OffsetRecord):
            offsets.apply_offset(self, record)  # an offset of a group without a record makes a simple group
        elif isinstance(record, ExpectedMembersRecord):
            existing = self.groups.get(record.group_id)
            if existing is None and not record.group_instance_ids:
                return
            if existing is None:
                existing = Group(record.group_id, self.now_ms)
                self.register(existing)
            existing.set_expected_instance_ids(record.group_instance_ids)

    def load(self, records: Iterable[Record], now_ms: int) -> Effects:
        self.now_ms = now_ms
        for record in records:
            self.replay(record)
        return self._call(now_ms, _on_loaded)

    # ----------------------------------------------------------------------------------------- metrics

    def member_count(self) -> int:
        return sum(len(g.members) for g in self.groups.values())

    def groups_by_state(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for group in self.groups.values():
            counts[group.state.value] = counts.get(group.state.value, 0) + 1
        return counts


def _dispatch_timer(core: CoreState, due: DueTimer[TimerPayload]) -> None:
    key = due.key
    assert isinstance(key, tuple)
    payload = due.payload
    if isinstance(payload, ExpireGroups):
        expiry.expire_groups(core)
        return
    group_id: GroupId = key[1]
    if isinstance(payload, SessionExpiry):
        rebalance.expire_heartbeat(core, group_id, MemberId(key[2]))
        return
    group = core.groups.get(group_id)
    if group is None:
        return
    if isinstance(payload, CompleteJoin):
        rebalance.complete_join(core, group)
    elif isinstance(payload, InitialRebalanceDelay):
        rebalance.try_complete_initial_rebalance_else_schedule(core, group, payload.delay_ms, payload.remaining_ms)
    elif isinstance(payload, SyncExpiry):
        rebalance.expire_pending_sync(core, group, payload.generation_id)


def _on_loaded(core: CoreState) -> None:
    expiry.schedule_expiry(core)
    for group in core.groups.values():
        _arm_loaded_group(core, group)


def _on_group_loaded(core: CoreState, group_id: GroupId) -> None:
    group = core.groups.get(group_id)
    if group is not None:
        _arm_loaded_group(core, group)


def _arm_loaded_group(core: CoreState, group: Group) -> None:
    """What a load does for each group: every member's session starts now (Kafka's reload)."""
    for member in group.members.values():
        member.last_heard_ms = core.now_ms
        rebalance.reschedule_heartbeat(core, group, member)
    max_size = core.config.group_max_size
    if max_size is not None and len(group.members) > max_size:
        # The max size was lowered since the group formed: rebalance so the surplus members are turned
        # away as they rejoin (after a chance to commit offsets).
        rebalance.prepare_rebalance(core, group, RebalanceCause.GROUP_MAX_SIZE)


def _unload_group(core: CoreState, group_id: GroupId) -> None:
    group = core.groups.get(group_id)
    if group is not None:
        _answer_parked(core, group)
        core.cancel(join_key(group_id))
        core.cancel(sync_key(group_id))
        for member_id in [*group.members, *group.pending_join_members]:
            core.cancel(heartbeat_key(group_id, member_id))
        core.forget(group_id)
    core.offsets.pop(group_id, None)


def _answer_all_parked(core: CoreState) -> None:
    for group in core.groups.values():
        _answer_parked(core, group)


def _answer_parked(core: CoreState, group: Group) -> None:
    for member in group.members.values():
        ticket = group.take_join_ticket(member)
        if ticket is not None:
            core.reply(ticket, JoinResponse(Error.COORDINATOR_NOT_AVAILABLE, member_id=member.member_id))
        ticket = group.take_sync_ticket(member)
        if ticket is not None:
            core.reply(ticket, SyncResponse(Error.COORDINATOR_NOT_AVAILABLE))
