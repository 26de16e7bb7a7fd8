"""The ConsumerFleet's ``spec``, declared once: every field the CRD gives a fleet (deploy/crds), with its name, type,
default, enum and bounds, as the msgspec Structs the operator decodes fleets with (``spec_checks.decode``).

Rules:

- One Struct per object of the CRD's ``spec`` schema, one field per property: the CRD's camelCase names
  (``rename="camel"``), its types (``int``, ``float``, ``str``, ``bool``, an enum or ``Literal`` for ``enum``, a
  Struct for an object, ``int | str`` for ``x-kubernetes-int-or-string``), its defaults (a field the CRD gives no
  default is ``None`` unless the CRD requires it) and its bounds (``Meta``: ``ge``/``le``, ``min_length``/
  ``max_length``, ``pattern``). What a pattern means, in words, is ``Meta.extra["invalid"]``.
- What the CRD says with CEL (one field depending on another: ``fixedMs`` with policy Fixed, ``kafka`` exclusive with
  ``url``...) is checked by the parsers (``spec``, ``spec_stateful``), rule for rule.
- Objects the CRD keeps as given (``x-kubernetes-preserve-unknown-fields``: the pod template, a claim template's
  spec) are ``dict[str, Any]``, so nothing of them is lost; what the CRD still declares inside them is a shape
  (``Meta.extra["shape"]``) the parsers check the same value against.
- tests/operator/unit/test_spec_declaration.py walks the CRD's schema and these declarations together, property by
  property: a field added, renamed, retyped, re-defaulted or re-bounded on one side only fails it.
- Pure: msgspec and the standard library only.
"""

from __future__ import annotations

import contextlib
from enum import StrEnum
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

#: The CRD's patterns, and what each means in words (for the message that names a field breaking one).
DNS_SUBDOMAIN = Meta(
    min_length=1,
    max_length=253,
    pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    extra={"invalid": "is not a Kubernetes object name (lower-case letters, digits, '-' and '.')"},
)
SECRET_KEY = Meta(
    min_length=1,
    max_length=253,
    pattern=r"^[-._a-zA-Z0-9]+$",
    extra={"invalid": "is not a Secret key (letters, digits, '-', '_' and '.')"},
)
INT32 = 2**31 - 1
SESSION_MS = Meta(ge=1_000, le=1_800_000)


class SessionTimeoutPolicy(StrEnum):
    AUTO = "Auto"
    FIXED = "Fixed"


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self.value.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.value.endswith("SSL")


SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class ClaimRetention(StrEnum):
    RETAIN = "Retain"
    DELETE = "Delete"


class UpdateStrategyType(StrEnum):
    ROLLING_UPDATE = "RollingUpdate"
    ON_DELETE = "OnDelete"


class Declared(msgspec.Struct, frozen=True, rename="camel"):
    """Every declaration: frozen, camelCase on the wire, unknown fields ignored (an object the API server admitted
    has none: its schema prunes them)."""


# --- spec.coordinator ---------------------------------------------------------------------------------------------


class SecretKeyRef(Declared, frozen=True):
    """A key of a Secret in the fleet's namespace."""

    name: Annotated[str, DNS_SUBDOMAIN]
    key: Annotated[str, SECRET_KEY]


class SecretRef(Declared, frozen=True):
    """A Secret in the fleet's namespace with a Kafka fleet's own SASL principal and the keys to read:
    ``passwordKey`` holds the password; the username is ``usernameKey``'s value where the Secret has it, else the
    ``username="..."`` of its ``sasl.jaas.config`` (what Strimzi's KafkaUser Secrets hold: ``password`` and
    ``sasl.jaas.config``), else the Secret's name (Strimzi names the Secret after the KafkaUser, the principal)."""

    name: Annotated[str, DNS_SUBDOMAIN]
    username_key: Annotated[str, SECRET_KEY] = "username"
    password_key: Annotated[str, SECRET_KEY] = "password"
    jaas_config_key: Annotated[str, SECRET_KEY] = "sasl.jaas.config"


class CertificateSecretRef(Declared, frozen=True):
    """A client certificate for mutual TLS: a Secret with the PEM certificate and its private key (Strimzi's
    KafkaUser with ``authentication: tls``: ``user.crt``, ``user.key``, and ``user.p12``/``user.password`` for
    Java keystores)."""

    name: Annotated[str, DNS_SUBDOMAIN]
    certificate_key: Annotated[str, SECRET_KEY] = "user.crt"
    private_key_key: Annotated[str, SECRET_KEY] = "user.key"


