"""The watching operator on a real control plane: passes come from changes, not from a clock.

Each test runs its own ``berth-operator`` (as the chart's ServiceAccount, ``--namespace`` its test namespace, a
one-hour resync and a ten-minute reconcile interval: nothing that polls could act within a test), so every request
the API server's audit log attributes to it (its User-Agent names it) is about the test's fleets. Pods stay Pending
(no kubelet here): the fleets are idle once created. What is counted is requests, over a quiet window, never how
long anything took.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fleet_stage import fleet_body
from support.kube import Kube, wait_until
from support.kube_cluster import ControlPlane
from support.operator_process import OperatorProcess
from support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.kube, pytest.mark.slow]

Obj = dict[str, Any]
#: How long the operator is watched doing nothing (the assertion is a count over it, zero).
QUIET_WINDOW_S = 10.0
Start = Callable[..., OperatorProcess]


@pytest.fixture
def start_operator(namespaced_operator: Start) -> Start:
    """An operator for the test's namespace that polls nothing; ``kubeconfig`` may route it elsewhere."""

    def start(*extra: str, kubeconfig: Path | None = None, env: dict[str, str] | None = None) -> OperatorProcess:
        quiet_flags = ("--resync-interval-s", "3600", "--reconcile-interval-s", "600")
        return namespaced_operator(*quiet_flags, *extra, kubeconfig=kubeconfig, env=env)

    return start


def has_status(kube: Kube, namespace: str, name: str) -> bool:
    fleet = kube.get("cf", name, namespace=namespace) or {}
    status = fleet.get("status") or {}
    return bool(status.get("selector")) and status.get("observedGeneration") == fleet["metadata"]["generation"]


def quiet(plane: ControlPlane, operator: OperatorProcess, *, for_s: float = 3.0) -> int:
    """Wait until ``operator`` has sent nothing but watches for ``for_s``; the audit offset then."""
    offset = plane.audit_offset()
    last_change = time.monotonic()

    def settled() -> bool:
        nonlocal offset, last_change
        events, offset = plane.audit(offset)
        if [e for e in operator.requests(events) if e["verb"] != "watch"]:
            last_change = time.monotonic()
        return time.monotonic() - last_change >= for_s

    wait_until(settled, f"the operator to go quiet ({for_s:g} s without a request)", timeout_s=120, every_s=0.5)
    return offset


def summary(requests: list[Obj]) -> str:
    counts = Counter(
        f"{e['verb']} {e.get('objectRef', {}).get('resource', '?')}/{e.get('objectRef', {}).get('name', '')}"
        for e in requests
    )
    return ", ".join(f"{what} x{n}" for what, n in counts.most_common()) or "none"


def test_idle_fleets_cost_the_api_server_no_requests(
    kube: Kube, control_plane: ControlPlane, namespace: str, start_operator: Start
) -> None:
    operator = start_operator()
    names = ["orders", "payments", "audit"]
    kube.apply(*(fleet_body(name, 1, f"{namespace}-{name}") for name in names), namespace=namespace)
    for name in names:
        wait_until(lambda n=name: has_status(kube, namespace, n), f"{name}'s status")
    offset = quiet(control_plane, operator)
    time.sleep(QUIET_WINDOW_S)
    requests = operator.requests(control_plane.audit(offset)[0])
    # Not one request about any fleet or anything it owns (a poll would read each of them every interval).
    assert [e for e in requests if e["verb"] != "watch"] == [], summary(requests)
    # Nor a watch started again: the watches run for minutes (the server ends them after 5 to 10).
    assert requests == [], summary(requests)


def test_an_object_changed_or_deleted_out_of_band_is_repaired_on_its_watch_event(
    kube: Kube, control_plane: ControlPlane, namespace: str, start_operator: Start
) -> None:
    """Nothing polls (a one-hour resync, and the fleet is idle): each repair is the watch event's doing."""
    operator = start_operator()
    kube.apply(fleet_body("orders", 2, f"{namespace}-orders"), namespace=namespace)
    wait_until(lambda: has_status(kube, namespace, "orders"), "the fleet's status")
    quiet(control_plane, operator)

    def get(kind: str) -> Obj | None:
        found: Obj | None = kube.get(kind, "orders", namespace=namespace)
        return found

    sts = get("statefulset")
    assert sts is not None
    kube.kubectl("scale", "statefulset/orders", "--replicas=1", "-n", namespace)
    wait_until(lambda: (s := get("statefulset")) and s["spec"]["replicas"] == 2, "the StatefulSet scaled back to 2")

    kube.kubectl("delete", "statefulset/orders", "-n", namespace, "--wait=true")
    wait_until(
        lambda: (s := get("statefulset")) and s["metadata"]["uid"] != sts["metadata"]["uid"],
        "the StatefulSet made again",
    )
    for kind in ("service", "poddisruptionbudget"):
        before = get(kind)
        assert before is not None
        kube.kubectl("delete", f"{kind}/orders", "-n", namespace, "--wait=true")
        wait_until(lambda k=kind, b=before: (o := get(k)) and o["metadata"]["uid"] != b["metadata"]["uid"], kind)
    assert get("statefulset")["spec"]["replicas"] == 2  # type: ignore[index]


