"""In-process fleets of real members (the member library) against a real coordinator, for benchmarks 3-5.

Each member has its own HTTP session, as it would in its own pod; "restarting" one closes it (a static member
does not leave, a dynamic one does, as the library does on close) and starts a new one with the same
configuration. ``Ownership`` records every member's assignments and counts partitions that change owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from berth.coordinator.client import AssignmentChange, CoordinatorAdmin, GroupMember, MemberConfig


class Ownership:
    def __init__(self) -> None:
        self.owner: dict[str, str] = {}
        self.held: dict[str, frozenset[str]] = {}
        self.moves = 0
        self.changed = asyncio.Event()

    def assigned(self, name: str, change: AssignmentChange) -> None:
        partitions = frozenset(f"{t}:{p}" for t, p in change.partitions)
        self.held[name] = partitions
        for partition in partitions:
            if self.owner.get(partition, name) != name:
                self.moves += 1
            self.owner[partition] = name
        self.changed.set()

    def gone(self, name: str) -> None:
        self.held.pop(name, None)
        self.changed.set()

    def covered_by(self, names: set[str], partitions: int) -> bool:
        owned = [p for n in names for p in self.held.get(n, ())]
        return len(owned) == partitions == len(set(owned)) and all(n in self.held for n in names)

    async def until(self, condition: Callable[[], bool], timeout_s: float = 120.0) -> float:
        """Wait until ``condition``; returns the time it became true (time.monotonic)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the fleet did not converge")
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except TimeoutError:
                continue
        return time.monotonic()


class Fleet:
    """Members named ``<prefix>-<i>``; static members use the name as their group.instance.id."""

    def __init__(
        self, url: str, group: str, *, partitions: int, static: bool, session_ms: int = 30_000, heartbeat_ms: int = 500
    ) -> None:
        self.url = url
        self.group = group
        self.partitions = partitions
        self.static = static
        self.session_ms = session_ms
        self.heartbeat_ms = heartbeat_ms
        self.members: dict[str, GroupMember] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.ownership = Ownership()

    def config(self, name: str) -> MemberConfig:
        return MemberConfig(
            group_id=self.group,
            topics={"t": self.partitions},
            coordinator_url=self.url,
            group_instance_id=name if self.static else None,
            session_timeout_ms=self.session_ms,
            rebalance_timeout_ms=60_000,
            heartbeat_interval_ms=self.heartbeat_ms,
            assignors=("sticky",),
            client_id=name,
        )

    async def start(self, name: str) -> None:
        member = GroupMember(self.config(name), on_assigned=lambda change, n=name: self.ownership.assigned(n, change))
        await member.start()
        self.members[name] = member
        self.tasks[name] = asyncio.create_task(member.run())

    async def stop(self, name: str, *, leave: bool | None = None) -> float:
        """Close a member like its process exiting; returns when it was gone (time.monotonic)."""
        member = self.members.pop(name)
        await member.close(leave=leave)
        task = self.tasks.pop(name)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        self.ownership.gone(name)
        return time.monotonic()

    async def close(self) -> None:
        for name in list(self.members):
            await self.stop(name, leave=False)


async def rebalances_since(url: str, group: str, after: int) -> tuple[int, int]:
    """(rebalance_started events of ``group`` after seq ``after``, the last seq seen)."""
    count, last = 0, after
    async with CoordinatorAdmin(url) as admin:
        async for event in admin.journal_events(after=after, page_size=10_000):
            last = int(event["seq"])
            if event["group_id"] == group and event["type"] == "rebalance_started":
                count += 1
    return count, last


async def journal_end(url: str) -> int:
    return (await rebalances_since(url, "", 0))[1]
