"""The blocking kafka-python (>= 3.0) calls the Kafka coordinator port makes; with
``berth.coordinator.client.kafka_groups`` (the group reading ``berth-groups`` shares), the only code of the operator
that imports kafka-python.

Every function takes a connected ``KafkaAdminClient`` and returns plain values. Rules:

- Removal is ONE LeaveGroup v3+ request naming members by ``group.instance.id`` with empty member ids, built here
  rather than through ``remove_group_members``, whose results are keyed by the echoed member id: Apache Kafka
  echoes the request's empty member id, kfake the resolved one. Results are matched by ``group_instance_id``.
  An empty list is refused before anything is sent (KIP-571 reads an empty list as "every member"). The same
  request removes a KIP-848 consumer-protocol member by instance id (Kafka >= 4.0, KAFKA-18188).
- A group is described once per look (``kafka_groups.describe_group``: ConsumerGroupDescribe, then the classic
  DescribeGroups v4+), never by listing the cluster's groups.
- The cluster's finalized ``group.version`` is read with the session bounds (``describe_features``: ApiVersions
  v3+ on a broker), so a consumer-protocol fleet is checked against it (``planners.kafka_features``).
- Session bounds come from DescribeConfigs on a broker: ``group.min/max.session.timeout.ms`` for classic groups,
  ``group.consumer.min/max.session.timeout.ms`` and ``group.consumer.min/max.heartbeat.interval.ms`` for
  consumer-protocol groups (Kafka's defaults when a broker lists none). A consumer-protocol group's session
  timeout and heartbeat interval are its group configs (IncrementalAlterConfigs on the GROUP resource, KIP-848).
- TLS: the CA bundle and a client certificate are PEM text from the fleet's Secrets; Python's ``ssl`` loads a
  certificate chain only from files, so the certificate and key are handed to it as anonymous in-memory files
  (memfd, never on a disk), else as files in a private directory (0700, files 0600) removed at once.
- Errors are kafka-python's exceptions; ``port`` maps them. These reach into the admin client's connection manager
  (``_manager``, ``_find_coordinator_id``) for the raw requests; kafka-python is pinned below 4 for that.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import tempfile
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kafka.errors as errors
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.protocol.consumer import LeaveGroupRequest

from berth.coordinator.client import kafka_groups
from berth.coordinator.client.kafka_groups import KafkaGroup, PartitionLag
from berth.operator.planners.kafka_credentials import KafkaConnection

MIN_SESSION = "group.min.session.timeout.ms"
MAX_SESSION = "group.max.session.timeout.ms"
CONSUMER_MIN_SESSION = "group.consumer.min.session.timeout.ms"
CONSUMER_MAX_SESSION = "group.consumer.max.session.timeout.ms"
CONSUMER_MIN_HEARTBEAT = "group.consumer.min.heartbeat.interval.ms"
CONSUMER_MAX_HEARTBEAT = "group.consumer.max.heartbeat.interval.ms"
#: Kafka's defaults for the consumer-protocol bounds (a broker before 3.7 lists none: it has no such groups).
CONSUMER_DEFAULTS = {
    CONSUMER_MIN_SESSION: 45_000,
    CONSUMER_MAX_SESSION: 60_000,
    CONSUMER_MIN_HEARTBEAT: 5_000,
    CONSUMER_MAX_HEARTBEAT: 15_000,
}
#: A consumer-protocol group's own configs (KIP-848 group configs).
GROUP_SESSION = "consumer.session.timeout.ms"
GROUP_HEARTBEAT = "consumer.heartbeat.interval.ms"
#: The finalized feature that enables consumer-protocol groups (KIP-848, Kafka 4.x).
GROUP_VERSION_FEATURE = "group.version"
#: The reason a removal carries to brokers that take one (LeaveGroup v5+, KIP-800).
LEAVE_REASON = "berth-operator: the fleet's pods for these instance ids are gone (scale-down or deletion)"


@dataclass(frozen=True, slots=True)
class Bounds:
    min_session_ms: int
    max_session_ms: int
    consumer: Mapping[str, int]  # the group.consumer.* bounds by name
    #: The cluster's finalized group.version (0: not finalized; KIP-848 groups need 1).
    group_version: int = 0


def connect(connection: KafkaConnection, *, timeout_ms: int) -> KafkaAdminClient:
    configs: dict[str, Any] = {
        "bootstrap_servers": connection.bootstrap_servers.split(","),
        "client_id": "berth-operator",
        "security_protocol": connection.security_protocol,
        "request_timeout_ms": timeout_ms,
        "bootstrap_timeout_ms": timeout_ms,
    }
    if connection.sasl_mechanism:
        configs |= {
            "sasl_mechanism": connection.sasl_mechanism,
            "sasl_plain_username": connection.username,
            "sasl_plain_password": connection.password,
        }
    if connection.security_protocol.endswith("SSL"):
        context = ssl_context(connection)
        if context is not None:
            configs["ssl_context"] = context
    return KafkaAdminClient(**configs)


def ssl_context(connection: KafkaConnection) -> ssl.SSLContext | None:
    """The TLS context of the connection's CA bundle and client certificate; None: the system's CAs, no client
    certificate (kafka-python's own default)."""
    if connection.ca_pem is None and connection.certificate_pem is None:
        return None
    context = (
        ssl.create_default_context(cadata=connection.ca_pem) if connection.ca_pem else ssl.create_default_context()
    )
    if connection.certificate_pem is not None and connection.private_key_pem is not None:
        with _private_file(connection.certificate_pem) as certificate, _private_file(connection.private_key_pem) as key:
            context.load_cert_chain(certificate, key)
    return context


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    """A path to ``text`` that no other process can read and that is gone afterwards: an anonymous in-memory file
    (Linux's memfd, reached as /proc/self/fd/N), else a file of mode 0600 in a private directory (0700)."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        descriptor = os.memfd_create("berth-kafka-tls", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(descriptor, text.encode())
            yield f"/proc/self/fd/{descriptor}"
        finally:
            os.close(descriptor)
        return
    directory = tempfile.mkdtemp(prefix="berth-kafka-tls-")
    try:
        path = os.path.join(directory, "pem")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            out.write(text)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def session_bounds(admin: KafkaAdminClient) -> Bounds:
    """The broker's session-timeout bounds for classic groups, and its consumer-protocol bounds."""
    brokers = sorted(broker.node_id for broker in admin._manager.cluster.brokers())
    if not brokers:
        raise errors.KafkaConnectionError("the cluster's metadata lists no broker")
    resource = ConfigResource(ConfigResourceType.BROKER, str(brokers[0]), None)
    described = admin.describe_configs([resource], config_filter="all")
    configs: dict[str, Any] = next(iter(next(iter(described.values())).values()))
    if MIN_SESSION not in configs or MAX_SESSION not in configs:
        raise errors.ClusterAuthorizationFailedError(f"DescribeConfigs returned no {MIN_SESSION}/{MAX_SESSION}")
    consumer = {
        name: int(configs[name]["value"]) if configs.get(name, {}).get("value") is not None else default
        for name, default in CONSUMER_DEFAULTS.items()
    }
    return Bounds(
        int(configs[MIN_SESSION]["value"]), int(configs[MAX_SESSION]["value"]), consumer, finalized_group_version(admin)
    )


def finalized_group_version(admin: KafkaAdminClient) -> int:
    """The cluster's finalized ``group.version`` max level, from a broker's ApiVersions v3+ answer (no ACL needed);
    0 when it finalizes none (not enabled) or predates feature levels (a broker before 2.7 has no such groups)."""
    try:
        features: Mapping[str, Mapping[str, Any]] = admin.describe_features()
    except errors.UnsupportedVersionError:
        return 0
    finalized = features.get(GROUP_VERSION_FEATURE, {}).get("finalized")
    return int(finalized[1]) if finalized else 0


def group_timeouts(admin: KafkaAdminClient, group_id: str) -> tuple[int | None, int | None]:
    """The group's own consumer.session.timeout.ms and consumer.heartbeat.interval.ms (None: not set on it)."""
    described = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, group_id, None)], config_filter="all")
    configs: Mapping[str, Any] = next(iter(next(iter(described.values())).values()), {})
    return _group_config(configs, GROUP_SESSION), _group_config(configs, GROUP_HEARTBEAT)


