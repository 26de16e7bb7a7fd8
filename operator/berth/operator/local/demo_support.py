"""The pieces ``berth-demo`` is made of besides the scenarios: a tracker of what every member owns, and the
operator's own reconcile loop run on local ports.

:func:`local_context` is berth-demo's composition root: it builds the one loop's
:class:`~berth.operator.reconcile.context.PassContext` for local fleets: status in a dict per fleet
(:class:`InMemoryStatus`), Events as printed lines, the coordinator's bounds
and no advice. :func:`reconcile_until_converged` runs :class:`FleetPass` passes until the plan has nothing left
to wait for, exactly as the operator's change handler does, so the demo sizes, claims, scales and writes status
like the operator.
"""

from __future__ import annotations

import asyncio
import copy
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from berth.operator.adapters.advice_source import AdviceSource
from berth.operator.adapters.coordinators import Coordinators
from berth.operator.local.fleet import LocalFleet
from berth.operator.planners.claims import NO_CLAIMS
from berth.operator.planners.fleet_status import merge_patch
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.reconcile.context import PassContext, Ports, Settings
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.memory import FleetMemory
from berth.operator.spec.fleet import SESSION_MS_RANGE, Fleet, OperatorDefaults


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


class InMemoryStatus:
    """A :class:`~berth.operator.ports.StatusPort` on a dict: a JSON merge patch, as the API server applies it."""

    def __init__(self, status: dict[str, Any] | None = None) -> None:
        self.status: dict[str, Any] = status if status is not None else {}

    async def patch_status(self, patch: Mapping[str, Any]) -> Mapping[str, Any]:
        merged = merge_patch(self.status, patch)
        self.status.clear()
        self.status.update(copy.deepcopy(merged))
        return copy.deepcopy(self.status)


class PrintedEvents:
    """An :class:`~berth.operator.ports.EventSink` that says each Event as a line, at once."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say

    def info(self, reason: str, message: str) -> None:
        self.say(f"{reason}: {message}")

    def warning(self, reason: str, message: str) -> None:
        self.say(f"WARNING {reason}: {message}")

    def flush(self) -> None:
        """Nothing held: each line was said at once."""


@dataclass
class LocalFleets:
    """The demo's fleets: each one's body (spec and status) and its local workload, by name."""

    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    workloads: dict[str, LocalFleet] = field(default_factory=dict)
    statuses: dict[str, InMemoryStatus] = field(default_factory=dict)
    #: What the passes remember of each fleet (``reconcile.memory``).
    memories: dict[str, FleetMemory] = field(default_factory=dict)

    def add(self, body: dict[str, Any], workload: LocalFleet) -> None:
        name = body["metadata"]["name"]
        self.bodies[name] = body
        self.workloads[name] = workload
        self.statuses[name] = InMemoryStatus(body.setdefault("status", {}))

    def status_for(self, body: Mapping[str, Any]) -> InMemoryStatus:
        return self.statuses[body["metadata"]["name"]]

    def workload_for(self, fleet: Fleet) -> LocalFleet:
        return self.workloads[fleet.name]


def local_context(
    fleets: LocalFleets, coordinators: Coordinators, defaults: OperatorDefaults, say: Callable[[str], None]
) -> PassContext:
    """The one reconcile loop's context for local fleets (no Kubernetes, no advice, the operator's bounds)."""
    ports = Ports(
        status_for=fleets.status_for,
        workload_for=fleets.workload_for,
        events_for=lambda body: PrintedEvents(say),
        coordinators=coordinators,
        advice=AdviceSource(read_config_map_key=None, config_map=None, file=None, ttl_s=60.0),
        now=utc_now,
    )
    return PassContext(ports, Settings(defaults, OperatorSessionBounds(SESSION_MS_RANGE[0], SESSION_MS_RANGE[1])))


async def reconcile_until_converged(
    context: PassContext,
    fleets: LocalFleets,
    name: str,
    *,
    replicas: int | None = None,
    poll_s: float = 0.05,
    timeout_s: float = 120.0,
) -> None:
    """Set the fleet's ``spec.replicas`` (when given) and run passes until nothing is left to wait for."""
    body = fleets.bodies[name]
    if replicas is not None:
        body["spec"]["replicas"] = replicas
        body["metadata"]["generation"] = int(body["metadata"].get("generation") or 1) + 1
    deadline = time.monotonic() + timeout_s
    while True:
        body["status"] = fleets.statuses[name].status
        memory = fleets.memories.setdefault(name, FleetMemory())
        result = await FleetPass(context, body, NO_CLAIMS, memory).run()
        if result.refused:
            reason = next(
                (c.get("message") for c in body["status"].get("conditions", []) if c.get("type") == "SpecValid"), ""
            )
            raise RuntimeError(f"fleet {name} was refused: {reason}")
        if result.waiting is None:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"fleet {name} did not converge: {result.waiting}")
        await asyncio.sleep(poll_s)
