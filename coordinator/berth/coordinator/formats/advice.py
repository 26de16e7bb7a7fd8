"""The session-timeout advice document, ``advice.json`` (docs/formats.md, "Session-timeout advice"), declared once:
the pipeline writes it (``berth.pipeline.advice``: :func:`advice_document` of its rows), the operator reads it
(``berth.operator.planners.advice``: :func:`read_advice`), and tests/pipeline/test_advice_document.py holds the
writer and the reader to each other.

Rules:

- :class:`AdviceEntry` is a group's entry, field for field in the order the pipeline writes it; the document is
  :class:`AdviceDocument`, ``version`` :data:`ADVICE_VERSION`.
- The reader reads only what the operator uses (:class:`GroupAdvice`), ignores unknown fields and accepts any
  ``version >= 1`` with those fields (readers ignore what they do not know); a group entry without them is left
  out rather than guessed at; a document that is not an advice document at all raises :class:`AdviceError`.
- Standard library only (``formats``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, TypeGuard

ADVICE_VERSION = 1


class AdviceEntry(TypedDict):
    """One group's advice (``groups[key]``)."""

    advised_session_timeout_ms: int  # includes the safety margin and a heartbeat, clamped to [min_ms, max_ms]
    samples: int  # restart gaps it is built on
    percentile: float
    restart_gap_p_ms: int  # the restart gap at ``percentile``
    safety_margin: float
    heartbeat_interval_ms: int
    min_ms: int
    max_ms: int
    confident: bool  # false below the confidence threshold of samples: the operator keeps its own estimate then
    reason: str  # the arithmetic, in words


class JournalSummary(TypedDict):
    """What was analysed."""

    events: int
    malformed_lines: int
    first_ts_ms: int
    last_ts_ms: int


class AdviceDocument(TypedDict):
    version: int
    generated_at_ms: int
    journal: JournalSummary
    #: Keyed by what a group belongs to (its id on the coordinator whose journal was read, or ``kafka://...``).
    groups: dict[str, AdviceEntry]


#: A group entry's fields, in the order the pipeline writes them.
ENTRY_FIELDS: tuple[str, ...] = tuple(AdviceEntry.__annotations__)


def advice_document(groups: Mapping[str, AdviceEntry], journal: JournalSummary, generated_at_ms: int) -> AdviceDocument:
    """The document, groups sorted by key."""
    return {
        "version": ADVICE_VERSION,
        "generated_at_ms": generated_at_ms,
        "journal": journal,
        "groups": {key: groups[key] for key in sorted(groups)},
    }


class AdviceError(ValueError):
    """The advice document cannot be read."""


@dataclass(frozen=True, slots=True)
class GroupAdvice:
    """What the operator reads of a group's entry."""

    advised_session_timeout_ms: int
    samples: int
    confident: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Advice:
    generated_at_ms: int | None
    groups: Mapping[str, GroupAdvice] = field(default_factory=dict)

    def for_group(self, group_id: str) -> GroupAdvice | None:
        return self.groups.get(group_id)


def read_advice(text: str) -> Advice:
    """A document's text, read (raises :class:`AdviceError`, naming what is wrong)."""
    try:
        document = json.loads(text)
    except ValueError as error:  # json.JSONDecodeError is a ValueError
        raise AdviceError(str(error)) from error
    if not isinstance(document, dict):
        raise AdviceError("advice.json: not a JSON object")
    return parse_advice(document)


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
