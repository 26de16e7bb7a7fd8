"""Stuck-group detection on KIP-848 consumer-protocol groups (issue 30, "What to build 3"): the operator's real pass
(``FleetPass``, with the ``stuck`` contributor, its Events and its gauges) over the real Kafka port, against
``kfake-kip848`` with short group bounds, the fleet's pods played by ``signal_fleet`` and their processes by real
confluent-kafka consumers (``group.protocol=consumer``, configured from the environment the operator planned for each
pod, as the example program is), each polling in a thread of its own.

- A consumer that stops polling (its pod Ready, its process alive): librdkafka leaves the group once
  ``max.poll.interval.ms`` has passed (the fleet's ``rebalanceTimeoutMs``), the broker expires the static member
  after the group's session timeout and the survivors take its partitions. Its Ready pod owns nothing while each
  survivor owns three: ``GroupStuck`` True (``ReadyPodsIdle``, naming it) exactly once it has been idle for the
  threshold, one Warning, the gauges; polling again, it rejoins and all of it clears.
- A fleet larger than its partition count (4 pods, 2 partitions): two Ready pods own nothing while each busy one owns
  one partition — never stuck.

Each test has a broker of its own: kfake's consumer-protocol assignor hands a member the partitions of every topic on
the broker (docs/kafka.md, "What differs on kfake").
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata, TopicPartition
from support.kafka_broker import HOW_TO_GET_KIP848, KafkaBroker, find_kfake
from support.kafka_fixtures import create_topic
from support.kube_fixtures import unavailable
from support.signal_fleet import SimFleet
from support.signal_lab import Events, InMemoryRecords, NoAdvice, OneCoordinator, Record, fleet_metrics

from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.adapters.metrics import OperatorMetrics
from berth.operator.local.demo_support import InMemoryStatus
from berth.operator.planners.claims import NO_CLAIMS
from berth.operator.planners.conditions import parse_time
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import GroupDescription, GroupProtocol
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.reconcile.context import PassContext, Ports, Settings
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.memory import FleetMemory
from berth.operator.spec.fleet import KafkaDefaults, OperatorDefaults

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

THRESHOLD = timedelta(seconds=3)
#: The group's session timeout (the operator sets it as the group's config) and the consumers' max.poll.interval.ms.
SESSION_MS = 6_000
MAX_POLL_MS = 3_000
#: The broker's bounds for consumer-protocol groups, low enough for those (Kafka's minimums are 45 s and 5 s).
BROKER = ("group.consumer.min.session.timeout.ms=5000", "group.consumer.min.heartbeat.interval.ms=1000")
NAMESPACE = "lab"  # the signal lab's, which ``fleet_metrics`` reads


@pytest.fixture
def broker() -> Iterator[str]:
    """A kfake-kip848 of this test's own, with short consumer-group bounds."""
    binary = find_kfake(kip848=True)
    if binary is None:
        unavailable(HOW_TO_GET_KIP848)
    assert binary is not None
    workdir = Path(tempfile.mkdtemp(prefix="berth-kfake-stuck-"))
    process = KafkaBroker(binary, workdir / "kfake.log", configs=BROKER).start()
    try:
        yield process.bootstrap
    finally:
        process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
async def port(broker: str) -> AsyncIterator[KafkaCoordinatorPort]:
    port = KafkaCoordinatorPort(KafkaConnection(broker))
    yield port
    await port.close()


@dataclass
class Polling:
    """One pod's process: a confluent-kafka consumer polling in a thread while ``polling`` is set."""

    consumer: Consumer
    polling: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            if self.polling.is_set():
                self.consumer.poll(0.2)
            else:
                time.sleep(0.05)
        self.consumer.close()  # a static member's close: epoch -2, no leave


