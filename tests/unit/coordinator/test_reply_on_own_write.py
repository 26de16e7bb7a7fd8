"""Which answers to a static member's restart need only their own write durable (``Effects.own_write``).

In a busy group the next transaction is always in flight when a write is durable: an answer held for the group's
later writes waits one transaction more. A restarted follower's answer (its new id, the generation, protocol and the
leader) reveals nothing those later writes change, so the core marks it ``own_write``; the member list a KIP-814
leader gets, or a leader replaced by a write still in flight, does not qualify. Then the engine's side: it releases
such an answer as its write is durable, and holds any other for the group's writes handed over before it (the
writer here is a stand-in that makes writes durable when the test says).
"""

from __future__ import annotations

import asyncio

import pytest

from berth.coordinator.core import Effects, Record, Write
from berth.coordinator.http.clock import ManualClock
from berth.coordinator.http.engine import Engine, WritesDone
from berth.coordinator.protocol import Error, JoinRequest, JoinResponse
from berth.coordinator.store import TransactionStats

from .scenario import GROUP, PROTOCOL_TYPE, PROTOCOLS, REBALANCE_MS, SESSION_MS, Scenario

TICKETS = iter(range(10_000, 20_000))  # above the scenario's own tickets: these are answered here, not by it


def join_request(instance_id: str, version: int) -> JoinRequest:
    return JoinRequest(
        member_id="",
        session_timeout_ms=SESSION_MS,
        protocol_type=PROTOCOL_TYPE,
        protocols=tuple(PROTOCOLS),
        api_version=version,
        group_instance_id=instance_id,
        rebalance_timeout_ms=REBALANCE_MS,
        client_id="client",
    )


def restart(ctx: Scenario, instance_id: str, version: int) -> tuple[int, Write]:
    """A static member's restart handed to the core; its write is held (not yet durable)."""
    ticket = next(TICKETS)
    fx = ctx.core.join(GROUP, join_request(instance_id, version), version, ticket, ctx.now, "127.0.0.1")
    assert fx.replies == []  # answered once durable
    (write,) = fx.writes
    return ticket, write


def durable(ctx: Scenario, write: Write) -> Effects:
    return ctx.core.on_write_done(write.token, True, ctx.now)


def answer(fx: Effects, ticket: int) -> JoinResponse:
    (response,) = [r for t, r in fx.replies if t == ticket]
    assert isinstance(response, JoinResponse) and response.error == Error.NONE
    return response


def own_write(fx: Effects) -> set[int]:
    return fx.own_write or set()


@pytest.mark.parametrize("version", [5, 9])
def test_a_restarted_followers_answer_needs_only_its_own_write(version: int) -> None:
    ctx = Scenario()
    formed = ctx.form_group("i-0", "i-1", "i-2")
    followers = [iid for iid in ("i-0", "i-1", "i-2") if formed.member(iid) != formed.leader]
    first, first_write = restart(ctx, followers[0], version)
    second, second_write = restart(ctx, followers[1], version)  # the group's next write, in flight
    fx = durable(ctx, first_write)
    assert answer(fx, first).leader == formed.leader
    assert own_write(fx) == {first}
    assert own_write(durable(ctx, second_write)) == {second}


def test_a_restarted_kip_814_leaders_answer_waits_for_the_groups_writes() -> None:
    """The member list it gets holds the other members' ids, some maybe from writes still in flight."""
    ctx = Scenario()
    formed = ctx.form_group("i-0", "i-1", "i-2")
    leader_iid = next(iid for iid in ("i-0", "i-1", "i-2") if formed.member(iid) == formed.leader)
    ticket, write = restart(ctx, leader_iid, 9)
    fx = durable(ctx, write)
    assert answer(fx, ticket).skip_assignment and len(answer(fx, ticket).members) == 3
    assert own_write(fx) == set()


@pytest.mark.parametrize(("version", "alone"), [(9, False), (5, True)])
def test_a_followers_answer_naming_a_leader_replaced_since_its_join_waits_for_the_groups_writes(
    version: int, alone: bool
) -> None:
    """At v9 the answer names the current leader, whose new id may not be durable yet; before v9 it names the
    leader as it was at the join (durable before the follower's write), so it needs nothing more."""
    ctx = Scenario()
    formed = ctx.form_group("i-0", "i-1", "i-2")
    leader_iid = next(iid for iid in ("i-0", "i-1", "i-2") if formed.member(iid) == formed.leader)
    follower_iid = next(iid for iid in ("i-0", "i-1", "i-2") if iid != leader_iid)
    ticket, write = restart(ctx, follower_iid, version)
    _, leader_write = restart(ctx, leader_iid, version)  # the leader's new id: a write in flight
    fx = durable(ctx, write)
    named = answer(fx, ticket).leader
    assert named == (formed.leader if alone else ctx.group().leader_id)
    assert (ticket in own_write(fx)) is alone
    durable(ctx, leader_write)


# ------------------------------------------------------------------------------------------------ the engine


class HeldWriter:
    """The engine's writer port: holds what it is handed until ``durable`` reports the oldest writes done."""

    healthy = True
    failure = ""
    faults = None

    def __init__(self, on_done: WritesDone) -> None:
        self.on_done = on_done
        self.held: list[Write] = []
        self.stats = TransactionStats()

    def submit(self, write: Write) -> None:
        self.held.append(write)

    def durable(self, n: int) -> None:
        done, self.held = self.held[:n], self.held[n:]
        self.on_done([(write.token, True) for write in done])

    def probe(self) -> None:
        pass

    def flush(self, timeout: float | None = None) -> bool:
        return True

    def close(self) -> None:
        pass


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def no_records(_group_id: str) -> list[Record]:
    raise AssertionError("no group is reloaded here")


async def test_the_engine_releases_a_followers_answer_as_its_write_is_durable_and_holds_the_leaders() -> None:
    ctx = Scenario()
    formed = ctx.form_group("i-0", "i-1", "i-2")
    leader_iid = next(iid for iid in ("i-0", "i-1", "i-2") if formed.member(iid) == formed.leader)
    follower_iids = [iid for iid in ("i-0", "i-1", "i-2") if iid != leader_iid]
    writers: list[HeldWriter] = []

    def make_writer(on_done: WritesDone) -> HeldWriter:
        writers.append(HeldWriter(on_done))
        return writers[-1]

    engine = Engine(ctx.core, ManualClock(ctx.now), make_writer, no_records)
    (writer,) = writers

    def restarting(instance_id: str) -> asyncio.Task[object]:
        request = join_request(instance_id, 9)
        return asyncio.create_task(
            engine.call(
                lambda ticket, now: ctx.core.join(GROUP, request, 9, ticket, now, "127.0.0.1"),
                lambda: JoinResponse(Error.COORDINATOR_NOT_AVAILABLE),
                GROUP,
            )
        )

    follower, other_follower = restarting(follower_iids[0]), restarting(follower_iids[1])
    await settle()
    assert len(writer.held) == 2 and not follower.done()
    writer.durable(1)  # the first follower's write; the other's, of the same group, still in flight
    await settle()
    assert follower.done() and not other_follower.done()
    writer.durable(1)
    await settle()
    assert other_follower.done()
    leader = restarting(leader_iid)
    last = restarting(follower_iids[0])  # the group's next write, in flight when the leader's is durable
    await settle()
    writer.durable(1)  # the leader's write
    await settle()
    assert not leader.done()  # its member list may show what the write in flight holds
    writer.durable(1)
    await settle()
    assert leader.done() and last.done()
    answered = leader.result()
    assert isinstance(answered, JoinResponse) and answered.error == Error.NONE and answered.skip_assignment
