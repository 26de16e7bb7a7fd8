"""The scaling planner against a simulated fleet, over interleaved scale changes, pod churn and operator crashes.

A Hypothesis state machine plays the StatefulSet controller (OrderedReady: one pod at a time, highest ordinal
first on the way down), the coordinator (static members join when their pod starts and stay until left or
expired), and an operator that plans, executes a plan's actions in order, and may crash after any of them. The
driver writes a BatchLeave's result in the same step as the leave (the real driver's window between the two is
covered by UNKNOWN_MEMBER_ID meaning "already left"). Invariants, checked as the actions execute:

- at most one leave per departure of an id, never for a pod that exists or that the StatefulSet would recreate
  (its controller acts on the size it last saw, lagging behind the spec), and always exactly the ids recorded as
  departing;
- expected members are widened before any scale-up and narrowed before any scale-down, and departing ids are
  recorded before the StatefulSet shrinks;
- after a plan ran to the end, ``departing`` holds exactly ids beyond the desired size not yet left, and every
  pod (and, with leaveOnScaleDown, every member the operator has a record of) beyond the desired size is among them;
- someone may also scale the StatefulSet directly: the members of pods its controller then removes are no longer
  provably the fleet's (the operator never leaves a member from the group's list alone), so they are left to
  their sessions, which expire;
- left alone, the fleet converges: the desired size, no departures, the right expected members, no member
  beyond the fleet; a deleted fleet ends with no pods, no members and no group.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from berth.operator.planners.instances import instance_ids, ordinal_of
from berth.operator.planners.scaling import (
    Action,
    BatchLeave,
    ClearExpectedMembers,
    DeleteGroup,
    PatchStatus,
    PutExpectedMembers,
    ScaleWorkload,
    ScalingObservation,
    ScalingPlan,
    ScalingStatus,
    plan_scaling,
    record_scale_down,
)

FLEET = "f"
MAX_REPLICAS = 6


def ordinal(name: str) -> int:
    value = ordinal_of(FLEET, name)
    assert value is not None, name
    return value


class FleetWorld(RuleBasedStateMachine):
    @initialize(
        replicas=st.integers(0, MAX_REPLICAS),
        pre_register=st.booleans(),
        leave_on_scale_down=st.booleans(),
        already_running=st.booleans(),
    )
    def create_fleet(self, replicas: int, pre_register: bool, leave_on_scale_down: bool, already_running: bool) -> None:
        self.desired = replicas
        self.pre_register = pre_register
        self.leave_on_scale_down = leave_on_scale_down
        self.statefulset: int | None = 0  # the handler applies it at 0 replicas; the planner grows it
        self.controller_size = 0  # the size the StatefulSet controller last saw: it acts on that, lagging behind
        self.pods: set[int] = set()
        self.members: set[str] = set()
        self.expected: tuple[str, ...] = ()
        self.group_deleted = False
        self.status: dict[str, Any] = {}
        self.deleting = False
        self.finalized = False
        self.tampered = False
        self.kept_for_foreign = False  # the deletion kept the group: members the fleet has no record of were in it
        self.now = datetime(2026, 3, 1, tzinfo=UTC)
        # Ids left since they last became wanted or started: a second leave in one departure is a bug.
        self.left_this_departure: set[str] = set()
        if already_running:  # a settled fleet, as an earlier operator left it: the interesting states come sooner
            self.statefulset = self.controller_size = replicas
            for pod in range(replicas):
                self.start_pod(pod)
            self.expected = instance_ids(FLEET, replicas) if pre_register else ()
            self.status = {"departing": [], "departingSince": None, "expectedMembers": list(self.expected)}

    # --- the world moves -------------------------------------------------------------------------------------

    @rule(replicas=st.integers(0, MAX_REPLICAS))
    def user_scales(self, replicas: int) -> None:
        if not self.deleting:
            self.desired = replicas
            self.left_this_departure -= set(instance_ids(FLEET, replicas))

    @rule()
    def user_deletes_the_fleet(self) -> None:
        self.deleting = True

    @rule(sees_the_latest_spec=st.booleans(), pods_changed=st.integers(1, 3))
    def statefulset_controller_acts(self, sees_the_latest_spec: bool = True, pods_changed: int = 1) -> None:
        if sees_the_latest_spec:
            self.controller_size = self.statefulset or 0
        for _ in range(pods_changed):
            beyond = [o for o in self.pods if o >= self.controller_size]
            if beyond:
                self.pods.remove(max(beyond))  # highest ordinal first
            elif missing := [o for o in range(self.controller_size) if o not in self.pods]:
                self.start_pod(min(missing))

    @rule(replicas=st.integers(0, MAX_REPLICAS))
    def someone_scales_the_statefulset_behind_the_operators_back(self, replicas: int) -> None:
        if self.statefulset is not None and not self.finalized:
            self.statefulset = replicas
            self.tampered = True  # from now on only a describe tells the operator of every member
            self.left_this_departure -= set(instance_ids(FLEET, replicas))  # wanted again: a new departure may follow

    @rule(data=st.data())
    def a_pod_restarts(self, data: st.DataObject) -> None:
        if self.pods:
            self.pods.remove(data.draw(st.sampled_from(sorted(self.pods))))

    @rule()
    def sessions_of_absent_members_expire(self) -> None:
        self.members = {m for m in self.members if ordinal(m) in self.pods}

    def start_pod(self, pod: int) -> None:
        self.pods.add(pod)
        name = f"{FLEET}-{pod}"
        self.members.add(name)  # a static member joins under its pod name
        self.group_deleted = False
        self.left_this_departure.discard(name)

    # --- the operator ------------------------------------------------------------------------------------------

    @rule(crash_after=st.none() | st.integers(0, 4), describe=st.booleans(), seconds=st.integers(0, 90))
    def operator_reconciles(self, crash_after: int | None, describe: bool, seconds: int) -> None:
        self.reconcile(crash_after, describe, seconds)

    def reconcile(self, crash_after: int | None, describe: bool, seconds: int) -> ScalingPlan | None:
        if self.finalized:
            return None
        self.now += timedelta(seconds=seconds)
        self.planned_statefulset = self.statefulset or 0  # its size when this plan was made
        plan = plan_scaling(
            ScalingObservation(
                fleet_name=FLEET,
                desired_replicas=self.desired,
                workload_replicas=self.statefulset,
                workload_settled=self.controller_size == (self.statefulset or 0),
                existing_pods=frozenset(f"{FLEET}-{o}" for o in self.pods),
                status=ScalingStatus.from_status(self.status),
                pre_register=self.pre_register,
                leave_on_scale_down=self.leave_on_scale_down,
                deleting=self.deleting,
                group_members=frozenset(self.members) if describe else None,
            ),
            now=self.now,
        )
        actions = plan.actions if crash_after is None else plan.actions[:crash_after]
        completed = all(self.execute(action) for action in actions)
        if crash_after is None and completed:
            self.check_after_a_whole_plan(knows_every_member=not self.tampered)
            if self.deleting and plan.done:
                # The handler removes the finalizer; Kubernetes then collects the StatefulSet the fleet owned.
                self.finalized = True
                self.kept_for_foreign = bool(plan.foreign_members)
                self.statefulset, self.controller_size = None, 0
        return plan

    def execute(self, action: Action) -> bool:
        """Run one action as the driver would; False when it failed (the driver stops there)."""
        if isinstance(action, PatchStatus):
            self.status.update(action.patch)
        elif isinstance(action, PutExpectedMembers):
            self.expected = action.instance_ids
            self.group_deleted = False
        elif isinstance(action, ClearExpectedMembers):
            self.expected = ()
        elif isinstance(action, ScaleWorkload):
            self.check_scale(action.replicas)
            self.statefulset = action.replicas
        elif isinstance(action, BatchLeave):
            self.check_leave(action)
            results = {name: "NONE" if name in self.members else "UNKNOWN_MEMBER_ID" for name in action.instance_ids}
            self.members -= set(action.instance_ids)
            self.left_this_departure |= set(action.instance_ids)
            self.status.update(record_scale_down(action, results, now=self.now).patch)
        elif isinstance(action, DeleteGroup):
            if self.members:
                return False  # NON_EMPTY_GROUP: retried on a later reconcile
            self.group_deleted = True
            self.expected = ()
        return True

    # --- invariants --------------------------------------------------------------------------------------------

    def check_scale(self, replicas: int) -> None:
        current = self.statefulset or 0
        wanted = set(instance_ids(FLEET, replicas))
        if replicas > current and self.pre_register and not self.deleting:
            assert wanted <= set(self.expected), f"grew to {replicas} before pre-registering: {self.expected}"
        if replicas < current:
            leaving = {f"{FLEET}-{o}" for o in range(replicas, current)}
            assert leaving <= set(self.status.get("departing", [])), "shrank before recording the departures"
            assert set(self.expected) <= wanted, f"shrank to {replicas} with expected members {self.expected}"

    def check_leave(self, leave: BatchLeave) -> None:
        assert leave.instance_ids, "an empty leave"
        desired = 0 if self.deleting else self.desired
        recorded = [n for n in self.status.get("departing", []) if ordinal(n) >= desired]
        assert list(leave.instance_ids) == recorded, "left ids not recorded as departing"
        assert all(ordinal(name) >= desired for name in leave.instance_ids), "left an id within the desired size"
        for name in leave.instance_ids:
            assert ordinal(name) not in self.pods, f"left {name} while its pod exists"
            would_recreate = max(self.statefulset or 0, self.controller_size)
            assert ordinal(name) >= would_recreate, f"left {name}, which the StatefulSet would recreate"
            assert name not in self.left_this_departure, f"left {name} twice in one departure"

    def check_after_a_whole_plan(self, *, knows_every_member: bool) -> None:
        desired = 0 if self.deleting else self.desired
        departing = self.status.get("departing", [])
        assert departing == sorted(set(departing), key=ordinal), departing
        # An id within the desired size stays recorded only while the StatefulSet has not grown back to it (a scale
        # back up cancelled its departure): it is never left (check_leave) and goes once the StatefulSet covers it.
        assert all(ordinal(name) >= min(desired, self.planned_statefulset) for name in departing), departing
        assert not set(departing) & self.left_this_departure, "an id stays departing after its leave"
        assert {f"{FLEET}-{o}" for o in self.pods if o >= desired} <= set(departing)
        if knows_every_member and (self.leave_on_scale_down or self.deleting):
            # Only members recorded without a leave (leaveOnScaleDown false) may linger beyond the fleet.
            beyond = {m for m in self.members if ordinal(m) >= desired}
            assert beyond <= set(departing) | self.lingering_without_leave(), beyond
        assert (self.status.get("departingSince") is None) == (not [n for n in departing if ordinal(n) >= desired])

    def lingering_without_leave(self) -> set[str]:
        # Scale-downs recorded while leaveOnScaleDown was false leave members to expire on their own.
        return set() if self.leave_on_scale_down else set(self.members)

    def teardown(self) -> None:
        if not hasattr(self, "desired"):
            return
        # Left alone (no more changes, no crashes, the coordinator described), the fleet converges; members the
        # operator has no record of (after tampering) are not left by it: their sessions expire.
        for _ in range(4 * MAX_REPLICAS + 4):
            self.statefulset_controller_acts(pods_changed=2 * MAX_REPLICAS + 2)
            if self.tampered:
                self.sessions_of_absent_members_expire()
            plan = self.reconcile(None, describe=True, seconds=5)
            if plan is None or (plan.done and self.settled()):
                break
        if self.deleting:
            # The group goes with the fleet, unless members the fleet has no record of (only tampering makes them
            # here: its own pods started and gone behind its back) were in it at the last pass: it is kept then.
            assert self.finalized and (self.group_deleted or self.kept_for_foreign), (self.members, self.status)
            assert self.tampered or not self.kept_for_foreign
            assert not self.pods and not self.members
            return
        assert self.statefulset == self.desired
        assert self.pods == set(range(self.desired))
        assert self.status.get("departing") in (None, [])
        assert set(self.expected) == (set(instance_ids(FLEET, self.desired)) if self.pre_register else set())
        if self.leave_on_scale_down:
            assert all(ordinal(m) < self.desired for m in self.members), self.members

    def settled(self) -> bool:
        return self.pods == set(range(self.statefulset or 0)) and not self.status.get("departing")


FleetWorld.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_the_scaling_planner_keeps_its_promises_under_interleaved_changes = FleetWorld.TestCase
