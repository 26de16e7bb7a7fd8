"""Whose credentials a Kafka fleet's group is reached with: the Secrets its spec names, checked, and the
:class:`KafkaConnection` made of them.

A Kafka fleet acts on its group as its own principal (docs/kafka.md, "Whose credentials"), in the shapes Strimzi's
User Operator writes them (other tools through configurable key names):

- SASL (SCRAM or PLAIN): a Secret with the password (``passwordKey``, default ``password``); the username is
  ``usernameKey``'s value (default ``username``) where the Secret has one, else the ``username="..."`` of its
  ``sasl.jaas.config`` (a Strimzi KafkaUser Secret holds ``password`` and ``sasl.jaas.config``), else the Secret's
  name (Strimzi names it after the KafkaUser);
- mutual TLS: a Secret with the client certificate and its key (``user.crt``, ``user.key``: a KafkaUser with
  ``authentication: tls``), the principal being the certificate's subject;
- TLS: a CA bundle, a key of a Secret (Strimzi's cluster CA: ``<cluster>-cluster-ca-cert``, key ``ca.crt``).

Rules:

- Pure: :func:`secrets_needed` says which Secrets (by name, in the fleet's namespace) and keys to read, in order;
  :func:`checked` refuses a Secret or key that is missing (:class:`~berth.operator.planners.fleet_status.Refusal`
  ``CredentialsMissing``, naming it), one Secret at a time, so the first missing one is the one named;
  :func:`kafka_connection` makes the connection of what was read.
- The password, the private key and the CA bundle are kept out of ``repr`` and every message; ``principal`` says
  whose credentials these are in words ("the credentials in Secret team-a/orders", "no credentials"), which is what
  conditions and Events name instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from berth.coordinator.protocol.jaas import jaas_value
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
    #: The client certificate and its private key for mutual TLS (PEM), None without one.
    certificate_pem: str | None = field(default=None, repr=False)
    private_key_pem: str | None = field(default=None, repr=False)
    #: The username did not come from a key of the Secret (but from its sasl.jaas.config or its name): pods get it
    #: as a value, since there is no key to reference.
    username_is_derived: bool = False

    @property
    def endpoint(self) -> str:
        return f"kafka://{self.bootstrap_servers}"


class SecretRole(StrEnum):
    CREDENTIALS = "credentials"
    CA = "ca"
    CLIENT_CERTIFICATE = "client certificate"


@dataclass(frozen=True, slots=True)
class SecretNeed:
    role: SecretRole
    name: str  # in the fleet's namespace
    keys: tuple[str, ...]  # required keys


def secrets_needed(target: KafkaTarget) -> tuple[SecretNeed, ...]:
    """The Secrets the connection needs, in the order they are checked."""
    needs = []
    if target.credentials is not None:
        needs.append(SecretNeed(SecretRole.CREDENTIALS, target.credentials.name, (target.credentials.password_key,)))
    if target.client_certificate is not None:
        ref = target.client_certificate
        needs.append(SecretNeed(SecretRole.CLIENT_CERTIFICATE, ref.name, (ref.certificate_key, ref.private_key_key)))
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
            fleet_status.CREDENTIALS_MISSING,
            f"Secret {namespace}/{need.name} has no key {', '.join(missing)} (its {need.role.value})",
        )
    return found


def secrets_not_readable(namespace: str, name: str) -> str:
    """Why Secret ``name`` could not be read: the operator's RBAC does not open the namespace, and how to."""
    return (
        f"the operator may not read Secrets in namespace {namespace} (Secret {name}): it reads Secrets only where"
        " it is granted; add the namespace to the chart's operator.kafka.secretNamespaces, or bind the ClusterRole"
        " <release>-operator-kafka-secrets to the operator's ServiceAccount there with a RoleBinding"
    )


def kafka_connection(
    target: KafkaTarget, namespace: str, secrets: Mapping[SecretRole, Mapping[str, str]]
) -> KafkaConnection:
    """The connection for the fleet's group, of the checked Secrets :func:`secrets_needed` named."""
    username = password = ca_pem = certificate = private_key = None
    derived = False
    principals = []
    if target.credentials is not None:
        ref = target.credentials
        credentials = secrets[SecretRole.CREDENTIALS]
        password = credentials[ref.password_key]
        username = credentials.get(ref.username_key) or None
        if username is None:
            derived = True
            username = jaas_value(credentials.get(ref.jaas_config_key), "username") or ref.name
        principals.append(f"the credentials in Secret {namespace}/{ref.name}")
    if target.client_certificate is not None:
        ref_cert = target.client_certificate
        found = secrets[SecretRole.CLIENT_CERTIFICATE]
        certificate, private_key = found[ref_cert.certificate_key], found[ref_cert.private_key_key]
        principals.append(f"the client certificate in Secret {namespace}/{ref_cert.name}")
    if target.ca is not None:
        ca_pem = secrets[SecretRole.CA][target.ca.key]
    return KafkaConnection(
        bootstrap_servers=target.bootstrap_servers,
        security_protocol=target.security_protocol.value,
        sasl_mechanism=target.sasl_mechanism,
        username=username,
        password=password,
        ca_pem=ca_pem,
        principal=" and ".join(principals) or "no credentials",
        certificate_pem=certificate,
        private_key_pem=private_key,
        username_is_derived=derived,
    )
