"""Where a fleet's group lives, resolved and checked against what the operator trusts: Berth's coordinator or a
Kafka cluster.

Owns the rule "the operator connects only to endpoints it is configured to trust": a Berth coordinator URL is
trusted when it is, in the canonical form of ``planners.endpoints``, the default (``--coordinator-url``) or one of
``--trusted-coordinator`` — and the operator then uses the URL as configured, never the fleet's spelling of it; a
fleet's Kafka bootstrap list is trusted when every address in it belongs to the default connection's list or to
one ``--kafka-trusted-bootstrap`` list. A fleet naming anything else gets :class:`UntrustedEndpoint` and nothing is
sent there (above all not the operator's admin token). Rules:

- Pure: no I/O, no secrets (only references to Secrets).
- The target's ``identity`` names the endpoint for group claims: one group on one endpoint belongs to one fleet,
  so two fleets naming different brokers of the same trusted cluster still claim the same group.
- With SASL, the fleet must name its own credentials: the operator acts on a fleet's group as the fleet's own
  principal (docs/kafka.md, "Whose credentials"), so Kafka's ACLs bound what a fleet author can reach. A client
  certificate (mutual TLS: the principal is the certificate's subject) needs a protocol with TLS.
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.operator.planners.endpoints import (
    Endpoint,
    EndpointError,
    bootstrap_text,
    parse_bootstrap_servers,
    parse_coordinator_url,
)
from berth.operator.spec.fleet import (
    CertificateSecretRef,
    Fleet,
    OperatorDefaults,
    SecretKeyRef,
    SecretRef,
    SecurityProtocol,
    SpecError,
    resolve_coordinator_url,
)

#: How a Kafka cluster's identity starts (``KafkaTarget.identity``); a Berth coordinator's is its canonical URL.
KAFKA_IDENTITY_PREFIX = "kafka://"


def is_kafka_identity(identity: str) -> bool:
    return identity.startswith(KAFKA_IDENTITY_PREFIX)


class UntrustedEndpoint(Exception):
    """The fleet names an endpoint the operator is not configured to trust."""


@dataclass(frozen=True, slots=True)
class BerthTarget:
    url: str  # as the operator is configured with it: what it connects to and gives the pods
    endpoint: Endpoint  # canonical: what aliases of it compare equal as

    @property
    def identity(self) -> str:
        return self.endpoint.url

    def __str__(self) -> str:
        return self.url


@dataclass(frozen=True, slots=True)
class KafkaTarget:
    bootstrap: tuple[Endpoint, ...]  # the fleet's list (what its pods get), canonical
    cluster: tuple[Endpoint, ...]  # the trusted list it belongs to (its identity)
    security_protocol: SecurityProtocol
    sasl_mechanism: str | None
    credentials: SecretRef | None
    ca: SecretKeyRef | None
    #: The fleet's client certificate for mutual TLS (None: none).
    client_certificate: CertificateSecretRef | None = None

    @property
    def bootstrap_servers(self) -> str:
        return bootstrap_text(self.bootstrap)

    @property
    def identity(self) -> str:
        return f"{KAFKA_IDENTITY_PREFIX}{bootstrap_text(self.cluster)}"

    def __str__(self) -> str:
        return f"kafka://{self.bootstrap_servers}"


CoordinatorTarget = BerthTarget | KafkaTarget


def resolve_target(fleet: Fleet, defaults: OperatorDefaults) -> CoordinatorTarget:
    """The fleet's coordinator; :class:`SpecError` when the spec cannot name one, :class:`UntrustedEndpoint` when
    it names a Kafka cluster the operator does not trust."""
    kafka = fleet.spec.coordinator.kafka
    if kafka is None:
        return trusted_coordinator(resolve_coordinator_url(fleet, defaults), defaults)
    default = defaults.kafka
    text = kafka.bootstrap_servers or (default.bootstrap_servers if default else None)
    if not text:
        raise SpecError(
            "spec.coordinator.kafka.bootstrapServers",
            "is not set and the operator has no default Kafka connection (--kafka-bootstrap-servers)",
        )
    try:
        bootstrap = parse_bootstrap_servers(text)
    except EndpointError as error:
        raise SpecError("spec.coordinator.kafka.bootstrapServers", str(error)) from None
    cluster = trusted_cluster(bootstrap, defaults)
    protocol = kafka.security_protocol or (default.security_protocol if default else SecurityProtocol.PLAINTEXT)
    mechanism = kafka.sasl_mechanism or (default.sasl_mechanism if default else None)
    if protocol.uses_sasl:
        if mechanism is None:
            raise SpecError("spec.coordinator.kafka.saslMechanism", f"is required with {protocol.value}")
        if kafka.credentials_secret_ref is None:
            raise SpecError(
                "spec.coordinator.kafka.credentialsSecretRef",
                f"is required with {protocol.value}: the operator acts on the fleet's group as the fleet's own"
                " principal",
            )
    certificate = kafka.client_certificate_secret_ref
    if certificate is not None and not protocol.uses_tls:
        raise SpecError(
            "spec.coordinator.kafka.clientCertificateSecretRef",
            f"is a TLS client certificate: securityProtocol {protocol.value} uses no TLS",
        )
    return KafkaTarget(
        bootstrap=bootstrap,
        cluster=cluster,
        security_protocol=protocol,
        sasl_mechanism=mechanism if protocol.uses_sasl else None,
        credentials=kafka.credentials_secret_ref if protocol.uses_sasl else None,
        ca=kafka.ca_secret_ref,
        client_certificate=certificate,
    )


def trusted_coordinator(url: str, defaults: OperatorDefaults) -> BerthTarget:
    """The trusted coordinator ``url`` names (in any spelling of it); :class:`UntrustedEndpoint` when none.
    The message names the canonical endpoint only: a URL's other parts (a path, a query) never reach status."""
    try:
        endpoint = parse_coordinator_url(url)
    except EndpointError as error:
        raise SpecError("spec.coordinator.url", str(error)) from None
    trusted: dict[Endpoint, str] = {}
    for configured in (
        *([defaults.coordinator_url] if defaults.coordinator_url else []),
        *defaults.coordinators_trusted,
    ):
        try:
            trusted.setdefault(parse_coordinator_url(configured), configured)
        except EndpointError:  # the options parser refuses these at start-up
            continue
    if endpoint not in trusted:
        names = ", ".join(str(e) for e in trusted) or "none"
        raise UntrustedEndpoint(
            f"coordinator {endpoint} is not one the operator trusts (trusted: {names}; --coordinator-url,"
            " --trusted-coordinator): nothing is sent there"
        )
    return BerthTarget(trusted[endpoint], endpoint)


