"""The leader's gate where a write leaves (``gated_http``): checked once the connection is made, right before the
request is written, for the official client (urllib3) and for aiohttp (Kopf's session, the coordinators'); and
``TCP_USER_TIMEOUT`` on their sockets. Against a real HTTP server on loopback that counts connections and requests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import aiohttp
import kubernetes
import pytest

from berth.operator.adapters.kube.calls import GatedApiClient
from berth.operator.adapters.leadership.gated import gated_session
from berth.operator.adapters.leadership.gated_http import bounded_connector, gated_request_class
from berth.operator.ports import NotLeading


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.connections = 0
        self.requests: list[str] = []

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a connection closed before its request (the gate refused it) is what these tests make

    def get_request(self) -> tuple[socket.socket, object]:
        accepted = super().get_request()
        self.connections += 1
        return accepted

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.server.requests.append(f"{self.command} {self.path}")
        body = b'{"metadata": {"name": "x"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        if self.path.startswith("/slow"):
            time.sleep(0.5)  # the body later: the client holds the connection meanwhile
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Server]:
    found = Server()
    threading.Thread(target=found.serve_forever, daemon=True).start()
    yield found
    found.shutdown()
    found.server_close()


class ClosingGate:
    """Open for the first ``open_checks`` checks, closed after (the deadline passes between two of them); each check
    notes how many connections the server had accepted by then (waiting a moment for its accepting thread: a client
    that had not connected yet could not connect while the check waits)."""

    def __init__(self, server: Server, open_checks: int) -> None:
        self.server = server
        self.open_checks = open_checks
        self.connections_at_check: list[int] = []

    def check(self) -> None:
        deadline = time.monotonic() + 0.5
        while self.server.connections == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.connections_at_check.append(self.server.connections)
        if len(self.connections_at_check) > self.open_checks:
            raise NotLeading("closed")


def core_api(
    server: Server, gate: ClosingGate | None, write_bound_s: float | None = None
) -> kubernetes.client.CoreV1Api:
    configuration = kubernetes.client.Configuration()
    configuration.host = server.url
    return kubernetes.client.CoreV1Api(
        GatedApiClient(configuration, user_agent="berth-operator/test (a)", gate=gate, write_bound_s=write_bound_s)
    )


def test_the_official_client_checks_the_gate_again_once_connected_and_sends_nothing_once_it_closed(
    server: Server,
) -> None:
    gate = ClosingGate(server, open_checks=1)  # the call's check passes; the deadline passes before it is written
    api = core_api(server, gate)
    with pytest.raises(NotLeading):
        api.create_namespaced_config_map("x", {"metadata": {"name": "x"}})
    assert gate.connections_at_check[-1] == 1  # the last check came after the connection was made...
    assert server.requests == []  # ...and nothing was written on it
    api.read_namespaced_config_map("x", "x")  # reads pass
    assert server.requests == ["GET /api/v1/namespaces/x/configmaps/x"]


def test_an_open_gate_lets_writes_through_with_tcp_user_timeout_on_the_connection(server: Server) -> None:
    gate = ClosingGate(server, open_checks=100)
    api = core_api(server, gate, write_bound_s=0.75)
    api.create_namespaced_config_map("x", {"metadata": {"name": "x"}})
    assert server.requests == ["POST /api/v1/namespaces/x/configmaps"]
    pools = api.api_client.rest_client.pool_manager.pools
    (key,) = pools.keys()
    connection = pools[key].pool.get()
    assert connection.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 750


async def test_aiohttp_requests_check_the_gate_once_connected(server: Server) -> None:
    gate = ClosingGate(server, open_checks=0)
    async with aiohttp.ClientSession(request_class=gated_request_class(gate)) as session:
        with pytest.raises(NotLeading):
            await session.patch(server.url + "/write", data=b"{}")
        assert gate.connections_at_check == [1]  # checked once connected, and nothing written
        async with session.get(server.url + "/read") as answer:
            assert answer.status == 200
    assert server.requests == ["GET /read"]


async def test_the_coordinators_session_is_gated_and_its_sockets_bounded(server: Server) -> None:
    gate = ClosingGate(server, open_checks=1)
    session = gated_session(gate, write_bound_s=0.5)()  # type: ignore[arg-type]
    try:
        async with session.post(server.url + "/slow/leave", data=b"{}") as answer:
            assert user_timeout_ms(answer) == 500
            await answer.read()
        with pytest.raises(NotLeading):
            await session.post(server.url + "/slow/leave", data=b"{}")
    finally:
        await session.close()
    assert server.requests == ["POST /slow/leave"]


async def test_a_connector_without_a_bound_sets_no_user_timeout(server: Server) -> None:
    async with (
        aiohttp.ClientSession(connector=bounded_connector(None)) as session,
        session.get(server.url + "/slow") as answer,
    ):
        assert user_timeout_ms(answer) == 0
        await answer.read()


def user_timeout_ms(answer: aiohttp.ClientResponse) -> int:
    assert answer.connection is not None and answer.connection.transport is not None
    sock = answer.connection.transport.get_extra_info("socket")
    return int(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT))
