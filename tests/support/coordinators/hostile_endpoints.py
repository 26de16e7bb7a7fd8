"""Loopback listeners that play a hostile or broken coordinator: an aiohttp handler of the test's choosing
(``endpoint``), or raw bytes that need not be HTTP (``raw_endpoint``). Shared by the member library's, the
operator adapter's and the operator's hostile-answer tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def endpoint(handler: Handler, client_max_size: int = 1024**2) -> AsyncIterator[str]:
    """``handler`` answers every method and path; yields the base URL."""
    app = web.Application(client_max_size=client_max_size)
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def raw_endpoint(answer: bytes) -> AsyncIterator[str]:
    """Answers any request with ``answer``, byte for byte (it need not be HTTP); yields the base URL."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
