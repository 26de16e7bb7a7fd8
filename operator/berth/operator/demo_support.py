"""The pieces ``berth-demo`` is made of: an embedded coordinator process, a tracker of what every member owns,
and the reconcile loop that scales a local fleet with the operator's own planner and driver.

The embedded coordinator is the member library's ``CoordinatorProcess``. The loop is the operator's, minus
Kubernetes: observe the workload, plan with ``plan_scaling``, execute with ``execute_plan``, repeat until the
plan is done. Status lives in a dict instead of a ConsumerFleet.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from berth.operator.driver import execute_plan
from berth.operator.local_fleet import LocalFleet
from berth.operator.planners.scaling import ScalingObservation, ScalingStatus, plan_scaling
from berth.operator.ports import CoordinatorPort


class Tracker:
    """What each member last said it owns (``local_member`` events), when members exited, and how many times a
    partition changed owner (``moves``: a restarted static member getting its own partitions back is no move)."""

    def __init__(self) -> None:
        self.assigned: dict[str, dict[str, Any]] = {}
        self.exited_at: dict[str, float] = {}
        self.owner: dict[str, str] = {}
        self.moves = 0
        self._changed = asyncio.Condition()

    def on_event(self, name: str, event: dict[str, Any]) -> None:
        if event.get("event") == "assigned":
            self.assigned[name] = event
            for partition in event["partitions"]:
                if self.owner.get(partition, name) != name:
                    self.moves += 1
                self.owner[partition] = name
        elif event.get("event") == "exited":
            self.assigned.pop(name, None)
            self.exited_at[name] = time.monotonic()
        elif event.get("event") == "fatal":
            print(f"  ! {name}: {event.get('error')}", file=sys.stderr)
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def until(self, predicate: Callable[[], bool], what: str, timeout_s: float = 90.0) -> None:
        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        try:
            await asyncio.wait_for(wait(), timeout_s)
        except TimeoutError:
            raise TimeoutError(f"gave up after {timeout_s:.0f} s waiting for {what}") from None

    def owners(self, names: set[str]) -> dict[str, str]:
        """partition -> member, over ``names``' latest assignments."""
        return {p: name for name in sorted(names) for p in self.assigned.get(name, {}).get("partitions", [])}

    def covers(self, names: set[str], partitions: set[str]) -> bool:
        """Every partition owned exactly once by ``names``, all at one generation."""
        if not all(name in self.assigned for name in names):
            return False
        generations = {self.assigned[name]["generation"] for name in names}
        owned = [p for name in names for p in self.assigned[name]["partitions"]]
        return len(generations) == 1 and len(owned) == len(partitions) and set(owned) == partitions


def utc_now() -> datetime:
    return datetime.now(tz=UTC)


async def reconcile(
    fleet_name: str,
    group_id: str,
    desired: int,
    workload: LocalFleet,
    coordinator: CoordinatorPort,
    status: dict[str, Any],
    *,
    say: Callable[[str], None],
    poll_s: float = 0.05,
    timeout_s: float = 120.0,
) -> None:
    """Drive the fleet to ``desired`` members exactly as the operator would, one plan at a time."""
    deadline = time.monotonic() + timeout_s
    last_wait = ""

    class Events:
        def info(self, reason: str, message: str) -> None:
            say(f"{reason}: {message}")

        def warning(self, reason: str, message: str) -> None:
            say(f"WARNING {reason}: {message}")

    async def patch_status(patch: Mapping[str, Any]) -> None:
        status.update(patch)

    while True:
        observed = await workload.observe()
        group = await coordinator.describe(group_id)
        plan = plan_scaling(
            ScalingObservation(
                fleet_name=fleet_name,
                desired_replicas=desired,
                workload_replicas=observed.replicas,
                existing_pods=observed.existing,
                workload_settled=observed.settled,
                status=ScalingStatus.from_status(status),
                group_members=group.static_instance_ids(),
            ),
            now=utc_now(),
        )
        await execute_plan(
            plan,
            group_id=group_id,
            workload=workload,
            coordinator=coordinator,
            patch_status=patch_status,
            events=Events(),
            now=utc_now,
        )
        if plan.done:
            return
        if plan.waiting != last_wait and plan.waiting:
            say(plan.waiting)
            last_wait = plan.waiting
        if time.monotonic() > deadline:
            raise TimeoutError(f"scaling to {desired} did not converge: {plan.waiting}")
        await asyncio.sleep(poll_s)
