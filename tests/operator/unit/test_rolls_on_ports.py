"""The roll step (``reconcile.rolls``) in real passes over in-memory ports: with one turn, of two fleets whose pod
templates changed together the second waits — its StatefulSet left as it was, its pods' session timeout kept in
status, ``TemplateApplied=False`` with its place in line and one ``RollQueued`` Event — until the first's roll ends;
then its template is applied and the condition turns True. A new fleet and a resize take no turn."""

from __future__ import annotations

import copy
import dataclasses
from datetime import datetime
from typing import Any

import pytest
from fake_ports import InMemoryCoordinator, NamesFleet, RecordedEvents, pass_context
from test_fleet_pass_on_ports import BERTH_DEFAULTS, FleetBody

from berth.operator.local.demo_support import InMemoryStatus
from berth.operator.planners.claims import ListedClaims
from berth.operator.planners.coordinator_kind import BERTH
from berth.operator.planners.manifest_hash import planned_hash
from berth.operator.planners.observations import CoordinatorBounds
from berth.operator.planners.roll_pacing import RollPacer
from berth.operator.ports import CoordinatorPort, CoordinatorUnavailable
from berth.operator.reconcile.fleet_pass import FleetPass
from berth.operator.reconcile.memory import FleetMemory


class Fleet:
    def __init__(self, body: dict[str, Any], pacer: RollPacer, now: datetime) -> None:
        self.body = body
        self.workload = NamesFleet(body["metadata"]["name"])
        self.coordinator = InMemoryCoordinator(BERTH)
        self.status = InMemoryStatus()
        self.events = RecordedEvents()
        self.context = pass_context(
            workload=self.workload,
            coordinator=self.coordinator,
            status=self.status,
            events=self.events,
            defaults=BERTH_DEFAULTS,
            now=now,
            rolls=pacer,
        )
        self.memory = FleetMemory()

    async def run(self) -> None:
        await FleetPass(
            self.context, {**self.body, "status": dict(self.status.status)}, ListedClaims(lambda key: ()), self.memory
        ).run()
        self.coordinator.members[self.body["metadata"]["name"]] = set(self.workload.members)

    def new_template(self, version: str) -> None:
        template = copy.deepcopy(self.body["spec"]["template"])
        template.setdefault("metadata", {}).setdefault("annotations", {})["example.com/version"] = version
        self.body["spec"]["template"] = template

    def applied(self) -> str | None:
        planned = self.workload.planned
        annotations = planned.statefulset["spec"]["template"]["metadata"].get("annotations", {}) if planned else {}
        return annotations.get("example.com/version")

    def condition(self, kind: str) -> dict[str, Any] | None:
        return next((c for c in self.status.status.get("conditions", []) if c["type"] == kind), None)


async def test_with_one_turn_the_second_changed_template_waits_until_the_first_roll_ends(
    fleet_body: FleetBody, now: datetime
) -> None:
    pacer = RollPacer(1)
    first = Fleet(fleet_body("billing", spec={"replicas": 2}), pacer, now)
    second = Fleet(fleet_body("orders", spec={"replicas": 2}), pacer, now)
    for fleet in (first, second):
        await fleet.run()  # created: no turn taken
        await fleet.run()
        assert fleet.condition("TemplateApplied") is None
    timeout_before = second.status.status["sessionTimeoutMs"]

    first.new_template("2")
    second.new_template("2")
    await first.run()
    await second.run()

    assert first.applied() == "2" and second.applied() is None  # the second StatefulSet is as it was
    condition = second.condition("TemplateApplied")
    assert condition is not None and (condition["status"], condition["reason"]) == ("False", "RollQueued")
    assert "1 of at most 1 fleets are rolling" in condition["message"]
    assert "number 1 in line" in condition["message"]
    assert second.status.status["sessionTimeoutMs"] == timeout_before
    await second.run()  # asked again while the first rolls: still waiting, and no second Event
    assert [r for r in second.events.reasons() if r == "RollQueued"] == ["RollQueued"]

    # The first fleet's StatefulSet shows its roll, then its end: the turn is offered to the second.
    offered: list[tuple[str, str]] = []
    pacer.on_offer = offered.extend
    pacer.observed(("shop", "billing"), True, ("rev-2", 0), now.timestamp())
    pacer.observed(("shop", "billing"), False, ("rev-2", 2), now.timestamp())
    assert offered == [("shop", "orders")]
    await second.run()

    assert second.applied() == "2"
    condition = second.condition("TemplateApplied")
    assert condition is not None and (condition["status"], condition["reason"]) == ("True", "Applied")


async def test_a_resize_takes_no_turn(fleet_body: FleetBody, now: datetime) -> None:
    pacer = RollPacer(1)
    pacer.observed(("shop", "other"), True, ("rev-2", 0), now.timestamp())  # every turn taken
    fleet = Fleet(fleet_body("orders", spec={"replicas": 2}), pacer, now)
    await fleet.run()
    hash_before = planned_hash(fleet.workload.planned.statefulset) if fleet.workload.planned else None
    fleet.body["spec"]["replicas"] = 4
    await fleet.run()
    await fleet.run()
    assert fleet.workload.replicas == 4
    assert fleet.workload.planned is not None and planned_hash(fleet.workload.planned.statefulset) == hash_before
    assert fleet.condition("TemplateApplied") is None and pacer.waiting() == 0


class Unreachable:
    """A coordinator directory whose coordinator does not answer."""

    async def connect(self, endpoint: object) -> CoordinatorPort:
        raise CoordinatorUnavailable("connecting: refused")

    async def bounds_of(self, port: CoordinatorPort) -> CoordinatorBounds:
        raise CoordinatorUnavailable("bounds: refused")


async def test_a_fleet_offered_a_turn_whose_pass_ends_before_the_roll_step_passes_the_turn_on(
    fleet_body: FleetBody, now: datetime
) -> None:
    """Regression: a turn offered to the first in line waited for that fleet's pass to take it; a fleet whose
    coordinator stopped answering (or that was refused, or paused) never got that far, and every fleet behind it
    waited with it."""
    pacer = RollPacer(1)
    offered: list[tuple[str, str]] = []
    pacer.on_offer = offered.extend
    fleets = [Fleet(fleet_body(name, spec={"replicas": 2}), pacer, now) for name in ("billing", "orders", "audit")]
    for fleet in fleets:
        await fleet.run()
        fleet.new_template("2")
        await fleet.run()
    first, second, third = fleets
    assert (first.applied(), second.applied(), third.applied()) == ("2", None, None)

    pacer.observed(("shop", "billing"), True, ("rev-2", 0), now.timestamp())
    pacer.observed(("shop", "billing"), False, ("rev-2", 2), now.timestamp())
    assert offered == [("shop", "orders")]
    second.context = dataclasses.replace(
        second.context, ports=dataclasses.replace(second.context.ports, coordinators=Unreachable())
    )
    with pytest.raises(CoordinatorUnavailable):
        await second.run()

    assert offered == [("shop", "orders"), ("shop", "audit")]
    await third.run()
    assert third.applied() == "2" and second.applied() is None
