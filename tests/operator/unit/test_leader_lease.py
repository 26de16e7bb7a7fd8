"""Leader election, decided purely (``planners.lease``), kept in time (``leader.LeaderElector``, ``LeaderGate``) and
put in front of every write (``gated``, ``kube.calls.GatedApiClient``), against a Lease kept in memory and a clock
the test moves."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import kubernetes
import pytest

from berth.coordinator.daemon import failpoints
from berth.operator.adapters.kube.calls import GatedApiClient
from berth.operator.adapters.kube.lease import LeaseApi
from berth.operator.adapters.leadership.gated import GatedCoordinatorPort
from berth.operator.adapters.leadership.leader import NO_RELEASE_BUG, LeaderElector, LeaderGate
from berth.operator.adapters.leadership.leader_options import LeaderOptionsError
from berth.operator.command.options import OptionsError, parse_options
from berth.operator.planners.lease import (
    LeaseConflict,
    LeaseLost,
    LeaseRecord,
    LeaseTiming,
    LeaseTimingError,
    Observed,
    Wait,
    Write,
    check_timing,
    decide,
    observe,
    released,
    write_bound_s,
)
from berth.operator.ports import NotLeading

TIMING = LeaseTiming(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2)
WALL = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def held_by(holder: str, version: str = "7") -> LeaseRecord:
    return LeaseRecord(holder, 15, "2026-11-01T11:00:00.000000Z", "2026-11-01T11:59:59.000000Z", 3, version)


# --- the decisions ---------------------------------------------------------------------------------------------


def test_a_missing_lease_is_created_once_it_was_seen_missing_for_a_lease_duration() -> None:
    """It may have been deleted under a leader that has not noticed yet (issue 28: two leaders for 17 ms)."""
    seen = observe(None, None, 100.0)
    assert decide("a", seen, TIMING, now=100.0, wall=WALL) == Wait("", 115.0)
    seen = observe(seen, None, 110.0)
    assert seen.seen_at == 100.0  # still missing: the wait goes on from the first look
    assert decide("a", seen, TIMING, now=114.9, wall=WALL) == Wait("", 115.0)
    decision = decide("a", seen, TIMING, now=115.0, wall=WALL)
    assert isinstance(decision, Write) and decision.create
    assert decision.record.holder == "a" and decision.record.transitions == 0
    assert decision.record.acquire_time == decision.record.renew_time == "2026-11-01T12:00:00.000000Z"
    # Seen held, then missing: the wait starts again from the first look at the missing Lease.
    seen = observe(observe(None, held_by("b"), 100.0), None, 112.0)
    assert decide("a", seen, TIMING, now=126.9, wall=WALL) == Wait("", 127.0)


def test_a_lease_edited_to_a_shorter_duration_is_still_waited_for_the_candidates_own() -> None:
    shortened = replace(held_by("b"), lease_duration_s=1, renew_time="2000-01-01T00:00:00.000000Z")
    seen = observe(None, shortened, 100.0)
    assert decide("a", seen, TIMING, now=114.9, wall=WALL) == Wait("b", 115.0)
    assert isinstance(decide("a", seen, TIMING, now=115.0, wall=WALL), Write)
    longer = replace(held_by("b"), lease_duration_s=30)
    assert decide("a", observe(None, longer, 100.0), TIMING, now=129.9, wall=WALL) == Wait("b", 130.0)


def test_the_write_bound_is_half_the_margin_between_the_renew_deadline_and_the_lease() -> None:
    assert write_bound_s(TIMING) == 2.5
    assert write_bound_s(LeaseTiming(4, 3, 0.5)) == 0.5


def test_a_held_lease_is_waited_for_until_its_duration_passed_on_the_candidates_own_clock() -> None:
    seen = observe(None, held_by("b"), 100.0)
    assert decide("a", seen, TIMING, now=114.9, wall=WALL) == Wait("b", 115.0)
    # The same record read again later does not restart the clock: its holder did not renew.
    seen = observe(seen, held_by("b"), 110.0)
    assert seen.seen_at == 100.0
    taken = decide("a", seen, TIMING, now=115.0, wall=WALL)
    assert isinstance(taken, Write) and not taken.create and taken.taking_from == "b"
    assert (taken.record.holder, taken.record.transitions, taken.record.resource_version) == ("a", 4, "7")


def test_a_renewal_seen_restarts_the_wait_whatever_the_holders_clock_says() -> None:
    seen = observe(None, held_by("b", "7"), 100.0)
    renewed = replace(held_by("b", "8"), renew_time="1999-01-01T00:00:00.000000Z")  # a clock far behind
    seen = observe(seen, renewed, 112.0)
    assert seen == Observed(renewed, 112.0)
    assert decide("a", seen, TIMING, now=120.0, wall=WALL) == Wait("b", 127.0)


def test_a_released_lease_is_taken_at_once_and_the_holder_renews_its_own() -> None:
    free = released(held_by("b"), WALL)
    assert free.holder == "" and free.lease_duration_s == 1
    taken = decide("a", observe(None, free, 100.0), TIMING, now=100.0, wall=WALL)
    assert isinstance(taken, Write) and taken.record.holder == "a" and taken.taking_from == ""
    assert taken.record.transitions == 3  # a release is not a transition; the takeover after it was counted
    mine = decide("a", observe(None, held_by("a"), 100.0), TIMING, now=100.0, wall=WALL)
    assert isinstance(mine, Write) and mine.taking_from is None and mine.record.holder == "a"


@pytest.mark.parametrize(
    "timing",
    [LeaseTiming(15, 15, 2), LeaseTiming(15, 10, 10), LeaseTiming(15, 20, 2), LeaseTiming(15, 10, 0)],
)
def test_timings_that_would_let_two_act_are_refused(timing: LeaseTiming) -> None:
    with pytest.raises(LeaseTimingError, match="must stop acting before another may take over"):
        check_timing(timing)


def test_leader_election_flags(tmp_path: Path) -> None:
    off = parse_options([], {"POD_NAMESPACE": "ops"})
    assert off.leader_election is None
    on = parse_options(
        ["--leader-elect", "--leader-elect-retry-period-s", "1"], {"POD_NAMESPACE": "ops", "POD_NAME": "op-0"}
    )
    assert on.leader_election is not None
    assert (on.leader_election.namespace, on.leader_election.lease) == ("ops", "berth-operator")
    assert on.leader_election.identity.startswith("op-0_")
    assert on.leader_election.timing == LeaseTiming(15, 10, 1)
    with pytest.raises(OptionsError, match="renew deadline"):
        parse_options(["--leader-elect", "--leader-elect-renew-deadline-s", "20"], {"POD_NAMESPACE": "ops"})
    with pytest.raises(OptionsError, match="namespace is unknown"):
        parse_options(["--leader-elect"], {}, service_account_namespace_file=tmp_path / "none")
    assert issubclass(LeaderOptionsError, ValueError)


# --- the elector, in time -------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class MemoryLease:
    """A Lease with resourceVersions, as the API server keeps it; ``fail`` makes writes fail (a partition). Its watch
    tells of every write made through it or :meth:`put`."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.fail = False
        self.announced: list[str] = []
        self.changed = asyncio.Event()
        self.watchers = 0

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[asyncio.Event]:
        self.watchers += 1
        try:
            yield self.changed
        finally:
            self.watchers -= 1

    def put(self, record: LeaseRecord | None) -> None:
        """Someone else's write (or a deletion), told to the watch."""
        self.version += 1
        self.record = None if record is None else replace(record, resource_version=str(self.version))
        self.changed.set()

    async def read(self) -> LeaseRecord | None:
        if self.fail:
            raise ConnectionError("unreachable")
        return self.record

    async def write(self, record: LeaseRecord, *, create: bool) -> LeaseRecord:
        if self.fail:
            raise ConnectionError("unreachable")
        if not create and self.record is None:
            raise LeaseLost("HTTP 404: not found")  # a replace of a Lease that was deleted
        current = None if self.record is None else self.record.resource_version
        if (create and self.record is not None) or (not create and record.resource_version != current):
            raise LeaseConflict("changed meanwhile")
        self.version += 1
        self.record = replace(record, resource_version=str(self.version))
        self.changed.set()
        return self.record

    async def announce(self, message: str, *, now: datetime) -> None:
        self.announced.append(message)


