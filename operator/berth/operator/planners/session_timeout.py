"""The session timeout a fleet's pods get: the sizing planner's decision, the operator's bounds, and hysteresis.

Owns two rules the pure planner (``planners.sizing``) leaves to the operator:

- ``--session-min-ms`` / ``--session-max-ms`` bound the timeouts the operator *computes* (policy Auto), on top of
  the fleet's ``minMs``/``maxMs`` and the coordinator's bounds; a Fixed value is the user's decision and only the
  coordinator's bounds apply to it. A fleet whose range does not meet the operator's is a spec error naming the
  fleet's field, like one that does not meet the coordinator's.
- Hysteresis. The timeout is in the pod template's environment, so changing it restarts every pod, one at a time.
  With static membership each restart costs no rebalance, but each member still stops consuming while its pod is
  replaced, and a fleet of N pods spends N restart times rolling. So an Auto value that moves by less than
  :data:`MEANINGFUL_CHANGE_RATIO` (10 %, and at least :data:`MEANINGFUL_CHANGE_MIN_MS`) of the value the pods
  already have is not applied: the safety factor (1.5 by default) leaves far more margin than that, and journal
  advice wobbles by a few percent from one analytics run to the next. The new value is applied exactly when the
  pods roll anyway (the rest of the template changed), when the current value left the allowed bounds, when the
  policy is Fixed, or when there is no current value yet.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from berth.coordinator.formats.advice import GroupAdvice
from berth.operator.planners.conditions import Condition
from berth.operator.planners.observations import CoordinatorBounds
from berth.operator.planners.sizing import SessionTimeoutDecision, SessionTimeoutError, size_session_timeout
from berth.operator.spec.fleet import SessionTimeoutPolicy, SessionTimeoutSpec

#: The condition saying whether the coordinator's bounds let the timeout cover what the evidence asks for.
SESSION_TIMEOUT_SUFFICIENT = "SessionTimeoutSufficient"
MEANINGFUL_CHANGE_RATIO = 0.10
MEANINGFUL_CHANGE_MIN_MS = 1_000


@dataclass(frozen=True, slots=True)
class OperatorSessionBounds:
    min_ms: int
    max_ms: int


@dataclass(frozen=True, slots=True)
class SessionTimeoutChoice:
    ms: int
    reason: str
    changed: bool  # differs from the value the pods have now (or there was none)


def decide_session_timeout(
    spec: SessionTimeoutSpec,
    pod_template: Any,
    advice: GroupAdvice | None,
    coordinator_bounds: CoordinatorBounds | None,
    operator_bounds: OperatorSessionBounds,
) -> SessionTimeoutDecision:
    """``size_session_timeout``, then (policy Auto) clamped to the operator's bounds, naming them when they moved it."""
    if spec.policy is SessionTimeoutPolicy.FIXED:
        return size_session_timeout(spec, pod_template, advice, coordinator_bounds)
    if spec.max_ms < operator_bounds.min_ms:
        raise SessionTimeoutError(
            "spec.sessionTimeout.maxMs",
            f"{spec.max_ms} is below the operator's minimum session timeout {operator_bounds.min_ms} ms"
            " (--session-min-ms)",
        )
    if spec.min_ms > operator_bounds.max_ms:
        raise SessionTimeoutError(
            "spec.sessionTimeout.minMs",
            f"{spec.min_ms} is above the operator's maximum session timeout {operator_bounds.max_ms} ms"
            " (--session-max-ms)",
        )
    decision = size_session_timeout(spec, pod_template, advice, coordinator_bounds)
    low, high = operator_bounds.min_ms, operator_bounds.max_ms
    if coordinator_bounds is not None and (
        high < coordinator_bounds.min_session_timeout_ms or low > coordinator_bounds.max_session_timeout_ms
    ):
        # The operator's own flags contradict the coordinator: the coordinator's bounds are the hard ones.
        return decision
    if decision.ms < low:
        return replace(decision, ms=low, reason=f"{decision.reason}; raised to {_total(low)}, --session-min-ms")
    if decision.ms > high:
        return replace(decision, ms=high, reason=f"{decision.reason}; lowered to {_total(high)}, --session-max-ms")
    return decision


def sufficiency(decision: SessionTimeoutDecision, coordinator_bounds: CoordinatorBounds | None) -> Condition:
    """``SessionTimeoutSufficient``: False when what the estimate or the evidence asks for is more than the
    coordinator allows (its maximum, named as the setting to raise), so members away that long will be removed."""
    wanted = decision.wanted_ms
    if wanted is None or coordinator_bounds is None or wanted <= coordinator_bounds.max_session_timeout_ms:
        return Condition(
            SESSION_TIMEOUT_SUFFICIENT,
            "True",
            "WithinBounds",
            f"session timeout {_total(decision.ms)} covers what the {decision.source.value} asks for",
        )
    setting = coordinator_bounds.max_setting or "the coordinator's maximum session timeout"
    return Condition(
        SESSION_TIMEOUT_SUFFICIENT,
        "False",
        "CoordinatorMaximum",
        f"the {decision.source.value} asks for {_total(wanted)} but the coordinator allows at most"
        f" {_total(coordinator_bounds.max_session_timeout_ms)} ({setting}): a member away longer than that is"
        f" removed and its partitions reassigned; raise {setting} on the brokers to cover it",
    )


def choose_session_timeout(
    decision: SessionTimeoutDecision,
    *,
    policy: SessionTimeoutPolicy,
    current_ms: int | None,
    current_reason: str | None,
    allowed: tuple[int, int],
    pods_roll_anyway: bool,
) -> SessionTimeoutChoice:
    """Keep ``current_ms`` unless the decision moved meaningfully (see the module docstring)."""
    if current_ms is None or current_ms == decision.ms:
        return SessionTimeoutChoice(decision.ms, decision.reason, changed=current_ms is None)
    low, high = allowed
    must_change = policy is SessionTimeoutPolicy.FIXED or pods_roll_anyway or not low <= current_ms <= high
    if must_change or is_meaningful_change(current_ms, decision.ms):
        return SessionTimeoutChoice(decision.ms, decision.reason, changed=True)
    # Keep the reason that goes with the value the pods have: status then says why they have it.
    return SessionTimeoutChoice(current_ms, current_reason or decision.reason, changed=False)


def is_meaningful_change(current_ms: int, new_ms: int) -> bool:
    threshold = max(MEANINGFUL_CHANGE_MIN_MS, current_ms * MEANINGFUL_CHANGE_RATIO)
    return abs(new_ms - current_ms) >= threshold


def allowed_range(
    spec: SessionTimeoutSpec, coordinator_bounds: CoordinatorBounds | None, operator_bounds: OperatorSessionBounds
) -> tuple[int, int]:
    """The values a kept timeout must stay within: every bound that applies to the policy."""
    if spec.policy is SessionTimeoutPolicy.FIXED:
        low, high = 0, 2**31 - 1
    else:
        low = max(spec.min_ms, operator_bounds.min_ms)
        high = min(spec.max_ms, operator_bounds.max_ms)
    if coordinator_bounds is not None:
        low = max(low, coordinator_bounds.min_session_timeout_ms)
        high = min(high, coordinator_bounds.max_session_timeout_ms)
    return low, high


def _total(ms: int) -> str:
    return f"{ms / 1000:.1f} s" if ms % 100 == 0 else f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + " s"
