"""``berth-groups``' exit statuses: one per class of failure, so a script can tell "no such group" from "the
coordinator is down" from "the token is wrong" without reading the message (docs/member-library.md has the table).

Rules: 0 is success and 2 a usage error (argparse's own); every other failure maps to exactly one class by what a
script would do about it — look elsewhere (not found), wait for the group to change (refused by its state), fix
the token (not allowed), retry later (unavailable), fix the request (refused) — and a command that did part of its
work and not the rest (some members not removed, some partitions not committed) is 1. :func:`exit_code_of`
classifies the member library's errors; the command's own refusals carry their class.
"""

from __future__ import annotations

from enum import IntEnum

from berth.coordinator.client.errors import (
    AuthorizationError,
    BerthClientError,
    ConfigError,
    CoordinatorRefusedError,
    GroupError,
    GroupOwnedError,
)
from berth.coordinator.protocol import Error


class ExitCode(IntEnum):
    OK = 0
    PARTIAL = 1  # the command did part of its work: some members not removed, some partitions not committed
    USAGE = 2  # the command line (or a file it names) is wrong: bad options, an unreadable token file
    NOT_FOUND = 3  # a group named does not exist, or an id named is not a member of it
    REFUSED_BY_STATE = 4  # the group's state forbids it: not Empty, still has members, owned by a fleet
    NOT_ALLOWED = 5  # HTTP 401/403: no token, an unknown one, or one without the right
    UNAVAILABLE = 6  # the coordinator could not answer: refused connection, timeout, TLS, HTTP 5xx, a bad answer
    REFUSED = 7  # the coordinator refused the request as it is: another HTTP 4xx (400, 404, 413)
    CLOSED_PIPE = 141  # 128 + SIGPIPE: stdout was closed (`berth-groups list | head`), what a shell reports


_IN_BAND = {
    Error.GROUP_ID_NOT_FOUND: ExitCode.NOT_FOUND,
    Error.UNKNOWN_MEMBER_ID: ExitCode.NOT_FOUND,
    Error.NON_EMPTY_GROUP: ExitCode.REFUSED_BY_STATE,
    Error.GROUP_AUTHORIZATION_FAILED: ExitCode.NOT_ALLOWED,
}


def exit_code_of(error: BerthClientError) -> ExitCode:
    """The class of a failure the member library raised."""
    if isinstance(error, AuthorizationError):
        return ExitCode.NOT_ALLOWED
    if isinstance(error, GroupOwnedError):
        return ExitCode.REFUSED_BY_STATE
    if isinstance(error, CoordinatorRefusedError):
        return ExitCode.REFUSED
    if isinstance(error, ConfigError):
        return ExitCode.USAGE
    if isinstance(error, GroupError):
        return _IN_BAND.get(error.error, ExitCode.REFUSED)
    # CoordinatorUnavailableError (no connection, a timeout, TLS, HTTP 5xx), or an answer too large or not of the
    # contract's shape: nothing usable came back.
    return ExitCode.UNAVAILABLE
