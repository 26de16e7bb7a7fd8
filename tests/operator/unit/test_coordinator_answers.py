"""The operator's coordinator port against hostile or broken answers (issue 12, items 3 and 5, operator side;
docs/operator.md "What the operator says when the coordinator fails"): every failure becomes a fixed message in the
operator's words, by its class, with nothing the endpoint wrote in it, in its reason, or in anything chained to it;
a 413 says the request is too large (with the number of expected members), not "unreachable"; a 409 GROUP_OWNED is
the owner; an answer over the cap is refused unread. Small loopback listeners play the endpoints."""

from __future__ import annotations

import traceback
from contextlib import AbstractAsyncContextManager

import pytest
from aiohttp import web
from support.hostile_endpoints import Handler, raw_endpoint
from support.hostile_endpoints import endpoint as hostile_endpoint

from berth.coordinator.client.backoff import BackoffPolicy
from berth.operator.adapters.coordinator_adapter import MAX_RESPONSE_BYTES
from berth.operator.adapters.coordinators import Coordinators
from berth.operator.ports import CoordinatorUnavailable, GroupOwned

pytestmark = pytest.mark.timeout(60)

SECRET = "sk_live_SECRET-7d1e-internal-db-password"


def endpoint(handler: Handler) -> AbstractAsyncContextManager[str]:
    return hostile_endpoint(handler, client_max_size=64 * 1024 * 1024)


def answering(status: int, body: str, content_type: str = "application/json") -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        return web.Response(status=status, text=body, content_type=content_type)

    return handle


#: Retries as the operator makes them, compressed: a coordinator that keeps failing is retried for a moment (not the
#: operator's 10 s: what is asserted here is what a failure becomes, not how long it is retried), and reported.
QUICK_RETRY_S = 0.2
QUICK_BACKOFF = BackoffPolicy(initial_ms=5, max_ms=20)


async def failed(url: str, call: str = "describe") -> CoordinatorUnavailable:
    directory = Coordinators(token="admin-t0ken", retry_for_s=QUICK_RETRY_S, backoff=QUICK_BACKOFF)
    port = directory.port(url)
    calls = {
        "describe": lambda: port.describe("orders"),
        "put": lambda: port.put_expected_members("orders", [f"orders-{i}" for i in range(70_000)], owner_uid="u"),
        "config": port.get_config,
    }
    try:
        with pytest.raises(CoordinatorUnavailable) as raised:
            await calls[call]()
    finally:
        await directory.close()
    return raised.value


def clean(error: BaseException) -> None:
    """Nothing the endpoint wrote is in the message, the reason, or the whole formatted traceback."""
    text = "".join(traceback.format_exception(error))
    assert SECRET not in str(error) and SECRET not in getattr(error, "reason", "") and SECRET not in text
    assert error.__cause__ is None


@pytest.mark.parametrize(
    ("status", "reason", "words"),
    [
        (500, "ServerError", "the coordinator failed to answer describing orders at {url} (HTTP 500, a server error)"),
        (503, "ServerError", "(HTTP 503, a server error)"),
        (401, "Unauthenticated", "the coordinator refused the operator's token: describing orders at {url} (HTTP 401)"),
        (403, "NotAuthorized", "the coordinator refused the operator's token"),
        (404, "NotFound", "has no such route for describing orders (HTTP 404)"),
        (400, "Refused", "the coordinator refused describing orders at {url} (HTTP 400)"),
        (418, "Refused", "(HTTP 418)"),
    ],
)
async def test_an_http_error_becomes_a_fixed_message_by_its_class(status: int, reason: str, words: str) -> None:
    for body, content_type in (
        (f'{{"error": "INTERNAL", "message": "{SECRET}"}}', "application/json"),
        (f"<html>{SECRET}</html>", "text/html"),
    ):
        async with endpoint(answering(status, body, content_type)) as url:
            error = await failed(url)
        assert error.reason == reason
        assert words.format(url=url) in str(error)
        clean(error)


