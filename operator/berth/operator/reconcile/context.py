"""What every reconcile pass shares (:class:`PassContext`: the ports' factories, the operator's settings and a
little memory across passes), and what a pass returns or raises.

Rules: the composition root (``app``, or ``local.demo_support`` for berth-demo) builds one context with its
adapters; everything a pass touches outside the process goes through a port listed here, so the root can put a
cache (a watched object's informer) or a gate (a leader's Lease) in front of any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from berth.operator.planners.claims import ClaimKey, GroupClaim
from berth.operator.planners.ownership import AdoptionPolicy
from berth.operator.planners.restarts import NOTHING, GroupActivity
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.ports import (
    AdviceReader,
    CoordinatorDirectory,
    EventSink,
    FleetReader,
    GroupRecords,
    PassMetrics,
    SecretLookup,
    StatusPort,
    WorkloadPort,
)
from berth.operator.reconcile.evidence_journal import EvidenceRecorder
from berth.operator.reconcile.members import InstanceMemory
from berth.operator.spec import Fleet, OperatorDefaults


class ActivityLedger:
    """Each followed group's activity since its fleet's last pass, keyed by (coordinator URL, group id)."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], GroupActivity] = {}

    def add(self, url: str, activity: Mapping[str, GroupActivity]) -> None:
        for group, counted in activity.items():
            if counted != NOTHING:
                self._pending[url, group] = self._pending.get((url, group), NOTHING) + counted

    def take(self, url: str, group: str) -> GroupActivity:
        return self._pending.pop((url, group), NOTHING)


#: The fleets claiming one (coordinator, group) (Kopf's index in the operator; nothing in berth-demo).
ClaimsLookup = Callable[[ClaimKey], Iterable[GroupClaim]]


class RetryLater(Exception):
    """The pass stopped on a failure that was reported (Event, log); the handler retries with backoff."""


@dataclass(frozen=True, slots=True)
class PassResult:
    waiting: str | None = None  # what the fleet still waits for (the next pass continues); None: converged
    refused: bool = False  # the fleet was refused (invalid, or its group is another fleet's)
    #: The coordinator URL and group id whose journal this fleet's status follows (None: none, e.g. Kafka).
    follows: tuple[str, str] | None = None
    #: The key of the session-timeout advice that sizes this fleet (``planners.advice.advice_key``; None: none), so
    #: that a change of that advice pokes the fleet (``FleetReconciler.poke_advised``).
    advised_by: str | None = None
    #: When time alone may change what this pass found (no watched change announces it): the fleet is passed again
    #: then at the latest. None: only a change, or the usual timing, brings the next pass.
    again_at: datetime | None = None


@dataclass
class PassContext:
    status_for: Callable[[Mapping[str, Any]], StatusPort]
    workload_for: Callable[[Fleet], WorkloadPort]
    coordinators: CoordinatorDirectory
    advice: AdviceReader
    defaults: OperatorDefaults
    session_bounds: OperatorSessionBounds
    events_for: Callable[[Mapping[str, Any]], EventSink]
    now: Callable[[], datetime]
    #: The last "waiting for ..." said per fleet uid, so each wait is announced once, not once per pass.
    last_waiting: dict[str, str]
    #: Advice problems already logged, so a broken advice.json is reported once, not once per fleet per pass.
    advice_problems_seen: set[str]
    #: Reads the Secrets a Kafka fleet names for its principal (None: no Secrets, e.g. berth-demo).
    secrets: SecretLookup | None = None
    #: Records what the operator observes of groups on coordinators that keep no journal (None: not kept).
    evidence: EvidenceRecorder | None = None
    #: How long past its grace period a departing pod stuck Terminating is waited for (--stuck-terminating-s).
    stuck_allowance: timedelta = timedelta(minutes=2)
    #: Where what the passes do is counted (None: not counted, e.g. berth-demo).
    metrics: PassMetrics | None = None
    #: The CA (PEM) the operator verifies https coordinators against, published to fleets on one (None: none).
    coordinator_ca: Callable[[], str | None] = lambda: None
    #: Who held each Kafka fleet's instance ids since when (stale members and fencing are told from it).
    instances: InstanceMemory = field(default_factory=InstanceMemory)
    #: Why lag could not be read, as already logged (once each, not once per pass).
    lag_problems_seen: set[str] = field(default_factory=set)
    #: The administrator's decision of which groups in use fleets may take over (--adopt-groups).
    adoption: AdoptionPolicy = field(default_factory=AdoptionPolicy)
    #: The operator's own owner records of groups on coordinators that keep none (Kafka); None: none kept, and such
    #: fleets are refused (their groups would have no owner).
    records: GroupRecords | None = None
    #: Reads fleets fresh, to tell whether a group's recorded owner still exists (None: never judged stale).
    fleets: FleetReader | None = None
    #: Per census key, when it was ranked and the uids within the bound (the fleet bound, over the bound only).
    census: dict[ClaimKey, tuple[float, frozenset[str]]] = field(default_factory=dict)
    #: What the journal said of followed groups' restarts since their fleets' last passes (``reconcile.restarts``).
    activity: ActivityLedger = field(default_factory=lambda: ActivityLedger())

    def now_ms(self) -> int:
        return int(self.now().timestamp() * 1000)
