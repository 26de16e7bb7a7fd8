"""Ownership through a fleet's life on in-memory ports (issue 22, points 2-4 and 9): the real ``FleetPass`` with a
coordinator that refuses claims as Berth's does, the operator's own records of Kafka groups, and a fleet reader.

A group in use by consumers no fleet owns is taken only with the administrator's adoption, and even then its
members are never removed and the group is never deleted; another fleet's record refuses a fleet; a record whose
fleet is gone is reclaimed; every claim is released on deletion, whatever state the fleet was in, and after a
``groupId`` edit once the fleet's members are gone; the fleet bounds and volume-claim name collisions are refused
before anything is sent."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from fake_ports import Fleets, InMemoryCoordinator
from support.signal_lab import InMemoryRecords
from test_fleet_pass_on_ports import (
    BERTH_DEFAULTS,
    KAFKA_DEFAULTS,
    KAFKA_IDENTITY,
    KAFKA_SPEC,
    FleetBody,
    Stage,
)

from berth.operator.planners.claims import GroupClaim, census_keys, index_entries, volume_claim_keys
from berth.operator.planners.coordinator_kind import BERTH, KAFKA_CLASSIC
from berth.operator.planners.observations import GroupOwnerRef
from berth.operator.planners.ownership import AdoptionPolicy, parse_adoption_rule
from berth.operator.spec.fleet import parse_fleet

TEAM_A = GroupOwnerRef("team-a", "orders", "uid-of-team-a")
CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def kafka_stage(fleet_body: FleetBody, now: datetime, records: InMemoryRecords, **spec: object) -> Stage:
    body = fleet_body(spec={**KAFKA_SPEC, **spec})
    return Stage(body, InMemoryCoordinator(KAFKA_CLASSIC), KAFKA_DEFAULTS, now, records=records)


async def test_a_kafka_group_another_fleet_recorded_refuses_the_fleet_and_its_deletion_touches_nothing(
    fleet_body: FleetBody, now: datetime
) -> None:
    records = InMemoryRecords()
    records.records[(KAFKA_IDENTITY, "orders")] = TEAM_A
    stage = kafka_stage(fleet_body, now, records, replicas=0, deleteGroupOnDelete=True)
    stage.foreign = {"orders-0", "orders-1"}  # team A's running consumers
    stage.coordinator.members["orders"] = set(stage.foreign)

    result = await stage.run()

    assert result.refused and stage.workload.planned is None
    refused = stage.condition("SpecValid")
    assert (refused["reason"], refused["message"]) == (
        "GroupOwned",
        f"group orders on {KAFKA_IDENTITY} belongs to fleet team-a/orders: nothing is sent for this fleet while that"
        " one owns it",
    )
    stage.workload.replicas = 0
    assert await stage.finalize() is None
    assert stage.events.said[-1][1] == "Released" and "owned by fleet team-a/orders" in stage.events.said[-1][2]
    assert stage.coordinator.leaves == [] and stage.coordinator.members["orders"] == {"orders-0", "orders-1"}
    assert records.records == {(KAFKA_IDENTITY, "orders"): TEAM_A}


async def test_a_group_in_use_is_adopted_only_as_the_administrator_decided_and_its_members_are_never_removed(
    fleet_body: FleetBody, now: datetime
) -> None:
    """The issue's fleet with replicas 0 that removed another team's plain consumers 314 times in 43 s and deleted
    their group on deletion: refused without the administrator's adoption; adopted, it removes none of them and
    keeps the group."""
    records = InMemoryRecords()
    stage = kafka_stage(fleet_body, now, records, replicas=0, deleteGroupOnDelete=True)
    stage.foreign = {"orders-0", "orders-1"}
    stage.coordinator.members["orders"] = set(stage.foreign)

    refused = await stage.run()

    assert refused.refused and stage.condition("SpecValid")["reason"] == "GroupInUse"
    assert "the administrator's decision (the operator's --adopt-groups" in stage.condition("SpecValid")["message"]
    assert records.records == {}

    stage.with_settings(adoption=AdoptionPolicy((parse_adoption_rule("shop=orders"),)))
    for _ in range(5):
        await stage.run()
    assert records.records == {(KAFKA_IDENTITY, "orders"): GroupOwnerRef("shop", "orders", stage.uid)}
    assert stage.coordinator.leaves == []  # zero removals, however many passes
    assert stage.status.status["foreignMembers"] == ["orders-0", "orders-1"]
    warnings = [message for kind, reason, message in stage.events.said if reason == "ForeignMembers"]
    assert len(warnings) == 1 and "2 members this fleet did not create (orders-0, orders-1)" in warnings[0]

    assert await stage.finalize() is None
    assert stage.coordinator.leaves == [] and stage.coordinator.members["orders"] == {"orders-0", "orders-1"}
    assert "it has members this fleet did not create" in stage.events.said[-1][2]
    assert records.records == {}  # the claim is released with the fleet


async def test_a_squatting_fleet_created_first_never_removes_the_consumers_that_come_later(
    fleet_body: FleetBody, now: datetime
) -> None:
    """Issue 22, point 4: a fleet created first (the group was vacant) claims it; the real team's consumers join
    with ids named like the fleet's pods; the fleet removes none of them (243 removals in ~40 s before)."""
    stage = Stage(fleet_body(spec={"replicas": 0}), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    await stage.run()
    assert stage.coordinator.owners["orders"].uid == stage.uid
    stage.foreign = {"orders-0", "orders-1", "orders-7"}
    for _ in range(5):
        await stage.run()
    assert stage.coordinator.leaves == []
    assert stage.status.status["foreignMembers"] == ["orders-0", "orders-1", "orders-7"]


async def test_a_record_whose_fleet_is_gone_is_reclaimed_and_one_whose_fleet_exists_is_not(
    fleet_body: FleetBody, now: datetime
) -> None:
    for stage in (
        kafka_stage(fleet_body, now, InMemoryRecords()),
        Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now),
    ):
        gone = GroupOwnerRef("shop", "orders", "uid-of-a-deleted-fleet")
        if stage.coordinator.kind is BERTH:
            stage.coordinator.owners["orders"] = gone
        else:
            assert stage.context.ports.records is not None
            await stage.context.ports.records.claim(KAFKA_IDENTITY, "orders", gone)
        stage.with_ports(fleets=Fleets(fleet_body(name="other")))  # shop/orders holds no fleet of that uid any more
        result = await stage.run()
        assert not result.refused, stage.status.status
        (reclaimed,) = [m for _, reason, m in stage.events.said if reason == "GroupReclaimed"]
        assert "uid-of-a-deleted-fleet" in reclaimed and "no longer exists" in reclaimed

    # Gone from this API server but with members in the group: perhaps a fleet of another cluster that shares the
    # coordinator, so never reclaimed.
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    stage.coordinator.owners["orders"] = TEAM_A
    stage.coordinator.members["orders"] = {"orders-0"}
    stage.with_ports(fleets=Fleets())
    assert (await stage.run()).refused and stage.condition("SpecValid")["reason"] == "GroupOwned"

    alive = TEAM_A
    stage = kafka_stage(fleet_body, now, InMemoryRecords())
    assert stage.context.ports.records is not None
    await stage.context.ports.records.claim(KAFKA_IDENTITY, "orders", alive)
    stage.with_ports(fleets=Fleets(fleet_body(name="orders", namespace="team-a", uid=alive.uid)))
    assert (await stage.run()).refused and stage.condition("SpecValid")["reason"] == "GroupOwned"


