"""A scenario harness over the pure coordinator core, in the style of Kafka's GroupMetadataManagerTestContext.

``Scenario`` owns a ``Coordinator`` with a manual clock (``now``) and deterministic member ids (the injected
``new_uuid`` counts ``u1``, ``u2``, ...), and drives it the way the HTTP adapter does:

- every request gets a ticket and a ``Handle``; a reply fills the handle (a ticket answered twice fails the
  test), so a parked join or sync is a handle that is not ``answered`` yet and can be queried later;
- every ``Write`` is "persisted" synchronously (``on_write_done(token, ok=True)``) right after the call that
  made it, and the continuation's effects are applied in turn; ``fail_next_writes(n)`` makes the next ``n``
  writes fail instead;
- the records and journal events of durable writes are collected (``records``, ``journal``; events get a
  ``seq`` like the store's), failed writes are kept apart (``failed_writes``), ``write_log`` keeps the order;
- ``advance(ms)`` is docs/api.md §9, the manual clock: it repeatedly pops the earliest timer due by the target (ties
  in scheduling order), sets ``now`` to its deadline, runs it, and finally sets ``now`` to the target;
- ``reload()`` is a restart on the same data dir: a fresh core loads every durable record.

No sleeps anywhere: time only moves through ``advance``. After every call the harness checks the cheap
invariants (``check_invariants``): one member per instance id and a static map that agrees with the members,
a leader that is a member, the awaiting-join and protocol-support counters, no ticket lost (every unanswered
request is a join or sync parked by a current member), and liveness (every member has a session timer or a
parked request, every pending id a timer). Every group state transition is checked against Kafka's
``ClassicGroupState`` table while ``transitions_observed`` is active (the package's conftest activates it for
every test).
"""

from __future__ import annotations

import base64
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from berth.coordinator.core import Coordinator, CoordinatorConfig, Group, GroupState, Record
from berth.coordinator.core.effects import Effects, JournalEvent, Response, Write
from berth.coordinator.core.member import Member
from berth.coordinator.core.records import GroupDeltaRecord, GroupRecord, MemberMetadata
from berth.coordinator.core.usage import offset_bytes
from berth.coordinator.protocol import (
    CommitPartition,
    CommitTopic,
    DeleteResponse,
    DescribeResponse,
    Error,
    ExpectedMembersResponse,
    GroupOwner,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinProtocol,
    JoinRequest,
    JoinResponse,
    LeaveRequest,
    LeaveResponse,
    ListResponse,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
    OwnerResponse,
    SyncAssignment,
    SyncRequest,
    SyncResponse,
    parse_fetch_cursor,
)

Protocol = JoinProtocol

GROUP = "g"
START_MS = 1_700_000_000_000
SESSION_MS = 10_000
REBALANCE_MS = 60_000
PROTOCOL_TYPE = "consumer"
RANGE = Protocol("range", b"range-subscription")
ROUNDROBIN = Protocol("roundrobin", b"roundrobin-subscription")
PROTOCOLS: tuple[Protocol, ...] = (RANGE, ROUNDROBIN)

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

#: Kafka's ClassicGroupState.validPreviousStates, written out independently of the core's copy.
KAFKA_VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    PREPARING: frozenset({STABLE, COMPLETING, EMPTY}),
    COMPLETING: frozenset({PREPARING}),
    STABLE: frozenset({COMPLETING}),
    EMPTY: frozenset({PREPARING}),
    DEAD: frozenset({STABLE, PREPARING, COMPLETING, EMPTY, DEAD}),
}


class _Unset:
    """Marks an argument the harness fills in from the group's current state."""


AUTO = _Unset()

R = TypeVar("R", bound=Response)


@dataclass
class Handle(Generic[R]):
    """One request sent to the core: answered at once, later (a parked long-poll), or never (a bug)."""

    ticket: int
    kind: str
    group_id: str
    request: object
    response_type: type[R]
    sent_ms: int
    response: R | None = None
    answered_ms: int | None = None

    @property
    def answered(self) -> bool:
        return self.response is not None

    @property
    def parked(self) -> bool:
        return self.response is None

    @property
    def result(self) -> R:
        assert self.response is not None, f"{self.kind} ticket {self.ticket} is still parked"
        return self.response

    @property
    def error(self) -> Error:
        return self.result.error

    def deliver(self, response: Response, now_ms: int) -> None:
        assert self.response is None, (
            f"{self.kind} ticket {self.ticket} answered twice: {self.response} then {response}"
        )
        assert isinstance(response, self.response_type), f"{self.kind} ticket {self.ticket} answered with {response!r}"
        self.response = response
        self.answered_ms = now_ms


