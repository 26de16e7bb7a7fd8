"""Parse and validate a ConsumerFleet object into frozen dataclasses.

Owns the meaning of ``spec`` (docs/architecture.md "The ConsumerFleet resource", docs/operator.md): its fields,
their defaults and what makes them invalid.
Rules:

- Input is the plain dict Kubernetes returns (camelCase keys); output is immutable snake_case dataclasses.
- Defaults and validation mirror the CRD's schema (deploy/crds), so an object that skipped admission (an old
  object, a local demo fleet) means the same thing: ``groupId`` = ``metadata.name``, ``sessionTimeout`` =
  ``{Auto, 6000, 1800000, 1.5}``, ``rebalanceTimeoutMs`` 300000, ``preRegister`` and ``leaveOnScaleDown`` true.
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
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from berth.operator.spec_checks import SpecError as SpecError
from berth.operator.spec_checks import boolean as _bool
from berth.operator.spec_checks import get_or_default as _get
from berth.operator.spec_checks import integer as _int
from berth.operator.spec_checks import mapping as _mapping
from berth.operator.spec_checks import number as _number
from berth.operator.spec_checks import optional_string as _optional_str
from berth.operator.spec_checks import string as _str
from berth.operator.spec_stateful import StatefulSpec, parse_stateful_spec

#: A StatefulSet's pods carry a ``controller-revision-hash`` label ``<name>-<10 chars>``; label values stop at 63.
MAX_FLEET_NAME_LENGTH = 52
#: The headless Service is named like the fleet, and Service names are DNS-1035 labels.
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
#: docs/api.md §2 allows 1..255 bytes of UTF-8; the CRD narrows it to ASCII that reads the same in URLs, token globs
#: and environment variables.
MAX_GROUP_ID_LENGTH = 255
_GROUP_ID = re.compile(r"^[A-Za-z0-9._-]+$")
#: Kafka carries counts and timeouts as int32.
MAX_INT32 = 2**31 - 1
#: The CRD's maximum of spec.replicas (the operator's --max-replicas may be lower).
MAX_REPLICAS = 10_000
#: The CRD's range for session timeouts (KIP-345 caps the broker's maximum at 30 minutes) and rebalance timeouts.
SESSION_MS_RANGE = (1_000, 1_800_000)
MIN_REBALANCE_TIMEOUT_MS = 1_000

DEFAULT_SESSION_MIN_MS = 6_000
DEFAULT_SESSION_MAX_MS = 1_800_000
DEFAULT_SAFETY_FACTOR = 1.5
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000


class SessionTimeoutPolicy(StrEnum):
    AUTO = "Auto"
    FIXED = "Fixed"


@dataclass(frozen=True, slots=True)
class SecretKeyRef:
    name: str
    key: str


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


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class SecretRef:
    name: str


@dataclass(frozen=True, slots=True)
class KafkaRef:
    """``spec.coordinator.kafka``: a Kafka cluster holds the group. Unset fields come from the operator's default
    Kafka connection (``--kafka-*``)."""

    bootstrap_servers: str | None
    security_protocol: SecurityProtocol | None
    sasl_mechanism: str | None
    #: A Secret in the fleet's namespace with keys ``username`` and ``password``: the fleet's own principal,
    #: which both its pods and the operator (for this fleet's group) authenticate as.
    credentials_secret_ref: SecretRef | None
    #: A Secret key holding the PEM CA bundle that signs the brokers' certificates (TLS).
    ca_secret_ref: SecretKeyRef | None


@dataclass(frozen=True, slots=True)
class CoordinatorRef:
    url: str | None  # None: the operator's default coordinator URL (unless kafka is set)
    token_secret_ref: SecretKeyRef | None
    kafka: KafkaRef | None = None  # exclusive with url, tokenSecretRef and adoptGroup
    #: Claim the group even when it is in use (members or committed offsets) and owned by no fleet (Berth only).
    adopt_group: bool = False


@dataclass(frozen=True, slots=True)
class SessionTimeoutSpec:
    policy: SessionTimeoutPolicy = SessionTimeoutPolicy.AUTO
    min_ms: int = DEFAULT_SESSION_MIN_MS
    max_ms: int = DEFAULT_SESSION_MAX_MS
    safety_factor: float = DEFAULT_SAFETY_FACTOR
    fixed_ms: int | None = None  # set exactly when policy is Fixed


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
    metadata = _mapping(obj.get("metadata"), "metadata")
    name = _fleet_name(metadata.get("name"))
    namespace = _optional_str(metadata.get("namespace"), "metadata.namespace") or "default"
    uid = _optional_str(metadata.get("uid"), "metadata.uid")
    generation = metadata.get("generation")
    if generation is not None:
        generation = _int(generation, "metadata.generation", minimum=0)
    spec = parse_fleet_spec(_mapping(obj.get("spec"), "spec"), fleet_name=name)
    return Fleet(name=name, namespace=namespace, uid=uid, generation=generation, spec=spec)


def parse_fleet_spec(spec: Mapping[str, Any], *, fleet_name: str) -> FleetSpec:
    """Parse ``spec`` alone (``fleet_name`` supplies the groupId default)."""
    group_id = _group_id(_get(spec, "groupId", fleet_name))
    if "replicas" not in spec:
        raise SpecError("spec.replicas", "is required")
    return FleetSpec(
        group_id=group_id,
        replicas=_int(spec["replicas"], "spec.replicas", minimum=0, maximum=MAX_REPLICAS),
        coordinator=_coordinator(spec.get("coordinator")),
        session_timeout=_session_timeout(spec.get("sessionTimeout")),
        rebalance_timeout_ms=_int(
            _get(spec, "rebalanceTimeoutMs", DEFAULT_REBALANCE_TIMEOUT_MS),
            "spec.rebalanceTimeoutMs",
            minimum=MIN_REBALANCE_TIMEOUT_MS,
            maximum=MAX_INT32,
        ),
        pre_register=_bool(_get(spec, "preRegister", True), "spec.preRegister"),
        leave_on_scale_down=_bool(_get(spec, "leaveOnScaleDown", True), "spec.leaveOnScaleDown"),
        pod_management_policy=_pod_management_policy(_get(spec, "podManagementPolicy", "OrderedReady")),
        delete_group_on_delete=(
            None
            if spec.get("deleteGroupOnDelete") is None
            else _bool(spec["deleteGroupOnDelete"], "spec.deleteGroupOnDelete")
        ),
        template=_template(spec.get("template")),
        stateful=parse_stateful_spec(spec),
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
    name = _str(value, "metadata.name")
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


def _group_id(value: object) -> str:
    group_id = _str(value, "spec.groupId")
    if len(group_id) > MAX_GROUP_ID_LENGTH:
        raise SpecError("spec.groupId", f"is {len(group_id)} characters; at most {MAX_GROUP_ID_LENGTH}")
    if not _GROUP_ID.match(group_id):
        raise SpecError("spec.groupId", f"{group_id!r} may hold only ASCII letters, digits, '.', '_' and '-'")
    return group_id


def _pod_management_policy(value: object) -> str:
    if value not in ("OrderedReady", "Parallel"):
        raise SpecError("spec.podManagementPolicy", f"{value!r} is not one of OrderedReady, Parallel")
    return str(value)


def _kafka(value: object) -> KafkaRef:
    kafka = _mapping(value, "spec.coordinator.kafka")
    bootstrap = _optional_str(kafka.get("bootstrapServers"), "spec.coordinator.kafka.bootstrapServers")
    protocol_value = kafka.get("securityProtocol")
    protocol = None
    if protocol_value is not None:
        try:
            protocol = SecurityProtocol(protocol_value)
        except ValueError:
            choices = ", ".join(p.value for p in SecurityProtocol)
            raise SpecError(
                "spec.coordinator.kafka.securityProtocol", f"{protocol_value!r} is not one of {choices}"
            ) from None
    mechanism = _optional_str(kafka.get("saslMechanism"), "spec.coordinator.kafka.saslMechanism")
    if mechanism is not None and mechanism not in SASL_MECHANISMS:
        raise SpecError(
            "spec.coordinator.kafka.saslMechanism", f"{mechanism!r} is not one of {', '.join(SASL_MECHANISMS)}"
        )
    credentials = None
    if kafka.get("credentialsSecretRef") is not None:
        ref = _mapping(kafka["credentialsSecretRef"], "spec.coordinator.kafka.credentialsSecretRef")
        credentials = SecretRef(_str(ref.get("name"), "spec.coordinator.kafka.credentialsSecretRef.name"))
    ca = None
    if kafka.get("caSecretRef") is not None:
        ref = _mapping(kafka["caSecretRef"], "spec.coordinator.kafka.caSecretRef")
        ca = SecretKeyRef(
            name=_str(ref.get("name"), "spec.coordinator.kafka.caSecretRef.name"),
            key=_str(_get(ref, "key", "ca.crt"), "spec.coordinator.kafka.caSecretRef.key"),
        )
    return KafkaRef(bootstrap, protocol, mechanism, credentials, ca)


def _coordinator(value: object) -> CoordinatorRef:
    if value is None:
        return CoordinatorRef(url=None, token_secret_ref=None)
    coordinator = _mapping(value, "spec.coordinator")
    if coordinator.get("kafka") is not None:
        for berth_only in ("url", "tokenSecretRef", "adoptGroup"):
            if coordinator.get(berth_only) is not None:
                raise SpecError(
                    f"spec.coordinator.{berth_only}", "is Berth's coordinator's; it cannot be set together with kafka"
                )
        return CoordinatorRef(url=None, token_secret_ref=None, kafka=_kafka(coordinator["kafka"]))
    url = _optional_str(coordinator.get("url"), "spec.coordinator.url")
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SpecError("spec.coordinator.url", f"{url!r} is not an http:// or https:// URL with a host")
    ref = coordinator.get("tokenSecretRef")
    token_secret_ref = None
    if ref is not None:
        ref = _mapping(ref, "spec.coordinator.tokenSecretRef")
        token_secret_ref = SecretKeyRef(
            name=_str(ref.get("name"), "spec.coordinator.tokenSecretRef.name"),
            key=_str(ref.get("key"), "spec.coordinator.tokenSecretRef.key"),
        )
    adopt = _bool(_get(coordinator, "adoptGroup", False), "spec.coordinator.adoptGroup")
    return CoordinatorRef(url=url, token_secret_ref=token_secret_ref, adopt_group=adopt)


def _session_timeout(value: object) -> SessionTimeoutSpec:
    if value is None:
        return SessionTimeoutSpec()
    raw = _mapping(value, "spec.sessionTimeout")
    policy_value = _get(raw, "policy", SessionTimeoutPolicy.AUTO.value)
    try:
        policy = SessionTimeoutPolicy(policy_value)
    except ValueError:
        raise SpecError("spec.sessionTimeout.policy", f"{policy_value!r} is not one of Auto, Fixed") from None
    low, high = SESSION_MS_RANGE
    min_ms = _int(_get(raw, "minMs", DEFAULT_SESSION_MIN_MS), "spec.sessionTimeout.minMs", minimum=low, maximum=high)
    max_ms = _int(_get(raw, "maxMs", DEFAULT_SESSION_MAX_MS), "spec.sessionTimeout.maxMs", minimum=low, maximum=high)
    if min_ms > max_ms:
        raise SpecError("spec.sessionTimeout.maxMs", f"{max_ms} is below minMs {min_ms}")
    safety_factor = _number(_get(raw, "safetyFactor", DEFAULT_SAFETY_FACTOR), "spec.sessionTimeout.safetyFactor")
    # Below 1 the timeout would expire during an ordinary restart: every restart would cost two rebalances.
    if not math.isfinite(safety_factor) or safety_factor < 1.0:
        raise SpecError("spec.sessionTimeout.safetyFactor", f"{safety_factor} is below 1.0")
    fixed_ms = raw.get("fixedMs")
    if fixed_ms is not None:
        if policy is not SessionTimeoutPolicy.FIXED:
            raise SpecError(
                "spec.sessionTimeout.fixedMs", "applies only to policy Fixed: remove it or set policy: Fixed"
            )
        fixed_ms = _int(fixed_ms, "spec.sessionTimeout.fixedMs", minimum=low, maximum=high)
    elif policy is SessionTimeoutPolicy.FIXED:
        raise SpecError("spec.sessionTimeout.fixedMs", "is required when policy is Fixed")
    return SessionTimeoutSpec(
        policy=policy, min_ms=min_ms, max_ms=max_ms, safety_factor=safety_factor, fixed_ms=fixed_ms
    )


def _template(value: object) -> Mapping[str, Any]:
    template = _mapping(value, "spec.template")
    pod_spec = _mapping(template.get("spec"), "spec.template.spec")
    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise SpecError("spec.template.spec.containers", "must list at least one container")
    for kind in ("containers", "initContainers"):
        listed = pod_spec.get(kind, [])
        if not isinstance(listed, list):
            raise SpecError(f"spec.template.spec.{kind}", "must be a list")
        for index, container in enumerate(listed):
            where = f"spec.template.spec.{kind}[{index}]"
            container = _mapping(container, where)
            _str(container.get("name"), f"{where}.name")
            if kind == "containers":  # as the CRD requires; the API server checks init containers' images
                _str(container.get("image"), f"{where}.image")
            if not isinstance(container.get("env", []), list):
                raise SpecError(f"{where}.env", "must be a list")
    metadata = template.get("metadata")
    if metadata is not None:
        labels = _mapping(metadata, "spec.template.metadata").get("labels")
        if labels is not None:
            for key, label in _mapping(labels, "spec.template.metadata.labels").items():
                if not isinstance(label, str):  # "" is a valid label value
                    raise SpecError(f"spec.template.metadata.labels[{key!r}]", f"must be a string, not {label!r}")
    # A private copy: the caller's dict (Kopf's body) must not change under a frozen FleetSpec.
    return copy.deepcopy(dict(template))
