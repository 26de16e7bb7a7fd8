"""Read the pipeline's session-timeout advice (``advice.json``, docs/formats.md), and combine several documents.

Advice is keyed by what it belongs to, never by a name another tenant can choose alone (:func:`advice_key`): a
group on a Kafka cluster under ``kafka://<cluster>/<group>`` (the key the operator's own evidence names it by, which
no group of Berth's coordinator journal carries: the pipeline flags such an event), a group on the operator's
default Berth coordinator (whose journal the analytics job reads) under its group id; a group on any other
coordinator gets no advice.

Rules: only the fields the operator uses are read, unknown fields are ignored, and any ``version >= 1`` with
those fields is accepted (formats.md: readers ignore what they do not know). A group entry without the fields
is left out rather than guessed at; a document that is not an advice document at all raises
:class:`AdviceError` so the handler can say so and size without advice. With several documents (a ConfigMap and
a file), each group's entry comes from the newer one (``generated_at_ms``; a document without it counts as the
oldest): :func:`combine`. An :class:`AdviceReading` is what the advice source answers: the advice and the
problems met reading it (logged once per distinct problem by the advice source).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from berth.operator.planners.coordinator_target import BerthTarget, CoordinatorTarget, KafkaTarget
from berth.operator.planners.endpoints import EndpointError, parse_coordinator_url
from berth.operator.spec.fleet import OperatorDefaults


def group_key(target: KafkaTarget, group_id: str) -> str:
    """What the operator's Kafka evidence, and so the advice, names a Kafka group: ``kafka://<cluster>/<group>``."""
    return f"{target.identity}/{group_id}"


def advice_key(target: CoordinatorTarget, group_id: str, defaults: OperatorDefaults) -> str | None:
    """The key of ``advice.json``'s ``groups`` that advises this group (module docstring); None: no advice."""
    if isinstance(target, KafkaTarget):
        return group_key(target, group_id)
    return group_id if _is_default(target, defaults) else None


def _is_default(target: BerthTarget, defaults: OperatorDefaults) -> bool:
    if not defaults.coordinator_url:
        return False
    try:
        return parse_coordinator_url(defaults.coordinator_url) == target.endpoint
    except EndpointError:
        return False


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


@dataclass(frozen=True, slots=True)
class AdviceReading:
    advice: Advice | None
    problems: tuple[str, ...] = ()

    def for_group(self, key: str | None) -> GroupAdvice | None:
        """The advice under ``key`` (:func:`advice_key`; None: none)."""
        return self.advice.for_group(key) if self.advice is not None and key is not None else None


def combine(documents: list[Advice]) -> Advice | None:
    """Each group's entry from the newest document that has one."""
    if not documents:
        return None
    ordered = sorted(documents, key=lambda advice: advice.generated_at_ms or -1)
    groups: dict[str, GroupAdvice] = {}
    for advice in ordered:
        groups.update(advice.groups)
    return Advice(generated_at_ms=ordered[-1].generated_at_ms, groups=groups)


def changed_groups(before: Advice | None, after: Advice | None) -> frozenset[str]:
    """The keys whose entry differs between two readings (added, removed or changed)."""
    old = before.groups if before is not None else {}
    new = after.groups if after is not None else {}
    return frozenset(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))


def parse_into(text: str, where: str, documents: list[Advice], problems: list[str]) -> None:
    """Parse one document's text into ``documents``, or say what is wrong with it (naming ``where``) in ``problems``."""
    try:
        document = json.loads(text)
        if not isinstance(document, dict):
            raise AdviceError("advice.json: not a JSON object")
        documents.append(parse_advice(document))
    except (ValueError, AdviceError) as error:  # json.JSONDecodeError is a ValueError
        problems.append(f"{where}: {error}")


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
