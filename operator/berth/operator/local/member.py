"""A member process for local fleets (``berth-demo``, end-to-end tests): ``python -m berth.operator.local.member``.

Configured exactly like a pod, by the ``BERTH_*`` environment (``MemberConfig.from_env``), plus ``BERTH_LOCAL_NAME``
(the slot name, ``<fleet>-<ordinal>``, also for dynamic members that have no instance id). It prints one JSON line
per event on stdout for whoever runs it: ``{"event": "assigned", "name", "generation", "member_id", "leader",
"partitions": ["topic:p", ...], "t"}`` after every rebalance, ``{"event": "fatal", "error"}`` before exiting 3.
SIGTERM stops it like a pod's container: a static member does not leave (KIP-345), a dynamic one does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

from berth.coordinator.client import AssignmentChange, BerthClientError, GroupMember, MemberConfig

ENV_LOCAL_NAME = "BERTH_LOCAL_NAME"


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event, separators=(",", ":")), flush=True)


async def run() -> int:
    config = MemberConfig.from_env()
    name = os.environ.get(ENV_LOCAL_NAME) or config.group_instance_id or "member"
    member = GroupMember(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def report() -> None:
        change: AssignmentChange
        async for change in member.assignments():
            emit(
                {
                    "event": "assigned",
                    "name": name,
                    "generation": change.generation_id,
                    "member_id": member.member_id,
                    "leader": change.is_leader,
                    "partitions": sorted(f"{topic}:{partition}" for topic, partition in change.partitions),
                    "t": time.time(),
                }
            )

    await member.start()
    reporter = asyncio.create_task(report())
    stopped = asyncio.create_task(stop.wait())
    running = asyncio.create_task(member.run())
    await asyncio.wait({stopped, running}, return_when=asyncio.FIRST_COMPLETED)
    reporter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reporter
    if running.done() and running.exception() is not None:
        emit({"event": "fatal", "name": name, "error": str(running.exception())})
        await member.close()
        return 3
    await member.close()
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError, BerthClientError):
        await running
    return 0


def main() -> int:
    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
