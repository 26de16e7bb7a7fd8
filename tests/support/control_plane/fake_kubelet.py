"""The kubelet's part, played for the tests' control plane: pods of one namespace get a member process each.

There is no scheduler and no kubelet in the tests' control plane. ``FakeKubelet`` watches one namespace's pods and,
like a kubelet on node ``fake-node``:

- binds each new pod to the node (``pods/binding``), starts its member process
  (``python -m berth.operator.local.member``) with the environment its first container declares — ``value``,
  ``fieldRef`` (``metadata.name``, ``metadata.namespace``) and ``secretKeyRef`` (``optional`` ones left out when
  the key is missing) resolved as a kubelet would, and its ``configMap``, ``secret`` and ``downwardAPI``
  (annotations, labels) volumes written to a
  directory of the pod's (a variable naming a file under the mount path names the same file there) — then reports
  it Running and Ready through ``pods/status``;
- when a pod's environment names a Secret (or key) that does not exist, leaves it Pending with its container
  waiting (``CreateContainerConfigError``, the kubelet's message) and tries again every second, as a kubelet does;
- when a pod is deleted (bound pods are deleted gracefully: they stay Terminating until their kubelet confirms),
  stops its process with SIGTERM, a static member's "pod gone" (it does not leave the group), then confirms the
  deletion (grace period 0). :meth:`hold` keeps chosen pods Terminating until :meth:`release`.

A pod is the object with its UID, not its name: a StatefulSet's replacement pod has the name of the one it replaces,
and the watch can still be telling of the old one (a deletion and the grace-0 update it makes are two events) when
the replacement exists. So, as a kubelet does, the deletion is confirmed with a UID precondition (it can only delete
the pod it was about, never the replacement), and a process is stopped only by events of the pod it runs for.

Each member's JSON lines (``assigned`` after every rebalance, ``fatal``) are kept per pod (:meth:`lines`).
``program`` chooses another command for a pod (or None to leave it Pending): ``run_member`` (Berth's member
library) by default, ``support.kafka_consumers.program_for_pod`` for the example Kafka consumers a pod's container
names. ``gone_at`` keeps when each pod was last confirmed gone (wall clock). A pod with ``restartPolicy: Never``
whose process exits is reported Succeeded or Failed by its exit status, as ``helm test`` expects. :meth:`kill`
ends a pod's process with SIGKILL and leaves the pod as it is (a crash: nothing is sent on the way out).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes

NODE = "fake-node"
MEMBER = [sys.executable, "-m", "berth.operator.local.member"]
#: What a pod runs: its argv from the pod (and its resolved environment), or None to leave it Pending.
Program = Callable[[Any, dict[str, str]], list[str] | None]


def run_member(pod: Any, env: dict[str, str]) -> list[str] | None:
    return MEMBER


def api_client(kubeconfig: Path) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config(config_file=str(kubeconfig))


def ensure_node(core: kubernetes.client.CoreV1Api, name: str = NODE) -> None:
    """A Ready node for pods to be bound to (created once per control plane)."""
    try:
        core.read_node(name)
        return
    except kubernetes.client.ApiException as error:
        if error.status != 404:
            raise
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    core.patch_node_status(name, {"status": {"conditions": [ready]}})


class ContainerConfigError(Exception):
    """What a kubelet reports as CreateContainerConfigError: the container's environment cannot be built."""


