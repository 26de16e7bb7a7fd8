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
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient
from support.kafka_broker import HOW_TO_GET_KIP848, KafkaBroker, find_kfake
from support.kube_fixtures import unavailable
from support.signal_kafka import KafkaPasses

from berth.operator.adapters.kafka.port import KafkaCoordinatorPort
from berth.operator.planners.kafka_credentials import KafkaConnection

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
    """The pods' processes: none (the test reads what the passes decide, not what consumers do)."""

    def start(self, instance_id: str, env: Mapping[str, str]) -> None:
        return None

    def stop(self, instance_id: str) -> None:
        return None


def stage(port: KafkaCoordinatorPort, bootstrap: str, name: str, protocol: str) -> KafkaPasses:
    """One fleet of two and its passes on the real Kafka port."""
    spec = {
        "coordinator": {"kafka": {"groupProtocol": protocol}},
        "sessionTimeout": {"policy": "Fixed", "fixedMs": 45_000},
    }
    return KafkaPasses(port, bootstrap, name, NoProcesses(), 2, spec)


@pytest.fixture
async def port(own_broker: str) -> AsyncIterator[KafkaCoordinatorPort]:
    port = KafkaCoordinatorPort(KafkaConnection(own_broker))
    yield port
    await port.close()


async def test_both_answers_of_group_version_on_the_test_broker(port: KafkaCoordinatorPort, own_broker: str) -> None:
    # As it starts: finalized at 1, so a consumer-protocol fleet goes on (its StatefulSet, its group's config).
    assert (await port.get_config()).consumer.group_version == 1  # type: ignore[union-attr]
    enabled = stage(port, own_broker, "enabled", "consumer")
    await enabled.run()
    assert enabled.condition("SpecValid")["status"] == "True"
    assert enabled.fleet.planned is not None
    assert enabled.warnings("ConsumerProtocolNotEnabled") == []

    set_group_version(own_broker, 0)
    try:
        assert (await port.get_config()).consumer.group_version == 0  # type: ignore[union-attr]
        refused = stage(port, own_broker, "refused", "consumer")
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
        classic = stage(port, own_broker, "classic", "classic")
        await classic.run()
        assert classic.condition("SpecValid")["status"] == "True" and classic.fleet.planned is not None
    finally:
        set_group_version(own_broker, 1)

    # Enabled again: the refused fleet goes on at its next pass.
    await refused.run()
    assert refused.condition("SpecValid")["status"] == "True"
    assert refused.fleet.planned is not None
