"""The ownership planner (``planners.ownership``) and the deletion's release, as data: whose group it is, the
claim to make, and what the refusal says."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from berth.operator.planners.coordinator_kind import BERTH, KAFKA_CLASSIC, CoordinatorKind
from berth.operator.planners.observations import GroupDescription, GroupMember, GroupOwnerRef
from berth.operator.planners.ownership import (
    DEPRECATED_FIELD,
    GROUP_IN_USE,
    GROUP_OWNED,
    MAX_OWNED_GROUPS,
    AdoptionPolicy,
    ClaimGroup,
    OwnedGroup,
    RecordDecision,
    adopt_group_notes,
    foreign_report,
    group_owned_message,
    in_use_on_kafka,
    is_stale,
    may_adopt,
    may_delete,
    owned_groups,
    owned_patch,
    owner_name,
    owns,
    parse_adoption_rule,
    plan_claim,
    record_decision,
    refusal_reason,
    released_patch,
    to_release,
)
from berth.operator.planners.scaling import (
    DeleteGroup,
    ReleaseGroup,
    ScalingObservation,
    plan_scaling,
)
from berth.operator.spec.fleet import SpecError, parse_fleet

ME = GroupOwnerRef("shop", "orders", "uid-me")
OTHER = GroupOwnerRef("team-a", "orders", "uid-a")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def described(owner: GroupOwnerRef | None, *members: str, state: str = "Stable") -> GroupDescription:
    return GroupDescription(
        "orders", state if members else "Dead", 3, None, tuple(GroupMember(f"m-{m}", m) for m in members), owner
    )


def test_a_group_already_the_fleets_needs_no_claim() -> None:
    assert plan_claim(described(ME, "orders-0"), ME, adopt=False) is None
    assert owns(described(ME), "uid-me")


def test_any_other_group_is_claimed_adopting_only_as_the_administrator_decided() -> None:
    assert plan_claim(described(None), ME, adopt=False) == ClaimGroup(ME, adopt=False)
    assert plan_claim(described(None, "orders-0"), ME, adopt=True) == ClaimGroup(ME, adopt=True)
    # Another fleet's group is claimed too: the coordinator refuses it (409), and that refusal is the answer.
    assert plan_claim(described(OTHER, "orders-0"), ME, adopt=True) == ClaimGroup(ME, adopt=True)
    assert not owns(described(OTHER), "uid-me")
    assert not owns(described(ME), "")  # a fleet without a uid owns nothing


def test_adoption_is_the_administrators_policy_never_the_spec_field(fleet_body: Any) -> None:
    policy = AdoptionPolicy((parse_adoption_rule("shop=orders,payments-*"),))
    fleet = parse_fleet(fleet_body(namespace="shop", spec={"coordinator": {"adoptGroup": True}}))
    assert fleet.spec.coordinator.adopt_group  # the deprecated field parses...
    assert not may_adopt(AdoptionPolicy(), fleet, {})  # ...and grants nothing
    assert may_adopt(policy, fleet, {})
    assert policy.allows("shop", "payments-eu") and not policy.allows("shop", "payment")
    assert not policy.allows("team-b", "orders")  # another namespace, same group id
    for bad in ("shop", "shop=", "=orders", "Shop=orders", "a/b=orders"):
        with pytest.raises(ValueError):
            parse_adoption_rule(bad)
    (note,) = adopt_group_notes(fleet, {})
    assert (note.type, note.status, note.reason) == (DEPRECATED_FIELD, "True", "AdoptGroupIgnored")
    cleared = parse_fleet(fleet_body(namespace="shop"))
    assert adopt_group_notes(cleared, {}) == ()
    (gone,) = adopt_group_notes(cleared, {"conditions": [{"type": DEPRECATED_FIELD, "status": "True"}]})
    assert gone.status == "False"


def test_a_fleet_this_operator_already_ran_on_the_group_adopts_it_on_upgrade(fleet_body: Any) -> None:
    fleet = parse_fleet(fleet_body(namespace="shop"))
    ran = {"selector": "app=orders", "groupId": "orders"}
    assert may_adopt(AdoptionPolicy(), fleet, ran)
    edited = {"selector": "app=orders", "groupId": "payments"}  # groupId just edited: not established on it
    assert not may_adopt(AdoptionPolicy(), fleet, edited)
    refused = {"groupId": "orders"}  # never ran a workload (no selector)
    assert not may_adopt(AdoptionPolicy(), fleet, refused)


def test_kafka_records_a_group_in_use_is_claimed_only_with_adoption_and_anothers_never() -> None:
    assert record_decision(None, False, ME, adopt=False) == RecordDecision(create=True)
    assert record_decision(None, True, ME, adopt=False) == RecordDecision(refuse=True)
    assert record_decision(None, True, ME, adopt=True) == RecordDecision(create=True)
    assert record_decision(ME, True, ME, adopt=False) == RecordDecision()
    assert record_decision(OTHER, False, ME, adopt=True) == RecordDecision(refuse=True, owner=OTHER)


def test_a_kafka_group_is_in_use_with_members_or_with_committed_offsets_as_at_berths_coordinator() -> None:
    assert in_use_on_kafka(described(None, "orders-0"), committed_offsets=False)
    # Its consumers all stopped, their offsets kept: in use (issue 30: it was claimed and its offsets deleted).
    assert in_use_on_kafka(described(None, state="Empty"), committed_offsets=True)
    assert not in_use_on_kafka(described(None, state="Empty"), committed_offsets=False)
    gone = GroupDescription("orders", "Dead", -1, None, (), exists=False)
    assert not in_use_on_kafka(gone, committed_offsets=True)


def test_a_kafka_group_is_deleted_only_by_the_fleet_that_created_it() -> None:
    claim = OwnedGroup("kafka://k:9092", "orders")
    created = {"ownedGroups": [{"coordinator": "kafka://k:9092", "groupId": "orders", "created": True}]}
    adopted = {"ownedGroups": [{"coordinator": "kafka://k:9092", "groupId": "orders"}]}
    assert may_delete(created, claim, records_owners=False)
    assert not may_delete(adopted, claim, records_owners=False)  # adopted, or claimed before this was recorded
    assert not may_delete({}, claim, records_owners=False)
    assert not may_delete(created, OwnedGroup("kafka://k:9092", "payments"), records_owners=False)
    assert may_delete({}, claim, records_owners=True)  # Berth's coordinator: its owner record rules there
    # The flag is kept in status however the claims change, and is no part of a claim's identity.
    assert owned_groups(created) == (claim,) and owned_groups(created)[0].created
    assert released_patch(owned_groups(created), []) == {}
    assert owned_patch(owned_groups(created), OwnedGroup("kafka://k:9092", "payments"))["ownedGroups"][0] == {
        "coordinator": "kafka://k:9092",
        "groupId": "orders",
        "created": True,
    }


def test_an_owner_is_stale_only_when_its_namespace_and_name_hold_no_fleet_of_its_uid() -> None:
    assert is_stale(OTHER, None) and is_stale(OTHER, "uid-of-a-recreated-fleet")
    assert not is_stale(OTHER, "uid-a")
    assert not is_stale(GroupOwnerRef("team-a\n", "orders", "u"), None)  # not Kubernetes names: never judged
    assert not is_stale(GroupOwnerRef("team-a", "orders", ""), None)


def test_the_refusal_names_the_owning_fleet_only_when_it_looks_like_kubernetes_names() -> None:
    assert (
        group_owned_message("orders", "http://c:9094", OTHER)
        == "group orders on http://c:9094 belongs to fleet team-a/orders: nothing is sent for this fleet while that"
        " one owns it"
    )
    in_use = group_owned_message("orders", "x", None, adopt_group=True)
    assert "taking it over is the administrator's decision (the operator's --adopt-groups" in in_use
    assert "spec.coordinator.adoptGroup is deprecated and grants nothing" in in_use
    assert (refusal_reason(OTHER), refusal_reason(None)) == (GROUP_OWNED, GROUP_IN_USE)
    assert owner_name(GroupOwnerRef("team-a\n\x1b[31m", "orders", "u")) == "another fleet"
    assert owner_name(GroupOwnerRef("team-a", "secret=hunter2 ", "u")) == "another fleet"
    assert owner_name(GroupOwnerRef("a" * 64, "orders", "u")) == "another fleet"


def test_the_claims_a_fleet_holds_are_kept_in_status_and_bounded() -> None:
    one, two = OwnedGroup("http://c:9094", "orders"), OwnedGroup("kafka://k:9092", "orders")
    patch = owned_patch((), one)
    assert patch == {"ownedGroups": [{"coordinator": "http://c:9094", "groupId": "orders"}]}
    assert owned_patch(owned_groups(patch), one) == {}
    both = owned_groups(owned_patch((one,), two))
    assert both == (one, two)
    assert released_patch(both, [one]) == {"ownedGroups": [two.as_status()]}
    assert released_patch(both, [OwnedGroup("x", "y")]) == {}
    assert owned_groups({"ownedGroups": [{"coordinator": 1}, "junk", one.as_status()]}) == (one,)
    many = tuple(OwnedGroup("http://c:9094", f"g{i}") for i in range(MAX_OWNED_GROUPS + 2))
    assert to_release(many, many[-1]) == many[:2]  # keeps MAX_OWNED_GROUPS, the current one among them
    assert to_release(many[:3], many[0]) == ()


def test_foreign_members_reach_status_and_one_warning_only_when_they_change_and_only_as_plain_names() -> None:
    report = foreign_report("orders", {}, ("orders-7", "\x1b[31mhi", "consumer-1"))
    assert report.patch == {"foreignMembers": ["orders-7", "consumer-1"]}
    assert report.event is not None and "3 members this fleet did not create (orders-7, consumer-1 and 1 more)" in (
        report.event
    )
    assert foreign_report("orders", report.patch, ("orders-7", "\x1b[31mhi", "consumer-1")).event is None
    assert foreign_report("orders", report.patch, ()).patch == {"foreignMembers": None}
    assert foreign_report("orders", {}, ()).patch == {}


def deletion(*, delete_group: bool, kind: CoordinatorKind) -> ScalingObservation:
    return ScalingObservation(
        fleet_name="orders",
        desired_replicas=0,
        workload_replicas=0,
        existing_pods=frozenset(),
        deleting=True,
        group_members=frozenset(),
        delete_group=delete_group,
        kind=kind,
    )


def test_a_deletion_that_keeps_the_group_releases_it_last_and_one_that_deletes_it_does_not() -> None:
    kept = plan_scaling(deletion(delete_group=False, kind=BERTH), now=NOW)
    assert kept.actions[-1] == ReleaseGroup() and kept.done
    deleted = plan_scaling(deletion(delete_group=True, kind=BERTH), now=NOW)
    assert deleted.actions[-1] == DeleteGroup() and ReleaseGroup() not in deleted.actions
    kafka = plan_scaling(deletion(delete_group=False, kind=KAFKA_CLASSIC), now=NOW)
    assert ReleaseGroup() not in kafka.actions  # the operator's own record is released by the deletion's pass


def test_adopt_group_is_parsed_defaults_to_false_and_is_berths_only(fleet_body: Any) -> None:
    assert parse_fleet(fleet_body()).spec.coordinator.adopt_group is False
    adopting = fleet_body()
    adopting["spec"]["coordinator"] = {"adoptGroup": True}
    assert parse_fleet(adopting).spec.coordinator.adopt_group is True
    adopting["spec"]["coordinator"] = {"adoptGroup": "yes"}
    with pytest.raises(SpecError, match=r"spec\.coordinator\.adoptGroup"):
        parse_fleet(adopting)
    adopting["spec"]["coordinator"] = {"adoptGroup": True, "kafka": {}}
    with pytest.raises(SpecError, match=r"spec\.coordinator\.adoptGroup: is Berth's coordinator's"):
        parse_fleet(adopting)


def test_the_coordinator_ca_file_must_be_a_pem_ca_bundle_at_start(tmp_path: Path) -> None:
    from berth.operator.command.options import OptionsError, parse_options

    assert parse_options([], {}).coordinator_ca_file is None
    junk = tmp_path / "ca.crt"
    junk.write_text("not a certificate")
    for argv, environ in ((["--coordinator-ca-file", str(junk)], {}), ([], {"BERTH_CA_FILE": str(tmp_path / "no")})):
        with pytest.raises(OptionsError, match="--coordinator-ca-file"):
            parse_options(argv, environ)


def test_the_administrators_adoption_policy_and_the_fleet_bounds_are_flags(tmp_path: Path) -> None:
    from berth.operator.command.options import OptionsError, parse_options

    none = tmp_path / "no-namespace-file"
    options = parse_options(
        ["--adopt-groups", "shop=orders,orders-*", "--adopt-groups", "ops=legacy"],
        {},
        service_account_namespace_file=none,
    )
    assert options.adoption.allows("shop", "orders-eu") and options.adoption.allows("ops", "legacy")
    assert not options.adoption.allows("ops", "orders")
    from_env = parse_options([], {"BERTH_ADOPT_GROUPS": "shop=a;ops=b"}, service_account_namespace_file=none)
    assert from_env.adoption.describe() == "shop=a; ops=b"
    defaults = parse_options([], {}, service_account_namespace_file=none)
    assert (defaults.max_fleets, defaults.max_fleets_per_namespace, defaults.group_owners_namespace) == (
        2000,
        500,
        None,
    )
    assert parse_options(
        [], {"POD_NAMESPACE": "berth"}, service_account_namespace_file=none
    ).group_owners_namespace == ("berth")
    bounded = parse_options(
        ["--max-fleets", "0", "--max-fleets-per-namespace", "3"], {}, service_account_namespace_file=none
    )
    assert (bounded.defaults.max_fleets, bounded.defaults.max_fleets_per_namespace) == (0, 3)
    for argv, flag in (
        (["--adopt-groups", "shop"], "--adopt-groups"),
        (["--adopt-groups", "Shop=x"], "--adopt-groups"),
        (["--max-fleets", "-1"], "--max-fleets"),
        (["--group-owners-namespace", "Not_A_Namespace"], "--group-owners-namespace"),
    ):
        with pytest.raises(OptionsError, match=flag):
            parse_options(argv, {}, service_account_namespace_file=none)
