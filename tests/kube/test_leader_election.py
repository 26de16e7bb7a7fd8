"""Two real ``berth-operator`` processes on one real control plane, electing a leader on the chart's Lease.

Both run as the chart's ServiceAccount with ``--leader-elect`` on Lease ``berth/berth-operator`` (the only Lease the
chart's Role grants) and short timings (lease 4 s, renew deadline 3 s, retry 0.5 s) so that a takeover fits a test.
The fake kubelet runs a member process per pod; the coordinator's journal counts the batch leaves; the API server's
audit log tells the two processes apart by their User-Agent. Tests here run one after the other (one Lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import kubernetes
import pytest
from support.coordinator import CoordinatorProcess
from support.fake_kubelet import FakeKubelet
from support.fleet_stage import Stage, admin_leaves, fleet_body
from support.kube import Kube, wait_until
from support.kube_cluster import ControlPlane
from support.operator_process import OperatorProcess

from berth.operator.adapters.kube.api_session import ApiSession
from berth.operator.adapters.kube.identity import KubeIdentity
from berth.operator.adapters.kube.lease import LeaseApi
from berth.operator.adapters.leadership.leader import LeaderElector, LeaderGate
from berth.operator.command.app import EXIT_LOST_LEADERSHIP
from berth.operator.planners.lease import LeaseRecord, LeaseTiming

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


@pytest.fixture
def start_replica_slow(namespaced_operator: Callable[..., OperatorProcess]) -> Start:
    """A replica whose standby looks at the Lease only every 60 s (``SLOW_LOOKS``)."""
    return lambda: namespaced_operator(*SLOW_LOOKS)


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


@contextlib.contextmanager
def a_pass_waiting_on_a_frozen_coordinator(
    stage: Stage, control_plane: ControlPlane, leader: OperatorProcess
) -> Iterator[None]:
    """The coordinator frozen and cf/orders scaled to 3: the block runs once the leader's pass has started (it read
    the fleet and waits for the coordinator's answer, which comes when the block ends and the coordinator thaws)."""
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
        yield
    finally:
        coordinator.send_signal(signal.SIGCONT)


def test_a_leader_frozen_past_its_lease_is_replaced_and_acts_no_more_when_it_wakes(
    stage: Stage, control_plane: ControlPlane, start_replica: Start
) -> None:
    leader, (standby,) = elected(start_replica(), start_replica())
    stage.apply(fleet_body("orders", 2, stage.group))
    stage.ready_and_stable(2)

    # Freeze the leader in the middle of a pass that has writes to make: the coordinator holds its answer back
    # until the leader is frozen, then gives it (it waits in the leader's socket for when it wakes).
    with a_pass_waiting_on_a_frozen_coordinator(stage, control_plane, leader):
        time.sleep(0.5)
        leader.signal(signal.SIGSTOP)
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


# --- a standby watches the Lease: it takes it over when it is released or expires, not at its next look ----------

#: Timings under which a standby that only looked every retry period could not take over within the tests' waits:
#: it looks every 60 s. (The flags keep retry period < renew deadline < lease duration.)
SLOW_LOOKS = (
    "--leader-elect",
    "--leader-election-namespace", LEASE_NAMESPACE,
    "--leader-election-lease", LEASE,
    "--leader-elect-lease-duration-s", "90",
    "--leader-elect-renew-deadline-s", "70",
    "--leader-elect-retry-period-s", "60",
)  # fmt: skip
#: How long the tests below give a takeover: well under the standby's retry period (60 s).
PROMPTLY_S = 40.0


def put_lease(kube: Kube, holder: str | None, duration_s: int) -> None:
    """The Lease as an administrator writes it: held by ``holder`` (None: released) for ``duration_s``."""
    now = datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec: dict[str, object] = {"holderIdentity": holder, "leaseDurationSeconds": duration_s, "renewTime": now}
    if kube.get("lease", LEASE, namespace=LEASE_NAMESPACE) is None:
        kube.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LEASE}, "spec": spec},
                   namespace=LEASE_NAMESPACE)  # fmt: skip
    else:
        kube.kubectl("patch", "lease", LEASE, "-n", LEASE_NAMESPACE, "--type=merge", "-p", json.dumps({"spec": spec}))


def identity_of(kube: Kube) -> KubeIdentity:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kube.kubeconfig), client_configuration=configuration, persist_config=False
    )
    return KubeIdentity(configuration, f"kubeconfig {kube.kubeconfig}")


