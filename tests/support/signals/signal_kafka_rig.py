"""The signal lab's rig for Kafka (``signal_lab.Rig``; ``signal_kafka`` is one fleet's passes for the targeted Kafka
tests): a real Kafka-protocol broker (kfake), real Kafka clients as the pods' processes,
the operator's real Kafka port, and the broker's group watched for the oracle's ground truth.

- **Members.** Each pod's process is a real consumer in a thread of its own, configured from the pod's environment
  as the operator planned it (``BERTH_*``): on a classic group a kafka-python static member (``group.instance.id``
  = the pod's name, the session and heartbeat the operator chose), on a consumer-protocol group (KIP-848) a
  confluent-kafka consumer with ``group.protocol=consumer`` (the session is the group's config, which the operator
  sets), which, as the example program does, replaces a consumer that ended on a fatal error by a new one after a
  backoff. A process that stops closes its consumer as a pod's does on SIGTERM: a static member sends no
  LeaveGroup (classic), or its static leave (epoch -2) that keeps its partitions until its session expires
  (KIP-848). A process started for a pod whose previous process is still closing starts once it has closed (a
  pod's new container never overlaps its old one).
- **Time.** kfake has no manual clock: the lab runs on the wall clock (ms since the epoch), a wait is a sleep, and
  the members move by themselves (``step`` and ``settle`` have nothing to do).
- **Truth.** Kafka keeps no journal, so the rig writes what the broker says, in the journal's vocabulary, from two
  sources of its own (never the operator's evidence): the broker's answers to the operator's removals (a
  ``member_left`` via ``admin`` per id the broker answered NONE for, recorded by :class:`WitnessedPort`, timed when the
  call was sent), and the group described every :data:`WATCH_MS` by a port of the rig's own — a member id seen for the
  first time (``member_joined``), a static member under a new member id (``static_member_replaced``, with
  ``rebalance`` true when the next thing seen is a rebalance), a member gone that no removal took
  (``member_expired``), and a rebalance (``rebalance_started``: a classic group entering PreparingRebalance or
  CompletingRebalance, a consumer-protocol group's epoch going up), each written after the member events seen with
  or before it. Being sampled, this truth names every restart, expiry and rebalance a pass could have seen (the
  operator samples the group at its passes only), which is what the oracle's bounds need (``Record.sampled``).
  Every description is kept (``Record.looks``: asked when, answered when, the state and generation), the last one
  asked after the lab's last pass, so the oracle compares that pass's status with the group before and after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from support.signal_kafka import now_ms as wall_ms
from support.signal_lab import InMemoryRecords, Look, Record

from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.restarts import NOTHING, GroupActivity
from berth.operator.spec.fleet import KafkaDefaults, OperatorDefaults

#: The topics the lab's consumers subscribe to (a new version subscribes to both).
TOPICS = ("orders", "audit")
PARTITIONS = 6
#: How often the rig describes the group for the truth (wall ms).
WATCH_MS = 150
CLASSIC, CONSUMER = "classic", "consumer"
PROTOCOLS = (CLASSIC, CONSUMER)
#: kfake's flags for each protocol: classic sessions down to 3 s; consumer-protocol group configs down to a 3 s
#: session and a 500 ms heartbeat (Kafka's defaults are 45 s and 5 s), so a history's restarts take seconds.
BROKER_CONFIGS = {
    CLASSIC: ("group.min.session.timeout.ms=3000", "group.max.session.timeout.ms=1800000"),
    CONSUMER: (
        "group.min.session.timeout.ms=3000",
        "group.consumer.min.session.timeout.ms=3000",
        "group.consumer.min.heartbeat.interval.ms=500",
    ),
}
REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance"})


def create_topics(bootstrap: str) -> None:
    """The lab's topics on the broker (once per broker; an existing topic is kept)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="berth-signal-lab")
    try:
        for topic in TOPICS:
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()


