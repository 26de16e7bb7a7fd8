"""What makes a fleet's next pass: the queue passes run from (``reconcile.queue``), when a fleet is next due on its
own (``planners.pass_timing``), the informer's events turned into changes (``kube.informer``) and those changes
filtered by what a pass reads (``kube.watch_cache``, ``planners.pokes``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from berth.operator.adapters.kube.informer import Gone, Informer, WatchedResource, matches, parse_selector
from berth.operator.adapters.kube.watch_cache import SELECTOR, STATEFULSETS, WatchCache, project_pod
from berth.operator.planners.pass_timing import Outcome, PassTiming, next_pass_in, spread
from berth.operator.planners.pokes import wants_pass
from berth.operator.reconcile.queue import PassQueue

TIMING = PassTiming(poll_s=1, settle_s=60, interval_s=10, resync_s=600, backoff_cap_s=60)


# --- when a fleet is next due ------------------------------------------------------------------------------------


def test_a_converged_fleet_whose_group_is_followed_is_due_only_at_the_slow_resync() -> None:
    due = next_pass_in(TIMING, Outcome.CONVERGED, name="shop/orders", followed=True, waiting_for_s=0, failures=0)
    assert 540 <= due <= 660
    assert due == next_pass_in(
        TIMING, Outcome.CONVERGED, name="shop/orders", followed=True, waiting_for_s=0, failures=0
    )
    spreads = {round(spread(f"shop/fleet-{i}"), 3) for i in range(1000)}
    assert min(spreads) >= 0.9 and max(spreads) <= 1.1 and len(spreads) > 100  # a thousand fleets do not resync at once


@pytest.mark.parametrize(
    ("outcome", "followed", "waiting_for_s", "failures", "due"),
    [
        (Outcome.CONVERGED, False, 0, 0, 10),  # Kafka, or --no-follow-journal: status at the interval's pace
        (Outcome.REFUSED, True, 0, 0, 10),  # what fixes a refusal may be no change of the fleet
        (Outcome.WAITING, True, 5, 0, 1),  # a young wait: the watch wakes it sooner, this is the backstop
        (Outcome.WAITING, True, 60, 0, 10),  # an old one (a stuck pod): the interval
        (Outcome.FAILED, True, 0, 1, 1),
        (Outcome.FAILED, True, 0, 3, 4),
        (Outcome.FAILED, True, 0, 30, 60),
    ],
)
def test_what_no_change_announces_is_timed_by_how_the_pass_ended(
    outcome: Outcome, followed: bool, waiting_for_s: float, failures: int, due: float
) -> None:
    assert (
        next_pass_in(
            TIMING, outcome, name="shop/orders", followed=followed, waiting_for_s=waiting_for_s, failures=failures
        )
        == due
    )


# --- the queue ---------------------------------------------------------------------------------------------------


class Runs:
    def __init__(self, later: float | None = None, hold: asyncio.Event | None = None) -> None:
        self.started: list[str] = []
        self.running: set[str] = set()
        self.most = 0
        self.later = later
        self.hold = hold

    async def __call__(self, key: str) -> float | None:
        assert key not in self.running, f"two passes of {key} at once"
        self.running.add(key)
        self.most = max(self.most, len(self.running))
        self.started.append(key)
        if self.hold is not None:
            await self.hold.wait()
        await asyncio.sleep(0.01)
        self.running.discard(key)
        return self.later


async def settle(queue: PassQueue[str]) -> None:
    for _ in range(200):
        if not len(queue):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the queue did not drain")


async def test_a_burst_of_pokes_is_one_pass_and_a_poke_during_a_pass_is_exactly_one_more() -> None:
    hold = asyncio.Event()
    runs = Runs(hold=hold)
    queue: PassQueue[str] = PassQueue(runs, workers=4)
    for _ in range(50):
        queue.due("orders")
    queue.start()
    await asyncio.sleep(0.05)
    assert runs.started == ["orders"]
    for _ in range(50):
        queue.due("orders")  # while it runs
    hold.set()
    await settle(queue)
    assert runs.started == ["orders", "orders"]
    await queue.close()


async def test_at_most_workers_passes_run_at_once_and_each_key_one_at_a_time() -> None:
    runs = Runs()
    queue: PassQueue[str] = PassQueue(runs, workers=3)
    queue.start()
    for i in range(30):
        queue.due(f"fleet-{i % 10}")
    await settle(queue)
    assert runs.most == 3 and sorted(set(runs.started)) == sorted(f"fleet-{i}" for i in range(10))
    await queue.close()


async def test_a_pass_says_when_it_is_next_due_and_a_forgotten_key_is_not() -> None:
    runs = Runs(later=0.05)
    queue: PassQueue[str] = PassQueue(runs, workers=2)
    queue.start()
    queue.due("orders")
    for _ in range(100):
        if runs.started.count("orders") >= 3:
            break
        await asyncio.sleep(0.01)
    assert runs.started.count("orders") >= 3  # due again on its own, each time
    queue.forget("orders")
    runs.later = None
    await asyncio.sleep(0.1)
    count = runs.started.count("orders")
    await asyncio.sleep(0.1)
    assert runs.started.count("orders") == count
    await queue.close()


async def test_the_earlier_of_two_times_wins_and_nothing_runs_before_start() -> None:
    runs = Runs()
    queue: PassQueue[str] = PassQueue(runs, workers=1)
    queue.due("later", 0.2)
    queue.due("soon", 0.3)
    queue.due("soon", 0.0)
    queue.due("soon", 0.5)  # asked again, for later: the earlier time stays
    await asyncio.sleep(0.05)
    assert runs.started == []
    queue.start()
    await settle(queue)
    assert runs.started == ["soon", "later"]
    await queue.close()


# --- the informer's events ---------------------------------------------------------------------------------------

PODS = WatchedResource("", "v1", "pods")
LABELS = {"app.kubernetes.io/name": "berth-consumer", "berth.dev/fleet": "orders"}


def pod(name: str, version: str, *, ready: str = "True", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "resourceVersion": version,
            "labels": LABELS if labels is None else labels,
            "managedFields": [{"manager": "kubelet"}],
        },
        "status": {"conditions": [{"type": "Ready", "status": ready, "lastProbeTime": version}], "phase": "Running"},
    }


def test_the_selector_is_matched_as_the_api_server_would() -> None:
    terms = parse_selector(SELECTOR)
    assert terms == [("app.kubernetes.io/name", "berth-consumer"), ("berth.dev/fleet", None)]
    assert matches(pod("a", "1"), terms)
    assert not matches(pod("a", "1", labels={"berth.dev/fleet": "orders"}), terms)


def test_events_keep_the_store_and_tell_only_changes_of_what_the_operator_reads() -> None:
    changes: list[tuple[Any, Any]] = []
    informer = Informer(
        None,  # type: ignore[arg-type]  # no I/O: events are handed in
        PODS,
        namespace="shop",
        selector=SELECTOR,
        project=project_pod,
        on_change=lambda old, new: changes.append((old, new)),
    )
    informer.handle({"type": "ADDED", "object": pod("orders-0", "10")})
    assert informer.resource_version == "10"
    assert informer.get("shop", "orders-0") == {
        "metadata": {"name": "orders-0", "namespace": "shop", "labels": LABELS},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "startTime": None,
            "containerStatuses": [],
            "initContainerStatuses": [],
        },
    }
    informer.handle({"type": "MODIFIED", "object": pod("orders-0", "11")})  # managedFields, a probe time: unread
    assert len(changes) == 1
    informer.handle({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}})
    assert informer.resource_version == "20" and len(changes) == 1
    informer.handle({"type": "MODIFIED", "object": pod("orders-0", "21", ready="False")})
    assert len(changes) == 2
    informer.handle({"type": "MODIFIED", "object": pod("orders-0", "22", labels={"team": "a"})})  # out of our view
    assert informer.get("shop", "orders-0") is None and changes[-1][1] is None
    informer.handle({"type": "ADDED", "object": pod("orders-1", "23")})
    informer.handle({"type": "DELETED", "object": pod("orders-1", "24")})
    assert informer.objects == {} and changes[-1][1] is None and informer.resource_version == "24"
    with pytest.raises(Gone):
        informer.handle({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}})


def statefulset(version: str, **status: Any) -> dict[str, Any]:
    """Fleet orders' StatefulSet (one replica), as its controller reports it (``status``)."""
    return {
        "metadata": {
            "name": "orders",
            "namespace": "shop",
            "resourceVersion": version,
            "generation": 1,
            "labels": LABELS,
            "annotations": {"berth.dev/applied-hash": "h1"},
        },
        "spec": {"replicas": 1, "selector": {"matchLabels": LABELS}, "updateStrategy": {"type": "RollingUpdate"}},
        "status": {"observedGeneration": 1, "updateRevision": "r1", "currentRevision": "r1", **status},
    }


