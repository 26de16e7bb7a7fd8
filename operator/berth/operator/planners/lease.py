"""Leader election on a ``coordination.k8s.io/v1`` Lease, decided as data (client-go's LeaderElector, in a few rules).

The Lease's spec is the record: ``holderIdentity``, ``leaseDurationSeconds``, ``acquireTime``, ``renewTime``,
``leaseTransitions``; its ``resourceVersion`` makes every write conditional, so of two candidates racing for it one
wins and the other is answered 409. Rules:

- A candidate takes the Lease at once when it names no holder (released by a holder that stopped acting first);
  when its holder has not renewed it for a lease duration; and when there is none once it has seen none for a lease
  duration. Durations are measured on the candidate's own monotonic clock from the moment it last saw the record
  change (:func:`observe`), never from ``renewTime``: two machines' clocks differ, and a renewal it did not see
  could not have been made. The duration is the longer of the record's ``leaseDurationSeconds`` and the
  candidate's own: a record edited to a shorter one does not shorten the wait.
- A Lease that is missing may have been deleted under a leader that has not noticed yet (it notices at its next
  renewal, or stops at its renew deadline when it cannot renew): creating it at once would make a second leader
  (issue 28: two leaders for 17 ms after a deletion). So the first replica ever started also waits one lease
  duration before it creates the Lease.
- The holder renews every ``retry_period_s``; it may act only while the last renewal that succeeded was *sent*
  less than ``renew_deadline_s`` ago. The renew deadline is shorter than the lease duration, so a holder that
  cannot renew (partitioned, frozen, its API calls timing out) has stopped acting before anyone may take over
  (:func:`check_timing` enforces the order: retry period < renew deadline < lease duration).
- A holder that stops gracefully releases the Lease (no holder, a duration of 1 s), so a standby takes over as soon
  as it sees the release instead of after the lease duration.
- A :class:`Wait` says until when (``until``, on the candidate's monotonic clock): the moment its decision changes if
  the record does not, ``seen_at`` plus the duration it waits out. The candidate looks again then, or as soon as it
  learns of a change (it watches the Lease), whichever comes first, and at the latest after a retry period. Watching
  keeps the safety argument: the clock of "unchanged for a lease duration" still starts when the candidate *saw* the
  change (:func:`observe`), and a watch, however prompt, sees a renewal only after it was written, so after the
  holder sent it; the holder stops acting a renew deadline after that send, before the lease duration is out. (A
  watching candidate takes over sooner than a slow looker only because it sees the last renewal sooner.)

Pure: the caller passes the record as read, its own identity and both clocks (monotonic for durations, the wall
clock only for the times written into the record, which people read).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any


def format_micro_time(now: datetime) -> str:
    """A metav1.MicroTime (what a Lease's times are): RFC 3339 in UTC with microseconds."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseConflict(Exception):
    """The Lease changed since it was read (409), or was created meanwhile: read it again."""


class LeaseLost(Exception):
    """A renewal the API server refused for good: the Lease is gone (404: deleted, perhaps already created again by
    a candidate) or this replica may no longer write it (401, 403: its credentials or rights were removed). The
    holder stops acting at once instead of at its renew deadline."""


class LeaseTimingError(ValueError):
    """Lease timings that would let two replicas act at once, or never renew in time."""


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """controller-runtime's defaults: a standby takes over ~15 s after the leader stopped renewing."""

    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


def check_timing(timing: LeaseTiming) -> None:
    if not 0 < timing.retry_period_s < timing.renew_deadline_s < timing.lease_duration_s:
        raise LeaseTimingError(
            f"the retry period ({timing.retry_period_s:g} s) must be shorter than the renew deadline"
            f" ({timing.renew_deadline_s:g} s), and the renew deadline shorter than the lease duration"
            f" ({timing.lease_duration_s:g} s): a leader must stop acting before another may take over"
        )


def write_bound_s(timing: LeaseTiming) -> float:
    """How late the network may deliver a write after the gate let it through (``TCP_USER_TIMEOUT`` on a gated
    client's connections, ``gated_http``): half the margin between the renew deadline and the lease duration, so that
    a write checked before its replica's renew deadline has landed, or been dropped, before any other replica may
    take the Lease over."""
    return (timing.lease_duration_s - timing.renew_deadline_s) / 2


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str  # "" when nobody holds it
    lease_duration_s: int
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0
    resource_version: str | None = None  # of the Lease as read or written; None: not created yet

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_s=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=(lease.get("metadata") or {}).get("resourceVersion"),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder or None,
            "leaseDurationSeconds": self.lease_duration_s,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


@dataclass(frozen=True, slots=True)
class Observed:
    """The record as last read, and when (monotonic) it was first seen as it is."""

    record: LeaseRecord | None
    seen_at: float


def observe(previous: Observed | None, record: LeaseRecord | None, now: float) -> Observed:
    """The observation after reading ``record`` at ``now``: its clock restarts only when the record changed."""
    if previous is not None and _same(previous.record, record):
        return previous
    return Observed(record, now)


def _same(a: LeaseRecord | None, b: LeaseRecord | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.holder, a.renew_time, a.resource_version) == (b.holder, b.renew_time, b.resource_version)


@dataclass(frozen=True, slots=True)
class Wait:
    """Someone else holds the Lease (``holder``; "": there is none, and it has not been seen missing for a lease
    duration yet). The decision changes at ``until`` (monotonic seconds) if the record stays as it is: look again
    then, or when the record changes, and at the latest after the retry period."""

    holder: str
    until: float


@dataclass(frozen=True, slots=True)
class Write:
    """Write ``record`` (create when ``create``, else replace at its resourceVersion); success makes us the holder."""

    record: LeaseRecord
    create: bool
    #: The holder before, when this write takes the Lease from someone ("" : it was free).
    taking_from: str | None = None


def decide(me: str, observed: Observed, timing: LeaseTiming, *, now: float, wall: datetime) -> Wait | Write:
    """What candidate (or holder) ``me`` does after a read (see the module docstring)."""
    record = observed.record
    stamp = format_micro_time(wall)
    duration = max(1, round(timing.lease_duration_s))
    waited = now - observed.seen_at
    if record is None:
        if waited < timing.lease_duration_s:
            return Wait("", observed.seen_at + timing.lease_duration_s)
        return Write(LeaseRecord(me, duration, stamp, stamp, 0), create=True, taking_from="")
    if record.holder == me:
        return Write(replace(record, renew_time=stamp, lease_duration_s=duration), create=False)
    lasts = max(record.lease_duration_s, timing.lease_duration_s)
    if record.holder and waited < lasts:
        return Wait(record.holder, observed.seen_at + lasts)
    taken = replace(
        record,
        holder=me,
        lease_duration_s=duration,
        acquire_time=stamp,
        renew_time=stamp,
        transitions=record.transitions + (1 if record.holder else 0),
    )
    return Write(taken, create=False, taking_from=record.holder)


def renewal(record: LeaseRecord, timing: LeaseTiming, wall: datetime) -> LeaseRecord:
    """The holder's record, renewed now."""
    return replace(record, renew_time=format_micro_time(wall), lease_duration_s=max(1, round(timing.lease_duration_s)))


def released(record: LeaseRecord, wall: datetime) -> LeaseRecord:
    """The holder's record, let go: no holder, and a duration so short that the next candidate takes it at once."""
    stamp = format_micro_time(wall)
    return replace(record, holder="", lease_duration_s=1, renew_time=stamp, acquire_time=stamp)
