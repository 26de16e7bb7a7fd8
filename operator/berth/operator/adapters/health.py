"""``GET /healthz`` on ``--liveness-port``: the kubelet's liveness probe, answered by leaders and standbys alike.

Rules: 200 ``ok`` while the operator's event loop answers (a standby waiting on the Lease is healthy: restarting it
would gain nothing); nothing is served when the port is 0. The operator serves it itself rather than through Kopf,
which runs only on the leader. Every answer closes its connection (the kubelet's probe opens one per probe anyway): an
idle kept-alive connection is a task on the event loop, and at a stop Kopf waits 5 s for every task it finds there.
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
        response = web.Response(text="ok")
        response.force_close()
        return response

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        yield
    finally:
        await runner.cleanup()