async def test_a_server_error_is_retried_before_it_is_reported_and_a_refusal_is_not() -> None:
    asked: list[int] = []

    def counting(status: int) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            asked.append(status)
            return web.Response(status=status, text="{}", content_type="application/json")

        return handle

    for status in (503, 400):
        async with endpoint(counting(status)) as url:
            await failed(url)
    assert asked.count(503) > 1 and asked.count(400) == 1


async def test_a_413_says_the_request_is_too_large_with_the_number_of_expected_members() -> None:
    async with endpoint(answering(413, f'{{"error": "PAYLOAD_TOO_LARGE", "message": "{SECRET}"}}')) as url:
        error = await failed(url, "put")
    assert error.reason == "RequestTooLarge"
    assert str(error).startswith("the request is too large for the coordinator (70000 expected members)")
    assert "unreachable" not in str(error) and "cannot reach" not in str(error)
    clean(error)


async def test_a_409_group_owned_is_the_owner_the_coordinator_recorded() -> None:
    body = (
        '{"error": "GROUP_OWNED", "message": "' + SECRET + '",'
        ' "owner": {"namespace": "team-a", "name": "orders", "uid": "u-a"}}'
    )
    async with endpoint(answering(409, body)) as url:
        directory = Coordinators(token="t", retry_for_s=QUICK_RETRY_S, backoff=QUICK_BACKOFF)
        with pytest.raises(GroupOwned) as raised:
            await directory.port(url).leave_instances("orders", ["orders-0"], owner_uid="mine")
        await directory.close()
    assert raised.value.owner is not None and raised.value.owner.fleet == "team-a/orders"
    clean(raised.value)


async def test_a_huge_answer_is_refused_unread_whether_its_length_is_declared_or_not() -> None:
    declared = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 419430400\r\n\r\n" + b"{" + b" " * 1000
    )
    async with raw_endpoint(declared) as url:
        error = await failed(url)
    assert error.reason == "AnswerTooLarge"
    assert f"over the operator's {MAX_RESPONSE_BYTES}-byte cap" in str(error)
    clean(error)

    sent = 0

    async def stream(request: web.Request) -> web.StreamResponse:
        nonlocal sent
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        chunk = (SECRET * 1000).encode()
        try:
            while sent < 4 * MAX_RESPONSE_BYTES:
                await response.write(chunk)
                sent += len(chunk)
        except (ConnectionError, RuntimeError):
            pass
        return response

    async with endpoint(stream) as url:
        error = await failed(url)
    assert error.reason == "AnswerTooLarge"
    assert sent < 4 * MAX_RESPONSE_BYTES  # the operator hung up; it did not read the rest
    clean(error)


@pytest.mark.parametrize(
    "answer",
    [
        f"HTTP/1.1 200 OK\r\nX-Leak: {SECRET}\x01\r\nContent-Length: 2\r\n\r\n{{}}".encode(),
        f"{SECRET} this is not HTTP at all\r\n\r\n".encode(),
        f'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n{{"x": "{SECRET}'.encode(),
    ],
    ids=["bad-header", "not-http", "short-body"],
)
async def test_an_answer_that_is_not_http_or_not_the_contract_names_nothing_it_said(answer: bytes) -> None:
    async with raw_endpoint(answer) as url:
        error = await failed(url, "config")
    assert error.reason in ("Unreachable", "MalformedAnswer")
    assert str(error).startswith(f"cannot reach the coordinator at {url}") or "not what the contract" in str(error)
    clean(error)


async def test_a_200_that_is_not_what_the_contract_promises_is_malformed_not_quoted() -> None:
    async with endpoint(answering(200, f'{{"group_state": 7, "x": "{SECRET}"}}')) as url:
        error = await failed(url)
    assert error.reason == "MalformedAnswer"
    assert "is not what the contract promises" in str(error)
    clean(error)


async def test_nobody_listening_is_unreachable_in_fixed_words() -> None:
    async with raw_endpoint(b"") as url:
        pass  # closed: nothing listens there any more
    error = await failed(url)
    assert error.reason == "Unreachable"
    assert str(error) == f"cannot reach the coordinator at {url}: describing orders: could not connect"