# ------------------------------------------------------------------------------------------------ the members


@dataclass
class KafkaProcess:
    """One pod's process: a real consumer polling in a thread; :meth:`stop` asks it to close (it closes there)."""

    instance_id: str
    protocol: str
    env: Mapping[str, str]
    topics: tuple[str, ...]
    after: KafkaProcess | None = None  # the pod's previous process: this one starts once that one has closed
    stopping: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    error: str | None = None
    fatal: list[str] = field(default_factory=list)  # the fatal errors its consumers ended on (wall-clock ms: what)

    def start(self) -> KafkaProcess:
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"member-{self.instance_id}")
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def join(self, timeout_s: float = 60.0) -> None:
        if self.thread is not None:
            self.thread.join(timeout_s)

    def _run(self) -> None:
        if self.after is not None:
            self.after.join()
        if self.stopping.is_set():
            return
        try:
            if self.protocol == CLASSIC:
                self._classic()
            else:
                self._consumer_protocol()
        except Exception as error:  # a member that fails is kept for the failure's message
            self.error = f"{type(error).__name__}: {error}"

    def _classic(self) -> None:
        from kafka import KafkaConsumer

        env = self.env
        consumer = KafkaConsumer(
            bootstrap_servers=env["BERTH_KAFKA_BOOTSTRAP_SERVERS"].split(","),
            group_id=env["BERTH_GROUP_ID"],
            group_instance_id=self.instance_id,
            client_id=self.instance_id,
            session_timeout_ms=int(env["BERTH_SESSION_TIMEOUT_MS"]),
            heartbeat_interval_ms=int(env["BERTH_HEARTBEAT_INTERVAL_MS"]),
            max_poll_interval_ms=int(env["BERTH_REBALANCE_TIMEOUT_MS"]),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            consumer.subscribe(list(self.topics))
            # The subscribed topics' metadata before the first poll joins, as the example consumer does (a restarted
            # leader without it would see the metadata that arrives a moment later as a change and rebalance).
            while not set(self.topics) <= consumer.topics() and not self.stopping.is_set():
                time.sleep(0.05)
            while not self.stopping.is_set():
                consumer.poll(timeout_ms=100)
        finally:
            consumer.close(autocommit=False)  # a static member sends no LeaveGroup (KIP-345)

    def _consumer_protocol(self) -> None:
        """The example program's loop (deploy/examples/consumers/confluent_kafka_consumer.py): a fatal error ends a
        librdkafka consumer for good, so the process closes it and starts a new one after a backoff (1 s, doubling
        to 5 s)."""
        from confluent_kafka import Consumer, KafkaError

        env = self.env
        config = {
            "bootstrap.servers": env["BERTH_KAFKA_BOOTSTRAP_SERVERS"],
            "group.id": env["BERTH_GROUP_ID"],
            "group.protocol": "consumer",
            "group.instance.id": self.instance_id,
            "client.id": self.instance_id,
            "max.poll.interval.ms": int(env["BERTH_REBALANCE_TIMEOUT_MS"]),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 3,  # errors only (librdkafka's informational lines would fill the test's output)
        }
        backoff_s = 1.0
        consumer = Consumer(config)
        try:
            consumer.subscribe(list(self.topics))
            while not self.stopping.is_set():
                message = consumer.poll(0.1)
                error = message.error() if message is not None else None
                if error is None or not (error.fatal() or error.code() == KafkaError._FATAL):
                    continue
                self.fatal.append(f"{wall_ms()}: {error.str()}")
                consumer.close()
                self.stopping.wait(backoff_s)
                backoff_s = min(backoff_s * 2, 5.0)
                consumer = Consumer(config)
                consumer.subscribe(list(self.topics))
        finally:
            consumer.close()  # the static leave: epoch -2, partitions kept until the session expires


@dataclass
class KafkaMembers:
    """The lab's ``Members`` on Kafka: each pod's process a :class:`KafkaProcess`."""

    group: str
    protocol: str
    live: dict[str, KafkaProcess] = field(default_factory=dict)
    every: list[KafkaProcess] = field(default_factory=list)
    #: A changed subscription for processes started from now on (a new version of the consumer), or None.
    next_topics: tuple[str, ...] | None = None

    def start(self, instance_id: str, env: Mapping[str, str]) -> None:
        previous = self.live.pop(instance_id, None)
        if previous is not None:
            previous.stop()
        else:  # its last process, stopped earlier, may still be closing
            previous = next((p for p in reversed(self.every) if p.instance_id == instance_id), None)
        topics = self.next_topics or TOPICS[:1]
        process = KafkaProcess(instance_id, self.protocol, dict(env), topics, after=previous).start()
        self.live[instance_id] = process
        self.every.append(process)

    def stop(self, instance_id: str) -> None:
        process = self.live.pop(instance_id, None)
        if process is not None:
            process.stop()

    async def step(self, now_ms: int) -> None:
        """Nothing to do: the consumers move by themselves."""

    async def settle(self) -> None:
        """Nothing to wait for: the broker runs on the wall clock."""

    def errors(self) -> list[str]:
        return [f"{p.instance_id}: {p.error}" for p in self.every if p.error]

    def fatal(self) -> list[str]:
        return [f"{p.instance_id} at {said}" for p in self.every for said in p.fatal]


# ---------------------------------------------------------------------------------------------- the truth


class WitnessedPort(KafkaCoordinatorPort):
    """The operator's real Kafka port, with the broker's answer to each removal told to ``witness``."""

    witness: Callable[[int, Mapping[str, str]], None] | None = None

    async def leave_instances(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> Mapping[str, str]:
        sent_ms = wall_ms()
        results = await super().leave_instances(group_id, instance_ids, owner_uid=owner_uid)
        if self.witness is not None:
            self.witness(sent_ms, results)
        return results


@dataclass
class Watch:
    """The group as the broker describes it, turned into journal events (the module's rules)."""

    group: str
    protocol: str
    events: list[dict[str, Any]] = field(default_factory=list)
    members: dict[str, str] = field(default_factory=dict)  # instance id -> member id, as last described
    seen: set[str] = field(default_factory=set)  # every member id described so far
    removed: set[str] = field(default_factory=set)  # instance ids an admin removal took, until they are gone
    rebalancing: bool = False
    epoch: int = -1
    looks: list[Look] = field(default_factory=list)  # every description, in order

    def left(self, at_ms: int, results: Mapping[str, str]) -> None:
        for instance_id, outcome in sorted(results.items()):
            if outcome == "NONE":
                self.removed.add(instance_id)
                self._add(at_ms, "member_left", instance_id, via="admin", generation_id=None)

    def look(self, asked_ms: int, at_ms: int, state: str, epoch: int, members: Mapping[str, str]) -> None:
        self.looks.append(Look(asked_ms, at_ms, state, epoch))
        for instance_id, member_id in sorted(members.items()):
            before = self.members.get(instance_id)
            if before == member_id:
                continue
            if before is not None:
                self._add(at_ms, "static_member_replaced", instance_id, member_id=member_id, rebalance=False)
            elif member_id not in self.seen:
                self._add(at_ms, "member_joined", instance_id, member_id=member_id)
            self.seen.add(member_id)
        for instance_id in sorted(set(self.members) - set(members)):
            if instance_id in self.removed:
                self.removed.discard(instance_id)
            else:
                self._add(at_ms, "member_expired", instance_id, phase="session")
        self.members = dict(members)
        if self.protocol == CLASSIC:
            rebalance = state in REBALANCING and not self.rebalancing
            self.rebalancing = state in REBALANCING
        else:
            rebalance = self.epoch >= 0 and epoch > self.epoch
            self.epoch = max(self.epoch, epoch)
        if rebalance:
            previous = self.events[-1] if self.events else None
            if previous is not None and previous["type"] == "static_member_replaced":
                previous["rebalance"] = True
            self.events.append({"ts_ms": at_ms, "group_id": self.group, "type": "rebalance_started"})

    def _add(self, at_ms: int, kind: str, instance_id: str, **extra: Any) -> None:
        self.events.append(
            {"ts_ms": at_ms, "group_id": self.group, "type": kind, "group_instance_id": instance_id, **extra}
        )


class KafkaRig:
    """A real kfake broker as the lab's coordinator (module docstring)."""

    def __init__(self, bootstrap: str, protocol: str) -> None:
        self.bootstrap, self.protocol = bootstrap, protocol
        connection = KafkaConnection(bootstrap)
        self.port = WitnessedPort(connection)
        self.observer = KafkaCoordinatorPort(connection)
        # Heartbeats of 1 s (a third of the shortest session), so a consumer-protocol group's configs stay within
        # the broker's bounds whatever the fleet's session.
        self.defaults = OperatorDefaults(kafka=KafkaDefaults(bootstrap), preferred_heartbeat_interval_ms=1_000)
        self.records = InMemoryRecords()
        self.watch: Watch | None = None
        self.watcher: asyncio.Task[None] | None = None
        self.watch_errors: list[str] = []
        self.processes: KafkaMembers | None = None

    async def start(self, group: str) -> KafkaRig:
        self.watch = Watch(group, self.protocol)
        self.port.witness = self.watch.left
        self.watcher = asyncio.ensure_future(self._watching(self.watch))
        return self

    async def _watching(self, watch: Watch) -> None:
        while True:
            started = time.monotonic()
            await self._look(watch)
            await asyncio.sleep(max(0.0, WATCH_MS / 1000 - (time.monotonic() - started)))

    async def _look(self, watch: Watch) -> None:
        asked = wall_ms()
        try:
            described = await self.observer.describe(watch.group)
        except Exception as error:  # kept: a truth with holes is reported, not trusted
            self.watch_errors.append(f"{wall_ms()}: {type(error).__name__}: {error}")
        else:
            members = {m.group_instance_id: m.member_id for m in described.members if m.group_instance_id}
            watch.look(asked, wall_ms(), described.state, described.generation, members)

    def now_ms(self) -> int:
        return wall_ms()

    async def advance(self, ms: int) -> None:
        await asyncio.sleep(ms / 1000)

    def members(self, group: str) -> KafkaMembers:
        self.processes = KafkaMembers(group, self.protocol)
        return self.processes

    def spec(self) -> dict[str, Any]:
        return {"coordinator": {"kafka": {"groupProtocol": self.protocol}}}

    async def activity(self, group: str) -> GroupActivity:
        """Nothing from outside the pass: on Kafka the operator's own evidence is its activity."""
        return NOTHING

    async def truth(self, record: Record) -> None:
        assert self.watch is not None and self.watcher is not None
        self.watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.watcher
        await self._look(self.watch)  # asked after the last pass: the group as that pass left it, not as before
        record.truth = list(self.watch.events)
        record.looks = list(self.watch.looks)
        record.sampled = True
        last = self.watch.looks[-1] if self.watch.looks else None
        if last is not None and not last.settled:
            record.unsettled = last.state
        record.failures += [f"the rig's watch failed: {error}" for error in self.watch_errors]
        if self.processes is not None:
            record.failures += [f"a member failed: {error}" for error in self.processes.errors()]

    async def teardown(self, members: KafkaMembers) -> None:
        """Every process stopped and closed, and the rig's ports closed."""
        if self.watcher is not None and not self.watcher.done():
            self.watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.watcher
        for instance_id in list(members.live):
            members.stop(instance_id)
        for process in members.every:
            await asyncio.to_thread(process.join)
        await self.port.close()
        await self.observer.close()
