"""Admission: whether a fleet may act at all, decided before anything is sent anywhere.

The order is the rule: (1) the spec parses; (2) the fleet is within the operator's fleet bounds (``--max-fleets``,
``--max-fleets-per-namespace``: the newest fleets beyond them are refused ``TooManyFleets``); (3) the endpoint it
names is one the operator trusts (Berth coordinator URLs and Kafka clusters, ``planners.coordinator_target``) and it
asks for no more replicas than ``--max-replicas``; (4) the group is this fleet's (the claims index,
``planners.claims``; ownership records come after, ``planners.ownership``); (5) no other fleet of its namespace has
volume claims named like its own would be (``VolumeClaimNameTaken``). Then, for a Kafka fleet, the connection is
made of the fleet's own principal (``planners.kafka_credentials``). Pure: a
:class:`~berth.operator.planners.fleet_status.Refusal` becomes SpecValid=False and a Warning Event, and a fleet being
deleted is released without anything being touched. No secret value is ever part of a message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from berth.operator.planners import fleet_status
from berth.operator.planners.claims import GroupClaim
from berth.operator.planners.coordinator_target import CoordinatorTarget, UntrustedEndpoint, resolve_target
from berth.operator.planners.fleet_status import Refusal
from berth.operator.spec.fleet import Fleet, OperatorDefaults, SpecError, parse_fleet

#: The fleet (other than this one) that holds the fleet's group on the target, if any.
OtherHolder = Callable[[Fleet, CoordinatorTarget], GroupClaim | None]
#: Another fleet of the namespace whose volume claims would be named like this fleet's: (prefix, that fleet).
VolumeClaimHolder = Callable[[Fleet], tuple[str, GroupClaim] | None]
#: Why the fleet is beyond a fleet bound (a sentence naming the flag), None when it is within them.
FleetBound = Callable[[Fleet], str | None]

TOO_MANY_FLEETS = "TooManyFleets"
VOLUME_CLAIM_NAME_TAKEN = "VolumeClaimNameTaken"


def admit(
    body: Mapping[str, Any],
    defaults: OperatorDefaults,
    other_holder: OtherHolder,
    *,
    volume_claim_holder: VolumeClaimHolder = lambda fleet: None,
    fleet_bound: FleetBound = lambda fleet: None,
) -> tuple[Fleet, CoordinatorTarget] | Refusal:
    try:
        fleet = parse_fleet(body)
        beyond = fleet_bound(fleet)
        if beyond is not None:
            message = f"{beyond}: nothing is created for this fleet until one of the others is deleted"
            return Refusal(TOO_MANY_FLEETS, message, release=f"{beyond}: nothing of this fleet to clean up")
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
    taken = volume_claim_holder(fleet)
    if taken is not None:
        prefix, other = taken
        message = (
            f"its volume claims would be named {prefix}-<ordinal>, as fleet {other.fleet}'s are: the two fleets' pods"
            " would share them; rename the claim template (spec.volumeClaimTemplates) or the fleet"
        )
        return Refusal(VOLUME_CLAIM_NAME_TAKEN, message, release=f"{message}: nothing of this fleet to clean up")
    return fleet, target