def elector(lease: MemoryLease, clock: Clock, identity: str, gate: LeaderGate, leading: list[bool]) -> LeaderElector:
    async def sleep(seconds: float) -> None:
        clock.now += seconds
        await asyncio.sleep(0)

    return LeaderElector(
        lease,
        identity=identity,
        timing=TIMING,
        gate=gate,
        on_leading=leading.append,
        clock=clock,
        wall=lambda: WALL + timedelta(seconds=clock.now),
        sleep=sleep,
    )


async def test_one_leads_the_other_waits_and_takes_over_a_lease_duration_after_the_last_renewal() -> None:
    lease, clock = MemoryLease(), Clock()
    gate_a, gate_b = LeaderGate(clock), LeaderGate(clock)
    a_leading: list[bool] = []
    a = elector(lease, clock, "a", gate_a, a_leading)
    b = elector(lease, clock, "b", gate_b, [])
    await a.acquire()
    assert gate_a.leading and a_leading == [True] and lease.announced == ["a became leader"]
    gate_a.check()
    with pytest.raises(NotLeading):
        gate_b.check()
    # b looks every 2 s; a stops renewing at 1,000 s (it died): b takes over once 15 s passed since it saw a renew,
    # at that moment (its last wait is cut to it), not at its next look after it.
    started = clock.now
    await b.acquire()
    assert lease.record is not None and lease.record.holder == "b" and lease.record.transitions == 1
    assert clock.now - started == 15
    assert lease.announced[-1] == "b became leader (taking over from a)"


