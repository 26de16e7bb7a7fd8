"""The coordinator's HTTP server: the application, the low-level front before it, and the listening socket.

- ``create_app`` builds the ``web.Application``: its state (``CoordinatorServer``), a view per route of the
  route table, the contract middleware, start-up and loading in a ``cleanup_ctx``, and the answer to what is
  parked in ``on_shutdown``. It serves every route by itself (tests use it so).
- ``Listening.start`` serves it the way ``berth-coordinator`` does: the application set up by an ``AppRunner``,
  and a low-level ``web.Server`` whose handler (``front.ProtocolFront``) serves the protocol's POST routes and
  passes the rest to the application, on a socket that answers 503 beyond ``--max-connections``.
- ``Listening.stop``: stop accepting, close idle connections, answer parked requests (``on_shutdown``), let
  in-flight requests finish, then clean the application up (the writer stops last).

Only public aiohttp and asyncio interfaces are used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from aiohttp import web

from berth.coordinator.core import Coordinator
from berth.coordinator.http.clock import Clock
from berth.coordinator.http.config import ServerConfig
from berth.coordinator.http.engine import WriterPort, WritesDone
from berth.coordinator.http.front import ProtocolFront
from berth.coordinator.http.middleware import contract_middleware
from berth.coordinator.http.state import STATE, CoordinatorServer, JournalReader
from berth.coordinator.http.views import VIEWS
from berth.coordinator.protocol.routes import ROUTES

SHUTDOWN_TIMEOUT_S = 10.0


def create_app(
    config: ServerConfig,
    clock: Clock,
    core: Coordinator,
    make_writer: Callable[[WritesDone], WriterPort],
    load_records: Callable[[Coordinator], None],
    journal: JournalReader,
) -> web.Application:
    app = web.Application(client_max_size=config.max_body_bytes, middlewares=[contract_middleware])
    state = CoordinatorServer(config, clock, core, make_writer, load_records, journal)
    app[STATE] = state
    app.cleanup_ctx.append(state.lifecycle)
    app.on_shutdown.append(state.shutdown)
    for route in ROUTES:
        if route.test_only and not config.manual_clock:
            continue
        app.router.add_route(route.method, route.path, VIEWS[route.operation], name=route.operation)
    return app


class _Refuse(asyncio.Protocol):
    """Answers a connection over ``--max-connections`` with a 503 and closes it, reading nothing it is sent.

    It half-closes after the answer and discards what the client still sends for a moment before closing, so
    the client reads the 503 instead of a reset.
    """

    BODY = b'{"error":"TOO_MANY_CONNECTIONS","message":"connections: the coordinator is at its connection limit"}'

    def connection_made(self, base_transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base_transport)  # uvloop's transports are not registered subclasses
        transport.write(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(self.BODY)}\r\n\r\n".encode()
            + self.BODY
        )
        if transport.can_write_eof():
            transport.write_eof()
        asyncio.get_running_loop().call_later(1.0, transport.close)

    def data_received(self, data: bytes) -> None:
        pass  # discarded: this connection gets nothing but the 503


class Listening:
    """The application served on a socket, with the protocol front before it."""

    def __init__(self, app: web.Application, runner: web.AppRunner, front: web.Server, listener: asyncio.Server):
        self.app = app
        self.runner = runner
        self.front = front
        self.listener = listener

    @property
    def state(self) -> CoordinatorServer:
        return self.app[STATE]

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.listener.sockets[0].getsockname()[:2]
        return str(host), int(port)

    @classmethod
    async def start(cls, app: web.Application, config: ServerConfig) -> Listening:
        """Set the application up (its ``cleanup_ctx`` starts loading) and listen; raises ``OSError``."""
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        inner = runner.server
        assert inner is not None
        front = web.Server(
            ProtocolFront(app[STATE], inner.request_handler),
            request_factory=inner.request_factory,
            access_log=None,
            keepalive_timeout=config.idle_timeout_s,
        )
        limit = config.max_connections

        def connection() -> asyncio.Protocol:
            if len(front.connections) >= limit:
                return _Refuse()
            return front()

        try:
            # A deep backlog: a fleet restarting at once opens thousands of connections together.
            listener = await asyncio.get_running_loop().create_server(
                connection, config.host, config.port, reuse_address=True, backlog=4096
            )
        except OSError:
            await runner.cleanup()
            raise
        return cls(app, runner, front, listener)

    async def stop(self) -> None:
        self.listener.close()
        self.front.pre_shutdown()  # idle keep-alive connections close; busy ones once their request is answered
        await self.app.shutdown()  # on_shutdown: parked requests are answered, in-flight writes land
        await self.front.shutdown(SHUTDOWN_TIMEOUT_S)
        await self.runner.cleanup()  # the cleanup_ctx exits: the loader is cancelled if still running, writer stops
