"""``LocalFleet``: a fleet of member processes on this machine, behind the operator's ``WorkloadPort``.

It plays the StatefulSet's part for ``berth-demo`` and benchmarks: members are named
``<fleet>-<ordinal>``, get the environment the operator's planner gives pod ``<fleet>-<ordinal>``, start in
ordinal order when it grows, and stop highest ordinal first (SIGTERM, like a pod's container) when it shrinks.
A member counts as existing until its process has exited, so the scaling planner waits for the processes to be
gone before it sends the batch leave, exactly as it waits for pods on Kubernetes. Each member's JSON lines
(``local_member``) are handed to ``on_event``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any

from berth.operator.local.member import ENV_LOCAL_NAME
from berth.operator.planners.instances import instance_id
from berth.operator.planners.manifest_hash import planned_hash
from berth.operator.planners.statefulset import PlannedWorkload
from berth.operator.ports import Applied, ApplyResult, WorkloadObservation, WorkloadView

EventCallback = Callable[[str, dict[str, Any]], None]
INSTANCE_ID_VARIABLE = "BERTH_GROUP_INSTANCE_ID"


class LocalFleet:
    def __init__(
        self,
        fleet_name: str,
        *,
        on_event: EventCallback | None = None,
        static: bool = True,
        extra_env: Mapping[str, str] | None = None,
        command: tuple[str, ...] = (sys.executable, "-m", "berth.operator.local.member"),
    ) -> None:
        self.fleet_name = fleet_name
        self.static = static
        self._on_event = on_event or (lambda name, event: None)
        self._extra_env = dict(extra_env or {})
        self._command = command
        self._planned: PlannedWorkload | None = None
        self._applied_hash: str | None = None
        self._replicas: int | None = None
        self._processes: dict[str, asyncio.subprocess.Process] = {}
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._ready: set[str] = set()
        self._exited = asyncio.Condition()
        #: Set by whoever restarts the members one by one (a local fleet does not roll by itself): observed as a
        #: rollout in progress, as a StatefulSet's would be.
        self.rolling = False

    # ------------------------------------------------------------------------------------------ WorkloadPort

    async def apply(self, planned: PlannedWorkload, *, hold: bool = False) -> ApplyResult:
        """Members started from now on get ``planned``'s environment; running members keep theirs (a local
        fleet does not roll, so nothing is held). The first apply sets the size to ``planned.replicas`` (0 from
        the reconcile pass)."""
        wanted = planned_hash(planned.statefulset)
        before, self._planned, self._applied_hash = self._applied_hash, planned, wanted
        if self._replicas is None:
            await self.scale(planned.replicas)
        if before is None:
            return ApplyResult(Applied.CREATED)
        return ApplyResult(Applied.UNCHANGED if before == wanted else Applied.UPDATED)

    async def scale(self, replicas: int) -> None:
        self._replicas = replicas
        for ordinal in range(replicas):
            name = instance_id(self.fleet_name, ordinal)
            if name not in self._processes:
                await self.start_member(name)
        for name in sorted(self._processes, key=self._ordinal, reverse=True):
            if self._ordinal(name) >= replicas:
                self.stop_member(name)

    async def observe(self, *, fresh: bool = False) -> WorkloadView:
        existing = frozenset(self._processes)
        stopping = {name for name in existing if self._ordinal(name) >= (self._replicas or 0)}
        return WorkloadView(
            WorkloadObservation(
                replicas=self._replicas, settled=True, existing=existing, ready=len(self._ready & existing)
            ),
            self._applied_hash,
            running=len(existing - stopping),
            rolling=self.rolling,
        )

    # --------------------------------------------------------------------------------------------- members

    async def start_member(self, name: str) -> None:
        if self._planned is None:
            raise RuntimeError("apply() the planned workload before starting members")
        env = {**os.environ, **self._planned.environment_for(name), **self._extra_env, ENV_LOCAL_NAME: name}
        if not self.static:
            env.pop(INSTANCE_ID_VARIABLE, None)
        process = await asyncio.create_subprocess_exec(
            *self._command, env=env, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL
        )
        self._processes[name] = process
        self._readers[name] = asyncio.create_task(self._read(name, process))

    def stop_member(self, name: str) -> None:
        """SIGTERM, like a pod being deleted; the member counts as existing until its process exits."""
        process = self._processes.get(name)
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)

    def _kill(self, name: str) -> None:
        process = self._processes.get(name)
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()

    async def restart_member(self, name: str) -> None:
        """Stop a member, wait for its process to exit, and start it again under the same name."""
        self.stop_member(name)
        await self.wait_gone({name})
        await self.start_member(name)

    async def wait_gone(self, names: set[str]) -> None:
        async with self._exited:
            await self._exited.wait_for(lambda: not (names & set(self._processes)))

    async def close(self, *, kill: bool = False) -> None:
        """Stop every member: SIGTERM, as a pod's deletion does, or SIGKILL (``kill``) when there is nothing left for
        them to say goodbye to (their coordinator is gone); either way, killed after 20 s."""
        for name in list(self._processes):
            if kill:
                self._kill(name)
            else:
                self.stop_member(name)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wait_gone(set(self._processes)), 20)
        for process in self._processes.values():
            with contextlib.suppress(ProcessLookupError):
                process.kill()

    async def _read(self, name: str, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        async for raw in process.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if event.get("event") == "assigned":
                self._ready.add(name)
            self._on_event(name, event)
        await process.wait()
        async with self._exited:
            if self._processes.get(name) is process:
                del self._processes[name]
                self._ready.discard(name)
            self._exited.notify_all()
        self._on_event(name, {"event": "exited", "name": name, "returncode": process.returncode})

    def _ordinal(self, name: str) -> int:
        return int(name.rsplit("-", 1)[1])
