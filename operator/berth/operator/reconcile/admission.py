"""Admission: whether a fleet may act at all, decided before anything is sent anywhere, and with whose credentials.

The order is the rule: (1) the spec parses and asks for no more replicas than ``--max-replicas``; (2) the endpoint
it names is one the operator trusts (Berth coordinator URLs and Kafka clusters, ``planners.coordinator_target``);
(3) the group is this fleet's (the claims index; ownership records kept at the coordinator belong here too). Then,
for a Kafka fleet, the connection is made of the fleet's own principal (the Secret its spec names, read by name in
its namespace). Nothing here talks to a coordinator; a :class:`Refusal` becomes SpecValid=False and a Warning
Event, and a fleet being deleted is released without anything being touched. No secret value is ever part of a
message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from berth.operator.kafka.connection import KafkaConnection
from berth.operator.planners.coordinator_target import CoordinatorTarget, KafkaTarget, UntrustedEndpoint, resolve_target
from berth.operator.reconcile import fleet_status
from berth.operator.reconcile.claims import GroupClaim
from berth.operator.spec import Fleet, OperatorDefaults, SpecError, parse_fleet

#: The fleet (other than this one) that holds the fleet's group on the target, if any.
OtherHolder = Callable[[Fleet, CoordinatorTarget], GroupClaim | None]


class SecretLookup(Protocol):
    async def read(self, namespace: str, name: str) -> Mapping[str, str] | None: ...


class Refusal(Exception):
    """The fleet is refused (SpecValid=False, a Warning Event) and nothing more is done this pass."""

    def __init__(self, reason: str, message: str, *, release: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        #: What the deletion says when it releases a fleet refused this way.
        self.release = release or f"{message}: nothing of this fleet to clean up"


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


async def kafka_connection(fleet: Fleet, target: KafkaTarget, secrets: SecretLookup | None) -> KafkaConnection:
    """The connection for this fleet's group: its own principal's credentials (from the Secret its spec names, in
    its namespace) and CA bundle; a Secret or key that is missing is a :class:`Refusal` naming it."""
    username = password = ca_pem = None
    principal = "no credentials"
    if target.credentials is not None:
        secret = await _secret(secrets, fleet, target.credentials.name, ("username", "password"))
        username, password = secret["username"], secret["password"]
        principal = f"the credentials in Secret {fleet.namespace}/{target.credentials.name}"
    if target.ca is not None:
        ca_pem = (await _secret(secrets, fleet, target.ca.name, (target.ca.key,)))[target.ca.key]
    return KafkaConnection(
        bootstrap_servers=target.bootstrap_servers,
        security_protocol=target.security_protocol.value,
        sasl_mechanism=target.sasl_mechanism,
        username=username,
        password=password,
        ca_pem=ca_pem,
        principal=principal,
    )


async def _secret(secrets: SecretLookup | None, fleet: Fleet, name: str, keys: tuple[str, ...]) -> Mapping[str, str]:
    found = None if secrets is None else await secrets.read(fleet.namespace, name)
    if found is None:
        raise Refusal(fleet_status.CREDENTIALS_MISSING, f"Secret {fleet.namespace}/{name} does not exist")
    missing = [key for key in keys if not found.get(key)]
    if missing:
        raise Refusal(
            fleet_status.CREDENTIALS_MISSING, f"Secret {fleet.namespace}/{name} has no key {', '.join(missing)}"
        )
    return found
