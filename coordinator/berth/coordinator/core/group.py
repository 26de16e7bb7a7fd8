"""The bookkeeping of one classic group (Kafka's ClassicGroup) plus Berth's expected instance ids.

This module keeps the counters that make the hot paths O(1): members awaiting a join, per-protocol support
counts, the protocol vote (recounted only when the set of protocols every member supports changes), pending
(KIP-394) and pending-sync member sets, how many expected instance ids are members, and which fenced member
ids were already journaled. It decides nothing about rebalances; ``rebalance`` and the handlers do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from enum import Enum

from berth.coordinator.core.member import Member
from berth.coordinator.core.usage import GROUP_BYTES, MEMBER_BYTES, GroupUsage
from berth.coordinator.protocol import GroupId, GroupOwner, InstanceId, JoinMember, JoinProtocol, MemberId


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

#: Kafka's allowed transitions: target state -> the states it may be entered from.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    EMPTY: frozenset({PREPARING_REBALANCE}),
    DEAD: frozenset({STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD}),
}


#: Fenced member ids journaled per instance id and episode, at most (a hostile client could send any number).
MAX_FENCED_NOTED = 16


class IllegalTransition(AssertionError):
    pass


class Group:
    def __init__(
        self,
        group_id: GroupId,
        now_ms: int,
        state: GroupState = EMPTY,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: MemberId | None = None,
        tenant: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = DEAD
        self.state_timestamp_ms = now_ms
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[MemberId, Member] = {}
        # Bytes of every member's protocol metadata and assignment: what ``group_metadata_max_bytes`` bounds.
        self.metadata_bytes = 0
        # The non-admin token that created the group (None: an admin's, or no tokens); its committed offsets in
        # figures and the ledgers it counts in while the core holds it (``usage``: all groups', and its tenant's).
        self.tenant = tenant
        self.usage = GroupUsage()
        self.static_members: dict[InstanceId, MemberId] = {}
        # KIP-394 ids handed out, not yet joined, oldest first (the value: none, an ordered set).
        self.pending_join_members: dict[MemberId, None] = {}
        self.pending_sync_members: set[MemberId] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.owner: GroupOwner | None = None  # Berth: the fleet the group belongs to (docs/api.md §7a)
        self.expected_instance_ids: tuple[InstanceId, ...] = ()
        self._expected: frozenset[InstanceId] = frozenset()
        self._expected_present = 0
        # The protocol vote: each member's most preferred protocol among ``_vote_candidates`` (None: not counted).
        self._vote_candidates: frozenset[str] | None = None
        self._votes: Counter[str] = Counter()
        self._voted: dict[MemberId, str] = {}
        # Fenced member ids already journaled since the instance's current member took over (docs/api.md §8).
        self._fenced_noted: dict[InstanceId, set[MemberId]] = {}
        # Answers carrying FENCED_INSTANCE_ID since the group was created or loaded (its per-group metric).
        self.fenced_answers = 0

    def __repr__(self) -> str:
        return (
            f"Group({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
            f"members={len(self.members)})"
        )

    # -------------------------------------------------------------------------------------------- state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value} is not allowed")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    # ------------------------------------------------------------------------------------------ members

    def is_leader(self, member_id: MemberId) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending(self, member_id: MemberId) -> bool:
        return member_id in self.pending_join_members

    def add_pending(self, member_id: MemberId) -> None:
        assert member_id not in self.members
        self.pending_join_members[member_id] = None

    def oldest_pending(self) -> MemberId | None:
        return next(iter(self.pending_join_members), None)

    # ------------------------------------------------------------------------------------------ usage

    def stored_bytes(self) -> int:
        """The group's size in stored bytes (``usage``), offsets in flight included."""
        usage = self.usage
        return (
            GROUP_BYTES
            + MEMBER_BYTES * len(self.members)
            + self.metadata_bytes
            + usage.offset_bytes
            + usage.reserved_offset_bytes
        )

    def charge(self, delta: int) -> None:
        """Count ``delta`` stored bytes in the group's ledgers (none until the core registers the group)."""
        for ledger in self.usage.ledgers:
            ledger.bytes += delta

    def static_member_id(self, group_instance_id: InstanceId) -> MemberId | None:
        return self.static_members.get(group_instance_id)

    def add(self, member: Member, join_ticket: int | None = None) -> None:
        iid = member.group_instance_id
        if iid is not None:
            if iid in self.static_members:
                raise AssertionError(f"instance {iid} is already a member of {self.group_id}")
            self.static_members[iid] = member.member_id
            if iid in self._expected:
                self._expected_present += 1
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        size = member.protocols_bytes() + len(member.assignment)
        self.metadata_bytes += size
        self.charge(MEMBER_BYTES + size)
        self.supported_protocols.update(member.protocol_names())
        self._count_vote(member)
        member.join_ticket = join_ticket
        if join_ticket is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.pop(member.member_id, None)

    def remove(self, member_id: MemberId) -> Member | None:
        """Remove a member or a pending id; returns the member removed (None for a pending id)."""
        member = self.members.pop(member_id, None)
        if member is not None:
            size = member.protocols_bytes() + len(member.assignment)
            self.metadata_bytes -= size
            self.charge(-MEMBER_BYTES - size)
            self.supported_protocols.subtract(member.protocol_names())
            self._uncount_vote(member_id)
            if member.is_awaiting_join:
                self.num_awaiting_join -= 1
            iid = member.group_instance_id
            if iid is not None and self.static_members.get(iid) == member_id:
                del self.static_members[iid]
                self._fenced_noted.pop(iid, None)
                if iid in self._expected:
                    self._expected_present -= 1
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        return member

    def replace_static_member(
        self, group_instance_id: InstanceId, old_member_id: MemberId, new_member_id: MemberId
    ) -> Member:
        """Give an instance id's member a new member id, keeping everything else (KIP-345).

        The caller answers whatever the old member had parked (FENCED_INSTANCE_ID) before calling this.
        """
        old = self.members.pop(old_member_id)
        if old.is_awaiting_join:
            self.num_awaiting_join -= 1
        new = Member(
            new_member_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
            old.last_heard_ms,
        )
        self.members[new_member_id] = new
        vote = self._voted.pop(old_member_id, None)
        if vote is not None:
            self._voted[new_member_id] = vote
        self._fenced_noted.pop(group_instance_id, None)  # a new episode: the old id may be fenced from now on
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        # Like Kafka, an old id still awaited in the sync phase stays there: if the replacement happens
        # before that member synced, the sync timeout still counts it as missing.
        self.static_members[group_instance_id] = new_member_id
        return new

    def update_member(
        self,
        member: Member,
        protocols: tuple[JoinProtocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_ticket: int | None,
    ) -> None:
        if protocols != member.protocols:
            self.supported_protocols.subtract(member.protocol_names())
            self._uncount_vote(member.member_id)
            before = member.protocols_bytes()
            member.protocols = protocols
            self.metadata_bytes += member.protocols_bytes() - before
            self.charge(member.protocols_bytes() - before)
            self.supported_protocols.update(member.protocol_names())
            self._count_vote(member)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_ticket is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif join_ticket is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.join_ticket = join_ticket

    def set_assignment(self, member: Member, assignment: bytes) -> None:
        delta = len(assignment) - len(member.assignment)
        self.metadata_bytes += delta
        self.charge(delta)
        member.assignment = assignment

    def metadata_bytes_with(
        self, protocols_bytes: int, replacing: MemberId | None = None, assignments: dict[MemberId, bytes] | None = None
    ) -> int:
        """The group's metadata bytes if ``replacing`` (or a new member) offered ``protocols_bytes``, or, with
        ``assignments``, once the leader's assignment replaced the stored ones."""
        total = self.metadata_bytes + protocols_bytes
        old = self.members.get(replacing) if replacing is not None else None
        if old is not None:
            total -= old.protocols_bytes()
        if assignments is not None:
            total += sum(len(assignments.get(m.member_id, b"")) - len(m.assignment) for m in self.members.values())
        return total

    def take_join_ticket(self, member: Member) -> int | None:
        """Detach and return a member's parked join, keeping the awaiting count right."""
        ticket = member.join_ticket
        if ticket is not None:
            member.join_ticket = None
            self.num_awaiting_join -= 1
        return ticket

    @staticmethod
    def take_sync_ticket(member: Member) -> int | None:
        ticket = member.sync_ticket
        member.sync_ticket = None
        return ticket

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        """Every member rejoined, no KIP-394 id outstanding, and (Berth) every expected instance id a member."""
        return (
            len(self.members) == self.num_awaiting_join
            and not self.pending_join_members
            and self._expected_present == len(self._expected)
        )

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else promote any member that did; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------------------------------ protocols

    def supports_protocols(self, protocol_type: str, protocol_names: Iterable[str]) -> bool:
        names = list(protocol_names)
        if self.state is EMPTY:
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[n] == size for n in names)

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, n in self.supported_protocols.items() if n == size}

    def select_protocol(self) -> str:
        """The protocol every member supports with the most first-preference votes (ties: by name).

        The count is kept as members come, go and change protocols; it is recounted over every member only when
        the set of protocols every member supports changed (a member with other protocols joined or left).
        """
        if not self.members:
            raise ValueError(f"cannot select a protocol for the empty group {self.group_id}")
        candidates = frozenset(self.candidate_protocols())
        if candidates != self._vote_candidates:
            self._vote_candidates = candidates
            self._voted = {m.member_id: m.vote(candidates) for m in self.members.values()}
            self._votes = Counter(self._voted.values())
        votes = self._votes
        return min((name for name, n in votes.items() if n > 0), key=lambda name: (-votes[name], name))

    def _count_vote(self, member: Member) -> None:
        candidates = self._vote_candidates
        if candidates is None:
            return
        vote = next((p.name for p in member.protocols if p.name in candidates), None)
        if vote is None:
            self._vote_candidates = None  # the candidates shrink: recount on the next selection
            return
        self._voted[member.member_id] = vote
        self._votes[vote] += 1

    def _uncount_vote(self, member_id: MemberId) -> None:
        vote = self._voted.pop(member_id, None)
        if vote is not None:
            self._votes[vote] -= 1

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_join_members(self) -> tuple[JoinMember, ...]:
        if self.state in (DEAD, PREPARING_REBALANCE):
            raise AssertionError(f"no member list for group {self.group_id} in {self.state.value}")
        name = self.protocol_name
        return tuple(JoinMember(m.member_id, m.group_instance_id, m.metadata(name)) for m in self.members.values())

    # ------------------------------------------------------------------------------- expected instance ids

    # ------------------------------------------------------------------------------------ fenced members

    def note_fenced(self, group_instance_id: InstanceId, member_id: MemberId) -> bool:
        """Record that ``member_id`` was fenced; True the first time in this episode (journal it then)."""
        noted = self._fenced_noted.setdefault(group_instance_id, set())
        if member_id in noted or len(noted) >= MAX_FENCED_NOTED:
            return False
        noted.add(member_id)
        return True

    def set_expected_instance_ids(self, ids: tuple[InstanceId, ...]) -> None:
        self.expected_instance_ids = ids
        self._expected = frozenset(ids)
        self._expected_present = sum(1 for iid in self._expected if iid in self.static_members)

    def missing_expected_instance_ids(self) -> list[InstanceId]:
        return [iid for iid in self.expected_instance_ids if iid not in self.static_members]

    @property
    def has_expected_instance_ids(self) -> bool:
        return bool(self._expected)
