"""The signal lab: the operator's real reconcile pass, over a history of pod deletes, evictions, crashes, rolls and
scalings, against a real coordinator (Berth's, on its manual clock) or a real Kafka-protocol broker, with what the
operator said recorded for the oracle (``signal_oracle``) to check against the coordinator's journal or the
broker's group.

What is real: ``FleetPass`` (admission, sizing, scaling, the status contributors) and every planner; the
coordinator's port (``ClientCoordinatorPort`` over the member library, or ``KafkaCoordinatorPort`` over
kafka-python); the operator's metrics (``OperatorMetrics``, read from its exposition); the coordinator or broker
and the members' protocol. What stands in: the StatefulSet, its pods and kubelet (``signal_fleet``), the status
subresource (a dict, merge-patched as the API server does), Events (a list), and the reconciler's glue (the journal's
pages handed to the fleet's memory before each pass, as ``FleetReconciler.poke_groups`` does).

A history (:class:`History`) is a fleet's settings and a list of steps; :meth:`Lab.run` plays it, then lets the
fleet come to rest (passes a session timeout apart until nothing is left to do), and returns the record
(:class:`Record`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from support.signal_fleet import SimFleet

from berth.operator.adapters.metrics import OperatorMetrics
from berth.operator.local.demo_support import InMemoryStatus
from berth.operator.planners.advice import AdviceReading
from berth.operator.planners.claims import NO_CLAIMS
from berth.operator.planners.coordinator_target import BerthTarget
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import CoordinatorBounds, GroupOwnerRef
from berth.operator.planners.restarts import GroupActivity
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.ports import CoordinatorPort, GroupRecords
from berth.operator.reconcile.context import PassContext, Ports, Settings
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.memory import FleetMemory
from berth.operator.spec.fleet import OperatorDefaults

NAMESPACE = "lab"
SESSION_MS = 10_000
#: The lab's tick: the kubelet, the controller and the members move this often (lab ms).
TICK_MS = 250
#: How a history that never came to rest is recorded among ``Record.failures``.
NEVER_RESTED = "never came to rest: "


# --------------------------------------------------------------------------------------------- a history


@dataclass(frozen=True, slots=True)
class Step:
    """One thing that happens: ``pass`` (the operator reconciles), ``wait`` (``ms`` of the lab's time), ``delete``,
    ``evict`` or ``crash`` (pod ``ordinal``; a crash lasts ``ms``), ``roll`` (``changed``: the new version
    subscribes differently), ``scale`` (to ``n`` replicas)."""

    kind: str
    n: int = 0
    ms: int = 0
    changed: bool = False

    def __str__(self) -> str:
        return {
            "pass": "pass",
            "wait": f"wait {self.ms} ms",
            "delete": f"delete pod {self.n}",
            "evict": f"evict pod {self.n}",
            "crash": f"crash pod {self.n} for {self.ms} ms",
            "roll": "roll" + (" (new subscription)" if self.changed else ""),
            "scale": f"scale to {self.n}",
        }[self.kind]


@dataclass(frozen=True, slots=True)
class History:
    replicas: int
    leave_on_scale_down: bool
    pre_register: bool
    ordered_ready: bool
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        flags = f"replicas {self.replicas}, leaveOnScaleDown {self.leave_on_scale_down}"
        flags += f", preRegister {self.pre_register}, {'OrderedReady' if self.ordered_ready else 'Parallel'}"
        return flags + ": " + "; ".join(str(step) for step in self.steps)


# ---------------------------------------------------------------------------------------- what is recorded


@dataclass(frozen=True, slots=True)
class Said:
    at_ms: int
    type: str
    reason: str
    message: str


#: The states of a group that has settled (a classic group preparing or completing a rebalance, or a consumer-protocol
#: group reconciling or assigning, has not).
SETTLED = frozenset({"Stable", "Empty", "Dead"})


@dataclass(frozen=True, slots=True)
class Look:
    """The coordinator's group as one description gave it: asked at ``asked_ms``, answered at ``answered_ms``."""

    asked_ms: int
    answered_ms: int
    state: str
    generation: int

    @property
    def settled(self) -> bool:
        return self.state in SETTLED


@dataclass
class Record:
    """What the lab saw: the Events, the status after every pass, the metrics at the end, the fleet's log, the spec's
    replicas over time, and the coordinator's truth (filled by the rig)."""

    fleet: str
    group: str
    history: History
    said: list[Said] = field(default_factory=list)
    statuses: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    replicas: list[tuple[int, int]] = field(default_factory=list)  # (since ms, spec.replicas)
    log: list[Any] = field(default_factory=list)
    truth: list[dict[str, Any]] = field(default_factory=list)  # the journal's events of the group (or the broker's)
    failures: list[str] = field(default_factory=list)  # passes that raised
    #: The truth was sampled from the broker's group (Kafka) rather than read from a journal: it names every change
    #: a pass could have seen, but the operator, which samples at its passes, may see fewer (the oracle's bounds).
    sampled: bool = False
    #: When the last pass began and ended (lab ms).
    last_pass: tuple[int, int] | None = None
    #: The broker's group as the rig described it every ``WATCH_MS``, the last description asked after the last pass
    #: (Kafka; empty where the truth is a journal).
    looks: list[Look] = field(default_factory=list)
    #: The broker's own group still rebalancing after the last pass (its state then), None when it had settled: then
    #: a fleet that never came to rest is the operator's doing.
    unsettled: str | None = None

    @property
    def status(self) -> dict[str, Any]:
        return self.statuses[-1][1] if self.statuses else {}


class Events:
    """An EventSink that keeps what was said with the lab's time."""

    def __init__(self, record: Record, now_ms: Callable[[], int]) -> None:
        self.record, self.now_ms = record, now_ms

    def info(self, reason: str, message: str) -> None:
        self.record.said.append(Said(self.now_ms(), "Normal", reason, message))

    def warning(self, reason: str, message: str) -> None:
        self.record.said.append(Said(self.now_ms(), "Warning", reason, message))

    def flush(self) -> None:
        """Nothing to post: each Event is kept as it is said (the API server's sink coalesces a pass's Events of one
        type at its flush; the oracle reads them one by one)."""


class InMemoryRecords:
    """GroupRecords in a dict: the first claim of a key wins, a release by another uid changes nothing."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], GroupOwnerRef] = {}

    async def owner(self, coordinator: str, group_id: str) -> GroupOwnerRef | None:
        return self.records.get((coordinator, group_id))

    async def claim(self, coordinator: str, group_id: str, owner: GroupOwnerRef) -> GroupOwnerRef:
        return self.records.setdefault((coordinator, group_id), owner)

    async def release(self, coordinator: str, group_id: str, owner_uid: str) -> None:
        recorded = self.records.get((coordinator, group_id))
        if recorded is not None and recorded.uid == owner_uid:
            del self.records[(coordinator, group_id)]


class NoAdvice:
    async def current(self) -> AdviceReading:
        return AdviceReading(None)


class OneCoordinator:
    def __init__(self, port: CoordinatorPort) -> None:
        self.port = port

    async def connect(self, endpoint: BerthTarget | KafkaConnection) -> CoordinatorPort:
        return self.port

    async def bounds_of(self, port: CoordinatorPort) -> CoordinatorBounds:
        return await port.get_config()


class Rig(Protocol):
    """What differs between coordinators: the clock, the members, the port, the operator's defaults, the journal's
    activity (Berth's) and the truth."""

    port: CoordinatorPort
    defaults: OperatorDefaults
    records: GroupRecords | None

    def now_ms(self) -> int: ...

    async def advance(self, ms: int) -> None: ...

    def members(self, group: str) -> Any: ...

    async def activity(self, group: str) -> GroupActivity: ...

    async def truth(self, record: Record) -> None: ...

    async def teardown(self, members: Any) -> None: ...

    def spec(self) -> dict[str, Any]: ...


# ----------------------------------------------------------------------------------------------- the lab


_UID = iter(range(1, 1 << 30))


class Lab:
    def __init__(self, rig: Rig, name: str, history: History) -> None:
        self.rig, self.history = rig, history
        self.group = name
        self.record = Record(name, name, history)
        self.members = rig.members(name)
        self.fleet = SimFleet(name, self.members, ordered_ready=history.ordered_ready)
        self.status = InMemoryStatus()
        self.metrics = OperatorMetrics()
        self.memory = FleetMemory()
        self.body: dict[str, Any] = {
            "apiVersion": "berth.dev/v1alpha1",
            "kind": "ConsumerFleet",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{next(_UID)}", "generation": 1},
            "spec": {
                "replicas": history.replicas,
                "groupId": name,
                "leaveOnScaleDown": history.leave_on_scale_down,
                "preRegister": history.pre_register,
                "podManagementPolicy": "OrderedReady" if history.ordered_ready else "Parallel",
                "rebalanceTimeoutMs": 10_000,
                "sessionTimeout": {"policy": "Fixed", "fixedMs": SESSION_MS},
                "template": {"spec": {"containers": [{"name": "consumer", "image": "consumer:1"}]}},
                **rig.spec(),
            },
        }
        events = Events(self.record, rig.now_ms)
        ports = Ports(
            status_for=lambda body: self.status,
            workload_for=lambda fleet: self.fleet,
            events_for=lambda body: events,
            coordinators=OneCoordinator(rig.port),
            advice=NoAdvice(),
            now=lambda: datetime.fromtimestamp(rig.now_ms() / 1000, UTC),
            metrics=self.metrics,
            records=rig.records,
        )
        self.context = PassContext(ports, Settings(rig.defaults, OperatorSessionBounds(1_000, 3_600_000)))
        self.record.replicas.append((rig.now_ms(), history.replicas))

    async def run(self) -> Record:
        try:
            for step in self.history.steps:
                await self.do(step)
            await self.come_to_rest()
            self.record.metrics = fleet_metrics(self.metrics.exposition().decode(), self.group)
            self.record.log = list(self.fleet.log)
            await self.rig.truth(self.record)
        finally:
            await self.rig.teardown(self.members)
        return self.record

    async def do(self, step: Step) -> None:
        fleet, now = self.fleet, self.rig.now_ms()
        fleet.tick(now)
        pod = f"{self.group}-{step.n}"
        if step.kind == "pass":
            await self.reconcile()
        elif step.kind == "wait":
            await self.wait(step.ms)
        elif step.kind == "delete":
            fleet.delete(pod)
        elif step.kind == "evict":
            fleet.evict(pod)
        elif step.kind == "crash":
            fleet.crash(pod, step.ms)
        elif step.kind == "roll":
            if step.changed:
                self.members.next_topics = ("orders", "audit")
            fleet.roll()
        elif step.kind == "scale":
            self.body["spec"]["replicas"] = step.n
            self.body["metadata"]["generation"] += 1
            self.record.replicas.append((now, step.n))

    async def wait(self, ms: int) -> None:
        left = ms
        while left > 0:
            move = min(TICK_MS, left)
            self.fleet.tick(self.rig.now_ms())
            await self.members.step(self.rig.now_ms())
            await self.members.settle()
            await self.rig.advance(move)
            await self.members.settle()
            left -= move
        self.fleet.tick(self.rig.now_ms())

    async def reconcile(self) -> Any:
        self.memory.activity = self.memory.activity + await self.rig.activity(self.group)
        body = {**self.body, "status": copy.deepcopy(self.status.status)}
        started = self.rig.now_ms()
        try:
            result = await FleetPass(self.context, body, NO_CLAIMS, self.memory).run()
        except Exception as error:  # a pass that fails is recorded: the oracle says whether it should have
            self.record.failures.append(f"{self.rig.now_ms()}: {type(error).__name__}: {error}")
            result = None
        self.record.last_pass = (started, self.rig.now_ms())
        self.record.statuses.append((self.rig.now_ms(), copy.deepcopy(self.status.status)))
        return result

    async def come_to_rest(self) -> None:
        """Passes a few seconds apart until the fleet has converged and nothing it counts is still open."""
        for _ in range(40):
            result = await self.reconcile()
            restarts = self.status.status.get("restarts") or {}
            last = self.status.status.get("lastScaleDown") or {}
            done = (
                result is not None
                and result.waiting is None
                and not restarts.get("ongoing")
                and not last.get("expiring")
                and _ready(self.status.status)
            )
            if done:
                return
            await self.wait(SESSION_MS // 2)
        self.record.failures.append(NEVER_RESTED + str(self.status.status.get("conditions")))


def _ready(status: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def fleet_metrics(text: str, fleet: str) -> dict[str, float]:
    """The operator's samples of ``fleet`` (in the lab's namespace), by family (and outcome for reconciles)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        matched = re.fullmatch(r"(\w+)\{(.*)\} (\S+)", line)
        if not matched:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', matched.group(2)))
        if labels.get("fleet") != fleet or labels.get("namespace") != NAMESPACE:
            continue
        key = matched.group(1) + (f":{labels['outcome']}" if "outcome" in labels else "")
        found[key] = float(matched.group(3))
    return found


Run = Callable[[History], Awaitable[Record]]
