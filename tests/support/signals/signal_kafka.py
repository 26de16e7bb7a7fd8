"""One fleet's passes over a real Kafka-protocol broker at the wall clock's time: the operator's real pass
(``FleetPass``, its status contributors, Events and gauges) over the real Kafka port, the fleet's StatefulSet and
pods played by ``signal_fleet`` and their processes by whatever real consumers the test hands in (``Members``).

What stands in, as in the signal lab (``signal_lab``): the StatefulSet and its kubelet, the status subresource (a
dict), Events (a list), the ownership records (a dict). Time is the wall clock's (the broker has no manual clock):
:meth:`KafkaPasses.until` passes half a second apart until an observable state holds, and every pass's time and the
status it left are kept (:attr:`KafkaPasses.passes`: when each began and ended, the pass reading the clock in
between) so a test can check *when* a condition turned, not only that it did. :class:`PollingConsumers` plays the
processes: one real consumer per started pod, polling in a thread of its own while told to (a test stops one polling
to make it silent).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from support.signal_fleet import Members, SimFleet
from support.signal_lab import NAMESPACE, Events, InMemoryRecords, NoAdvice, OneCoordinator, Record, fleet_metrics

from berth.operator.adapters.metrics import OperatorMetrics
from berth.operator.local.demo_support import InMemoryStatus
from berth.operator.planners.claims import NO_CLAIMS
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.ports import CoordinatorPort
from berth.operator.reconcile.context import PassContext, Ports, Settings
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.memory import FleetMemory
from berth.operator.spec.fleet import KafkaDefaults, OperatorDefaults


def now_ms() -> int:
    return int(time.time() * 1000)


class Client(Protocol):
    """A real Kafka consumer as a pod's process uses it: poll, and close as a static member does (no leave)."""

    def poll(self) -> None: ...

    def close(self) -> None: ...


@dataclass
class Polling:
    """One pod's process: its consumer polling in a thread while ``polling`` is set. An error a poll raises is kept
    (``errors``, which a test's failure prints) and the consumer polls again half a second later, as a program that
    logs it and goes on does; a thread that died of it would leave a member missing with nothing said."""

    client: Client
    env: Mapping[str, str] = field(default_factory=dict)  # what it was started with: a restart starts it so again
    polling: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        while not self.stop.is_set():
            if self.polling.is_set():
                try:
                    self.client.poll()
                except Exception as error:  # kept and shown; the consumer goes on
                    self.errors.append(f"{time.strftime('%H:%M:%S')} {type(error).__name__}: {error}")
                    self.stop.wait(0.5)
            else:
                time.sleep(0.05)
        self.client.close()


class PollingConsumers:
    """The fleet's processes (``signal_fleet.Members``): ``consumer_for(instance_id, env)`` makes the consumer of a
    started pod from the environment the operator planned for it (as the example programs do)."""

    def __init__(self, consumer_for: Callable[[str, Mapping[str, str]], Client]) -> None:
        self.consumer_for = consumer_for
        self.live: dict[str, Polling] = {}
        #: What happened to the processes that a test's failure should show: errors, restarts, a stop that hung.
        self.said: list[str] = []

    def start(self, instance_id: str, env: Mapping[str, str]) -> None:
        if instance_id in self.live:
            self.said.append(f"{time.strftime('%H:%M:%S')} {instance_id} started again")
        self.stop(instance_id)
        process = Polling(self.consumer_for(instance_id, env), dict(env))
        process.polling.set()
        process.thread = threading.Thread(target=process.run, daemon=True, name=f"consumer-{instance_id}")
        process.thread.start()
        self.live[instance_id] = process

    def restart(self, instance_id: str, why: str) -> None:
        """Replace the process of ``instance_id`` by a new one started as it was (a container restarted: a static
        member rejoining under its instance id), saying why."""
        env = self.live[instance_id].env
        self.said.append(f"{time.strftime('%H:%M:%S')} {instance_id} restarted: {why}")
        self.stop(instance_id)  # said once, as a restart, not again as a second start
        self.start(instance_id, env)

    def stop(self, instance_id: str) -> None:
        process = self.live.pop(instance_id, None)
        if process is not None:
            process.stop.set()
            self.said += [f"{instance_id}: {error}" for error in process.errors]
            if process.thread is not None:
                process.thread.join(timeout=10)
                if process.thread.is_alive():
                    self.said.append(f"{instance_id}: its consumer did not stop within 10 s and still runs")

    def close(self) -> None:
        for instance_id in list(self.live):
            self.stop(instance_id)

    def report(self) -> list[str]:
        """What :attr:`said` holds, and the errors of the consumers still running."""
        return self.said + [f"{i}: {error}" for i, process in self.live.items() for error in process.errors]


@dataclass(frozen=True, slots=True)
class Passed:
    """One pass: when it began and ended (the wall clock), and the status it left."""

    began: datetime
    ended: datetime
    status: dict[str, Any]


