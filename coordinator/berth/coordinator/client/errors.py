"""Every exception the member library and the admin client raise, in one hierarchy under ``BerthClientError``.

Rules:

- Retriable conditions (the coordinator could not be reached, answered HTTP 5xx, or answered in-band
  COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR) are ``CoordinatorUnavailableError``:
  the library retries them with backoff and only surfaces one when its caller's patience ran out.
- HTTP statuses other than 200 are ``CoordinatorHttpError`` carrying the status and the contract's ``error`` name:
  every 4xx is a ``CoordinatorRefusedError`` (401/403 ``AuthorizationError``, 413 ``RequestTooLargeError``) —
  asking again cannot help, and it is not "unreachable"; 5xx is the retriable ``CoordinatorServerError``. In-band
  protocol errors the caller must see are ``GroupError`` carrying the Kafka ``Error``.
- The coordinator's answers are not trusted: a message never contains text the server sent, only the HTTP status
  and an ``error`` name of the contract's shape (``[A-Z][A-Z0-9_]*``; anything else is ``HTTP_<status>``). What the
  server said is kept in ``detail``, escaped and cut short, for a tool that chooses to show it; the operator puts
  ``str(exc)`` in a fleet's status and Events, so a hostile endpoint cannot write there.
- An answer larger than the client's cap is ``ResponseTooLargeError``, naming the cap; it is never read whole.
- ``MemberFatalError`` ends a member: it stops heartbeating and surfaces from ``wait_*``, ``assignments()`` and
  ``run()``. ``FencedInstanceError`` is the one a duplicate ``group.instance.id`` causes (KIP-345).
- Messages are one line and name what was involved (the group, the instance id, the variable).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from berth.coordinator.protocol import Error, GroupOwner

_ERROR_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
DETAIL_LIMIT = 200


class BerthClientError(Exception):
    """Base of everything the client package raises on purpose."""


class ConfigError(BerthClientError, ValueError):
    """A configuration value is missing or malformed; the message names the variable or argument."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name} {problem}")
        self.name = name


class CoordinatorUnavailableError(BerthClientError):
    """The coordinator could not answer (connection error, timeout, HTTP 5xx, in-band 14/15/16)."""


def contract_error_name(status: int, error: str | None) -> str:
    """The server's ``error`` when it has the contract's shape, else ``HTTP_<status>`` (never server text as is)."""
    return error if error and _ERROR_NAME.match(error) else f"HTTP_{status}"


def untrusted_text(text: str, limit: int = DETAIL_LIMIT) -> str:
    """Text from the server made safe to show: one line, control characters escaped, at most ``limit`` long."""
    flat = " ".join(text.split())
    if not flat.isprintable():
        flat = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in flat)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class CoordinatorHttpError(BerthClientError):
    """The coordinator answered with an HTTP status other than 200.

    ``str()`` names the status, the contract's ``error`` name and the request (``HTTP 413 PAYLOAD_TOO_LARGE from
    PUT /v1/groups/orders/expected-members``); ``detail`` is what the server said, escaped and cut short.
    """

    def __init__(self, status: int, error: str, detail: str = "", *, path: str) -> None:
        self.status = status
        self.error = contract_error_name(status, error)
        self.detail = untrusted_text(detail)
        self.path = path
        super().__init__(self.describe())

    def describe(self) -> str:
        return f"HTTP {self.status} {self.error} from {self.path}"


class CoordinatorRefusedError(CoordinatorHttpError):
    """HTTP 4xx: the coordinator refused this request as it is; sending it again cannot help."""


class RequestTooLargeError(CoordinatorRefusedError):
    """HTTP 413: the request is over the coordinator's ``--max-body-bytes``."""

    def describe(self) -> str:
        return f"the coordinator refused {self.path} as too large (HTTP 413 {self.error})"


class ResponseTooLargeError(BerthClientError):
    """An answer over the client's ``max_response_bytes``: refused before it was read whole."""

    def __init__(self, path: str, limit: int, declared: int | None = None) -> None:
        size = f"{declared} bytes" if declared is not None else "more"
        super().__init__(
            f"the answer to {path} is {size}, over the client's {limit}-byte cap (max_response_bytes); "
            "raise the cap if the coordinator really has that much to say"
        )
        self.path = path
        self.limit = limit
        self.declared = declared


class CoordinatorServerError(CoordinatorHttpError, CoordinatorUnavailableError):
    """HTTP 5xx: the coordinator failed to answer (503 while it shuts down, 500 on an internal error).

    Both an HTTP error (status and the server's message) and retriable: it may pass, so callers retry it.
    """


class AuthorizationError(CoordinatorRefusedError):
    """HTTP 401 (no or unknown token) or 403 (token not allowed on this group or route)."""


class GroupOwnedError(CoordinatorRefusedError):
    """HTTP 409 GROUP_OWNED (docs/api.md §7a): the group belongs to another owner, or to none and is in use; nothing
    changed. ``owner`` is the group's owner as the coordinator recorded it (None: it has none); its fields are the
    coordinator's data, so a caller that shows them checks their shape first."""

    def __init__(self, status: int, error: str, detail: str = "", *, path: str, owner: GroupOwner | None) -> None:
        self.owner = owner
        super().__init__(status, error, detail, path=path)


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
