"""The real operator on a real control plane, end to end.

``berth-operator`` runs as a process authenticated as the chart's ServiceAccount; the StatefulSet controller of a
real kube-controller-manager creates the pods; the fake kubelet binds them, runs one real member process per pod
and confirms deletions; a real coordinator holds the groups. Each test has its own namespace and group. After the
module, the operator's output must hold no "forbidden" (``running_operator``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import coordinator_get
from support.coordinator import CoordinatorProcess
from support.fake_kubelet import FakeKubelet
from support.kube import Kube, wait_until
from support.operator_process import OperatorProcess

pytestmark = [pytest.mark.kube, pytest.mark.slow]

Obj = dict[str, Any]
_groups = itertools.count(1)


@pytest.fixture
def group() -> str:
    return f"kube-orders-{next(_groups)}"


def fleet_body(name: str, replicas: int, group: str, **spec: Any) -> Obj:
    consumer = {"name": "consumer", "image": "berth:0.1.0", "env": [{"name": "BERTH_TOPICS", "value": "orders:12"}]}
    sidecar = {"name": "sidecar", "image": "busybox:1.36"}
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "ConsumerFleet",
        "metadata": {"name": name},
        "spec": {
            "groupId": group,
            "replicas": replicas,
            "coordinator": {"tokenSecretRef": {"name": "member-token", "key": "token"}},
            "template": {"spec": {"terminationGracePeriodSeconds": 5, "containers": [consumer, sidecar]}},
            **spec,
        },
    }


# --- reading what happened ----------------------------------------------------------------------------------------


def journal(coordinator: CoordinatorProcess, group: str) -> list[Obj]:
    events = coordinator_get(coordinator, "/v1/journal?after=0&limit=10000")["events"]
    return [event for event in events if event["group_id"] == group]


def describe(coordinator: CoordinatorProcess, group: str) -> Obj:
    described: Obj = coordinator_get(coordinator, f"/v1/groups/{group}")
    return described


def members(coordinator: CoordinatorProcess, group: str) -> set[str]:
    return {member["group_instance_id"] for member in describe(coordinator, group)["members"]}


def status(kube: Kube, namespace: str, name: str = "orders") -> Obj:
    found = kube.get("cf", name, namespace=namespace)
    return (found or {}).get("status") or {}


def condition(kube: Kube, namespace: str, kind: str, name: str = "orders") -> Obj:
    for found in status(kube, namespace, name).get("conditions") or []:
        if found["type"] == kind:
            return dict(found)
    return {}


def event_messages(kube: Kube, namespace: str, reason: str, name: str = "orders") -> list[str]:
    return [e["message"] for e in kube.events(namespace, kind="ConsumerFleet", name=name) if e["reason"] == reason]


def ready_and_stable(kube: Kube, coordinator: CoordinatorProcess, namespace: str, group: str, replicas: int) -> Obj:
    """Wait for Ready=True with every instance a member of the Stable group; the group's description."""
    ids = {f"orders-{i}" for i in range(replicas)}
    wait_until(
        lambda: condition(kube, namespace, "Ready").get("status") == "True", f"{namespace}: Ready=True", timeout_s=90
    )
    wait_until(lambda: members(coordinator, group) == ids and describe(coordinator, group)["group_state"] == "Stable",
               f"{replicas} members in the Stable group", timeout_s=60)  # fmt: skip
    return describe(coordinator, group)


def terminating(kube: Kube, namespace: str, pod: str) -> bool:
    return bool(((kube.get("pod", pod, namespace=namespace) or {}).get("metadata") or {}).get("deletionTimestamp"))


def rebalances(events: list[Obj]) -> list[str]:
    return [event["cause"] for event in events if event["type"] == "rebalance_started"]


def admin_leaves(events: list[Obj]) -> list[list[str]]:
    """The instance ids of each admin (batch) leave: adjacent ``member_left via admin`` events are one request."""
    batches: list[list[str]] = []
    previous = None
    for index, event in enumerate(events):
        if event["type"] == "member_left" and event.get("via") == "admin":
            if previous == index - 1:
                batches[-1].append(event["group_instance_id"])
            else:
                batches.append([event["group_instance_id"]])
            previous = index
    return batches


@pytest.fixture
def operator(running_operator: OperatorProcess) -> Iterator[OperatorProcess]:
    yield running_operator
    assert running_operator.process is not None and running_operator.process.poll() is None, running_operator.log()


# --- the scenarios ----------------------------------------------------------------------------------------------