class GroupProtocolName(StrEnum):
    """``spec.coordinator.kafka.groupProtocol``: the rebalance protocol the fleet's consumers use."""

    CLASSIC = "classic"
    CONSUMER = "consumer"


class CaSecretRef(SecretKeyRef, frozen=True):
    """The Secret key holding the PEM CA bundle that signs the brokers' certificates (``ca.crt`` unless said)."""

    key: Annotated[str, SECRET_KEY] = "ca.crt"


class KafkaRef(Declared, frozen=True):
    """``spec.coordinator.kafka``: a Kafka cluster holds the group. Unset fields come from the operator's default
    Kafka connection (``--kafka-*``)."""

    bootstrap_servers: (
        Annotated[
            str,
            Meta(
                min_length=1,
                max_length=2048,
                pattern=r"^[^\s/@?#]+$",
                extra={"invalid": "is not a comma-separated list of host:port (no spaces, '/', '@', '?' or '#')"},
            ),
        ]
        | None
    ) = None
    security_protocol: SecurityProtocol | None = None
    sasl_mechanism: SaslMechanism | None = None
    #: A Secret in the fleet's namespace with the fleet's own SASL principal (:class:`SecretRef`), which both its
    #: pods and the operator (for this fleet's group) authenticate as.
    credentials_secret_ref: SecretRef | None = None
    #: A Secret key holding the PEM CA bundle that signs the brokers' certificates (TLS).
    ca_secret_ref: CaSecretRef | None = None
    #: The fleet's own client certificate for mutual TLS (with securityProtocol SSL or SASL_SSL).
    client_certificate_secret_ref: CertificateSecretRef | None = None
    #: The protocol the fleet's consumers use (``group.protocol``): classic, or KIP-848's consumer protocol, where
    #: the session timeout is the group's config the operator sets, not a client setting.
    group_protocol: GroupProtocolName = GroupProtocolName.CLASSIC
    #: Remove a consumer-protocol member that holds a pod's instance id after the pod was replaced (the new
    #: process is refused UNRELEASED_INSTANCE_ID until that member's session expires); off by default.
    release_stale_instances: bool = False


class Coordinator(Declared, frozen=True):
    """``spec.coordinator``: where the group lives (``parse_fleet`` makes it a ``spec.CoordinatorRef``)."""

    url: (
        Annotated[
            str,
            Meta(
                max_length=512,
                pattern=r"^https?://[^\s/?#@]+/?$",
                extra={"invalid": "is not an http:// or https:// URL with a host (and no user info, path or query)"},
            ),
        ]
        | None
    ) = None
    token_secret_ref: SecretKeyRef | None = None
    adopt_group: bool | None = None
    kafka: KafkaRef | None = None


# --- spec.sessionTimeout ------------------------------------------------------------------------------------------


class SessionTimeoutSpec(Declared, frozen=True):
    """``spec.sessionTimeout``; the CRD's default when the fleet sets none."""

    policy: SessionTimeoutPolicy = SessionTimeoutPolicy.AUTO
    min_ms: Annotated[int, SESSION_MS] = 6_000
    max_ms: Annotated[int, SESSION_MS] = 1_800_000
    #: Below 1 the timeout would expire during an ordinary restart: every restart would cost two rebalances.
    safety_factor: Annotated[float, Meta(ge=1)] = 1.5
    fixed_ms: Annotated[int, SESSION_MS] | None = None  # set exactly when policy is Fixed (a CEL rule)


# --- the stateful fields ------------------------------------------------------------------------------------------


class ClaimTemplateMetadata(Declared, frozen=True):
    name: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=63,
            pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            extra={
                "invalid": "must be a DNS label (at most 63 lower-case letters, digits and '-'): it names the"
                " pods' volume"
            },
        ),
    ]
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ClaimTemplateShape(Declared, frozen=True):
    """What the CRD declares of a volume claim template (kept as given: ``spec`` is a PersistentVolumeClaimSpec
    the API server checks in full)."""

    metadata: ClaimTemplateMetadata
    spec: dict[str, Any]
    api_version: str | None = None
    kind: str | None = None


