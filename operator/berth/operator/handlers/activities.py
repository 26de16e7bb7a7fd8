"""Kopf activity handlers: how the operator logs in to the Kubernetes API, and a clean stop.

Rules: Kopf gets the very identity the operator's own client uses (``kube.identity``), and asks for it again
whenever the API answers 401, which re-reads a rotated service-account token. At cleanup, timers Kopf left behind
are stopped (see :func:`register_activities`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from berth.operator.kube.identity import KubeIdentity, connection_info


def register_activities(registry: kopf.OperatorRegistry, identity: KubeIdentity, *, timer_ids: tuple[str, ...]) -> None:
    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(identity)

    @kopf.on.cleanup(registry=registry)
    async def stop_orphaned_timers(**_: Any) -> None:
        # Kopf (1.45) can respawn a fleet's timer from a watch event that arrives while it stops, after the task that
        # stops timers is gone; it then waits 5 s for that "hung" timer before cancelling it. Cleanup runs once
        # every watcher has stopped, so nothing can respawn a timer after this. Kopf names a timer's task
        # "runner of <handler id>".
        names = {f"runner of {timer_id}" for timer_id in timer_ids}
        current = asyncio.current_task()
        orphans = [task for task in asyncio.all_tasks() if task is not current and task.get_name() in names]
        for task in orphans:
            task.cancel()
        await asyncio.gather(*orphans, return_exceptions=True)
