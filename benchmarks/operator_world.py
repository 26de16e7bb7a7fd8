"""The world the operator benchmarks run in: a real control plane (``tests/support``: etcd, kube-apiserver with an
audit log of the operator's requests, kube-controller-manager), the chart installed for its ServiceAccount and
RBAC, a real coordinator, and ``berth-operator`` processes as that ServiceAccount; plus ways to read what they did.

Pods stay Pending (there is no kubelet): a fleet's StatefulSet, Service, budget and pods exist, its group is claimed
and pre-registered at the coordinator, and nothing else moves, which is what an idle cluster looks like to the
operator.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import ROOT, progress

sys.path.insert(0, str(ROOT / "tests"))

from support.coordinator import CoordinatorProcess
from support.fleet_stage import ADMIN_TOKEN, MEMBER_TOKEN, fleet_body
from support.kube import Kube, wait_until
from support.kube_cluster import ControlPlane
from support.kube_fixtures import admin_of, started_control_plane
from support.net import free_port
from support.operator_process import OperatorProcess

Obj = dict[str, Any]
#: How long one ``kubectl create`` of a batch of fleets may take.
CREATE_TIMEOUT_S = 1800.0


@dataclass
class World:
    plane: ControlPlane
    kube: Kube
    operator_kube: Kube
    coordinator: CoordinatorProcess
    work: Path
    started: list[OperatorProcess] = field(default_factory=list)  # stopped with the world, whatever happened

    def operator(self, name: str, *args: str) -> OperatorProcess:
        """A ``berth-operator`` process as the chart's ServiceAccount, with its metrics on a port of its own."""
        token = self.work / "admin-token"
        token.write_text(ADMIN_TOKEN)
        metrics = free_port()
        argv = [
            "--coordinator-url", self.coordinator.url,
            "--token-file", str(token),
            "--liveness-port", "0",
            "--metrics-port", str(metrics),
            "--log-format", "text",
            *args,
        ]  # fmt: skip
        process = OperatorProcess(self.operator_kube.kubeconfig, self.work / f"{name}.log", argv)
        process.metrics_url = f"http://127.0.0.1:{metrics}/metrics"
        self.started.append(process)
        return process.start()


@contextlib.contextmanager
def world(*coordinator_flags: str, controller_flags: tuple[str, ...] = ()) -> Iterator[World]:
    """The control plane (``controller_flags``: more kube-controller-manager flags), the chart, and a coordinator
    (with ``coordinator_flags``) requiring tokens."""
    with (
        tempfile.TemporaryDirectory(prefix="berth-operator-bench-") as tmp,
        started_control_plane(controller_flags) as plane,
    ):
        work = Path(tmp)
        kube = admin_of(plane)
        kube.kubectl("apply", "--server-side", "-f", str(ROOT / "deploy" / "crds"))
        kube.wait_established("consumerfleets.berth.dev")
        wait_until(lambda: kube.get("serviceaccount", "default", namespace="default"), "the default ServiceAccount")
        kube.helm("install", "berth", str(ROOT / "charts" / "berth"), "-n", "berth", "--create-namespace")
        tokens = work / "tokens.yaml"
        tokens.write_text(
            yaml.safe_dump(
                {
                    "tokens": [
                        {"token": ADMIN_TOKEN, "groups": ["*"], "admin": True},
                        {"token": MEMBER_TOKEN, "groups": ["*"]},
                    ]
                }
            )
        )
        coordinator = CoordinatorProcess(
            work / "data",
            *coordinator_flags,
            "--tokens-file",
            str(tokens),
            "--log-level",
            "warning",
            manual_clock=False,
        )
        coordinator.start()
        the_world = World(plane, kube, kube.as_service_account("berth", "berth-operator"), coordinator, work)
        try:
            yield the_world
        finally:
            for operator in the_world.started:  # one a benchmark left running would outlive the control plane
                operator.stop()
            coordinator.kill()


def fleet_name(i: int) -> str:
    """The ``i``-th fleet of a namespace, as :func:`create_fleets` names it."""
    return f"f-{i:04d}"


