"""The operator's ports: everything the reconcile service (``berth.operator.reconcile``) reaches the world through.

The service sees only these Protocols and the errors below, never an adapter, so the operator on Kubernetes,
``berth-demo`` on local processes and fleets on Berth's coordinator or Kafka all go through the same code; the
composition roots (``command.app`` for the operator, ``local.demo_support`` for berth-demo) build the adapters and hand
them over. Implementations:

- :class:`WorkloadPort` (with :class:`WorkloadObserver`, its read side): the Kubernetes StatefulSet adapter
  (``kube.workload``) and the local-process fleet (``local.fleet``: N member processes named ``<fleet>-0..N-1``);
  the read side is a port of its own so that a cache of watched objects can serve it instead of the API;
- :class:`CoordinatorPort`: Berth's coordinator through the member library (``coordinator_adapter``) and a Kafka
  cluster through kafka-python's admin client (``kafka.port``); each carries its
  :class:`~berth.operator.planners.coordinator_kind.CoordinatorKind`, and :class:`CoordinatorDirectory`
  (``coordinators``) hands out one port per coordinator;
- :class:`StatusPort`, :class:`EventSink` and :class:`FleetReader`: the ConsumerFleet's ``status`` subresource,
  Kubernetes Events and a fresh read of the fleet (``kube.fleets``, ``kube.events``), or a dict and printed lines
  (``local.demo_support``);
- :class:`SecretLookup` (``kube.secrets``), :class:`AdviceReader` (``advice_source``), :class:`EvidenceJournal`
  (``evidence_files``, ``kube.evidence_configmap``), :class:`JournalSource` (``coordinator_adapter``) and
  :class:`PassMetrics` (``metrics``);
- :class:`ClaimsIndex`: every fleet's claims (Kopf's index, ``handlers.claims``; a list elsewhere);
- :class:`GroupRecords`: the operator's own owner records of groups on coordinators that keep none (Kafka), one
  Lease per (cluster, group) in the operator's namespace (``kube.group_records``; berth-demo has no Kafka fleets).

Rules:

- Methods are async and idempotent: the driver may repeat any call after a crash or a retry.
- A :class:`WorkloadPort` and a :class:`StatusPort` serve one fleet; :class:`CoordinatorPort` takes the group id
  per call.
- Protocol outcomes the planners need are returned as Kafka error names (``"NONE"``, ``"UNKNOWN_MEMBER_ID"``...);
  a coordinator that could not be asked at all raises :class:`CoordinatorUnavailable`.
- Adapters raise the errors declared here, never their library's: a failed call to the platform's API is
  :class:`ApiCallFailed` (no ``kubernetes.client.ApiException`` and no Kafka exception reaches the service).

How the driver (``reconcile.driver``) maps the scaling planner's actions (``planners.scaling``) onto the ports:

==========================  =====================================================================================
``PatchStatus(patch)``      ``status.patch_status(patch)`` right away (on Kubernetes through the API, not Kopf's
                            deferred ``patch``): departing ids must be durable before the StatefulSet shrinks
``PutExpectedMembers(ids)`` ``coordinator.put_expected_members(group, ids)`` (planned only where the kind
                            ``pre_registers``)
``ClearExpectedMembers()``  ``coordinator.delete_expected_members(group)`` (likewise)
``ScaleWorkload(n)``        ``workload.scale(n)``
``BatchLeave(ids, since)``  ``results = coordinator.leave_instances(group, action.member_ids)``, then write
                            ``record_scale_down(action, results, now=...)``'s patch
``DeleteGroup()``           ``coordinator.delete_group(group)``: NONE or GROUP_ID_NOT_FOUND is done,
                            NON_EMPTY_GROUP is a failure to retry
``ReleaseGroup()``          ``coordinator.release_group(group, uid)`` (planned only where the kind
                            ``records_owners``)
==========================  =====================================================================================

Every write names the fleet's uid as ``owner_uid`` where the kind ``records_owners`` (Berth's: the
``Berth-Owner-Uid`` header), so the coordinator refuses it (:class:`GroupOwned`) when the group is another fleet's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from berth.operator.planners.advice import AdviceReading
from berth.operator.planners.claims import ClaimKey, GroupClaim
from berth.operator.planners.coordinator_kind import CoordinatorKind
from berth.operator.planners.coordinator_target import BerthTarget
from berth.operator.planners.evidence import EvidenceEvent
from berth.operator.planners.kafka_credentials import KafkaConnection
from berth.operator.planners.node_loss import PodPlacement
from berth.operator.planners.observations import (
    CoordinatorBounds,
    GroupDescription,
    GroupLag,
    GroupOwnerRef,
    PodTimes,
)
from berth.operator.planners.restarts import GroupActivity
from berth.operator.planners.statefulset import PlannedWorkload


class CoordinatorUnavailable(Exception):
    """The coordinator could not be asked (connection refused, timeout, HTTP 5xx, 401/403, a missing ACL).

    ``reason`` is the condition reason and Warning Event it becomes (``Unreachable``, ``Unauthenticated``,
    ``NotAuthorized``, ``TLSVerificationFailed``, ``RequestTooLarge``...); the message is the operator's own words
    (what was asked, the HTTP status class), never a secret and never text the coordinator sent.
    """

    def __init__(self, message: str, *, reason: str = "Unreachable") -> None:
        super().__init__(message)
        self.reason = reason


class GroupOwned(Exception):
    """The coordinator refused a claim or a write: the group is ``owner``'s, or nobody's and in use (``owner`` None)."""

    def __init__(self, group_id: str, owner: GroupOwnerRef | None) -> None:
        super().__init__(f"group {group_id} is owned by another fleet")
        self.group_id = group_id
        self.owner = owner


class ApiCallFailed(Exception):
    """A call to the platform's API failed (on Kubernetes: the API server answered other than 2xx, or not at all);
    the message is the API server's own (``HTTP 422: ...``). The pass reports it (a Warning Event) and retries."""


