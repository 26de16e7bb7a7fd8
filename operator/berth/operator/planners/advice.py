"""Which advice applies to which fleet, and several advice documents combined (the document itself, ``advice.json``,
is declared once in ``berth.coordinator.formats.advice``, with its reader, for the pipeline and the operator).

Advice is keyed by what it belongs to, never by a name another tenant can choose alone (:func:`advice_key`): a
group on a Kafka cluster under ``kafka://<cluster>/<group>`` (the key the operator's own evidence names it by, which
no group of Berth's coordinator journal carries: the pipeline flags such an event), a group on the operator's
default Berth coordinator (whose journal the analytics job reads) under its group id; a group on any other
coordinator gets no advice.

Rules: a document that is not an advice document at all is a problem (``formats.advice.AdviceError``), said, and
the operator sizes without it. With several documents (a ConfigMap and a file), each group's entry comes from the
newer one (``generated_at_ms``; a document without it counts as the oldest): :func:`combine`. An
:class:`AdviceReading` is what the advice source answers: the advice and the problems met reading it (logged once
per distinct problem by the advice source).
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.coordinator.formats.advice import Advice, AdviceError, GroupAdvice, read_advice
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
        documents.append(read_advice(text))
    except AdviceError as error:
        problems.append(f"{where}: {error}")
