"""The job kwok's stage controller does, on the tests' real control plane: pods that "run" without a process each.

For the scale benchmarks (``operator_pods``: 1,000 fleets x 10 pods), where ``fake_kubelet``'s process per pod does
not fit a 2-core machine: kwok itself cannot be built here (no Go module proxy). ``StageController`` watches the
pods of every namespace that carry ``selector`` (a label selector) and, like kwok's default stages:

- binds each new pod to one of ``nodes`` simulated nodes (``pods/binding``; the node chosen by the pod's name, so
  a fleet's pods spread over the nodes), created Ready once (the control plane runs no node lifecycle controller,
  so they need no heartbeats);
- reports a bound pod Running and Ready: phase ``Running``, ``PodScheduled``/``Initialized``/``ContainersReady``/
  ``Ready`` True, ``startTime``, a ``podIP`` and one ``containerStatuses`` entry per container, running and ready
  (``pods/status``) — what the StatefulSet controller and the operator read;
- honours deletions: a pod marked for deletion is confirmed gone (grace period 0, with its UID as precondition, so
  a StatefulSet's replacement of the same name is never the one deleted), as its kubelet would once its containers
  stopped.

The members themselves are played elsewhere (a load generator, one static member per pod, against Berth's
coordinator): nothing runs here. ``plan`` is the pure part (a pod's state -> the one step it needs); the watch and
the requests are the adapter, with ``workers`` threads so that ten thousand pods are not served one request at a
time. ``steps`` counts the requests made, by step.
"""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

import kubernetes
from support.fake_kubelet import api_client, ensure_node

NODE_PREFIX = "stage-node-"


class Step(Enum):
    BIND = "bind"
    RUN = "run"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class PodView:
    """What ``plan`` reads of a pod."""

    namespace: str
    name: str
    node: str | None
    deleting: bool
    running: bool  # phase Running and Ready True

    @classmethod
    def of(cls, pod: Any) -> PodView:
        status = pod.status
        ready = any(c.type == "Ready" and c.status == "True" for c in (status.conditions or [])) if status else False
        return cls(
            pod.metadata.namespace,
            pod.metadata.name,
            pod.spec.node_name,
            pod.metadata.deletion_timestamp is not None,
            bool(status and status.phase == "Running" and ready),
        )


def node_for(name: str, nodes: Sequence[str]) -> str:
    """The node a pod is bound to: by a stable hash of its name (not Python's salted ``hash``)."""
    return nodes[zlib.crc32(name.encode()) % len(nodes)]


def plan(pod: PodView) -> Step | None:
    """The one step a pod needs next, or None when it is where a kubelet would leave it."""
    if pod.deleting:
        return Step.DELETE
    if pod.node is None:
        return Step.BIND
    if not pod.running:
        return Step.RUN
    return None


def pod_ip(name: str) -> str:
    n = zlib.crc32(name.encode())
    return f"10.{(n >> 16) & 0xFF}.{(n >> 8) & 0xFF}.{n & 0xFF or 1}"


def running_status(pod: Any, now: str) -> dict[str, Any]:
    conditions = [
        {"type": kind, "status": "True", "lastTransitionTime": now}
        for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    containers = [
        {
            "name": c.name,
            "image": c.image or "",
            "imageID": "",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
        }
        for c in pod.spec.containers
    ]
    ip = pod_ip(pod.metadata.name)
    return {
        "phase": "Running",
        "conditions": conditions,
        "containerStatuses": containers,
        "startTime": now,
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "hostIP": "10.255.0.1",
    }


class StageController:
    def __init__(self, kubeconfig: Path, selector: str, *, nodes: int = 10, workers: int = 4) -> None:
        self.core = kubernetes.client.CoreV1Api(api_client(kubeconfig))
        self.selector = selector
        self.nodes = [f"{NODE_PREFIX}{i}" for i in range(nodes)]
        self.steps: Counter[Step] = Counter()
        self.error: BaseException | None = None
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="stage")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._doing: set[tuple[str, str, Step]] = set()  # steps queued or under way: one per pod and step
        self._thread = threading.Thread(target=self._run, name="stage-controller", daemon=True)

    def start(self) -> StageController:
        for node in self.nodes:
            ensure_node(self.core, node)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> StageController:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------------ adapter

    def _run(self) -> None:
        watch = kubernetes.watch.Watch()
        version = ""
        while not self._stop.is_set():
            try:
                for event in watch.stream(
                    self.core.list_pod_for_all_namespaces,
                    label_selector=self.selector,
                    resource_version=version,
                    timeout_seconds=1,
                ):
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    if event["type"] != "DELETED":
                        self._on_pod(pod)
                    if self._stop.is_set():
                        break
            except kubernetes.client.ApiException as error:
                if error.status == 410:  # too old: list again from now
                    version = ""
                    continue
                self.error = error
                return
            except Exception as error:  # reported by whoever runs it
                self.error = error
                return

    def _on_pod(self, pod: Any) -> None:
        view = PodView.of(pod)
        step = plan(view)
        if step is None:
            return
        key = (view.namespace, view.name, step)
        with self._lock:
            if key in self._doing:
                return
            self._doing.add(key)
        self._pool.submit(self._do, key, pod)

    def _do(self, key: tuple[str, str, Step], pod: Any) -> None:
        namespace, name, step = key
        try:
            with contextlib.suppress(kubernetes.client.ApiException):  # gone, or already done, meanwhile
                if step is Step.BIND:
                    body = {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node_for(name, self.nodes)},
                    }
                    self.core.create_namespaced_binding(namespace, body, _preload_content=False)
                elif step is Step.RUN:
                    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                    status = {"status": running_status(pod, now)}
                    self.core.patch_namespaced_pod_status(name, namespace, status, _preload_content=False)
                else:  # this pod only (its UID): a late step must not delete a replacement of the same name
                    options = kubernetes.client.V1DeleteOptions(
                        grace_period_seconds=0, preconditions=kubernetes.client.V1Preconditions(uid=pod.metadata.uid)
                    )
                    self.core.delete_namespaced_pod(name, namespace, body=options, _preload_content=False)
                with self._lock:
                    self.steps[step] += 1
        finally:
            with self._lock:
                self._doing.discard(key)
