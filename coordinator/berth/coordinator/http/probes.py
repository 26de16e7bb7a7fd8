"""The probe listener (``--probe-port``): ``/healthz``, ``/readyz`` and ``/metrics`` on a port of their own.

The API port can be filled to ``--max-connections`` by clients that hold their connections (slowloris); the
kubelet's probes and Prometheus then still get their answers here, instead of a 503 that would restart a
healthy coordinator. Rules: plain HTTP (probes carry no secrets), GET and HEAD only, the same answers as the API
port (``health``), never reading a body (one that was sent closes the connection after the answer, instead of
being waited for); its own small connection caps and short deadlines (a request head within 2 s, an idle connection
5 s), and when it is full a newcomer takes the place of the oldest connection that is not being answered
(``ConnectionGuard``, shedding): slow or idle connections cannot keep the kubelet out, as 4 x 16 of them did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

from aiohttp import web

from berth.coordinator.http import health
from berth.coordinator.http.connections import BerthConnection
from berth.coordinator.http.errors import method_not_allowed, not_found
from berth.coordinator.http.responses import error_response
from berth.coordinator.http.state import CoordinatorServer

#: The kubelet opens a connection per probe and Prometheus keeps one: a few dozen is plenty.
PROBE_MAX_CONNECTIONS = 64
PROBE_MAX_PER_CLIENT = 16
PROBE_HEAD_TIMEOUT_S = 2.0  # a probe's request head arrives with its connection
PROBE_IDLE_TIMEOUT_S = 5.0  # Prometheus' kept connection is closed between scrapes; it opens another


class ProbeHandler:
    """The probe listener's one handler (aiohttp's low-level ``web.Server``)."""

    def __init__(self, state: CoordinatorServer) -> None:
        self.state = state
        self.answers: dict[str, tuple[str, Callable[[], web.Response]]] = {
            "/healthz": ("healthz", health.liveness),
            "/readyz": ("readyz", lambda: health.readiness(state)),
            "/metrics": ("metrics", lambda: health.prometheus_text(state)),
        }

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        connection = cast(BerthConnection, request.protocol)
        connection.request_started()
        started = time.perf_counter()
        try:
            found = self.answers.get(request.path)
            route = "unmatched" if found is None else found[0]
            if found is None:
                response = error_response(not_found(f"path: the probe port serves only {', '.join(self.answers)}"))
            elif request.method not in ("GET", "HEAD"):
                response = error_response(method_not_allowed(f"method: {request.method} not allowed here"))
            else:
                response = found[1]()
            self.state.metrics.observe_request(route, response.status, time.perf_counter() - started)
            return response
        finally:
            connection.request_done()
