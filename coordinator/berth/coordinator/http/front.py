"""The low-level front: aiohttp's ``web.Server`` handler that serves the group protocol's POST routes itself
and hands every other request to the ``web.Application`` (docs/benchmarks.md, row 1).

A heartbeat is the coordinator's most frequent request. Served here it skips what the application adds per
request (router resolution, the middleware chain, match-info bookkeeping) while keeping everything the contract
asks: the same view (auth, limits, errors, durability gating), the same error answers, the same metrics. A
protocol path with another method, or anything the front does not recognise, goes to the application, which
knows every route and answers 404/405 as usual.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from aiohttp import web

from berth.coordinator.http.metrics import RouteStats
from berth.coordinator.http.middleware import answer_for_exception
from berth.coordinator.http.protocol_views import PROTOCOL_ROUTES, ProtocolRoute, group_id_of, protocol_view
from berth.coordinator.http.state import CoordinatorServer

AppHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ProtocolFront:
    def __init__(self, state: CoordinatorServer, app_handler: AppHandler) -> None:
        self.state = state
        self.app_handler = app_handler
        # The last path segment -> the protocol route and its metrics (looked up once, not per request).
        self._routes: dict[str, tuple[ProtocolRoute[Any], RouteStats]] = {
            p.route.path.rsplit("/", 1)[1]: (p, state.metrics.route(p.route.operation))
            for p in PROTOCOL_ROUTES.values()
        }

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        # The connection's request head is complete: its header timeout stops (BerthConnection.request_started,
        # inlined: this runs for every request).
        connection: Any = request.protocol
        connection.head_started_at = 0.0
        connection.in_request = True
        try:
            if request.method == "POST":
                # /v1/groups/{group_id}/{action}, the group id percent-encoded: a query string or any other shape
                # misses the table below and goes to the application.
                parts = request.raw_path.split("/")
                if len(parts) == 5 and parts[2] == "groups" and parts[1] == "v1" and parts[3]:
                    route = self._routes.get(parts[4])
                    if route is not None:
                        return await self._serve(request, route[0], route[1], parts[3])
            return await self.app_handler(cast(web.Request, request))  # made by the application's request factory
        finally:
            connection.head_started_at = 0.0
            connection.in_request = False

    async def _serve(
        self, request: web.BaseRequest, protocol: ProtocolRoute[Any], stats: RouteStats, segment: str
    ) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            response = await protocol_view(self.state, request, protocol, group_id_of(segment), answer_expect=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            response = answer_for_exception(request, exc)
        stats.observe(response.status, time.perf_counter() - started)
        return response
