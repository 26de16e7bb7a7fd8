"""The library as a client of untrusted answers (issue 12, items 1, 3 and 5, client side; docs/member-library.md
"Answers are not trusted"): whatever an endpoint answers, nothing it wrote reaches an exception's message (the
operator copies ``str(exc)`` into a fleet's status and Events), no answer is held beyond the size cap, nothing is
decompressed, redirects are not followed (the token stays with the URL it was given), and a refusal is told apart
from "unreachable". Small in-process servers play the hostile endpoints.
"""

from __future__ import annotations

import asyncio
import gzip

import pytest
from aiohttp import web
from support.hostile_endpoints import endpoint, raw_endpoint

from berth.coordinator.client import (
    CoordinatorAdmin,
    CoordinatorHttpError,
    CoordinatorRefusedError,
    CoordinatorUnavailableError,
    RequestTooLargeError,
    ResponseTooLargeError,
)
from berth.coordinator.client.transport import MalformedResponseError, Transport
from berth.coordinator.protocol import HeartbeatRequest, HeartbeatResponse

pytestmark = pytest.mark.timeout(60)

SECRET = "internal-secret-4f9a"
CAP = 64 * 1024


async def ask(url: str, path: str = "/v1/groups/g/heartbeat") -> HeartbeatResponse:
    transport = Transport(url, token="t0ken-value", request_timeout_s=10, max_response_bytes=CAP)
    try:
        return await transport.request("POST", path, HeartbeatResponse, body=HeartbeatRequest(1, "m"))
    finally:
        await transport.close()


@pytest.mark.parametrize("status", [400, 404, 409, 413, 500, 503])
async def test_no_text_of_an_error_answer_reaches_the_message(status: int) -> None:
    async def hostile(_: web.Request) -> web.Response:
        body = f'{{"error": "\\u001b[31m{SECRET}", "message": "{SECRET}: see http://internal/"}}'
        return web.Response(status=status, text=body, content_type="application/json")

    async with endpoint(hostile) as url:
        with pytest.raises((CoordinatorRefusedError, CoordinatorUnavailableError)) as raised:
            await ask(url)
    assert SECRET not in str(raised.value)
    assert str(raised.value).startswith((f"HTTP {status} HTTP_{status} from", "the coordinator refused"))
    assert "\x1b" not in getattr(raised.value, "detail", "")  # kept aside, escaped, for tools that show it


async def test_a_4xx_is_a_refusal_and_a_413_says_too_large() -> None:
    async def too_large(_: web.Request) -> web.Response:
        return web.Response(status=413, text='{"error": "PAYLOAD_TOO_LARGE", "message": "body: over"}')

    async with endpoint(too_large) as url:
        with pytest.raises(RequestTooLargeError) as raised:
            await ask(url, "/v1/groups/g/expected-members")
    assert isinstance(raised.value, CoordinatorRefusedError)
    assert not isinstance(raised.value, CoordinatorUnavailableError)  # not "unreachable": retrying cannot help
    assert str(raised.value) == (
        "the coordinator refused POST /v1/groups/g/expected-members as too large (HTTP 413 PAYLOAD_TOO_LARGE)"
    )


async def test_a_declared_length_over_the_cap_is_refused_unread() -> None:
    stop = asyncio.Event()

    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": str(400 * 2**20)})
        await response.prepare(request)
        await response.write(b"{" + b" " * 1000)
        await stop.wait()  # the rest never comes: a client that waited for it would time out
        return response

    async with endpoint(huge) as url:
        with pytest.raises(ResponseTooLargeError) as raised:
            await asyncio.wait_for(ask(url), 10)
        stop.set()
    assert str(raised.value).startswith(f"the answer to POST /v1/groups/g/heartbeat is {400 * 2**20} bytes")
    assert f"{CAP}-byte cap (max_response_bytes)" in str(raised.value)


async def test_an_endless_answer_is_cut_off_at_the_cap() -> None:
    written = 0

    async def endless(request: web.Request) -> web.StreamResponse:
        nonlocal written
        response = web.StreamResponse()  # chunked: no length declared
        await response.prepare(request)
        for _ in range(100_000):  # 6 GiB if nobody stopped reading
            await response.write(b"x" * 65536)
            written += 65536
        return response

    async with endpoint(endless) as url:
        with pytest.raises(ResponseTooLargeError, match="over the client's 65536-byte cap"):
            await asyncio.wait_for(ask(url), 10)
    assert written < 64 * 2**20  # the client stopped reading long before: it held at most the cap and a chunk


async def test_a_compressed_answer_is_not_inflated() -> None:
    bomb = gzip.compress(b'{"error_code": 0, "error": "NONE", "padding": "' + b"a" * 50_000_000 + b'"}')

    async def compressed(_: web.Request) -> web.Response:
        return web.Response(body=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})

    async with endpoint(compressed) as url:
        with pytest.raises(MalformedResponseError, match="content-encoded"):
            await ask(url)


async def test_a_redirect_is_not_followed_and_the_token_stays_put() -> None:
    seen: list[str | None] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(text='{"error_code": 0, "error": "NONE"}', content_type="application/json")

    async with endpoint(elsewhere) as target:

        async def redirect(_: web.Request) -> web.Response:
            raise web.HTTPTemporaryRedirect(f"{target}/v1/groups/g/heartbeat")

        async with endpoint(redirect) as url:
            with pytest.raises(CoordinatorHttpError) as raised:
                await ask(url)
    assert raised.value.status == 307 and not isinstance(raised.value, CoordinatorRefusedError)
    assert seen == []


async def test_an_answer_that_is_not_http_is_unavailable_without_its_text() -> None:
    async with raw_endpoint(f"SPAM {SECRET}\r\n\r\n".encode()) as url:
        with pytest.raises(CoordinatorUnavailableError) as raised:
            await ask(url)
    assert SECRET not in str(raised.value) and "not well-formed HTTP" in str(raised.value)


async def test_a_malformed_200_does_not_quote_the_answer() -> None:
    async def wrong(_: web.Request) -> web.Response:
        return web.Response(text=f'{{"error_code": "{SECRET}"}}', content_type="application/json")

    async with endpoint(wrong) as url:
        with pytest.raises(MalformedResponseError) as raised:
            await ask(url)
    assert SECRET not in str(raised.value)


async def test_the_admin_client_has_the_cap_too() -> None:
    async def big_config(_: web.Request) -> web.Response:
        return web.Response(text='{"x": "' + "a" * 100_000 + '"}', content_type="application/json")

    async with endpoint(big_config) as url, CoordinatorAdmin(url, attempts=1, max_response_bytes=CAP) as admin:
        with pytest.raises(ResponseTooLargeError):
            await admin.config()