@dataclass
class Formed:
    """A group brought to Stable by ``Scenario.form_group``: who is in it and what they were assigned."""

    group_id: str
    generation: int
    leader: str
    member_ids: list[str]
    instance_ids: list[str | None]
    assignments: dict[str, bytes]
    joins: list[Handle[JoinResponse]] = field(default_factory=list)

    def member(self, instance_id: str) -> str:
        return self.member_ids[self.instance_ids.index(instance_id)]

    def instance(self, member_id: str) -> str | None:
        return self.instance_ids[self.member_ids.index(member_id)]

    @property
    def followers(self) -> list[str]:
        return [m for m in self.member_ids if m != self.leader]


# ------------------------------------------------------------------------------------------ transitions

_transition_observers: list[Callable[[Group, GroupState, GroupState], None]] = []


@contextmanager
def transitions_observed() -> Iterator[None]:
    """Route every ``Group.transition_to`` through the live scenarios' observers (Kafka's table check)."""
    original = Group.transition_to

    def transition_to(self: Group, target: GroupState, now_ms: int) -> None:
        before = self.state
        original(self, target, now_ms)
        for observer in list(_transition_observers):
            observer(self, before, target)

    setattr(Group, "transition_to", transition_to)  # noqa: B010 - mypy refuses assigning to a method
    try:
        yield
    finally:
        setattr(Group, "transition_to", original)  # noqa: B010
        _transition_observers.clear()


# --------------------------------------------------------------------------------------------- scenario


