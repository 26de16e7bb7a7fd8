"""The error contract (docs/api.md §5) and request metrics, for every route.

``answer_for_exception`` turns whatever a view raised into the answer the contract promises: an ``HttpError``
into its status and body, aiohttp's own 404/405/413 into the same shapes, and anything unexpected into a generic
500 and a log line — never a stack trace to the client. ``contract_middleware`` applies it to the
application's routes and records each request's latency; the low-level front does the same for its routes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from berth.coordinator.http.errors import HttpError, method_not_allowed, not_found, too_large
from berth.coordinator.http.responses import error_response, struct_response
from berth.coordinator.http.state import STATE
from berth.coordinator.protocol import HttpErrorBody

log = logging.getLogger("berth.coordinator")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def answer_for_exception(request: web.BaseRequest, exc: Exception) -> web.Response:
    if isinstance(exc, HttpError):
        return error_response(exc)
    if isinstance(exc, web.HTTPNotFound):
        return error_response(not_found(f"path: no route for {request.method} {request.path[:200]}"))
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return error_response(method_not_allowed(f"method: {request.method} not allowed here (allowed: {allowed})"))
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return error_response(too_large("body: over the size limit"))
    if isinstance(exc, web.HTTPException):
        body = HttpErrorBody(exc.reason.upper().replace(" ", "_"), exc.text or exc.reason)
        return struct_response(body, status=exc.status)
    log.error("internal error on %s %r", request.method, request.path[:200], exc_info=exc)
    return struct_response(HttpErrorBody("INTERNAL_ERROR", "internal error; see the coordinator log"), status=500)


@web.middleware
async def contract_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    route = request.match_info.route.name or "unmatched"
    try:
        response = await handler(request)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        response = answer_for_exception(request, exc)
    request.app[STATE].metrics.observe_request(route, response.status, time.perf_counter() - started)
    return response