class ClaimRetentionDeclared(Declared, frozen=True):
    """``spec.persistentVolumeClaimRetentionPolicy`` as given (``spec_stateful.ClaimRetentionPolicy`` is what the
    operator makes of it: unset is Kubernetes' Retain)."""

    when_deleted: ClaimRetention | None = None
    when_scaled: ClaimRetention | None = None


class RollingUpdate(Declared, frozen=True):
    partition: Annotated[int, Meta(ge=0, le=INT32)] | None = None
    #: A count (at least 1) or a percentage (a CEL rule).
    max_unavailable: int | str | None = None


class UpdateStrategyDeclared(Declared, frozen=True):
    """``spec.updateStrategy`` (``spec_stateful.UpdateStrategy`` is what the operator makes of it)."""

    type: UpdateStrategyType = UpdateStrategyType.ROLLING_UPDATE
    rolling_update: RollingUpdate | None = None


class DisruptionBudget(Declared, frozen=True):
    """``spec.podDisruptionBudget``: the PodDisruptionBudget the operator keeps for the fleet's pods."""

    enabled: bool = True
    #: Pods a voluntary disruption (a node drain) may take at once: a count or ``"N%"`` (a CEL rule).
    max_unavailable: int | str = 1


# --- spec.template ------------------------------------------------------------------------------------------------


class ContainerShape(Declared, frozen=True):
    """What the CRD declares of a container (the rest is kept as given)."""

    name: Annotated[str, Meta(min_length=1)]
    image: Annotated[str, Meta(min_length=1)]
    env: list[dict[str, Any]] | None = None


class InitContainerShape(Declared, frozen=True):
    """An init container: its image is the API server's to check (the CRD requires only a name)."""

    name: Annotated[str, Meta(min_length=1)]
    env: list[dict[str, Any]] | None = None


class PodSpecShape(Declared, frozen=True):
    containers: Annotated[list[ContainerShape], Meta(min_length=1, extra={"item": "container"})]
    init_containers: list[InitContainerShape] | None = None


class PodTemplateMetadata(Declared, frozen=True):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodTemplateShape(Declared, frozen=True):
    """What the CRD declares of ``spec.template`` (a PodTemplateSpec, kept as given)."""

    spec: PodSpecShape
    metadata: PodTemplateMetadata | None = None


# --- spec ---------------------------------------------------------------------------------------------------------


class FleetSpecDeclared(Declared, frozen=True):
    """``spec``, property by property (``spec.parse_fleet_spec`` makes it a ``spec.FleetSpec``)."""

    replicas: Annotated[int, Meta(ge=0, le=10_000)]
    template: Annotated[dict[str, Any], Meta(extra={"shape": PodTemplateShape})]
    group_id: (
        Annotated[
            str,
            Meta(
                min_length=1,
                max_length=255,
                pattern=r"^[A-Za-z0-9._-]+$",
                extra={"invalid": "may hold only ASCII letters, digits, '.', '_' and '-'"},
            ),
        ]
        | None
    ) = None
    coordinator: Coordinator | None = None
    session_timeout: SessionTimeoutSpec = SessionTimeoutSpec()
    rebalance_timeout_ms: Annotated[int, Meta(ge=1_000, le=INT32)] = 300_000
    pre_register: bool = True
    leave_on_scale_down: bool = True
    pod_management_policy: Literal["OrderedReady", "Parallel"] = "OrderedReady"
    delete_group_on_delete: bool | None = None
    volume_claim_templates: (
        Annotated[list[Annotated[dict[str, Any], Meta(extra={"shape": ClaimTemplateShape})]], Meta(max_length=16)]
        | None
    ) = None
    persistent_volume_claim_retention_policy: ClaimRetentionDeclared | None = None
    update_strategy: UpdateStrategyDeclared | None = None
    pod_disruption_budget: DisruptionBudget = DisruptionBudget()


def _prepare(*declared: type[Declared]) -> None:
    """Have msgspec build each Struct's conversion information now, at import, in one thread. msgspec builds it the
    first time a value is converted to the type; Kopf runs synchronous handlers (the claims index) in worker threads,
    and several of them converting a first fleet at once crashed the operator with SIGSEGV in msgspec's ``_core``."""
    for struct in declared:
        with contextlib.suppress(msgspec.ValidationError):  # a required field missing: built all the same
            msgspec.convert({}, struct, strict=True)


_prepare(FleetSpecDeclared, PodTemplateShape, ClaimTemplateShape)