class Consumers:
    """The fleet's processes (``signal_fleet.Members``): a consumer per started pod, configured from its environment
    as ``deploy/examples/consumers/confluent_kafka_consumer.py`` is."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.live: dict[str, Polling] = {}

    def start(self, instance_id: str, env: Mapping[str, str]) -> None:
        self.stop(instance_id)
        consumer = Consumer(
            {
                "bootstrap.servers": env["BERTH_KAFKA_BOOTSTRAP_SERVERS"],
                "group.id": env["BERTH_GROUP_ID"],
                "group.protocol": env["BERTH_KAFKA_GROUP_PROTOCOL"],
                "group.instance.id": instance_id,
                "max.poll.interval.ms": int(env["BERTH_REBALANCE_TIMEOUT_MS"]),
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([self.topic])
        process = Polling(consumer)
        process.polling.set()
        process.thread = threading.Thread(target=process.run, daemon=True, name=f"consumer-{instance_id}")
        process.thread.start()
        self.live[instance_id] = process

    def stop(self, instance_id: str) -> None:
        process = self.live.pop(instance_id, None)
        if process is not None:
            process.stop.set()
            if process.thread is not None:
                process.thread.join(timeout=10)

    def close(self) -> None:
        for instance_id in list(self.live):
            self.stop(instance_id)


class Stage:
    """One consumer-protocol fleet, its passes on the real Kafka port at the wall clock's time."""

    def __init__(self, port: KafkaCoordinatorPort, bootstrap: str, name: str, topic: str, replicas: int) -> None:
        self.port, self.group = port, name
        self.consumers = Consumers(topic)
        self.fleet = SimFleet(name, self.consumers, ordered_ready=False)
        self.status = InMemoryStatus()
        self.metrics = OperatorMetrics()
        self.record = Record(name, name, None)  # type: ignore[arg-type]  # only its Events are kept
        self.passes: list[tuple[datetime, dict[str, Any]]] = []  # each pass's time and the status it left
        self.body: dict[str, Any] = {
            "apiVersion": "berth.dev/v1alpha1",
            "kind": "ConsumerFleet",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "generation": 1},
            "spec": {
                "replicas": replicas,
                "groupId": name,
                "coordinator": {"kafka": {"groupProtocol": "consumer"}},
                "podManagementPolicy": "Parallel",
                "rebalanceTimeoutMs": MAX_POLL_MS,
                "sessionTimeout": {"policy": "Fixed", "fixedMs": SESSION_MS},
                "template": {"spec": {"containers": [{"name": "consumer", "image": "consumer:1"}]}},
            },
        }
        events = Events(self.record, _now_ms)
        ports = Ports(
            status_for=lambda body: self.status,
            workload_for=lambda fleet: self.fleet,
            events_for=lambda body: events,
            coordinators=OneCoordinator(port),
            advice=NoAdvice(),
            now=lambda: datetime.now(UTC),
            metrics=self.metrics,
            records=InMemoryRecords(),
        )
        defaults = OperatorDefaults(kafka=KafkaDefaults(bootstrap))
        settings = replace(Settings(defaults, OperatorSessionBounds(1_000, 3_600_000)), stuck_group=THRESHOLD)
        self.context = PassContext(ports, settings)
        self.memory = FleetMemory()

    async def run(self) -> None:
        """One pass, the kubelet and controller moved to now first."""
        self.fleet.tick(_now_ms())
        body = {**self.body, "status": dict(self.status.status)}
        now = datetime.now(UTC)
        await FleetPass(self.context, body, NO_CLAIMS, self.memory).run()
        self.passes.append((now, dict(self.status.status)))

    async def until(self, what: str, ok: Callable[[], bool], timeout_s: float = 60) -> None:
        """Passes half a second apart until ``ok()`` holds after one."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            await self.run()
            if ok():
                return
            await asyncio.sleep(0.5)
        raise AssertionError(f"{what} not seen within {timeout_s:.0f} s: {self.status.status.get('conditions')}")

    def stuck(self, status: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        conditions = (status if status is not None else self.status.status).get("conditions") or ()
        return next((c for c in conditions if c["type"] == "GroupStuck"), {})

    def warnings(self) -> list[str]:
        return [s.message for s in self.record.said if s.type == "Warning" and s.reason == "GroupStuck"]

    def gauges(self) -> dict[str, float]:
        return fleet_metrics(self.metrics.exposition().decode(), self.group)


def _now_ms() -> int:
    return int(time.time() * 1000)


def owned_by(described: GroupDescription) -> dict[str, int]:
    return {m.group_instance_id or m.member_id: len(m.assignment) for m in described.members}


def commit_all(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """Offsets on every partition while the group is empty (a fleet that ran before)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="berth-tests")
    try:
        admin.alter_group_offsets(
            group, {TopicPartition(topic, p): OffsetAndMetadata(0, "", -1) for p in range(partitions)}
        )
    finally:
        admin.close()


