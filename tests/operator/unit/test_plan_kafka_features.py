"""``planners.kafka_features``: a consumer-protocol fleet is refused on a Kafka cluster whose finalized
``group.version`` is below 1, with the command that enables it; nothing else is refused for it."""

from __future__ import annotations

import pytest

from berth.operator.planners.coordinator_target import BerthTarget, KafkaTarget
from berth.operator.planners.endpoints import Endpoint
from berth.operator.planners.kafka_features import CONSUMER_PROTOCOL_NOT_ENABLED, consumer_protocol_refusal
from berth.operator.planners.observations import ConsumerProtocolBounds, CoordinatorBounds, GroupProtocol

BROKER = Endpoint("", "kafka-0.data", 9092)
KAFKA = KafkaTarget((BROKER,), (BROKER,), "PLAINTEXT", None, None, None)


def bounds(level: int | None) -> CoordinatorBounds:
    return CoordinatorBounds(3_000, 1_800_000, consumer=ConsumerProtocolBounds(group_version=level))


@pytest.mark.parametrize("level", [0, None, 1, 2])
def test_only_a_consumer_protocol_fleet_on_a_cluster_at_level_0_is_refused(level: int | None) -> None:
    refusal = consumer_protocol_refusal(GroupProtocol.CONSUMER, bounds(level), KAFKA)
    if level != 0:
        assert refusal is None  # enabled, or not read (a coordinator without feature levels)
        return
    assert refusal is not None and refusal.reason == CONSUMER_PROTOCOL_NOT_ENABLED
    assert "kafka-features.sh --bootstrap-server kafka-0.data:9092 upgrade --feature group.version=1" in refusal.message
    assert "does not finalize group.version" in refusal.message and "?" not in refusal.message


def test_a_classic_fleet_or_berths_coordinator_is_never_refused_for_it() -> None:
    assert consumer_protocol_refusal(GroupProtocol.CLASSIC, bounds(0), KAFKA) is None
    url = "http://berth-coordinator.berth:9094"
    berth = BerthTarget(url, Endpoint("http", "berth-coordinator.berth", 9094))
    assert consumer_protocol_refusal(GroupProtocol.CONSUMER, bounds(0), berth) is None
