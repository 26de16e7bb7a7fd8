"""What differs between Berth's coordinator and Kafka for a fleet, in one place: the group-deletion default, the
conditions only Kafka fleets carry, and the words for a KIP-848 group.

Rules: a coordinator that pre-registers is Berth's (``CoordinatorPort.pre_registers``); pure functions.
"""

from __future__ import annotations

from berth.operator.planners.conditions import Condition
from berth.operator.planners.coordinator_target import CoordinatorTarget
from berth.operator.ports import CoordinatorPort
from berth.operator.reconcile import fleet_status
from berth.operator.spec import Fleet


def deletes_group(fleet: Fleet, coordinator: CoordinatorPort) -> bool:
    """spec.deleteGroupOnDelete, else the default: yes on Berth's coordinator, never on Kafka (deleting a Kafka
    group deletes its committed offsets, which other tools and a re-created fleet may still need)."""
    if fleet.spec.delete_group_on_delete is not None:
        return fleet.spec.delete_group_on_delete
    return coordinator.pre_registers


def coordinator_notes(fleet: Fleet, coordinator: CoordinatorPort) -> tuple[Condition, ...]:
    """Conditions the coordinator's kind adds: on Kafka, that there is no pre-registration and what that costs."""
    if coordinator.pre_registers:
        return ()
    parallel = fleet.spec.pod_management_policy == "Parallel"
    return (
        Condition(
            fleet_status.PRE_REGISTRATION,
            "False",
            "NotSupportedByKafka",
            "Kafka has no pre-registration: new pods join as they start"
            + (
                "; podManagementPolicy Parallel starts them together, so a scale-up costs about one rebalance"
                if parallel
                else "; with podManagementPolicy OrderedReady each new pod costs a rebalance (set Parallel to"
                " bring new pods in together)"
            ),
        ),
    )


def consumer_protocol_message(fleet: Fleet, target: CoordinatorTarget) -> str:
    return (
        f"group {fleet.spec.group_id} on {target} uses the KIP-848 consumer protocol (group.protocol=consumer):"
        " the operator manages classic groups only. There the broker owns the session timeout (the group config"
        " consumer.session.timeout.ms, not a client setting) and admin removal of members is not supported by"
        " every broker. Run the consumers with group.protocol=classic, or manage this group without the operator"
    )