async def test_a_fleet_refused_after_its_claim_releases_it_on_deletion_and_its_successor_claims_again(
    fleet_body: FleetBody, now: datetime
) -> None:
    """Issue 22, point 4: a fleet refused after its claim kept the claim when deleted, and its re-creation was
    refused as owned by itself."""
    coordinator = InMemoryCoordinator(BERTH)
    refused_spec = {"sessionTimeout": {"policy": "Fixed", "fixedMs": 1_000}}  # below the coordinator's minimum
    stage = Stage(fleet_body(spec=refused_spec), coordinator, BERTH_DEFAULTS, now)
    assert (await stage.run()).refused and stage.condition("SpecValid")["reason"] == "InvalidSessionTimeout"
    assert coordinator.owners["orders"].uid == stage.uid  # claimed before the refusal

    assert await stage.finalize() is None
    assert "orders" not in coordinator.owners

    successor = Stage(fleet_body(uid="uid-of-the-successor"), coordinator, BERTH_DEFAULTS, now)
    assert not (await successor.run()).refused
    assert coordinator.owners["orders"].uid == "uid-of-the-successor"


async def test_a_groupid_edit_releases_the_old_claim_once_the_fleets_members_left_that_group(
    fleet_body: FleetBody, now: datetime
) -> None:
    coordinator = InMemoryCoordinator(BERTH)
    stage = Stage(fleet_body(), coordinator, BERTH_DEFAULTS, now)
    await stage.converge(2)
    stage.body["spec"]["groupId"] = "orders-v2"

    await stage.run()
    assert coordinator.owners["orders-v2"].uid == stage.uid
    assert coordinator.owners["orders"].uid == stage.uid  # its members (orders-0, orders-1) are still in it
    assert [g["groupId"] for g in stage.status.status["ownedGroups"]] == ["orders", "orders-v2"]

    coordinator.members["orders"] = set()  # the pods rolled onto orders-v2; their old memberships expired
    await stage.run()
    assert "orders" not in coordinator.owners
    assert [g["groupId"] for g in stage.status.status["ownedGroups"]] == ["orders-v2"]


