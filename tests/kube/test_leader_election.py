"""Two real ``berth-operator`` processes on one real control plane, electing a leader on the chart's Lease.

Both run as the chart's ServiceAccount with ``--leader-elect`` on Lease ``berth/berth-operator`` (the only Lease the
chart's Role grants) and short timings (lease 4 s, renew deadline 3 s, retry 0.5 s) so that a takeover fits a test.
The fake kubelet runs a member process per pod; the coordinator's journal counts the batch leaves; the API server's
audit log tells the two processes apart by their User-Agent. Tests here run one after the other (one Lease).
"""

from __future__ import annotations

import signal
import time
import urllib.request
from collections.abc import Callable

import pytest
from support.coordinator import CoordinatorProcess
from support.fake_kubelet import FakeKubelet
from support.fleet_stage import Stage, admin_leaves, fleet_body
from support.kube import Kube, wait_until
from support.kube_cluster import ControlPlane
from support.operator_process import OperatorProcess

from berth.operator.command.app import EXIT_LOST_LEADERSHIP

pytestmark = [pytest.mark.kube, pytest.mark.slow]

LEASE_NAMESPACE, LEASE = "berth", "berth-operator"
ELECTION = (
    "--leader-elect",
    "--leader-election-namespace", LEASE_NAMESPACE,
    "--leader-election-lease", LEASE,
    "--leader-elect-lease-duration-s", "4",
    "--leader-elect-renew-deadline-s", "3",
    "--leader-elect-retry-period-s", "0.5",
)  # fmt: skip
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
#: What the watch cache lists and watches (a standby keeps it warm for a takeover).
WATCHED = {"statefulsets", "pods", "services", "poddisruptionbudgets", "persistentvolumeclaims"}
Start = Callable[[], OperatorProcess]


@pytest.fixture
def start_replica(namespaced_operator: Callable[..., OperatorProcess]) -> Start:
    return lambda: namespaced_operator(*ELECTION)


