"""HTTP-level failures (docs/api.md §5): requests the coordinator could not process as protocol requests.

Each carries the HTTP status and the JSON body to send; ``message`` always names the offending field.
Protocol outcomes never use these: they are HTTP 200 with an in-band ``error_code``.
"""

from __future__ import annotations

from berth.coordinator.core import OwnerRefusal
from berth.coordinator.protocol import Error, GroupOwnedBody, HttpErrorBody, InvalidRequest, UnsupportedVersion


class HttpError(Exception):
    def __init__(
        self, status: int, error: str, message: str, error_code: int | None = None, *, close_connection: bool = False
    ) -> None:
        super().__init__(message)
        self.close_connection = close_connection  # refuse to read the rest of the request: close after answering
        self.status = status
        self.error = error
        self.message = message
        self.error_code = error_code

    def body(self) -> HttpErrorBody | GroupOwnedBody:
        return HttpErrorBody(self.error, self.message, self.error_code)


class GroupOwnedError(HttpError):
    """HTTP 409 GROUP_OWNED (docs/api.md §7a): the body also names the group's owner (null: none)."""

    def __init__(self, refusal: OwnerRefusal) -> None:
        super().__init__(409, "GROUP_OWNED", refusal.message)
        self.owner = refusal.owner

    def body(self) -> GroupOwnedBody:
        return GroupOwnedBody(self.error, self.message, self.owner)


def from_invalid(exc: InvalidRequest) -> HttpError:
    """The HTTP answer to a request the protocol codec refused."""
    if isinstance(exc, UnsupportedVersion):
        return unsupported_version(str(exc))
    return bad_request(str(exc))


def bad_request(message: str) -> HttpError:
    return HttpError(400, Error.INVALID_REQUEST.name, message, int(Error.INVALID_REQUEST))


def unsupported_version(message: str) -> HttpError:
    return HttpError(400, Error.UNSUPPORTED_VERSION.name, message, int(Error.UNSUPPORTED_VERSION))


def unauthorized(message: str) -> HttpError:
    return HttpError(401, Error.GROUP_AUTHORIZATION_FAILED.name, message, int(Error.GROUP_AUTHORIZATION_FAILED))


def forbidden(message: str) -> HttpError:
    return HttpError(403, Error.GROUP_AUTHORIZATION_FAILED.name, message, int(Error.GROUP_AUTHORIZATION_FAILED))


def not_found(message: str) -> HttpError:
    return HttpError(404, "NOT_FOUND", message)


def method_not_allowed(message: str) -> HttpError:
    return HttpError(405, "METHOD_NOT_ALLOWED", message)


def request_timeout(message: str) -> HttpError:
    return HttpError(408, "REQUEST_TIMEOUT", message, close_connection=True)


def too_large(message: str) -> HttpError:
    return HttpError(413, "PAYLOAD_TOO_LARGE", message, close_connection=True)


def unsupported_media_type(message: str) -> HttpError:
    return HttpError(415, "UNSUPPORTED_MEDIA_TYPE", message)


def shutting_down() -> HttpError:
    return HttpError(
        503,
        Error.COORDINATOR_NOT_AVAILABLE.name,
        "the coordinator is shutting down",
        int(Error.COORDINATOR_NOT_AVAILABLE),
    )


def not_coordinator() -> HttpError:
    """A standby's answer on a route without an in-band error (the journal): the client asks again, through the
    Service, on a new connection."""
    return HttpError(
        503,
        Error.NOT_COORDINATOR.name,
        "this replica is a standby; the active replica answers (through the Service)",
        int(Error.NOT_COORDINATOR),
        close_connection=True,
    )


def store_unreadable() -> HttpError:
    """The store could not be read (etcd out of reach, a disk error): the client asks again."""
    return HttpError(
        503,
        Error.COORDINATOR_NOT_AVAILABLE.name,
        "the store could not be read; ask again",
        int(Error.COORDINATOR_NOT_AVAILABLE),
    )
