"""Whether a Kafka cluster's finalized feature levels let a fleet run on the consumer protocol (KIP-848).

Kafka 4.x enables consumer-protocol groups with the finalized feature ``group.version`` at level 1 or more
(KIP-848; KIP-584 features). A cluster upgraded to 4.x keeps it at 0 until an operator finalizes it (Strimzi leaves it
so), and its consumers then fail with "The cluster does not support the new CONSUMER group protocol". Rules:

- A fleet whose consumers are configured for the consumer protocol is refused (``ConsumerProtocolNotEnabled``:
  SpecValid=False and a Warning Event, before anything is created or claimed) while the cluster's finalized
  ``group.version`` is below 1 or absent; the refusal names the command that enables it. A classic fleet is never
  refused for it.
- The level is read with the session bounds (ApiVersions v3+, so it is re-read whenever they are); ``None`` means it
  was not read (a coordinator that has no feature levels: Berth's), and refuses nothing.
"""

from __future__ import annotations

from berth.operator.planners.coordinator_target import CoordinatorTarget, KafkaTarget
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.observations import CoordinatorBounds, GroupProtocol

GROUP_VERSION = "group.version"
#: The lowest finalized ``group.version`` at which consumer-protocol groups are enabled (Kafka 4.0).
CONSUMER_PROTOCOL_LEVEL = 1
CONSUMER_PROTOCOL_NOT_ENABLED = "ConsumerProtocolNotEnabled"


def enabling_command(target: KafkaTarget) -> str:
    """The command an operator of the cluster runs to enable consumer-protocol groups."""
    return (
        f"kafka-features.sh --bootstrap-server {target.bootstrap_servers} upgrade"
        f" --feature {GROUP_VERSION}={CONSUMER_PROTOCOL_LEVEL}"
    )


def consumer_protocol_refusal(
    declared: GroupProtocol, bounds: CoordinatorBounds, target: CoordinatorTarget
) -> Refusal | None:
    """The refusal of a consumer-protocol fleet on a cluster whose finalized ``group.version`` does not enable the
    protocol; None when the fleet may go on."""
    if declared is not GroupProtocol.CONSUMER or not isinstance(target, KafkaTarget):
        return None
    level = None if bounds.consumer is None else bounds.consumer.group_version
    if level is None or level >= CONSUMER_PROTOCOL_LEVEL:
        return None
    finalized = "does not finalize group.version" if level == 0 else f"finalizes group.version at {level}"
    message = (
        f"the Kafka cluster at {target} {finalized}: consumer-protocol groups (KIP-848) are not enabled there, and"
        f' consumers with group.protocol=consumer would fail ("The cluster does not support the new CONSUMER group'
        f' protocol"); nothing was created. Enable it with: {enabling_command(target)}'
        " (or run this fleet with spec.coordinator.kafka.groupProtocol: classic)"
    )
    return Refusal(CONSUMER_PROTOCOL_NOT_ENABLED, message)
