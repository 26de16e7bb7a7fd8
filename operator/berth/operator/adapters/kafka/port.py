"""``KafkaCoordinatorPort``: the operator's :class:`~berth.operator.ports.CoordinatorPort` on a Kafka cluster.

One port per connection (cluster, security, principal). Rules:

- kafka-python is blocking: every call runs on the port's own single worker thread (one admin client is not
  shared between threads), so the event loop never waits on a socket; the client is created on first use and
  recreated after a failure.
- Its kind is ``KAFKA_CLASSIC`` (``planners.coordinator_kind``; a consumer-protocol group is managed as
  ``KAFKA_CONSUMER``, ``kind_of_group`` decides from what ``describe`` reports). No pre-registration on Kafka:
  ``put_expected_members`` refuses, clearing is a no-op. No owner records either: the broker keeps none, so
  claiming and releasing refuse and ``owner_uid`` is ignored; the operator's one-fleet-per-group claim
  (``planners.claims``) protects Kafka groups.
- Outcomes map to the port's vocabulary: per-member removal results by instance id; an unknown group describes as
  ``Dead`` with ``exists`` False; a KIP-848 group describes with ``protocol`` ``consumer``, its epoch as the
  generation, its assignment epoch and each member's epoch and partitions; a streams group with ``protocol``
  ``streams``. What to do with each is the planners' call.
- A consumer-protocol group's session timeout is its group config: :meth:`set_group_session_timeout` reads it once
  per group and port, and alters it only when it differs (the group's config is not read on every pass).
- Failures become :class:`~berth.operator.ports.CoordinatorUnavailable` with a reason naming what is missing:
  ``Unreachable`` (no broker answered), ``AuthenticationFailed`` (the credentials were refused),
  ``NotAuthorized`` (an ACL: Group READ/DESCRIBE/DELETE, Cluster DESCRIBE_CONFIGS). No secret is ever in a message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

import kafka.errors as errors

from berth.coordinator.client.kafka_groups import KafkaGroup
from berth.operator.adapters.kafka import wire
from berth.operator.planners.coordinator_kind import KAFKA_CLASSIC, CoordinatorKind
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import (
    ConsumerProtocolBounds,
    CoordinatorBounds,
    GroupDescription,
    GroupLag,
    GroupMember,
    GroupOwnerRef,
    GroupProtocol,
    PartitionLag,
)
from berth.operator.ports import CoordinatorUnavailable

T = TypeVar("T")
#: How long one admin request (and the first connection) may take before the pass reports the cluster unreachable.
REQUEST_TIMEOUT_MS = 10_000


class KafkaCoordinatorPort:
    def __init__(self, connection: KafkaConnection, *, timeout_ms: int = REQUEST_TIMEOUT_MS) -> None:
        self.connection = connection
        self.timeout_ms = timeout_ms
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="berth-kafka")
        self._admin: Any = None
        #: Topic names by id, for brokers that leave them out of a consumer-protocol group's assignment.
        self._topic_names: dict[uuid.UUID, str] = {}
        #: Per group, the (session, heartbeat) configs last read or set on it.
        self._group_timeouts: dict[str, tuple[int | None, int | None]] = {}

    @property
    def endpoint(self) -> str:
        return self.connection.endpoint

    @property
    def kind(self) -> CoordinatorKind:
        return KAFKA_CLASSIC

    async def claim_group(self, group_id: str, owner: GroupOwnerRef, *, adopt: bool) -> None:
        raise NotImplementedError("Kafka keeps no group owners (its kind does not record owners)")

    async def release_group(self, group_id: str, owner_uid: str) -> None:
        raise NotImplementedError("Kafka keeps no group owners (its kind does not record owners)")

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._close_admin)
        self._executor.shutdown(wait=False)

    # ------------------------------------------------------------------------------------------ the port

    async def get_config(self) -> CoordinatorBounds:
        bounds = await self._call(
            "reading the brokers' group session-timeout bounds (Cluster DESCRIBE_CONFIGS) and finalized features",
            wire.session_bounds,
        )
        consumer = bounds.consumer
        return CoordinatorBounds(
            bounds.min_session_ms,
            bounds.max_session_ms,
            min_setting=wire.MIN_SESSION,
            max_setting=wire.MAX_SESSION,
            consumer=ConsumerProtocolBounds(
                consumer[wire.CONSUMER_MIN_SESSION],
                consumer[wire.CONSUMER_MAX_SESSION],
                consumer[wire.CONSUMER_MIN_HEARTBEAT],
                consumer[wire.CONSUMER_MAX_HEARTBEAT],
                group_version=bounds.group_version,
            ),
        )

    async def set_group_session_timeout(
        self, group_id: str, session_timeout_ms: int, heartbeat_interval_ms: int
    ) -> None:
        wanted = (session_timeout_ms, heartbeat_interval_ms)
        what = f"the group configs of group {group_id} (Group ALTER_CONFIGS/DESCRIBE_CONFIGS)"
        if group_id not in self._group_timeouts:
            self._group_timeouts[group_id] = await self._call(
                f"reading {what}",
                lambda admin: wire.group_timeouts(admin, group_id),
                group_id=group_id,
                acl="DESCRIBE_CONFIGS",
            )
        if self._group_timeouts[group_id] == wanted:
            return
        try:
            await self._call(
                f"setting {what}",
                lambda admin: wire.set_group_timeouts(admin, group_id, *wanted),
                group_id=group_id,
                acl="ALTER_CONFIGS",
            )
        except CoordinatorUnavailable:
            self._group_timeouts.pop(group_id, None)  # read it again next time: it may have been set after all
            raise
        self._group_timeouts[group_id] = wanted

    async def put_expected_members(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> None:
        raise NotImplementedError("Kafka has no pre-registration (its kind does not pre-register)")

    async def delete_expected_members(self, group_id: str, *, owner_uid: str | None = None) -> None:
        return None  # nothing to clear: Kafka never had expected members

    async def leave_instances(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> Mapping[str, str]:
        if not instance_ids:  # KIP-571: an empty list removes everyone
            raise ValueError("a removal must name at least one group.instance.id")
        results = await self._call(
            f"removing members of group {group_id} (Group READ)",
            lambda admin: wire.leave_by_instance_ids(admin, group_id, instance_ids),
            group_id=group_id,
        )
        return {instance_id: results.get(instance_id, "NO_RESULT") for instance_id in instance_ids}

    async def describe(self, group_id: str) -> GroupDescription:
        described = await self._call(
            f"describing group {group_id} (Group DESCRIBE)",
            lambda admin: wire.describe_group(admin, group_id, self._topic_names),
            group_id=group_id,
        )
        return description_of(described)

    async def group_lag(self, group_id: str, description: GroupDescription) -> GroupLag | None:
        owners = {
            (topic, int(partition)): member.group_instance_id or member.member_id
            for member in description.members
            for topic, _, partition in (name.rpartition(":") for name in member.assignment)
        }
        found = await self._call(
            f"reading the committed and log end offsets of group {group_id} (Group DESCRIBE, Topic DESCRIBE)",
            lambda admin: wire.group_lag(admin, group_id, owners),
            group_id=group_id,
        )
        return GroupLag(tuple(PartitionLag(p.topic, p.partition, p.committed, p.log_end, p.owner) for p in found))

    async def committed_partitions(self, group_id: str, topics: Collection[str] | None, limit: int) -> tuple[str, ...]:
        return await self._call(
            f"reading the committed offsets of group {group_id} (Group DESCRIBE)",
            lambda admin: wire.committed_partitions(admin, group_id, topics, limit),
            group_id=group_id,
        )

    async def delete_group(self, group_id: str, *, owner_uid: str | None = None) -> str:
        return await self._call(
            f"deleting group {group_id} (Group DELETE)",
            lambda admin: wire.delete_group(admin, group_id),
            group_id=group_id,
        )

    # ------------------------------------------------------------------------------------------- calls

    async def _call(
        self, what: str, call: Callable[[Any], T], *, group_id: str | None = None, acl: str = "READ/DESCRIBE/DELETE"
    ) -> T:
        def run() -> T:
            if self._admin is None:
                self._admin = wire.connect(self.connection, timeout_ms=self.timeout_ms)
            try:
                return call(self._admin)
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError):
                self._close_admin()
                raise

        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, run)
        except (errors.SaslAuthenticationFailedError, errors.UnsupportedSaslMechanismError) as error:
            self._executor.submit(self._close_admin)
            raise CoordinatorUnavailable(
                f"the Kafka cluster at {self.endpoint} refused {self.connection.principal}"
                f" ({self.connection.sasl_mechanism or 'no SASL'}): {_text(error)}",
                reason="AuthenticationFailed",
            ) from error
        except errors.GroupAuthorizationFailedError as error:
            raise _not_authorized(what, f"Group {acl} on group {group_id}", self) from error
        except errors.ClusterAuthorizationFailedError as error:
            raise _not_authorized(what, "Cluster DESCRIBE_CONFIGS", self) from error
        except errors.AuthorizationError as error:
            raise _not_authorized(what, type(error).__name__, self) from error
        except errors.InvalidConfigurationError as error:
            raise CoordinatorUnavailable(
                f"the Kafka cluster at {self.endpoint} refused {what}: INVALID_CONFIG (outside the brokers'"
                " group.consumer.min/max.session.timeout.ms or heartbeat bounds?); the bounds are read again",
                reason="ConfigRefused",
            ) from error
        except (errors.KafkaError, OSError, TimeoutError) as error:
            self._executor.submit(self._close_admin)
            # kafka-python retries a bootstrap whose authentication was refused until it times out, so a wrong
            # password looks like an unreachable cluster: say whose credentials were tried.
            who = "" if self.connection.principal == "no credentials" else f" (with {self.connection.principal})"
            raise CoordinatorUnavailable(
                f"cannot reach the coordinator at {self.endpoint}{who}: {what}: {_text(error)}", reason="Unreachable"
            ) from error

    def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()


def description_of(group: KafkaGroup) -> GroupDescription:
    """The port's view of a group the cluster described: no such group is ``Dead`` (``exists`` False)."""
    if not group.exists:
        return GroupDescription(group.group_id, "Dead", -1, None, (), exists=False)
    protocol = GroupProtocol(group.protocol)
    members = tuple(
        GroupMember(
            m.member_id,
            m.instance_id,
            member_epoch=m.member_epoch,
            assignment=tuple(f"{topic}:{partition}" for topic, partition in m.assignment),
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=group.group_id,
        state=group.state or "Unknown",
        generation=group.epoch if group.epoch is not None else -1,  # classic DescribeGroups carries no generation
        leader=None,
        members=members,
        protocol=protocol,
        assignment_epoch=group.assignment_epoch,
    )


def _not_authorized(what: str, acl: str, port: KafkaCoordinatorPort) -> CoordinatorUnavailable:
    return CoordinatorUnavailable(
        f"{what} at {port.endpoint} was not authorized: the principal of {port.connection.principal} lacks the"
        f" ACL {acl}",
        reason="NotAuthorized",
    )


def _text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
