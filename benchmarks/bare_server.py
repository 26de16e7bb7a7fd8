"""The ceiling for an aiohttp front end: a handler that reads and parses the same JSON, answers a constant.

Two flavours, both on the event loop the coordinator runs on (``event_loop_factory``), so a ratio compares
handlers only:

- ``python -m benchmarks.bare_server``: a ``web.Application`` route (aiohttp's usual shape; row 1's 100 %);
- ``python -m benchmarks.bare_server --low-level``: the same handler on aiohttp's low-level ``web.Server``.

Each prints ``listening on http://HOST:PORT`` and exits on SIGTERM (so a profiler sees a normal exit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from aiohttp import web

from berth.coordinator.command.main import event_loop_factory

ANSWER = json.dumps({"error_code": 0, "error": "NONE"}).encode()


async def heartbeat(request: web.BaseRequest) -> web.Response:
    json.loads(await request.read())
    return web.Response(body=ANSWER, content_type="application/json")


async def main(low_level: bool) -> None:
    if low_level:
        runner: web.BaseRunner = web.ServerRunner(web.Server(heartbeat), access_log=None)
    else:
        app = web.Application()
        app.router.add_post("/v1/groups/{group_id}/heartbeat", heartbeat)
        runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    port = runner.addresses[0][1]
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bare_server")
    parser.add_argument("--low-level", action="store_true", help="aiohttp's low-level web.Server, no Application")
    args = parser.parse_args()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(main(args.low_level))
    except KeyboardInterrupt:
        sys.exit(0)