async def test_fleets_beyond_the_operators_bounds_are_refused_newest_first(
    fleet_body: FleetBody, now: datetime
) -> None:
    bodies = [
        fleet_body(name=f"f{n}", uid=f"uid-{n}", creationTimestamp=f"2026-01-0{n + 1}T00:00:00Z") for n in range(3)
    ]
    census: dict[tuple[str, str], list[GroupClaim]] = {}
    for body in bodies:
        for key, claim in index_entries(body, BERTH_DEFAULTS).items():
            census.setdefault(key, []).append(claim)
    defaults = replace(BERTH_DEFAULTS, max_fleets=2)
    stages = [
        Stage(body, InMemoryCoordinator(BERTH), defaults, now, claims=lambda key: census.get(key, []))
        for body in bodies
    ]
    results = [await stage.run() for stage in stages]
    assert [r.refused for r in results] == [False, False, True]
    newest = stages[2].condition("SpecValid")
    assert newest["reason"] == "TooManyFleets"
    assert "the operator serves at most 2 fleets (--max-fleets)" in newest["message"]
    assert stages[2].workload.planned is None and stages[2].coordinator.owners == {}
    per_namespace = replace(BERTH_DEFAULTS, max_fleets_per_namespace=1)
    stage = Stage(bodies[1], InMemoryCoordinator(BERTH), per_namespace, now, claims=lambda key: census.get(key, []))
    assert (await stage.run()).refused and "in namespace shop (--max-fleets-per-namespace)" in (
        stage.condition("SpecValid")["message"]
    )
    assert census_keys("shop") == (("fleets", ""), ("fleets", "shop"))


async def test_two_fleets_whose_volume_claims_would_share_names_are_refused_the_newer_one(
    fleet_body: FleetBody, now: datetime
) -> None:
    """Issue 22, point 9: fleet a-b with claim template data and fleet b with template data-a: the StatefulSet
    controller names both fleets' claims data-a-b-<ordinal>, and their pods would share them."""
    older = fleet_body(
        name="a-b",
        uid="uid-ab",
        creationTimestamp="2026-01-01T00:00:00Z",
        spec={"groupId": "g1", "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": CLAIM_SPEC}]},
    )
    newer = fleet_body(
        name="b",
        uid="uid-b",
        creationTimestamp="2026-01-02T00:00:00Z",
        spec={"groupId": "g2", "volumeClaimTemplates": [{"metadata": {"name": "data-a"}, "spec": CLAIM_SPEC}]},
    )
    assert (
        volume_claim_keys(parse_fleet(older))
        == volume_claim_keys(parse_fleet(newer))
        == (("volume-claims/shop", "data-a-b"),)
    )
    index: dict[tuple[str, str], list[GroupClaim]] = {}
    for body in (older, newer):
        for key, claim in index_entries(body, BERTH_DEFAULTS).items():
            index.setdefault(key, []).append(claim)
    stage = Stage(newer, InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now, claims=lambda key: index.get(key, []))
    assert (await stage.run()).refused
    refused = stage.condition("SpecValid")
    assert refused["reason"] == "VolumeClaimNameTaken"
    assert "would be named data-a-b-<ordinal>, as fleet shop/a-b's are" in refused["message"]
    assert stage.workload.planned is None
    first = Stage(older, InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now, claims=lambda key: index.get(key, []))
    assert not (await first.run()).refused


