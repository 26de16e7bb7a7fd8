"""``CoordinatorAdmin``: the coordinator's admin surface for the operator and ``berth-groups``.

Owns config, describe, list, delete, leave by instance ids, expected members, offset fetch and journal paging.
Rules:

- Results are typed (``admin_types``, ``wire``). Outcomes a caller decides on are returned, not raised: a
  delete's NONE / GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP, each member's result of a batch leave (UNKNOWN_MEMBER_ID
  means "was not a member", e.g. already gone).
- Any other in-band error raises ``GroupError``; HTTP 4xx/5xx raise ``CoordinatorHttpError`` (401/403:
  ``AuthorizationError``, 5xx: ``CoordinatorServerError``) with the server's message.
- Every call is retried on ``CoordinatorUnavailableError`` (connection errors, HTTP 5xx, in-band 14/15/16) for
  ``attempts`` attempts with backoff; all of them are idempotent (a repeated leave or delete answers "already
  done": UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import aiohttp

from berth.coordinator.client.admin_types import CoordinatorConfig, GroupDescription, GroupListing, JournalPage
from berth.coordinator.client.backoff import BackoffPolicy
from berth.coordinator.client.config import DEFAULT_COORDINATOR_URL
from berth.coordinator.client.errors import GroupError
from berth.coordinator.client.retry import raise_if_retriable, with_retries
from berth.coordinator.client.transport import Transport, error_of, group_path
from berth.coordinator.client.wire import (
    CommittedOffset,
    GroupCalls,
    MalformedResponseError,
    MemberRemoval,
    TopicPartition,
)
from berth.coordinator.protocol import API_VERSIONS, Error

_DELETE_OUTCOMES = frozenset({Error.NONE, Error.GROUP_ID_NOT_FOUND, Error.NON_EMPTY_GROUP})


class CoordinatorAdmin:
    """Admin calls against one coordinator. Use as ``async with CoordinatorAdmin(url, token=...) as admin:``."""

    def __init__(
        self,
        url: str = DEFAULT_COORDINATOR_URL,
        *,
        token: str | None = None,
        request_timeout_s: float = 30.0,
        attempts: int = 3,
        backoff: BackoffPolicy | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        self.url = url
        self._transport = Transport(url, token=token, request_timeout_s=request_timeout_s, session=session)
        self._attempts = attempts
        self._backoff = backoff or BackoffPolicy()

    async def close(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> CoordinatorAdmin:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -------------------------------------------------------------------------------------------------- reading

    async def config(self) -> CoordinatorConfig:
        return CoordinatorConfig.from_wire(await self._call("GET", "/v1/config", what="config"))

    async def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups v5; an unknown group is answered, as state ``Dead`` with generation -1."""
        body = await self._call(
            "GET", group_path(group_id), params=_version("describe"), what=f"describe group {group_id!r}"
        )
        return GroupDescription.from_wire(body)

    async def list_groups(self, states: Iterable[str] = ()) -> tuple[GroupListing, ...]:
        """ListGroups, optionally only groups in ``states`` (e.g. ``["Stable"]``)."""
        params = _version("list") + [("state", state) for state in states]
        body = await self._call("GET", "/v1/groups", params=params, what="list groups")
        return tuple(GroupListing.from_wire(group) for group in _objects(body, "groups"))

    async def fetch_offsets(
        self, group_id: str, topics: Iterable[str] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """Committed offsets of ``topics`` (all committed topics when None); an unknown group has none."""
        calls = GroupCalls(self._transport, group_id)
        wanted = list(topics) if topics is not None else None

        async def attempt() -> dict[TopicPartition, CommittedOffset]:
            result = await calls.fetch(wanted)
            _raise_unless(result.error, {Error.NONE}, f"offset fetch from group {group_id!r}")
            return dict(result.offsets)

        return await with_retries(attempt, self._backoff.start(), attempts=self._attempts)

    async def journal(self, after: int = 0, limit: int = 1000) -> JournalPage:
        """Events with ``seq > after``, at most ``limit`` (≤ 10000)."""
        params = [("after", str(after)), ("limit", str(limit))]
        return JournalPage.from_wire(await self._call("GET", "/v1/journal", params=params, what="journal"))

    async def journal_events(self, after: int = 0, page_size: int = 1000) -> AsyncIterator[Mapping[str, Any]]:
        """Every event after ``after``, paging until the journal is caught up."""
        while True:
            page = await self.journal(after, page_size)
            for event in page.events:
                yield event
            if not page.events:
                return
            after = page.next

    # ------------------------------------------------------------------------------------------------- changing

    async def delete_group(self, group_id: str) -> Error:
        """DeleteGroups: ``Error.NONE``, ``GROUP_ID_NOT_FOUND`` or ``NON_EMPTY_GROUP``; other errors raise."""
        body = await self._call(
            "DELETE",
            group_path(group_id),
            params=_version("delete"),
            what=f"delete group {group_id!r}",
            accept=_DELETE_OUTCOMES,
        )
        return error_of(body)

    async def leave_instances(
        self, group_id: str, instance_ids: Sequence[str], *, reason: str | None = None
    ) -> tuple[MemberRemoval, ...]:
        """One LeaveGroup v5 batch removing static members by instance id (the admin path, member id ``""``).

        Per-member results come back in order; UNKNOWN_MEMBER_ID for an id means it was not a member (fine after
        a scale-down that raced a restart), also for every id when the group does not exist. Any other
        group-level error raises.
        """
        if not instance_ids:
            return ()
        calls = GroupCalls(self._transport, group_id)

        async def attempt() -> tuple[MemberRemoval, ...]:
            result = await calls.leave([("", instance_id) for instance_id in instance_ids], reason=reason)
            if result.error is Error.UNKNOWN_MEMBER_ID and not result.members:
                # The group does not exist (Kafka 4's coordinator answers this at the top level): no id was a member.
                return tuple(MemberRemoval("", instance_id, Error.UNKNOWN_MEMBER_ID) for instance_id in instance_ids)
            _raise_unless(result.error, {Error.NONE}, f"leave group {group_id!r}")
            return result.members

        return await with_retries(attempt, self._backoff.start(), attempts=self._attempts)

    async def put_expected_members(self, group_id: str, instance_ids: Sequence[str]) -> tuple[str, ...]:
        """Pre-register the group's static members (API.md §4); creates the group if needed."""
        body = await self._call(
            "PUT",
            group_path(group_id, "/expected-members"),
            body={"group_instance_ids": list(instance_ids)},
            what=f"put expected members of group {group_id!r}",
        )
        return _instance_ids(body)

    async def get_expected_members(self, group_id: str) -> tuple[str, ...]:
        body = await self._call(
            "GET", group_path(group_id, "/expected-members"), what=f"get expected members of group {group_id!r}"
        )
        return _instance_ids(body)

    async def delete_expected_members(self, group_id: str) -> None:
        await self._call(
            "DELETE",
            group_path(group_id, "/expected-members"),
            what=f"delete expected members of group {group_id!r}",
        )

    # -------------------------------------------------------------------------------------------------- helpers

    async def _call(
        self,
        method: str,
        path: str,
        *,
        what: str,
        params: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        accept: frozenset[Error] = frozenset({Error.NONE}),
    ) -> dict[str, Any]:
        async def attempt() -> dict[str, Any]:
            answer = await self._transport.request(method, path, params=params, body=body)
            _raise_unless(error_of(answer), accept, what)
            return answer

        return await with_retries(attempt, self._backoff.start(), attempts=self._attempts)


def _raise_unless(error: Error, accepted: Iterable[Error], what: str) -> None:
    if error in accepted:
        return
    raise_if_retriable(error, what)
    raise GroupError(error, what)


def _version(api: str) -> list[tuple[str, str]]:
    return [("api_version", str(API_VERSIONS[api][1]))]


def _objects(body: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = body.get(key)
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise MalformedResponseError(f"response field {key!r} should be a list of objects")
    return value


def _instance_ids(body: Mapping[str, Any]) -> tuple[str, ...]:
    ids = body.get("group_instance_ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise MalformedResponseError("expected-members answer lacks group_instance_ids")
    return tuple(ids)
