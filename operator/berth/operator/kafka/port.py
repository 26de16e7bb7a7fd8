"""``KafkaCoordinatorPort``: the operator's :class:`~berth.operator.ports.CoordinatorPort` on a Kafka cluster.

One port per connection (cluster, security, principal). Rules:

- kafka-python is blocking: every call runs on the port's own single worker thread (one admin client is not
  shared between threads), so the event loop never waits on a socket; the client is created on first use and
  recreated after a failure.
- Its kind is ``KAFKA_CLASSIC`` (``planners.coordinator_kind``). No pre-registration on Kafka:
  ``put_expected_members`` refuses, clearing is a no-op. No owner records either: the broker keeps none, so
  claiming and releasing refuse and ``owner_uid`` is ignored; the operator's one-fleet-per-group claim
  (``planners.claims``) protects Kafka groups.
- Outcomes map to the port's vocabulary: per-member removal results by instance id; an unknown group describes as
  ``Dead``; a KIP-848 group describes with ``protocol`` ``consumer`` (what to do with it is the planners' call,
  ``coordinator_kind.kind_of_group``).
- Failures become :class:`~berth.operator.ports.CoordinatorUnavailable` with a reason naming what is missing:
  ``Unreachable`` (no broker answered), ``AuthenticationFailed`` (the credentials were refused),
  ``NotAuthorized`` (an ACL: Group READ/DESCRIBE/DELETE, Cluster DESCRIBE_CONFIGS). No secret is ever in a message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import kafka.errors as errors

from berth.operator.kafka import wire
from berth.operator.planners.coordinator_kind import KAFKA_CLASSIC, CoordinatorKind
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.observations import (
    CoordinatorBounds,
    GroupDescription,
    GroupMember,
    GroupOwnerRef,
    GroupProtocol,
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
        #: group.consumer.session.timeout.ms as last read (KIP-848 groups' session timeout is the broker's).
        self.consumer_session_timeout_ms: int | None = None

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
        low, high, consumer = await self._call(
            "reading group.min/max.session.timeout.ms (Cluster DESCRIBE_CONFIGS)", wire.session_bounds
        )
        self.consumer_session_timeout_ms = consumer
        return CoordinatorBounds(low, high)

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
            lambda admin: wire.describe_group(admin, group_id),
            group_id=group_id,
        )
        if described.consumer_protocol:
            return GroupDescription(group_id, described.state or "Dead", -1, None, (), protocol=GroupProtocol.CONSUMER)
        if described.error == "GROUP_AUTHORIZATION_FAILED":
            raise _not_authorized(f"describing group {group_id}", f"Group DESCRIBE on group {group_id}", self)
        if described.error not in ("NONE", "GROUP_ID_NOT_FOUND") or described.state == "Dead":
            return GroupDescription(group_id, "Dead", -1, None, ())
        return GroupDescription(
            group_id=group_id,
            state=described.state,
            generation=-1,  # classic DescribeGroups carries no generation
            leader=None,
            members=tuple(GroupMember(m.member_id, m.group_instance_id) for m in described.members),
        )

    async def delete_group(self, group_id: str, *, owner_uid: str | None = None) -> str:
        return await self._call(
            f"deleting group {group_id} (Group DELETE)",
            lambda admin: wire.delete_group(admin, group_id),
            group_id=group_id,
        )

    # ------------------------------------------------------------------------------------------- calls

    async def _call(self, what: str, call: Callable[[Any], T], *, group_id: str | None = None) -> T:
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
            raise _not_authorized(what, f"Group READ/DESCRIBE/DELETE on group {group_id}", self) from error
        except errors.ClusterAuthorizationFailedError as error:
            raise _not_authorized(what, "Cluster DESCRIBE_CONFIGS", self) from error
        except errors.AuthorizationError as error:
            raise _not_authorized(what, type(error).__name__, self) from error
        except (errors.KafkaError, OSError, TimeoutError) as error:
            self._executor.submit(self._close_admin)
            raise CoordinatorUnavailable(
                f"cannot reach the coordinator at {self.endpoint}: {what}: {_text(error)}", reason="Unreachable"
            ) from error

    def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()


def _not_authorized(what: str, acl: str, port: KafkaCoordinatorPort) -> CoordinatorUnavailable:
    return CoordinatorUnavailable(
        f"{what} at {port.endpoint} was not authorized: the principal of {port.connection.principal} lacks the"
        f" ACL {acl}",
        reason="NotAuthorized",
    )


def _text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
