"""The wrong signals of issue 30's outside review, each reproduced on the real pass over in-memory ports (or on the
planner that decided it) and held right: a restart burst charged with a scale's rebalances, a departed pod's
member (``leaveOnScaleDown: false``) reported as foreign and ``lastScaleDown.removed`` naming ids nobody removed, a
departed pod's expiry counted as a restart, and ``Created`` saying ``session timeout ? ms`` on a consumer-protocol
fleet. tests/signals checks the same signals against a real coordinator's journal and a real broker's group over
generated histories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fake_ports import InMemoryCoordinator
from test_fleet_pass_on_ports import BERTH_DEFAULTS, KAFKA_DEFAULTS, FleetBody, Stage

from berth.operator.planners.coordinator_kind import BERTH, KAFKA_CONSUMER
from berth.operator.planners.observations import GroupProtocol, PodTimes
from berth.operator.planners.restarts import NOTHING, activity_by_group, plan_restarts
from berth.operator.planners.scaling import BatchLeave, record_scale_down

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def journal(*events: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"group_id": "orders", "type": kind, **fields} for kind, fields in events]


def restarts_pass(status: dict[str, Any], taken: Any, at: datetime) -> tuple[dict[str, Any], Any]:
    """One pass of the restarts planner (a quiet, settled fleet): the status it leaves, and its Event or None."""
    plan = plan_restarts(
        status,
        taken,
        revision=None,
        rolling=False,
        quiet=True,
        last_started=None,
        settle=timedelta(seconds=30),
        now=at,
    )
    return {"restarts": {k: v for k, v in plan.patch["restarts"].items() if v is not None}}, plan.event


def test_a_restart_burst_is_not_charged_with_the_rebalances_of_a_scale_within_its_quiet_window() -> None:
    """The review's history: orders-1 deleted (back as itself, no rebalance), then within the quiet window a scale
    3 -> 2 -> 4 -> 3. Before: ``1 pod restarted statically, 3 rebalances``."""
    page = journal(
        ("static_member_replaced", {"group_instance_id": "orders-1", "rebalance": False}),
        ("member_left", {"group_instance_id": "orders-2", "via": "admin"}),  # 3 -> 2: the batch leave
        ("rebalance_started", {"cause": "member_left"}),
        ("member_joined", {"group_instance_id": "orders-2", "static": True}),  # 2 -> 4
        ("rebalance_started", {"cause": "new_member"}),
        ("member_joined", {"group_instance_id": "orders-3", "static": True}),
        ("member_left", {"group_instance_id": "orders-3", "via": "admin"}),  # 4 -> 3
        ("rebalance_started", {"cause": "member_left"}),
    )
    fleet = frozenset({"orders-0", "orders-1", "orders-2"})
    activity = activity_by_group(page)["orders"].of(fleet, fleet)
    status: dict[str, Any] = {}
    ended = None
    for at, taken in ((T0, activity), (T0 + timedelta(minutes=5), NOTHING)):
        status, event = restarts_pass(status, taken, at)
        ended = event or ended
    assert ended == ("Normal", "Restarted", "1 pod restarted statically, 0 rebalances")


def test_the_rebalances_a_restart_did_cause_are_still_charged_to_it() -> None:
    """orders-1 back after its session expired: its expiry and its return are two rebalances of its own."""
    page = journal(
        ("member_expired", {"group_instance_id": "orders-1", "phase": "session"}),
        ("rebalance_started", {"cause": "member_expired"}),
        ("member_joined", {"group_instance_id": "orders-3", "static": True}),  # a scale-up meanwhile
        ("rebalance_started", {"cause": "new_member"}),
    )
    later = journal(
        ("member_joined", {"group_instance_id": "orders-1", "static": True}),
        ("rebalance_started", {"cause": "new_member"}),
    )
    staying = frozenset({"orders-0", "orders-1", "orders-2", "orders-3"})
    status: dict[str, Any] = {}
    said = []
    for at, page_seen in ((T0, page), (T0 + timedelta(seconds=5), later), (T0 + timedelta(minutes=5), [])):
        taken = activity_by_group(page_seen).get("orders", NOTHING).of(staying, staying)
        status, event = restarts_pass(status, taken, at)
        said += [event] if event else []
    assert said == [
        (
            "Warning",
            "Restarted",
            "1 pod restart: 0 static, 1 not (back after the session timeout, or changed): 2 rebalances",
        )
    ]


async def test_a_departed_pods_expiry_is_no_restart(fleet_body: FleetBody, now: datetime) -> None:
    stage = Stage(fleet_body(spec={"leaveOnScaleDown": False}), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    await stage.converge(3)
    await stage.converge(2)
    # The journal tells of orders-2's member expiring: its pod is gone for good, nothing restarted.
    stage.memory.activity = activity_by_group(
        journal(
            ("member_expired", {"group_instance_id": "orders-2", "phase": "session"}),
            ("rebalance_started", {"cause": "member_expired"}),
        )
    )["orders"]
    await stage.run()
    stage.with_ports(now=lambda: now + timedelta(minutes=10))
    await stage.run()
    assert stage.status.status["restarts"]["expired"] == 0
    assert "ongoing" not in stage.status.status["restarts"]
    assert "Restarted" not in stage.events.reasons()


async def test_a_stalled_members_expiry_is_no_restart(fleet_body: FleetBody, now: datetime) -> None:
    """CI, seed 7 of tests/signals/test_kafka_histories.py: a starved client's member expired while its pod ran on,
    and ``status.restarts.expired`` counted it among the restarts. The journal now says how long a member was silent
    before it expired, and the pass counts the expiry only when the pod's process began after that."""
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    await stage.converge(3)
    started = now - timedelta(hours=1)
    stage.workload.times = {
        "orders-0": PodTimes(created=started, started=started),  # running since before its member went silent
        "orders-1": PodTimes(created=now - timedelta(seconds=20), started=now - timedelta(seconds=19)),  # replaced
        "orders-2": PodTimes(created=started, started=started),
    }
    at = ms(now)
    stage.memory.activity = activity_by_group(
        journal(
            (
                "member_expired",
                {"group_instance_id": "orders-0", "phase": "session", "ts_ms": at, "offline_ms": 30_000},
            ),
            ("rebalance_started", {"cause": "member_expired"}),
            (
                "member_expired",
                {"group_instance_id": "orders-1", "phase": "session", "ts_ms": at, "offline_ms": 30_000},
            ),
            ("rebalance_started", {"cause": "member_expired"}),
        )
    )["orders"]
    await stage.run()
    stage.with_ports(now=lambda: now + timedelta(minutes=10))
    await stage.run()
    assert stage.status.status["restarts"]["expired"] == 1
    assert [message for _, reason, message in stage.events.said if reason == "Restarted"] == [
        "1 pod restart: 0 static, 1 not (back after the session timeout, or changed): 1 rebalance"
    ]


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