class FakeKubelet:
    def __init__(self, kubeconfig: Path, namespace: str, log_dir: Path, program: Program = run_member) -> None:
        self.client = api_client(kubeconfig)
        self.program = program
        self.core = kubernetes.client.CoreV1Api(self.client)
        self.namespace = namespace
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._uids: dict[str, str] = {}  # pod name -> the UID of the pod its process in ``processes`` runs for
        self.started: list[str] = []  # pod names in the order their members started (restarts repeat a name)
        self._held: set[str] = set()
        self._run_once: set[str] = set()
        self.finished: dict[str, int] = {}  # pods that ran once -> their exit status
        self.gone_at: dict[str, float] = {}  # pod -> when its deletion was last confirmed (time.time())
        self._terminating: dict[str, str] = {}  # pod name -> UID of the Terminating pod of that name
        self._blocked: dict[str, Any] = {}  # pods whose environment cannot be built yet -> the pod, to retry
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"fake-kubelet-{namespace}", daemon=True)
        self.error: BaseException | None = None

    # ------------------------------------------------------------------------------------------------ public

    def start(self) -> FakeKubelet:
        ensure_node(self.core)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            names = list(self.processes)
        for name in names:
            self._stop_member(name, signal.SIGKILL)
        self._thread.join(timeout=10)
        self.client.close()

    def hold(self, *names: str) -> None:
        """Keep these pods Terminating (their members stopped) until :meth:`release`."""
        with self._lock:
            self._held |= set(names)

    def release(self, *names: str) -> None:
        """Let these held pods (all of them when none are named) finish terminating."""
        with self._lock:
            released = set(names) if names else set(self._held)
            self._held -= released
            now = {name: self._terminating[name] for name in released if name in self._terminating}
        for name, uid in now.items():
            self._confirm_deletion(name, uid)

    def kill(self, name: str) -> None:
        """The pod's process dies at once (SIGKILL, as in a crash or an OOM kill); the pod object is left alone."""
        with self._lock:
            process = self.processes.get(name)
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def running(self) -> set[str]:
        with self._lock:
            return {name for name, proc in self.processes.items() if proc.poll() is None}

    def lines(self, pod: str) -> list[dict[str, Any]]:
        path = self.log_dir / f"{pod}.out"
        if not path.exists():
            return []
        found = []
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                found.append(json.loads(line))
        return found

    def assignments(self, pod: str) -> list[dict[str, Any]]:
        return [line for line in self.lines(pod) if line.get("event") == "assigned"]

    # ---------------------------------------------------------------------------------------------- the loop

    def _run(self) -> None:
        watch = kubernetes.watch.Watch()
        version = ""
        while not self._stop.is_set():
            try:
                for event in watch.stream(
                    self.core.list_namespaced_pod,
                    self.namespace,
                    resource_version=version,
                    timeout_seconds=1,
                    allow_watch_bookmarks=False,
                ):
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    self._on_pod(event["type"], pod)
                    if self._stop.is_set():
                        break
                self._report_exits()
                self._retry_blocked()
            except kubernetes.client.ApiException as error:
                if error.status == 410:  # the resource version is too old: start over from a fresh list
                    version = ""
                    continue
                self.error = error
                return
            except Exception as error:  # reported by the fixture
                self.error = error
                return

    def _on_pod(self, kind: str, pod: Any) -> None:
        name, uid = pod.metadata.name, pod.metadata.uid
        if kind == "DELETED" or pod.metadata.deletion_timestamp is not None:
            with self._lock:
                if name in self._blocked and self._blocked[name].metadata.uid == uid:
                    del self._blocked[name]
        if kind == "DELETED":
            self._stop_member(name, signal.SIGTERM, uid)
            return
        if pod.metadata.deletion_timestamp is not None:
            self._stop_member(name, signal.SIGTERM, uid)
            with self._lock:
                self._terminating[name] = uid
                held = name in self._held
            if not held:
                self._confirm_deletion(name, uid)
            return
        if pod.spec.node_name is None:
            self._bind(name)
            return
        with self._lock:
            if name in self.finished:
                return
            running = self._uids.get(name) if name in self.processes else None
        if running == uid:
            return
        if running is not None:  # the process of an earlier pod of this name, whose deletion the watch skipped
            self._stop_member(name, signal.SIGTERM, running)
        if self._start_member(pod):
            self._report_ready(name)

    def _bind(self, name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
        }
        with contextlib.suppress(kubernetes.client.ApiException):  # already bound, or gone meanwhile
            self.core.create_namespaced_binding(self.namespace, body, _preload_content=False)

    def _start_member(self, pod: Any) -> bool:
        name = pod.metadata.name
        try:
            env = {**os.environ, **self._container_env(pod), "BERTH_LOCAL_NAME": name}
        except ContainerConfigError as error:
            with self._lock:
                first = name not in self._blocked
                self._blocked[name] = pod
            if first:
                self._report_waiting(pod, "CreateContainerConfigError", str(error))
            return False
        with self._lock:
            self._blocked.pop(name, None)
        argv = self.program(pod, env)
        if argv is None:
            return False
        out = open(self.log_dir / f"{name}.out", "ab")  # noqa: SIM115 - the process writes it until it stops
        err = open(self.log_dir / f"{name}.err", "ab")  # noqa: SIM115
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=err, start_new_session=True)
        with self._lock:
            self.processes[name] = process
            self._uids[name] = pod.metadata.uid
            self.started.append(name)
            if pod.spec.restart_policy == "Never":
                self._run_once.add(name)
        return True

    def _report_exits(self) -> None:
        """Pods that run once (restartPolicy Never) end Succeeded or Failed with their process."""
        with self._lock:
            exited = {
                n: p.returncode for n, p in self.processes.items() if n in self._run_once and p.poll() is not None
            }
            for name in exited:
                del self.processes[name]
                self._uids.pop(name, None)
                self.finished[name] = exited[name]
        for name, code in exited.items():
            phase = "Succeeded" if code == 0 else "Failed"
            with contextlib.suppress(kubernetes.client.ApiException):
                self.core.patch_namespaced_pod_status(name, self.namespace, {"status": {"phase": phase}})

    def _retry_blocked(self) -> None:
        with self._lock:
            blocked = [pod for name, pod in self._blocked.items() if name not in self.processes]
        for pod in blocked:
            if self._start_member(pod):
                self._report_ready(pod.metadata.name)

    def _report_waiting(self, pod: Any, reason: str, message: str) -> None:
        containers = [
            {
                "name": container.name,
                "image": container.image,
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
            for container in pod.spec.containers
        ]
        status = {"phase": "Pending", "containerStatuses": containers}
        with contextlib.suppress(kubernetes.client.ApiException):  # deleted meanwhile
            self.core.patch_namespaced_pod_status(pod.metadata.name, self.namespace, {"status": status})

    def _container_env(self, pod: Any) -> dict[str, str]:
        env: dict[str, str] = {}
        for var in pod.spec.containers[0].env or []:
            if var.value_from is None:
                env[var.name] = var.value or ""
            elif var.value_from.field_ref is not None:
                path = var.value_from.field_ref.field_path
                env[var.name] = {"metadata.name": pod.metadata.name, "metadata.namespace": self.namespace}[path]
            elif var.value_from.secret_key_ref is not None:
                ref = var.value_from.secret_key_ref
                try:
                    secret = self.core.read_namespaced_secret(ref.name, self.namespace)
                except kubernetes.client.ApiException as error:
                    if error.status != 404:
                        raise
                    raise ContainerConfigError(f'secret "{ref.name}" not found') from None
                if ref.key not in (secret.data or {}):
                    if ref.optional:
                        continue
                    raise ContainerConfigError(f"couldn't find key {ref.key} in Secret {self.namespace}/{ref.name}")
                env[var.name] = base64.b64decode(secret.data[ref.key]).decode()
        return self._mounted(pod, env)

    def _mounted(self, pod: Any, env: dict[str, str]) -> dict[str, str]:
        """The first container's configMap and secret volumes, written under the log directory (a secret volume's
        ``items`` as their paths); paths in ``env`` moved there."""
        volumes = {
            v.name: v
            for v in pod.spec.volumes or []
            if v.config_map is not None or v.secret is not None or v.downward_api is not None
        }
        for mount in pod.spec.containers[0].volume_mounts or []:
            source = volumes.get(mount.name)
            if source is None:
                continue
            files: dict[str, bytes]
            if source.downward_api is not None:
                files = self._downward(pod, source.downward_api.items or [])
            elif source.config_map is not None:
                data = self.core.read_namespaced_config_map(source.config_map.name, self.namespace).data or {}
                files = {key: value.encode() for key, value in data.items()}
            else:
                secret = self.core.read_namespaced_secret(source.secret.secret_name, self.namespace)
                decoded = {key: base64.b64decode(value) for key, value in (secret.data or {}).items()}
                items = source.secret.items
                files = {item.path: decoded[item.key] for item in items} if items else decoded
            directory = self.log_dir / f"{pod.metadata.name}-volumes" / mount.name
            directory.mkdir(parents=True, exist_ok=True)
            for key, value in files.items():
                (directory / key).write_bytes(value)
            prefix = mount.mount_path.rstrip("/") + "/"
            env = {k: str(directory) + "/" + v[len(prefix) :] if v.startswith(prefix) else v for k, v in env.items()}
        return env

    @staticmethod
    def _downward(pod: Any, items: list[Any]) -> dict[str, bytes]:
        """A downward-API volume's files of the pod's annotations and labels (``metadata.annotations['KEY']``), as
        the kubelet writes them."""
        found: dict[str, bytes] = {}
        for item in items:
            field = item.field_ref.field_path if item.field_ref is not None else ""
            for prefix, source in (
                ("metadata.annotations", pod.metadata.annotations),
                ("metadata.labels", pod.metadata.labels),
            ):
                if field.startswith(prefix + "['") and field.endswith("']"):
                    found[item.path] = str((source or {}).get(field[len(prefix) + 2 : -2], "")).encode()
        return found

    def _report_ready(self, name: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": now}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        status = {"phase": "Running", "conditions": conditions, "startTime": now}
        with contextlib.suppress(kubernetes.client.ApiException):  # deleted meanwhile
            self.core.patch_namespaced_pod_status(name, self.namespace, {"status": status})

    def _stop_member(self, name: str, sig: signal.Signals, uid: str | None = None) -> None:
        """Stop the process of pod ``name`` (only if it runs for the pod with ``uid``, when one is given)."""
        with self._lock:
            if uid is not None and self._uids.get(name) != uid:
                return
            process = self.processes.pop(name, None)
            self._uids.pop(name, None)
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def _confirm_deletion(self, name: str, uid: str) -> None:
        """Delete the pod ``name`` whose UID is ``uid`` at once, as its kubelet does once its containers stopped; a
        later pod of the same name (a StatefulSet's replacement) is not this one and stays."""
        with self._lock:
            if self._terminating.get(name) == uid:
                del self._terminating[name]
        options = kubernetes.client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=kubernetes.client.V1Preconditions(uid=uid)
        )
        try:
            self.core.delete_namespaced_pod(name, self.namespace, body=options)
        except kubernetes.client.ApiException as error:
            if error.status == 409:  # the UID precondition failed: the name is another pod's by now
                return
            # otherwise already gone
        self.gone_at[name] = time.time()
