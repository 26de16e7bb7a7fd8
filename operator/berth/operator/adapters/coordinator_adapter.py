"""``ClientCoordinatorPort``: the operator's :class:`~berth.operator.ports.CoordinatorPort` over the member
library's ``CoordinatorAdmin`` (the operator talks to the coordinator only through ``coordinator.client``).

Rules:

- Protocol outcomes come back as Kafka error names; a 409 GROUP_OWNED (docs/api.md §7a) is
  :class:`~berth.operator.ports.GroupOwned` carrying the owner the coordinator recorded; anything else that means
  "the coordinator did not do it" becomes ``CoordinatorUnavailable`` so the handlers retry with backoff and say so
  in an Event, without recording anything as done.
- **No remote text**: what the coordinator (or whatever answers at its URL) sent never reaches a message, a status
  condition, an Event or a log line. Each failure is mapped by its class to a fixed message in the operator's words
  (:func:`failure`): unreachable (connection refused, timed out, closed, not HTTP), TLS verification failed, the
  token refused (401/403), no such route (404), the request too large (413, with the number of expected members),
  another refusal (4xx), a server error (5xx), an answer over the operator's cap, or one that is not what the
  contract promises. Only the HTTP status (a number) and the contract's error names (an enumeration of ours) are
  repeated; the exception is raised ``from None``, so no chained exception carries the server's text into a
  traceback either.
- Answers are capped at :data:`MAX_RESPONSE_BYTES` (the client refuses a larger one before reading it whole).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Collection, Mapping, Sequence
from typing import TypeVar

import aiohttp

from berth.coordinator.client import CoordinatorAdmin
from berth.coordinator.client.encoding import EncodingError, decode_assignment, read_subscription
from berth.coordinator.client.errors import (
    AuthorizationError,
    BerthClientError,
    ConfigError,
    CoordinatorHttpError,
    CoordinatorServerError,
    GroupError,
    GroupOwnedError,
    RequestTooLargeError,
    ResponseTooLargeError,
)
from berth.coordinator.client.transport import DEFAULT_MAX_RESPONSE_BYTES, MalformedResponseError
from berth.coordinator.protocol import Error, GroupOwner
from berth.operator.planners.coordinator_kind import BERTH, CoordinatorKind
from berth.operator.planners.observations import (
    CoordinatorBounds,
    GroupDescription,
    GroupLag,
    GroupMember,
    GroupOwnerRef,
)
from berth.operator.planners.restarts import GroupActivity, activity_by_group
from berth.operator.ports import CoordinatorUnavailable, GroupOwned

T = TypeVar("T")

#: The most the operator reads of one answer: the member library's default, sized for a describe of a group at the
#: coordinator's 8 MiB group-metadata bound. A hostile or broken endpoint's 400 MiB answer is refused unread, well
#: inside the operator's 256Mi limit.
MAX_RESPONSE_BYTES = DEFAULT_MAX_RESPONSE_BYTES

UNREACHABLE = "Unreachable"
TLS_VERIFICATION_FAILED = "TLSVerificationFailed"
UNAUTHENTICATED = "Unauthenticated"
NOT_AUTHORIZED = "NotAuthorized"
NOT_FOUND = "NotFound"
REQUEST_TOO_LARGE = "RequestTooLarge"
REFUSED = "Refused"
SERVER_ERROR = "ServerError"
ANSWER_TOO_LARGE = "AnswerTooLarge"
MALFORMED_ANSWER = "MalformedAnswer"


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
    def kind(self) -> CoordinatorKind:
        return BERTH

    async def close(self) -> None:
        await self.admin.close()

    async def _ask(self, what: str, call: Awaitable[T], *, group_id: str = "", expected_members: int = 0) -> T:
        try:
            return await call
        except GroupOwnedError as error:
            raise GroupOwned(group_id, _owner(error.owner)) from None
        except (BerthClientError, OSError, TimeoutError, ValueError) as error:
            reason, message = failure(error, what, self.admin.url, expected_members=expected_members)
            raise CoordinatorUnavailable(message, reason=reason) from None

    async def get_config(self) -> CoordinatorBounds:
        config = await self._ask("reading the coordinator's config", self.admin.config())
        return CoordinatorBounds(
            config.group_min_session_timeout_ms,
            config.group_max_session_timeout_ms,
            min_setting="berth-coordinator --group-min-session-timeout-ms",
            max_setting="berth-coordinator --group-max-session-timeout-ms",
        )

    async def claim_group(self, group_id: str, owner: GroupOwnerRef, *, adopt: bool) -> None:
        await self._ask(
            f"claiming group {group_id}",
            self.admin.claim_owner(group_id, GroupOwner(owner.namespace, owner.name, owner.uid), adopt=adopt),
            group_id=group_id,
        )

    async def release_group(self, group_id: str, owner_uid: str) -> None:
        await self._ask(f"releasing group {group_id}", self.admin.release_owner(group_id, owner_uid), group_id=group_id)

    async def put_expected_members(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> None:
        await self._ask(
            f"pre-registering {group_id}",
            self.admin.put_expected_members(group_id, instance_ids, owner_uid=owner_uid),
            group_id=group_id,
            expected_members=len(instance_ids),
        )

    async def delete_expected_members(self, group_id: str, *, owner_uid: str | None = None) -> None:
        await self._ask(
            f"clearing the pre-registration of {group_id}",
            self.admin.delete_expected_members(group_id, owner_uid=owner_uid),
            group_id=group_id,
        )

    async def leave_instances(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> Mapping[str, str]:
        removals = await self._ask(
            f"removing members of {group_id}",
            self.admin.leave_instances(group_id, instance_ids, owner_uid=owner_uid),
            group_id=group_id,
        )
        return {r.group_instance_id or "": r.error.name for r in removals}

    async def describe(self, group_id: str) -> GroupDescription:
        described = await self._ask(f"describing {group_id}", self.admin.describe_group(group_id), group_id=group_id)
        return GroupDescription(
            group_id=described.group_id,
            state=described.state,
            generation=described.generation_id,
            leader=described.leader,
            members=tuple(
                GroupMember(
                    m.member_id,
                    m.group_instance_id,
                    assignment=_partitions(m.member_assignment),
                    subscribed=_topics(m.member_metadata),
                )
                for m in described.members
            ),
            owner=_owner(described.owner),
        )

    async def journal_page(self, after: int, limit: int, wait_ms: int) -> tuple[int, dict[str, GroupActivity]]:
        """A page of the journal after ``after`` (a long-poll with ``wait_ms``): the next cursor, and each group of
        the page with its activity (restarts, rebalances)."""
        page = await self._ask("reading the journal", self.admin.journal(after, limit, wait_ms=wait_ms))
        return page.next, activity_by_group(page.events)

    async def delete_group(self, group_id: str, *, owner_uid: str | None = None) -> str:
        outcome = await self._ask(
            f"deleting group {group_id}", self.admin.delete_group(group_id, owner_uid=owner_uid), group_id=group_id
        )
        return outcome.name

    async def set_group_session_timeout(
        self, group_id: str, session_timeout_ms: int, heartbeat_interval_ms: int
    ) -> None:
        raise NotImplementedError("Berth's coordinator has no group configs: members send their session timeout")

    async def group_lag(self, group_id: str, description: GroupDescription) -> GroupLag | None:
        return None  # Berth's coordinator keeps offsets but no partition log: there is no log end to lag behind

    async def committed_partitions(self, group_id: str, topics: Collection[str] | None, limit: int) -> tuple[str, ...]:
        """One page of the group's committed offsets (docs/api.md §4, ``?limit=``): at most ``limit`` partitions."""
        fetched = await self._ask(
            f"reading the committed partitions of {group_id}",
            self.admin.fetch_offsets(group_id, None if topics is None else sorted(topics), limit=limit),
            group_id=group_id,
        )
        committed = sorted(tp for tp, got in fetched.items() if got.error is Error.NONE and got.committed_offset >= 0)
        return tuple(f"{topic}:{partition}" for topic, partition in committed[:limit])


