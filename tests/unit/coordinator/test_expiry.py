"""Kafka's expiry of offsets and empty groups (offsets retention, KIP-211) and the cap on groups (docs/api.md §6,
§11): the periodic check deletes an Empty group once it holds no offsets, expires an Empty group's offsets a
retention after it emptied, a simple group's a retention after each commit, never a live group's; admin-set-up
groups stay; a group beyond ``max_groups`` is refused COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from berth.coordinator.protocol import Error

from .scenario import SESSION_MS, Scenario

CHECK_MS = 600_000
DAY_MS = 86_400_000
RETENTION_MS = 7 * DAY_MS


def started(**config: object) -> Scenario:
    """A coordinator that has loaded (an empty store), so its expiry check runs, as a started server's does."""
    return Scenario(**config).reload()  # type: ignore[arg-type]


def emptied(ctx: Scenario, group: str = "g") -> None:
    """Form a group of one static member, then let its session run out: Empty, with a protocol type."""
    ctx.form_group("i-0", group=group)
    ctx.advance(SESSION_MS)
    assert ctx.state(group).value == "Empty"


def test_an_empty_group_without_offsets_is_deleted_at_the_next_check() -> None:
    ctx = started()
    emptied(ctx)

    ctx.advance(CHECK_MS)

    assert "g" not in ctx.core.groups
    deleted = ctx.events("group_deleted")[-1]
    assert (deleted["group_id"], deleted["via"]) == ("g", "expired")
    assert ctx.reload().core.groups == {}  # durably: a restart does not bring it back


def test_an_empty_groups_offsets_expire_a_retention_after_it_emptied_then_the_group_goes() -> None:
    ctx = started()
    formed = ctx.form_group("i-0")
    ctx.commit(formed.member_ids[0], formed.generation, "i-0", offsets={("t", 0): 42})
    ctx.advance(SESSION_MS)  # Empty from now on
    emptied_at = ctx.now

    ctx.advance_to(emptied_at + RETENTION_MS - 1)
    assert ctx.committed() == {("t", 0): 42}

    ctx.advance(CHECK_MS)
    assert ctx.committed() == {}
    assert "g" not in ctx.core.groups
    assert ctx.reload().committed() == {}


def test_a_simple_groups_offsets_expire_a_retention_after_each_commit() -> None:
    ctx = started()
    ctx.commit(offsets={("t", 0): 1})
    ctx.advance(3 * DAY_MS)
    ctx.commit(offsets={("t", 1): 2})

    ctx.advance(4 * DAY_MS + CHECK_MS)
    assert ctx.committed() == {("t", 1): 2}  # the first commit's retention is over, the second's is not
    ctx.advance(3 * DAY_MS)
    assert ctx.committed() == {}
    assert "g" not in ctx.core.groups


def test_a_group_with_members_keeps_its_offsets_however_old() -> None:
    ctx = started()
    formed = ctx.form_group("i-0")
    member = formed.member_ids[0]
    ctx.commit(member, formed.generation, "i-0", offsets={("t", 0): 7})

    ctx.keep_alive(RETENTION_MS + 2 * CHECK_MS, (member, "i-0"), every=SESSION_MS // 2)

    assert ctx.committed() == {("t", 0): 7}
    assert ctx.state().value == "Stable"


def test_a_group_an_admin_set_up_stays_while_its_offsets_expire() -> None:
    ctx = started()
    ctx.commit(offsets={("t", 0): 1})
    assert ctx.put_expected("i-0").error == Error.NONE

    ctx.advance(RETENTION_MS + CHECK_MS)

    assert ctx.committed() == {}
    assert ctx.get_expected().group_instance_ids == ("i-0",)


def test_an_expiry_that_could_not_be_written_is_undone_and_tried_again() -> None:
    ctx = started()
    ctx.commit(offsets={("t", 0): 1})
    ctx.advance(RETENTION_MS - CHECK_MS)  # the checks so far found nothing due
    ctx.fail_next_writes(1)

    ctx.advance(CHECK_MS)  # the check at which the offset is due: its write fails
    assert len(ctx.failed_writes) == 1
    assert ctx.committed() == {("t", 0): 1}
    assert "g" in ctx.core.groups

    ctx.advance(CHECK_MS)
    assert ctx.committed() == {}
    assert "g" not in ctx.core.groups


def test_a_new_group_beyond_the_cap_is_refused_and_gets_in_once_expiry_makes_room() -> None:
    ctx = started(max_groups=2)
    emptied(ctx, "a")
    ctx.form_group("i-0", group="b")

    assert ctx.join("", "i-0", group="c").error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.commit(group="c").error == Error.COORDINATOR_NOT_AVAILABLE
    assert ctx.put_expected("i-0", group="c").error == Error.COORDINATOR_NOT_AVAILABLE
    assert "c" not in ctx.core.groups
    assert ctx.core.groups_refused == 3
    member_of_b = ctx.member_of("i-0", "b")
    assert ctx.heartbeat(member_of_b, 1, "i-0", group="b").error == Error.NONE  # existing groups carry on

    ctx.advance(CHECK_MS)  # "a" is Empty with nothing in it: expired
    assert ctx.commit(group="c").error == Error.NONE


def test_a_reload_keeps_every_group_a_lowered_cap_finds() -> None:
    ctx = started()
    for group in ("a", "b", "c"):
        ctx.commit(group=group)

    smaller = ctx.reload(max_groups=2)

    assert sorted(smaller.core.groups) == ["a", "b", "c"]
    assert smaller.commit(group="d").error == Error.COORDINATOR_NOT_AVAILABLE
