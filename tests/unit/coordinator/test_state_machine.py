"""Hypothesis state machine over the coordinator core: random joins, syncs, heartbeats, leaves, commits, clock
advances, write failures, expected-member changes, deletes and restarts across three groups, a few instance ids and
two tenants, with bounds small enough to be reached (offsets per group, pending ids, groups per tenant, stored bytes).

After every step (besides the harness's structural checks after every call, see ``Scenario.check_invariants``):
- at most one member per instance id, and the static map agrees with the members (harness);
- the leader is a member whenever the group has members (harness);
- no ticket is lost: every unanswered request is a join or sync parked by a current member (harness);
- every member can still expire: a session timer or a parked request (harness);
- every state transition is one of Kafka's (harness, via ``transitions_observed``);
- a group's generation never decreases (a restart resets the baseline: a rebalance in flight is lost, as in Kafka);
- the bounds hold: offsets per group, groups per tenant, stored bytes in total and per tenant (and the harness checks
  after every call that each ledger is the sum of its groups, ``Scenario.check_usage``);
- replaying every durable record into a fresh Coordinator rebuilds the persisted view: for groups in Stable or
  Empty, members (ids, instance ids, assignments, selected-protocol metadata), static map, generation, protocol
  type and name, leader; for every group its expected instance ids; all committed offsets.
  Exception: a failed write of the "group is now Empty" record is only logged by Kafka (the previous generation
  stays in the log), so such a group is skipped until its next durable group record.
At the end, a long silence must answer every parked request and expire every member.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from berth.coordinator.core import Coordinator, CoordinatorConfig, Group
from berth.coordinator.core.records import GroupRecord
from berth.coordinator.protocol import JoinProtocol as Protocol

from .scenario import COMPLETING, EMPTY, PREPARING, RANGE, ROUNDROBIN, STABLE, Scenario

GROUPS = ("g", "h", "k")
TENANTS = (None, None, "a", "b")
BOUNDS = CoordinatorConfig(
    group_max_size=4,
    offsets_max_per_group=3,
    max_pending_members_per_group=2,
    max_pending_members=3,
    max_groups_per_tenant=1,
    max_stored_bytes=12_000,
    max_stored_bytes_per_tenant=4_000,
)
INSTANCES = ("i-0", "i-1", "i-2")
PROTOCOL_SETS: tuple[tuple[Protocol, ...], ...] = (
    (RANGE, ROUNDROBIN),
    (RANGE, ROUNDROBIN),
    (ROUNDROBIN, RANGE),
    (ROUNDROBIN,),
    (Protocol("range", b"range-v2"), ROUNDROBIN),
    (Protocol("sticky", b"sticky"),),
)
SESSIONS = (6_000, 10_000, 30_000)
REBALANCES = (6_000, 20_000, 60_000)
ADVANCES = (0, 1, 500, 3_000, 6_000, 10_000, 30_000, 60_000, 300_000)

groups = st.sampled_from(GROUPS)


def persisted_view(group: Group) -> dict[str, Any]:
    members = {
        m.member_id: (m.group_instance_id, m.assignment, m.metadata(group.protocol_name) if group.members else b"")
        for m in group.members.values()
    }
    return {
        "state": group.state,
        "generation": group.generation_id,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol_name,
        "leader": group.leader_id if group.members else None,
        "members": members,
        "static": dict(group.static_members),
    }


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = Scenario(BOUNDS)
        self.seen: dict[str, set[tuple[str, str | None]]] = {g: set() for g in GROUPS}
        self.generations: dict[str, int] = {}
        self.diverged: set[str] = set()
        self.writes_checked = 0

    def teardown(self) -> None:
        try:
            # A long silence: every parked request is answered and every member expires.
            self.ctx.advance(3_600_000)
            assert self.ctx.parked() == [], self.ctx.parked()
            for group in self.ctx.core.groups.values():
                assert group.state is EMPTY and not group.members and not group.pending_join_members, group
        finally:
            self.ctx.close()

    # ------------------------------------------------------------------------------------------ helpers

    def identity(self, data: st.DataObject, group: str) -> tuple[str, str | None]:
        known = sorted(self.seen[group], key=lambda i: (i[0], i[1] or ""))
        options: list[tuple[str, str | None]] = [*known, *known, ("ghost-u0", None), ("", None)]
        member_id, instance_id = data.draw(st.sampled_from(options), label="identity")
        if data.draw(st.integers(0, 9), label="swap instance id") == 0:
            instance_id = data.draw(st.sampled_from((None, *INSTANCES)), label="other instance id")
        return member_id, instance_id

    def generation(self, data: st.DataObject, group: str) -> int:
        current = self.ctx.core.groups.get(group)
        gen = current.generation_id if current else 0
        return data.draw(st.sampled_from((gen, gen, gen, gen - 1, -1)), label="generation")

    # -------------------------------------------------------------------------------------------- rules

    @rule(
        group=groups,
        instance_id=st.sampled_from((None, *INSTANCES)),
        version=st.sampled_from((3, 4, 5, 7, 8, 9)),
        session=st.sampled_from(SESSIONS),
        rebalance=st.sampled_from(REBALANCES),
        protocols=st.sampled_from(PROTOCOL_SETS),
        tenant=st.sampled_from(TENANTS),
    )
    def join_new(
        self,
        group: str,
        instance_id: str | None,
        version: int,
        session: int,
        rebalance: int,
        protocols: tuple[Protocol, ...],
        tenant: str | None,
    ) -> None:
        if instance_id is not None:
            version = max(version, 5)  # the adapter refuses an instance id below v5
        self.ctx.join(
            "",
            instance_id,
            group=group,
            version=version,
            session_ms=session,
            rebalance_ms=rebalance,
            protocols=protocols,
            tenant=tenant,
        )

    @rule(
        data=st.data(),
        group=groups,
        session=st.sampled_from(SESSIONS),
        rebalance=st.sampled_from(REBALANCES),
        protocols=st.sampled_from(PROTOCOL_SETS),
    )
    def join_existing(
        self, data: st.DataObject, group: str, session: int, rebalance: int, protocols: tuple[Protocol, ...]
    ) -> None:
        member_id, instance_id = self.identity(data, group)
        self.ctx.join(
            member_id, instance_id, group=group, session_ms=session, rebalance_ms=rebalance, protocols=protocols
        )

    @rule(data=st.data(), group=groups, version=st.sampled_from((3, 5)))
    def sync(self, data: st.DataObject, group: str, version: int) -> None:
        member_id, instance_id = self.identity(data, group)
        current = self.ctx.core.groups.get(group)
        members = sorted(current.members) if current else []
        chosen = data.draw(st.lists(st.sampled_from(members), unique=True), label="assigned") if members else []
        assignments = {m: f"{m}@{self.ctx.now}".encode() for m in chosen}
        self.ctx.sync(
            member_id, self.generation(data, group), instance_id, group=group, version=version, assignments=assignments
        )

    @rule(data=st.data(), group=groups)
    def heartbeat(self, data: st.DataObject, group: str) -> None:
        member_id, instance_id = self.identity(data, group)
        self.ctx.heartbeat(member_id, self.generation(data, group), instance_id, group=group)

    @rule(data=st.data(), group=groups, count=st.integers(1, 3))
    def leave(self, data: st.DataObject, group: str, count: int) -> None:
        identities: list[tuple[str, str | None]] = []
        for _ in range(count):
            if data.draw(st.integers(0, 3), label="admin removal") == 0:
                identities.append(("", data.draw(st.sampled_from(INSTANCES), label="removed instance")))
            else:
                identities.append(self.identity(data, group))
        self.ctx.leave(*identities, group=group)

    @rule(
        data=st.data(),
        group=groups,
        version=st.sampled_from((8, 9)),
        offset=st.integers(0, 3),
        tenant=st.sampled_from(TENANTS),
        metadata=st.sampled_from((None, "m", "m" * 600)),
    )
    def commit(
        self, data: st.DataObject, group: str, version: int, offset: int, tenant: str | None, metadata: str | None
    ) -> None:
        if data.draw(st.booleans(), label="simple commit"):
            member_id, instance_id, generation = "", None, -1
        else:
            member_id, instance_id = self.identity(data, group)
            generation = self.generation(data, group)
        partitions = {("t", p): offset for p in range(data.draw(st.integers(1, 4), label="partitions"))}
        self.ctx.commit(
            member_id,
            generation,
            instance_id,
            group=group,
            version=version,
            offsets=partitions,
            metadata=metadata,
            tenant=tenant,
        )

    @rule(ms=st.sampled_from(ADVANCES))
    def advance(self, ms: int) -> None:
        self.ctx.advance(ms)

    @rule()
    def advance_to_next_timer(self) -> None:
        self.ctx.advance_to_next_timer()

    @rule(group=groups)
    def clients_cooperate(self, group: str, fail_leader_sync: bool = False) -> None:
        """One round of well-behaved clients: in PreparingRebalance every member not parked rejoins, in
        CompletingRebalance the leader assigns everyone and the followers sync, in Stable everyone heartbeats."""
        current = self.ctx.core.groups.get(group)
        if current is None:
            return
        generation = current.generation_id
        if current.state is PREPARING:
            for m in list(current.members.values()):
                if m.member_id in current.members and not m.is_awaiting_join:
                    self.ctx.join(m.member_id, m.group_instance_id, group=group, protocols=m.protocols)
        elif current.state is COMPLETING:
            order = sorted(current.members.values(), key=lambda m: m.member_id != current.leader_id)
            assignments = {m.member_id: f"{m.member_id}#{generation}".encode() for m in order}
            for m in order:
                if m.member_id in current.members and not m.is_awaiting_sync:
                    leads = m.member_id == current.leader_id
                    if leads and fail_leader_sync and self.ctx.writes_left_to_fail == 0:
                        self.ctx.fail_next_writes(1)  # the assignment write fails: Kafka's persist_failure path
                    self.ctx.sync(
                        m.member_id,
                        generation,
                        m.group_instance_id,
                        group=group,
                        assignments=assignments if leads else None,
                    )
        else:
            for m in list(current.members.values()):
                if m.member_id in current.members:
                    self.ctx.heartbeat(m.member_id, generation, m.group_instance_id, group=group)

    @rule(group=groups, fail_leader_sync=st.booleans())
    def settle(self, group: str, fail_leader_sync: bool = False) -> None:
        """Live, well-behaved clients for a while: cooperate, let the next timer fire, until the group is Stable."""
        for round_ in range(8):
            self.clients_cooperate(group, fail_leader_sync=fail_leader_sync and round_ < 2)
            current = self.ctx.core.groups.get(group)
            if current is None or current.state is STABLE or not current.members:
                return
            self.ctx.advance_to_next_timer()

    @rule(
        group=groups,
        instance_id=st.sampled_from(INSTANCES),
        version=st.sampled_from((5, 8, 9)),
        protocols=st.sampled_from(PROTOCOL_SETS),
        fail=st.booleans(),
    )
    def restart_static_member(
        self, group: str, instance_id: str, version: int, protocols: tuple[Protocol, ...], fail: bool
    ) -> None:
        """A static member's process restarts (empty member id) into a settled group, its write maybe failing."""
        self.settle(group)
        if fail and self.ctx.writes_left_to_fail == 0:
            self.ctx.fail_next_writes(1)
        self.ctx.join("", instance_id, group=group, version=version, protocols=protocols)

    @precondition(lambda self: self.ctx.writes_left_to_fail == 0)
    @rule()
    def fail_next_write(self) -> None:
        self.ctx.fail_next_writes(1)

    @rule(group=groups, ids=st.lists(st.sampled_from(INSTANCES), unique=True, max_size=3))
    def put_expected(self, group: str, ids: list[str]) -> None:
        self.ctx.put_expected(*ids, group=group)

    @rule(group=groups)
    def delete_expected(self, group: str) -> None:
        self.ctx.delete_expected(group=group)

    @rule(group=groups)
    def delete_group(self, group: str) -> None:
        self.ctx.delete(group=group)

    @rule()
    def restart(self) -> None:
        """SIGTERM (parked requests answered 15), then a new process loads the data dir."""
        self.ctx.shutdown()
        for handle in self.ctx.handles.values():
            assert handle.answered
        self.ctx = self.ctx.reload()
        self.generations = {g: group.generation_id for g, group in self.ctx.core.groups.items()}
        self.diverged.clear()
        self.writes_checked = 0

    # --------------------------------------------------------------------------------------- invariants

    @invariant()
    def remember_ids(self) -> None:
        for group_id, group in self.ctx.core.groups.items():
            self.seen[group_id].update((m.member_id, m.group_instance_id) for m in group.members.values())
            self.seen[group_id].update((p, None) for p in group.pending_join_members)

    @invariant()
    def bounds_hold(self) -> None:
        core = self.ctx.core
        assert core.usage.bytes <= BOUNDS.max_stored_bytes  # type: ignore[operator]
        for ledger in core.tenants.values():
            assert ledger.bytes <= BOUNDS.max_stored_bytes_per_tenant  # type: ignore[operator]
            assert ledger.groups <= BOUNDS.max_groups_per_tenant  # type: ignore[operator]
        for group in core.groups.values():
            assert group.usage.offset_count <= BOUNDS.offsets_max_per_group  # type: ignore[operator]
            assert len(group.pending_join_members) <= BOUNDS.max_pending_members_per_group

    @invariant()
    def generation_never_decreases(self) -> None:
        for group_id in GROUPS:
            group = self.ctx.core.groups.get(group_id)
            if group is None:
                self.generations.pop(group_id, None)  # deleted (or its creation failed): a new group starts at 0
                continue
            assert group.generation_id >= self.generations.get(group_id, 0), group
            self.generations[group_id] = group.generation_id

    @invariant()
    def replay_rebuilds_the_persisted_view(self) -> None:
        for write, ok in self.ctx.write_log[self.writes_checked :]:
            for record in write.records:
                if not isinstance(record, GroupRecord):
                    continue
                if ok:
                    self.diverged.discard(record.group_id)
                elif record.value is not None and not record.members and record.value.generation > 0:
                    self.diverged.add(record.group_id)
        self.writes_checked = len(self.ctx.write_log)

        replayed = Coordinator(self.ctx.config)
        for record in self.ctx.records:
            replayed.replay(record)
        live = self.ctx.core
        assert set(replayed.groups) <= set(live.groups)
        assert replayed.offsets == live.offsets
        for group_id, group in live.groups.items():
            loaded = replayed.groups.get(group_id)
            if loaded is not None:
                assert loaded.expected_instance_ids == group.expected_instance_ids, group_id
            if group.state not in (STABLE, EMPTY) or group_id in self.diverged:
                continue
            if loaded is None:
                # Only a simple group whose every committed partition was refused is never written (as in Kafka).
                assert group.state is EMPTY and group.generation_id == 0 and group_id not in live.offsets, group_id
                continue
            assert persisted_view(loaded) == persisted_view(group), group_id


TestCoordinatorStateMachine = CoordinatorMachine.TestCase
TestCoordinatorStateMachine.settings = settings(
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
