"""``GET /healthz`` on ``--liveness-port``: the kubelet's liveness probe, answered by leaders and standbys alike.

Rules: 200 ``ok`` while the operator's event loop answers (a standby waiting on the Lease is healthy: restarting it
would gain nothing); nothing is served when the port is 0. The operator serves it itself rather than through Kopf,
which runs only on the leader.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def serving_health(port: int, host: str = "0.0.0.0") -> AsyncIterator[None]:
    if not port:
        yield
        return

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        yield
    finally:
        await runner.cleanup()
