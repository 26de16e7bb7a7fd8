"""The ceiling for an aiohttp front end: a handler that reads and parses the same JSON, answers a constant.

Run as its own process (``python -m benchmarks.bare_server``); prints ``listening on http://HOST:PORT``.
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web

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
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