class Scenario:
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        now: int = START_MS,
        check: bool = True,
        _uuids: Iterator[int] | None = None,
        **config_fields: Any,
    ) -> None:
        if config is None:
            config = CoordinatorConfig(**config_fields)
        else:
            assert not config_fields, "pass either a config or its fields"
        self.config = config
        self.now = now
        self.check = check
        self._uuids = _uuids if _uuids is not None else itertools.count(1)
        self.core = Coordinator(config, new_uuid=self._new_uuid)
        self._tickets = itertools.count(1)
        self.handles: dict[int, Handle[Any]] = {}
        self._parked: set[int] = set()
        self.records: list[Record] = []
        self.journal: list[JournalEvent] = []
        self.failed_writes: list[Write] = []
        self.write_log: list[tuple[Write, bool]] = []  # every write, in order, with whether it was durable
        self.shut_down = False
        self.transitions: list[tuple[str, GroupState, GroupState]] = []
        self._fail_next = 0
        _transition_observers.append(self._on_transition)

    def close(self) -> None:
        if self._on_transition in _transition_observers:
            _transition_observers.remove(self._on_transition)

    def _new_uuid(self) -> str:
        return f"u{next(self._uuids)}"

    def _on_transition(self, group: Group, before: GroupState, target: GroupState) -> None:
        if self.core.groups.get(group.group_id) is not group:
            return
        assert before in KAFKA_VALID_PREVIOUS_STATES[target], f"{group.group_id}: {before} -> {target}"
        self.transitions.append((group.group_id, before, target))

    # ------------------------------------------------------------------------------- driving the core

    def fail_next_writes(self, n: int = 1) -> None:
        """The next ``n`` writes the core hands over fail (the store could not make them durable)."""
        self._fail_next += n

    @property
    def writes_left_to_fail(self) -> int:
        return self._fail_next

    def _apply(self, fx: Effects) -> None:
        for ticket, response in fx.replies:
            handle = self.handles.get(ticket)
            assert handle is not None, f"reply to unknown ticket {ticket}: {response!r}"
            handle.deliver(response, self.now)
            self._parked.discard(ticket)
        for write in fx.writes:
            ok = self._fail_next == 0
            self.write_log.append((write, ok))
            if ok:
                self.records.extend(write.records)
                for event in write.events:
                    self.journal.append({"seq": len(self.journal) + 1, **event})
            else:
                self._fail_next -= 1
                self.failed_writes.append(write)
            self._apply(self.core.on_write_done(write.token, ok, self.now))

    def _settle(self, fx: Effects) -> None:
        self._apply(fx)
        assert self.core.pending_writes == 0, "a continuation was left waiting on a write"
        if self.check:
            self.check_invariants()

    def _handle(self, kind: str, group_id: str, request: object, response_type: type[R]) -> Handle[R]:
        handle = Handle(next(self._tickets), kind, group_id, request, response_type, self.now)
        self.handles[handle.ticket] = handle
        self._parked.add(handle.ticket)
        return handle

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` forward, firing due timers at their own deadlines (docs/api.md §9)."""
        assert ms >= 0
        target = self.now + ms
        while (due := self.core.pop_due_timer(target)) is not None:
            self.now = max(self.now, due.deadline_ms)
            self._settle(self.core.run_timer(due, self.now))
        self.now = target

    def advance_to(self, target_ms: int) -> None:
        self.advance(max(target_ms - self.now, 0))

    def advance_to_next_timer(self) -> bool:
        deadline = self.core.next_deadline()
        if deadline is None:
            return False
        self.advance_to(deadline)
        return True

    def advance_until(self, done: Callable[[], bool], max_ms: int = 3_600_000) -> None:
        """Advance timer by timer until ``done()``; fails if it never happens within ``max_ms``."""
        limit = self.now + max_ms
        while not done():
            deadline = self.core.next_deadline()
            assert deadline is not None and deadline <= limit, "no timer left that could make it happen"
            self.advance_to(deadline)

    def keep_alive(self, ms: int, *members: tuple[str, str | None], group: str = GROUP, every: int = 0) -> None:
        """Advance ``ms`` while ``members`` heartbeat (with the group's current generation) every ``every`` ms
        (default: a third of the default session), the way a consumer's heartbeat thread keeps a session."""
        step = every or SESSION_MS // 3
        target = self.now + ms
        while self.now < target:
            self.advance(min(step, target - self.now))
            current = self.core.groups.get(group)
            for member_id, instance_id in members:
                if current is not None and member_id in current.members:
                    self.heartbeat(member_id, current.generation_id, instance_id, group=group)

    def timer_deadline(self, *key: str) -> int | None:
        return self.core.timers.deadline(tuple(key))

    # ------------------------------------------------------------------------------------- requests

    def join(
        self,
        member_id: str = "",
        instance_id: str | None = None,
        *,
        group: str = GROUP,
        version: int = 9,
        session_ms: int = SESSION_MS,
        rebalance_ms: int | None = REBALANCE_MS,
        protocol_type: str = PROTOCOL_TYPE,
        protocols: Sequence[Protocol] = PROTOCOLS,
        client_id: str = "client",
        reason: str | None = None,
        tenant: str | None = None,
    ) -> Handle[JoinResponse]:
        if version == 0:
            rebalance_ms = None  # v0 has no rebalance timeout: the session timeout stands in (docs/api.md §3)
        req = JoinRequest(
            member_id=member_id,
            session_timeout_ms=session_ms,
            protocol_type=protocol_type,
            protocols=tuple(protocols),
            api_version=version,
            group_instance_id=instance_id,
            rebalance_timeout_ms=rebalance_ms,
            client_id=client_id,
            reason=reason,
        )
        handle = self._handle("join", group, req, JoinResponse)
        self._settle(self.core.join(group, req, version, handle.ticket, self.now, "127.0.0.1", tenant=tenant))
        return handle

    def join_dynamic(self, *, version: int = 9, **kwargs: Any) -> Handle[JoinResponse]:
        """A new dynamic member's join: at v4+ the MEMBER_ID_REQUIRED round trip, then the real join."""
        first = self.join("", None, version=version, **kwargs)
        if version < 4 or first.parked or first.error != Error.MEMBER_ID_REQUIRED:
            return first
        return self.join(first.result.member_id, None, version=version, **kwargs)

    def sync(
        self,
        member_id: str,
        generation: int,
        instance_id: str | None = None,
        *,
        group: str = GROUP,
        version: int = 5,
        assignments: Mapping[str, bytes] | None = None,
        protocol_type: str | _Unset | None = AUTO,
        protocol_name: str | _Unset | None = AUTO,
    ) -> Handle[SyncResponse]:
        # AUTO: what the client learnt from its join (the group's, else the default protocol); none below v5.
        current = self.core.groups.get(group)
        if isinstance(protocol_type, _Unset):
            protocol_type = ((current and current.protocol_type) or PROTOCOL_TYPE) if version >= 5 else None
        if isinstance(protocol_name, _Unset):
            protocol_name = ((current and current.protocol_name) or RANGE.name) if version >= 5 else None
        req = SyncRequest(
            generation_id=generation,
            member_id=member_id,
            assignments=tuple(SyncAssignment(m, a) for m, a in (assignments or {}).items()),
            api_version=version,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
        )
        handle = self._handle("sync", group, req, SyncResponse)
        self._settle(self.core.sync(group, req, version, handle.ticket, self.now))
        return handle

    def heartbeat(
        self, member_id: str, generation: int, instance_id: str | None = None, *, group: str = GROUP, version: int = 4
    ) -> Handle[HeartbeatResponse]:
        req = HeartbeatRequest(generation, member_id, version, instance_id)
        handle = self._handle("heartbeat", group, req, HeartbeatResponse)
        self._settle(self.core.heartbeat(group, req, version, handle.ticket, self.now))
        return handle

    def leave(
        self, *members: tuple[str, str | None] | MemberIdentity, group: str = GROUP, version: int = 5
    ) -> Handle[LeaveResponse]:
        identities = tuple(m if isinstance(m, MemberIdentity) else MemberIdentity(m[0], m[1]) for m in members)
        if version >= 3:
            req = LeaveRequest(api_version=version, members=identities)
        else:
            assert len(identities) == 1, "a v0-2 leave names one member"
            req = LeaveRequest(api_version=version, member_id=identities[0].member_id)
        handle = self._handle("leave", group, req, LeaveResponse)
        self._settle(self.core.leave(group, req, version, handle.ticket, self.now))
        return handle

    def commit(
        self,
        member_id: str = "",
        generation: int = -1,
        instance_id: str | None = None,
        *,
        group: str = GROUP,
        version: int = 9,
        offsets: Mapping[tuple[str, int], int] | None = None,
        metadata: str | None = None,
        tenant: str | None = None,
    ) -> Handle[OffsetCommitResponse]:
        by_topic: dict[str, list[CommitPartition]] = {}
        for (topic, partition), offset in (offsets if offsets is not None else {("t", 0): 1}).items():
            by_topic.setdefault(topic, []).append(CommitPartition(partition, offset, -1, metadata))
        req = OffsetCommitRequest(
            topics=tuple(CommitTopic(t, tuple(ps)) for t, ps in by_topic.items()),
            api_version=version,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
        )
        handle = self._handle("commit", group, req, OffsetCommitResponse)
        self._settle(self.core.commit_offsets(group, req, version, handle.ticket, self.now, tenant=tenant))
        return handle

    def fetch(
        self, group: str = GROUP, topics: Iterable[str] | None = None, after: str | None = None, limit: int = 10_000
    ) -> OffsetFetchResponse:
        """One page of the group's offsets (``after``: the previous page's ``next``)."""
        cursor = None if after is None else parse_fetch_cursor(after)
        return self.core.fetch_offsets(group, None if topics is None else tuple(topics), cursor, limit)

    def committed(self, group: str = GROUP) -> dict[tuple[str, int], int]:
        return {(t.name, p.partition_index): p.committed_offset for t in self.fetch(group).topics for p in t.partitions}

    def describe(self, group: str = GROUP) -> DescribeResponse:
        return self.core.describe(group)

    def list_groups(self, *states: str) -> ListResponse:
        return self.core.list_groups(states)

    def delete(self, group: str = GROUP) -> Handle[DeleteResponse]:
        handle = self._handle("delete", group, group, DeleteResponse)
        self._settle(self.core.delete_group(group, handle.ticket, self.now))
        return handle

    def put_expected(self, *instance_ids: str, group: str = GROUP) -> Handle[ExpectedMembersResponse]:
        handle = self._handle("put_expected", group, instance_ids, ExpectedMembersResponse)
        self._settle(self.core.put_expected_members(group, instance_ids, handle.ticket, self.now))
        return handle

    def delete_expected(self, group: str = GROUP) -> Handle[ExpectedMembersResponse]:
        handle = self._handle("delete_expected", group, (), ExpectedMembersResponse)
        self._settle(self.core.delete_expected_members(group, handle.ticket, self.now))
        return handle

    def get_expected(self, group: str = GROUP) -> ExpectedMembersResponse:
        return self.core.get_expected_members(group)

    def claim(self, owner: GroupOwner, *, adopt: bool = False, group: str = GROUP) -> Handle[OwnerResponse]:
        """``PUT .../owner`` as the adapter sends it: refused first (HTTP 409) by the same check it makes."""
        assert self.core.owner_claim_refusal(group, owner.uid, adopt) is None, "the adapter would answer 409"
        handle = self._handle("claim", group, owner, OwnerResponse)
        self._settle(self.core.claim_owner(group, owner, adopt, handle.ticket, self.now))
        return handle

    def release(self, uid: str, *, group: str = GROUP) -> Handle[OwnerResponse]:
        assert self.core.owner_release_refusal(group, uid) is None, "the adapter would answer 409"
        handle = self._handle("release", group, uid, OwnerResponse)
        self._settle(self.core.release_owner(group, uid, handle.ticket, self.now))
        return handle

    def shutdown(self) -> None:
        self.shut_down = True  # answered parked requests leave their members without a session timer
        self._settle(self.core.shutdown(self.now))

    def reload(self, config: CoordinatorConfig | None = None, **config_fields: Any) -> Scenario:
        """A fresh coordinator that loads every durable record (a restart on the same data dir)."""
        if config is None:
            config = self.config if not config_fields else CoordinatorConfig(**config_fields)
        self.close()
        fresh = Scenario(config, now=self.now, check=self.check, _uuids=self._uuids)
        fresh.records = list(self.records)
        fresh.journal = list(self.journal)
        fresh._settle(fresh.core.load(list(self.records), self.now))
        return fresh

    # ---------------------------------------------------------------------------- composite steps

    def form_group(
        self,
        *instance_ids: str | None,
        group: str = GROUP,
        version: int = 9,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        protocols: Sequence[Protocol] = PROTOCOLS,
        assignments: Mapping[str | None, bytes] | None = None,
    ) -> Formed:
        """Join every member (``None`` = a dynamic one), let the initial rebalance run out, sync everyone.

        The leader assigns ``assignments[instance id]`` (default ``b"a-<index>"``) to each member.
        """
        if not instance_ids:
            instance_ids = ("i-0", "i-1")
        joins: list[Handle[JoinResponse]] = []
        for iid in instance_ids:
            kwargs: dict[str, Any] = {
                "group": group,
                "version": version,
                "session_ms": session_ms,
                "rebalance_ms": rebalance_ms,
                "protocols": protocols,
            }
            joins.append(self.join_dynamic(**kwargs) if iid is None else self.join("", iid, **kwargs))
        self.advance_until(lambda: all(h.answered for h in joins))
        for h in joins:
            assert h.error == Error.NONE, h.response
        generation = joins[0].result.generation_id
        leader = joins[0].result.leader
        member_ids = [h.result.member_id for h in joins]
        given = {member_ids[k]: (assignments or {}).get(iid, f"a-{k}".encode()) for k, iid in enumerate(instance_ids)}
        leader_iid = instance_ids[member_ids.index(leader)]
        leader_sync = self.sync(leader, generation, leader_iid, group=group, assignments=given)
        assert leader_sync.error == Error.NONE, leader_sync.response
        for mid, iid in zip(member_ids, instance_ids, strict=True):
            if mid != leader:
                follower_sync = self.sync(mid, generation, iid, group=group)
                assert follower_sync.error == Error.NONE, follower_sync.response
        assert self.group(group).state is STABLE
        return Formed(group, generation, leader, member_ids, list(instance_ids), given, joins)

    def rejoin_all(self, formed: Formed, **kwargs: Any) -> list[Handle[JoinResponse]]:
        """Every member of ``formed`` rejoins with its member id (what clients do on REBALANCE_IN_PROGRESS)."""
        return [
            self.join(mid, iid, group=formed.group_id, **kwargs)
            for mid, iid in zip(formed.member_ids, formed.instance_ids, strict=True)
            if mid in self.group(formed.group_id).members
        ]

    # --------------------------------------------------------------------------------- inspection

    def group(self, group_id: str = GROUP) -> Group:
        group = self.core.groups.get(group_id)
        assert group is not None, f"no group {group_id!r}"
        return group

    def state(self, group_id: str = GROUP) -> GroupState:
        return self.group(group_id).state

    def member(self, member_id: str, group_id: str = GROUP) -> Member:
        return self.group(group_id).members[member_id]

    def member_of(self, instance_id: str, group_id: str = GROUP) -> str:
        member_id = self.group(group_id).static_member_id(instance_id)
        assert member_id is not None, f"{instance_id} is not a member of {group_id}"
        return member_id

    def events(self, type_: str | None = None, group: str | None = None) -> list[JournalEvent]:
        return [
            e
            for e in self.journal
            if (type_ is None or e["type"] == type_) and (group is None or e["group_id"] == group)
        ]

    def event_types(self, group: str | None = GROUP, since: int = 0) -> list[str]:
        return [e["type"] for e in self.journal[since:] if group is None or e["group_id"] == group]

    def mark(self) -> int:
        """A journal position: ``event_types(since=ctx.mark())`` lists what happened after it."""
        return len(self.journal)

    def rebalance_causes(self, group: str = GROUP, since: int = 0) -> list[str]:
        return [e["cause"] for e in self.journal[since:] if e["type"] == "rebalance_started" and e["group_id"] == group]

    def last_join_of(self, member_id: str) -> Handle[JoinResponse]:
        """The latest join sent with ``member_id`` (answered or parked)."""
        joins = [
            cast(Handle[JoinResponse], h)
            for h in self.handles.values()
            if isinstance(h.request, JoinRequest) and h.request.member_id == member_id
        ]
        assert joins, f"no join sent by {member_id}"
        return joins[-1]

    def persisted_members(self, group: str = GROUP) -> dict[str, MemberMetadata]:
        """The group's members as the durable records say: the last whole-group record, then its deltas."""
        members: dict[str, MemberMetadata] = {}
        for record in self.records:
            if isinstance(record, GroupRecord) and record.group_id == group:
                members = {m.member_id: m for m in record.members}
            elif isinstance(record, GroupDeltaRecord) and record.group_id == group:
                for member_id in record.removed:
                    members.pop(member_id, None)
                members.update((m.member_id, m) for m in record.upserted)
        return members

    def parked(self) -> list[Handle[Any]]:
        return [self.handles[t] for t in sorted(self._parked)]

    # --------------------------------------------------------------------------------- invariants

    def check_invariants(self) -> None:
        """Structural invariants of every group; cheap enough to run after every call."""
        held: set[int] = set()
        for group_id, group in self.core.groups.items():
            assert group.group_id == group_id
            members = group.members
            # At most one member per instance id, and the static map agrees with the members both ways.
            instance_ids = [m.group_instance_id for m in members.values() if m.group_instance_id is not None]
            assert len(instance_ids) == len(set(instance_ids)), f"{group_id}: duplicate instance ids {instance_ids}"
            for iid, mid in group.static_members.items():
                assert mid in members, f"{group_id}: static map {iid} -> {mid}, not a member"
                assert members[mid].group_instance_id == iid
            for mid, m in members.items():
                assert m.member_id == mid
                if m.group_instance_id is not None:
                    assert group.static_members.get(m.group_instance_id) == mid
            # The leader is a member whenever the group has members.
            if members:
                assert group.leader_id in members, f"{group_id}: leader {group.leader_id} is not a member"
            # Bookkeeping the hot paths rely on.
            assert group.num_awaiting_join == sum(1 for m in members.values() if m.is_awaiting_join)
            expected_support = Counter(name for m in members.values() for name in m.protocol_names())
            assert +group.supported_protocols == expected_support, f"{group_id}: protocol support counts drifted"
            assert not (group.pending_join_members.keys() & members.keys())
            stored_bytes = sum(m.protocols_bytes() + len(m.assignment) for m in members.values())
            assert group.metadata_bytes == stored_bytes, f"{group_id}: metadata bytes drifted"
            # The expected-ids counter behind has_all_members_joined (a core internal, hence the private read).
            expected_present = sum(1 for iid in set(group.expected_instance_ids) if iid in group.static_members)
            assert group._expected_present == expected_present, f"{group_id}: expected-ids counter drifted"
            # Parked requests belong to current members and are still unanswered.
            for m in members.values():
                for kind, ticket in (("join", m.join_ticket), ("sync", m.sync_ticket)):
                    if ticket is not None:
                        handle = self.handles.get(ticket)
                        assert handle is not None and handle.parked, f"{m} holds answered ticket {ticket}"
                        assert handle.kind == kind and handle.group_id == group_id, f"{m} holds {handle}"
                        held.add(ticket)
            if group.state is EMPTY:
                assert not members, f"{group_id}: Empty with members"
            # Liveness: a member is bounded by its session timer unless a parked request stands in for it
            # (Kafka ignores the expiry of a member awaiting a join or sync, and re-arms it on the answer).
            if not self.shut_down:
                for mid, m in members.items():
                    assert (
                        m.is_awaiting_join or m.is_awaiting_sync or ("heartbeat", group_id, mid) in self.core.timers
                    ), f"{group_id}: {mid} can never expire"
                for pending in group.pending_join_members:
                    assert ("heartbeat", group_id, pending) in self.core.timers, (
                        f"{group_id}: pending {pending} never expires"
                    )
        self.check_usage()
        # No ticket lost: every unanswered request is a join or sync parked by a current member.
        lost = self._parked - held
        assert not lost, f"requests neither answered nor parked by a member: {[self.handles[t] for t in lost]}"

    def check_usage(self) -> None:
        """What the core keeps, as its bounds see it (``core.usage``): each group's offset figures are its offsets,
        nothing is left reserved once every write is settled, and each ledger is the sum of its groups."""
        core = self.core
        assert set(core.offsets) <= set(core.groups), "offsets of a group the core does not hold"
        ledgers: dict[str | None, list[int]] = {None: [0, 0]}
        for group_id, group in core.groups.items():
            held = core.offsets.get(group_id, {})
            usage = group.usage
            assert usage.offset_count == sum(len(partitions) for partitions in held.values()), group_id
            size = sum(offset_bytes(t, o.metadata) for t, partitions in held.items() for o in partitions.values())
            assert usage.offset_bytes == size, f"{group_id}: offset bytes drifted"
            assert usage.reserved_offsets == usage.reserved_offset_bytes == 0, f"{group_id}: a reservation was left"
            for tenant in {None, group.tenant}:
                figures = ledgers.setdefault(tenant, [0, 0])
                figures[0] += group.stored_bytes()
                figures[1] += 1
        assert [core.usage.bytes, core.usage.groups] == ledgers.pop(None), "the total ledger drifted"
        assert {t: [ledger.bytes, ledger.groups] for t, ledger in core.tenants.items()} == ledgers, "a tenant drifted"
        pending = {(g.group_id, m) for g in core.groups.values() for m in g.pending_join_members}
        assert pending <= core.pending_ids.keys(), "a pending id the total bound does not see"
        assert len(core.pending_ids) <= core.config.max_pending_members


def as_bytes(value: str | bytes) -> bytes:
    """A byte field of a record or journal event, whether the core left it as bytes or base64 text."""
    return value if isinstance(value, bytes) else base64.b64decode(value, validate=True)


# ------------------------------------------------------------------------------------ standard groups

#: The group states a request can find, as names for parametrized tables ("missing": no such group).
STATES = ("missing", "Empty", "PreparingRebalance", "CompletingRebalance", "Stable")


def bring_to(ctx: Scenario, state: str, group: str = GROUP) -> Formed | None:
    """The standard group of the decision tables, in ``state``.

    Members: ``i-0`` (static, the leader), ``i-1`` (static) and one dynamic member, formed at generation 1.
    - ``Stable``: as formed.
    - ``PreparingRebalance``: the leader rejoined (parked); ``i-1`` and the dynamic member have not.
    - ``CompletingRebalance``: everyone rejoined; generation 2, nobody synced yet.
    - ``Empty``: everyone left; generation 2, no members.
    - ``missing``: no group at all (returns None).
    """
    if state == "missing":
        return None
    formed = ctx.form_group("i-0", "i-1", None, group=group)
    if state == "Stable":
        return formed
    leader, follower, dynamic = formed.member_ids
    if state == "PreparingRebalance":
        assert ctx.join(leader, "i-0", group=group).parked
        assert ctx.state(group) is PREPARING
        return formed
    if state == "CompletingRebalance":
        joins = ctx.rejoin_all(formed)
        assert all(j.error == Error.NONE for j in joins)
        assert ctx.state(group) is COMPLETING and ctx.group(group).generation_id == 2
        return formed
    if state == "Empty":
        left = ctx.leave((leader, "i-0"), (follower, "i-1"), (dynamic, None), group=group)
        assert all(m.error == Error.NONE for m in left.result.members)
        assert ctx.state(group) is EMPTY and ctx.group(group).generation_id == 2
        return formed
    raise ValueError(state)
