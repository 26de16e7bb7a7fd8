"""The member side of the classic group protocol: join, sync, heartbeat, rejoin, as Kafka's Java client does it.

Owns ``GroupCoordination``, the loop one member runs (``run``) and the identity it holds (member id, generation).
Rules, each Kafka's (AbstractCoordinator / ConsumerCoordinator, eager protocol):

- Join v9. A dynamic member's first join gets MEMBER_ID_REQUIRED with its id and rejoins at once with it
  (KIP-394). A static member joins with its ``group.instance.id`` and an empty member id on every start (KIP-345).
- Eager rebalancing: before every join the member revokes everything it holds (``on_revoked``), after the sync
  it is assigned (``on_assigned``). The subscription still carries what it held (``owned_partitions``), so the
  sticky assignor can give it back; after a reset (below) it carries nothing, as those partitions were lost.
- Sync v5. The leader runs the assignor over the members' subscriptions, unless the coordinator says
  ``skip_assignment`` (KIP-814: a static leader restarted without a rebalance): then it syncs with no
  assignments and stays leader. Protocol type and name must match the join's (KIP-559), else it is fatal.
- Heartbeat v4 every ``heartbeat_interval_ms`` while stable. REBALANCE_IN_PROGRESS → rejoin keeping the member
  id and generation; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION → reset (forget member id and generation) and
  rejoin; FENCED_INSTANCE_ID → ``FencedInstanceError``, fatal.
- Connection errors, HTTP 5xx, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR: wait
  with backoff and retry the same call, keeping member id and generation. A retried sync is safe (the coordinator
  answers a sync of the current generation with the member's assignment), and unlike Kafka's rejoin it cannot
  turn a coordinator restart into a leader_rejoin rebalance.
- Join and sync are long-polls with a timeout of the rebalance timeout plus ``LONG_POLL_MARGIN_MS`` (docs/api.md §1).
- Any other error, or an HTTP 4xx (bad request, 401/403), is a ``MemberFatalError``: retrying cannot fix it.
- Other tasks (commit) ask for a rejoin through ``request_rejoin``, tagged with the generation they saw, so an
  answer about an old generation never disturbs a newer one. Callbacks run inline: keep them short, they delay
  heartbeats.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeAlias

from berth.coordinator.client.assignors import Assignor
from berth.coordinator.client.backoff import Backoff, BackoffPolicy
from berth.coordinator.client.calls import PROTOCOL_TYPE, GroupCalls, identity
from berth.coordinator.client.config import MemberConfig
from berth.coordinator.client.encoding import Assignment, EncodingError, decode_assignment, encode_subscription
from berth.coordinator.client.errors import (
    CoordinatorHttpError,
    CoordinatorUnavailableError,
    FencedInstanceError,
    MemberFatalError,
)
from berth.coordinator.client.leader import assign_as_leader, subscription_for
from berth.coordinator.client.state import (
    EMPTY_ASSIGNMENT,
    AssignmentChange,
    MemberState,
    Phase,
    Watched,
    partitions_of,
)
from berth.coordinator.client.transport import RETRIABLE_ERRORS
from berth.coordinator.protocol import Error, HeartbeatRequest, JoinResponse, TopicPartition

log = logging.getLogger("berth.client")

#: Added to the rebalance timeout for join and sync (Kafka's JoinGroup request timeout uses the same 5 s).
LONG_POLL_MARGIN_MS: Final = 5_000

OnRevoked: TypeAlias = Callable[[frozenset[TopicPartition]], Awaitable[None] | None]
OnAssigned: TypeAlias = Callable[[AssignmentChange], Awaitable[None] | None]

_RESET_ERRORS = frozenset({Error.UNKNOWN_MEMBER_ID, Error.ILLEGAL_GENERATION})


class GroupCoordination:
    """One member's protocol loop. Not thread-safe; one ``run()`` per instance."""

    def __init__(
        self,
        config: MemberConfig,
        calls: GroupCalls,
        assignors: Mapping[str, Assignor],
        backoff: BackoffPolicy,
        state: Watched[MemberState],
        *,
        on_revoked: OnRevoked | None = None,
        on_assigned: OnAssigned | None = None,
    ) -> None:
        self.config = config
        self.calls = calls
        self.assignors = assignors
        self.backoff = backoff
        self.state = state
        self.on_revoked = on_revoked
        self.on_assigned = on_assigned
        self.last_change: AssignmentChange | None = None
        self._rejoin = asyncio.Event()
        self._rejoin_reason: str | None = None
        self._reset_pending = False
        self._fatal: MemberFatalError | None = None
        # What the member held before its latest revocation: the diff's "previous" and the sticky input.
        self._previous = EMPTY_ASSIGNMENT
        self._owned_for_subscription = EMPTY_ASSIGNMENT
        # When the current outage began (the loop's clock), and when it next deserves a WARNING (_wait_out).
        self._outage_since: float | None = None
        self._outage_warn_at = 0.0

    # ------------------------------------------------------------------------------------------ what others use

    def identity(self) -> HeartbeatRequest:
        current = self.state.value
        return identity(current.member_id, current.generation_id, self.config.group_instance_id)

    def request_rejoin(self, reason: str, *, generation_id: int, reset: bool = False) -> bool:
        """Ask the loop to rejoin (and with ``reset`` to forget its ids first) if still in ``generation_id``."""
        if generation_id != self.state.value.generation_id:
            return False
        self._reset_pending = self._reset_pending or reset
        self._rejoin_reason = reason
        self._rejoin.set()
        return True

    def fail(self, error: MemberFatalError) -> None:
        """Stop the loop with ``error`` (e.g. a commit was fenced); ``run`` raises it."""
        self._fatal = self._fatal or error
        self._rejoin.set()

    async def run(self) -> None:
        """Join, sync and heartbeat until cancelled; raises ``MemberFatalError`` when the member cannot go on."""
        try:
            while True:
                await self._join_group()
                await self._heartbeat_until_rejoin()
        except CoordinatorHttpError as error:
            raise MemberFatalError(
                f"group {self.config.group_id!r}: the coordinator refused the member: {error}"
            ) from error

    async def revoke_all(self, why: str) -> None:
        """Revoke everything held (eager protocol), calling ``on_revoked`` with it."""
        held = self.state.value.assignment
        self._previous = held
        self._publish(phase=Phase.UNJOINED, assignment=EMPTY_ASSIGNMENT)
        if partitions_of(held):
            log.info("group %s: revoking %s (%s)", self.config.group_id, _describe(held.partitions), why)
            await self._call_back(self.on_revoked, partitions_of(held), "on_revoked")

    # ------------------------------------------------------------------------------------------------ join + sync

    async def _join_group(self) -> None:
        reason = self._rejoin_reason or ("static member starting" if self.config.is_static else "member starting")
        self._rejoin_reason = None
        await self.revoke_all(reason)
        if self._reset_pending:
            self._reset_identity()
        backoff = self.backoff.start()
        while True:
            self._raise_if_failed()
            if self._reset_pending:
                self._reset_identity()
            current = self.state.value
            self._publish(phase=Phase.JOINING)
            subscription = encode_subscription(subscription_for(self.config.topics, self._owned_for_subscription))
            try:
                joined = await self.calls.join(
                    member_id=current.member_id,
                    group_instance_id=self.config.group_instance_id,
                    session_timeout_ms=self.config.session_timeout_ms,
                    rebalance_timeout_ms=self.config.rebalance_timeout_ms,
                    protocols=[(name, subscription) for name in self.assignors],
                    client_id=self.config.client_id,
                    reason=reason,
                    timeout_s=self._long_poll_timeout_s(),
                )
            except CoordinatorUnavailableError as error:
                await self._wait_out(error, backoff)
                continue
            if joined.error is Error.NONE:
                self._mark_reachable()
                if await self._sync(joined, backoff):
                    return
                reason = self._rejoin_reason or "sync did not complete"
            elif joined.error is Error.MEMBER_ID_REQUIRED:
                # KIP-394: the coordinator handed out our id; join again with it, at once.
                self._publish_reachable(member_id=joined.member_id)
                reason = "member id required"
            elif joined.error in _RESET_ERRORS:
                self._reset_identity()
                reason = f"join answered {joined.error.name}"
            elif joined.error is Error.REBALANCE_IN_PROGRESS:
                reason = "join superseded"  # a newer join of ours replaced a parked one: join again
            elif joined.error in RETRIABLE_ERRORS:
                await self._wait_out(joined.error.name, backoff)
            else:
                raise self._fatal_error(joined.error, "join")

    async def _sync(self, joined: JoinResponse, backoff: Backoff) -> bool:
        """Sync the generation ``joined`` completed; False when the member must join again."""
        protocol = joined.protocol_name
        if protocol is None or protocol not in self.assignors:
            raise self._fatal_error(Error.INCONSISTENT_GROUP_PROTOCOL, f"join (chose protocol {protocol!r})")
        self._publish(
            phase=Phase.SYNCING,
            member_id=joined.member_id,
            generation_id=joined.generation_id,
            is_leader=joined.is_leader,
            protocol_name=protocol,
        )
        assignments: dict[str, bytes] = {}
        if joined.is_leader and not joined.skip_assignment:
            assignments = assign_as_leader(self.assignors[protocol], joined.members, self.config.topics)
        elif joined.is_leader:
            log.info(
                "group %s: leader with skip_assignment (KIP-814): keeping the stored assignment", self.config.group_id
            )
        while True:
            self._raise_if_failed()
            try:
                synced = await self.calls.sync(
                    self.identity(),
                    protocol_name=protocol,
                    assignments=assignments,
                    timeout_s=self._long_poll_timeout_s(),
                )
            except CoordinatorUnavailableError as error:
                await self._wait_out(error, backoff)
                continue
            if synced.error is Error.NONE:
                self._mark_reachable()
                if synced.protocol_type != PROTOCOL_TYPE or synced.protocol_name != protocol:
                    raise self._fatal_error(
                        Error.INCONSISTENT_GROUP_PROTOCOL,
                        f"sync answered protocol {synced.protocol_type}/{synced.protocol_name}, joined {protocol}",
                    )
                try:
                    assignment = decode_assignment(synced.assignment)
                except EncodingError as error:
                    raise MemberFatalError(f"group {self.config.group_id!r}: unreadable assignment: {error}") from error
                await self._complete_rebalance(assignment)
                return True
            if synced.error is Error.REBALANCE_IN_PROGRESS:
                self._rejoin_reason = "sync answered REBALANCE_IN_PROGRESS"
                return False
            if synced.error in _RESET_ERRORS:
                self._reset_identity()
                return False
            if synced.error in RETRIABLE_ERRORS:
                await self._wait_out(synced.error.name, backoff)
                continue
            raise self._fatal_error(synced.error, "sync")

    async def _complete_rebalance(self, assignment: Assignment) -> None:
        current = self.state.value
        change = AssignmentChange(current.generation_id, assignment, self._previous, current.is_leader)
        self.last_change = change
        self._owned_for_subscription = assignment
        # Every rejoin request so far concerned an older generation, or this one before it completed.
        self._rejoin.clear()
        self._reset_pending = False
        log.info(
            "group %s generation %d: assigned %s%s",
            self.config.group_id,
            change.generation_id,
            _describe(assignment.partitions),
            " (leader)" if change.is_leader else "",
        )
        await self._call_back(self.on_assigned, change, "on_assigned")
        self._publish(phase=Phase.STABLE, assignment=assignment, rebalances=current.rebalances + 1)

    # ---------------------------------------------------------------------------------------------- heartbeats

    async def _heartbeat_until_rejoin(self) -> None:
        backoff = self.backoff.start()
        wait_s = self.config.heartbeat_interval_ms / 1000
        while True:
            rejoin = await self._rejoin_requested_within(wait_s)
            self._raise_if_failed()
            if rejoin:
                return
            try:
                error = (await self.calls.heartbeat(self.identity())).error
            except CoordinatorUnavailableError as unavailable:
                await self._wait_out(unavailable, backoff)
                wait_s = 0
                continue
            if error is Error.NONE:
                backoff.reset()
                self._publish_reachable(heartbeats_ok=self.state.value.heartbeats_ok + 1)
                wait_s = self.config.heartbeat_interval_ms / 1000
            elif error is Error.REBALANCE_IN_PROGRESS:
                self._rejoin_reason = "heartbeat answered REBALANCE_IN_PROGRESS"
                return
            elif error in _RESET_ERRORS:
                self._reset_pending = True
                self._rejoin_reason = f"heartbeat answered {error.name}"
                return
            elif error in RETRIABLE_ERRORS:
                await self._wait_out(error.name, backoff)
                wait_s = 0
            else:
                raise self._fatal_error(error, "heartbeat")

    async def _rejoin_requested_within(self, timeout_s: float) -> bool:
        if self._rejoin.is_set():
            return True
        try:
            await asyncio.wait_for(self._rejoin.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    # ------------------------------------------------------------------------------------------------- helpers

    def _reset_identity(self) -> None:
        """Forget member id and generation (Kafka's resetGenerationOnResponseError); held partitions are lost."""
        self._reset_pending = False
        self._owned_for_subscription = EMPTY_ASSIGNMENT
        self._publish(member_id="", generation_id=-1, is_leader=False, protocol_name=None)

    async def _wait_out(self, error: object, backoff: Backoff) -> None:
        """Wait before retrying a call the coordinator did not answer. A failover or restart is a few seconds of
        this: logged at INFO; a WARNING once the outage has lasted a third of the session timeout (the member's
        session is then at risk), and again every further session timeout."""
        current = self.state.value
        streak = current.unavailable_streak + 1
        self._publish(unavailable_streak=streak, last_error=str(error))
        delay_ms = backoff.next_delay_ms()
        now = asyncio.get_running_loop().time()
        if streak == 1 or self._outage_since is None:
            self._outage_since, self._outage_warn_at = now, now + self.config.session_timeout_ms / 3000
        level = logging.DEBUG
        if streak == 1:
            level = logging.INFO
        if now >= self._outage_warn_at:
            level = logging.WARNING
            self._outage_warn_at = now + self.config.session_timeout_ms / 1000
        log.log(
            level,
            "group %s: coordinator unavailable for %.1f s (%s); retrying in %.0f ms",
            self.config.group_id,
            now - self._outage_since,
            error,
            delay_ms,
        )
        await backoff.policy.sleep(delay_ms / 1000)

    def _mark_reachable(self) -> None:
        if self.state.value.unavailable_streak:
            self._publish_reachable()

    def _publish_reachable(self, **fields: Any) -> None:
        """Publish ``fields`` with the unavailable streak over; an outage that was waited out is logged (INFO)."""
        streak = self.state.value.unavailable_streak
        if streak and self._outage_since is not None:
            log.info(
                "group %s: coordinator answering again after %.1f s (%d retries)",
                self.config.group_id,
                asyncio.get_running_loop().time() - self._outage_since,
                streak,
            )
        self._outage_since = None
        self._publish(unavailable_streak=0, **fields)

    def _raise_if_failed(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def _fatal_error(self, error: Error, call: str) -> MemberFatalError:
        if error is Error.FENCED_INSTANCE_ID and self.config.group_instance_id is not None:
            return FencedInstanceError(self.config.group_id, self.config.group_instance_id)
        hint = _FATAL_HINTS.get(error, "")
        return MemberFatalError(
            f"group {self.config.group_id!r}: {call} failed with {error.name} ({error.value}){hint}", error
        )

    def _long_poll_timeout_s(self) -> float:
        return (self.config.rebalance_timeout_ms + LONG_POLL_MARGIN_MS) / 1000

    def _publish(self, **changes: Any) -> None:
        self.state.set(dataclasses.replace(self.state.value, **changes))

    async def _call_back(self, callback: Callable[[Any], Awaitable[None] | None] | None, arg: Any, name: str) -> None:
        if callback is None:
            return
        try:
            result = callback(arg)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            # Kafka logs a listener's exception and carries on: the protocol must not stall on application bugs.
            log.exception("group %s: %s callback raised", self.config.group_id, name)


_FATAL_HINTS: Final[Mapping[Error, str]] = {
    Error.INVALID_SESSION_TIMEOUT: ": the session timeout is outside the coordinator's bounds (GET /v1/config)",
    Error.INCONSISTENT_GROUP_PROTOCOL: ": the group's members share no assignor, or use another protocol type",
    Error.GROUP_AUTHORIZATION_FAILED: ": the token is not allowed on this group",
    Error.GROUP_MAX_SIZE_REACHED: ": the group is full (--group-max-size)",
    Error.INVALID_GROUP_ID: ": the group id is not valid",
}


def _describe(partitions: Mapping[str, tuple[int, ...]]) -> str:
    if not any(partitions.values()):
        return "nothing"
    return ", ".join(f"{topic}{list(numbers)}" for topic, numbers in partitions.items() if numbers)
