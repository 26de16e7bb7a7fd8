"""One coordinator port per coordinator URL, with the admin token, and each coordinator's session bounds cached.

Rules: fleets on the same coordinator share one HTTP session; ``GET /v1/config`` is asked at most once per
``config_ttl_s`` per coordinator (its bounds change only when it restarts with other flags); the token is handed
to the member library and never appears in anything this module says.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from berth.coordinator.client import BackoffPolicy, CoordinatorAdmin
from berth.operator.coordinator_adapter import ClientCoordinatorPort
from berth.operator.planners.observations import CoordinatorBounds

#: The admin client's own retries are short: the handlers retry with their own, longer backoff and say so.
ADMIN_ATTEMPTS = 2
ADMIN_REQUEST_TIMEOUT_S = 15.0


@dataclass
class CoordinatorDirectory:
    token: str | None
    config_ttl_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _ports: dict[str, ClientCoordinatorPort] = field(default_factory=dict, init=False)
    _bounds: dict[str, tuple[float, CoordinatorBounds]] = field(default_factory=dict, init=False)

    def port(self, url: str) -> ClientCoordinatorPort:
        if url not in self._ports:
            admin = CoordinatorAdmin(
                url,
                token=self.token,
                request_timeout_s=ADMIN_REQUEST_TIMEOUT_S,
                attempts=ADMIN_ATTEMPTS,
                backoff=BackoffPolicy(initial_ms=200, max_ms=1_000),
            )
            self._ports[url] = ClientCoordinatorPort(admin)
        return self._ports[url]

    async def bounds(self, url: str) -> CoordinatorBounds:
        """The coordinator's session-timeout bounds; raises ``CoordinatorUnavailable`` when it cannot be asked."""
        cached = self._bounds.get(url)
        if cached is not None and self.clock() - cached[0] < self.config_ttl_s:
            return cached[1]
        bounds = await self.port(url).get_config()
        self._bounds[url] = (self.clock(), bounds)
        return bounds

    async def close(self) -> None:
        for port in self._ports.values():
            await port.close()
        self._ports.clear()
