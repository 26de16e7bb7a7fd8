"""The transport's reading of API.md §1: which HTTP answers are retriable, and what an error carries.

A tiny in-process aiohttp server plays a coordinator misbehaving in each way the real one may (or must not).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from member_harness import free_port

from berth.coordinator.client import (
    AuthorizationError,
    CoordinatorHttpError,
    CoordinatorServerError,
    CoordinatorUnavailableError,
)
from berth.coordinator.client.transport import Transport, group_path

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


async def test_a_200_answer_is_its_json_object(transport: Transport) -> None:
    assert await transport.post("/ok", {}) == {"error_code": 0, "error": "NONE"}
    with pytest.raises(CoordinatorHttpError, match="not a JSON object"):
        await transport.get("/not-an-object")


async def test_refusals_carry_the_servers_error_and_message(transport: Transport) -> None:
    with pytest.raises(CoordinatorHttpError) as bad:
        await transport.post("/bad", {})
    assert (bad.value.status, bad.value.error, bad.value.message) == (400, "INVALID_REQUEST", "member_id: is required")
    assert not isinstance(bad.value, CoordinatorUnavailableError)  # retrying a bad request cannot help
    with pytest.raises(AuthorizationError, match="token not allowed"):
        await transport.get("/forbidden")


async def test_server_errors_are_retriable(transport: Transport) -> None:
    with pytest.raises(CoordinatorServerError) as stopping:
        await transport.post("/stopping", {})
    assert isinstance(stopping.value, CoordinatorUnavailableError) and stopping.value.status == 503
    with pytest.raises(CoordinatorServerError) as crashed:
        await transport.get("/crashed")
    assert crashed.value.status == 500 and crashed.value.message == "Internal Server Error"


async def test_connection_refused_is_unavailable() -> None:
    client = Transport(f"http://127.0.0.1:{free_port()}")
    try:
        with pytest.raises(CoordinatorUnavailableError, match="unreachable"):
            await client.get("/v1/groups")
    finally:
        await client.close()


def test_group_ids_are_percent_encoded_whole() -> None:
    assert group_path("a/b c%", "/join") == "/v1/groups/a%2Fb%20c%25/join"
