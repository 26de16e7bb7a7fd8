"""``GroupMember``: the member library's front door — start, observe, iterate over assignments, commit, close.

Owns a member's lifecycle and its public views; the protocol itself is ``coordination``'s. Rules:

- ``start()`` runs the protocol loop in a background task; ``close()`` stops it, revokes what the member holds
  (``on_revoked``), and sends a leave only for a dynamic member or when asked (``close(leave=True)``): a static
  member that leaves would cost the rebalance static membership exists to avoid (KIP-345).
- Observers never poll: ``state`` is a consistent snapshot, ``wait_for(predicate)`` / ``wait_until_stable()``
  return when it holds, ``stable`` is an ``asyncio.Event`` set exactly while the member is stable, and
  ``assignments()`` yields each completed rebalance (the newest one when several happened meanwhile).
- A fatal error (``FencedInstanceError``, ``MemberFatalError``) stops heartbeating, revokes the held partitions, and
  is raised by every waiter, the iterator and ``run()``. ``close()`` ends waiters with ``MemberClosedError``
  and the iterator quietly.
- Offset commits carry generation, member id and instance id; a commit refused because the group moved on
  asks the loop to rejoin and raises ``CommitFailedError`` (its partitions may move, so it is not retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from types import TracebackType

import aiohttp

from berth.coordinator.client.assignors import Assignor, assignor_by_name
from berth.coordinator.client.backoff import BackoffPolicy
from berth.coordinator.client.calls import GroupCalls
from berth.coordinator.client.config import MemberConfig
from berth.coordinator.client.coordination import GroupCoordination, OnAssigned, OnRevoked
from berth.coordinator.client.encoding import Assignment
from berth.coordinator.client.errors import (
    CommitFailedError,
    FencedInstanceError,
    GroupError,
    MemberClosedError,
    MemberFatalError,
)
from berth.coordinator.client.retry import raise_if_retriable, with_retries
from berth.coordinator.client.state import AssignmentChange, MemberState, Phase, Watched
from berth.coordinator.client.transport import Transport
from berth.coordinator.protocol import Error, OffsetAndMetadata, TopicPartition
from berth.coordinator.protocol import FetchedPartition as CommittedOffset

log = logging.getLogger("berth.client")

_REJOIN_ON_COMMIT = {
    Error.REBALANCE_IN_PROGRESS: False,  # rejoin keeping ids
    Error.ILLEGAL_GENERATION: True,  # reset, then rejoin
    Error.UNKNOWN_MEMBER_ID: True,
}


class GroupMember:
    """One member of a consumer group. Use as ``async with GroupMember(config) as member:``."""

    def __init__(
        self,
        config: MemberConfig,
        *,
        on_assigned: OnAssigned | None = None,
        on_revoked: OnRevoked | None = None,
        assignors: Sequence[Assignor] | None = None,
        backoff: BackoffPolicy | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        """``assignors`` overrides ``config.assignors`` (same preference order); ``backoff`` the retry waits."""
        self.config = config
        chosen = list(assignors) if assignors is not None else [assignor_by_name(n) for n in config.assignors]
        self._backoff = backoff or BackoffPolicy(initial_ms=config.retry_backoff_ms, max_ms=config.retry_backoff_max_ms)
        self._transport = Transport(
            config.coordinator_url,
            token=config.token,
            request_timeout_s=config.request_timeout_ms / 1000,
            session=session,
            ca_file=config.ca_file,
            max_response_bytes=config.max_response_bytes,
        )
        self._calls = GroupCalls(self._transport, config.group_id)
        self._stable = asyncio.Event()
        self._watched = Watched(MemberState(), on_change=self._mirror_stable)
        self._coordination = GroupCoordination(
            config,
            self._calls,
            {assignor.name: assignor for assignor in chosen},
            self._backoff,
            self._watched,
            on_revoked=on_revoked,
            on_assigned=on_assigned,
        )
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = False

    # ------------------------------------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start joining the group in the background; returns at once (see ``wait_until_stable``)."""
        if self._task is not None or self._closing:
            raise RuntimeError("a GroupMember starts once")
        self._task = asyncio.create_task(self._drive(), name=f"berth-member-{self.config.group_id}")

    async def close(self, *, leave: bool | None = None) -> None:
        """Stop: revoke held partitions, then leave if ``leave`` (default: only a dynamic member leaves)."""
        if self._closing:
            return
        # Not closed yet: the revocation below runs on_revoked, which may still commit (Kafka's onLeavePrepare).
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        state = self.state
        try:
            if state.phase is not Phase.FAILED:
                await self._coordination.revoke_all("closing")
                should_leave = not self.config.is_static if leave is None else leave
                if should_leave and state.member_id:
                    await self._leave(state.member_id)
        finally:
            self._closed = True
            if self.state.phase is not Phase.FAILED:
                self._publish(phase=Phase.CLOSED)
            await self._transport.close()

    async def __aenter__(self) -> GroupMember:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def run(self) -> None:
        """Wait until the member stops: returns after ``close()``, raises the fatal error that stopped it."""
        with contextlib.suppress(MemberClosedError):
            await self.wait_for(lambda _: False)

    # ---------------------------------------------------------------------------------------------- observing

    @property
    def state(self) -> MemberState:
        return self._watched.value

    @property
    def member_id(self) -> str:
        return self.state.member_id

    @property
    def generation_id(self) -> int:
        return self.state.generation_id

    @property
    def is_leader(self) -> bool:
        return self.state.is_leader

    @property
    def assignment(self) -> Assignment:
        return self.state.assignment

    @property
    def stable(self) -> asyncio.Event:
        """Set while the member is stable (synced, holding its assignment); cleared when a rebalance starts."""
        return self._stable

    async def wait_for(self, predicate: Callable[[MemberState], bool]) -> MemberState:
        """The first state for which ``predicate`` holds; raises the fatal error, or ``MemberClosedError``."""

        def settled(state: MemberState) -> bool:
            return state.phase in (Phase.FAILED, Phase.CLOSED) or predicate(state)

        state = await self._watched.wait_for(settled)
        if predicate(state):
            return state
        if state.phase is Phase.FAILED and state.error is not None:
            raise state.error
        raise MemberClosedError(f"member of group {self.config.group_id!r} was closed")

    async def wait_until_stable(self) -> MemberState:
        return await self.wait_for(lambda state: state.phase is Phase.STABLE)

    async def assignments(self) -> AsyncIterator[AssignmentChange]:
        """Each completed rebalance's ``AssignmentChange``; the current one first if the member is stable."""
        seen = 0
        if self.state.phase is Phase.STABLE and self._coordination.last_change is not None:
            seen = self.state.rebalances
            yield self._coordination.last_change
        while True:
            try:
                state = await self.wait_for(_newer_than(seen))
            except MemberClosedError:
                return
            seen = state.rebalances
            change = self._coordination.last_change
            assert change is not None  # a completed rebalance always records its change
            yield change

    # -------------------------------------------------------------------------------------------------- offsets

    async def commit(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], *, timeout_s: float = 60.0
    ) -> None:
        """Commit ``{(topic, partition): next offset}`` for the current generation.

        Allowed once the member has joined a generation, also from ``on_revoked`` (during a rebalance or
        ``close()``). Retries while the coordinator is unavailable (up to ``timeout_s``). Raises
        ``CommitFailedError`` when refused (a rebalance moved on: the member rejoins), ``FencedInstanceError``
        when fenced.
        """
        self._check_usable()
        normalized = {tp: v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(v) for tp, v in offsets.items()}
        identity = self._coordination.identity()
        if identity.generation_id < 0 or not identity.member_id:
            # Kafka refuses locally too: without a generation the coordinator could only answer UNKNOWN_MEMBER_ID.
            raise CommitFailedError(
                f"offset commit to group {self.config.group_id!r}: the member has not joined a generation yet",
                {},
                rejoining=False,
            )

        async def attempt() -> dict[TopicPartition, Error]:
            result = await self._calls.commit(identity, normalized)
            raise_if_retriable(result.error, f"offset commit to group {self.config.group_id!r}")
            failed: dict[TopicPartition, Error] = {
                tp: error for tp, error in result.errors_by_partition().items() if error is not Error.NONE
            }
            for error in failed.values():
                raise_if_retriable(error, f"offset commit to group {self.config.group_id!r}")
            return failed

        failed = await with_retries(attempt, self._backoff.start(), timeout_s=timeout_s)
        if not failed:
            return
        errors = set(failed.values())
        if Error.FENCED_INSTANCE_ID in errors and self.config.group_instance_id is not None:
            fenced = FencedInstanceError(self.config.group_id, self.config.group_instance_id)
            self._coordination.fail(fenced)
            raise fenced
        rejoin_errors = errors & _REJOIN_ON_COMMIT.keys()
        rejoining = False
        if rejoin_errors:
            reset = any(_REJOIN_ON_COMMIT[error] for error in rejoin_errors)
            reason = f"offset commit answered {', '.join(sorted(e.name for e in rejoin_errors))}"
            rejoining = self._coordination.request_rejoin(reason, generation_id=identity.generation_id, reset=reset)
        names = ", ".join(sorted({error.name for error in errors}))
        raise CommitFailedError(
            f"offset commit to group {self.config.group_id!r} (generation {identity.generation_id}) refused: {names}",
            failed,
            rejoining=rejoining,
        )

    async def committed(
        self, topics: Iterable[str] | None = None, *, timeout_s: float = 60.0
    ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets for ``topics`` (default: the member's topics)."""
        self._check_usable()
        wanted = list(topics) if topics is not None else list(self.config.topics)

        async def attempt() -> dict[TopicPartition, CommittedOffset]:
            result = await self._calls.fetch(wanted)
            raise_if_retriable(result.error, f"offset fetch from group {self.config.group_id!r}")
            if result.error is not Error.NONE:
                raise GroupError(result.error, f"offset fetch from group {self.config.group_id!r}")
            return result.by_partition()

        return await with_retries(attempt, self._backoff.start(), timeout_s=timeout_s)

    # -------------------------------------------------------------------------------------------------- helpers

    async def _drive(self) -> None:
        try:
            await self._coordination.run()
        except MemberFatalError as error:
            await self._stop_failed(error)
        except Exception as error:  # a bug here must still stop the member visibly, not hang its waiters
            log.exception("group %s: member loop crashed", self.config.group_id)
            await self._stop_failed(MemberFatalError(f"member loop crashed: {error!r}"))

    async def _stop_failed(self, error: MemberFatalError) -> None:
        log.error("group %s: %s", self.config.group_id, error)
        await self._coordination.revoke_all(f"fatal: {type(error).__name__}")
        self._publish(phase=Phase.FAILED, error=error, last_error=str(error))

    async def _leave(self, member_id: str) -> None:
        """One best-effort leave (Kafka sends it once and does not wait on failure)."""
        try:
            result = await self._calls.leave([(member_id, self.config.group_instance_id)], reason="member closing")
        except Exception as error:
            log.warning("group %s: leave failed: %s", self.config.group_id, error)
            return
        outcomes = [member.error.name for member in result.members] or [result.error.name]
        log.info("group %s: left (%s)", self.config.group_id, ", ".join(outcomes))

    def _check_usable(self) -> None:
        if self.state.phase is Phase.FAILED and self.state.error is not None:
            raise self.state.error
        if self._closed:
            raise MemberClosedError(f"member of group {self.config.group_id!r} is closed")

    def _publish(self, **changes: object) -> None:
        self._watched.set(dataclasses.replace(self._watched.value, **changes))  # type: ignore[arg-type]

    def _mirror_stable(self, state: MemberState) -> None:
        if state.phase is Phase.STABLE:
            self._stable.set()
        else:
            self._stable.clear()


def _newer_than(rebalances: int) -> Callable[[MemberState], bool]:
    """A predicate: stable after more than ``rebalances`` completed rebalances."""
    return lambda state: state.phase is Phase.STABLE and state.rebalances > rebalances
