"""Rolls admitted a few at a time, on the real control plane: the real StatefulSet controller rolls the pods (the
fake kubelet runs each pod's member), the operator's watch counts the rolls (``planners.roll_pacing``). With
``--max-concurrent-rolls 1``, three fleets whose templates change together roll one after the other: never two
StatefulSets rolling at once, the waiting fleets saying so (``TemplateApplied=False``, ``RollQueued``), each fleet's
pods restarted statically, and 0 rebalances."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from support.coordinator import CoordinatorProcess
from support.fake_kubelet import FakeKubelet
from support.fleet_stage import Stage, fleet_body, rebalances
from support.kube import Kube, wait_until
from support.operator_process import OperatorProcess

pytestmark = [pytest.mark.kube, pytest.mark.slow]

FLEETS = ("orders", "billing", "audit")
SESSION = {"sessionTimeout": {"policy": "Fixed", "fixedMs": 30_000}}


def rolling(statefulset: dict[str, Any]) -> bool:
    """A roll in progress as its controller reports it (or a spec it has not observed yet)."""
    metadata, status = statefulset["metadata"], statefulset.get("status") or {}
    if status.get("observedGeneration", 0) < metadata["generation"]:
        return True
    return status.get("updateRevision") not in (None, status.get("currentRevision"))


class RollWatch:
    """Samples the namespace's StatefulSets every 0.2 s: which were rolling together, and when each first did."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.together: set[frozenset[str]] = set()
        self.started: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RollWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            found = self.kube.get("statefulsets", namespace=self.namespace) or {"items": []}
            now_rolling = frozenset(s["metadata"]["name"] for s in found["items"] if rolling(s))
            self.together.add(now_rolling)
            for name in now_rolling:
                self.started.setdefault(name, time.monotonic())


def test_with_one_turn_three_fleets_changed_together_roll_one_after_the_other_without_a_rebalance(
    kube: Kube,
    namespace: str,
    kubelet: FakeKubelet,
    coordinator_for_operator: CoordinatorProcess,
    namespaced_operator: Callable[..., OperatorProcess],
) -> None:
    namespaced_operator("--max-concurrent-rolls", "1")
    stage = Stage(kube, namespace, kubelet, coordinator_for_operator, "unused")
    groups = {name: f"roll-pacing-{namespace}-{name}" for name in FLEETS}
    bodies = {name: fleet_body(name, 2, groups[name], **SESSION) for name in FLEETS}
    stage.apply(*bodies.values())
    for name in FLEETS:
        wait_until(
            lambda name=name: stage.condition("Ready", name).get("status") == "True", f"{name} Ready", timeout_s=120
        )
    journal_before = {
        name: len(Stage(kube, namespace, kubelet, coordinator_for_operator, groups[name]).journal()) for name in FLEETS
    }

    with RollWatch(kube, namespace) as watch:
        for body in bodies.values():
            body["spec"]["template"].setdefault("metadata", {})["annotations"] = {"example.com/version": "2"}
        stage.apply(*bodies.values())  # one kubectl apply: the three changes land together

        queued = wait_until(
            lambda: [n for n in FLEETS if stage.condition("TemplateApplied", n).get("reason") == "RollQueued"],
            "a fleet waiting for its turn",
        )

        def rolled(name: str) -> bool:
            statefulset = stage.get("statefulset", name)
            annotations = statefulset["spec"]["template"]["metadata"].get("annotations") or {}
            return annotations.get("example.com/version") == "2" and not rolling(statefulset)

        wait_until(lambda: all(rolled(n) for n in FLEETS), "every fleet rolled", timeout_s=240)
        time.sleep(0.5)

    assert max(len(together) for together in watch.together) == 1, sorted(map(sorted, watch.together))
    assert sorted(watch.started) == sorted(FLEETS)  # each rolled (seen by the sampler), one at a time
    assert queued and all(stage.messages("RollQueued", n) for n in queued)
    for name in queued:
        wait_until(
            lambda name=name: stage.condition("TemplateApplied", name).get("status") == "True", f"{name} applied"
        )
    for name in FLEETS:
        since = Stage(kube, namespace, kubelet, coordinator_for_operator, groups[name]).journal()[
            journal_before[name] :
        ]
        assert sorted(e["group_instance_id"] for e in since if e["type"] == "static_member_replaced") == [
            f"{name}-0",
            f"{name}-1",
        ]
        assert rebalances(since) == []
