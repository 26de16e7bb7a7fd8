"""``Coordinators``: the operator's :class:`~berth.operator.ports.CoordinatorDirectory`, one coordinator port per
coordinator: per Berth coordinator URL (with the admin token) and per Kafka connection (cluster, security and
principal), and each one's session bounds cached.

Rules: fleets on the same coordinator share one HTTP session (Berth) or one admin client (Kafka, per principal);
https coordinators are verified against ``ca_file`` (else the system's CAs); every answer is capped
(``coordinator_adapter.MAX_RESPONSE_BYTES``); the bounds are asked at most once per ``config_ttl_s`` per
coordinator (they change only when it restarts with other settings); the token and Kafka credentials are handed
to the clients and never appear in anything this module says. A Kafka connection not used for ``idle_ttl_s`` is
closed (credentials rotate, fleets go away). With ``session_factory`` (the leader's gated session, ``gated``) each
Berth coordinator's client sends through a session of that factory's, closed with the directory.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from berth.coordinator.client import BackoffPolicy, CoordinatorAdmin
from berth.operator.adapters.coordinator_adapter import MAX_RESPONSE_BYTES, ClientCoordinatorPort
from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.coordinator_target import BerthTarget
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import CoordinatorBounds
from berth.operator.ports import CoordinatorPort

#: How long the admin client retries an unavailable coordinator before the pass reports it: longer than a
#: replicated coordinator's failover (4.6 s median, 6.2 s at most with the chart's 5 s lease, docs/benchmarks.md), so
#: a failover never shows in a fleet's status; short enough that a coordinator really down is reported within
#: seconds (the handlers then retry with their own, longer backoff and say so).
ADMIN_RETRY_FOR_S = 10.0
ADMIN_REQUEST_TIMEOUT_S = 15.0


@dataclass
class Coordinators:
    token: str | None
    #: The CA https coordinators are verified against (--coordinator-ca-file); None: the system's CAs.
    ca_file: str | None = None
    config_ttl_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    idle_ttl_s: float = 600.0
    #: How long, and how, an unavailable coordinator is retried before a pass reports it (a test's are short; None:
    #: 200 ms doubling to 1 s).
    retry_for_s: float = ADMIN_RETRY_FOR_S
    backoff: BackoffPolicy | None = None
    session_factory: Callable[[], aiohttp.ClientSession] | None = None
    _sessions: list[aiohttp.ClientSession] = field(default_factory=list, init=False)
    _ports: dict[str, ClientCoordinatorPort] = field(default_factory=dict, init=False)
    _kafka: dict[KafkaConnection, tuple[float, KafkaCoordinatorPort]] = field(default_factory=dict, init=False)
    _bounds: dict[str, tuple[float, CoordinatorBounds]] = field(default_factory=dict, init=False)

    async def connect(self, endpoint: BerthTarget | KafkaConnection) -> CoordinatorPort:
        if isinstance(endpoint, BerthTarget):
            return self.port(endpoint.url)
        return await self.kafka_port(endpoint)

    def port(self, url: str) -> ClientCoordinatorPort:
        """Berth's coordinator at ``url`` (also the journal source the operator follows)."""
        if url not in self._ports:
            session = self.session_factory() if self.session_factory is not None else None
            if session is not None:
                self._sessions.append(session)
            admin = CoordinatorAdmin(
                url,
                token=self.token,
                request_timeout_s=ADMIN_REQUEST_TIMEOUT_S,
                retry_for_s=self.retry_for_s,
                backoff=self.backoff or BackoffPolicy(initial_ms=200, max_ms=1_000),
                ca_file=self.ca_file,
                max_response_bytes=MAX_RESPONSE_BYTES,
                session=session,
            )
            self._ports[url] = ClientCoordinatorPort(admin)
        return self._ports[url]

    async def kafka_port(self, connection: KafkaConnection) -> KafkaCoordinatorPort:
        now = self.clock()
        for stale, (used, port) in list(self._kafka.items()):
            if stale != connection and now - used > self.idle_ttl_s:
                del self._kafka[stale]
                await port.close()
        entry = self._kafka.get(connection)
        port = entry[1] if entry is not None else KafkaCoordinatorPort(connection)
        self._kafka[connection] = (now, port)
        return port

    async def bounds_of(self, port: CoordinatorPort) -> CoordinatorBounds:
        key = port.endpoint
        cached = self._bounds.get(key)
        if cached is not None and self.clock() - cached[0] < self.config_ttl_s:
            return cached[1]
        bounds = await port.get_config()
        self._bounds[key] = (self.clock(), bounds)
        return bounds

    async def close(self) -> None:
        for port in self._ports.values():
            await port.close()
        self._ports.clear()
        for _, kafka_port in self._kafka.values():
            await kafka_port.close()
        self._kafka.clear()
        for session in self._sessions:
            await session.close()
        self._sessions.clear()
