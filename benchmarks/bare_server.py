"""The ceiling for an aiohttp front end: a handler that reads and parses the same JSON, answers a constant.

It runs on the event loop the coordinator runs on (``event_loop_factory``), so the ratio compares handlers only.

Run as its own process (``python -m benchmarks.bare_server``); prints ``listening on http://HOST:PORT``.
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web

from berth.coordinator.http.main import event_loop_factory

ANSWER = json.dumps({"error_code": 0, "error": "NONE"}).encode()


async def heartbeat(request: web.Request) -> web.Response:
    json.loads(await request.read())
    return web.Response(body=ANSWER, content_type="application/json")


async def main() -> None:
    app = web.Application()
    app.router.add_post("/v1/groups/{group_id}/heartbeat", heartbeat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    server = site._server
    assert server is not None
    port = next(iter(getattr(server, "sockets", []))).getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
