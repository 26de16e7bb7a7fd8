"""The transport's reading of docs/api.md §5: which HTTP answers are retriable, and what an error carries.

A tiny in-process aiohttp server plays a coordinator misbehaving in each way the real one may (or must not).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from support.net import free_port

from berth.coordinator.client import (
    AuthorizationError,
    CoordinatorHttpError,
    CoordinatorServerError,
    CoordinatorUnavailableError,
)
from berth.coordinator.client.transport import MalformedResponseError, Transport, group_path
from berth.coordinator.protocol import Error, HeartbeatRequest, HeartbeatResponse

PING = HeartbeatRequest(1, "m")

ANSWERS = {
    "/ok": (200, '{"error_code": 0, "error": "NONE"}'),
    "/not-an-object": (200, "[1, 2]"),
    "/bad": (400, '{"error_code": 42, "error": "INVALID_REQUEST", "message": "member_id: is required"}'),
    "/forbidden": (403, '{"error_code": 30, "error": "GROUP_AUTHORIZATION_FAILED", "message": "token not allowed"}'),
    "/stopping": (503, '{"error_code": 15, "error": "COORDINATOR_NOT_AVAILABLE"}'),
    "/crashed": (500, "Internal Server Error"),
}


@pytest.fixture
async def transport() -> AsyncIterator[Transport]:
    async def answer(request: web.Request) -> web.Response:
        status, text = ANSWERS[request.path]
        return web.Response(status=status, text=text, content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    client = Transport(f"http://127.0.0.1:{port}", token="t0ken-value", request_timeout_s=5)
    yield client
    await client.close()
    await runner.cleanup()


async def test_a_200_answer_is_decoded_as_the_declared_answer(transport: Transport) -> None:
    assert await transport.request("POST", "/ok", HeartbeatResponse, body=PING) == HeartbeatResponse(Error.NONE)
    with pytest.raises(MalformedResponseError, match="not what the contract promises"):
        await transport.request("GET", "/not-an-object", HeartbeatResponse)


async def test_refusals_carry_the_servers_error_and_message(transport: Transport) -> None:
    with pytest.raises(CoordinatorHttpError) as bad:
        await transport.request("POST", "/bad", HeartbeatResponse, body=PING)
    assert (bad.value.status, bad.value.error, bad.value.message) == (400, "INVALID_REQUEST", "member_id: is required")
    assert not isinstance(bad.value, CoordinatorUnavailableError)  # retrying a bad request cannot help
    with pytest.raises(AuthorizationError, match="token not allowed"):
        await transport.request("GET", "/forbidden", HeartbeatResponse)


async def test_server_errors_are_retriable(transport: Transport) -> None:
    with pytest.raises(CoordinatorServerError) as stopping:
        await transport.request("POST", "/stopping", HeartbeatResponse, body=PING)
    assert isinstance(stopping.value, CoordinatorUnavailableError) and stopping.value.status == 503
    with pytest.raises(CoordinatorServerError) as crashed:
        await transport.request("GET", "/crashed", HeartbeatResponse)
    assert crashed.value.status == 500 and crashed.value.message == "Internal Server Error"


async def test_connection_refused_is_unavailable() -> None:
    client = Transport(f"http://127.0.0.1:{free_port()}")
    try:
        with pytest.raises(CoordinatorUnavailableError, match="unreachable"):
            await client.request("GET", "/v1/groups", HeartbeatResponse)
    finally:
        await client.close()


def test_group_ids_are_percent_encoded_whole() -> None:
    assert group_path("a/b c%", "/join") == "/v1/groups/a%2Fb%20c%25/join"
