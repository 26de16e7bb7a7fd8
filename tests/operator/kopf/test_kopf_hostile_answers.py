"""The real operator against an endpoint at its trusted coordinator URL that answers with secrets and with far too
much (issue 12, item 3): nothing it wrote reaches the fleet's status, its Events or the operator's log, and a huge
answer is refused unread; the fleet says what happened in the operator's own words."""

from __future__ import annotations

import json
import logging

import pytest
from aiohttp import web
from kopf_apiserver import EVENTS, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import OperatorFactory, condition, create_fleet, events, fleet_body, fleet_status, until
from support.hostile_endpoints import Handler, endpoint

SECRET = "AKIA-SECRET-0d9c-from-an-internal-service"


async def secret_errors(request: web.Request) -> web.StreamResponse:
    body = {"error": "INTERNAL_ERROR", "message": f"db password {SECRET}", "error_code": -1}
    return web.json_response(body, status=500, headers={"X-Debug": SECRET})


async def huge(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    chunk = (SECRET * 4096).encode()
    try:
        for _ in range(2_000):  # up to ~330 MiB, if anyone read it all
            await response.write(chunk)
    except (ConnectionError, RuntimeError):
        pass
    return response


def everything_said(apiserver: ApiServer) -> str:
    every_event = [stored.raw for (resource, _, _), stored in list(apiserver.objects.items()) if resource == EVENTS]
    return json.dumps([fleet_status(apiserver, "orders"), every_event])


@pytest.mark.parametrize(("handler", "reason"), [(secret_errors, "ServerError"), (huge, "AnswerTooLarge")])
async def test_a_hostile_answer_reaches_no_status_event_or_log_line(
    apiserver: ApiServer,
    controller: StatefulSetController,
    start_operator: OperatorFactory,
    caplog: pytest.LogCaptureFixture,
    handler: Handler,
    reason: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with endpoint(handler) as url:
        await start_operator("--coordinator-url", url)
        await create_fleet(apiserver, fleet_body("orders", 1))
        failing = await until(
            lambda: (c := condition(apiserver, "orders", "CoordinatorReachable")) and c["status"] == "False" and c,
            "CoordinatorReachable=False",
        )
        await until(lambda: events(apiserver, "orders", f"Coordinator{reason}"), "the Warning Event")
    assert failing["reason"] == reason
    assert url in failing["message"] and "reading the coordinator's config" in failing["message"]
    assert SECRET not in everything_said(apiserver)
    assert SECRET not in caplog.text
