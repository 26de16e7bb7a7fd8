"""The operator's composition root: every adapter built (:func:`build_service`), Kopf's settings, a registry with
Berth's handlers, and the run.

:func:`run_operator` is what ``berth-operator`` runs and what the Kopf-level tests run in a thread (with a stop
flag). The reconcile service (``reconcile``) gets its ports from here and imports no adapter itself, so what runs
in front of it (a cache of watched objects behind the workload's observer, a leader's gate around Kopf and the
ports) is decided here alone (docs/architecture.md). Rules:

- Kopf runs standalone (no peering objects: the chart runs exactly one replica), cluster-wide or in one namespace;
  in one namespace Kopf's resource and namespace scanning is off (a Role cannot grant it).
- Kopf's bookkeeping goes into ``berth.dev/...`` annotations, never into status, which is the operator's alone;
  the finalizer is ``berth.dev/finalizer``.
- Every client is created inside the operator's event loop and closed when it stops.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kopf
import kubernetes

from berth.operator.advice_source import AdviceSource
from berth.operator.coordinators import Coordinators
from berth.operator.evidence_files import DirectoryJournal
from berth.operator.handlers.activities import register_activities
from berth.operator.handlers.fleets import TIMER_ID, register_fleet_handlers
from berth.operator.kube.configmaps import ConfigMapReader
from berth.operator.kube.events import FleetEvents
from berth.operator.kube.evidence_configmap import ConfigMapJournal
from berth.operator.kube.fleets import FleetApi, FleetStatusWriter
from berth.operator.kube.group_records import LeaseGroupRecords
from berth.operator.kube.identity import KubeIdentity, load_identity
from berth.operator.kube.secrets import SecretReader
from berth.operator.kube.workload import StatefulSetWorkload
from berth.operator.metrics import OperatorMetrics, serving
from berth.operator.names import ANNOTATION_PREFIX, COMPONENT, FINALIZER
from berth.operator.options import OperatorOptions
from berth.operator.planners.session_timeout import OperatorSessionBounds
from berth.operator.ports import EvidenceJournal
from berth.operator.reconcile.context import PassContext
from berth.operator.reconcile.evidence_journal import EvidenceRecorder
from berth.operator.reconcile.reconciler import FleetReconciler
from berth.operator.spec import Fleet

StopFlag = threading.Event


def build_settings(options: OperatorOptions) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    settings.scanning.disabled = options.namespace is not None
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATION_PREFIX)
    settings.posting.reporting_component = COMPONENT
    settings.posting.reporting_instance = os.environ.get("HOSTNAME") or COMPONENT
    settings.posting.event_name_prefix = "berth-"
    # Watches end server-side every few minutes and are restarted: a connection silently dropped by a load
    # balancer then costs minutes of blindness at most, not hours.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    # A fleet deleted while its timer is mid-pass waits for that timer to exit; Kopf checks again only after
    # this long (60 s by default), which would hold a deletion for a minute.
    settings.background.cancellation_polling = min(1.0, options.reconcile_interval_s)
    return settings


def evidence_journal(options: OperatorOptions, api_client: kubernetes.client.ApiClient) -> EvidenceJournal | None:
    if options.evidence_configmap and options.operator_namespace:
        return ConfigMapJournal(api_client, options.operator_namespace, options.evidence_configmap)
    if options.evidence_dir is not None:
        return DirectoryJournal(options.evidence_dir)
    return None


class CaFile:
    """The CA file's text, read when asked (a mounted Secret or ConfigMap changes under a running operator); the last
    good text while a rotation leaves it unreadable for a moment."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._last: str | None = None

    def __call__(self) -> str | None:
        if self.path is None:
            return None
        with contextlib.suppress(OSError, UnicodeDecodeError):
            self._last = self.path.read_text()
        return self._last


def utc_now() -> datetime:
    return datetime.now(tz=UTC)