def set_group_timeouts(admin: KafkaAdminClient, group_id: str, session_ms: int, heartbeat_ms: int) -> None:
    """IncrementalAlterConfigs (SET) on the GROUP resource; a refusal (INVALID_CONFIG naming the broker's bound)
    raises ``InvalidConfigurationError`` with the broker's message."""
    configs = {GROUP_SESSION: str(session_ms), GROUP_HEARTBEAT: str(heartbeat_ms)}
    answered = admin.alter_configs(
        [ConfigResource(ConfigResourceType.GROUP, group_id, configs=configs)], incremental=True
    )
    outcome = next(iter(next(iter(answered.values())).values()))
    if outcome not in ("OK", None):
        text = str(outcome)
        if "GroupAuthorization" in text or "ClusterAuthorization" in text or "Authorization" in text:
            raise errors.GroupAuthorizationFailedError(f"IncrementalAlterConfigs on group {group_id}: {text}")
        raise errors.InvalidConfigurationError(text)


def describe_group(admin: KafkaAdminClient, group_id: str, topic_names: dict[uuid.UUID, str]) -> KafkaGroup:
    return kafka_groups.describe_group(admin, group_id, topic_names)


def group_lag(
    admin: KafkaAdminClient, group_id: str, owners: Mapping[tuple[str, int], str]
) -> tuple[PartitionLag, ...]:
    return kafka_groups.group_lag(admin, group_id, owners)