class NotPermitted(ApiCallFailed):
    """The platform refused the operator a read it needs (on Kubernetes, HTTP 403): its RBAC does not grant it."""


class NotLeading(Exception):
    """A write was refused because this replica does not hold the leader's Lease (any more): nothing was sent. The
    pass stops without recording anything; the leader carries on from what is stored."""


class NotOurs(RuntimeError):
    """An object with the fleet's name exists and is not controlled by this fleet."""


class WorkloadRejected(RuntimeError):
    """The platform refused the planned workload (the API server answered 400/422 to the StatefulSet), or would
    refuse it (a change to what the StatefulSet fixes at creation, such as its volume claim templates)."""


class Applied(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    DELETED = "deleted"  # the PodDisruptionBudget of a fleet that turned it off
    HELD = "held"  # a StatefulSet whose changed pod template waits for its turn to roll (planners.roll_pacing)


@dataclass(frozen=True, slots=True)
class ApplyResult:
    statefulset: Applied
    service: Applied = Applied.UNCHANGED
    disruption_budget: Applied = Applied.UNCHANGED

    @property
    def changed(self) -> bool:
        return any(applied is not Applied.UNCHANGED for applied in (self.statefulset, self.service))


@dataclass(frozen=True, slots=True)
class WorkloadObservation:
    """One consistent look at a fleet's workload."""

    replicas: int | None  # the size the workload is set to (StatefulSet spec.replicas); None: not created yet
    #: Its controller has acted on ``replicas`` (StatefulSet: status.observedGeneration >= metadata.generation);
    #: a local fleet, which scales synchronously, is always settled.
    settled: bool
    existing: frozenset[str]  # names of the members/pods that exist now, terminating ones included
    ready: int  # how many of them are ready
    #: Pods being deleted -> when their grace period ends (deletionTimestamp); a local fleet has none.
    terminating: Mapping[str, datetime] = field(default_factory=dict)
    #: Pods that run (not terminating) and are not Ready: under OrderedReady the StatefulSet deletes no pod while
    #: one of its pods is unhealthy, which is what a scale-down then waits for.
    unready: frozenset[str] = frozenset()
    #: Running pods -> when their current process started (and the previous one ended), where the platform says.
    times: Mapping[str, PodTimes] = field(default_factory=dict)
    #: Pods whose container cannot be configured -> the kubelet's message (waiting, CreateContainerConfigError:
    #: a Secret or key its environment names is missing).
    config_errors: Mapping[str, str] = field(default_factory=dict)
    #: Running pods whose container last ended in failure -> the kubelet's termination message of it (non-empty
    #: only; ``planners.pod_credentials`` asks the kubelet to keep a failing log's tail there).
    crashes: Mapping[str, str] = field(default_factory=dict)
    #: Pods -> their node, and what the API server says of the node's reports for them (``planners.node_loss``);
    #: scheduled pods only, none for a local fleet.
    placements: Mapping[str, PodPlacement] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """One look at the fleet's workload, with what status and the sizing decision need."""

    observation: WorkloadObservation
    applied_hash: str | None  # the hash of what was last applied; None when nothing was
    running: int  # members that exist and are not terminating
    #: The fleet's per-pod volume claims that stay: neither being deleted nor going with their pod (``whenScaled:
    #: Delete`` makes a departing pod their owner). Empty for a fleet without claim templates, and for local fleets.
    claims: frozenset[str] = frozenset()
    #: The revision of the pod template the workload rolls its pods to (StatefulSet status.updateRevision); None
    #: where there is none (a local fleet).
    revision: str | None = None
    #: A rollout is in progress: pods are being replaced onto ``revision`` (RollingUpdate, not yet at the partition).
    rolling: bool = False
    #: The latest start of a running pod's container (or of the pod, when its containers are not reported); None
    #: when unknown (a local fleet).
    last_started: datetime | None = None
    #: The hash of the pod template last applied (``manifest_hash.template_hash``); None where none was recorded (a
    #: StatefulSet of an operator before it, or a local fleet).
    template_hash: str | None = None
    #: Read from a cache of watched objects, which may lag the API server by a moment: a pass confirms such a
    #: view with a fresh one (``observe(fresh=True)``) before a step it cannot take back (a batch leave).
    from_cache: bool = False


class WriteGate(Protocol):
    """Whether this replica may write now (the leader, within its renew deadline); one check before every write."""

    def check(self) -> None:
        """Return when writing is allowed; raise :class:`NotLeading` when it is not."""
        ...


class WorkloadObserver(Protocol):
    """Reads one fleet's workload: through the API, or from a cache of watched objects (the pass does not care)."""

    async def observe(self, *, fresh: bool = False) -> WorkloadView:
        """The workload's size, the members that exist and how many are ready, read together; ``fresh``: from the
        source itself, never from a cache."""
        ...


class WorkloadPort(WorkloadObserver, Protocol):
    """Runs one fleet's members: pods of a StatefulSet, or local processes."""

    async def apply(self, planned: PlannedWorkload, *, hold: bool = False) -> ApplyResult:
        """Create or update the workload as planned (env ``planned.environment_for``), never changing its size
        once it exists (the scaling step owns the size). Raises :class:`NotOurs` or :class:`WorkloadRejected`.
        ``hold``: an existing StatefulSet is left as it is (its roll waits for a turn: ``Applied.HELD`` when it
        differs from the plan); the rest is applied.

        The Kubernetes adapter applies ``planned.statefulset``, ``planned.service`` and the PodDisruptionBudget
        (deleting the fleet's own when ``planned.disruption_budget`` is None); a local fleet uses the environment
        and ignores the manifests.
        """
        ...

    async def scale(self, replicas: int) -> None:
        """Set the workload's size; members beyond it stop highest ordinal first, new ones get the next ordinals."""
        ...


class StatusPort(Protocol):
    """Where one fleet's status is kept: the ConsumerFleet's ``status`` subresource, or a dict for a local fleet."""

    async def patch_status(self, patch: Mapping[str, Any]) -> Mapping[str, Any]:
        """Merge ``patch`` into the status at once (a JSON merge patch: ``None`` removes a key); the status as
        stored afterwards."""
        ...


class EventSink(Protocol):
    """Where the pass reports what it did, in words a person understands (Kubernetes Events, demo lines). A sink
    may hold what it is told until :meth:`flush` (Kubernetes Events: a pass's Events of one type are posted as one,
    ``planners.announcements.coalesced``); a pass flushes its sink once, however it ends."""

    def info(self, reason: str, message: str) -> None: ...

    def warning(self, reason: str, message: str) -> None: ...

    def flush(self) -> None:
        """Post what was said since the last flush (nothing to do for a sink that posts at once)."""
        ...


class CoordinatorPort(Protocol):
    """The coordinator's admin surface the operator uses (docs/api.md §4, §7 and ``GET /v1/config``, or Kafka's)."""

    @property
    def kind(self) -> CoordinatorKind:
        """What the coordinator does for a group: pre-registration, owner records, a journal (``BERTH``), or
        none of them (``KAFKA_CLASSIC``)."""
        ...

    @property
    def endpoint(self) -> str:
        """What the coordinator is, for messages: a URL, or ``kafka://host:port,...``."""
        ...

    async def claim_group(self, group_id: str, owner: GroupOwnerRef, *, adopt: bool) -> None:
        """Record ``owner`` as the group's (creating it Empty when missing); raises :class:`GroupOwned`."""
        ...

    async def release_group(self, group_id: str, owner_uid: str) -> None:
        """Let go of the group's owner record; raises :class:`GroupOwned` when it is another's."""
        ...

    async def get_config(self) -> CoordinatorBounds:
        """The session-timeout bounds (``GET /v1/config``; Kafka: group.min/max.session.timeout.ms)."""
        ...

    async def put_expected_members(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> None:
        """Pre-register the group's static members (docs/api.md §7); creates the group when it does not exist."""
        ...

    async def delete_expected_members(self, group_id: str, *, owner_uid: str | None = None) -> None:
        """Clear the pre-registration (plain Kafka behaviour again)."""
        ...

    async def leave_instances(
        self, group_id: str, instance_ids: Sequence[str], *, owner_uid: str | None = None
    ) -> Mapping[str, str]:
        """One LeaveGroup v3+ batch by instance id with empty member ids (the admin path); never called with an
        empty list (KIP-571 reads that as "everyone") — an implementation refuses one.

        Returns each instance id's error name: ``"NONE"`` when it was removed, ``"UNKNOWN_MEMBER_ID"`` when it
        was not a member. A group-level error (or no answer) raises instead, so nothing is recorded as left.
        """
        ...

    async def describe(self, group_id: str) -> GroupDescription:
        """DescribeGroups; an unknown group is state ``"Dead"``, generation -1. A group of another protocol than
        the classic one says so (``protocol``) rather than failing: the planners decide what to do with it."""
        ...

    async def delete_group(self, group_id: str, *, owner_uid: str | None = None) -> str:
        """DeleteGroups: ``"NONE"``, ``"GROUP_ID_NOT_FOUND"`` or ``"NON_EMPTY_GROUP"``."""
        ...

    async def set_group_session_timeout(
        self, group_id: str, session_timeout_ms: int, heartbeat_interval_ms: int
    ) -> None:
        """Make the group's own session timeout and heartbeat interval these (KIP-848 group configs
        ``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``); called only where the group's kind
        has ``session_timeout_on_group`` (an implementation without group configs refuses)."""
        ...

    async def group_lag(self, group_id: str, description: GroupDescription) -> GroupLag | None:
        """Per partition the group committed or owns (``description`` says who owns what), its committed and log
        end offsets; None where the coordinator keeps no partition log (Berth's)."""
        ...

    async def committed_partitions(self, group_id: str, topics: Collection[str] | None, limit: int) -> tuple[str, ...]:
        """The group's partitions with a committed offset, as ``topic:N``, of ``topics`` (every committed topic when
        None): at most ``limit`` of them, the first by topic and partition. Where the coordinator keeps no partition
        log (Berth's: ``group_lag`` is None), the evidence of which partitions the group's topics have."""
        ...


class CoordinatorDirectory(Protocol):
    """One :class:`CoordinatorPort` per coordinator (sessions and clients shared by the fleets on it)."""

    async def connect(self, endpoint: BerthTarget | KafkaConnection) -> CoordinatorPort:
        """The port for Berth's coordinator at a trusted URL, or for a Kafka cluster as one principal."""
        ...

    async def bounds_of(self, port: CoordinatorPort) -> CoordinatorBounds:
        """The coordinator's session-timeout bounds (cached); raises :class:`CoordinatorUnavailable`."""
        ...


class JournalSource(Protocol):
    """A coordinator's membership journal, paged (Berth's: ``GET /v1/journal``, docs/api.md §8)."""

    async def journal_page(self, after: int, limit: int, wait_ms: int) -> tuple[int, dict[str, GroupActivity]]:
        """The cursor after the page and each group in it with its activity (``planners.restarts``: restarts,
        rebalances); empty when ``wait_ms`` passed with nothing new."""
        ...


class GroupRecords(Protocol):
    """Which fleet owns a group on a coordinator that keeps no owners (Kafka), as the operator records it.

    One record per ``(coordinator, group_id)`` (``coordinator``: the canonical identity,
    ``CoordinatorTarget.identity``), created atomically: of two fleets claiming at once, exactly one wins. Raises
    :class:`ApiCallFailed` when the records cannot be read or written.
    """

    async def owner(self, coordinator: str, group_id: str) -> GroupOwnerRef | None:
        """The fleet recorded as the group's owner; None when there is no record."""
        ...

    async def claim(self, coordinator: str, group_id: str, owner: GroupOwnerRef) -> GroupOwnerRef:
        """Record ``owner`` when there is no record; the owner recorded afterwards (``owner`` when it won)."""
        ...

    async def release(self, coordinator: str, group_id: str, owner_uid: str) -> None:
        """Remove the record when it names ``owner_uid`` (a record of another uid, or none, is left as it is)."""
        ...


class ClaimsIndex(Protocol):
    """Every fleet's claims by key (``planners.claims``: groups, volume-claim names, the census): Kopf's index in
    the operator (``handlers.claims``), a list in berth-demo and the unit tests (``planners.claims.ListedClaims``)."""

    def holders(self, key: ClaimKey) -> Iterable[GroupClaim]:
        """The fleets claiming ``key``, in no particular order."""
        ...

    def within(self, key: ClaimKey, limit: int, uid: str) -> bool:
        """Whether fleet ``uid`` is among the first ``limit`` claimants of the census ``key``
        (``planners.claims.ranked_within``); an index may reuse a ranking for a moment."""
        ...


class FleetReader(Protocol):
    async def read(self, namespace: str, name: str, *, seen: str | None = None) -> dict[str, Any] | None:
        """The fleet as stored now; None when it is gone. ``seen``: a resourceVersion of it the caller has seen
        (its watch delivered it): the answer may come from a cache that holds that version or a newer one, and
        everything this operator wrote; None: read from the source itself."""
        ...


class SecretLookup(Protocol):
    async def read(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """A Secret's keys, decoded; None when it does not exist; :class:`NotPermitted` when the operator may not
        read Secrets in that namespace. Values are never logged."""
        ...


class AdviceReader(Protocol):
    async def current(self) -> AdviceReading:
        """The session-timeout advice as last read (cached by the source), with the problems met reading it."""
        ...


class EvidenceJournal(Protocol):
    async def append(self, events: Sequence[EvidenceEvent]) -> None:
        """Append events (without ``seq``: the journal numbers them after what it holds)."""
        ...


class PassMetrics(Protocol):
    """Where what the passes do is counted (the operator's ``/metrics``)."""

    def pass_done(self, namespace: str, fleet: str, outcome: str) -> None: ...

    def triggered(self, trigger: str) -> None:
        """A pass started, asked for by ``trigger`` (``FleetReconciler``: a poke's source, or the queue's timing)."""
        ...

    def left(self, namespace: str, fleet: str, removed: int, delay_s: float, since_start_s: float | None) -> None: ...

    def state(self, namespace: str, fleet: str, *, ready: bool, refused: bool, departing: int) -> None: ...

    def restarted(self, namespace: str, fleet: str, *, static: int, rolls: int) -> None: ...

    def lag(self, namespace: str, fleet: str, *, total: int, max_partition: int) -> None: ...

    def conflicts(self, namespace: str, fleet: str, *, unreleased: int, fencing: int, released: int = 0) -> None: ...

    def ownership(self, namespace: str, fleet: str, *, unowned: int, idle: int, stuck: bool) -> None: ...

    def forget(self, namespace: str, fleet: str) -> None: ...
