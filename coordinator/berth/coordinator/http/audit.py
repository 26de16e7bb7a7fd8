"""Who did what (docs/api.md §10 "Audit"): refused credentials in the log, the acting token in the journal.

Owns ``Audit`` and ``acting_as``. Rules:

- Every refused credential (401, 403) is counted by reason in ``berth_auth_failures_total`` and logged as one
  rate-limited line naming the client's address, the method and the path, and for a 403 the token's name; never
  the token, any part of it, or anything derived from it.
- The journal events an admin action causes (a group deleted, expected members changed, members removed with a
  leave) carry ``actor``: the name of the token that sent the request. The core knows nothing of tokens; the
  adapter stamps the events of the write the call made before the write is handed to the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web

from berth.coordinator.core import Effects
from berth.coordinator.http.auth import AuthFailure
from berth.coordinator.http.metrics import EdgeStats, count
from berth.coordinator.http.quiet_log import QuietLog, printable

log = logging.getLogger("berth.coordinator")

Invoke = Callable[[int, int], Effects]


class Audit:
    def __init__(self, stats: EdgeStats, quiet: QuietLog) -> None:
        self.stats = stats
        self.quiet = quiet

    def refused(self, request: web.BaseRequest, reason: AuthFailure, token_name: str | None = None) -> None:
        count(self.stats.auth_failures, reason.value)
        who = f"token {token_name!r}" if token_name is not None else _WHAT[reason]
        self.quiet.warning(
            "auth",
            "auth: refused %s from %s on %s %s",
            who,
            printable(request.remote or "?"),
            request.method,
            printable(request.path, limit=120),
        )


_WHAT = {
    AuthFailure.MISSING: "a request without a token",
    AuthFailure.MALFORMED: "an Authorization header that is not 'Bearer <token>'",
    AuthFailure.UNKNOWN: "an unknown token",
    AuthFailure.FORBIDDEN: "a token",
}


def acting_as(actor: str | None, invoke: Invoke) -> Invoke:
    """``invoke``, with ``actor`` stamped on every journal event its call writes (no actor: ``invoke`` itself)."""
    if actor is None:
        return invoke

    def stamped(ticket: int, now_ms: int) -> Effects:
        effects = invoke(ticket, now_ms)
        for write in effects.writes:
            for event in write.events:
                event["actor"] = actor
        return effects

    return stamped
