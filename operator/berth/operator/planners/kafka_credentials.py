"""Whose credentials a Kafka fleet's group is reached with: the Secrets its spec names, checked, and the
:class:`KafkaConnection` made of them.

A Kafka fleet acts on its group as its own principal (docs/kafka.md, "Whose credentials"): with SASL the spec
names a Secret with ``username`` and ``password``; with TLS it may name a CA bundle (a key of a Secret). Rules:

- Pure: :func:`secrets_needed` says which Secrets (by name, in the fleet's namespace) and keys to read, in order;
  :func:`checked` refuses a Secret or key that is missing (:class:`~berth.operator.planners.fleet_status.Refusal`
  ``CredentialsMissing``, naming it), one Secret at a time, so the first missing one is the one named;
  :func:`kafka_connection` makes the connection of what was read.
- The password and the CA bundle are kept out of ``repr`` and every message; ``principal`` says whose credentials
  these are in words ("the credentials in Secret team-a/orders-kafka", "no credentials"), which is what
  conditions and Events name instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from berth.operator.planners import fleet_status
from berth.operator.planners.coordinator_target import KafkaTarget
from berth.operator.planners.fleet_status import Refusal


@dataclass(frozen=True, slots=True)
class KafkaConnection:
    """What one Kafka admin connection is made of (cluster, security, principal): one coordinator port each."""

    bootstrap_servers: str  # canonical, comma-separated
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_pem: str | None = field(default=None, repr=False)
    principal: str = "no credentials"

    @property
    def endpoint(self) -> str:
        return f"kafka://{self.bootstrap_servers}"


class SecretRole(StrEnum):
    CREDENTIALS = "credentials"
    CA = "ca"


@dataclass(frozen=True, slots=True)
class SecretNeed:
    role: SecretRole
    name: str  # in the fleet's namespace
    keys: tuple[str, ...]


def secrets_needed(target: KafkaTarget) -> tuple[SecretNeed, ...]:
    """The Secrets the connection needs, in the order they are checked."""
    needs = []
    if target.credentials is not None:
        needs.append(SecretNeed(SecretRole.CREDENTIALS, target.credentials.name, ("username", "password")))
    if target.ca is not None:
        needs.append(SecretNeed(SecretRole.CA, target.ca.name, (target.ca.key,)))
    return tuple(needs)


def checked(need: SecretNeed, namespace: str, found: Mapping[str, str] | None) -> Mapping[str, str]:
    """``found`` (the Secret's decoded keys, None when it does not exist) when it has every key ``need`` names."""
    if found is None:
        raise Refusal(fleet_status.CREDENTIALS_MISSING, f"Secret {namespace}/{need.name} does not exist")
    missing = [key for key in need.keys if not found.get(key)]
    if missing:
        raise Refusal(
            fleet_status.CREDENTIALS_MISSING, f"Secret {namespace}/{need.name} has no key {', '.join(missing)}"
        )
    return found


def kafka_connection(
    target: KafkaTarget, namespace: str, secrets: Mapping[SecretRole, Mapping[str, str]]
) -> KafkaConnection:
    """The connection for the fleet's group, of the checked Secrets :func:`secrets_needed` named."""
    username = password = ca_pem = None
    principal = "no credentials"
    if target.credentials is not None:
        credentials = secrets[SecretRole.CREDENTIALS]
        username, password = credentials["username"], credentials["password"]
        principal = f"the credentials in Secret {namespace}/{target.credentials.name}"
    if target.ca is not None:
        ca_pem = secrets[SecretRole.CA][target.ca.key]
    return KafkaConnection(
        bootstrap_servers=target.bootstrap_servers,
        security_protocol=target.security_protocol.value,
        sasl_mechanism=target.sasl_mechanism,
        username=username,
        password=password,
        ca_pem=ca_pem,
        principal=principal,
    )
