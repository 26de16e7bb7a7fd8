"""Size a fleet's session timeout, and the heartbeat interval that goes with it.

Owns ``size_session_timeout`` (docs/operator.md "Session timeout"). Rules:

- Auto: the restart estimate is termination grace (default 30 s) + the startup probe budget (of the startupProbe,
  else the readinessProbe, else nothing) + a scheduling allowance, times the safety factor. A *confident* advice
  for the group (docs/formats.md) replaces the whole product: the pipeline already applied its own safety margin
  and added a heartbeat, so the fleet's safety factor is not applied on top of it.
- Fixed: the given value, unchanged, if the coordinator's ``[min, max]`` accepts it; else an error naming the
  bound. ``minMs``/``maxMs`` bound Auto only (as the CRD documents them): a Fixed value is the user's decision.
- Auto's result lies within the fleet's ``[minMs, maxMs]`` and the coordinator's ``[min, max]``
  (``GET /v1/config``); the reason names the bound that clamped it. Bounds that do not overlap are an error naming
  the field to fix.
- The reason is a sentence for a person: it goes into status and an Event.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from berth.coordinator.formats.advice import GroupAdvice
from berth.operator.planners.observations import CoordinatorBounds
from berth.operator.spec.fleet import SessionTimeoutPolicy, SessionTimeoutSpec, SpecError

#: Kubernetes' defaults for fields a pod template leaves out.
DEFAULT_TERMINATION_GRACE_SECONDS = 30
PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3}
DEFAULT_SCHEDULING_ALLOWANCE_MS = 10_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 3_000


class SessionTimeoutSource(StrEnum):
    ESTIMATE = "estimate"  # Auto, from the pod template
    ADVICE = "advice"  # Auto, from a confident journal advice
    FIXED = "fixed"  # policy Fixed


class SessionTimeoutError(SpecError):
    """No session timeout satisfies the fleet's and the coordinator's bounds; ``field`` says what to change."""


@dataclass(frozen=True, slots=True)
class SessionTimeoutDecision:
    ms: int
    reason: str
    source: SessionTimeoutSource
    #: What the estimate or the advice asked for before any bound moved it (Auto); None for Fixed.
    wanted_ms: int | None = None


@dataclass(frozen=True, slots=True)
class RestartEstimate:
    """How long a member is away while its pod is replaced, worst case, from the pod template."""

    grace_ms: int
    probe_ms: int
    probe_kind: str | None  # "startup probe", "readiness probe", or None when no container has either
    scheduling_ms: int

    @property
    def total_ms(self) -> int:
        return self.grace_ms + self.probe_ms + self.scheduling_ms

    def describe(self) -> str:
        if self.probe_kind is None:
            parts = f"grace {_seconds(self.grace_ms)} + scheduling {_seconds(self.scheduling_ms)}"
            return f"{parts}; no startup or readiness probe"
        return (
            f"grace {_seconds(self.grace_ms)} + {self.probe_kind} {_seconds(self.probe_ms)}"
            f" + scheduling {_seconds(self.scheduling_ms)}"
        )


def size_session_timeout(
    spec: SessionTimeoutSpec,
    pod_template: Mapping[str, Any],
    advice: GroupAdvice | None,
    coordinator_bounds: CoordinatorBounds | None,
    *,
    scheduling_allowance_ms: int = DEFAULT_SCHEDULING_ALLOWANCE_MS,
) -> SessionTimeoutDecision:
    """Decide the session timeout; ``advice`` is this group's entry, ``coordinator_bounds`` None when unknown.

    Raises :class:`SessionTimeoutError` when the bounds leave no valid value or a Fixed value lies outside them.
    """
    if spec.policy is SessionTimeoutPolicy.FIXED:
        if spec.fixed_ms is None:  # parse_fleet_spec refuses this; a hand-built spec might not
            raise SessionTimeoutError("spec.sessionTimeout.fixedMs", "is required when policy is Fixed")
        bounds = _Bounds(spec, coordinator_bounds)
        bounds.check_fixed(spec.fixed_ms)
        reason = f"fixed by spec.sessionTimeout.fixedMs: {_total(spec.fixed_ms)}"
        return SessionTimeoutDecision(spec.fixed_ms, reason + bounds.unknown_note(), SessionTimeoutSource.FIXED)

    bounds = _Bounds.of(spec, coordinator_bounds)
    if advice is not None and advice.confident:
        wanted = advice.advised_session_timeout_ms
        # The advice is a finished timeout (margin and heartbeat included): multiplying again would double-count.
        reason = (
            f"journal advice: {advice.reason or _total(wanted)}"
            f" (its safety margin is included; safetyFactor {spec.safety_factor:g} not applied again)"
        )
        source = SessionTimeoutSource.ADVICE
    else:
        estimate = estimate_restart(pod_template, scheduling_allowance_ms=scheduling_allowance_ms)
        # Decimal: 52000 x 1.1 must be 57200, not 57200.000000000007 rounded up to 57201.
        wanted = math.ceil(Decimal(estimate.total_ms) * Decimal(str(spec.safety_factor)))
        reason = (
            f"estimated restart {_total(estimate.total_ms)} ({estimate.describe()})"
            f" x {spec.safety_factor:g} = {_total(wanted)}"
        )
        if advice is not None:
            reason += f"; journal advice not used: only {advice.samples} samples, not confident"
        source = SessionTimeoutSource.ESTIMATE
    ms, clamp_note = bounds.clamp(wanted)
    return SessionTimeoutDecision(ms, reason + clamp_note + bounds.unknown_note(), source, wanted_ms=wanted)


def estimate_restart(
    pod_template: Mapping[str, Any], *, scheduling_allowance_ms: int = DEFAULT_SCHEDULING_ALLOWANCE_MS
) -> RestartEstimate:
    """Grace period + the slowest container's probe budget + the scheduling allowance."""
    pod_spec = pod_template.get("spec") or {}
    grace_s = _seconds_field(pod_spec, "terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_SECONDS)
    slowest: tuple[int, str] | None = None
    # The pod is back when its slowest container is: take the largest budget across containers.
    for index, container in enumerate(pod_spec.get("containers") or []):
        budget = _container_probe_budget(container, f"spec.template.spec.containers[{index}]")
        if budget is not None and (slowest is None or budget[0] > slowest[0]):
            slowest = budget
    probe_ms, probe_kind = slowest if slowest is not None else (0, None)
    return RestartEstimate(
        grace_ms=grace_s * 1000, probe_ms=probe_ms, probe_kind=probe_kind, scheduling_ms=scheduling_allowance_ms
    )


def heartbeat_interval_ms(session_timeout_ms: int, preferred_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS) -> int:
    """Kafka's default interval, shortened to a third of the session so that two lost heartbeats are survivable."""
    return max(1, min(preferred_ms, session_timeout_ms // 3))


@dataclass(frozen=True, slots=True)
class _Bounds:
    spec: SessionTimeoutSpec
    coordinator: CoordinatorBounds | None

    @classmethod
    def of(cls, spec: SessionTimeoutSpec, coordinator: CoordinatorBounds | None) -> _Bounds:
        if coordinator is not None:
            if spec.min_ms > coordinator.max_session_timeout_ms:
                raise SessionTimeoutError(
                    "spec.sessionTimeout.minMs",
                    f"{spec.min_ms} is above the coordinator's maximum session timeout"
                    f" {coordinator.max_session_timeout_ms} ms",
                )
            if spec.max_ms < coordinator.min_session_timeout_ms:
                raise SessionTimeoutError(
                    "spec.sessionTimeout.maxMs",
                    f"{spec.max_ms} is below the coordinator's minimum session timeout"
                    f" {coordinator.min_session_timeout_ms} ms",
                )
        return cls(spec, coordinator)

    def clamp(self, wanted: int) -> tuple[int, str]:
        """The value within every bound, and a note naming the bound that moved it ("" when none did)."""
        lows = {"the fleet's minMs": self.spec.min_ms}
        highs = {"the fleet's maxMs": self.spec.max_ms}
        if self.coordinator is not None:
            low_setting, high_setting = self.coordinator.min_setting, self.coordinator.max_setting
            lows["the coordinator's minimum" + (f" ({low_setting})" if low_setting else "")] = (
                self.coordinator.min_session_timeout_ms
            )
            highs["the coordinator's maximum" + (f" ({high_setting})" if high_setting else "")] = (
                self.coordinator.max_session_timeout_ms
            )
        low, high = max(lows.values()), min(highs.values())
        if wanted < low:
            return low, f"; raised to {_total(low)}, {_names(lows, low)}"
        if wanted > high:
            return high, f"; lowered to {_total(high)}, {_names(highs, high)}"
        return wanted, ""

    def check_fixed(self, fixed_ms: int) -> None:
        field = "spec.sessionTimeout.fixedMs"
        if self.coordinator is None:
            return
        if fixed_ms < self.coordinator.min_session_timeout_ms:
            raise SessionTimeoutError(
                field,
                f"{fixed_ms} is below the coordinator's minimum session timeout"
                f" {self.coordinator.min_session_timeout_ms} ms",
            )
        if fixed_ms > self.coordinator.max_session_timeout_ms:
            raise SessionTimeoutError(
                field,
                f"{fixed_ms} is above the coordinator's maximum session timeout"
                f" {self.coordinator.max_session_timeout_ms} ms",
            )

    def unknown_note(self) -> str:
        return "; the coordinator's bounds are unknown (not checked)" if self.coordinator is None else ""


def _names(candidates: Mapping[str, int], value: int) -> str:
    """Every bound equal to ``value``: the defaults make the fleet's and the coordinator's bounds often coincide."""
    return " and ".join(name for name, bound in candidates.items() if bound == value)


def _container_probe_budget(container: Mapping[str, Any], where: str) -> tuple[int, str] | None:
    # A startupProbe holds readiness checks back until it passes, so when there is one it alone bounds startup.
    for key, kind in (("startupProbe", "startup probe"), ("readinessProbe", "readiness probe")):
        probe = container.get(key)
        if probe is not None:
            return _probe_budget_ms(probe, f"{where}.{key}"), kind
    return None


def _probe_budget_ms(probe: Mapping[str, Any], field: str) -> int:
    # The longest a probe may take to pass: its delay, then failureThreshold periods.
    values = {key: _seconds_field(probe, key, default, field) for key, default in PROBE_DEFAULTS.items()}
    return (values["initialDelaySeconds"] + values["failureThreshold"] * values["periodSeconds"]) * 1000


def _seconds_field(obj: Mapping[str, Any], key: str, default: int, where: str = "spec.template.spec") -> int:
    value = obj.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(f"{where}.{key}", f"must be a non-negative integer, not {value!r}")
    return value


def _seconds(ms: int) -> str:
    """A component of a sum: ``30 s``, ``2.5 s``."""
    return f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + " s"


def _total(ms: int) -> str:
    """A result: ``78.0 s`` (at least one decimal, as people read durations; more only when it has them)."""
    return f"{ms / 1000:.1f} s" if ms % 100 == 0 else _seconds(ms)
