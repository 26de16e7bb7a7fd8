"""``CoordinatorAdmin``: the coordinator's admin surface for the operator and ``berth-groups``.

Owns config, describe, list, delete, leave by instance ids or member ids, expected members, offset fetch, simple
offset commits (an admin's reset) and journal paging.
Rules:

- Results are the coordinator's declared answers (``berth.coordinator.protocol``). Outcomes a caller decides on
  are returned, not raised: a delete's NONE / GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP, each member's result of a
  batch leave (UNKNOWN_MEMBER_ID means "was not a member", e.g. already gone, also when the group is).
- Any other in-band error raises ``GroupError``; HTTP 4xx raise ``CoordinatorRefusedError`` (401/403
  ``AuthorizationError``, 413 ``RequestTooLargeError``), 5xx ``CoordinatorServerError``; messages carry the status
  and the contract's error name, never the server's text (``transport``).
- Ownership (docs/api.md §7a): ``claim_owner`` and ``release_owner`` answer the group's owner; a write given
  ``owner_uid`` sends ``Berth-Owner-Uid``, and a 409 GROUP_OWNED raises ``GroupOwnedError`` carrying the owner.
- HTTPS is verified against ``ca_file``; without one, against ``$BERTH_CA_FILE`` when set (so a process given the
  CA in its environment, as the chart does for the operator, verifies without code of its own), else the system's
  CAs. Answers are capped at ``max_response_bytes``.
- Every call is retried on ``CoordinatorUnavailableError`` (connection errors, HTTP 5xx, in-band 14/15/16) for
  ``attempts`` attempts with backoff, or with ``retry_for_s`` for as long as that (a replicated coordinator's
  failover takes a lease TTL and a readiness probe: docs/high-availability.md); all of them are idempotent (a
  repeated leave or delete answers "already done": UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
import msgspec

from berth.coordinator.client.backoff import BackoffPolicy
from berth.coordinator.client.calls import GroupCalls, identity
from berth.coordinator.client.config import DEFAULT_COORDINATOR_URL
from berth.coordinator.client.errors import GroupError
from berth.coordinator.client.retry import raise_if_retriable, with_retries
from berth.coordinator.client.tls import ENV_CA_FILE
from berth.coordinator.client.transport import DEFAULT_MAX_RESPONSE_BYTES, Transport
from berth.coordinator.protocol import (
    Answer,
    ConfigResponse,
    DeleteResponse,
    DescribeResponse,
    Error,
    ExpectedMembersRequest,
    ExpectedMembersResponse,
    FetchedPartition,
    GroupOwner,
    InstanceId,
    JournalResponse,
    LeaveMemberResult,
    ListedGroup,
    ListResponse,
    OffsetAndMetadata,
    OwnerRequest,
    OwnerResponse,
    TopicPartition,
    newest,
)
from berth.coordinator.protocol.routes import OWNER_UID_HEADER, ROUTES_BY_OPERATION, Route

A = TypeVar("A", bound=Answer)
T = TypeVar("T")

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
        retry_for_s: float | None = None,
        backoff: BackoffPolicy | None = None,
        session: aiohttp.ClientSession | None = None,
        ca_file: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        if retry_for_s is not None and retry_for_s <= 0:
            raise ValueError(f"retry_for_s must be positive, got {retry_for_s}")
        self.url = url
        self._transport = Transport(
            url,
            token=token,
            request_timeout_s=request_timeout_s,
            session=session,
            ca_file=ca_file if ca_file is not None else os.environ.get(ENV_CA_FILE) or None,
            max_response_bytes=max_response_bytes,
        )
        self._attempts: int | None = None if retry_for_s is not None else attempts
        self._retry_for_s = retry_for_s
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

    async def config(self) -> ConfigResponse:
        return await self._read(ROUTES_BY_OPERATION["config"], ConfigResponse)

    async def describe_group(self, group_id: str) -> DescribeResponse:
        """DescribeGroups v5; an unknown group is answered, as state ``Dead`` with generation -1."""
        return await self._answer(
            ROUTES_BY_OPERATION["describe"], DescribeResponse, group_id, what=f"describe group {group_id!r}"
        )

    async def list_groups(self, states: Iterable[str] = ()) -> tuple[ListedGroup, ...]:
        """ListGroups, optionally only groups in ``states`` (e.g. ``["Stable"]``)."""
        params = [("state", state) for state in states]
        answer = await self._answer(ROUTES_BY_OPERATION["list"], ListResponse, params=params, what="list groups")
        return answer.groups

    async def fetch_offsets(
        self, group_id: str, topics: Iterable[str] | None = None, *, limit: int | None = None
    ) -> dict[TopicPartition, FetchedPartition]:
        """Committed offsets of ``topics`` (all committed topics when None); an unknown group has none. With
        ``limit``, at most that many: the first by topic and partition (one page, docs/api.md §4)."""
        calls = GroupCalls(self._transport, group_id)
        wanted = list(topics) if topics is not None else None

        async def attempt() -> dict[TopicPartition, FetchedPartition]:
            result = await calls.fetch(wanted, limit=limit)
            _raise_unless(result.error, {Error.NONE}, f"offset fetch from group {group_id!r}")
            return result.by_partition()

        return await self._retried(attempt)

    async def journal(self, after: int = 0, limit: int = 1000, *, wait_ms: int = 0) -> JournalResponse:
        """Events with ``seq > after``, at most ``limit`` (≤ 10000). With ``wait_ms``, a long-poll: when there is
        no such event yet, the coordinator answers as soon as one is durable, or after ``wait_ms`` (≤ 30000)."""
        params = [("after", str(after)), ("limit", str(limit))]
        timeout_s = None
        if wait_ms:
            params.append(("wait_ms", str(wait_ms)))
            timeout_s = self._transport.request_timeout_s + wait_ms / 1000
        return await self._read(ROUTES_BY_OPERATION["journal"], JournalResponse, params=params, timeout_s=timeout_s)

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

    async def claim_owner(self, group_id: str, owner: GroupOwner, *, adopt: bool = False) -> GroupOwner | None:
        """Claim the group for ``owner`` (docs/api.md §7a): the owner it has afterwards. A group owned by another
        uid, or by nobody and in use without ``adopt``, raises ``GroupOwnedError`` naming its owner."""
        answer = await self._answer(
            ROUTES_BY_OPERATION["owner_put"],
            OwnerResponse,
            group_id,
            body=OwnerRequest(namespace=owner.namespace, name=owner.name, uid=owner.uid, adopt=adopt),
            what=f"claim group {group_id!r}",
        )
        return answer.owner

    async def release_owner(self, group_id: str, uid: str) -> None:
        """Let go of the group (docs/api.md §7a); a group owned by another uid raises ``GroupOwnedError``."""
        await self._answer(
            ROUTES_BY_OPERATION["owner_delete"],
            OwnerResponse,
            group_id,
            params=[("uid", uid)],
            what=f"release group {group_id!r}",
        )

    async def delete_group(self, group_id: str, *, owner_uid: str | None = None) -> Error:
        """DeleteGroups: ``Error.NONE``, ``GROUP_ID_NOT_FOUND`` or ``NON_EMPTY_GROUP``; other errors raise."""
        answer = await self._answer(
            ROUTES_BY_OPERATION["delete"],
            DeleteResponse,
            group_id,
            what=f"delete group {group_id!r}",
            accept=_DELETE_OUTCOMES,
            owner_uid=owner_uid,
        )
        return answer.error

    async def leave_instances(
        self, group_id: str, instance_ids: Sequence[str], *, reason: str | None = None, owner_uid: str | None = None
    ) -> tuple[LeaveMemberResult, ...]:
        """One LeaveGroup v5 batch removing static members by instance id (the admin path, member id ``""``).

        Per-member results come back in order; UNKNOWN_MEMBER_ID for an id means it was not a member (fine after
        a scale-down that raced a restart), also for every id when the group does not exist (Kafka's answer).
        Any group-level error raises.
        """
        return await self.leave_members(
            group_id, [("", instance_id) for instance_id in instance_ids], reason=reason, owner_uid=owner_uid
        )

    async def leave_members(
        self,
        group_id: str,
        members: Sequence[tuple[str, str | None]],
        *,
        reason: str | None = None,
        owner_uid: str | None = None,
    ) -> tuple[LeaveMemberResult, ...]:
        """One LeaveGroup v5 batch of ``(member id, instance id)`` pairs: ``("", "orders-3")`` names a static
        member by instance id, ``("consumer-1-...", None)`` any member by member id (LeaveGroup v3+).

        Results as for ``leave_instances``; a group-level error raises.
        """
        if not members:
            return ()
        calls = GroupCalls(self._transport, group_id)

        async def attempt() -> tuple[LeaveMemberResult, ...]:
            result = await calls.leave(members, reason=reason, owner_uid=owner_uid)
            _raise_unless(result.error, {Error.NONE}, f"leave group {group_id!r}")
            return result.members

        return await self._retried(attempt)

    async def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, Error]:
        """A simple commit (generation -1, no member: what Kafka's admin client sends) of ``offsets``; each
        partition's outcome. The coordinator accepts it only while the group is Empty, and creates a group that
        does not exist (docs/api.md §11); a group with members answers UNKNOWN_MEMBER_ID on every partition.
        Retried when the coordinator is unavailable (committing the same offsets twice is harmless).
        """
        if not offsets:
            return {}
        calls = GroupCalls(self._transport, group_id)
        who = identity("", -1, None)
        wanted = {tp: OffsetAndMetadata(offset) for tp, offset in offsets.items()}

        async def attempt() -> dict[TopicPartition, Error]:
            result = await calls.commit(who, wanted)
            raise_if_retriable(result.error, f"offset commit to group {group_id!r}")
            return result.errors_by_partition()

        return await self._retried(attempt)

    async def put_expected_members(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> tuple[str, ...]:
        """Pre-register the group's static members (docs/api.md §7); creates the group if needed."""
        answer = await self._answer(
            ROUTES_BY_OPERATION["expected_members_put"],
            ExpectedMembersResponse,
            group_id,
            body=ExpectedMembersRequest(tuple(InstanceId(i) for i in instance_ids)),
            what=f"put expected members of group {group_id!r}",
            owner_uid=owner_uid,
        )
        return answer.group_instance_ids

    async def get_expected_members(self, group_id: str) -> tuple[str, ...]:
        answer = await self._answer(
            ROUTES_BY_OPERATION["expected_members_get"],
            ExpectedMembersResponse,
            group_id,
            what=f"get expected members of group {group_id!r}",
        )
        return answer.group_instance_ids

    async def delete_expected_members(self, group_id: str, *, owner_uid: str | None = None) -> None:
        await self._answer(
            ROUTES_BY_OPERATION["expected_members_delete"],
            ExpectedMembersResponse,
            group_id,
            what=f"delete expected members of group {group_id!r}",
            owner_uid=owner_uid,
        )

    # -------------------------------------------------------------------------------------------------- helpers

    async def _retried(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``, retried while the coordinator is unavailable: ``attempts`` times, or for ``retry_for_s``."""
        return await with_retries(attempt, self._backoff.start(), attempts=self._attempts, timeout_s=self._retry_for_s)

    async def _answer(
        self,
        route: Route,
        answer: type[A],
        group_id: str = "",
        *,
        what: str,
        params: Sequence[tuple[str, str]] = (),
        body: msgspec.Struct | None = None,
        accept: frozenset[Error] = frozenset({Error.NONE}),
        owner_uid: str | None = None,
    ) -> A:
        """An in-band answer whose error must be in ``accept``; the route's newest version, retried when it may pass.
        ``owner_uid`` asserts the group's owner (``Berth-Owner-Uid``)."""
        if route.api is not None:
            params = [("api_version", str(newest(route.api))), *params]
        headers = {OWNER_UID_HEADER: owner_uid} if owner_uid else None

        async def attempt() -> A:
            result = await self._transport.request(
                route.method, route.path_for(group_id), answer, params=params, body=body, headers=headers
            )
            _raise_unless(result.error, accept, what)
            return result

        return await self._retried(attempt)

    async def _read(
        self,
        route: Route,
        answer: type[T],
        *,
        params: Sequence[tuple[str, str]] = (),
        timeout_s: float | None = None,
    ) -> T:
        """A plain answer (no in-band error), retried when the coordinator is unavailable."""

        async def attempt() -> T:
            return await self._transport.request(
                route.method, route.path_for(), answer, params=params, timeout_s=timeout_s
            )

        return await self._retried(attempt)


def _raise_unless(error: Error, accepted: Iterable[Error], what: str) -> None:
    if error in accepted:
        return
    raise_if_retriable(error, what)
    raise GroupError(error, what)