def test_new_advice_reaches_the_fleet_it_sizes_on_its_watch_event(
    kube: Kube, control_plane: ControlPlane, namespace: str, start_operator: Start
) -> None:
    """Nothing polls (a one-hour resync, a ten-minute reconcile interval, the fleet idle): the advice ConfigMap's
    watch event is what brings the analytics job's new advice to the fleet's session timeout."""
    advice = "berth-advice"
    group = f"{namespace}-orders"
    # What the chart grants with analytics enabled, here in the test's namespace: that one ConfigMap, by name.
    kube.kubectl(
        "create", "role", "advice-reader", "-n", namespace, "--verb=get,list,watch", "--resource=configmaps",
        f"--resource-name={advice}",
    )  # fmt: skip
    kube.kubectl(
        "create", "rolebinding", "advice-reader", "-n", namespace, "--role=advice-reader",
        "--serviceaccount=berth:berth-operator",  # the identity of the chart's release (conftest.chart_release)
    )  # fmt: skip
    operator = start_operator("--advice-configmap", advice, env={"POD_NAMESPACE": namespace})
    kube.apply(fleet_body("orders", 1, group), namespace=namespace)
    wait_until(lambda: has_status(kube, namespace, "orders"), "the fleet's status")
    reason = (kube.get("cf", "orders", namespace=namespace) or {})["status"]["sessionTimeoutReason"]
    assert not reason.startswith("journal advice"), reason
    quiet(control_plane, operator)

    entry = {"advised_session_timeout_ms": 40_000, "samples": 240, "confident": True, "reason": "p99 of 240 gaps"}
    document = {"version": 1, "generated_at_ms": int(time.time() * 1000), "groups": {group: entry}}
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": advice},
            "data": {"advice.json": json.dumps(document)},
        },
        namespace=namespace,
    )
    wait_until(
        lambda: (
            (status := (kube.get("cf", "orders", namespace=namespace) or {}).get("status") or {})
            and status.get("sessionTimeoutMs") == 40_000
            and str(status.get("sessionTimeoutReason")).startswith("journal advice: p99 of 240 gaps")
        ),
        "the new advice in the fleet's status",
        timeout_s=60,
    )


def test_after_its_connections_are_cut_the_operator_watches_again_and_misses_nothing(
    kube: Kube, control_plane: ControlPlane, operator_identity: Kube, namespace: str, start_operator: Start
) -> None:
    """A load balancer dropping every connection (watches, Kopf's, the calls in flight) while objects change."""
    api_port = int(control_plane.server.rsplit(":", 1)[1])
    proxy = TcpProxy(api_port).start()
    routed = operator_identity.kubeconfig.parent / f"{namespace}-via-proxy.kubeconfig"
    direct = operator_identity.kubeconfig.read_text()
    routed.write_text(direct.replace(control_plane.server, f"https://127.0.0.1:{proxy.port}"))
    try:
        operator = start_operator(kubeconfig=routed)
        kube.apply(fleet_body("orders", 2, f"{namespace}-orders"), namespace=namespace)
        wait_until(lambda: has_status(kube, namespace, "orders"), "the fleet's status")
        quiet(control_plane, operator)
        service = kube.get("service", "orders", namespace=namespace)

        proxy.refuse()  # every connection cut, new ones refused
        kube.kubectl("delete", "service/orders", "-n", namespace, "--wait=true")
        kube.kubectl("scale", "statefulset/orders", "--replicas=1", "-n", namespace)
        kube.kubectl("patch", "cf/orders", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":3}}')
        proxy.allow()

        wait_until(
            lambda: (
                (s := kube.get("service", "orders", namespace=namespace))
                and s["metadata"]["uid"] != service["metadata"]["uid"]
            ),
            "the Service made again",
        )
        wait_until(
            lambda: kube.get("statefulset", "orders", namespace=namespace)["spec"]["replicas"] == 3,
            "the StatefulSet at the fleet's new size",
        )
        assert operator.process is not None and operator.process.poll() is None, operator.log()
    finally:
        proxy.stop()