async def test_a_leader_that_cannot_renew_closes_its_gate_at_the_renew_deadline_before_anyone_may_take_over() -> None:
    lease, clock = MemoryLease(), Clock()
    gate, leading = LeaderGate(clock), []
    a = elector(lease, clock, "a", gate, leading)
    await a.acquire()
    acquired_at = clock.now
    lease.fail = True  # partitioned from the API server: every renewal fails
    await a.keep()
    assert leading == [True, False] and not gate.leading
    lost_at = clock.now
    assert lost_at - acquired_at <= TIMING.renew_deadline_s + TIMING.retry_period_s < TIMING.lease_duration_s
    with pytest.raises(NotLeading):
        gate.check()


async def test_a_deleted_lease_makes_no_second_leader() -> None:
    """Issue 28 saw two leaders for 17 ms after ``kubectl delete lease``: the standby created the Lease at once while
    the leader, whose renewal had failed, went on acting until its next renewal. Now the leader stops at the first
    renewal that finds the Lease gone, and the standby waits a lease duration before it creates it again."""
    lease, clock = MemoryLease(), Clock()
    gate_a, gate_b, a_leading = LeaderGate(clock), LeaderGate(clock), []
    a = elector(lease, clock, "a", gate_a, a_leading)
    b = elector(lease, clock, "b", gate_b, [])
    await a.acquire()
    assert not await b._try_acquire()  # b sees a's Lease
    lease.record = None  # deleted
    deleted_at = clock.now
    assert not await b._try_acquire()  # b sees none: it waits instead of creating it
    await a.keep()  # a's next renewal finds it gone
    assert not gate_a.leading and a_leading == [True, False]
    a_stopped = clock.now
    assert a_stopped - deleted_at <= TIMING.retry_period_s
    while not await b._try_acquire():
        clock.now += TIMING.retry_period_s
    assert gate_b.leading and clock.now - deleted_at >= TIMING.lease_duration_s > a_stopped - deleted_at


