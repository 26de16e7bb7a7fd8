"""Journal events bounded in size (docs/formats.md "Bounded events"): an ``assignment_stored`` over
``journal_event_max_bytes`` keeps the partitions of the member library's assignments and drops the rest, then the
assignments, then the member list; a ``rebalance_completed`` keeps only the member count. Small events are as
they always were."""

from __future__ import annotations

import base64
import json

import msgspec

from berth.coordinator.core.journal_bounds import partitions_only

from .scenario import Scenario


def library_assignment(partitions: list[int], user_data: str = "") -> bytes:
    """The member library's encoding (docs/formats.md "Member library encoding")."""
    document = {"version": 1, "partitions": {"orders": partitions}, "user_data": user_data or None}
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def stored(ctx: Scenario) -> dict:
    return ctx.events("assignment_stored")[-1]


def test_a_small_assignment_is_journaled_whole() -> None:
    ctx = Scenario(journal_event_max_bytes=4_096)
    given = {"i-0": library_assignment([0, 1]), "i-1": library_assignment([2])}
    ctx.form_group("i-0", "i-1", assignments=given)

    event = stored(ctx)
    assert "summarised" not in event
    assert {a["group_instance_id"]: a["assignment"] for a in event["assignments"]} == given


def test_a_large_assignment_keeps_its_partitions_and_drops_its_user_data() -> None:
    ctx = Scenario(journal_event_max_bytes=4_096)
    bulky = library_assignment([0, 1, 2], user_data="x" * 10_000)
    ctx.form_group("i-0", "i-1", assignments={"i-0": bulky, "i-1": b"\x00not-the-library's"})

    event = stored(ctx)
    assert event["summarised"] is True
    by_instance = {a["group_instance_id"]: a for a in event["assignments"]}
    assert json.loads(by_instance["i-0"]["assignment"]) == {"partitions": {"orders": [0, 1, 2]}, "version": 1}
    assert by_instance["i-0"]["assignment_bytes"] == len(bulky)
    assert by_instance["i-1"]["assignment"] is None  # another client's encoding: unknown, never guessed at
    assert len(msgspec.json.encode(event)) <= 4_096
    # The group itself keeps what the leader sent: only the journal is summarised.
    assert ctx.group().members[by_instance["i-0"]["member_id"]].assignment == bulky


def test_assignments_too_large_even_as_partitions_are_dropped_keeping_the_members() -> None:
    ctx = Scenario(journal_event_max_bytes=4_096)
    ctx.form_group("i-0", "i-1", assignments={"i-0": library_assignment(list(range(3_000))), "i-1": b"b"})

    event = stored(ctx)
    assert event["summarised"] is True
    assert [(a["group_instance_id"], a["assignment"]) for a in event["assignments"]] == [("i-0", None), ("i-1", None)]
    assert len(msgspec.json.encode(event)) <= 4_096


def test_a_group_too_large_to_list_keeps_only_its_member_count() -> None:
    ctx = Scenario(journal_event_max_bytes=1_024)
    instances = [f"instance-with-a-long-name-{n:03d}" for n in range(40)]
    ctx.form_group(*instances)

    assert stored(ctx) | {"seq": 0, "ts_ms": 0} == {
        "seq": 0,
        "ts_ms": 0,
        "group_id": "g",
        "type": "assignment_stored",
        "generation_id": 1,
        "member_id": stored(ctx)["member_id"],
        "summarised": True,
        "member_count": 40,
    }
    completed = ctx.events("rebalance_completed")[-1]
    assert completed["summarised"] is True
    assert completed["member_count"] == 40
    assert "members" not in completed


def test_partitions_only_reads_just_the_member_librarys_encoding() -> None:
    assert partitions_only(library_assignment([3], "u")) == b'{"partitions":{"orders":[3]},"version":1}'
    assert partitions_only(b"") is None
    assert partitions_only(b'{"version":0,"partitions":{}}') is None
    assert partitions_only(base64.b64encode(b"binary")) is None
