"""The real operator on a real control plane, end to end.

``berth-operator`` runs as a process authenticated as the chart's ServiceAccount; the StatefulSet controller of a
real kube-controller-manager creates the pods; the fake kubelet binds them, runs one real member process per pod
and confirms deletions; a real coordinator holds the groups. Each test has its own namespace and group. After the
module, the operator's output must hold no "forbidden" (``running_operator``).
"""

from __future__ import annotations

import pytest
from support.coordinator import coordinator_get
from support.fleet_stage import ADMIN_TOKEN, Stage, admin_leaves, fleet_body, rebalances
from support.kube import wait_until

pytestmark = [pytest.mark.kube, pytest.mark.slow]

# --- the scenarios ----------------------------------------------------------------------------------------------


def test_a_fleet_becomes_a_statefulset_whose_every_container_carries_the_member_environment(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 3, stage.group))
    stage.ready_and_stable(3)
    fleet = stage.get("cf", "orders")
    statefulset = stage.get("statefulset", "orders")
    (owner,) = statefulset["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("ConsumerFleet", "orders", fleet["metadata"]["uid"])
    assert owner["controller"] is True and owner["blockOwnerDeletion"] is True
    service = stage.get("service", "orders")
    assert service["spec"]["clusterIP"] == "None" and service["metadata"]["ownerReferences"][0]["uid"] == owner["uid"]
    for container in statefulset["spec"]["template"]["spec"]["containers"]:
        env = {var["name"]: var for var in container["env"]}
        assert env["BERTH_GROUP_ID"]["value"] == stage.group, container["name"]
        assert env["BERTH_GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        assert env["BERTH_COORDINATOR_URL"]["value"] == stage.coordinator.url
        assert env["BERTH_SESSION_TIMEOUT_MS"]["value"] == str(fleet["status"]["sessionTimeoutMs"])
        assert env["BERTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "member-token", "key": "token"}
        assert {"BERTH_REBALANCE_TIMEOUT_MS", "BERTH_HEARTBEAT_INTERVAL_MS"} <= env.keys()
    assert fleet["status"]["ready"] == "3/3" and fleet["status"]["groupId"] == stage.group
    assert fleet["status"]["sessionTimeout"].endswith("s")
    # Every member got partitions from one assignment: the group formed once.
    assert rebalances(events := stage.journal()) == ["new_member"], events


def test_scale_down_sends_one_batch_leave_naming_exactly_the_departed_ids_after_their_pods_are_gone(
    stage: Stage,
) -> None:
    stage.apply(fleet_body("orders", 5, stage.group))
    before = stage.ready_and_stable(5)
    stage.kubelet.hold("orders-3", "orders-4")
    stage.kubectl("scale", "cf/orders", "--replicas=3")
    wait_until(lambda: stage.status().get("departing") == ["orders-3", "orders-4"], "departing recorded")
    wait_until(lambda: stage.get("statefulset", "orders")["spec"]["replicas"] == 3, "the shrink")
    # OrderedReady: the StatefulSet controller deletes the highest ordinal first and the next only once it is gone.
    wait_until(lambda: stage.terminating("orders-4"), "orders-4 Terminating")
    wait_until(
        lambda: any("orders-3, orders-4 to terminate" in m for m in stage.messages("Waiting")), "the Waiting Event"
    )
    # Its pod still exists (its process is stopped): nobody has been removed yet.
    assert admin_leaves(stage.journal()) == []
    assert stage.condition("ScaleDownPending")["status"] == "True"
    stage.kubelet.release("orders-4")
    wait_until(lambda: stage.terminating("orders-3"), "orders-3 Terminating")
    wait_until(lambda: any("pod orders-3 to terminate" in m for m in stage.messages("Waiting")), "the last one's Event")
    assert admin_leaves(stage.journal()) == []

    stage.kubelet.release()
    last = wait_until(lambda: stage.status().get("lastScaleDown"), "lastScaleDown", timeout_s=30)
    assert last["removed"] == ["orders-3", "orders-4"]
    assert last["results"] == {"orders-3": "NONE", "orders-4": "NONE"}
    after = stage.ready_and_stable(3)
    events = stage.journal()
    assert admin_leaves(events) == [["orders-3", "orders-4"]]
    left_at = max(i for i, e in enumerate(events) if e["type"] == "member_left")
    assert rebalances(events[left_at:]) == ["member_left"], events
    assert after["generation_id"] == before["generation_id"] + 1
    said = wait_until(lambda: stage.messages("LeftGroup"), "the LeftGroup Event")  # posted after the status write
    assert said == ["left the group: orders-3, orders-4"]
    # The rebalances the leave cost are counted from the group's generations once it is Stable again, not assumed.
    counted = wait_until(lambda: (stage.status().get("lastScaleDown") or {}).get("rebalances") is not None, "counted")
    assert counted and stage.status()["lastScaleDown"]["rebalances"] == 1
    said = wait_until(lambda: stage.messages("Rebalanced"), "the Rebalanced Event")
    assert said[-1].endswith(": 1 rebalance since orders-3, orders-4 left")
    assert "scaled to 3 replicas" in stage.messages("Scaled")
    # The operator counts it: one batch leave, two members removed, none departing.
    assert stage.metric("berth_operator_batch_leaves_total") == 1
    assert stage.metric("berth_operator_members_left_total") == 2
    assert stage.metric("berth_operator_departing_members") == 0
    assert (stage.metric("berth_operator_leave_delay_seconds_count", name_label=None) or 0) >= 1  # over every fleet
    # The survivors own every partition between them.
    owned = [set(stage.kubelet.assignments(pod)[-1]["partitions"]) for pod in ("orders-0", "orders-1", "orders-2")]
    assert set().union(*owned) == {f"orders:{p}" for p in range(12)}


def test_scale_up_with_pre_registration_costs_one_rebalance(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 3, stage.group))
    before = stage.ready_and_stable(3)
    seen = len(stage.journal())
    stage.kubectl("scale", "cf/orders", "--replicas=5")
    after = stage.ready_and_stable(5)
    assert rebalances(events := stage.journal()[seen:]) == ["new_member"], events
    assert after["generation_id"] == before["generation_id"] + 1
    expected = coordinator_get(stage.coordinator, f"/v1/groups/{stage.group}/expected-members", ADMIN_TOKEN)
    assert sorted(expected["group_instance_ids"]) == [f"orders-{i}" for i in range(5)]


def test_a_deleted_pod_rejoins_as_itself_without_a_rebalance(stage: Stage) -> None:
    # A session timeout no restart on a loaded test machine outlasts: this is about the rejoin, not the sizing.
    stage.apply(fleet_body("orders", 3, stage.group, sessionTimeout={"policy": "Fixed", "fixedMs": 60_000}))
    before = stage.ready_and_stable(3)
    seen = len(stage.journal())
    starts = stage.kubelet.started.count("orders-1")
    stage.kubectl("delete", "pod", "orders-1", "--wait=true")
    wait_until(
        lambda: stage.kubelet.started.count("orders-1") > starts,
        f"orders-1 started again (member starts so far: {stage.kubelet.started})",
    )
    replaced = wait_until(
        lambda: [e for e in stage.journal()[seen:] if e["type"] == "static_member_replaced"], "the static rejoin"
    )
    assert [(e["group_instance_id"], e["rebalance"]) for e in replaced] == [("orders-1", False)]
    assert rebalances(events := stage.journal()[seen:]) == [], events
    assert stage.describe()["generation_id"] == before["generation_id"]


def test_deleting_a_fleet_leaves_everyone_deletes_the_group_and_its_statefulset_is_collected(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 2, stage.group))
    stage.ready_and_stable(2)
    stage.kubectl("delete", "cf", "orders", "--wait=false")
    wait_until(lambda: stage.get("cf", "orders") is None, "the fleet released")
    events = stage.journal()
    assert admin_leaves(events) == [["orders-0", "orders-1"]]
    assert events[-1]["type"] == "group_deleted"
    assert stage.describe()["group_state"] == "Dead"
    # The garbage collector removes what the fleet owned.
    wait_until(lambda: stage.get("statefulset", "orders") is None, "the StatefulSet collected")
    wait_until(lambda: stage.get("service", "orders") is None, "the Service collected")
    # A released fleet's metrics go with it (bounded cardinality).
    assert stage.metric("berth_operator_fleet_ready") is None


def test_refused_fleets_say_why_in_status_columns_and_warning_events(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 1, stage.group))
    stage.ready_and_stable(1)
    stage.apply(
        fleet_body("copycat", 1, stage.group),
        # Below the coordinator's 6 s minimum: the CRD cannot know the coordinator's bounds, the operator does.
        fleet_body("hasty", 1, f"{stage.group}-hasty", sessionTimeout={"policy": "Fixed", "fixedMs": 1000}),
    )
    for name, reason in (("copycat", "GroupIdInUse"), ("hasty", "InvalidSessionTimeout")):
        ready = wait_until(lambda n=name: (c := stage.condition("Ready", n)).get("reason") and c, f"{name} refused")
        assert (ready["status"], ready["reason"]) == ("False", reason), ready
        assert stage.condition("SpecValid", name)["status"] == "False"
        warnings = wait_until(lambda n=name, r=reason: stage.events(r, n), f"{name}'s Warning Event")
        assert warnings[0]["type"] == "Warning", warnings
        assert stage.get("statefulset", name) is None
    table = stage.kubectl("get", "cf")
    assert "GroupIdInUse" in table and "InvalidSessionTimeout" in table
    described = stage.kubectl("describe", "cf", "copycat")
    assert "GroupIdInUse" in described and f"group {stage.group} on" in described
    # The holder is untouched.
    assert stage.members() == {"orders-0"}
