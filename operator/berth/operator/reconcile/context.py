"""What every reconcile pass shares, and what a pass returns or raises.

- :class:`Ports`: everything a pass touches outside the process (``berth.operator.ports``), as the composition root
  (``command.app``, or ``local.demo_support`` for berth-demo) hands it over, so the root can put a cache (a watched
  object's informer) or a gate (a leader's Lease) in front of any of them;
- :class:`Settings`: the administrator's decisions (flags) the passes apply;
- :class:`PassContext`: the two together, as the reconciler hands them to each pass.

Rules: all three are frozen, and none remembers anything. What the operator remembers of a fleet between its passes
is that fleet's :class:`~berth.operator.reconcile.memory.FleetMemory`, forgotten with the fleet; what a pass works
with is its :class:`~berth.operator.reconcile.scope.Scope`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from berth.operator.planners.ownership import AdoptionPolicy
from berth.operator.planners.roll_pacing import RollPacer
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.ports import (
    AdviceReader,
    CoordinatorDirectory,
    EventSink,
    EvidenceJournal,
    FleetReader,
    GroupRecords,
    PassMetrics,
    SecretLookup,
    StatusPort,
    WorkloadPort,
)
from berth.operator.spec.fleet import Fleet, OperatorDefaults


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
    #: Whether the StatefulSet controller's progress alone can change what the next pass decides
    #: (``planners.pokes.watches_progress``); True unless the status step says otherwise.
    watches_progress: bool = True


@dataclass(frozen=True, slots=True)
class Ports:
    """Every port a pass reaches the world through (``berth.operator.ports`` documents each)."""

    status_for: Callable[[Mapping[str, Any]], StatusPort]
    workload_for: Callable[[Fleet], WorkloadPort]
    events_for: Callable[[Mapping[str, Any]], EventSink]
    coordinators: CoordinatorDirectory
    advice: AdviceReader
    now: Callable[[], datetime]
    #: Reads the Secrets a Kafka fleet names for its principal (None: no Secrets, e.g. berth-demo).
    secrets: SecretLookup | None = None
    #: Where the evidence of groups on coordinators that keep no journal goes (None: kept nowhere).
    evidence: EvidenceJournal | None = None
    #: Where what the passes do is counted (None: not counted, e.g. berth-demo).
    metrics: PassMetrics | None = None
    #: The operator's own owner records of groups on coordinators that keep none (Kafka); None: none kept, and such
    #: fleets are refused (their groups would have no owner).
    records: GroupRecords | None = None
    #: Reads fleets fresh, to tell whether a group's recorded owner still exists (None: never judged stale).
    fleets: FleetReader | None = None
    #: The CA (PEM) the operator verifies https coordinators against, published to fleets on one (None: none).
    coordinator_ca: Callable[[], str | None] = lambda: None
    #: Paces the fleets' rolls (``--max-concurrent-rolls``; None: not paced, e.g. berth-demo, whose fleets do not
    #: roll).
    rolls: RollPacer | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    """What the administrator decided (the operator's flags) that the passes apply."""

    defaults: OperatorDefaults
    session_bounds: OperatorSessionBounds
    #: How long past its grace period a departing pod stuck Terminating is waited for (--stuck-terminating-s).
    stuck_allowance: timedelta = timedelta(minutes=2)
    #: Which groups in use fleets may take over (--adopt-groups).
    adoption: AdoptionPolicy = field(default_factory=AdoptionPolicy)
    #: How long partitions may go unowned, or Ready pods idle while others own several, before the group is stuck
    #: (--stuck-group-s; ``planners.stuck_group``).
    stuck_group: timedelta = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class PassContext:
    """The ports and the settings, as every pass gets them."""

    ports: Ports
    settings: Settings