def test_a_fleet_becomes_a_statefulset_whose_every_container_carries_the_member_environment(
    kube: Kube, namespace: str, kubelet: FakeKubelet, operator: OperatorProcess,
    coordinator_for_operator: CoordinatorProcess, group: str,
) -> None:  # fmt: skip
    kube.apply(fleet_body("orders", 3, group), namespace=namespace)
    ready_and_stable(kube, coordinator_for_operator, namespace, group, 3)
    fleet = kube.get("cf", "orders", namespace=namespace)
    statefulset = kube.get("statefulset", "orders", namespace=namespace)
    (owner,) = statefulset["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("ConsumerFleet", "orders", fleet["metadata"]["uid"])
    assert owner["controller"] is True and owner["blockOwnerDeletion"] is True
    service = kube.get("service", "orders", namespace=namespace)
    assert service["spec"]["clusterIP"] == "None" and service["metadata"]["ownerReferences"][0]["uid"] == owner["uid"]
    for container in statefulset["spec"]["template"]["spec"]["containers"]:
        env = {var["name"]: var for var in container["env"]}
        assert env["BERTH_GROUP_ID"]["value"] == group, container["name"]
        assert env["BERTH_GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        assert env["BERTH_COORDINATOR_URL"]["value"] == coordinator_for_operator.url
        assert env["BERTH_SESSION_TIMEOUT_MS"]["value"] == str(fleet["status"]["sessionTimeoutMs"])
        assert env["BERTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "member-token", "key": "token"}
        assert {"BERTH_REBALANCE_TIMEOUT_MS", "BERTH_HEARTBEAT_INTERVAL_MS"} <= env.keys()
    assert fleet["status"]["ready"] == "3/3" and fleet["status"]["groupId"] == group
    assert fleet["status"]["sessionTimeout"].endswith("s")
    # Every member got partitions from one assignment: the group formed once.
    assert rebalances(journal(coordinator_for_operator, group)) == ["new_member"]


def test_scale_down_sends_one_batch_leave_naming_exactly_the_departed_ids_after_their_pods_are_gone(
    kube: Kube, namespace: str, kubelet: FakeKubelet, operator: OperatorProcess,
    coordinator_for_operator: CoordinatorProcess, group: str,
) -> None:  # fmt: skip
    kube.apply(fleet_body("orders", 5, group), namespace=namespace)
    before = ready_and_stable(kube, coordinator_for_operator, namespace, group, 5)
    kubelet.hold("orders-3", "orders-4")
    kube.kubectl("scale", "cf/orders", "-n", namespace, "--replicas=3")
    wait_until(lambda: status(kube, namespace).get("departing") == ["orders-3", "orders-4"], "departing recorded")
    wait_until(lambda: kube.get("statefulset", "orders", namespace=namespace)["spec"]["replicas"] == 3, "the shrink")
    # OrderedReady: the StatefulSet controller deletes the highest ordinal first and the next only once it is gone.
    wait_until(lambda: terminating(kube, namespace, "orders-4"), "orders-4 Terminating")
    wait_until(lambda: any("orders-3, orders-4 to terminate" in m for m in event_messages(kube, namespace, "Waiting")),
               "the Waiting Event")  # fmt: skip
    # Its pod still exists (its process is stopped): nobody has been removed yet.
    assert admin_leaves(journal(coordinator_for_operator, group)) == []
    assert condition(kube, namespace, "ScaleDownPending")["status"] == "True"
    kubelet.release("orders-4")
    wait_until(lambda: terminating(kube, namespace, "orders-3"), "orders-3 Terminating")
    wait_until(lambda: any("pod orders-3 to terminate" in m for m in event_messages(kube, namespace, "Waiting")),
               "the Waiting Event for the last one")  # fmt: skip
    assert admin_leaves(journal(coordinator_for_operator, group)) == []

    kubelet.release()
    last = wait_until(lambda: status(kube, namespace).get("lastScaleDown"), "lastScaleDown", timeout_s=30)
    assert last["removed"] == ["orders-3", "orders-4"]
    assert last["results"] == {"orders-3": "NONE", "orders-4": "NONE"}
    after = ready_and_stable(kube, coordinator_for_operator, namespace, group, 3)
    events = journal(coordinator_for_operator, group)
    assert admin_leaves(events) == [["orders-3", "orders-4"]]
    left_at = max(i for i, e in enumerate(events) if e["type"] == "member_left")
    assert rebalances(events[left_at:]) == ["member_left"]
    assert after["generation_id"] == before["generation_id"] + 1
    assert event_messages(kube, namespace, "LeftGroup") == ["left the group: orders-3, orders-4 (1 rebalance)"]
    assert "scaled to 3 replicas" in event_messages(kube, namespace, "Scaled")
    # The survivors own every partition between them.
    owned = [set(kubelet.assignments(pod)[-1]["partitions"]) for pod in ("orders-0", "orders-1", "orders-2")]
    assert set().union(*owned) == {f"orders:{p}" for p in range(12)}


def test_scale_up_with_pre_registration_costs_one_rebalance(
    kube: Kube, namespace: str, kubelet: FakeKubelet, operator: OperatorProcess,
    coordinator_for_operator: CoordinatorProcess, group: str,
) -> None:  # fmt: skip
    kube.apply(fleet_body("orders", 3, group), namespace=namespace)
    before = ready_and_stable(kube, coordinator_for_operator, namespace, group, 3)
    seen = len(journal(coordinator_for_operator, group))
    kube.kubectl("scale", "cf/orders", "-n", namespace, "--replicas=5")
    after = ready_and_stable(kube, coordinator_for_operator, namespace, group, 5)
    assert rebalances(journal(coordinator_for_operator, group)[seen:]) == ["new_member"]
    assert after["generation_id"] == before["generation_id"] + 1
    expected = coordinator_get(coordinator_for_operator, f"/v1/groups/{group}/expected-members")
    assert sorted(expected["group_instance_ids"]) == [f"orders-{i}" for i in range(5)]


def test_a_deleted_pod_rejoins_as_itself_without_a_rebalance(
    kube: Kube, namespace: str, kubelet: FakeKubelet, operator: OperatorProcess,
    coordinator_for_operator: CoordinatorProcess, group: str,
) -> None:  # fmt: skip
    kube.apply(fleet_body("orders", 3, group), namespace=namespace)
    before = ready_and_stable(kube, coordinator_for_operator, namespace, group, 3)
    seen = len(journal(coordinator_for_operator, group))
    kube.kubectl("delete", "pod", "orders-1", "-n", namespace, "--wait=true")
    wait_until(lambda: kubelet.started.count("orders-1") == 2, "orders-1 started again")
    replaced = wait_until(lambda: [e for e in journal(coordinator_for_operator, group)[seen:]
                                   if e["type"] == "static_member_replaced"], "the static rejoin")  # fmt: skip
    assert [(e["group_instance_id"], e["rebalance"]) for e in replaced] == [("orders-1", False)]
    assert rebalances(journal(coordinator_for_operator, group)[seen:]) == []
    assert describe(coordinator_for_operator, group)["generation_id"] == before["generation_id"]


def test_deleting_a_fleet_leaves_everyone_deletes_the_group_and_its_statefulset_is_collected(
    kube: Kube, namespace: str, kubelet: FakeKubelet, operator: OperatorProcess,
    coordinator_for_operator: CoordinatorProcess, group: str,
) -> None:  # fmt: skip
    kube.apply(fleet_body("orders", 2, group), namespace=namespace)
    ready_and_stable(kube, coordinator_for_operator, namespace, group, 2)
    kube.kubectl("delete", "cf", "orders", "-n", namespace, "--wait=false")
    wait_until(lambda: kube.get("cf", "orders", namespace=namespace) is None, "the fleet released", timeout_s=60)
    events = journal(coordinator_for_operator, group)
    assert admin_leaves(events) == [["orders-0", "orders-1"]]
    assert events[-1]["type"] == "group_deleted"
    assert describe(coordinator_for_operator, group)["group_state"] == "Dead"
    # The garbage collector removes what the fleet owned.
    wait_until(lambda: kube.get("statefulset", "orders", namespace=namespace) is None, "the StatefulSet collected")
    wait_until(lambda: kube.get("service", "orders", namespace=namespace) is None, "the Service collected")


def test_refused_fleets_say_why_in_status_columns_and_warning_events(
    kube: Kube, namespace: str, kubelet: FakeKubelet, operator: OperatorProcess,
    coordinator_for_operator: CoordinatorProcess, group: str,
) -> None:  # fmt: skip
    kube.apply(fleet_body("orders", 1, group), namespace=namespace)
    ready_and_stable(kube, coordinator_for_operator, namespace, group, 1)
    kube.apply(
        fleet_body("copycat", 1, group),
        # Below the coordinator's 6 s minimum: the CRD cannot know the coordinator's bounds, the operator does.
        fleet_body("hasty", 1, f"{group}-hasty", sessionTimeout={"policy": "Fixed", "fixedMs": 1000}),
        namespace=namespace,
    )
    for name, reason in (("copycat", "GroupIdInUse"), ("hasty", "InvalidSessionTimeout")):
        ready = wait_until(lambda n=name: (c := condition(kube, namespace, "Ready", n)).get("reason") and c,
                           f"{name} refused")  # fmt: skip
        assert (ready["status"], ready["reason"]) == ("False", reason), ready
        assert condition(kube, namespace, "SpecValid", name)["status"] == "False"
        warnings = [e for e in kube.events(namespace, kind="ConsumerFleet", name=name) if e["reason"] == reason]
        assert warnings and warnings[0]["type"] == "Warning", kube.events(namespace, kind="ConsumerFleet", name=name)
        assert kube.get("statefulset", name, namespace=namespace) is None
    rows = kube.kubectl("get", "cf", "-n", namespace, "-o", "json").stdout
    assert {item["metadata"]["name"] for item in json.loads(rows)["items"]} == {"orders", "copycat", "hasty"}
    table = kube.kubectl("get", "cf", "-n", namespace).stdout
    assert "GroupIdInUse" in table and "InvalidSessionTimeout" in table
    described = kube.kubectl("describe", "cf", "copycat", "-n", namespace).stdout
    assert "GroupIdInUse" in described and f"group {group} on" in described
    # The holder is untouched.
    assert members(coordinator_for_operator, group) == {"orders-0"}