async def test_a_consumer_that_stops_polling_leaves_the_group_and_its_ready_pod_idle(
    port: KafkaCoordinatorPort, broker: str
) -> None:
    group = topic = "stops-polling"
    create_topic(broker, topic, 6)
    stage = Stage(port, broker, group, topic, 3)
    await stage.run()  # the group claimed for the fleet, its pods not started yet
    commit_all(broker, group, topic, 6)  # what the fleet's consumers committed before (the group still empty)
    assert await port.committed_partitions(group, None, 4) == tuple(f"{topic}:{p}" for p in range(4))
    assert await port.committed_partitions(group, {"another"}, 10) == ()
    pods = [f"{group}-{n}" for n in range(3)]
    try:
        described: GroupDescription | None = None

        async def stable_with(counts: dict[str, int]) -> bool:
            nonlocal described
            described = await port.describe(group)
            return described.state == "Stable" and owned_by(described) == counts

        await stage.until(
            "three Ready pods", lambda: all(p.ready for p in stage.fleet.pods.values()) and len(stage.fleet.pods) == 3
        )
        deadline = time.monotonic() + 60
        while not await stable_with(dict.fromkeys(pods, 2)):
            assert time.monotonic() < deadline, f"never 2 partitions each: {described}"
            await stage.run()
            await asyncio.sleep(0.5)
        assert described is not None and described.protocol is GroupProtocol.CONSUMER
        # The port's description carries each member's assignment: together the topic's 6 partitions.
        assert sorted(p for m in described.members for p in m.assignment) == sorted(f"{topic}:{p}" for p in range(6))
        await stage.run()
        assert stage.memory.known_partitions == {f"{topic}:{p}" for p in range(6)}  # the lag read: committed ones
        assert stage.stuck()["status"] == "False" and "stuck" not in stage.status.status

        silent = pods[2]
        stage.consumers.live[silent].polling.clear()  # stops polling; its pod stays Ready, its process alive
        stopped = len(stage.passes)
        await stage.until("GroupStuck True", lambda: stage.stuck().get("status") == "True", timeout_s=90)
        described = await port.describe(group)
        assert silent not in owned_by(described) and sorted(owned_by(described).values()) == [3, 3], described
        condition = stage.stuck()
        assert condition["reason"] == "ReadyPodsIdle" and silent in condition["message"], condition
        assert stage.status.status["stuck"]["idleReadyPods"] == [silent]
        # Within the threshold and not before: every pass since it stopped said True exactly when the pod had been
        # idle for the threshold.
        since = parse_time(stage.status.status["stuck"]["idleSince"])
        assert since is not None
        for at, status in stage.passes[stopped:]:
            assert stage.stuck(status)["status"] == ("True" if at >= since + THRESHOLD else "False"), (at, since)
        assert len(stage.warnings()) == 1 and silent in stage.warnings()[0]
        gauges = stage.gauges()
        assert (gauges["berth_operator_fleet_idle_ready_pods"], gauges["berth_operator_fleet_group_stuck"]) == (1, 1)

        stage.consumers.live[silent].polling.set()  # polling again: it rejoins and is given partitions
        await stage.until("GroupStuck False", lambda: stage.stuck().get("status") == "False", timeout_s=60)
        assert "stuck" not in stage.status.status and len(stage.warnings()) == 1
        gauges = stage.gauges()
        assert (gauges["berth_operator_fleet_idle_ready_pods"], gauges["berth_operator_fleet_group_stuck"]) == (0, 0)
    finally:
        stage.consumers.close()


async def test_a_fleet_larger_than_its_partition_count_is_never_stuck(port: KafkaCoordinatorPort, broker: str) -> None:
    group = topic = "wider"
    create_topic(broker, topic, 2)
    stage = Stage(port, broker, group, topic, 4)
    try:

        async def spread() -> bool:
            described = await port.describe(group)
            return described.state == "Stable" and sorted(owned_by(described).values()) == [0, 0, 1, 1]

        deadline = time.monotonic() + 60
        while not (len(stage.fleet.pods) == 4 and await spread()):
            assert time.monotonic() < deadline, await port.describe(group)
            await stage.run()
            await asyncio.sleep(0.5)
        watched = time.monotonic()
        while time.monotonic() - watched < THRESHOLD.total_seconds() + 2:
            await stage.run()
            assert stage.stuck()["status"] == "False" and "stuck" not in stage.status.status, stage.stuck()
            await asyncio.sleep(0.5)
        assert await spread()  # still two idle Ready pods, each busy one owning one partition
        assert stage.warnings() == []
        assert stage.gauges()["berth_operator_fleet_group_stuck"] == 0
    finally:
        stage.consumers.close()