async def test_a_leader_whose_lease_is_refused_stops_at_once() -> None:
    """``helm uninstall`` deletes the replica's rights before it stops: a renewal answered 401 or 403 cannot succeed
    later, so the gate closes at once instead of at the renew deadline."""

    class Refusing(MemoryLease):
        refuse = False

        async def write(self, record: LeaseRecord, *, create: bool) -> LeaseRecord:
            if self.refuse:
                raise LeaseLost("HTTP 403: forbidden")
            return await super().write(record, create=create)

    lease, clock = Refusing(), Clock()
    gate = LeaderGate(clock)
    a = elector(lease, clock, "a", gate, [])
    await a.acquire()
    lease.refuse = True
    refused_at = clock.now
    await a.keep()
    assert not gate.leading and clock.now - refused_at <= TIMING.retry_period_s


async def test_the_no_release_bug_switch_brings_back_issue_28s_leader() -> None:
    """``bug.operator_no_release`` (tests only): the gate ignores the deadline and a stop leaves the Lease held."""
    lease, clock = MemoryLease(), Clock()
    gate = LeaderGate(clock)
    a = elector(lease, clock, "a", gate, [])
    await a.acquire()
    failpoints.configure(f"{NO_RELEASE_BUG}=on")
    try:
        clock.now += 60
        gate.check()  # no renewal for a minute, and the gate is open
        await a.release()
        assert lease.record is not None and lease.record.holder == "a"
    finally:
        failpoints.configure("")
    gate.renewed(sent_at=clock.now - 60, renew_deadline_s=10)
    with pytest.raises(NotLeading):
        gate.check()


async def test_a_stopping_leader_releases_the_lease_a_renewal_still_on_its_way_changed() -> None:
    """The campaign found it: the keeper was cancelled while a renewal was on its way, the renewal landed, and the
    release, sent with the resourceVersion before it, was refused (409) and left the Lease held."""
    lease, clock = MemoryLease(), Clock()
    gate = LeaderGate(clock)
    a = elector(lease, clock, "a", gate, [])
    await a.acquire()
    assert lease.record is not None
    lease.version += 1
    lease.record = replace(lease.record, renew_time="later", resource_version=str(lease.version))  # landed late
    await a.release()
    assert lease.record.holder == "" and not gate.leading
    # Taken by another meanwhile: nothing of ours to release, and nothing is written.
    b = elector(lease, clock, "b", LeaderGate(clock), [])
    lease.record = None
    await b.acquire()
    lease.record = replace(lease.record, holder="c", resource_version="77")
    await b.release()
    assert lease.record.holder == "c"


async def test_a_frozen_leader_finds_its_gate_closed_the_moment_it_runs_again() -> None:
    clock = Clock()
    gate = LeaderGate(clock)
    gate.renewed(sent_at=clock.now, renew_deadline_s=10)
    gate.check()
    clock.now += 9.9
    gate.check()
    clock.now += 0.1  # frozen (SIGSTOP) past the deadline: no renewal could have run
    with pytest.raises(NotLeading):
        gate.check()


async def test_a_leader_whose_lease_was_taken_stops_and_one_that_lets_go_releases_it() -> None:
    lease, clock = MemoryLease(), Clock()
    gate, leading = LeaderGate(clock), []
    a = elector(lease, clock, "a", gate, leading)
    await a.acquire()
    assert lease.record is not None
    lease.record = replace(lease.record, holder="b", resource_version="99")  # taken (a was too slow)
    await a.keep()
    assert not gate.leading and leading == [True, False]

    b_gate = LeaderGate(clock)
    b = elector(lease, clock, "b2", b_gate, [])
    lease.record = None
    await b.acquire()
    await b.release()
    assert not b_gate.leading
    assert lease.record is not None and lease.record.holder == "" and lease.record.lease_duration_s == 1


