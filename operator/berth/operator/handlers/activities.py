"""Kopf activity handlers: how Kopf logs in to the Kubernetes API, and a clean stop.

Rules: Kopf gets the very identity the operator's own clients use (``kube.identity``), as a session of the
operator's making (``login``: ``kube.api_session``'s, which takes a rotated service-account token for every request
and passes every write through the leader's gate), a fresh one each time Kopf logs in (it closes the old one). At
cleanup, ``stop`` ends the work the handlers started (the reconciler's queue, its passes and journal followers):
Kopf waits 5 s for any task it did not start and then cancels it, which would hold every stop for 5 s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import kopf


def register_activities(
    registry: kopf.OperatorRegistry,
    login: Callable[[], kopf.AiohttpSession],
    stop: Callable[[], Awaitable[None]],
) -> None:
    @kopf.on.login(registry=registry)
    async def log_in(**_: Any) -> kopf.AiohttpSession:
        return login()  # async: the session is made on the operator's event loop

    @kopf.on.cleanup(registry=registry)
    async def stop_passes(**_: Any) -> None:
        await stop()
