"""The coordinator's connections (docs/api.md §6): how many, from whom, how slow, and what a broken one is told.

Owns ``ConnectionGuard``, ``BerthConnection`` and ``Refusal``. Rules:

- A listener holds at most ``max_connections`` connections, and at most ``max_per_client`` from one client (an
  IPv4 address, or an IPv6 /64: one host's share of addresses); beyond either, the connection is answered 503
  ``TOO_MANY_CONNECTIONS`` and closed without reading what it sends. A listener that *sheds* (the probe listener)
  first makes room instead: it closes the oldest connection that is not being answered (idle, or its request head
  still arriving) — of the same client when the client is at its limit — and refuses only when every connection is
  being answered. The kubelet opens a connection per probe and sends its request at once, so slow connections can
  no longer take every place the kubelet needs.
- A request head must be complete within ``header_timeout_s`` of its first byte, or the connection is answered
  408 and closed: a client dripping header bytes holds a slot for that long, not for as long as it likes. A
  connection that sends nothing is closed by aiohttp's keep-alive timeout (``--idle-timeout-s``); a body has
  ``--body-timeout-s`` (``state.read_body``).
- The request path only notes when a head starts (one clock read per request); a sweep once a second closes the
  connections whose head is overdue.
- What the HTTP parser refuses (a bad request line, an oversized header, bad framing) is answered like every other
  error, ``{"error", "message"}`` as JSON, and logged as one rate-limited line without a traceback.

``BerthConnection`` is aiohttp's ``web.RequestHandler``, built with its public constructor; it reports to the guard
from the protocol methods it overrides and answers parser errors from ``handle_error``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time
from collections.abc import Iterable
from typing import Any, cast

from aiohttp import web

from berth.coordinator.http.metrics import EdgeStats, count
from berth.coordinator.http.quiet_log import QuietLog, printable

log = logging.getLogger("berth.coordinator")

#: How long a refused connection's 503 is left to drain before the socket closes.
REFUSAL_LINGER_S = 1.0
SWEEP_INTERVAL_S = 1.0

_MALFORMED_ERRORS = {400: "MALFORMED_HTTP", 413: "PAYLOAD_TOO_LARGE", 431: "HEADERS_TOO_LARGE", 500: "INTERNAL_ERROR"}


def answer_bytes(status: int, reason: str, error: str, message: str) -> bytes:
    """A complete HTTP/1.1 answer with the contract's JSON error body, closing the connection."""
    body = json.dumps({"error": error, "message": message}, separators=(",", ":")).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nConnection: close\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def client_of(peername: Any) -> str:
    """The key connections are counted under: the IPv4 address, or the IPv6 /64 (one host's usual share)."""
    if not isinstance(peername, tuple) or not peername:
        return ""
    host = str(peername[0])
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))
    return host


class Refusal(asyncio.Protocol):
    """Answers a refused connection with its 503 and closes it, reading nothing it is sent.

    It half-closes after the answer and discards what the client still sends for a moment before closing, so
    the client reads the 503 instead of a reset.
    """

    def __init__(self, answer: bytes) -> None:
        self.answer = answer

    def connection_made(self, base_transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base_transport)  # uvloop's transports are not registered subclasses
        transport.write(self.answer)
        if transport.can_write_eof():
            transport.write_eof()
        asyncio.get_running_loop().call_later(REFUSAL_LINGER_S, transport.close)

    def data_received(self, data: bytes) -> None:
        pass  # discarded: this connection gets nothing but the 503