def leading(replica: OperatorProcess) -> bool:
    """Whether the replica says it acts (``berth_operator_leader 1``); False once it is gone."""
    if replica.process is None or replica.process.poll() is not None:
        return False
    try:
        with urllib.request.urlopen(replica.metrics_url, timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return False
    return "\nberth_operator_leader 1.0\n" in f"\n{text}"


def exited(replica: OperatorProcess) -> bool:
    return replica.process is None or replica.process.poll() is not None


def elected(*replicas: OperatorProcess) -> tuple[OperatorProcess, list[OperatorProcess]]:
    """The one replica that leads, once exactly one does, and the others."""
    leaders = wait_until(
        lambda: (found := [r for r in replicas if leading(r)]) and len(found) == 1 and found, "a leader"
    )
    return leaders[0], [r for r in replicas if r is not leaders[0]]


def writes(control_plane: ControlPlane, replica: OperatorProcess, since: int) -> list[str]:
    """What ``replica`` wrote after audit offset ``since``, its Lease aside (``verb resource/name``)."""
    events = replica.requests(control_plane.audit(since)[0])
    return [
        f"{e['verb']} {e['objectRef'].get('resource')}/{e['objectRef'].get('name', '')}"
        for e in events
        if e["verb"] in WRITES and e.get("objectRef", {}).get("resource") != "leases"
    ]


@pytest.fixture
def stage(kube: Kube, namespace: str, kubelet: FakeKubelet, coordinator_for_operator: CoordinatorProcess) -> Stage:
    return Stage(kube, namespace, kubelet, coordinator_for_operator, f"{namespace}-orders")


def test_of_two_replicas_only_the_leader_acts_and_says_so(
    stage: Stage, control_plane: ControlPlane, start_replica: Start
) -> None:
    since = control_plane.audit_offset()
    leader, (standby,) = elected(start_replica(), start_replica())
    stage.apply(fleet_body("orders", 3, stage.group))
    stage.ready_and_stable(3)
    stage.kubectl("scale", "cf/orders", "--replicas=2")
    wait_until(lambda: stage.status().get("lastScaleDown"), "the scale-down")
    assert writes(control_plane, leader, since), "the leader did the work"
    assert writes(control_plane, standby, since) == []
    assert leading(leader) and not leading(standby)
    # The standby only watched (its cache stays warm for a takeover; the Lease, by name) and read the Lease.
    looked = {(e["verb"], e["objectRef"].get("resource")) for e in standby.requests(control_plane.audit(since)[0])}
    assert looked <= {("get", "leases"), *((verb, r) for verb in ("list", "watch") for r in {*WATCHED, "leases"})}
    assert ("watch", "leases") in looked, looked
    # Who leads is on record: an Event on the Lease, and the Lease itself.
    lease = stage.kube.get("lease", LEASE, namespace=LEASE_NAMESPACE)
    assert lease["spec"]["holderIdentity"].startswith(f"{leader.name}_")
    said = [e["message"] for e in stage.kube.events(LEASE_NAMESPACE, kind="Lease", name=LEASE)]
    assert f"{lease['spec']['holderIdentity']} became leader" in " ".join(said), said


def test_the_leader_killed_mid_scale_down_the_other_takes_over_and_the_batch_leave_happens_once(
    stage: Stage, start_replica: Start
) -> None:
    leader, (standby,) = elected(start_replica(), start_replica())
    stage.apply(fleet_body("orders", 5, stage.group))
    stage.ready_and_stable(5)
    stage.kubelet.hold("orders-3", "orders-4")
    stage.kubectl("scale", "cf/orders", "--replicas=3")
    wait_until(lambda: stage.status().get("departing") == ["orders-3", "orders-4"], "departing recorded")
    wait_until(lambda: stage.get("statefulset", "orders")["spec"]["replicas"] == 3, "the shrink")
    wait_until(lambda: stage.terminating("orders-4"), "orders-4 Terminating")
    assert admin_leaves(stage.journal()) == []

    leader.signal(signal.SIGKILL)
    leader.wait(timeout_s=30)
    stage.kubelet.release()
    wait_until(lambda: leading(standby), "the standby to take over", timeout_s=60)
    last = wait_until(lambda: stage.status().get("lastScaleDown"), "the batch leave", timeout_s=90)
    assert last["removed"] == ["orders-3", "orders-4"]
    stage.ready_and_stable(3)
    assert admin_leaves(stage.journal()) == [["orders-3", "orders-4"]]
    wait_until(lambda: stage.messages("LeftGroup"), "the LeftGroup Event")
    assert stage.messages("LeftGroup") == ["left the group: orders-3, orders-4"]


def test_a_leader_frozen_past_its_lease_is_replaced_and_acts_no_more_when_it_wakes(
    stage: Stage, control_plane: ControlPlane, start_replica: Start
) -> None:
    leader, (standby,) = elected(start_replica(), start_replica())
    stage.apply(fleet_body("orders", 2, stage.group))
    stage.ready_and_stable(2)

    # Freeze the leader in the middle of a pass that has writes to make: the coordinator holds its answer back
    # until the leader is frozen, then gives it (it waits in the leader's socket for when it wakes).
    coordinator = stage.coordinator.proc
    assert coordinator is not None
    since = control_plane.audit_offset()
    coordinator.send_signal(signal.SIGSTOP)
    try:
        stage.kubectl("scale", "cf/orders", "--replicas=3")
        wait_until(
            lambda: [e for e in leader.requests(control_plane.audit(since)[0]) if e["verb"] == "get"],
            "the leader's pass to start (it reads the fleet, then asks the coordinator)",
        )
        time.sleep(0.5)
        leader.signal(signal.SIGSTOP)
    finally:
        coordinator.send_signal(signal.SIGCONT)
    wait_until(lambda: leading(standby), "the standby to take over", timeout_s=60)
    stage.ready_and_stable(3)

    since = control_plane.audit_offset()
    leader.signal(signal.SIGCONT)
    wait_until(lambda: "is no longer the leader" in leader.log(), "the old leader to notice")
    # Its pass goes on from where it was frozen, with writes planned from what it saw then: none goes out.
    wait_until(
        lambda: (
            "does not hold the leader's Lease" in leader.log() or exited(leader) or writes(control_plane, leader, since)
        ),
        "its frozen pass to end",
    )
    assert writes(control_plane, leader, since) == []
    assert leader.wait(timeout_s=60) == EXIT_LOST_LEADERSHIP, leader.log()
    assert writes(control_plane, leader, since) == []
    assert leading(standby)
    stage.kubectl("scale", "cf/orders", "--replicas=2")
    wait_until(lambda: stage.status().get("lastScaleDown"), "the new leader scaling down")
    assert admin_leaves(stage.journal()) == [["orders-2"]]