def fleet_group(namespace: str, i: int) -> str:
    """The group of the ``i``-th fleet of ``namespace``: one of its own each."""
    return f"{namespace}-{fleet_name(i)}"


def create_fleets(
    kube: Kube,
    namespace: str,
    count: int,
    *,
    batch: int = 250,
    at_once: int = 1,
    replicas: int = 1,
    spec: dict[str, Any] | None = None,
) -> None:
    """``count`` fleets of ``replicas`` each (``f-0000``...), each with a group of its own (and ``spec``'s fields),
    created in batches (``kubectl create``), ``at_once`` batches at a time."""

    def create(start: int) -> None:
        bodies = [
            fleet_body(fleet_name(i), replicas, fleet_group(namespace, i), **(spec or {}))
            for i in range(start, min(count, start + batch))
        ]
        # Not kube.kubectl: its 3-minute guard is shorter than an API server as busy as a burst can make it.
        subprocess.run(
            [kube.kubectl_bin, "create", "-n", namespace, "-f", "-"],
            input="\n---\n".join(yaml.safe_dump(b) for b in bodies),
            capture_output=True,
            text=True,
            env=kube.env,
            timeout=CREATE_TIMEOUT_S,
            check=True,
        )

    with ThreadPoolExecutor(at_once) as pool:
        list(pool.map(create, range(0, count, batch)))


def has_status(fleet: Obj) -> bool:
    """Whether ``fleet`` has status for its current spec (a selector, the generation seen)."""
    status = fleet.get("status") or {}
    return bool(status.get("selector")) and status.get("observedGeneration") == fleet["metadata"]["generation"]


def fleets_with_status(kube: Kube, namespace: str) -> int:
    """How many of the namespace's fleets have status for their current spec (a selector, the generation seen)."""
    listing = kube.get("consumerfleets", namespace=namespace) or {"items": []}
    return sum(1 for fleet in listing["items"] if has_status(fleet))


def wait_for_status(kube: Kube, namespace: str, count: int, *, timeout_s: float) -> float:
    """Seconds until all ``count`` fleets have status (checked every second)."""
    started = time.monotonic()
    last = -1
    while True:
        done = fleets_with_status(kube, namespace)
        if done != last:
            progress(f"{namespace}: {done}/{count} fleets with status after {time.monotonic() - started:.0f} s")
            last = done
        if done >= count:
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{namespace}: {done}/{count} fleets with status after {timeout_s:g} s")
        time.sleep(1.0)


def metrics_text(operator: OperatorProcess) -> str:
    with urllib.request.urlopen(operator.metrics_url, timeout=30) as answer:
        return str(answer.read().decode())


def fleets_passed(operator: OperatorProcess, namespace: str) -> int:
    """How many of ``namespace``'s fleets this operator process has passed (its per-fleet pass counters)."""
    passed = set()
    try:
        text = metrics_text(operator)
    except OSError:  # not serving yet
        return 0
    for line in text.splitlines():
        counter = line.startswith("berth_operator_reconciles_total{") and f'namespace="{namespace}"' in line
        if counter and float(line.rsplit(" ", 1)[1]) > 0:
            passed.add(line.split('fleet="', 1)[1].split('"', 1)[0])
    return len(passed)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory now (``VmHWM``: the most it has held since it started), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def quiet(plane: ControlPlane, operator: OperatorProcess, *, for_s: float, timeout_s: float) -> None:
    """Until ``operator`` sent nothing but watches for ``for_s`` (its work after a change is done)."""
    offset = plane.audit_offset()
    changed = time.monotonic()
    started = changed
    while time.monotonic() - changed < for_s:
        if time.monotonic() - started > timeout_s:
            progress(f"still busy after {timeout_s:g} s; measuring anyway")
            return
        time.sleep(0.5)
        events, offset = plane.audit(offset)
        if [e for e in operator.requests(events) if e["verb"] != "watch"]:
            changed = time.monotonic()
