"""The Kubernetes workload as the pass sees it, from the objects alone (what an API read or a watch cache returns):
only the fleet's own pods, terminating ones with their deadline, a settled StatefulSet, and the claims that stay."""

from __future__ import annotations

from typing import Any

from berth.operator.adapters.kube.observation import workload_view
from berth.operator.adapters.kube.watch_cache import project_pod

LABELS = {"app.kubernetes.io/name": "berth-consumer", "berth.dev/fleet": "orders"}


def statefulset(*, replicas: int, generation: int, observed: int, claims: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": LABELS}}
    if claims:
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "data"}}]
    return {
        "metadata": {"name": "orders", "generation": generation, "annotations": {"berth.dev/applied-hash": "abc"}},
        "spec": spec,
        "status": {"observedGeneration": observed},
    }


def pod(name: str, *, ready: bool = True, deleting: str | None = None, labels: dict[str, str] = LABELS) -> Any:
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if deleting:
        metadata["deletionTimestamp"] = deleting
    return {"metadata": metadata, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


def claim(name: str, *, owned_by_pod: bool = False, deleting: bool = False) -> Any:
    metadata: dict[str, Any] = {"name": name}
    if owned_by_pod:
        metadata["ownerReferences"] = [{"kind": "Pod", "name": "orders-2"}]
    if deleting:
        metadata["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    return {"metadata": metadata}


def test_only_the_fleets_own_pods_count_and_terminating_ones_exist_until_gone() -> None:
    pods = [
        pod("orders-0"),
        pod("orders-1", ready=False),
        pod("orders-2", deleting="2026-03-01T12:00:30Z"),
        pod("orders-canary"),  # not an instance id of the fleet
        pod("orders-3", labels={"berth.dev/fleet": "orders"}),  # lacks one of the selector's labels
    ]
    view = workload_view("orders", statefulset(replicas=2, generation=4, observed=4), pods, [])
    assert view.observation.existing == {"orders-0", "orders-1", "orders-2"}
    assert (view.running, view.observation.ready, view.observation.replicas) == (2, 1, 2)
    assert list(view.observation.terminating) == ["orders-2"]
    assert view.observation.settled and view.applied_hash == "abc"


def test_a_statefulset_its_controller_has_not_caught_up_with_is_not_settled() -> None:
    view = workload_view("orders", statefulset(replicas=3, generation=5, observed=4), [], [])
    assert not view.observation.settled


def test_no_statefulset_is_no_workload_whatever_pods_are_listed() -> None:
    view = workload_view("orders", None, [pod("orders-0")], [])
    assert (view.observation.replicas, view.observation.existing, view.applied_hash) == (None, frozenset(), None)


def test_claims_that_stay_are_neither_deleted_nor_going_with_their_pod() -> None:
    claims = [claim("data-orders-0"), claim("data-orders-2", owned_by_pod=True), claim("data-orders-3", deleting=True)]
    with_templates = workload_view("orders", statefulset(replicas=2, generation=1, observed=1, claims=True), [], claims)
    assert with_templates.claims == {"data-orders-0"}
    without = workload_view("orders", statefulset(replicas=2, generation=1, observed=1), [], claims)
    assert without.claims == frozenset()


def test_running_pods_not_ready_are_named_and_the_latest_start_is_their_containers_else_the_pods() -> None:
    pods = [
        pod("orders-0"),
        pod("orders-1", ready=False),
        pod("orders-2", ready=False, deleting="2026-03-01T12:00:30Z"),
    ]
    pods[0]["metadata"]["creationTimestamp"] = "2026-03-01T11:00:00Z"
    pods[0]["status"]["containerStatuses"] = [
        {"name": "consumer", "state": {"running": {"startedAt": "2026-03-01T11:59:00Z"}}},  # restarted in place
        {"name": "sidecar", "state": {"running": {"startedAt": "2026-03-01T11:00:05Z"}}},
    ]
    pods[1]["metadata"]["creationTimestamp"] = "2026-03-01T11:30:00Z"  # no container reported yet
    view = workload_view("orders", statefulset(replicas=3, generation=4, observed=4), pods, [])
    assert view.observation.unready == {"orders-1"}  # a terminating pod is not counted among them
    assert view.last_started is not None and view.last_started.isoformat() == "2026-03-01T11:59:00+00:00"


def rollout(strategy: dict[str, Any] | None, *, replicas: int, updated: int, same_revision: bool = False) -> Any:
    found = statefulset(replicas=replicas, generation=4, observed=4)
    if strategy is not None:
        found["spec"]["updateStrategy"] = strategy
    found["status"].update(
        currentRevision="orders-r1",
        updateRevision="orders-r1" if same_revision else "orders-r2",
        updatedReplicas=updated,
    )
    return found


def test_a_rolling_update_is_in_progress_until_its_pods_down_to_the_partition_are_updated() -> None:
    def rolling(found: Any) -> bool:
        return workload_view("orders", found, [], []).rolling

    assert rolling(rollout(None, replicas=3, updated=1))
    assert not rolling(rollout(None, replicas=3, updated=3))  # the last pod replaced: over
    assert not rolling(rollout(None, replicas=3, updated=0, same_revision=True))  # nothing to roll to
    partitioned = {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    assert rolling(rollout(partitioned, replicas=3, updated=0))
    assert not rolling(rollout(partitioned, replicas=3, updated=1))  # ordinals below the partition stay
    assert not rolling(rollout({"type": "OnDelete"}, replicas=3, updated=0))  # only deletions replace pods
    assert workload_view("orders", rollout(None, replicas=3, updated=1), [], []).revision == "orders-r2"


def test_a_container_that_last_failed_gives_its_termination_message_and_one_that_succeeded_none() -> None:
    crashed = pod("orders-0", ready=False)
    librdkafka = 'cimpl.KafkaException: KafkaError{code=_INVALID_ARG,val=-186,str="Failed to create consumer: x"}'
    crashed["status"]["containerStatuses"] = [
        {
            "name": "consumer",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": librdkafka}},
        }
    ]
    completed = pod("orders-1", ready=False)
    completed["status"]["containerStatuses"] = [
        {"name": "consumer", "lastState": {"terminated": {"exitCode": 0, "message": "bye"}}}
    ]
    silent = pod("orders-2", ready=False)
    silent["status"]["containerStatuses"] = [{"name": "consumer", "state": {"terminated": {"exitCode": 137}}}]
    pods = [crashed, completed, silent]
    view = workload_view("orders", statefulset(replicas=3, generation=1, observed=1), pods, [])
    assert view.observation.crashes == {"orders-0": librdkafka}
    # The watch cache keeps what that takes of a pod (the node tier found it dropped): the same answer from it.
    cached = workload_view(
        "orders", statefulset(replicas=3, generation=1, observed=1), [project_pod(p) for p in pods], []
    )
    assert cached.observation.crashes == {"orders-0": librdkafka}
    assert project_pod(completed)["status"]["containerStatuses"][0]["lastState"]["terminated"] == {"finishedAt": None}