async def test_on_kip848_a_departed_pod_left_to_expire_is_neither_foreign_nor_said_removed(
    fleet_body: FleetBody, now: datetime
) -> None:
    """The review's history: a consumer-protocol fleet with ``leaveOnScaleDown: false`` scaled 3 -> 2; the group
    keeps k848-2 until its session times out. Before: ``ForeignMembers ... 1 member this fleet did not create
    (k848-2)`` and ``lastScaleDown.removed: [k848-2]``."""
    body = fleet_body(
        "k848",
        spec={"leaveOnScaleDown": False, "coordinator": {"kafka": {"groupProtocol": "consumer"}}},
    )
    stage = Stage(body, InMemoryCoordinator(KAFKA_CONSUMER, GroupProtocol.CONSUMER), KAFKA_DEFAULTS, now)
    await stage.converge(3)
    stage.foreign = {"k848-2"}  # what the group still lists: the departed pod's member, until its session expires
    await stage.converge(2)
    await stage.run()

    status = stage.status.status
    assert "foreignMembers" not in status
    assert "ForeignMembers" not in stage.events.reasons()
    assert status["lastScaleDown"]["removed"] == [] and status["lastScaleDown"]["expiring"] == ["k848-2"]
    assert stage.coordinator.leaves == []
    # Its session expired: the group no longer lists it, and neither does lastScaleDown.
    stage.foreign = set()
    await stage.run()
    await stage.run()
    assert "expiring" not in stage.status.status["lastScaleDown"]
    # A member of that name that joins afterwards is not the fleet's: that one is foreign.
    stage.foreign = {"k848-2"}
    await stage.run()
    await stage.run()
    assert stage.status.status["foreignMembers"] == ["k848-2"]


async def test_created_names_the_session_timeout_of_a_consumer_protocol_fleet_set_on_its_group(
    fleet_body: FleetBody, now: datetime
) -> None:
    body = fleet_body("k848", spec={"coordinator": {"kafka": {"groupProtocol": "consumer"}}})
    stage = Stage(body, InMemoryCoordinator(KAFKA_CONSUMER, GroupProtocol.CONSUMER), KAFKA_DEFAULTS, now)
    await stage.converge(3)
    created = [message for _, reason, message in stage.events.said if reason == "Created"]
    timeout_ms = stage.status.status["sessionTimeoutMs"]
    assert created and f"session timeout {timeout_ms} ms, on the group" in created[0]
    assert not [message for _, _, message in stage.events.said if "?" in message]


async def test_a_scale_downs_record_says_nothing_of_the_one_before(fleet_body: FleetBody, now: datetime) -> None:
    """Found by tests/signals: ``lastScaleDown`` is written as a merge patch, so a second scale-down's ``results``
    still named the ids the first one removed (``removed: [orders-3]`` with ``results`` NONE for orders-3 and
    orders-4)."""
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    await stage.converge(5)
    await stage.converge(4)
    assert set(stage.status.status["lastScaleDown"]["results"]) == {"orders-4"}
    await stage.converge(3)
    assert set(stage.status.status["lastScaleDown"]["results"]) == {"orders-3"}


def test_removed_names_only_the_ids_the_leave_removed() -> None:
    """Found by tests/signals: a fleet scaled to 0 before its pods ever joined sent its leave and was answered
    UNKNOWN_MEMBER_ID for both: ``removed`` said both, though the journal shows no leave. Those depart no longer (not
    members), but nothing was removed, and no rebalance is counted from that leave."""
    leave = BatchLeave(("orders-0", "orders-1"), "2026-03-01T12:00:00Z", from_generation=4)
    results = {"orders-0": "UNKNOWN_MEMBER_ID", "orders-1": "UNKNOWN_MEMBER_ID"}
    record = record_scale_down(leave, results, now=T0 + timedelta(seconds=5)).patch
    assert record["departing"] == [] and record["lastScaleDown"]["removed"] == []
    assert record["lastScaleDown"]["fromGeneration"] is None
    mixed = record_scale_down(leave, {**results, "orders-1": "NONE"}, now=T0 + timedelta(seconds=5)).patch
    assert mixed["lastScaleDown"]["removed"] == ["orders-1"] and mixed["lastScaleDown"]["fromGeneration"] == 4