def trusted_clusters(defaults: OperatorDefaults) -> list[tuple[Endpoint, ...]]:
    """The Kafka clusters the operator trusts, each as its canonical bootstrap list (bad entries are skipped:
    the options parser refuses them at start-up)."""
    texts = ([defaults.kafka.bootstrap_servers] if defaults.kafka else []) + list(defaults.kafka_trusted)
    clusters = []
    for text in texts:
        try:
            clusters.append(parse_bootstrap_servers(text))
        except EndpointError:
            continue
    return clusters


def trusted_cluster(bootstrap: tuple[Endpoint, ...], defaults: OperatorDefaults) -> tuple[Endpoint, ...]:
    """The trusted cluster every address of ``bootstrap`` belongs to; :class:`UntrustedEndpoint` when none."""
    clusters = trusted_clusters(defaults)
    for cluster in clusters:
        if set(bootstrap) <= set(cluster):
            return cluster
    if not clusters:
        raise UntrustedEndpoint(
            f"the operator trusts no Kafka cluster, so it does not connect to {bootstrap_text(bootstrap)}"
            " (--kafka-bootstrap-servers, --kafka-trusted-bootstrap)"
        )
    raise UntrustedEndpoint(
        f"Kafka bootstrap servers {bootstrap_text(bootstrap)} are not a cluster the operator trusts"
        f" (trusted: {'; '.join(bootstrap_text(c) for c in clusters)}); nothing is sent there"
    )
