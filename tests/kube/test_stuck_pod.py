"""A departing pod stuck Terminating (its node gone) holds the batch leave for a bounded time only, on the real
operator and control plane: past its grace period plus ``--stuck-terminating-s``, and once the group no longer lists
its member (its session expired: the pod does not run as a member; Berth never removes a member whose pod may still
run), it leaves, with a Warning Event, and the departing pod held up behind it (OrderedReady) leaves in a second
batch once it is gone."""

from __future__ import annotations

import pytest
from support.fleet_stage import Stage, admin_leaves, fleet_body
from support.kube import wait_until

pytestmark = [pytest.mark.kube, pytest.mark.slow]

#: This module's operator waits 2 s past a pod's grace period (the fleets' grace period is 5 s).
OPERATOR_ARGS = ("--stuck-terminating-s", "2")


def test_a_stuck_pod_leaves_after_its_allowance_and_the_one_behind_it_after_that(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 4, stage.group))
    stage.ready_and_stable(4)
    stage.kubelet.hold("orders-3")  # its "node" never confirms the deletion
    stage.kubectl("scale", "cf/orders", "--replicas=2")
    wait_until(lambda: stage.terminating("orders-3"), "orders-3 Terminating")
    warning = wait_until(lambda: stage.events("PodStuckTerminating"), "the Warning Event", timeout_s=60)
    assert (
        warning[0]["type"] == "Warning" and "orders-3 still Terminating past its grace period" in warning[0]["message"]
    )
    # Its member had expired by then (its process stopped with the pod): the leave found nobody, as it should.
    assert "orders-3" not in stage.members()
    expired = [e for e in stage.journal() if e["type"] == "member_expired"]
    assert [e["group_instance_id"] for e in expired] == ["orders-3"]
    assert stage.status()["lastScaleDown"]["results"] == {"orders-3": "UNKNOWN_MEMBER_ID"}
    assert admin_leaves(stage.journal()) == []
    # orders-2 is still running (the StatefulSet waits for orders-3 before it deletes orders-2): it has not left.
    assert stage.status()["departing"] == ["orders-2"]
    assert "orders-2" in stage.members()

    stage.kubelet.release()  # the node comes back: orders-3 goes, then the StatefulSet deletes orders-2
    wait_until(lambda: stage.status().get("departing") == [], "orders-2 left too", timeout_s=60)
    assert admin_leaves(stage.journal()) == [["orders-2"]]
    stage.ready_and_stable(2)
