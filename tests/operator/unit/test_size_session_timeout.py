"""Sizing the session timeout: one row per situation, with the exact value, source and reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from berth.coordinator.formats.advice import GroupAdvice
from berth.operator.planners.observations import CoordinatorBounds
from berth.operator.planners.sizing import (
    SessionTimeoutError,
    SessionTimeoutSource,
    estimate_restart,
    heartbeat_interval_ms,
    size_session_timeout,
)
from berth.operator.spec.fleet import SessionTimeoutPolicy, SessionTimeoutSpec, SpecError

KAFKA_BOUNDS = CoordinatorBounds(min_session_timeout_ms=6_000, max_session_timeout_ms=1_800_000)
AUTO = SessionTimeoutSpec()
STARTUP_12S = {"httpGet": {"path": "/started", "port": 8080}, "periodSeconds": 2, "failureThreshold": 6}
READINESS_35S = {"httpGet": {"path": "/ready", "port": 8080}, "initialDelaySeconds": 5}  # 5 + 3 x 10 (defaults)
CONFIDENT = GroupAdvice(
    advised_session_timeout_ms=45_000,
    samples=240,
    confident=True,
    reason="p99 of 240 restart gaps is 28.0 s; x1.5 + 3.0 s heartbeat = 45.0 s",
)
HESITANT = GroupAdvice(advised_session_timeout_ms=9_000, samples=12, confident=False, reason="too few samples")


def pod(*containers: dict[str, Any], grace: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", **c} for i, c in enumerate(containers)]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"spec": spec}


@dataclass(frozen=True)
class Row:
    spec: SessionTimeoutSpec = AUTO
    template: dict[str, Any] = field(default_factory=lambda: pod({}))
    advice: GroupAdvice | None = None
    bounds: CoordinatorBounds | None = KAFKA_BOUNDS
    allowance_ms: int = 10_000


ROWS: dict[str, tuple[Row, int, SessionTimeoutSource, str]] = {
    "no probes: grace and scheduling only": (
        Row(),
        60_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 40.0 s (grace 30 s + scheduling 10 s; no startup or readiness probe) x 1.5 = 60.0 s",
    ),
    "a startup probe": (
        Row(template=pod({"startupProbe": STARTUP_12S})),
        78_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 52.0 s (grace 30 s + startup probe 12 s + scheduling 10 s) x 1.5 = 78.0 s",
    ),
    "the startup probe bounds startup even when a readiness probe is longer": (
        Row(template=pod({"startupProbe": STARTUP_12S, "readinessProbe": READINESS_35S})),
        78_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 52.0 s (grace 30 s + startup probe 12 s + scheduling 10 s) x 1.5 = 78.0 s",
    ),
    "a readiness probe when there is no startup probe, factor 2": (
        Row(spec=SessionTimeoutSpec(safety_factor=2.0), template=pod({"readinessProbe": READINESS_35S}, grace=20)),
        130_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 65.0 s (grace 20 s + readiness probe 35 s + scheduling 10 s) x 2 = 130.0 s",
    ),
    "the slowest container decides": (
        Row(template=pod({"startupProbe": STARTUP_12S}, {"readinessProbe": READINESS_35S})),
        112_500,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 75.0 s (grace 30 s + readiness probe 35 s + scheduling 10 s) x 1.5 = 112.5 s",
    ),
    "a factor of 1.1 is exact, not rounded up by float error": (
        Row(spec=SessionTimeoutSpec(safety_factor=1.1), template=pod({"startupProbe": STARTUP_12S})),
        57_200,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 52.0 s (grace 30 s + startup probe 12 s + scheduling 10 s) x 1.1 = 57.2 s",
    ),
    "raised to the minimum both sides share": (
        Row(template=pod({}, grace=1), allowance_ms=2_500),
        6_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 3.5 s (grace 1 s + scheduling 2.5 s; no startup or readiness probe) x 1.5 = 5.25 s"
        "; raised to 6.0 s, the fleet's minMs and the coordinator's minimum",
    ),
    "raised to the coordinator's minimum": (
        Row(bounds=CoordinatorBounds(90_000, 1_800_000)),
        90_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 40.0 s (grace 30 s + scheduling 10 s; no startup or readiness probe) x 1.5 = 60.0 s"
        "; raised to 90.0 s, the coordinator's minimum",
    ),
    "lowered to the fleet's maxMs": (
        Row(spec=SessionTimeoutSpec(max_ms=50_000)),
        50_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 40.0 s (grace 30 s + scheduling 10 s; no startup or readiness probe) x 1.5 = 60.0 s"
        "; lowered to 50.0 s, the fleet's maxMs",
    ),
    "lowered to the coordinator's maximum": (
        Row(bounds=CoordinatorBounds(6_000, 30_000)),
        30_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 40.0 s (grace 30 s + scheduling 10 s; no startup or readiness probe) x 1.5 = 60.0 s"
        "; lowered to 30.0 s, the coordinator's maximum",
    ),
    "a confident advice replaces the estimate and is not multiplied again": (
        Row(template=pod({"startupProbe": STARTUP_12S}), advice=CONFIDENT),
        45_000,
        SessionTimeoutSource.ADVICE,
        "journal advice: p99 of 240 restart gaps is 28.0 s; x1.5 + 3.0 s heartbeat = 45.0 s"
        " (its safety margin is included; safetyFactor 1.5 not applied again)",
    ),
    "a confident advice is clamped like an estimate": (
        Row(advice=CONFIDENT, bounds=CoordinatorBounds(6_000, 40_000)),
        40_000,
        SessionTimeoutSource.ADVICE,
        "journal advice: p99 of 240 restart gaps is 28.0 s; x1.5 + 3.0 s heartbeat = 45.0 s"
        " (its safety margin is included; safetyFactor 1.5 not applied again); lowered to 40.0 s,"
        " the coordinator's maximum",
    ),
    "an advice that is not confident is not used, and the reason says so": (
        Row(advice=HESITANT),
        60_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 40.0 s (grace 30 s + scheduling 10 s; no startup or readiness probe) x 1.5 = 60.0 s"
        "; journal advice not used: only 12 samples, not confident",
    ),
    "unknown coordinator bounds: the fleet's alone, and the reason says so": (
        Row(bounds=None),
        60_000,
        SessionTimeoutSource.ESTIMATE,
        "estimated restart 40.0 s (grace 30 s + scheduling 10 s; no startup or readiness probe) x 1.5 = 60.0 s"
        "; the coordinator's bounds are unknown (not checked)",
    ),
    "fixed below the fleet's minMs: minMs and maxMs bound Auto only": (
        Row(
            spec=SessionTimeoutSpec(policy=SessionTimeoutPolicy.FIXED, fixed_ms=4_000),
            bounds=CoordinatorBounds(3_000, 60_000),
        ),
        4_000,
        SessionTimeoutSource.FIXED,
        "fixed by spec.sessionTimeout.fixedMs: 4.0 s",
    ),
    "fixed, the coordinator's bounds unknown": (
        Row(spec=SessionTimeoutSpec(policy=SessionTimeoutPolicy.FIXED, fixed_ms=45_000), bounds=None),
        45_000,
        SessionTimeoutSource.FIXED,
        "fixed by spec.sessionTimeout.fixedMs: 45.0 s; the coordinator's bounds are unknown (not checked)",
    ),
    "fixed within every bound": (
        Row(spec=SessionTimeoutSpec(policy=SessionTimeoutPolicy.FIXED, fixed_ms=45_000), advice=CONFIDENT),
        45_000,
        SessionTimeoutSource.FIXED,
        "fixed by spec.sessionTimeout.fixedMs: 45.0 s",
    ),
}


@pytest.mark.parametrize(("row", "ms", "source", "reason"), ROWS.values(), ids=ROWS.keys())
def test_size_session_timeout(row: Row, ms: int, source: SessionTimeoutSource, reason: str) -> None:
    decision = size_session_timeout(
        row.spec, row.template, row.advice, row.bounds, scheduling_allowance_ms=row.allowance_ms
    )

    assert (decision.ms, decision.reason, decision.source) == (ms, reason, source)


FIXED_45S = SessionTimeoutSpec(policy=SessionTimeoutPolicy.FIXED, fixed_ms=45_000)
REFUSALS: dict[str, tuple[SessionTimeoutSpec, CoordinatorBounds | None, str, str]] = {
    "fixed below the coordinator's minimum": (
        FIXED_45S,
        CoordinatorBounds(60_000, 1_800_000),
        "spec.sessionTimeout.fixedMs",
        "45000 is below the coordinator's minimum session timeout 60000 ms",
    ),
    "fixed above the coordinator's maximum": (
        FIXED_45S,
        CoordinatorBounds(6_000, 30_000),
        "spec.sessionTimeout.fixedMs",
        "45000 is above the coordinator's maximum session timeout 30000 ms",
    ),
    "the fleet's range lies below the coordinator's": (
        SessionTimeoutSpec(min_ms=1_000, max_ms=5_000),
        KAFKA_BOUNDS,
        "spec.sessionTimeout.maxMs",
        "5000 is below the coordinator's minimum session timeout 6000 ms",
    ),
    "the fleet's range lies above the coordinator's": (
        SessionTimeoutSpec(min_ms=60_000, max_ms=90_000),
        CoordinatorBounds(6_000, 30_000),
        "spec.sessionTimeout.minMs",
        "60000 is above the coordinator's maximum session timeout 30000 ms",
    ),
}


@pytest.mark.parametrize(("spec", "bounds", "field", "problem"), REFUSALS.values(), ids=REFUSALS.keys())
def test_no_valid_session_timeout_is_an_error_naming_the_bound(
    spec: SessionTimeoutSpec, bounds: CoordinatorBounds | None, field: str, problem: str
) -> None:
    with pytest.raises(SessionTimeoutError) as raised:
        size_session_timeout(spec, pod({}), None, bounds)

    assert isinstance(raised.value, SpecError)  # handlers report both the same way
    assert (raised.value.field, raised.value.problem) == (field, problem)


def test_a_malformed_probe_is_a_spec_error_naming_it() -> None:
    with pytest.raises(SpecError) as raised:
        estimate_restart(pod({}, {"startupProbe": {"periodSeconds": "ten"}}))
    assert raised.value.field == "spec.template.spec.containers[1].startupProbe.periodSeconds"


@pytest.mark.parametrize(
    ("session_ms", "preferred_ms", "heartbeat_ms"),
    [(45_000, 3_000, 3_000), (6_000, 3_000, 2_000), (7_001, 3_000, 2_333), (2, 3_000, 1), (1_800_000, 5_000, 5_000)],
)
def test_the_heartbeat_interval_never_exceeds_a_third_of_the_session(
    session_ms: int, preferred_ms: int, heartbeat_ms: int
) -> None:
    assert heartbeat_interval_ms(session_ms, preferred_ms) == heartbeat_ms