def watched_shop() -> tuple[WatchCache, list[tuple[str, str]]]:
    """A watch cache of namespace shop with no I/O (writes and events are handed in), fleet orders' StatefulSet in
    it, and the fleets it pokes."""
    poked: list[tuple[str, str]] = []
    cache = WatchCache(
        None,  # type: ignore[arg-type]
        namespace="shop",
        on_fleet_change=lambda namespace, fleet, kind, moved: poked.append((namespace, fleet)),
    )
    cache.informers[STATEFULSETS].handle({"type": "ADDED", "object": statefulset("1")})
    poked.clear()
    return cache, poked


def test_what_the_operator_wrote_is_read_back_from_the_cache_and_its_own_watch_event_pokes_nobody() -> None:
    cache, poked = watched_shop()
    informer = cache.informers[PODS]
    cache.wrote(PODS, pod("orders-0", "10"))
    assert cache.object(PODS, "shop", "orders-0") is not None
    assert [p["metadata"]["name"] for p in cache.fleet_objects(PODS, "shop", "orders")] == ["orders-0"]
    assert poked == []  # the pass that wrote it knows
    informer.handle({"type": "ADDED", "object": pod("orders-0", "10")})  # the same object, watched: no change
    assert poked == []
    informer.handle({"type": "MODIFIED", "object": pod("orders-0", "11", ready="False")})  # someone else's change
    assert poked == [("shop", "orders")]
    cache.wrote(PODS, pod("orders-9", "12", labels={"team": "a"}))  # outside the selector: not kept
    assert cache.object(PODS, "shop", "orders-9") is None


