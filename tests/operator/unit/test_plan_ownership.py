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
    ClaimGroup,
    group_owned_message,
    owner_name,
    owns,
    plan_claim,
)
from berth.operator.planners.scaling import (
    DeleteGroup,
    ReleaseGroup,
    ScalingObservation,
    plan_scaling,
)
from berth.operator.spec import SpecError, parse_fleet

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


def test_any_other_group_is_claimed_adopting_only_when_the_spec_says_so() -> None:
    assert plan_claim(described(None), ME, adopt=False) == ClaimGroup(ME, adopt=False)
    assert plan_claim(described(None, "orders-0"), ME, adopt=True) == ClaimGroup(ME, adopt=True)
    # Another fleet's group is claimed too: the coordinator refuses it (409), and that refusal is the answer.
    assert plan_claim(described(OTHER, "orders-0"), ME, adopt=True) == ClaimGroup(ME, adopt=True)
    assert not owns(described(OTHER), "uid-me")
    assert not owns(described(ME), "")  # a fleet without a uid owns nothing


def test_a_fleet_this_operator_already_ran_on_the_group_adopts_it_on_upgrade() -> None:
    ran = {"selector": "app=orders", "groupId": "orders"}
    assert plan_claim(described(None, "orders-0"), ME, adopt=False, status=ran) == ClaimGroup(ME, adopt=True)
    edited = {"selector": "app=orders", "groupId": "payments"}  # groupId just edited: not established on it
    assert plan_claim(described(None, "orders-0"), ME, adopt=False, status=edited) == ClaimGroup(ME, adopt=False)
    refused = {"groupId": "orders"}  # never ran a workload (no selector)
    assert plan_claim(described(None, "orders-0"), ME, adopt=False, status=refused) == ClaimGroup(ME, adopt=False)


def test_the_refusal_names_the_owning_fleet_only_when_it_looks_like_kubernetes_names() -> None:
    assert (
        group_owned_message("orders", "http://c:9094", OTHER)
        == "group orders on http://c:9094 belongs to fleet team-a/orders: nothing is sent for this fleet while that"
        " one owns it"
    )
    assert "owned by no fleet: set spec.coordinator.adoptGroup: true" in group_owned_message("orders", "x", None)
    assert owner_name(GroupOwnerRef("team-a\n\x1b[31m", "orders", "u")) == "another fleet"
    assert owner_name(GroupOwnerRef("team-a", "secret=hunter2 ", "u")) == "another fleet"
    assert owner_name(GroupOwnerRef("a" * 64, "orders", "u")) == "another fleet"


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
    assert ReleaseGroup() not in kafka.actions


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
    from berth.operator.options import OptionsError, parse_options

    assert parse_options([], {}).coordinator_ca_file is None
    junk = tmp_path / "ca.crt"
    junk.write_text("not a certificate")
    for argv, environ in ((["--coordinator-ca-file", str(junk)], {}), ([], {"BERTH_CA_FILE": str(tmp_path / "no")})):
        with pytest.raises(OptionsError, match="--coordinator-ca-file"):
            parse_options(argv, environ)
