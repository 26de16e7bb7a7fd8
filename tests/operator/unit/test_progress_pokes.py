"""Pokes filtered by what a pass reads (issue 31, controller-runtime's predicates): an owned object's change that
alters nothing a pass uses pokes nobody, and each field a pass reads does.

The StatefulSet controller's progress (its observedGeneration reaching the generation: ``settled``; its update
revision: ``revision``) is read by a pass only while it waits, while the fleet is Ready or while a restart burst is
open (``planners.pokes``); a burst of new fleets whose pods are not Ready gets no second pass per StatefulSet from
it. Everything else a pass reads pokes every time."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from fake_ports import InMemoryCoordinator, NamesFleet, RecordedEvents, pass_context
from test_watch_loop import pod, statefulset

from berth.operator.adapters.kube.watch_cache import PODS, STATEFULSETS, WatchCache, written
from berth.operator.local.demo_support import InMemoryStatus
from berth.operator.planners.claims import ListedClaims
from berth.operator.planners.coordinator_kind import BERTH
from berth.operator.planners.pass_timing import PassTiming
from berth.operator.planners.pokes import PROGRESS, owned_change_wants_pass, watches_progress
from berth.operator.ports import WorkloadObservation, WorkloadView
from berth.operator.reconcile.reconciler import FleetKey, FleetReconciler
from berth.operator.spec.fleet import OperatorDefaults

KEY = FleetKey("shop", "orders")
TIMING = PassTiming(poll_s=1, settle_s=60, interval_s=10, resync_s=600, backoff_cap_s=60)
#: Every field of the workload view a pass reads, as the watch cache names them, and what it names otherwise.
VIEW_FIELDS = (
    *(f.name for f in dataclasses.fields(WorkloadObservation)),
    *(f.name for f in dataclasses.fields(WorkloadView) if f.name not in ("observation", "from_cache")),
    "applied",  # a StatefulSet's metadata or spec
    "object",  # a Service, budget or claim
)


@pytest.mark.parametrize("field", VIEW_FIELDS)
def test_each_field_a_pass_reads_pokes_and_progress_only_a_fleet_that_watches_it(field: str) -> None:
    assert owned_change_wants_pass({field}, progress_watched=True)
    assert owned_change_wants_pass({field}, progress_watched=False) is (field not in PROGRESS)
    assert owned_change_wants_pass({field, "settled"}, progress_watched=False) is (field not in PROGRESS)
    assert not owned_change_wants_pass(set(), progress_watched=True)  # nothing moved


def test_a_fleet_watches_the_controllers_progress_while_it_waits_is_ready_or_has_a_burst_open() -> None:
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    not_ready = {"conditions": [{"type": "Ready", "status": "False"}]}
    assert not watches_progress(not_ready, None)
    assert not watches_progress({}, None)
    assert watches_progress(not_ready, "waiting for the StatefulSet to reach 2 replicas before orders-2 leave")
    assert watches_progress(ready, None)
    assert watches_progress({**not_ready, "restarts": {"ongoing": {"since": "2026-01-01T00:00:00Z"}}}, None)
    assert not watches_progress({**not_ready, "restarts": {"ongoing": None}}, None)


class UnreadyFleet(NamesFleet):
    """A fleet whose pods exist and are not Ready (Pending) until told otherwise; ``during``: run once, by the next
    pass that looks at it (a change arriving while that pass runs)."""

    def __init__(self, name: str, coordinator: InMemoryCoordinator) -> None:
        super().__init__(name)
        self.coordinator = coordinator
        self.ready = False
        self.during: Callable[[], None] | None = None

    async def observe(self, *, fresh: bool = False) -> WorkloadView:
        view = await super().observe(fresh=fresh)
        during, self.during = self.during, None
        if during is not None:
            during()
        if self.ready:
            self.coordinator.members[self.name] = set(self.members)  # Ready pods, their members joined
            return view
        members = frozenset(self.members)
        seen = dataclasses.replace(view.observation, ready=0, unready=members)
        return dataclasses.replace(view, observation=seen)


class Reader:
    """The fleet as a pass reads it: its body with the status its passes wrote."""

    def __init__(self, body: dict[str, Any], status: InMemoryStatus) -> None:
        self.body = body
        self.status = status

    async def read(self, namespace: str, name: str, *, seen: str | None = None) -> dict[str, Any] | None:
        return {**self.body, "status": dict(self.status.status)}


class Triggers:
    """Metrics that keep what asked for each pass (and ignore the rest)."""

    def __init__(self) -> None:
        self.triggers: list[str] = []

    def triggered(self, trigger: str) -> None:
        self.triggers.append(trigger)

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def reconciled(
    fleet_body: Callable[..., dict[str, Any]], now: datetime
) -> tuple[FleetReconciler, UnreadyFleet, Triggers]:
    body = fleet_body()
    coordinator = InMemoryCoordinator(BERTH)
    workload = UnreadyFleet(body["metadata"]["name"], coordinator)
    status = InMemoryStatus()
    context = pass_context(
        workload=workload,
        coordinator=coordinator,
        status=status,
        events=RecordedEvents(),
        defaults=OperatorDefaults(coordinator_url="http://berth-coordinator.berth:9094"),
        now=now,
    )
    metrics = Triggers()
    context = dataclasses.replace(context, ports=dataclasses.replace(context.ports, metrics=metrics))
    return FleetReconciler(context, Reader(body, status), timing=TIMING), workload, metrics


async def settle(reconciler: FleetReconciler) -> None:
    """Until no pass is due soon or running (the resync, ten minutes away, stays due)."""
    for _ in range(3000):  # 30 s at most: a busy machine is slow, never wrong
        await asyncio.sleep(0.01)
        if not reconciler.queue._running and all(at > reconciler.clock() + 5 for at in reconciler.queue._due.values()):
            return
    raise AssertionError("passes did not settle")


async def test_a_burst_fleets_statefulset_progress_pokes_nobody_and_what_the_pass_reads_does(
    fleet_body: Callable[..., dict[str, Any]], now: datetime
) -> None:
    reconciler, workload, metrics = reconciled(fleet_body, now)
    cache = WatchCache(
        None,  # type: ignore[arg-type]
        namespace="shop",
        on_fleet_change=lambda namespace, fleet, kind, moved: reconciler.owned_changed(
            FleetKey(namespace, fleet), kind, moved
        ),
    )
    sts, pods = cache.informers[STATEFULSETS], cache.informers[PODS]
    reconciler.attach(ListedClaims(lambda key: ()))
    try:
        reconciler.poke(KEY, why="fleet")  # created
        await settle(reconciler)
        assert metrics.triggers == ["fleet"]
        assert not reconciler.memory(KEY).watches_progress  # its pods are not Ready

        created = statefulset("1")
        created["status"] = {}  # as the operator created it: its controller has not reported yet
        cache.wrote(STATEFULSETS, created)
        sts.handle({"type": "ADDED", "object": created})  # the operator's own write: no change
        sts.handle({"type": "MODIFIED", "object": statefulset("2")})  # observedGeneration and revisions: progress
        await settle(reconciler)
        assert metrics.triggers == ["fleet"]  # nobody poked

        pods.handle({"type": "ADDED", "object": pod("orders-0", "3", ready="False")})  # a pod created: read
        await settle(reconciler)
        assert metrics.triggers == ["fleet", "pods/existing"]

        workload.ready = True
        pods.handle({"type": "MODIFIED", "object": pod("orders-0", "4")})  # Ready: read
        await settle(reconciler)
        assert metrics.triggers[-1] == "pods/ready"
        assert reconciler.memory(KEY).watches_progress  # Ready: a restart burst ends once it is settled too

        sts.handle({"type": "MODIFIED", "object": statefulset("5", updateRevision="r2")})  # now progress is read
        await settle(reconciler)
        assert metrics.triggers[-1] == "statefulsets/revision"

        scaled = statefulset("6", updateRevision="r2")
        scaled["spec"]["replicas"] = 3  # scaled out of band: the StatefulSet as applied, read whatever the fleet
        sts.handle({"type": "MODIFIED", "object": scaled})
        await settle(reconciler)
        assert metrics.triggers[-1] == "statefulsets/applied"
        assert len(metrics.triggers) == 5
    finally:
        await reconciler.close()


async def test_progress_passed_over_while_a_pass_runs_is_passed_once_that_pass_ends_watching_it(
    fleet_body: Callable[..., dict[str, Any]], now: datetime
) -> None:
    """The pass read the workload before the controller reported; it ends Ready (watching progress): the report it
    did not see brings one more pass. A pass that ends not watching it brings none."""
    reconciler, workload, metrics = reconciled(fleet_body, now)
    reconciler.attach(ListedClaims(lambda key: ()))
    try:
        reconciler.poke(KEY, why="fleet")
        await settle(reconciler)
        assert not reconciler.memory(KEY).watches_progress

        progress = frozenset({"settled"})
        workload.during = lambda: reconciler.owned_changed(KEY, "statefulsets", progress)
        reconciler.owned_changed(KEY, "pods", frozenset({"existing"}))  # a pass that ends not watching progress
        await settle(reconciler)
        assert metrics.triggers == ["fleet", "pods/existing"]

        workload.ready = True
        workload.during = lambda: reconciler.owned_changed(KEY, "statefulsets", progress)
        reconciler.owned_changed(KEY, "pods", frozenset({"ready", "unready"}))  # this one ends Ready
        await settle(reconciler)
        assert metrics.triggers[2:] == ["pods/ready", "passed-over"]
    finally:
        await reconciler.close()


async def test_the_watch_event_of_a_write_in_flight_is_the_write_itself_and_pokes_nobody() -> None:
    """A watch may bring a write's own version before the write's answer: held until then, and dropped when it is
    that very version; another change of the object meanwhile pokes once the write is over."""
    poked: list[tuple[str, frozenset[str]]] = []
    cache = WatchCache(
        None,  # type: ignore[arg-type]
        namespace="shop",
        on_fleet_change=lambda namespace, fleet, kind, moved: poked.append((kind, moved)),
    )
    sts = cache.informers[STATEFULSETS]

    async def create(version: str, *, before_answer: Callable[[], None]) -> dict[str, Any]:
        before_answer()
        return statefulset(version)

    async def watched_first(version: str, *brought: dict[str, Any]) -> None:
        def deliver() -> None:
            for each in brought:
                sts.handle({"type": "MODIFIED", "object": each})

        await written(cache, STATEFULSETS, create(version, before_answer=deliver), key=("shop", "orders"))

    await watched_first("1", statefulset("1"))  # the create's own event came first
    assert poked == []
    scaled = statefulset("2")
    scaled["spec"]["replicas"] = 3
    await watched_first("3", scaled, statefulset("3"))  # someone's change (2), then the write's own version (3)
    assert poked == [("statefulsets", frozenset({"applied"}))]
    poked.clear()
    sts.handle({"type": "MODIFIED", "object": statefulset("4", updateRevision="r2")})  # no write in flight
    assert [kind for kind, _ in poked] == ["statefulsets"]