def test_a_writes_answer_never_replaces_a_newer_version_and_older_events_leave_it_kept() -> None:
    cache, poked = watched_shop()
    informer = cache.informers[PODS]

    def ready() -> str:
        obj = cache.object(PODS, "shop", "orders-0")
        assert obj is not None
        return str(obj["status"]["conditions"][0]["status"])

    # The watch brought the written version, then a newer one, before the write's answer was handled: kept as is.
    informer.handle({"type": "ADDED", "object": pod("orders-0", "20")})
    informer.handle({"type": "MODIFIED", "object": pod("orders-0", "21", ready="False")})
    cache.wrote(PODS, pod("orders-0", "20"))
    assert ready() == "False"
    # Written before the watch brought it: the older versions still on their way leave the written one kept.
    cache.wrote(PODS, pod("orders-0", "23"))
    assert ready() == "True"
    poked.clear()
    informer.handle({"type": "MODIFIED", "object": pod("orders-0", "22", ready="False")})
    assert ready() == "True" and poked == []
    informer.handle({"type": "MODIFIED", "object": pod("orders-0", "23")})  # the write itself: no change
    assert poked == []
    informer.handle({"type": "MODIFIED", "object": pod("orders-0", "24", ready="False")})  # newer: taken
    assert ready() == "False" and poked == [("shop", "orders")]


def test_an_owned_objects_change_pokes_its_fleet_only_when_it_changes_what_a_pass_reads() -> None:
    """controller-runtime's predicates: a pass reads pods only through the fleet's workload view, and a StatefulSet
    through the view and as applied; a change of anything else pokes nobody."""
    cache, poked = watched_shop()
    sts, pods = cache.informers[STATEFULSETS], cache.informers[PODS]
    pods.handle({"type": "ADDED", "object": pod("orders-0", "10", ready="False")})  # a pod appears: the view moves
    assert poked == [("shop", "orders")]
    poked.clear()
    scheduled = pod("orders-0", "11", ready="False")
    scheduled["status"]["containerStatuses"] = [{"state": {"waiting": {"reason": "ContainerCreating"}}}]
    pods.handle({"type": "MODIFIED", "object": scheduled})  # kept (what the operator reads), but no view change
    assert poked == []
    pods.handle({"type": "MODIFIED", "object": pod("orders-0", "12")})  # Ready: the view moves
    assert poked == [("shop", "orders")]
    poked.clear()
    sts.handle({"type": "MODIFIED", "object": statefulset("2", replicas=1, availableReplicas=1)})  # counts: unread
    assert poked == []
    sts.handle({"type": "MODIFIED", "object": statefulset("3", updateRevision="r2")})  # a new revision: read
    assert poked == [("shop", "orders")]
    poked.clear()
    relabelled = statefulset("4", updateRevision="r2")
    relabelled["metadata"]["annotations"] = {"berth.dev/applied-hash": "h1", "team": "a"}
    sts.handle({"type": "MODIFIED", "object": relabelled})  # its metadata as applied: read by the apply
    assert poked == [("shop", "orders")]
    poked.clear()
    sts.handle({"type": "DELETED", "object": relabelled})
    assert poked == [("shop", "orders")]
    poked.clear()
    pods.handle({"type": "MODIFIED", "object": pod("orders-0", "13", ready="False")})  # no StatefulSet: not its pod
    assert poked == []


def test_a_fleets_change_asks_for_a_pass_only_for_what_a_pass_reads_of_it() -> None:
    fleet = {"metadata": {"name": "orders", "generation": 3, "annotations": {}}, "status": {"conditions": []}}
    assert wants_pass(fleet, None)  # never passed by this operator: created, or found at its start
    assert wants_pass(fleet, 2)  # its spec changed
    assert not wants_pass(fleet, 3)  # its status, its finalizer, its label: the operator's own
    paused = {**fleet, "metadata": {**fleet["metadata"], "annotations": {"berth.dev/paused": "true"}}}
    assert wants_pass(paused, 3)  # paused, and no pass has said so yet
    shown = {**paused, "status": {"conditions": [{"type": "Paused", "status": "True"}]}}
    assert not wants_pass(shown, 3)
