"""Benchmark: how long a ConsumerFleet's status lags its group at the coordinator, following the journal or not.

On the real control plane of the tests (kube-apiserver, kube-controller-manager, etcd; ``tests/support``), the real
``berth-operator`` as the chart's ServiceAccount with its default 10 s reconcile interval, a real coordinator, and a
fleet of 3 member processes run by the fake kubelet: an admin removes one member at the coordinator (a change
Kubernetes never sees), the member rejoins at once, and the group reaches a new generation. The lag is from the
coordinator's ``rebalance_completed`` event (its ``ts_ms``, same machine clock) to the fleet's
``status.group.generation`` showing it, read every 20 ms. Measured with ``--follow-journal`` (the default: one
long-poll per coordinator) and with ``--no-follow-journal`` (the timer's pace only), side by side.

Goal: status within ~1 s of the change when following the journal (the timer alone: up to its 10 s interval).
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, Result, progress, spread
from benchmarks.operator_world import world

sys.path.insert(0, str(ROOT / "tests"))

from support.coordinator import CoordinatorProcess, coordinator_get, coordinator_post
from support.fake_kubelet import FakeKubelet, api_client
from support.fleet_stage import ADMIN_TOKEN, MEMBER_TOKEN, MEMBER_TOKEN_SECRET, fleet_body
from support.kube import Kube, wait_until
from support.operator_process import OperatorProcess

CHANGES = 6
REPLICAS = 3
from benchmarks.goals import GOALS  # noqa: E402

GOAL = GOALS["status_lag"]


def watch_generation(kube: Kube, namespace: str, seen: dict[int, float], stop: threading.Event) -> None:
    """Record when each status.group.generation first shows up (every 20 ms, through the Python client)."""
    import kubernetes

    client = api_client(kube.kubeconfig)
    api = kubernetes.client.CustomObjectsApi(client)
    while not stop.is_set():
        fleet = api.get_namespaced_custom_object("berth.dev", "v1alpha1", namespace, "consumerfleets", "orders")
        generation = ((fleet.get("status") or {}).get("group") or {}).get("generation")
        if isinstance(generation, int) and generation not in seen:
            seen[generation] = time.time()
        time.sleep(0.02)
    client.close()


def measure(
    kube: Kube, operator_kubeconfig: Path, coordinator: CoordinatorProcess, work: Path, follow: bool
) -> list[float]:
    mode = "follow" if follow else "timer"
    namespace = kube.create_namespace(f"lag-{mode}")
    group = f"lag-{mode}"
    kube.kubectl(
        "create", "secret", "generic", MEMBER_TOKEN_SECRET, "-n", namespace, f"--from-literal=token={MEMBER_TOKEN}"
    )
    (work / "admin-token").write_text(ADMIN_TOKEN)
    args = [
        "--coordinator-url",
        coordinator.url,
        "--token-file",
        str(work / "admin-token"),
        "--liveness-port",
        "0",
        "--metrics-port",
        "0",
        "--namespace",
        namespace,
        "--follow-journal" if follow else "--no-follow-journal",
    ]
    operator = OperatorProcess(operator_kubeconfig, work / f"operator-{mode}.log", args).start()
    kubelet = FakeKubelet(kube.kubeconfig, namespace, work / f"pods-{mode}").start()
    seen: dict[int, float] = {}
    stop = threading.Event()
    lags = []
    try:
        kube.apply(fleet_body("orders", REPLICAS, group), namespace=namespace)

        def described() -> dict[str, Any]:
            found: dict[str, Any] = coordinator_get(coordinator, f"/v1/groups/{group}", ADMIN_TOKEN)
            return found

        wait_until(
            lambda: described()["group_state"] == "Stable" and len(described()["members"]) == REPLICAS,
            "the fleet's group",
            timeout_s=120,
        )
        watcher = threading.Thread(target=watch_generation, args=(kube, namespace, seen, stop), daemon=True)
        watcher.start()
        for change in range(CHANGES):
            generation = described()["generation_id"]
            wait_until(lambda g=generation: g in seen, "status at the current generation", timeout_s=30)
            member = f"orders-{change % REPLICAS}"
            leave = {"api_version": 5, "members": [{"member_id": "", "group_instance_id": member}]}
            coordinator_post(coordinator, f"/v1/groups/{group}/leave", leave, ADMIN_TOKEN)
            wait_until(
                lambda g=generation: described()["generation_id"] > g and described()["group_state"] == "Stable",
                "the new generation",
                timeout_s=60,
            )
            new = described()["generation_id"]
            wait_until(lambda g=new: g in seen, "status to show it", timeout_s=30)
            events = coordinator_get(coordinator, "/v1/journal?after=0&limit=10000", ADMIN_TOKEN)["events"]
            completed = [
                e
                for e in events
                if e["group_id"] == group and e["type"] == "rebalance_completed" and e.get("generation_id") == new
            ]
            lag = seen[new] - completed[-1]["ts_ms"] / 1000
            lags.append(lag)
            progress(f"{mode}: change {change + 1}/{CHANGES}: status {lag:.2f} s after generation {new}")
    finally:
        stop.set()
        kubelet.stop()
        operator.stop()
    return lags


def main() -> Result:
    with world("--group-initial-rebalance-delay-ms", "100") as w:
        follow = measure(w.kube, w.operator_kube.kubeconfig, w.coordinator, w.work, follow=True)
        timer = measure(w.kube, w.operator_kube.kubeconfig, w.coordinator, w.work, follow=False)
    figures = {
        "follow_s": spread(follow),
        "timer_s": spread(timer),
        "changes": CHANGES,
        "samples": {"follow": follow, "timer": timer},
    }
    met = statistics.median(follow) <= 1.0 and max(follow) <= 1.5
    return Result(
        name="status_lag",
        title="Status lag behind the coordinator (3-pod fleet, real control plane)",
        command="python -m benchmarks status_lag",
        goal=GOAL,
        met=met,
        summary=f"following the journal: median {statistics.median(follow):.2f} s (max {max(follow):.2f}); timer only:"
        f" median {statistics.median(timer):.2f} s (max {max(timer):.2f})",
        figures=json.loads(json.dumps(figures)),
        note="one admin removal at the coordinator per change; the member rejoins at once; status read every 20 ms",
    )


if __name__ == "__main__":
    print(json.dumps(main().figures, indent=2))
