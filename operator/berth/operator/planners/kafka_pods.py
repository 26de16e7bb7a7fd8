"""What a Kafka fleet's pods are given to reach their cluster: the ``BERTH_KAFKA_*`` environment and the Secret
volumes for TLS, planned from the fleet's ``spec.coordinator.kafka`` (``planners.statefulset`` puts them into every
container).

Rules:

- ``BERTH_KAFKA_GROUP_PROTOCOL`` says which protocol the fleet's consumers use (``classic`` or ``consumer``). On
  the consumer protocol the session timeout and heartbeat interval are the group's configs (the operator sets
  them): the pods get no ``BERTH_SESSION_TIMEOUT_MS`` or ``BERTH_HEARTBEAT_INTERVAL_MS`` (clients refuse
  ``session.timeout.ms`` and ``heartbeat.interval.ms`` there) and no assignor setting either; on classic they do.
- Secrets reach pods only through ``secretKeyRef`` or a Secret volume, never as values: the password
  (``passwordKey``), the username when the Secret has a key for it, else the username the operator resolved (from
  ``sasl.jaas.config`` or the Secret's name: a principal's name, not a secret) as a value; the Secret's
  ``sasl.jaas.config`` (optional) for Java clients.
- TLS: the CA bundle as ``BERTH_KAFKA_SSL_CA_PEM`` (a secretKeyRef, as before) and as a file,
  ``/etc/berth/kafka/ca/ca.crt`` (``BERTH_KAFKA_SSL_CA_FILE``); a client certificate's Secret is mounted whole at
  ``/etc/berth/kafka/client`` (certificate, key, and Strimzi's ``user.p12``/``user.password`` for Java keystores),
  read-only, in a mode the container's user can read (``planners.pod_credentials``: 0440 with the pod's
  ``fsGroup``, else 0444; the fleet's ``securityContext`` as it is), named by ``BERTH_KAFKA_SSL_CERT_FILE``,
  ``BERTH_KAFKA_SSL_KEY_FILE``, ``BERTH_KAFKA_SSL_KEYSTORE_FILE`` (and ``BERTH_KAFKA_SSL_KEYSTORE_PASSWORD``, an
  optional secretKeyRef). Whole-directory mounts, so a rotated certificate reaches running pods without a restart.
"""

from __future__ import annotations

from typing import Any

from berth.operator.planners.coordinator_target import KafkaTarget
from berth.operator.planners.pod_credentials import secret_mode
from berth.operator.spec.fleet import Fleet, GroupProtocolName

ENV_KAFKA_BOOTSTRAP_SERVERS = "BERTH_KAFKA_BOOTSTRAP_SERVERS"
ENV_KAFKA_SECURITY_PROTOCOL = "BERTH_KAFKA_SECURITY_PROTOCOL"
ENV_KAFKA_SASL_MECHANISM = "BERTH_KAFKA_SASL_MECHANISM"
ENV_KAFKA_SASL_USERNAME = "BERTH_KAFKA_SASL_USERNAME"
ENV_KAFKA_SASL_PASSWORD = "BERTH_KAFKA_SASL_PASSWORD"
ENV_KAFKA_SASL_JAAS_CONFIG = "BERTH_KAFKA_SASL_JAAS_CONFIG"
ENV_KAFKA_SSL_CA_PEM = "BERTH_KAFKA_SSL_CA_PEM"
ENV_KAFKA_SSL_CA_FILE = "BERTH_KAFKA_SSL_CA_FILE"
ENV_KAFKA_SSL_CERT_FILE = "BERTH_KAFKA_SSL_CERT_FILE"
ENV_KAFKA_SSL_KEY_FILE = "BERTH_KAFKA_SSL_KEY_FILE"
ENV_KAFKA_SSL_KEYSTORE_FILE = "BERTH_KAFKA_SSL_KEYSTORE_FILE"
ENV_KAFKA_SSL_KEYSTORE_PASSWORD = "BERTH_KAFKA_SSL_KEYSTORE_PASSWORD"
ENV_KAFKA_GROUP_PROTOCOL = "BERTH_KAFKA_GROUP_PROTOCOL"

CA_VOLUME = "berth-kafka-ca"
CA_DIR = "/etc/berth/kafka/ca"
CA_FILE = "ca.crt"
CLIENT_VOLUME = "berth-kafka-client"
CLIENT_DIR = "/etc/berth/kafka/client"
#: Strimzi's KafkaUser (tls) keys for Java keystores: mounted with the rest of the Secret when present.
KEYSTORE_KEY = "user.p12"
KEYSTORE_PASSWORD_KEY = "user.password"
#: The volumes this module owns (a template's own volumes or mounts of these names are replaced).
VOLUMES = (CA_VOLUME, CLIENT_VOLUME)