def failure(error: BaseException, what: str, url: str, *, expected_members: int = 0) -> tuple[str, str]:
    """The condition reason and the fixed message for a failed call: the operator's words only (module rules)."""
    if isinstance(error, RequestTooLargeError):
        count = f" ({expected_members} expected members)" if expected_members else ""
        return REQUEST_TOO_LARGE, f"the request is too large for the coordinator{count}: {what} at {url} (HTTP 413)"
    if isinstance(error, AuthorizationError):
        reason = UNAUTHENTICATED if error.status == 401 else NOT_AUTHORIZED
        return reason, f"the coordinator refused the operator's token: {what} at {url} (HTTP {error.status})"
    if isinstance(error, CoordinatorServerError):
        return SERVER_ERROR, f"the coordinator failed to answer {what} at {url} (HTTP {error.status}, a server error)"
    if isinstance(error, CoordinatorHttpError):
        if error.status == 404:
            return NOT_FOUND, (
                f"the coordinator at {url} has no such route for {what} (HTTP 404): is it a Berth coordinator of"
                " this version?"
            )
        return REFUSED, f"the coordinator refused {what} at {url} (HTTP {error.status})"
    if isinstance(error, ResponseTooLargeError):
        return ANSWER_TOO_LARGE, (
            f"the coordinator's answer to {what} at {url} is over the operator's {MAX_RESPONSE_BYTES}-byte cap:"
            " not read"
        )
    if isinstance(error, GroupError):
        return REFUSED, f"the coordinator answered {error.error.name} to {what} at {url}"
    if isinstance(error, ConfigError):
        return TLS_VERIFICATION_FAILED, f"cannot verify the coordinator at {url}: the CA file is unusable"
    if _tls_verification_failed(error):
        return TLS_VERIFICATION_FAILED, (
            f"TLS verification of the coordinator at {url} failed: its certificate does not chain to the CA the"
            " operator trusts (--coordinator-ca-file) or does not name the host; nothing was sent"
        )
    cause = _cause_chain(error)
    if any(isinstance(e, asyncio.TimeoutError | TimeoutError) for e in cause):
        how = "timed out"
    elif any(isinstance(e, ssl.SSLError) for e in cause):
        how = "the TLS handshake failed"
    elif any(isinstance(e, aiohttp.ClientConnectorError) for e in cause):
        how = "could not connect"
    elif any(isinstance(e, aiohttp.ServerDisconnectedError) for e in cause):
        how = "the connection closed before an answer"
    elif any(isinstance(e, aiohttp.ClientResponseError | aiohttp.ClientPayloadError) for e in cause):
        how = "the answer was not well-formed HTTP"
    elif any(isinstance(e, MalformedResponseError) for e in cause):
        return MALFORMED_ANSWER, f"the coordinator's answer to {what} at {url} is not what the contract promises"
    else:
        how = "no answer"
    return UNREACHABLE, f"cannot reach the coordinator at {url}: {what}: {how}"


def _tls_verification_failed(error: BaseException) -> bool:
    return any(
        isinstance(e, ssl.SSLCertVerificationError | aiohttp.ClientConnectorCertificateError)
        for e in _cause_chain(error)
    )


def _cause_chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _partitions(raw: bytes) -> tuple[str, ...]:
    """A member's assignment as ``topic:partition`` names (the member library's encoding, docs/formats.md); an
    assignment in another encoding (a client of its own) shows no partitions rather than failing the describe."""
    try:
        assignment = decode_assignment(raw)
    except EncodingError:
        return ()
    named = assignment.partitions.items()
    return tuple(f"{topic}:{partition}" for topic, partitions in named for partition in partitions)


def _topics(raw: bytes) -> tuple[str, ...]:
    """The topics a member subscribes to (the member library's encoding; the coordinator shows them while the group
    is Stable); none for another encoding or an empty subscription."""
    subscription = read_subscription(raw) if raw else None
    return () if subscription is None else tuple(subscription.topics)


def _owner(owner: GroupOwner | None) -> GroupOwnerRef | None:
    return None if owner is None else GroupOwnerRef(owner.namespace, owner.name, owner.uid)
