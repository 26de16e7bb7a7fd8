"""Admission: whether a fleet may act at all, decided before anything is sent anywhere.

The order is the rule: (1) the spec parses and asks for no more replicas than ``--max-replicas``; (2) the endpoint
it names is one the operator trusts (Berth coordinator URLs and Kafka clusters, ``planners.coordinator_target``);
(3) the group is this fleet's (the claims index, ``planners.claims``; ownership records kept at the coordinator
come after, ``planners.ownership``). Then, for a Kafka fleet, the connection is made of the fleet's own principal
(``planners.kafka_credentials``). Pure: a :class:`~berth.operator.planners.fleet_status.Refusal` becomes
SpecValid=False and a Warning Event, and a fleet being deleted is released without anything being touched. No
secret value is ever part of a message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from berth.operator.planners import fleet_status
from berth.operator.planners.claims import GroupClaim
from berth.operator.planners.coordinator_target import CoordinatorTarget, UntrustedEndpoint, resolve_target
from berth.operator.planners.fleet_status import Refusal
from berth.operator.spec import Fleet, OperatorDefaults, SpecError, parse_fleet

#: The fleet (other than this one) that holds the fleet's group on the target, if any.
OtherHolder = Callable[[Fleet, CoordinatorTarget], GroupClaim | None]


def admit(
    body: Mapping[str, Any], defaults: OperatorDefaults, other_holder: OtherHolder
) -> tuple[Fleet, CoordinatorTarget] | Refusal:
    try:
        fleet = parse_fleet(body)
        target = resolve_target(fleet, defaults)
    except SpecError as error:
        return Refusal(
            fleet_status.INVALID_SPEC,
            f"invalid spec: {error}",
            release=f"the spec is invalid ({error}): nothing of this fleet to clean up",
        )
    except UntrustedEndpoint as error:
        return Refusal(
            fleet_status.UNTRUSTED_ENDPOINT, str(error), release=f"{error}: nothing of this fleet to clean up"
        )
    if fleet.spec.replicas > defaults.max_replicas:
        message = (
            f"invalid spec: spec.replicas: {fleet.spec.replicas} is above the operator's maximum of"
            f" {defaults.max_replicas} (--max-replicas)"
        )
        return Refusal(fleet_status.INVALID_SPEC, message, release=f"{message}: nothing of this fleet to clean up")
    holder = other_holder(fleet, target)
    if holder is not None:
        return Refusal(
            fleet_status.GROUP_ID_IN_USE,
            f"group {fleet.spec.group_id} on {target} is already used by fleet {holder.fleet}: nothing is"
            " created for this fleet while that one exists",
            release=f"group {fleet.spec.group_id} belongs to fleet {holder.fleet}: left it untouched",
        )
    return fleet, target