@dataclass
class OperatorService:
    """The reconcile service as the operator runs it: the pass context (every port built on one API client), the
    reconciler, and what must be closed when the operator stops."""

    context: PassContext
    reconciler: FleetReconciler
    coordinators: Coordinators
    metrics: OperatorMetrics

    async def close(self) -> None:
        await self.reconciler.close()
        await self.coordinators.close()


def build_service(options: OperatorOptions, api_client: kubernetes.client.ApiClient) -> OperatorService:
    """Every adapter the service uses, built here and nowhere else (the operator's composition root)."""
    ca_file = options.coordinator_ca_file
    coordinators = Coordinators(token=options.admin_token, ca_file=str(ca_file) if ca_file else None)
    interval = options.reconcile_interval_s
    advice = AdviceSource(
        read_config_map_key=ConfigMapReader(api_client).read_key if options.advice_configmap else None,
        config_map=(
            (options.operator_namespace, options.advice_configmap)
            if options.advice_configmap and options.operator_namespace
            else None
        ),
        file=options.advice_file,
        ttl_s=max(interval, 1.0),
    )

    fleets = FleetApi(api_client)

    def workload_for(fleet: Fleet) -> StatefulSetWorkload:
        return StatefulSetWorkload(api_client, namespace=fleet.namespace, name=fleet.name, fleet_uid=fleet.uid)

    def status_for(body: Mapping[str, Any]) -> FleetStatusWriter:
        metadata = body.get("metadata") or {}
        return FleetStatusWriter(fleets, str(metadata.get("namespace") or "default"), str(metadata.get("name")))

    metrics = OperatorMetrics()
    context = PassContext(
        status_for=status_for,
        workload_for=workload_for,
        coordinators=coordinators,
        advice=advice,
        defaults=options.defaults,
        session_bounds=OperatorSessionBounds(options.session_min_ms, options.session_max_ms),
        events_for=FleetEvents,
        now=utc_now,
        last_waiting={},
        advice_problems_seen=set(),
        secrets=SecretReader(api_client),
        evidence=EvidenceRecorder(evidence_journal(options, api_client)),
        stuck_allowance=timedelta(seconds=options.stuck_terminating_s),
        metrics=metrics,
        coordinator_ca=CaFile(ca_file),
        adoption=options.adoption,
        records=(
            LeaseGroupRecords(api_client, options.group_owners_namespace) if options.group_owners_namespace else None
        ),
        fleets=fleets,
    )
    reconciler = FleetReconciler(
        context,
        fleets,
        poll_s=poll_interval_s(options),
        journal_source=coordinators.port if options.follow_journal else None,
    )
    return OperatorService(context, reconciler, coordinators, metrics)


def poll_interval_s(options: OperatorOptions) -> float:
    """How often a converging pass or a deletion looks again while it waits on something quick."""
    return min(1.0, options.reconcile_interval_s)


async def run_operator(
    options: OperatorOptions,
    *,
    identity: KubeIdentity | None = None,
    stop_flag: StopFlag | None = None,
    ready_flag: StopFlag | None = None,
) -> None:
    identity = identity or load_identity()
    api_client = kubernetes.client.ApiClient(identity.configuration)
    service = build_service(options, api_client)
    registry = kopf.OperatorRegistry()
    register_activities(registry, identity, timer_ids=(TIMER_ID,))
    register_fleet_handlers(
        registry,
        service.reconciler,
        defaults=options.defaults,
        interval_s=options.reconcile_interval_s,
        poll_s=poll_interval_s(options),
    )
    try:
        async with serving(service.metrics, options.metrics_port):
            await kopf.operator(
                registry=registry,
                settings=build_settings(options),
                standalone=True,
                clusterwide=options.namespace is None,
                namespaces=[options.namespace] if options.namespace else [],
                liveness_endpoint=f"http://0.0.0.0:{options.liveness_port}/healthz" if options.liveness_port else None,
                stop_flag=stop_flag,
                ready_flag=ready_flag,
            )
    finally:
        await service.close()
        api_client.close()  # type: ignore[no-untyped-call]