class KafkaPasses:
    """One fleet (``spec``: its fields beyond the name, group and replicas) and its passes on ``port``."""

    def __init__(
        self,
        port: CoordinatorPort,
        bootstrap: str,
        name: str,
        members: Members,
        replicas: int,
        spec: Mapping[str, Any],
        *,
        stuck_group: timedelta = Settings.stuck_group,
    ) -> None:
        self.port, self.group = port, name
        self.fleet = SimFleet(name, members, ordered_ready=False)
        self.status = InMemoryStatus()
        self.metrics = OperatorMetrics()
        self.record = Record(name, name, None)  # type: ignore[arg-type]  # only its Events are kept
        self.records = InMemoryRecords()
        self.passes: list[Passed] = []
        self.body: dict[str, Any] = {
            "apiVersion": "berth.dev/v1alpha1",
            "kind": "ConsumerFleet",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "generation": 1},
            "spec": {
                "replicas": replicas,
                "groupId": name,
                "podManagementPolicy": "Parallel",
                "template": {"spec": {"containers": [{"name": "consumer", "image": "consumer:1"}]}},
                **spec,
            },
        }
        events = Events(self.record, now_ms)
        ports = Ports(
            status_for=lambda body: self.status,
            workload_for=lambda fleet: self.fleet,
            events_for=lambda body: events,
            coordinators=OneCoordinator(port),
            advice=NoAdvice(),
            now=lambda: datetime.now(UTC),
            metrics=self.metrics,
            records=self.records,
        )
        defaults = OperatorDefaults(kafka=KafkaDefaults(bootstrap))
        settings = replace(Settings(defaults, OperatorSessionBounds(1_000, 3_600_000)), stuck_group=stuck_group)
        self.context = PassContext(ports, settings)
        self.memory = FleetMemory()

    @property
    def players(self) -> PollingConsumers:
        """The pods' processes, where the test handed in :class:`PollingConsumers`."""
        members = self.fleet.members
        assert isinstance(members, PollingConsumers)
        return members

    def scale(self, replicas: int) -> None:
        self.body["spec"]["replicas"] = replicas
        self.body["metadata"]["generation"] += 1

    async def run(self) -> None:
        """One pass, the kubelet and the controller moved to now first."""
        self.fleet.tick(now_ms())
        body = {**self.body, "status": dict(self.status.status)}
        began = datetime.now(UTC)
        await FleetPass(self.context, body, NO_CLAIMS, self.memory).run()
        self.passes.append(Passed(began, datetime.now(UTC), dict(self.status.status)))

    async def until(self, what: str, ok: Callable[[], Any], timeout_s: float = 60) -> None:
        """Passes half a second apart until ``ok()`` (awaited when it returns an awaitable) holds after one."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            await self.run()
            held = ok()
            if asyncio.iscoroutine(held):
                held = await held
            if held:
                return
            await asyncio.sleep(0.5)
        members = self.fleet.members
        said = members.report() if isinstance(members, PollingConsumers) else []
        raise AssertionError(
            f"{what} not seen within {timeout_s:.0f} s: {self.status.status.get('conditions')}; the processes: {said}"
        )

    def condition(self, kind: str, status: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        conditions = (status if status is not None else self.status.status).get("conditions") or ()
        return next((c for c in conditions if c["type"] == kind), {})

    def warnings(self, reason: str) -> list[str]:
        return [s.message for s in self.record.said if s.type == "Warning" and s.reason == reason]

    def episodes(self, kind: str) -> int:
        """How many times a pass turned ``kind`` True (from anything else): one Warning is owed for each. On a busy
        machine a group may also be stuck while it forms or rejoins, for longer than a short threshold."""
        said = [self.condition(kind, passed.status).get("status") == "True" for passed in self.passes]
        return sum(1 for before, now in zip([False, *said], said, strict=False) if now and not before)

    def gauges(self) -> dict[str, float]:
        return fleet_metrics(self.metrics.exposition().decode(), self.group)

    def ready(self, replicas: int) -> bool:
        pods = self.fleet.pods.values()
        return len(self.fleet.pods) == replicas and all(p.ready and p.deleted_ms is None for p in pods)

    def turned_on_time(self, kind: str, since: datetime, threshold: timedelta, first: int = 0) -> None:
        """Every pass from the ``first``-th said ``kind`` True exactly when ``since`` was ``threshold`` ago or more,
        by the clock the pass read: True only if it ended at ``since + threshold`` or later, False only if it began
        before. (A pass that begins just before the threshold may read the clock after it: on a busy machine a pass
        takes a while.)"""
        due = since + threshold
        for passed in self.passes[first:]:
            said = self.condition(kind, passed.status).get("status")
            assert said in ("True", "False"), (kind, passed, said)
            assert passed.ended >= due if said == "True" else passed.began < due, (kind, passed, since, said)