class ConnectionGuard:
    """One listener's connections: the caps, the per-client counts and the sweep for overdue request heads."""

    def __init__(
        self,
        listener: str,
        *,
        max_connections: int,
        max_per_client: int,
        header_timeout_s: float,
        stats: EdgeStats,
        quiet: QuietLog,
        shed: bool = False,
    ) -> None:
        self.listener = listener
        self.shed = shed
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self.header_timeout_s = header_timeout_s
        self.stats = stats
        self.quiet = quiet
        self.open: dict[BerthConnection, None] = {}  # oldest first
        self.per_client: dict[str, int] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        stats.open_connections[listener] = 0
        self._full_answer = answer_bytes(
            503,
            "Service Unavailable",
            "TOO_MANY_CONNECTIONS",
            "connections: the coordinator is at its connection limit",
        )
        self._client_answer = answer_bytes(
            503,
            "Service Unavailable",
            "TOO_MANY_CONNECTIONS",
            f"connections: this client already has {max_per_client} connections open",
        )
        self._late_head_answer = answer_bytes(
            408,
            "Request Timeout",
            "REQUEST_TIMEOUT",
            f"headers: the request head did not arrive within {header_timeout_s:g} s",
        )

    # ---------------------------------------------------------------------------------------- admission

    def protocol(self, server: web.Server, **handler_options: Any) -> asyncio.Protocol:
        """A new connection's protocol: a ``BerthConnection``, or a ``Refusal`` when the listener is full."""
        if len(self.open) >= self.max_connections and not (self.shed and self._shed_one(self.open)):
            self._refused("max_connections")
            return Refusal(self._full_answer)
        return BerthConnection(server, self, **handler_options)

    def admit(self, connection: BerthConnection) -> Refusal | None:
        """Count the connection in, or the ``Refusal`` to answer it with (its client is at its limit)."""
        client = connection.client
        full = self.max_per_client and self.per_client.get(client, 0) >= self.max_per_client
        if full and self.shed:
            full = not self._shed_one(c for c in self.open if c.client == client)
        held = self.per_client.get(client, 0)
        if full:
            self._refused("per_client")
            self.quiet.warning(
                f"per_client:{self.listener}",
                "connections: refused a connection from %s, which already has %d open (--max-connections-per-client)",
                printable(client),
                held,
            )
            return Refusal(self._client_answer)
        self.per_client[client] = held + 1
        self.open[connection] = None
        self.stats.open_connections[self.listener] = len(self.open)
        return None

    def release(self, connection: BerthConnection) -> None:
        if connection not in self.open:
            return
        del self.open[connection]
        held = self.per_client.get(connection.client, 1) - 1
        if held > 0:
            self.per_client[connection.client] = held
        else:
            self.per_client.pop(connection.client, None)
        self.stats.open_connections[self.listener] = len(self.open)

    def _refused(self, reason: str) -> None:
        count(self.stats.refused, reason)

    def _shed_one(self, candidates: Iterable[BerthConnection]) -> bool:
        """Close the oldest of ``candidates`` that is not being answered; False when every one of them is."""
        for connection in candidates:
            if not connection.in_request:
                connection.force_close()
                self.release(connection)  # its place is free now, not when the loop reports the close
                self.quiet.warning(
                    f"shed:{self.listener}",
                    "connections: closed an idle or slow connection from %s to make room (%s listener full)",
                    printable(connection.client),
                    self.listener,
                )
                return True
        return False

    # ----------------------------------------------------------------------------------------- the sweep

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().call_later(SWEEP_INTERVAL_S, self._sweep)

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    def _sweep(self) -> None:
        deadline = time.monotonic() - self.header_timeout_s
        overdue = [c for c in self.open if 0.0 < c.head_started_at <= deadline and not c.in_request]
        for connection in overdue:
            connection.close_overdue_head(self._late_head_answer)
        if overdue:
            self.stats.header_timeouts += len(overdue)
            self.quiet.warning(
                f"header_timeout:{self.listener}",
                "connections: closed %d whose request head did not arrive within %g s (last from %s)",
                len(overdue),
                self.header_timeout_s,
                printable(overdue[-1].client),
            )
        self.start()

    # ---------------------------------------------------------------------------------- parser refusals

    def malformed(
        self, request: web.BaseRequest, status: int, exc: BaseException | None, message: str | None
    ) -> web.Response:
        """The JSON answer to what the HTTP parser (or aiohttp around a handler) refused, logged quietly."""
        if status >= 500:
            self.quiet.write(
                logging.ERROR, "internal_error", "internal error on %s", printable(request.path), exc_info=exc
            )
            error, text = "INTERNAL_ERROR", "internal error; see the coordinator log"
        else:
            self.stats.malformed += 1
            reason = _reason(exc, message)
            self.quiet.warning(
                f"malformed_http:{self.listener}",
                "malformed HTTP from %s: %d %s",
                printable(request.remote or "?"),
                status,
                reason,
            )
            error, text = _MALFORMED_ERRORS.get(status, f"HTTP_{status}"), f"http: {reason}"
        response = web.json_response({"error": error, "message": text}, status=status)
        response.force_close()
        return response


def _reason(exc: BaseException | None, message: str | None) -> str:
    """The parser's complaint on one line, printable and short (it may quote the client's bytes)."""
    text = " ".join((message or str(getattr(exc, "message", None) or exc or "")).split())
    return printable(text or "bad request", limit=160)


class BerthConnection(web.RequestHandler):
    """aiohttp's request handler for one connection, reporting to its ``ConnectionGuard``."""

    __slots__ = ("client", "guard", "head_started_at", "in_request")

    def __init__(self, manager: web.Server, guard: ConnectionGuard, **options: Any) -> None:
        super().__init__(manager, **options)
        self.guard = guard
        self.client = ""
        self.head_started_at = 0.0  # monotonic time of the first byte of a request head still being read; 0: none
        self.in_request = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.client = client_of(transport.get_extra_info("peername"))
        refusal = self.guard.admit(self)
        if refusal is not None:
            transport.set_protocol(refusal)  # this handler never starts: the refusal owns the connection now
            refusal.connection_made(transport)
            return
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.guard.release(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Every request passes here: module-level names, no super() object (docs/benchmarks.md, row 1).
        if not self.head_started_at:
            self.head_started_at = _monotonic()
        _receive(self, data)

    def request_started(self) -> None:
        """A request head is complete and its handler runs (called by the listener's handler; the API's front sets
        the same two attributes itself, to save the call)."""
        self.head_started_at = 0.0
        self.in_request = True

    def request_done(self) -> None:
        self.head_started_at = 0.0
        self.in_request = False

    def close_overdue_head(self, answer: bytes) -> None:
        if self.transport is not None:
            self.transport.write(answer)
        self.force_close()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:  # part of an answer went out already: all that is left is to close
            raise ConnectionError("an answer was being sent when the request failed")
        return self.guard.malformed(request, status, exc, message)


_monotonic = time.monotonic
_receive = web.RequestHandler.data_received
