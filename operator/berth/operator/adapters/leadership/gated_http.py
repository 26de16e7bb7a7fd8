"""The leader's gate at the moment a write goes out, and a bound on how late the network may deliver it.

A replica checks the gate (:class:`~berth.operator.ports.WriteGate`, the leader's) before each write. Checked where
a call is made, a write could still leave long after the check: a new connection's handshake, a retry, a pool's
queue stand between the check and the bytes on the wire; and a partition can hold bytes back for as long as it
lasts, to deliver them once it heals, after another replica took over. So:

- :func:`gate_connections` makes the official client's (urllib3) connections check the gate in ``request()``, once
  connected and right before the request's bytes are written; each of urllib3's own retries is checked again.
- :func:`gated_request_class` is an aiohttp ``request_class`` whose ``send`` (given a connection already made)
  checks the gate before anything is written: Kopf's session, the watch cache's and the coordinators'.
- :func:`bound_connections` and :func:`bounded_connector` set ``TCP_USER_TIMEOUT`` on every connection of a
  gated client: bytes the peer has not acknowledged within the bound make the kernel drop the connection with
  whatever is queued on it. A write therefore reaches its target within the bound after its check, or never, also
  when the connection was closed meanwhile (the request timed out, the process exited) while a partition held it.
  The operator takes the bound from its Lease timings (``planners.lease.write_bound_s``), so that a write checked
  before the renew deadline lands before any other replica may take the Lease over.

Reads (GET, HEAD, OPTIONS) pass unchecked. What remains is the time between the check and the system call that
writes the request (microseconds, unless the process is frozen exactly there): only fencing at the target could
close it, and neither the API server nor Kafka fences a Lease holder.
"""

from __future__ import annotations

import socket
from typing import Any

import aiohttp
import urllib3
from aiohttp.connector import Connection

from berth.operator.ports import WriteGate

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _check(gate: WriteGate, method: str) -> None:
    if method.upper() not in READ_METHODS:
        gate.check()


def gate_connections(pool_manager: urllib3.PoolManager, gate: WriteGate) -> None:
    """Every connection ``pool_manager`` makes from now on checks ``gate`` right before it writes a request."""

    class Http(urllib3.connection.HTTPConnection):
        def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> None:
            if self.sock is None:
                self.connect()
            _check(gate, method)
            super().request(method, url, *args, **kwargs)

    class Https(urllib3.connection.HTTPSConnection):
        def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> None:
            if self.sock is None:
                self.connect()
            _check(gate, method)
            super().request(method, url, *args, **kwargs)

    class HttpPool(urllib3.HTTPConnectionPool):
        ConnectionCls = Http

    class HttpsPool(urllib3.HTTPSConnectionPool):
        ConnectionCls = Https

    pool_manager.pool_classes_by_scheme = {"http": HttpPool, "https": HttpsPool}
    pool_manager.clear()


def gated_request_class(gate: WriteGate) -> type[aiohttp.ClientRequest]:
    """An aiohttp request class that checks ``gate`` once connected, before the request is written."""

    class GatedRequest(aiohttp.ClientRequest):
        async def send(self, conn: Connection) -> aiohttp.ClientResponse:
            _check(gate, self.method)
            return await super().send(conn)

    return GatedRequest


def bound_connections(pool_manager: urllib3.PoolManager, write_bound_s: float) -> None:
    """Every connection ``pool_manager`` makes from now on carries ``TCP_USER_TIMEOUT`` besides its other options."""
    options = list(
        pool_manager.connection_pool_kw.get("socket_options")
        or urllib3.connection.HTTPConnection.default_socket_options
    )
    options.append((socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, _milliseconds(write_bound_s)))
    pool_manager.connection_pool_kw["socket_options"] = options
    pool_manager.clear()


def bounded_connector(write_bound_s: float | None, **kwargs: Any) -> aiohttp.TCPConnector:
    """An aiohttp connector (``kwargs`` as ``TCPConnector``'s) whose sockets carry ``TCP_USER_TIMEOUT`` (None: none)."""
    if write_bound_s is None:
        return aiohttp.TCPConnector(**kwargs)
    timeout_ms = _milliseconds(write_bound_s)

    def bounded(addr_info: Any) -> socket.socket:
        family, kind, proto, _, _ = addr_info
        sock = socket.socket(family=family, type=kind, proto=proto)
        if family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, timeout_ms)
        return sock

    return aiohttp.TCPConnector(socket_factory=bounded, **kwargs)


def _milliseconds(seconds: float) -> int:
    if seconds <= 0:
        raise ValueError(f"the write bound must be positive, got {seconds:g} s")
    return max(1, round(seconds * 1000))
