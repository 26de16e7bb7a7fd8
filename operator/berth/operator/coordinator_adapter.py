"""``ClientCoordinatorPort``: the operator's :class:`~berth.operator.ports.CoordinatorPort` over the member
library's ``CoordinatorAdmin`` (the operator talks to the coordinator only through ``coordinator.client``).

Rules: protocol outcomes come back as Kafka error names; anything that means "the coordinator could not be
asked" (connection refused, timeouts, HTTP 5xx, 401/403, a malformed answer) becomes ``CoordinatorUnavailable``
so the handlers retry with backoff and say so in an Event, without recording anything as done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TypeVar

from berth.coordinator.client import CoordinatorAdmin
from berth.coordinator.client.errors import BerthClientError
from berth.operator.planners.observations import CoordinatorBounds, GroupDescription, GroupMember
from berth.operator.ports import CoordinatorUnavailable

T = TypeVar("T")


class ClientCoordinatorPort:
    def __init__(self, admin: CoordinatorAdmin) -> None:
        self.admin = admin

    @property
    def url(self) -> str:
        return self.admin.url

    @property
    def endpoint(self) -> str:
        return self.admin.url

    @property
    def pre_registers(self) -> bool:
        return True

    async def close(self) -> None:
        await self.admin.close()

    async def _ask(self, what: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except (BerthClientError, OSError, TimeoutError, ValueError) as exc:
            raise CoordinatorUnavailable(f"{what} at {self.admin.url}: {exc}") from exc

    async def get_config(self) -> CoordinatorBounds:
        config = await self._ask("reading the coordinator's config", self.admin.config())
        return CoordinatorBounds(config.group_min_session_timeout_ms, config.group_max_session_timeout_ms)

    async def put_expected_members(self, group_id: str, instance_ids: Sequence[str]) -> None:
        await self._ask(f"pre-registering {group_id}", self.admin.put_expected_members(group_id, instance_ids))

    async def delete_expected_members(self, group_id: str) -> None:
        await self._ask(f"clearing the pre-registration of {group_id}", self.admin.delete_expected_members(group_id))

    async def leave_instances(self, group_id: str, instance_ids: Sequence[str]) -> Mapping[str, str]:
        removals = await self._ask(
            f"removing members of {group_id}", self.admin.leave_instances(group_id, instance_ids)
        )
        return {r.group_instance_id or "": r.error.name for r in removals}

    async def describe(self, group_id: str) -> GroupDescription:
        described = await self._ask(f"describing {group_id}", self.admin.describe_group(group_id))
        return GroupDescription(
            group_id=described.group_id,
            state=described.state,
            generation=described.generation_id,
            leader=described.leader,
            members=tuple(GroupMember(m.member_id, m.group_instance_id) for m in described.members),
        )

    async def journal_page(self, after: int, limit: int, wait_ms: int) -> tuple[int, set[str]]:
        """A page of the journal after ``after`` (a long-poll with ``wait_ms``): the next cursor and its group ids."""
        page = await self._ask("reading the journal", self.admin.journal(after, limit, wait_ms=wait_ms))
        return page.next, {str(event.get("group_id")) for event in page.events}

    async def delete_group(self, group_id: str) -> str:
        return (await self._ask(f"deleting group {group_id}", self.admin.delete_group(group_id))).name
