"""What a fleet asks of its StatefulSet beyond the pod template: per-pod volumes, their retention, the update
strategy, and the fleet's PodDisruptionBudget.

Owns the meaning of ``spec.volumeClaimTemplates``, ``spec.persistentVolumeClaimRetentionPolicy``,
``spec.updateStrategy`` and ``spec.podDisruptionBudget`` (docs/operator.md "Stateful fleets"). Rules:

- Their fields, defaults and bounds are declared in ``spec.declaration`` with the rest of the spec; this module adds
  the CRD's CEL rules (claim templates named once each, ``rollingUpdate`` only with RollingUpdate, ``maxUnavailable``
  a count or a percentage) and Kubernetes' own defaults where the CRD leaves a field out: claims are retained when
  pods are scaled away and when the fleet is deleted, pods are replaced by a rolling update.
- A claim template is kept as given (a private deep copy): the API server checks its ``spec`` in full when the
  StatefulSet is created; its name (a DNS label) names the pods' volume and the claims ``<template>-<fleet>-<n>``.
- Nothing here talks to Kubernetes or reads the clock; errors are :class:`~berth.operator.spec.checks.SpecError`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from berth.operator.spec.checks import SpecError, count_or_percent, decode
from berth.operator.spec.declaration import (
    ClaimRetention,
    ClaimTemplateShape,
    DisruptionBudget,
    FleetSpecDeclared,
    UpdateStrategyDeclared,
    UpdateStrategyType,
)

__all__ = [
    "ClaimRetention",
    "ClaimRetentionPolicy",
    "DisruptionBudget",
    "StatefulSpec",
    "UpdateStrategy",
    "UpdateStrategyType",
    "parse_stateful_spec",
]


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
class StatefulSpec:
    """The stateful part of a fleet's spec; every field at its default when the fleet sets none of it."""

    #: PersistentVolumeClaim templates as given (private deep copies; treat as read-only).
    volume_claim_templates: tuple[Mapping[str, Any], ...] = ()
    claim_retention: ClaimRetentionPolicy = ClaimRetentionPolicy()
    #: None: the fleet sets none, and the StatefulSet gets Kubernetes' default (RollingUpdate, partition 0).
    update_strategy: UpdateStrategy | None = None
    disruption_budget: DisruptionBudget = field(default_factory=DisruptionBudget)

    @property
    def claim_template_names(self) -> tuple[str, ...]:
        return tuple(str(template["metadata"]["name"]) for template in self.volume_claim_templates)


def parse_stateful_spec(declared: FleetSpecDeclared, spec: Mapping[str, Any]) -> StatefulSpec:
    """The stateful fields of the spec as declared (``spec``: the same spec as given, whose claim templates are kept
    whole); raise :class:`SpecError` naming the first bad one."""
    retention = declared.persistent_volume_claim_retention_policy
    budget = declared.pod_disruption_budget
    count_or_percent(budget.max_unavailable, "spec.podDisruptionBudget.maxUnavailable", minimum=0)
    return StatefulSpec(
        volume_claim_templates=_volume_claim_templates(spec.get("volumeClaimTemplates") or ()),
        claim_retention=ClaimRetentionPolicy(
            when_deleted=(retention and retention.when_deleted) or ClaimRetention.RETAIN,
            when_scaled=(retention and retention.when_scaled) or ClaimRetention.RETAIN,
        ),
        update_strategy=_update_strategy(declared.update_strategy),
        disruption_budget=budget,
    )


def _volume_claim_templates(templates: Any) -> tuple[Mapping[str, Any], ...]:
    seen: set[str] = set()
    for index, template in enumerate(templates):
        where = f"spec.volumeClaimTemplates[{index}]"
        name = decode(template, ClaimTemplateShape, where).metadata.name
        if name in seen:  # the CRD's CEL rule
            raise SpecError(f"{where}.metadata.name", f"{name!r} names two claim templates")
        seen.add(name)
    return tuple(copy.deepcopy(dict(template)) for template in templates)


def _update_strategy(declared: UpdateStrategyDeclared | None) -> UpdateStrategy | None:
    if declared is None:
        return None
    rolling = declared.rolling_update
    if rolling is None:
        return UpdateStrategy(type=declared.type)
    if declared.type is not UpdateStrategyType.ROLLING_UPDATE:  # the CRD's CEL rule
        raise SpecError("spec.updateStrategy.rollingUpdate", "applies only to type RollingUpdate")
    where = "spec.updateStrategy.rollingUpdate.maxUnavailable"
    return UpdateStrategy(
        type=declared.type,
        partition=rolling.partition,
        max_unavailable=(
            None if rolling.max_unavailable is None else count_or_percent(rolling.max_unavailable, where, minimum=1)
        ),
    )
