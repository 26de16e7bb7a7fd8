"""Status follows the coordinator within about a second, without polling every fleet hard: the operator follows each
coordinator's journal (one long-poll per coordinator) and runs a pass for the fleets whose groups changed.

This module's operator ticks only once a minute, so a status that catches up within seconds of a change that
Kubernetes never saw (an admin removing a member at the coordinator) can only come from the journal.
`python -m benchmarks status_lag` measures the lag itself, with and without following the journal.
"""

from __future__ import annotations

import pytest
from support.coordinator import coordinator_post
from support.fleet_stage import ADMIN_TOKEN, Stage, fleet_body
from support.kube import wait_until

pytestmark = [pytest.mark.kube, pytest.mark.slow]

OPERATOR_ARGS = ("--reconcile-interval-s", "60")


def test_a_change_only_the_coordinator_saw_reaches_status_without_waiting_for_the_timer(stage: Stage) -> None:
    stage.apply(fleet_body("orders", 2, stage.group))
    before = stage.ready_and_stable(2)["generation_id"]
    wait_until(lambda: stage.status().get("group", {}).get("generation") == before, "status at the generation")

    # Someone removes orders-1 at the coordinator: it rejoins at once (its process still runs), a new generation.
    leave = {"api_version": 5, "members": [{"member_id": "", "group_instance_id": "orders-1", "reason": "test"}]}
    coordinator_post(stage.coordinator, f"/v1/groups/{stage.group}/leave", leave, ADMIN_TOKEN)
    wait_until(
        lambda: stage.describe()["generation_id"] > before and stage.describe()["group_state"] == "Stable",
        "the coordinator's new generation",
    )
    generation = stage.describe()["generation_id"]
    # Well before the first timer tick (60 s): the journal woke a pass.
    wait_until(
        lambda: stage.status().get("group", {}).get("generation") == generation, "status to follow", timeout_s=20
    )
