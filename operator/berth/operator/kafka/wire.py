"""The blocking kafka-python (>= 3.0) calls the Kafka coordinator port makes; the only module importing kafka-python.

Every function takes a connected ``KafkaAdminClient`` and returns plain values. Rules:

- Removal is ONE LeaveGroup v3+ request naming members by ``group.instance.id`` with empty member ids, built here
  rather than through ``remove_group_members``, whose results are keyed by the echoed member id: Apache Kafka
  echoes the request's empty member id, kfake the resolved one. Results are matched by ``group_instance_id``.
  An empty list is refused before anything is sent (KIP-571 reads an empty list as "every member").
- DescribeGroups is v4+ (instance ids). A KIP-848 (consumer protocol) group is recognised by ListGroups v5's
  group type: the classic DescribeGroups shows it without members (kfake) or as unknown (Apache Kafka).
- Session bounds come from DescribeConfigs on a broker: ``group.min/max.session.timeout.ms``.
- Errors are kafka-python's exceptions; ``port`` maps them. These reach into the admin client's connection manager
  (``_manager``, ``_find_coordinator_id``) for the raw requests; kafka-python is pinned below 4 for that.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import kafka.errors as errors
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import LeaveGroupRequest

from berth.operator.planners.kafka_credentials import KafkaConnection

MIN_SESSION = "group.min.session.timeout.ms"
MAX_SESSION = "group.max.session.timeout.ms"
CONSUMER_SESSION = "group.consumer.session.timeout.ms"
#: The reason a removal carries to brokers that take one (LeaveGroup v5+, KIP-800).
LEAVE_REASON = "berth-operator: the fleet's pods for these instance ids are gone (scale-down or deletion)"


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    error: str  # "NONE", "GROUP_ID_NOT_FOUND", "GROUP_AUTHORIZATION_FAILED", ...
    state: str
    protocol_type: str
    members: tuple[DescribedMember, ...]
    consumer_protocol: bool  # a KIP-848 group


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
        context = ssl.create_default_context(cadata=connection.ca_pem) if connection.ca_pem else None
        if context is not None:
            configs["ssl_context"] = context
    return KafkaAdminClient(**configs)


def session_bounds(admin: KafkaAdminClient) -> tuple[int, int, int | None]:
    """(group.min.session.timeout.ms, group.max.session.timeout.ms, group.consumer.session.timeout.ms or None)."""
    brokers = sorted(broker.node_id for broker in admin._manager.cluster.brokers())
    if not brokers:
        raise errors.KafkaConnectionError("the cluster's metadata lists no broker")
    resource = ConfigResource(ConfigResourceType.BROKER, str(brokers[0]), None)
    described = admin.describe_configs([resource], config_filter="all")
    configs: dict[str, Any] = next(iter(next(iter(described.values())).values()))
    if MIN_SESSION not in configs or MAX_SESSION not in configs:
        raise errors.ClusterAuthorizationFailedError(f"DescribeConfigs returned no {MIN_SESSION}/{MAX_SESSION}")
    consumer = configs.get(CONSUMER_SESSION, {}).get("value")
    return (
        int(configs[MIN_SESSION]["value"]),
        int(configs[MAX_SESSION]["value"]),
        int(consumer) if consumer is not None else None,
    )


def describe_group(admin: KafkaAdminClient, group_id: str) -> DescribedGroup:
    async def call() -> Any:
        coordinator = await admin._find_coordinator_id(group_id)
        request = DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False, min_version=4)
        return await admin._manager.send(request, node_id=coordinator)

    response = admin._manager.run(call)
    (group,) = [g for g in response.groups if g.group_id == group_id]
    members = tuple(DescribedMember(m.member_id, m.group_instance_id or None) for m in group.members)
    return DescribedGroup(
        error=_name(group.error_code),
        state=group.group_state,
        protocol_type=group.protocol_type,
        members=members,
        consumer_protocol=_is_consumer_protocol(admin, group_id),
    )


def leave_by_instance_ids(admin: KafkaAdminClient, group_id: str, instance_ids: Sequence[str]) -> dict[str, str]:
    """ONE LeaveGroup v3+; each instance id's error name. A group-level error raises."""
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


def _is_consumer_protocol(admin: KafkaAdminClient, group_id: str) -> bool:
    try:
        groups = admin.list_groups(types_filter=["consumer"])
    except (errors.IncompatibleBrokerVersion, errors.UnsupportedVersionError):
        return False  # a broker without ListGroups v5 has no KIP-848 groups
    return any(group.get("group_id") == group_id for group in groups)


def _name(code: int) -> str:
    error = errors.for_code(code)
    return "NONE" if error is errors.NoError else str(error.message)