# --- the standby's waits: woken by a change of the Lease, or when its decision would change -----------------------


def test_a_wait_says_when_the_decision_changes_if_the_lease_does_not() -> None:
    """``until`` is the first moment ``decide`` no longer waits: before it, the same observation waits; from it on,
    the candidate writes. Held (the longer of the two durations), missing, or renewed (from when it was seen)."""
    cases = [
        (observe(None, held_by("b"), 100.0), 115.0),
        (observe(None, replace(held_by("b"), lease_duration_s=40), 100.0), 140.0),
        (observe(None, None, 100.0), 115.0),
        (observe(observe(None, held_by("b", "7"), 100.0), held_by("b", "8"), 107.5), 122.5),
    ]
    for seen, until in cases:
        waiting = decide("a", seen, TIMING, now=seen.seen_at, wall=WALL)
        assert isinstance(waiting, Wait) and waiting.until == until
        assert decide("a", seen, TIMING, now=until - 0.001, wall=WALL) == waiting
        assert isinstance(decide("a", seen, TIMING, now=until, wall=WALL), Write)


class Sleeper:
    """The elector's ``sleep``: each call waits until the test moves ``clock`` past its end (``advance``)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.asked: list[float] = []
        self._sleeping: list[tuple[float, asyncio.Future[None]]] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleeping.append((self.clock.now + seconds, woken))
        await woken

    async def advance(self, seconds: float) -> None:
        self.clock.now += seconds
        for until, woken in self._sleeping:
            if until <= self.clock.now and not woken.done():
                woken.set_result(None)
        await settle()


async def settle() -> None:
    """Let every task run until it waits again (on the sleeper or the Lease's watch)."""
    for _ in range(50):
        await asyncio.sleep(0)


def standby(lease: MemoryLease, clock: Clock, sleeper: Sleeper, timing: LeaseTiming = TIMING) -> LeaderElector:
    return LeaderElector(
        lease,
        identity="b",
        timing=timing,
        gate=LeaderGate(clock),
        clock=clock,
        wall=lambda: WALL + timedelta(seconds=clock.now),
        sleep=sleeper,
    )


async def test_a_standby_takes_a_released_lease_as_soon_as_its_watch_tells_it() -> None:
    """No retry period passes (the clock does not move): the release wakes the standby's wait."""
    lease, clock = MemoryLease(), Clock()
    lease.put(held_by("a"))
    sleeper = Sleeper(clock)
    b = standby(lease, clock, sleeper, LeaseTiming(15, 10, 9))
    taking = asyncio.create_task(b.acquire())
    await settle()
    assert sleeper.asked == [9] and not taking.done() and lease.watchers == 1
    assert lease.record is not None
    lease.put(released(lease.record, WALL))
    await settle()
    assert taking.done() and lease.record.holder == "b"
    await taking
    assert sleeper.asked == [9] and lease.watchers == 0  # it read again at once; the watch ends with the wait


async def test_a_standby_takes_an_expired_lease_when_it_expires_not_at_its_next_look() -> None:
    lease, clock = MemoryLease(), Clock()
    lease.put(held_by("a"))
    started = clock.now
    sleeper = Sleeper(clock)
    b = standby(lease, clock, sleeper, LeaseTiming(15, 10, 9))
    taking = asyncio.create_task(b.acquire())
    await settle()
    await sleeper.advance(9)
    assert sleeper.asked == [9, 6]  # the second wait ends when a's lease duration has run out on b's clock
    await sleeper.advance(5.999)
    assert not taking.done()
    await sleeper.advance(0.001)
    await taking
    assert lease.record is not None and lease.record.holder == "b" and clock.now - started == 15


async def test_a_renewal_the_watch_tells_restarts_the_standbys_wait_from_when_it_saw_it() -> None:
    """The watch only makes the standby see a renewal sooner: its wait then runs from that moment, so it takes over
    no sooner than the rules allow (here: 15 s after the renewal it saw, at 1,003 s)."""
    lease, clock = MemoryLease(), Clock()
    lease.put(held_by("a", "1"))
    sleeper = Sleeper(clock)
    b = standby(lease, clock, sleeper)
    taking = asyncio.create_task(b.acquire())
    await settle()
    await sleeper.advance(1)
    assert lease.record is not None
    renewed_at = clock.now + 2
    await sleeper.advance(2)  # b's retry period runs out: it reads a's Lease unchanged at 1,003 s
    # and a renews right after that read: without the watch, b would see it only at its next look (1,005 s).
    lease.put(replace(lease.record, renew_time="2026-11-01T12:00:03.000000Z"))
    await settle()
    assert len(sleeper.asked) == 3  # woken by the renewal, b waits again
    for _ in range(7):
        await sleeper.advance(2)
    assert not taking.done() and clock.now == renewed_at + 14
    await sleeper.advance(0.999)
    assert not taking.done()
    await sleeper.advance(0.001)
    await taking
    assert lease.record is not None and lease.record.holder == "b" and clock.now == renewed_at + 15


async def test_a_standby_whose_lease_cannot_be_read_looks_again_after_the_retry_period() -> None:
    lease, clock = MemoryLease(), Clock()
    lease.put(held_by("a"))
    lease.fail = True
    sleeper = Sleeper(clock)
    b = standby(lease, clock, sleeper)
    taking = asyncio.create_task(b.acquire())
    await settle()
    await sleeper.advance(2)
    assert sleeper.asked == [2, 2]
    lease.fail = False
    await sleeper.advance(2)
    assert sleeper.asked[-1] == 2 and not taking.done()
    taking.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await taking
    assert lease.watchers == 0


# --- the gate in front of writes --------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        async def call(*args: object, **kwargs: object) -> Mapping[str, str]:
            self.calls.append(name)
            return {}

        return call


async def test_a_closed_gate_refuses_every_coordinator_write_and_lets_reads_through() -> None:
    inner = Recorder()
    port = GatedCoordinatorPort(inner, LeaderGate())  # type: ignore[arg-type]
    for write in (
        port.claim_group("g", None, adopt=False),  # type: ignore[arg-type]
        port.release_group("g", "uid"),
        port.put_expected_members("g", ["a"]),
        port.delete_expected_members("g"),
        port.leave_instances("g", ["a"]),
        port.delete_group("g"),
    ):
        with pytest.raises(NotLeading):
            await write
    await port.describe("g")
    await port.get_config()
    assert inner.calls == ["describe", "get_config"]


def test_the_kubernetes_client_sends_no_write_through_a_closed_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr(kubernetes.client.ApiClient, "call_api", lambda self, method, url, *a, **k: sent.append(method))
    gate = LeaderGate()
    client = GatedApiClient(kubernetes.client.Configuration(), user_agent="berth-operator/test (a)", gate=gate)
    assert client.user_agent == "berth-operator/test (a)"
    client.call_api("GET", "/api/v1/pods")
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        with pytest.raises(NotLeading):
            client.call_api(method, "/api/v1/namespaces/x/pods")
    gate.renewed(sent_at=gate.clock(), renew_deadline_s=10)
    client.call_api("PATCH", "/api/v1/namespaces/x/pods/p")
    assert sent == ["GET", "PATCH"]


def test_the_leases_calls_are_made_once_and_their_connections_bounded() -> None:
    """The campaign saw a leader lose its Lease after a partition of 1.7 s, shorter than its renew deadline: urllib3
    retried a hung renewal three times, past the deadline, where the elector would have tried again at once."""
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration())
    lease = LeaseApi(client, namespace="ops", name="berth-operator", timeout_s=1.5, write_bound_s=0.5)
    try:
        kw = client.rest_client.pool_manager.connection_pool_kw
        assert kw["retries"] is False
        assert (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 500) in kw["socket_options"]
    finally:
        lease.close()
        client.close()