class ReadLease(LeaseApi):
    """The Lease's adapter, saying which holder each read found (``reads``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: asyncio.Queue[str] = asyncio.Queue()

    async def read(self) -> LeaseRecord | None:
        record = await super().read()
        self.reads.put_nowait(record.holder if record else "")
        return record

    async def seen(self, holder: str) -> None:
        """Once a read found ``holder`` (the standby then waits for its next look, 60 s on, or for a change)."""
        while await self.reads.get() != holder:
            pass


async def standby_takes_over(identity: KubeIdentity, meanwhile: Callable[[ReadLease], Awaitable[None]]) -> str:
    """A standby elector (as the chart's ServiceAccount, looking every 60 s) waits for the Lease while ``meanwhile``
    runs; the identity it took the Lease as (it releases it after), or a failure after ``PROMPTLY_S``."""
    client = kubernetes.client.ApiClient(identity.configuration)
    session = ApiSession(identity, user_agent="berth-operator/test (standby)")
    lease = ReadLease(client, namespace=LEASE_NAMESPACE, name=LEASE, timeout_s=5.0, api=session)
    standby = LeaderElector(
        lease, identity="test-standby", timing=LeaseTiming(4, 3, 60), gate=LeaderGate(), sleep=asyncio.sleep
    )
    try:
        acquiring = asyncio.create_task(standby.acquire())
        await meanwhile(lease)
        try:
            await asyncio.wait_for(acquiring, PROMPTLY_S)
        except TimeoutError:
            pytest.fail(f"the standby did not take the Lease within {PROMPTLY_S:g} s: it looks every 60 s")
        holder = standby.record.holder if standby.record else ""
        await standby.release()
        return holder
    finally:
        lease.close()
        await session.close()
        client.close()  # type: ignore[no-untyped-call]


def test_a_standby_that_looks_every_minute_takes_a_released_lease_as_soon_as_it_is_released(
    kube: Kube, operator_identity: Kube
) -> None:
    """The leader's lease lasts an hour, so only the watch can tell the standby of the release before its next look."""
    put_lease(kube, "leader-x", 3600)

    async def release(lease: ReadLease) -> None:
        await lease.seen("leader-x")
        await asyncio.to_thread(put_lease, kube, None, 1)

    assert asyncio.run(standby_takes_over(identity_of(operator_identity), release)) == "test-standby"


def test_a_standby_that_looks_every_minute_takes_an_expired_lease_when_it_expires(
    kube: Kube, operator_identity: Kube
) -> None:
    """Its holder renews it no more (killed): the standby takes it once it has seen it unchanged for its lease
    duration (4 s), not at its next look."""
    put_lease(kube, "leader-killed", 4)

    async def unrenewed(lease: ReadLease) -> None:
        await lease.seen("leader-killed")

    assert asyncio.run(standby_takes_over(identity_of(operator_identity), unrenewed)) == "test-standby"


def test_a_stopped_leader_releases_its_lease_before_its_blocked_pass_winds_down_and_the_standby_takes_it_at_once(
    stage: Stage, control_plane: ControlPlane, start_replica_slow: Start
) -> None:
    """SIGTERM while the leader's pass waits on a coordinator that does not answer (frozen): the Lease is released
    at once (the gate closed first: the pass's wind-down writes nothing), and the standby, which looks every 60 s,
    takes it over as soon as it sees the release."""
    put_lease(stage.kube, None, 1)  # released: the first replica takes it at once
    leader = start_replica_slow()
    wait_until(lambda: leading(leader), "the first replica to lead")
    standby = start_replica_slow()
    wait_until(lambda: "waits as a standby" in standby.log(), "the standby's first look at the Lease")
    stage.apply(fleet_body("orders", 2, stage.group))
    stage.ready_and_stable(2)

    with a_pass_waiting_on_a_frozen_coordinator(stage, control_plane, leader):
        stopped = control_plane.audit_offset()
        leader.signal(signal.SIGTERM)
        wait_until(lambda: leading(standby), "the standby to take over", timeout_s=PROMPTLY_S)
    assert "releasing the leader's Lease before the operator's work winds down" in leader.log()
    leader.wait(timeout_s=60)
    assert writes(control_plane, leader, stopped) == [], (
        "the stopped leader's pass wrote nothing once it was asked to stop"
    )
    lease = stage.kube.get("lease", LEASE, namespace=LEASE_NAMESPACE)
    assert lease["spec"]["holderIdentity"].startswith(f"{standby.name}_")
    stage.ready_and_stable(3)
