"""The tests' fake kubelet on the real API server: a pod is its UID, not its name.

A StatefulSet's replacement pod has the name of the pod it replaces. The watch still carries events of the old pod
when the replacement exists whenever the kubelet falls behind it (a loaded machine): the deletion, then the grace-0
update its own confirmation makes. Before the kubelet told pods apart by UID, such a late event stopped the
replacement's process and deleted the replacement (delete by name), whose own deletion then did the same to the next
one: a rolling restart of a Kafka fleet saw pods restart several times each ("9 reassignments") or a pod left
running nothing. Here the late events are handed to the kubelet as its watch would hand them, once the replacement
runs, and the replacement must stay: its object (same UID) and its process.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.fake_kubelet import FakeKubelet
from support.kube import Kube, wait_until

pytestmark = [pytest.mark.kube]

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 5, "containers": [{"name": "main", "image": "none"}]},
    }


@pytest.fixture
def sleepers(kube: Kube, namespace: str, tmp_path: Path) -> Iterator[FakeKubelet]:
    kubelet = FakeKubelet(kube.kubeconfig, namespace, tmp_path / "pods", program=lambda pod, env: SLEEPER).start()
    yield kubelet
    kubelet.stop()
    assert kubelet.error is None, f"the fake kubelet failed: {kubelet.error!r}"


def test_late_events_of_a_deleted_pod_leave_its_replacement_of_the_same_name_running(
    kube: Kube, namespace: str, sleepers: FakeKubelet
) -> None:
    kube.apply(_pod("p-0"), namespace=namespace)
    wait_until(lambda: "p-0" in sleepers.running(), "p-0's process")
    old = sleepers.core.read_namespaced_pod("p-0", namespace)
    kube.kubectl("delete", "pod", "p-0", "--wait=true", "-n", namespace)
    kube.apply(_pod("p-0"), namespace=namespace)  # the replacement, as a StatefulSet makes it
    wait_until(lambda: sleepers.started.count("p-0") == 2 and "p-0" in sleepers.running(), "the replacement's process")
    new = sleepers.core.read_namespaced_pod("p-0", namespace)
    assert new.metadata.uid != old.metadata.uid
    process = sleepers.processes["p-0"]

    # What the watch said of the old pod, arriving late: its deletion (Terminating), then its removal.
    old.metadata.deletion_timestamp = datetime.now(UTC)
    sleepers._on_pod("MODIFIED", old)
    sleepers._on_pod("DELETED", old)

    assert sleepers.core.read_namespaced_pod("p-0", namespace).metadata.uid == new.metadata.uid
    assert sleepers.processes.get("p-0") is process and process.poll() is None
    assert sleepers.started.count("p-0") == 2

    # The replacement's own deletion is still seen and confirmed.
    kube.kubectl("delete", "pod", "p-0", "--wait=true", "--timeout=30s", "-n", namespace)
    assert process.poll() is not None and "p-0" not in sleepers.running()
