"""Every exception the member library and the admin client raise, in one hierarchy under ``BerthClientError``.

Rules:

- Retriable conditions (the coordinator could not be reached, answered HTTP 5xx, or answered in-band
  COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR) are ``CoordinatorUnavailableError``:
  the library retries them with backoff and only surfaces one when its caller's patience ran out.
- HTTP statuses other than 200 are ``CoordinatorHttpError`` carrying the server's ``error`` and ``message``
  (401/403 as ``AuthorizationError``, 5xx as the retriable ``CoordinatorServerError``); in-band protocol errors
  the caller must see are ``GroupError`` carrying the Kafka ``Error``.
- ``MemberFatalError`` ends a member: it stops heartbeating and surfaces from ``wait_*``, ``assignments()`` and
  ``run()``. ``FencedInstanceError`` is the one a duplicate ``group.instance.id`` causes (KIP-345).
- Messages are one line and name what was involved (the group, the instance id, the variable).
"""

from __future__ import annotations

from collections.abc import Mapping

from berth.coordinator.protocol import Error


class BerthClientError(Exception):
    """Base of everything the client package raises on purpose."""


class ConfigError(BerthClientError, ValueError):
    """A configuration value is missing or malformed; the message names the variable or argument."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name} {problem}")
        self.name = name


class CoordinatorUnavailableError(BerthClientError):
    """The coordinator could not answer (connection error, timeout, HTTP 5xx, in-band 14/15/16)."""


class CoordinatorHttpError(BerthClientError):
    """The coordinator answered with an HTTP status other than 200, with its ``error`` and ``message``."""

    def __init__(self, status: int, error: str, message: str, *, path: str) -> None:
        detail = f": {message}" if message else ""
        super().__init__(f"HTTP {status} {error} from {path}{detail}")
        self.status = status
        self.error = error
        self.message = message
        self.path = path


class CoordinatorServerError(CoordinatorHttpError, CoordinatorUnavailableError):
    """HTTP 5xx: the coordinator failed to answer (503 while it shuts down, 500 on an internal error).

    Both an HTTP error (status and the server's message) and retriable: it may pass, so callers retry it.
    """


class AuthorizationError(CoordinatorHttpError):
    """HTTP 401 (no or unknown token) or 403 (token not allowed on this group or route)."""


class GroupError(BerthClientError):
    """An in-band protocol error the caller has to handle (e.g. INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED)."""

    def __init__(self, error: Error, what: str) -> None:
        super().__init__(f"{what}: {error.name} ({error.value})")
        self.error = error


class MemberFatalError(BerthClientError):
    """The member cannot continue (fenced, misconfigured for this group, not authorised); it has stopped."""

    def __init__(self, message: str, error: Error | None = None) -> None:
        super().__init__(message)
        self.error = error


class FencedInstanceError(MemberFatalError):
    """Another member joined with this member's ``group.instance.id``: the coordinator fenced this one (KIP-345)."""

    def __init__(self, group_id: str, group_instance_id: str) -> None:
        super().__init__(
            f"fenced: another member joined group {group_id!r} with the same group.instance.id "
            f"{group_instance_id!r}; this member stopped (each instance id must belong to one running member)",
            Error.FENCED_INSTANCE_ID,
        )
        self.group_id = group_id
        self.group_instance_id = group_instance_id


class MemberClosedError(BerthClientError):
    """The member was closed while the caller was waiting on it, or used after ``close()``."""


class CommitFailedError(BerthClientError):
    """An offset commit was refused; ``rejoining`` says whether the member is rejoining because of it.

    ``errors`` maps each refused partition to its error. A commit refused for REBALANCE_IN_PROGRESS,
    ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID cannot be retried as is: the partitions may move in the rebalance.
    """

    def __init__(self, message: str, errors: Mapping[tuple[str, int], Error], *, rejoining: bool) -> None:
        super().__init__(message)
        self.errors = dict(errors)
        self.rejoining = rejoining