async def test_an_empty_kafka_group_with_committed_offsets_is_in_use_and_an_adopted_one_is_never_deleted(
    fleet_body: FleetBody, now: datetime
) -> None:
    """Issue 30: team A's consumers all stopped, their offsets kept (an Empty group); another namespace's fleet with
    deleteGroupOnDelete claimed it and its deletion deleted the offsets (6 committed partitions -> GroupIdNotFound).
    Now it is in use, refused without adoption; adopted, the deletion keeps it: the fleet did not create it."""
    records = InMemoryRecords()
    stage = kafka_stage(fleet_body, now, records, replicas=0, deleteGroupOnDelete=True)
    stage.coordinator.committed["orders"] = 6

    refused = await stage.run()

    assert refused.refused and stage.condition("SpecValid")["reason"] == "GroupInUse"
    assert records.records == {}
    stage.workload.replicas = 0
    assert await stage.finalize() is None
    assert stage.coordinator.committed == {"orders": 6}

    adopting = kafka_stage(fleet_body, now, records, replicas=0, deleteGroupOnDelete=True)
    adopting.coordinator.committed["orders"] = 6
    adopting.with_settings(adoption=AdoptionPolicy((parse_adoption_rule("shop=orders"),)))
    await adopting.run()
    assert records.records == {(KAFKA_IDENTITY, "orders"): GroupOwnerRef("shop", "orders", adopting.uid)}
    assert any(reason == "GroupClaimed" and "(adopted: it was in use)" in m for _, reason, m in adopting.events.said)
    assert await adopting.finalize() is None
    assert adopting.coordinator.committed == {"orders": 6}  # kept: not deleted
    assert "a fleet deletes only a Kafka group it created" in adopting.events.said[-1][2]
    assert records.records == {}


async def test_a_kafka_fleet_that_created_its_group_deletes_it_as_its_spec_says(
    fleet_body: FleetBody, now: datetime
) -> None:
    records = InMemoryRecords()
    stage = kafka_stage(fleet_body, now, records, replicas=0, deleteGroupOnDelete=True)
    stage.coordinator.absent.add("orders")
    await stage.run()  # the group does not exist yet: the fleet creates it
    stage.coordinator.absent.clear()
    assert stage.status.status["ownedGroups"] == [{"coordinator": KAFKA_IDENTITY, "groupId": "orders", "created": True}]
    stage.coordinator.committed["orders"] = 6  # its consumers committed, then the fleet is deleted
    assert await stage.finalize() is None
    assert stage.coordinator.committed == {}
    assert "left and deleted group orders" in stage.events.said[-1][2]


async def test_a_fleet_created_again_after_it_was_left_behind_takes_its_group_back_with_the_offsets(
    fleet_body: FleetBody, now: datetime
) -> None:
    """docs/install.md, "Fleets left behind": a fleet deleted without the operator leaves its group recorded as its
    own, with offsets. Created again (same namespace and name, another uid), the fleet was refused GroupInUse (issue
    30); it takes the group back, as adopted, once the old members are gone. Another name needs the administrator."""
    for kind in (BERTH, KAFKA_CLASSIC):
        earlier = GroupOwnerRef("shop", "orders", "uid-of-the-fleet-left-behind")
        records = InMemoryRecords()
        stage = (
            Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
            if kind is BERTH
            else kafka_stage(fleet_body, now, records)
        )
        if kind is BERTH:
            stage.coordinator.owners["orders"] = earlier
        else:
            await records.claim(KAFKA_IDENTITY, "orders", earlier)
        stage.coordinator.committed["orders"] = 6
        stage.coordinator.members["orders"] = {"orders-0"}  # the old pods' members, before their sessions expire
        stage.with_ports(fleets=Fleets(fleet_body()))  # shop/orders is the new fleet (another uid)
        assert (await stage.run()).refused
        refused = stage.condition("SpecValid")
        assert refused["reason"] == "GroupOwned" and "an earlier fleet shop/orders" in refused["message"], refused
        assert "takes it back, with its offsets, once they are gone" in refused["message"]

        stage.coordinator.members["orders"] = set()  # expired
        result = await stage.run()
        assert not result.refused, (kind, stage.status.status)
        (reclaimed,) = [m for _, reason, m in stage.events.said if reason == "GroupReclaimed"]
        assert "an earlier fleet of this name" in reclaimed
        claimed = [m for _, reason, m in stage.events.said if reason == "GroupClaimed"]
        assert claimed and "(adopted: it was in use)" in claimed[-1]
        assert stage.coordinator.committed == {"orders": 6}

    # A stale owner of another name, with offsets: the group is in use, and that is the administrator's call.
    stage = Stage(fleet_body(), InMemoryCoordinator(BERTH), BERTH_DEFAULTS, now)
    stage.coordinator.owners["orders"] = GroupOwnerRef("shop", "payments", "uid-gone")
    stage.coordinator.committed["orders"] = 6
    stage.with_ports(fleets=Fleets(fleet_body()))
    assert (await stage.run()).refused and stage.condition("SpecValid")["reason"] == "GroupInUse"