def committed_partitions(
    admin: KafkaAdminClient, group_id: str, topics: Collection[str] | None, limit: int
) -> tuple[str, ...]:
    """The group's partitions with a committed offset (OffsetFetch), ``topic:N``, the first ``limit`` of them."""
    try:
        offsets = admin.list_group_offsets({group_id: None}).get(group_id, {})
    except errors.GroupIdNotFoundError:
        return ()
    committed = sorted(
        (tp.topic, tp.partition)
        for tp, meta in offsets.items()
        if meta is not None and meta.offset is not None and meta.offset >= 0 and (topics is None or tp.topic in topics)
    )
    return tuple(f"{topic}:{partition}" for topic, partition in committed[:limit])


def leave_by_instance_ids(admin: KafkaAdminClient, group_id: str, instance_ids: Sequence[str]) -> dict[str, str]:
    """ONE LeaveGroup v3+; each instance id's error name. A group that does not exist has none of them: each is
    UNKNOWN_MEMBER_ID (kfake answers GROUP_ID_NOT_FOUND for the whole request where Kafka answers per member; a
    fleet scaled down before any pod joined asks this). Any other group-level error raises."""
    ids = list(dict.fromkeys(instance_ids))
    if not ids or any(not i for i in ids):
        raise ValueError("a removal must name at least one non-empty group.instance.id (KIP-571: none means all)")

    async def call() -> Any:
        coordinator = await admin._find_coordinator_id(group_id)
        version = min(admin._manager.broker_version_data.api_version(LeaveGroupRequest), 5)
        if version < 3:
            raise errors.UnsupportedVersionError("removing members by group.instance.id needs LeaveGroup v3+")
        member = LeaveGroupRequest.MemberIdentity
        identities = [
            member(member_id="", group_instance_id=i, **({"reason": LEAVE_REASON} if version >= 5 else {})) for i in ids
        ]
        request = LeaveGroupRequest(group_id=group_id, members=identities, min_version=3, max_version=version)
        return await admin._manager.send(request, node_id=coordinator)

    response = admin._manager.run(call)
    top = errors.for_code(response.error_code)
    if top is errors.GroupIdNotFoundError:
        return dict.fromkeys(ids, _name(errors.UnknownMemberIdError.errno))
    if top is not errors.NoError:
        raise top(f"LeaveGroup for group {group_id}")
    return {m.group_instance_id: _name(m.error_code) for m in response.members if m.group_instance_id in ids}


def delete_group(admin: KafkaAdminClient, group_id: str) -> str:
    # kafka-python 3 answers "OK" for a deleted group and the error class's name otherwise.
    outcome = admin.delete_groups([group_id]).get(group_id)
    if outcome is None or outcome in ("OK", "NoError") or outcome is errors.NoError:
        return "NONE"
    error = outcome if isinstance(outcome, type) else getattr(errors, str(outcome), None)
    if isinstance(error, type) and issubclass(error, errors.KafkaError):
        if error in (errors.GroupIdNotFoundError, errors.NonEmptyGroupError):
            return str(getattr(error, "message", error.__name__))
        raise error(f"DeleteGroups for group {group_id}")
    raise errors.KafkaError(f"DeleteGroups for group {group_id}: {outcome}")


def _group_config(configs: Mapping[str, Any], name: str) -> int | None:
    entry = configs.get(name) or {}
    value = entry.get("value") if isinstance(entry, Mapping) else None
    if value is None or entry.get("config_source") in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _name(code: int) -> str:
    error = errors.for_code(code)
    return "NONE" if error is errors.NoError else str(error.message)
