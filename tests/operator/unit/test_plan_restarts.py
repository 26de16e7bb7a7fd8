"""Static restarts counted per fleet (planners.restarts): the journal's events counted per group, bursts of restarts
gathered into one Event each, rollouts told apart from pods restarted on their own, and nothing counted twice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from berth.operator.planners.observations import PodTimes
from berth.operator.planners.restarts import (
    NOTHING,
    RESTARTED,
    Expiry,
    GroupActivity,
    Rebalance,
    RestartsPlan,
    activity_by_group,
    charged,
    expired_by_restart,
    plan_restarts,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SETTLE = timedelta(seconds=20)
STATIC = GroupActivity(static=("orders-0",))


def replaced(group: str, instance: str, *, rebalance: bool = False) -> dict[str, Any]:
    return {"group_id": group, "type": "static_member_replaced", "group_instance_id": instance, "rebalance": rebalance}


def test_a_page_is_counted_per_group_and_every_group_of_the_page_is_named() -> None:
    events = [
        replaced("orders", "orders-2"),
        replaced("orders", "orders-1"),
        replaced("orders", "orders-0", rebalance=True),
        {"group_id": "orders", "type": "rebalance_started", "cause": "static_replacement"},
        {
            "group_id": "orders",
            "type": "member_expired",
            "group_instance_id": "orders-3",
            "phase": "session",
            "ts_ms": 50_000,
            "offline_ms": 10_000,
        },
        # A dynamic member's expiry, and an expiry in another phase, are not restarts of a static member.
        {"group_id": "orders", "type": "member_expired", "group_instance_id": None, "phase": "session"},
        {"group_id": "orders", "type": "member_expired", "group_instance_id": "orders-4", "phase": "sync"},
        {"group_id": "payments", "type": "member_joined", "group_instance_id": "payments-0", "static": True},
    ]
    assert activity_by_group(events) == {
        "orders": GroupActivity(
            static=("orders-2", "orders-1"),
            rebalancing=("orders-0",),
            expired=(Expiry("orders-3", heard_ms=40_000),),
            rebalances=(Rebalance("static_replacement", "orders-0"),),
        ),
        "payments": NOTHING,
    }
    assert activity_by_group(events)["orders"].restarts == 4


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def test_an_expiry_is_a_restarts_only_when_the_process_its_member_was_is_gone() -> None:
    heard = T0 + timedelta(minutes=5)
    expiry = Expiry("orders-1", heard_ms=ms(heard))
    # The pod still runs the process its member was heard from: a client that stalled, not a restart.
    assert not expired_by_restart(expiry, PodTimes(created=T0, started=T0))
    # Its container restarted after: running again, or waiting in a crash loop (its last end recorded).
    assert expired_by_restart(expiry, PodTimes(created=T0, started=heard + timedelta(seconds=3)))
    assert expired_by_restart(expiry, PodTimes(T0, started=T0, previous_ended=heard + timedelta(seconds=2)))
    # The pod replaced (created after), or running nothing now (gone, terminating, its node silent).
    assert expired_by_restart(expiry, PodTimes(created=heard + timedelta(seconds=1), started=heard))
    assert expired_by_restart(expiry, None)
    # Kubernetes' second: a start recorded up to 1 s before the member was last heard may have come after it.
    assert expired_by_restart(expiry, PodTimes(created=T0, started=heard - timedelta(milliseconds=900)))
    assert not expired_by_restart(expiry, PodTimes(created=T0, started=heard - timedelta(milliseconds=1_000)))
    # An event that does not say when its member was heard from counts, as it always did.
    assert expired_by_restart(Expiry("orders-1"), PodTimes(created=T0, started=T0))


def test_only_the_expiries_of_restarted_pods_that_stay_are_counted() -> None:
    heard = T0 + timedelta(minutes=5)
    activity = GroupActivity(
        expired=tuple(Expiry(f"orders-{o}", heard_ms=ms(heard)) for o in range(4)),
        rebalances=(Rebalance("member_expired", "orders-0"), Rebalance("member_expired", "orders-1")),
    )
    running = {
        "orders-0": PodTimes(created=T0, started=T0),  # stalled
        "orders-1": PodTimes(created=heard + timedelta(seconds=2), started=heard + timedelta(seconds=4)),  # replaced
        "orders-3": PodTimes(created=T0, started=T0),
    }
    # orders-2 runs nothing now; orders-3 departs.
    kept = activity.of({"orders-0", "orders-1", "orders-2", "orders-3"}, {"orders-0", "orders-1", "orders-2"}, running)
    assert [e.instance_id for e in kept.expired] == ["orders-1", "orders-2"]
    # The stalled member's expiry is charged to no burst; the replaced pod's is.
    assert charged(kept, ()) == 1


class Fleet:
    """A fleet's status across passes, as the operator's status step keeps it."""

    def __init__(self, revision: str = "orders-r1") -> None:
        self.status: dict[str, Any] = {}
        self.revision = revision
        self.events: list[tuple[str, str, str]] = []
        self.static = 0
        self.rolls = 0

    def pass_(
        self,
        at: datetime,
        activity: GroupActivity = NOTHING,
        *,
        rolling: bool = False,
        quiet: bool = True,
        last_started: datetime | None = None,
        evicted: bool = False,
    ) -> RestartsPlan:
        plan = plan_restarts(
            self.status,
            activity,
            revision=self.revision,
            rolling=rolling,
            quiet=quiet,
            last_started=last_started,
            settle=SETTLE,
            now=at,
            evicted=evicted,
        )
        block = {k: v for k, v in plan.patch["restarts"].items() if v is not None}  # a merge patch's null removes
        self.status = {"restarts": block}
        if plan.event:
            self.events.append(plan.event)
        self.static += plan.static
        self.rolls += plan.rolls
        return plan

    @property
    def restarts(self) -> dict[str, Any]:
        block: dict[str, Any] = self.status["restarts"]
        return block


def seconds(n: float) -> datetime:
    return T0 + timedelta(seconds=n)


def test_a_rollout_is_one_event_once_the_fleet_has_been_quiet_for_a_session_timeout() -> None:
    fleet = Fleet()
    fleet.pass_(seconds(0))  # a fleet at rest: its totals at 0, its revision recorded
    assert fleet.restarts == {"static": 0, "rebalancing": 0, "expired": 0, "rolls": 0, "revision": "orders-r1"}
    fleet.revision = "orders-r2"  # kubectl rollout restart
    fleet.pass_(seconds(1), STATIC, rolling=True, quiet=False, last_started=seconds(1))
    fleet.pass_(seconds(5), STATIC, rolling=True, quiet=False, last_started=seconds(5))
    assert fleet.restarts["ongoing"]["restarts"] == 2 and fleet.restarts["static"] == 2
    fleet.pass_(seconds(9), STATIC, quiet=True, last_started=seconds(8))
    # Quiet, but within a session timeout of the last restart: a member may not be back yet.
    fleet.pass_(seconds(20), quiet=True, last_started=seconds(8))
    assert fleet.events == [] and fleet.restarts["ongoing"]["restarts"] == 3
    fleet.pass_(seconds(29), quiet=True, last_started=seconds(8))
    assert fleet.events == [("Normal", RESTARTED, "3 pods restarted statically (rollout), 0 rebalances")]
    assert "ongoing" not in fleet.restarts
    assert fleet.restarts["last"] == {
        "restarts": 3,
        "static": 3,
        "rebalances": 0,
        "cause": "rollout",
        "since": "2026-03-01T12:00:01Z",
        "until": "2026-03-01T12:00:09Z",
        "seconds": 8,
    }
    assert (fleet.restarts["static"], fleet.restarts["rolls"], fleet.restarts["revision"]) == (3, 1, "orders-r2")
    assert (fleet.static, fleet.rolls) == (3, 1)
    # Nothing is announced or counted again.
    fleet.pass_(seconds(60))
    assert len(fleet.events) == 1 and (fleet.static, fleet.rolls) == (3, 1)


def test_a_roll_no_pass_saw_in_progress_is_a_rollout_by_its_new_revision() -> None:
    fleet = Fleet()
    fleet.pass_(seconds(0))
    fleet.revision = "orders-r2"  # a one-pod fleet rolled between two passes
    fleet.pass_(seconds(3), STATIC, last_started=seconds(2))
    # A pass after the pod started but before its member was back does not move the recorded revision...
    assert fleet.restarts["revision"] == "orders-r1"
    fleet.pass_(seconds(30), last_started=seconds(2))
    assert fleet.events[0][2] == "1 pod restarted statically (rollout), 0 rebalances"


def test_the_revision_is_recorded_only_once_pods_have_settled() -> None:
    fleet = Fleet()
    fleet.pass_(seconds(0), last_started=seconds(-60))
    fleet.revision = "orders-r2"
    fleet.pass_(seconds(2), last_started=seconds(1))  # rolled, members not back yet, nothing counted
    assert fleet.restarts["revision"] == "orders-r1"
    fleet.pass_(seconds(3), STATIC, last_started=seconds(1))
    fleet.pass_(seconds(40), last_started=seconds(1))
    assert fleet.events[0][2] == "1 pod restarted statically (rollout), 0 rebalances"


def test_pods_restarted_outside_a_rollout_are_a_restart() -> None:
    fleet = Fleet()
    fleet.pass_(seconds(0))
    fleet.pass_(seconds(4), GroupActivity(static=("orders-0", "orders-1")), quiet=False, last_started=seconds(3))
    fleet.pass_(seconds(30), last_started=seconds(3))
    assert fleet.events == [("Normal", RESTARTED, "2 pods restarted statically, 0 rebalances")]
    assert (fleet.restarts["last"]["cause"], fleet.rolls) == ("restart", 0)


def test_pods_a_pass_saw_evicted_are_an_eviction() -> None:
    """A drain: a pass sees a pod being evicted (before its member is back), which opens the burst; the pods come
    back as themselves."""
    fleet = Fleet()
    fleet.pass_(seconds(0))
    fleet.pass_(seconds(1), quiet=False, evicted=True)
    assert fleet.restarts["ongoing"]["eviction"] is True
    fleet.pass_(seconds(4), GroupActivity(static=("orders-0", "orders-1")), quiet=False, last_started=seconds(3))
    fleet.pass_(seconds(30), last_started=seconds(3))
    assert fleet.events == [("Normal", RESTARTED, "2 pods restarted statically (eviction), 0 rebalances")]
    assert fleet.restarts["last"]["cause"] == "eviction"


def test_a_burst_that_cost_rebalances_is_a_warning_saying_how_many_restarts_were_not_static() -> None:
    fleet = Fleet()
    fleet.pass_(seconds(0))
    restarts = GroupActivity(
        static=("orders-0", "orders-1"),
        expired=(Expiry("orders-2"),),
        # orders-2's expiry, and its return afterwards.
        rebalances=(Rebalance("member_expired", "orders-2"), Rebalance("new_member", "orders-2")),
    )
    fleet.pass_(seconds(2), restarts, quiet=False)
    fleet.pass_(seconds(40))
    assert fleet.events == [
        (
            "Warning",
            RESTARTED,
            "3 pod restarts: 2 static, 1 not (back after the session timeout, or changed): 2 rebalances",
        )
    ]
    assert (fleet.restarts["static"], fleet.restarts["expired"]) == (2, 1)


def test_a_burst_stays_open_while_the_fleet_is_not_quiet_or_still_rolling() -> None:
    fleet = Fleet()
    fleet.pass_(seconds(0))
    fleet.pass_(seconds(1), STATIC, quiet=False)
    fleet.pass_(seconds(100), quiet=False)  # a pod crash-looping: still not Ready
    fleet.pass_(seconds(200), rolling=True)  # a partitioned roll still under way
    assert fleet.events == [] and fleet.restarts["ongoing"]["rollout"] is True
    fleet.pass_(seconds(300))
    assert fleet.events[0][2] == "1 pod restarted statically (rollout), 0 rebalances"


def test_what_only_time_ends_names_when_and_a_pass_then_ends_it() -> None:
    """No watched change announces a session timeout passing: the plan says when to look again."""
    fleet = Fleet()
    assert fleet.pass_(seconds(0)).due is None  # at rest: nothing open
    # Not quiet: what makes it quiet announces itself (a pod Ready, the group settling); a backstop meanwhile.
    assert fleet.pass_(seconds(4), STATIC, quiet=False, last_started=seconds(3)).due == seconds(4) + SETTLE
    # Quiet: the burst ends a session timeout after the last restart and the last start, and not before.
    assert fleet.pass_(seconds(6), quiet=True, last_started=seconds(5)).due == seconds(5) + SETTLE
    assert fleet.pass_(seconds(5) + SETTLE, quiet=True, last_started=seconds(5)).due is None
    assert fleet.events == [("Normal", RESTARTED, "1 pod restarted statically, 0 rebalances")]
    # A new revision with no restart counted yet: it is recorded once its pods have settled.
    fleet.revision = "orders-r2"
    at = seconds(100)
    assert fleet.pass_(at, last_started=at - timedelta(seconds=1)).due == at - timedelta(seconds=1) + SETTLE
    assert fleet.pass_(at + SETTLE, last_started=at - timedelta(seconds=1)).due is None
    assert fleet.restarts["revision"] == "orders-r2"


def test_a_rollout_whose_restarts_went_uncounted_says_nothing() -> None:
    fleet = Fleet()
    fleet.pass_(seconds(0), rolling=True, quiet=False)  # the operator started mid-roll: the journal from now on
    fleet.pass_(seconds(60))
    assert fleet.events == [] and "last" not in fleet.restarts and fleet.restarts["rolls"] == 0


def test_a_hand_edited_block_is_read_as_far_as_it_makes_sense() -> None:
    fleet = Fleet()
    fleet.status = {"restarts": {"static": "many", "rolls": -3, "ongoing": "yes", "revision": 7}}
    fleet.pass_(seconds(0), STATIC, quiet=False)
    assert (fleet.restarts["static"], fleet.restarts["rolls"]) == (1, 0)
    assert fleet.restarts["ongoing"]["restarts"] == 1
