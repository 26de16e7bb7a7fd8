"""Read the pipeline's session-timeout advice (``advice.json``, docs/formats.md).

Rules: only the fields the operator uses are read, unknown fields are ignored, and any ``version >= 1`` with
those fields is accepted (formats.md: readers ignore what they do not know). A group entry without the fields
is left out rather than guessed at; a document that is not an advice document at all raises
:class:`AdviceError` so the handler can say so and size without advice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard


class AdviceError(ValueError):
    """The advice document cannot be read."""


@dataclass(frozen=True, slots=True)
class GroupAdvice:
    advised_session_timeout_ms: int  # already includes the pipeline's safety margin and a heartbeat
    samples: int
    confident: bool  # false below the pipeline's sample threshold: the operator keeps its own estimate then
    reason: str


@dataclass(frozen=True, slots=True)
class Advice:
    generated_at_ms: int | None
    groups: Mapping[str, GroupAdvice] = field(default_factory=dict)

    def for_group(self, group_id: str) -> GroupAdvice | None:
        return self.groups.get(group_id)


def parse_advice(document: Mapping[str, Any]) -> Advice:
    version = document.get("version")
    if not _is_int(version) or version < 1:
        raise AdviceError(f"advice.json: version must be an integer >= 1, not {version!r}")
    groups = document.get("groups")
    if not isinstance(groups, Mapping):
        raise AdviceError("advice.json: groups must be a mapping of group id to advice")
    generated_at_ms = document.get("generated_at_ms")
    return Advice(
        generated_at_ms=generated_at_ms if _is_int(generated_at_ms) else None,
        groups={
            group_id: advice
            for group_id, entry in groups.items()
            if isinstance(entry, Mapping) and (advice := _group_advice(entry)) is not None
        },
    )


def _group_advice(entry: Mapping[str, Any]) -> GroupAdvice | None:
    advised = entry.get("advised_session_timeout_ms")
    samples = entry.get("samples")
    confident = entry.get("confident")
    if not _is_int(advised) or advised < 1 or not _is_int(samples) or samples < 0 or not isinstance(confident, bool):
        return None
    reason = entry.get("reason")
    return GroupAdvice(
        advised_session_timeout_ms=advised,
        samples=samples,
        confident=confident,
        reason=reason if isinstance(reason, str) else "",
    )


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
