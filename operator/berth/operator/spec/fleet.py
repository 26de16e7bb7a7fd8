"""Parse a ConsumerFleet object into what the operator works with: frozen, snake_case, every default applied.

Owns the meaning of ``spec`` (docs/architecture.md "The ConsumerFleet resource", docs/operator.md). Rules:

- Every field, its type, default, enum and bounds are declared once, in ``spec.declaration`` (checked against the
  CRD, deploy/crds, by a test); this module adds what the CRD says with CEL rules (one field depending on another:
  ``fixedMs`` with policy Fixed, ``minMs`` below ``maxMs``, ``kafka`` exclusive with ``url``) and the operator's own
  reading: ``groupId`` defaults to ``metadata.name``, and the object's name must be able to name a Service and pods.
  So an object that skipped admission (an old object, a local demo fleet) means what an admitted one does.
  The stateful fields (claim templates, their retention, update strategy, disruption budget) are ``spec_stateful``'s.
- Every invalid input raises :class:`SpecError` naming the offending field by its path in the object
  (``spec.sessionTimeout.fixedMs``), because the message becomes a status condition and an Event.
- Nothing here talks to Kubernetes or reads the clock.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from berth.operator.spec.checks import SpecError as SpecError
from berth.operator.spec.checks import decode, integer, mapping, optional_string, string
from berth.operator.spec.declaration import (
    CertificateSecretRef,
    Coordinator,
    FleetSpecDeclared,
    GroupProtocolName,
    KafkaRef,
    PodTemplateShape,
    SaslMechanism,
    SecretKeyRef,
    SecretRef,
    SecurityProtocol,
    SessionTimeoutPolicy,
    SessionTimeoutSpec,
)
from berth.operator.spec.stateful import StatefulSpec, parse_stateful_spec

__all__ = [
    "CertificateSecretRef",
    "CoordinatorRef",
    "Fleet",
    "FleetSpec",
    "GroupProtocolName",
    "KafkaDefaults",
    "KafkaRef",
    "OperatorDefaults",
    "SecretKeyRef",
    "SecretRef",
    "SecurityProtocol",
    "SessionTimeoutPolicy",
    "SessionTimeoutSpec",
    "SpecError",
    "parse_fleet",
    "parse_fleet_spec",
    "resolve_coordinator_url",
]

#: A StatefulSet's pods carry a ``controller-revision-hash`` label ``<name>-<10 chars>``; label values stop at 63.
MAX_FLEET_NAME_LENGTH = 52
#: The headless Service is named like the fleet, and Service names are DNS-1035 labels.
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
#: The CRD's maximum of spec.replicas (the operator's --max-replicas may be lower).
MAX_REPLICAS = 10_000
#: The CRD's range for session timeouts (KIP-345 caps the broker's maximum at 30 minutes).
SESSION_MS_RANGE = (1_000, 1_800_000)
SASL_MECHANISMS: tuple[str, ...] = get_args(SaslMechanism)


@dataclass(frozen=True, slots=True)
class CoordinatorRef:
    url: str | None  # None: the operator's default coordinator URL (unless kafka is set)
    token_secret_ref: SecretKeyRef | None
    kafka: KafkaRef | None = None  # exclusive with url, tokenSecretRef and adoptGroup
    #: Claim the group even when it is in use (members or committed offsets) and owned by no fleet (Berth only).
    adopt_group: bool = False


@dataclass(frozen=True, slots=True)
class FleetSpec:
    group_id: str
    replicas: int
    coordinator: CoordinatorRef
    session_timeout: SessionTimeoutSpec
    rebalance_timeout_ms: int
    pre_register: bool
    leave_on_scale_down: bool
    #: OrderedReady (one pod at a time) or Parallel (new pods together: on Kafka, which has no pre-registration,
    #: that is what makes k new pods one rebalance). Set when the StatefulSet is created (immutable after).
    pod_management_policy: str
    #: Delete the group (and with it its committed offsets) when the fleet is deleted; None: the operator's
    #: default, true on Berth's coordinator and false on Kafka.
    delete_group_on_delete: bool | None
    #: The PodTemplateSpec as given (a private deep copy). Treat as read-only: planners copy before changing it.
    template: Mapping[str, Any]
    #: Per-pod volumes and their retention, the update strategy, the disruption budget (``spec_stateful``).
    stateful: StatefulSpec = field(default_factory=StatefulSpec)


@dataclass(frozen=True, slots=True)
class Fleet:
    """A parsed ConsumerFleet: the identity the planners need plus its spec."""

    name: str
    namespace: str
    uid: str | None  # absent for a local demo fleet; required to own Kubernetes objects
    generation: int | None
    spec: FleetSpec


@dataclass(frozen=True, slots=True)
class OperatorDefaults:
    """What the operator supplies when a fleet leaves it out (its command line and environment)."""

    coordinator_url: str | None = None  # --coordinator-url / BERTH_COORDINATOR_URL
    scheduling_allowance_ms: int = 10_000  # time for a replacement pod to be scheduled and its image started
    preferred_heartbeat_interval_ms: int = 3_000  # Kafka's default heartbeat.interval.ms
    kafka: KafkaDefaults | None = None  # --kafka-bootstrap-servers ...: the default Kafka connection
    #: Bootstrap lists of the other Kafka clusters fleets may name (--kafka-trusted-bootstrap), besides the default.
    kafka_trusted: tuple[str, ...] = ()
    #: URLs of the other Berth coordinators fleets may name (--trusted-coordinator), besides the default.
    coordinators_trusted: tuple[str, ...] = ()
    #: The largest spec.replicas the operator acts on (--max-replicas); the CRD allows at most 10,000.
    max_replicas: int = 1_000
    #: The most fleets the operator serves, in all and per namespace (--max-fleets, --max-fleets-per-namespace;
    #: 0: no bound): beyond them the newest fleets are refused.
    max_fleets: int = 2_000
    max_fleets_per_namespace: int = 500


@dataclass(frozen=True, slots=True)
class KafkaDefaults:
    """The operator's default Kafka connection: what a fleet's ``spec.coordinator.kafka`` leaves out."""

    bootstrap_servers: str
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: str | None = None


def parse_fleet(obj: Mapping[str, Any]) -> Fleet:
    """Parse a ConsumerFleet object; raise :class:`SpecError` naming the first invalid field."""
    metadata = mapping(obj.get("metadata"), "metadata")
    name = _fleet_name(metadata.get("name"))
    namespace = optional_string(metadata.get("namespace"), "metadata.namespace") or "default"
    uid = optional_string(metadata.get("uid"), "metadata.uid")
    generation = metadata.get("generation")
    if generation is not None:
        generation = integer(generation, "metadata.generation", minimum=0)
    spec = parse_fleet_spec(mapping(obj.get("spec"), "spec"), fleet_name=name)
    return Fleet(name=name, namespace=namespace, uid=uid, generation=generation, spec=spec)


def parse_fleet_spec(spec: Mapping[str, Any], *, fleet_name: str) -> FleetSpec:
    """Parse ``spec`` alone (``fleet_name`` supplies the groupId default)."""
    declared = decode(spec, FleetSpecDeclared, "spec")
    decode(declared.template, PodTemplateShape, "spec.template")
    return FleetSpec(
        group_id=declared.group_id or fleet_name,
        replicas=declared.replicas,
        coordinator=_coordinator(declared.coordinator),
        session_timeout=_session_timeout(declared.session_timeout),
        rebalance_timeout_ms=declared.rebalance_timeout_ms,
        pre_register=declared.pre_register,
        leave_on_scale_down=declared.leave_on_scale_down,
        pod_management_policy=declared.pod_management_policy,
        delete_group_on_delete=declared.delete_group_on_delete,
        # A private copy of the template as given: the caller's dict (Kopf's body) must not change under a frozen
        # FleetSpec.
        template=copy.deepcopy(dict(spec["template"])),
        stateful=parse_stateful_spec(declared, spec),
    )


def resolve_coordinator_url(fleet: Fleet, defaults: OperatorDefaults) -> str:
    """The coordinator URL the fleet's members use: its own, else the operator's default (Berth fleets only)."""
    if fleet.spec.coordinator.kafka is not None:
        raise SpecError("spec.coordinator.url", "the fleet's group lives on Kafka (spec.coordinator.kafka)")
    url = fleet.spec.coordinator.url or defaults.coordinator_url
    if not url:
        raise SpecError(
            "spec.coordinator.url",
            "is not set and the operator has no default (--coordinator-url or BERTH_COORDINATOR_URL)",
        )
    return url


def _fleet_name(value: object) -> str:
    name = string(value, "metadata.name")
    if len(name) > MAX_FLEET_NAME_LENGTH:
        raise SpecError(
            "metadata.name",
            f"{name!r} is {len(name)} characters; at most {MAX_FLEET_NAME_LENGTH} fit the StatefulSet's pod labels",
        )
    if not _DNS_1035_LABEL.match(name):
        raise SpecError(
            "metadata.name",
            f"{name!r} must be lowercase letters, digits and '-', starting with a letter (it names a Service)",
        )
    return name


def _coordinator(declared: Coordinator | None) -> CoordinatorRef:
    if declared is None:
        return CoordinatorRef(url=None, token_secret_ref=None)
    if declared.kafka is not None:  # the CRD's CEL rule
        for berth_only, value in (
            ("url", declared.url),
            ("tokenSecretRef", declared.token_secret_ref),
            ("adoptGroup", declared.adopt_group),
        ):
            if value is not None:
                raise SpecError(
                    f"spec.coordinator.{berth_only}", "is Berth's coordinator's; it cannot be set together with kafka"
                )
        kafka = declared.kafka
        protocol = kafka.security_protocol
        if kafka.client_certificate_secret_ref is not None and protocol is not None and not protocol.uses_tls:
            raise SpecError(
                "spec.coordinator.kafka.clientCertificateSecretRef",
                f"is a TLS client certificate: securityProtocol {protocol.value} uses no TLS",
            )
        return CoordinatorRef(url=None, token_secret_ref=None, kafka=kafka)
    return CoordinatorRef(
        url=declared.url, token_secret_ref=declared.token_secret_ref, adopt_group=bool(declared.adopt_group)
    )


def _session_timeout(declared: SessionTimeoutSpec) -> SessionTimeoutSpec:
    """The CRD's CEL rules on ``sessionTimeout``, and a safety factor that is a number (not NaN)."""
    if declared.min_ms > declared.max_ms:
        raise SpecError("spec.sessionTimeout.maxMs", f"{declared.max_ms} is below minMs {declared.min_ms}")
    if not math.isfinite(declared.safety_factor):
        raise SpecError("spec.sessionTimeout.safetyFactor", f"{declared.safety_factor} is not a number")
    fixed = declared.policy is SessionTimeoutPolicy.FIXED
    if declared.fixed_ms is not None and not fixed:
        raise SpecError("spec.sessionTimeout.fixedMs", "applies only to policy Fixed: remove it or set policy: Fixed")
    if declared.fixed_ms is None and fixed:
        raise SpecError("spec.sessionTimeout.fixedMs", "is required when policy is Fixed")
    return declared
