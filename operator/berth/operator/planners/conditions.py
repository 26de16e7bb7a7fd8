"""Status conditions the Kubernetes way (API conventions, ``metav1.Condition``).

Rules: ``status`` is ``"True"``, ``"False"`` or ``"Unknown"``; ``lastTransitionTime`` changes only when a
condition's status changes (a new reason or message alone is not a transition); conditions of types this update
does not mention are kept as they were, in place, so handlers can each own some types. Times are RFC 3339 UTC with
second precision, as ``metav1.Time`` serialises them; ``now`` is a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

ConditionStatus = Literal["True", "False", "Unknown"]


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: ConditionStatus
    reason: str  # CamelCase, machine-readable
    message: str  # a sentence for a person


def format_duration_ms(ms: int) -> str:
    """A duration for people, in Go's style as kubectl shows them: ``45s``, ``1m30s``, ``30m``, ``6.5s``."""
    if ms % 1000:
        return f"{ms / 1000:g}s"
    hours, rest = divmod(ms // 1000, 3600)
    minutes, seconds = divmod(rest, 60)
    text = "".join(f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"), (seconds, "s")) if value)
    return text or "0s"


def format_time(now: datetime) -> str:
    """RFC 3339 in UTC, seconds precision: ``2026-01-02T03:04:05Z``."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> datetime | None:
    """A metav1.Time (``2026-01-02T03:04:05Z``) as an aware datetime; None when absent, unreadable or naive (a
    hand-edited status must not stall anything that reads it)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def merge_conditions(
    previous: Sequence[Mapping[str, Any]] | None,
    updates: Iterable[Condition],
    *,
    now: datetime,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """``previous`` with ``updates`` applied: changed ones in place, new ones appended, the rest untouched."""
    merged = [dict(condition) for condition in previous or ()]
    index = {condition.get("type"): position for position, condition in enumerate(merged)}
    for update in updates:
        position = index.get(update.type)
        before = merged[position] if position is not None else None
        unchanged = before is not None and before.get("status") == update.status and before.get("lastTransitionTime")
        condition: dict[str, Any] = {
            "type": update.type,
            "status": update.status,
            "reason": update.reason,
            "message": update.message,
            "lastTransitionTime": before["lastTransitionTime"] if unchanged and before else format_time(now),
        }
        if observed_generation is not None:
            condition["observedGeneration"] = observed_generation
        if position is None:
            index[update.type] = len(merged)
            merged.append(condition)
        else:
            merged[position] = condition
    return merged
