"""A consumer-protocol fleet against the Kafka cluster's finalized ``group.version`` (issue 30, "What to build 4"),
both answers on the test broker: ``kfake-kip848`` of this module's own (the level is cluster-wide, so no other test
shares it), the operator's real pass (``FleetPass``) over the real Kafka port, the rest of its ports in memory.

kfake finalizes ``group.version`` at 1 as it starts, as a fresh Kafka 4.x cluster does; UpdateFeatures (what
``kafka-features.sh downgrade --unsafe`` sends) takes it to 0, as a cluster upgraded to 4.x under Strimzi is left.
At 0 a consumer-protocol fleet is refused ``ConsumerProtocolNotEnabled`` before anything is created or claimed:
SpecValid=False and one Warning Event naming the command that enables it; a classic fleet is not refused for it;
once the level is 1 again the refused fleet goes on at its next pass.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from support.kafka_broker import HOW_TO_GET_KIP848, KafkaBroker, find_kfake
from support.kube_fixtures import unavailable
from support.signal_fleet import SimFleet
from support.signal_lab import Events, InMemoryRecords, NoAdvice, OneCoordinator, Record

from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.local.demo_support import InMemoryStatus
from berth.operator.planners.claims import NO_CLAIMS
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.reconcile.context import PassContext, Ports, Settings
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.memory import FleetMemory
from berth.operator.spec.fleet import KafkaDefaults, OperatorDefaults

pytestmark = [pytest.mark.kafka]


@pytest.fixture(scope="module")
def own_broker() -> Iterator[str]:
    """A kfake-kip848 of this module's own (never BERTH_KAFKA_BOOTSTRAP: a real cluster's level is not the tests'
    to lower)."""
    binary = find_kfake(kip848=True)
    if binary is None:
        unavailable(HOW_TO_GET_KIP848)
    assert binary is not None
    workdir = Path(tempfile.mkdtemp(prefix="berth-kfake-features-"))
    broker = KafkaBroker(binary, workdir / "kfake.log", configs=()).start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def set_group_version(bootstrap: str, level: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="berth-tests")
    try:
        update = ("UNSAFE_DOWNGRADE", level) if level == 0 else ("UPGRADE", level)
        assert admin.update_features({"group.version": update}) == {"group.version": "OK"}
        assert admin.describe_features()["group.version"]["finalized"][1] == level
    finally:
        admin.close()


class NoProcesses:
    def start(self, instance_id: str, env: Mapping[str, str]) -> None:
        return None

    def stop(self, instance_id: str) -> None:
        return None


class Stage:
    """One fleet, its pass on the real Kafka port."""

    def __init__(self, port: KafkaCoordinatorPort, bootstrap: str, name: str, protocol: str) -> None:
        self.port = port
        self.fleet = SimFleet(name, NoProcesses())
        self.status = InMemoryStatus()
        self.records = InMemoryRecords()
        self.record = Record(name, name, None)  # type: ignore[arg-type]  # only its Events are kept
        self.body: dict[str, Any] = {
            "apiVersion": "berth.dev/v1alpha1",
            "kind": "ConsumerFleet",
            "metadata": {"name": name, "namespace": "features", "uid": f"uid-{name}", "generation": 1},
            "spec": {
                "replicas": 2,
                "coordinator": {"kafka": {"groupProtocol": protocol}},
                "sessionTimeout": {"policy": "Fixed", "fixedMs": 45_000},
                "template": {"spec": {"containers": [{"name": "consumer", "image": "consumer:1"}]}},
            },
        }
        events = Events(self.record, lambda: 0)
        ports = Ports(
            status_for=lambda body: self.status,
            workload_for=lambda fleet: self.fleet,
            events_for=lambda body: events,
            coordinators=OneCoordinator(port),
            advice=NoAdvice(),
            now=lambda: datetime.now(UTC),
            records=self.records,
        )
        defaults = OperatorDefaults(kafka=KafkaDefaults(bootstrap))
        self.context = PassContext(ports, Settings(defaults, OperatorSessionBounds(1_000, 3_600_000)))
        self.memory = FleetMemory()

    async def run(self) -> None:
        body = {**self.body, "status": dict(self.status.status)}
        await FleetPass(self.context, body, NO_CLAIMS, self.memory).run()

    def condition(self, kind: str) -> Mapping[str, Any]:
        return next(c for c in self.status.status["conditions"] if c["type"] == kind)

    def warnings(self, reason: str) -> list[str]:
        return [s.message for s in self.record.said if s.type == "Warning" and s.reason == reason]


@pytest.fixture
async def port(own_broker: str) -> AsyncIterator[KafkaCoordinatorPort]:
    port = KafkaCoordinatorPort(KafkaConnection(own_broker))
    yield port
    await port.close()


async def test_both_answers_of_group_version_on_the_test_broker(port: KafkaCoordinatorPort, own_broker: str) -> None:
    # As it starts: finalized at 1, so a consumer-protocol fleet goes on (its StatefulSet, its group's config).
    assert (await port.get_config()).consumer.group_version == 1  # type: ignore[union-attr]
    enabled = Stage(port, own_broker, "enabled", "consumer")
    await enabled.run()
    assert enabled.condition("SpecValid")["status"] == "True"
    assert enabled.fleet.planned is not None
    assert enabled.warnings("ConsumerProtocolNotEnabled") == []

    set_group_version(own_broker, 0)
    try:
        assert (await port.get_config()).consumer.group_version == 0  # type: ignore[union-attr]
        refused = Stage(port, own_broker, "refused", "consumer")
        await refused.run()
        await refused.run()
        spec_valid = refused.condition("SpecValid")
        assert (spec_valid["status"], spec_valid["reason"]) == ("False", "ConsumerProtocolNotEnabled")
        assert refused.condition("Ready")["status"] == "False"
        said = refused.warnings("ConsumerProtocolNotEnabled")
        assert len(said) == 1, said  # once, not on every pass
        command = f"kafka-features.sh --bootstrap-server {own_broker} upgrade --feature group.version=1"
        assert command in said[0] and command in spec_valid["message"]
        assert refused.fleet.planned is None and refused.records.records == {}  # nothing created, nothing claimed
        assert "?" not in said[0]

        # A classic fleet on the same cluster is not refused for it.
        classic = Stage(port, own_broker, "classic", "classic")
        await classic.run()
        assert classic.condition("SpecValid")["status"] == "True" and classic.fleet.planned is not None
    finally:
        set_group_version(own_broker, 1)

    # Enabled again: the refused fleet goes on at its next pass.
    await refused.run()
    assert refused.condition("SpecValid")["status"] == "True"
    assert refused.fleet.planned is not None
