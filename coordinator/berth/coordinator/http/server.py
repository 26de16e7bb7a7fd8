"""The coordinator's HTTP server: the application, the low-level front before it, and the listening socket.

- ``create_app`` builds the ``web.Application``: its state (``CoordinatorServer``), a view per route of the
  route table, the contract middleware, start-up and loading in a ``cleanup_ctx``, and the answer to what is
  parked in ``on_shutdown``. It serves every route by itself (tests use it so).
- ``Listening.start`` serves it the way ``berth-coordinator`` does: the application set up by an ``AppRunner``,
  and a low-level ``web.Server`` whose handler (``front.ProtocolFront``) serves the protocol's POST routes and
  passes the rest to the application, on a socket whose connections a ``ConnectionGuard`` bounds (the caps, the
  header timeout; ``connections``), over TLS when configured (``tls``), and the probe listener (``probes``).
- ``Listening.stop``: stop accepting, close idle connections, answer parked requests (``on_shutdown``), let
  in-flight requests finish, then clean the application up (the writer stops last).

Only public aiohttp and asyncio interfaces are used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from berth.coordinator.core import Coordinator
from berth.coordinator.http.clock import Clock
from berth.coordinator.http.config import ServerConfig
from berth.coordinator.http.connections import ConnectionGuard
from berth.coordinator.http.front import ProtocolFront
from berth.coordinator.http.leadership import Leadership
from berth.coordinator.http.middleware import contract_middleware
from berth.coordinator.http.probes import (
    PROBE_HEAD_TIMEOUT_S,
    PROBE_IDLE_TIMEOUT_S,
    PROBE_MAX_CONNECTIONS,
    PROBE_MAX_PER_CLIENT,
    ProbeHandler,
)
from berth.coordinator.http.state import STATE, CoordinatorServer, JournalReader
from berth.coordinator.http.tls import ServerTls
from berth.coordinator.http.views import VIEWS
from berth.coordinator.protocol.routes import ROUTES

SHUTDOWN_TIMEOUT_S = 10.0


def create_app(
    config: ServerConfig,
    clock: Clock,
    core: Coordinator,
    leadership: Leadership,
    journal: JournalReader,
    new_core: Callable[[], Coordinator] | None = None,
) -> web.Application:
    """The application over ``leadership``'s terms (``SoleLeadership`` for SQLite); ``new_core`` makes the core of
    every term after the first (a replicated store's takeovers)."""
    app = web.Application(client_max_size=config.max_body_bytes, middlewares=[contract_middleware])
    state = CoordinatorServer(config, clock, core, leadership, journal, new_core)
    app[STATE] = state
    app.cleanup_ctx.append(state.lifecycle)
    app.on_shutdown.append(state.shutdown)
    for route in ROUTES:
        if route.test_only and not config.manual_clock:
            continue
        app.router.add_route(route.method, route.path, VIEWS[route.operation], name=route.operation)
    return app


class Listening:
    """The application served on a socket, with the protocol front before it (and the probe listener)."""

    def __init__(
        self,
        app: web.Application,
        runner: web.AppRunner,
        front: web.Server,
        listener: asyncio.Server,
        guards: list[ConnectionGuard],
        tls: ServerTls | None = None,
        probes: asyncio.Server | None = None,
    ) -> None:
        self.app = app
        self.runner = runner
        self.front = front
        self.listener = listener
        self.guards = guards
        self.tls = tls
        self.probes = probes

    @property
    def state(self) -> CoordinatorServer:
        return self.app[STATE]

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.listener.sockets[0].getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"{'https' if self.tls is not None else 'http'}://{host}:{port}"

    @property
    def probe_address(self) -> tuple[str, int] | None:
        if self.probes is None:
            return None
        host, port = self.probes.sockets[0].getsockname()[:2]
        return str(host), int(port)

    @classmethod
    async def start(cls, app: web.Application, config: ServerConfig) -> Listening:
        """Set the application up (its ``cleanup_ctx`` starts loading) and listen; raises ``OSError``, ``TlsError``."""
        state = app[STATE]
        tls = None if config.tls is None else ServerTls(config.tls, state.metrics.edge, state.quiet)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        inner = runner.server
        assert inner is not None
        loop = asyncio.get_running_loop()
        front = web.Server(ProtocolFront(state, inner.request_handler), request_factory=inner.request_factory)
        guard = ConnectionGuard(
            "api",
            max_connections=config.max_connections,
            max_per_client=config.max_connections_per_client,
            header_timeout_s=config.header_timeout_s,
            stats=state.metrics.edge,
            quiet=state.quiet,
        )
        options = {"loop": loop, "keepalive_timeout": config.idle_timeout_s, "access_log": None}
        guards = [guard]
        probes = None
        try:
            # A deep backlog: a fleet restarting at once opens thousands of connections together.
            listener = await loop.create_server(
                lambda: guard.protocol(front, **options),
                config.host,
                config.port,
                reuse_address=True,
                backlog=4096,
                ssl=None if tls is None else tls.listener_context,
                ssl_handshake_timeout=None if tls is None else config.header_timeout_s,
            )
            if config.probe_port is not None:
                probes, probe_guard = await _probe_listener(state, config, loop)
                guards.append(probe_guard)
        except OSError:
            await runner.cleanup()
            raise
        state.on_term_end.append(lambda: close_connections(front))
        for each in guards:
            each.start()
        if tls is not None:
            tls.start()
        return cls(app, runner, front, listener, guards, tls, probes)

    async def stop(self) -> None:
        self.listener.close()
        if self.tls is not None:
            self.tls.stop()
        for guard in self.guards:
            guard.stop()
        self.front.pre_shutdown()  # idle keep-alive connections close; busy ones once their request is answered
        await self.app.shutdown()  # on_shutdown: parked requests are answered, in-flight writes land
        await self.front.shutdown(SHUTDOWN_TIMEOUT_S)
        if self.probes is not None:
            self.probes.close()  # probes answer until the end: a stopping coordinator says so on /readyz
        self.state.quiet.close()
        await self.runner.cleanup()  # the cleanup_ctx exits: the loader is cancelled if still running, writer stops


def close_connections(front: web.Server) -> None:
    """A term ended: every client connection closes, an idle one at once, a busy one after its answer (which says
    NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE), so that clients reconnect, through the Service, to the replica
    that acts now. (``RequestHandler.close`` alone leaves an idle connection open but unread.)"""
    for connection in front.connections:
        if getattr(connection, "in_request", False):
            connection.close()
        else:
            connection.force_close()


async def _probe_listener(
    state: CoordinatorServer, config: ServerConfig, loop: asyncio.AbstractEventLoop
) -> tuple[asyncio.Server, ConnectionGuard]:
    server = web.Server(ProbeHandler(state))
    guard = ConnectionGuard(
        "probes",
        max_connections=PROBE_MAX_CONNECTIONS,
        max_per_client=PROBE_MAX_PER_CLIENT,
        header_timeout_s=PROBE_HEAD_TIMEOUT_S,
        stats=state.metrics.edge,
        quiet=state.quiet,
        shed=True,
    )
    # lingering_time 0: a body sent with a probe is never waited for; the connection closes after the answer.
    options = {"loop": loop, "keepalive_timeout": PROBE_IDLE_TIMEOUT_S, "access_log": None, "lingering_time": 0.0}
    listener = await loop.create_server(
        lambda: guard.protocol(server, **options), config.host, config.probe_port, reuse_address=True
    )
    return listener, guard