def consumer_protocol(fleet: Fleet) -> bool:
    """The fleet's consumers use KIP-848's consumer protocol (its session timeout is the group's config)."""
    kafka = fleet.spec.coordinator.kafka
    return kafka is not None and kafka.group_protocol is GroupProtocolName.CONSUMER


def kafka_member_env(fleet: Fleet, target: KafkaTarget, *, username: str | None = None) -> dict[str, str]:
    """The plain-valued BERTH_KAFKA_* variables (``username``: the principal's name when the Secret has no key
    for it)."""
    kafka = fleet.spec.coordinator.kafka
    protocol = kafka.group_protocol if kafka is not None else GroupProtocolName.CLASSIC
    env = {
        ENV_KAFKA_BOOTSTRAP_SERVERS: target.bootstrap_servers,
        ENV_KAFKA_SECURITY_PROTOCOL: target.security_protocol.value,
        ENV_KAFKA_GROUP_PROTOCOL: protocol.value,
    }
    if target.sasl_mechanism:
        env[ENV_KAFKA_SASL_MECHANISM] = target.sasl_mechanism
        if username is not None:
            env[ENV_KAFKA_SASL_USERNAME] = username
    if target.ca is not None:
        env[ENV_KAFKA_SSL_CA_FILE] = f"{CA_DIR}/{CA_FILE}"
    certificate = target.client_certificate
    if certificate is not None:
        env[ENV_KAFKA_SSL_CERT_FILE] = f"{CLIENT_DIR}/{certificate.certificate_key}"
        env[ENV_KAFKA_SSL_KEY_FILE] = f"{CLIENT_DIR}/{certificate.private_key_key}"
        env[ENV_KAFKA_SSL_KEYSTORE_FILE] = f"{CLIENT_DIR}/{KEYSTORE_KEY}"
    return env


def kafka_secret_env(target: KafkaTarget, member_env: dict[str, str]) -> list[dict[str, Any]]:
    """The BERTH_KAFKA_* variables that come from Secrets (secretKeyRefs)."""
    env: list[dict[str, Any]] = []
    credentials = target.credentials
    if target.sasl_mechanism and credentials is not None:
        if ENV_KAFKA_SASL_USERNAME not in member_env:
            env.append(_secret_key(ENV_KAFKA_SASL_USERNAME, credentials.name, credentials.username_key))
        env.append(_secret_key(ENV_KAFKA_SASL_PASSWORD, credentials.name, credentials.password_key))
        env.append(
            _secret_key(ENV_KAFKA_SASL_JAAS_CONFIG, credentials.name, credentials.jaas_config_key, optional=True)
        )
    if target.ca is not None:
        env.append(_secret_key(ENV_KAFKA_SSL_CA_PEM, target.ca.name, target.ca.key))
    if target.client_certificate is not None:
        name = target.client_certificate.name
        env.append(_secret_key(ENV_KAFKA_SSL_KEYSTORE_PASSWORD, name, KEYSTORE_PASSWORD_KEY, optional=True))
    return env


def with_kafka_tls(template: dict[str, Any], target: KafkaTarget) -> dict[str, Any]:
    """The pod template with the CA bundle and the client certificate mounted (see the module rules)."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if target.ca is not None:
        items = [{"key": target.ca.key, "path": CA_FILE}]
        volumes.append({"name": CA_VOLUME, "secret": {"secretName": target.ca.name, "items": items}})
        mounts.append({"name": CA_VOLUME, "mountPath": CA_DIR, "readOnly": True})
    if target.client_certificate is not None:
        secret = {"secretName": target.client_certificate.name, "defaultMode": secret_mode(template)}
        volumes.append({"name": CLIENT_VOLUME, "secret": secret})
        mounts.append({"name": CLIENT_VOLUME, "mountPath": CLIENT_DIR, "readOnly": True})
    if not volumes:
        return template
    pod_spec = template["spec"]
    pod_spec["volumes"] = [v for v in pod_spec.get("volumes") or [] if v.get("name") not in VOLUMES] + volumes
    paths = {mount["mountPath"] for mount in mounts}
    for kind in ("initContainers", "containers"):
        for container in pod_spec.get(kind) or []:
            kept = [
                m
                for m in container.get("volumeMounts") or []
                if m.get("name") not in VOLUMES and m.get("mountPath") not in paths
            ]
            container["volumeMounts"] = kept + [dict(mount) for mount in mounts]
    return template


def _secret_key(name: str, secret: str, key: str, *, optional: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}
