"""Group ownership (docs/api.md §7a): a group belongs to at most one fleet. A claim takes a group that does not
exist or is vacant (or any unowned one with ``adopt``), is idempotent for its owner and refused for another; an
owner assertion refuses another owner's group and an unowned one in use; the owner is persisted with the group,
journaled, survives a restart and goes with the group."""

from __future__ import annotations

from berth.coordinator.core.records import GroupDeltaRecord, GroupRecord
from berth.coordinator.protocol import Error, GroupOwner

from .scenario import Scenario

TEAM_A = GroupOwner("team-a", "orders", "uid-a")
TEAM_B = GroupOwner("team-b", "orders", "uid-b")


def test_claiming_a_group_that_does_not_exist_creates_it_owned() -> None:
    ctx = Scenario()

    claimed = ctx.claim(TEAM_A)

    assert (claimed.error, claimed.result.owner) == (Error.NONE, TEAM_A)
    assert ctx.describe().owner == TEAM_A
    assert ctx.describe().group_state == "Empty"
    assert ctx.event_types() == ["group_created", "owner_claimed"]
    event = ctx.events("owner_claimed")[-1]
    assert (event["owner"], event["adopted"]) == ({"namespace": "team-a", "name": "orders", "uid": "uid-a"}, False)


def test_a_claim_is_idempotent_for_its_owner_and_refused_for_another() -> None:
    ctx = Scenario()
    ctx.claim(TEAM_A)
    writes = len(ctx.write_log)

    assert ctx.claim(TEAM_A).result.owner == TEAM_A
    assert len(ctx.write_log) == writes  # nothing written again
    refusal = ctx.core.owner_claim_refusal("g", TEAM_B.uid, adopt=True)
    assert refusal is not None and refusal.owner == TEAM_A  # adopt does not take another fleet's group


def test_an_unowned_group_in_use_is_claimed_only_by_adopting_it() -> None:
    ctx = Scenario()
    ctx.form_group("i-0")

    refusal = ctx.core.owner_claim_refusal("g", TEAM_A.uid, adopt=False)
    assert refusal is not None and refusal.owner is None
    adopted = ctx.claim(TEAM_A, adopt=True)

    assert adopted.result.owner == TEAM_A
    assert ctx.events("owner_claimed")[-1]["adopted"] is True
    assert ctx.state().value == "Stable"  # claiming changes nothing else


def test_committed_offsets_make_a_group_in_use() -> None:
    ctx = Scenario()
    ctx.commit(offsets={("t", 0): 5})

    assert ctx.core.owner_claim_refusal("g", TEAM_A.uid, adopt=False) is not None
    assert ctx.core.owner_assertion_refusal("g", TEAM_A.uid) is not None


def test_the_owner_assertion_refuses_another_owner_and_an_unowned_group_in_use() -> None:
    ctx = Scenario()
    assert ctx.core.owner_assertion_refusal("g", TEAM_A.uid) is None  # no such group
    ctx.put_expected("i-0")
    assert ctx.core.owner_assertion_refusal("g", TEAM_A.uid) is None  # nobody's, vacant
    ctx.claim(TEAM_A)

    assert ctx.core.owner_assertion_refusal("g", TEAM_A.uid) is None
    refused = ctx.core.owner_assertion_refusal("g", TEAM_B.uid)
    assert refused is not None and refused.owner == TEAM_A
    ctx.form_group("i-0", group="other")
    in_use = ctx.core.owner_assertion_refusal("other", TEAM_A.uid)
    assert in_use is not None and in_use.owner is None


def test_a_release_by_the_owner_leaves_the_group_unowned_and_another_uid_is_refused() -> None:
    ctx = Scenario()
    ctx.claim(TEAM_A)

    refusal = ctx.core.owner_release_refusal("g", TEAM_B.uid)
    assert refusal is not None and refusal.owner == TEAM_A
    assert ctx.release(TEAM_A.uid).result.owner is None
    assert ctx.describe().owner is None
    assert ctx.events("owner_released")[-1]["owner"]["uid"] == "uid-a"
    assert ctx.release(TEAM_A.uid).error == Error.NONE  # nothing left to release: fine


def test_the_owner_is_one_of_the_groups_own_fields_written_in_o1_and_reloaded() -> None:
    ctx = Scenario()
    formed = ctx.form_group(*(f"i-{n}" for n in range(20)))
    ctx.claim(TEAM_A, adopt=True)

    record = ctx.records[-1]
    assert isinstance(record, GroupDeltaRecord)
    assert (record.value.owner, record.upserted, record.removed) == (TEAM_A, (), ())
    reloaded = ctx.reload()
    assert reloaded.describe().owner == TEAM_A
    assert reloaded.describe().generation_id == formed.generation
    # Later whole-group records carry the owner too.
    member = formed.member_ids[0]
    reloaded.leave((member, "i-0"))
    assert reloaded.describe().owner == TEAM_A
    assert reloaded.reload().describe().owner == TEAM_A


def test_deleting_a_group_deletes_its_owner() -> None:
    ctx = Scenario()
    ctx.claim(TEAM_A)

    assert ctx.delete().error == Error.NONE
    assert isinstance(ctx.records[-1], GroupRecord) and ctx.records[-1].value is None
    assert ctx.claim(TEAM_B).result.owner == TEAM_B  # the id is free again


def test_a_claim_that_could_not_be_written_leaves_nothing_behind() -> None:
    ctx = Scenario()
    ctx.fail_next_writes(1)
    assert ctx.claim(TEAM_A).error == Error.COORDINATOR_NOT_AVAILABLE
    assert "g" not in ctx.core.groups

    ctx.form_group("i-0")
    ctx.fail_next_writes(1)
    assert ctx.claim(TEAM_A, adopt=True).error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.describe().owner is None


def test_an_owned_group_does_not_expire() -> None:
    ctx = Scenario().reload()
    ctx.claim(TEAM_A)

    ctx.advance(8 * 86_400_000)

    assert ctx.describe().owner == TEAM_A
