"""What a fleet asks of its StatefulSet beyond the pod template: per-pod volumes, their retention, the update
strategy, and the fleet's PodDisruptionBudget.

Owns the meaning of ``spec.volumeClaimTemplates``, ``spec.persistentVolumeClaimRetentionPolicy``,
``spec.updateStrategy`` and ``spec.podDisruptionBudget`` (docs/operator.md "Stateful fleets"). Rules:

- Defaults and validation mirror the CRD's schema, like ``spec``'s: claims are retained when pods are scaled away
  and when the fleet is deleted (Kubernetes' own defaults), pods are replaced by a rolling update, and a budget of
  ``maxUnavailable: 1`` guards the fleet's pods.
- A claim template is kept as given apart from its name (a DNS label: it names the pods' volume and the claims
  ``<template>-<fleet>-<ordinal>``); the API server checks its ``spec`` in full when the StatefulSet is created.
- Nothing here talks to Kubernetes or reads the clock; errors are :class:`~berth.operator.spec_checks.SpecError`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from berth.operator.spec_checks import (
    SpecError,
    boolean,
    count_or_percent,
    get_or_default,
    integer,
    mapping,
    string,
)

#: As many claim templates as the CRD allows: more volumes per pod than that is a design to question.
MAX_VOLUME_CLAIM_TEMPLATES = 16
#: A claim template names a pod volume: a DNS-1123 label.
_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_VOLUME_NAME_LENGTH = 63


class ClaimRetention(StrEnum):
    RETAIN = "Retain"
    DELETE = "Delete"


class UpdateStrategyType(StrEnum):
    ROLLING_UPDATE = "RollingUpdate"
    ON_DELETE = "OnDelete"


@dataclass(frozen=True, slots=True)
class ClaimRetentionPolicy:
    """``spec.persistentVolumeClaimRetentionPolicy``: what becomes of the pods' claims (the StatefulSet's own field)."""

    #: When the fleet (and with it its StatefulSet) is deleted.
    when_deleted: ClaimRetention = ClaimRetention.RETAIN
    #: When a scale-down removes pods: Retain keeps a departed pod's claims for the pod that comes back.
    when_scaled: ClaimRetention = ClaimRetention.RETAIN


@dataclass(frozen=True, slots=True)
class UpdateStrategy:
    """``spec.updateStrategy``: how a changed pod template reaches the pods (the StatefulSet's own field)."""

    type: UpdateStrategyType = UpdateStrategyType.ROLLING_UPDATE
    #: RollingUpdate only: pods with an ordinal below it keep the old template.
    partition: int | None = None
    #: RollingUpdate only: pods replaced at once (Kubernetes' MaxUnavailableStatefulSet feature; ignored without it).
    max_unavailable: int | str | None = None


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """``spec.podDisruptionBudget``: the PodDisruptionBudget the operator keeps for the fleet's pods."""

    enabled: bool = True
    #: Pods a voluntary disruption (a node drain) may take at once: a count or ``"N%"`` of the fleet's pods.
    max_unavailable: int | str = 1


@dataclass(frozen=True, slots=True)
class StatefulSpec:
    """The stateful part of a fleet's spec; every field at its default when the fleet sets none of it."""

    #: PersistentVolumeClaim templates as given (private deep copies; treat as read-only).
    volume_claim_templates: tuple[Mapping[str, Any], ...] = ()
    claim_retention: ClaimRetentionPolicy = ClaimRetentionPolicy()
    #: None: the fleet sets none, and the StatefulSet gets Kubernetes' default (RollingUpdate, partition 0).
    update_strategy: UpdateStrategy | None = None
    disruption_budget: DisruptionBudget = DisruptionBudget()

    @property
    def claim_template_names(self) -> tuple[str, ...]:
        return tuple(str(template["metadata"]["name"]) for template in self.volume_claim_templates)


def parse_stateful_spec(spec: Mapping[str, Any]) -> StatefulSpec:
    """The stateful fields of ``spec`` (the whole fleet spec); raise :class:`SpecError` naming the first bad one."""
    return StatefulSpec(
        volume_claim_templates=_volume_claim_templates(spec.get("volumeClaimTemplates")),
        claim_retention=_claim_retention(spec.get("persistentVolumeClaimRetentionPolicy")),
        update_strategy=_update_strategy(spec.get("updateStrategy")),
        disruption_budget=_disruption_budget(spec.get("podDisruptionBudget")),
    )


def _volume_claim_templates(value: object) -> tuple[Mapping[str, Any], ...]:
    field = "spec.volumeClaimTemplates"
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SpecError(field, "must be a list")
    if len(value) > MAX_VOLUME_CLAIM_TEMPLATES:
        raise SpecError(field, f"lists {len(value)} templates; at most {MAX_VOLUME_CLAIM_TEMPLATES}")
    seen: set[str] = set()
    templates = []
    for index, template in enumerate(value):
        where = f"{field}[{index}]"
        template = mapping(template, where)
        name = string(mapping(template.get("metadata"), f"{where}.metadata").get("name"), f"{where}.metadata.name")
        if len(name) > MAX_VOLUME_NAME_LENGTH or not _DNS_1123_LABEL.match(name):
            raise SpecError(
                f"{where}.metadata.name",
                f"{name!r} must be a DNS label (at most {MAX_VOLUME_NAME_LENGTH} lower-case letters, digits and"
                " '-'): it names the pods' volume",
            )
        if name in seen:
            raise SpecError(f"{where}.metadata.name", f"{name!r} names two claim templates")
        seen.add(name)
        mapping(template.get("spec"), f"{where}.spec")
        templates.append(copy.deepcopy(dict(template)))
    return tuple(templates)


def _claim_retention(value: object) -> ClaimRetentionPolicy:
    if value is None:
        return ClaimRetentionPolicy()
    policy = mapping(value, "spec.persistentVolumeClaimRetentionPolicy")
    when_deleted, when_scaled = (
        _retention(get_or_default(policy, key, "Retain"), f"spec.persistentVolumeClaimRetentionPolicy.{key}")
        for key in ("whenDeleted", "whenScaled")
    )
    return ClaimRetentionPolicy(when_deleted=when_deleted, when_scaled=when_scaled)


def _retention(value: object, field: str) -> ClaimRetention:
    if value not in tuple(ClaimRetention):
        raise SpecError(field, f"{value!r} is not one of Retain, Delete")
    return ClaimRetention(str(value))


def _update_strategy(value: object) -> UpdateStrategy | None:
    if value is None:
        return None
    strategy = mapping(value, "spec.updateStrategy")
    kind = get_or_default(strategy, "type", UpdateStrategyType.ROLLING_UPDATE.value)
    try:
        strategy_type = UpdateStrategyType(kind)
    except ValueError:
        raise SpecError("spec.updateStrategy.type", f"{kind!r} is not one of RollingUpdate, OnDelete") from None
    rolling = strategy.get("rollingUpdate")
    if rolling is None:
        return UpdateStrategy(type=strategy_type)
    if strategy_type is not UpdateStrategyType.ROLLING_UPDATE:
        raise SpecError("spec.updateStrategy.rollingUpdate", "applies only to type RollingUpdate")
    rolling = mapping(rolling, "spec.updateStrategy.rollingUpdate")
    partition = rolling.get("partition")
    max_unavailable = rolling.get("maxUnavailable")
    return UpdateStrategy(
        type=strategy_type,
        partition=(
            None
            if partition is None
            else integer(partition, "spec.updateStrategy.rollingUpdate.partition", minimum=0, maximum=2**31 - 1)
        ),
        max_unavailable=(
            None
            if max_unavailable is None
            else count_or_percent(max_unavailable, "spec.updateStrategy.rollingUpdate.maxUnavailable", minimum=1)
        ),
    )


def _disruption_budget(value: object) -> DisruptionBudget:
    if value is None:
        return DisruptionBudget()
    budget = mapping(value, "spec.podDisruptionBudget")
    return DisruptionBudget(
        enabled=boolean(get_or_default(budget, "enabled", True), "spec.podDisruptionBudget.enabled"),
        max_unavailable=count_or_percent(
            get_or_default(budget, "maxUnavailable", 1), "spec.podDisruptionBudget.maxUnavailable", minimum=0
        ),
    )
