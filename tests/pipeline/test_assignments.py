"""Assignments: decoding the member library's encoding, and partitions that changed owner between rebalances."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pipeline_builders import assignment, event, journal, rows
from pyspark.sql import SparkSession

from berth.pipeline.assignments import member_assignments, partitions_moved
from berth.pipeline.schema import CONVERTED_SCHEMA

pytestmark = pytest.mark.spark


def stored(seq: int, group: str, *members: tuple[str, str | None, str]) -> dict[str, Any]:
    """An assignment_stored of ``(member_id, group_instance_id, base64 assignment)`` members."""
    return event(
        seq,
        seq * 1_000,
        group,
        "assignment_stored",
        generation_id=seq // 10,
        member_id=members[0][0] if members else "leader",
        assignments=[{"member_id": m, "group_instance_id": i, "assignment": a} for m, i, a in members],
    )


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_only_the_member_librarys_json_decodes_everything_else_is_unknown(spark: SparkSession) -> None:
    newer_version_with_extra_fields = b64(
        json.dumps({"version": 2, "partitions": {"orders": [2]}, "user_data": "x", "rack": "a"}).encode()
    )
    events = journal(
        spark,
        stored(
            1,
            "orders",
            ("orders-0-a", "orders-0", assignment({"orders": [0, 1], "audit": [0]})),
            ("consumer-7", None, newer_version_with_extra_fields),
            ("old", "orders-2", assignment({"orders": [3]}, version=0)),
            ("java", "orders-3", b64(b"\x00\x01\x00\x00\x00\x01")),  # another client's binary encoding
            ("empty", "orders-4", ""),
            ("garbled", "orders-5", "!!not base64!!"),
            ("no-partitions", "orders-6", b64(b'{"version":1}')),
        ),
    )

    assert rows(member_assignments(events), "owner") == [
        {"group_id": "orders", "seq": 1, "owner": "consumer-7", "partitions": {"orders": [2]}},
        {"group_id": "orders", "seq": 1, "owner": "orders-0", "partitions": {"audit": [0], "orders": [0, 1]}},
        {"group_id": "orders", "seq": 1, "owner": "orders-2", "partitions": None},
        {"group_id": "orders", "seq": 1, "owner": "orders-3", "partitions": None},
        {"group_id": "orders", "seq": 1, "owner": "orders-4", "partitions": None},
        {"group_id": "orders", "seq": 1, "owner": "orders-5", "partitions": None},
        {"group_id": "orders", "seq": 1, "owner": "orders-6", "partitions": None},
    ]


def moved_row(
    group: str,
    seq: int,
    previous_seq: int | None,
    members: int,
    partitions: int,
    moved: int,
    added: int,
    removed: int,
    unknown: int = 0,
) -> dict[str, Any]:
    return {
        "group_id": group,
        "seq": seq,
        "ts_ms": seq * 1_000,
        "generation_id": seq // 10,
        "previous_seq": previous_seq,
        "members": members,
        "unknown_assignments": unknown,
        "partitions": partitions,
        "partitions_moved": moved,
        "partitions_added": added,
        "partitions_removed": removed,
    }


def test_static_restarts_move_nothing_and_an_expiry_moves_the_lost_members_partitions(spark: SparkSession) -> None:
    events = journal(
        spark,
        # the fleet forms: everything is new
        stored(
            10,
            "orders",
            ("orders-0-a", "orders-0", assignment({"audit": [0], "orders": [0, 1]})),
            ("orders-1-a", "orders-1", assignment({"orders": [2, 3]})),
        ),
        # orders-1 restarted under a new member id and kept its partitions: not a move
        stored(
            20,
            "orders",
            ("orders-0-a", "orders-0", assignment({"audit": [0], "orders": [0, 1]})),
            ("orders-1-b", "orders-1", assignment({"orders": [2, 3]})),
        ),
        # orders-1 expired: orders-0 takes its two partitions
        stored(30, "orders", ("orders-0-a", "orders-0", assignment({"audit": [0], "orders": [0, 1, 2, 3]}))),
        # orders-1 is back and takes them again; the audit topic is gone
        stored(
            40,
            "orders",
            ("orders-0-a", "orders-0", assignment({"orders": [0, 1]})),
            ("orders-1-c", "orders-1", assignment({"orders": [2, 3]})),
        ),
    )

    assert rows(partitions_moved(events), "seq") == [
        moved_row("orders", 10, None, members=2, partitions=5, moved=0, added=5, removed=0),
        moved_row("orders", 20, 10, members=2, partitions=5, moved=0, added=0, removed=0),
        moved_row("orders", 30, 20, members=1, partitions=5, moved=2, added=0, removed=0),
        moved_row("orders", 40, 30, members=2, partitions=4, moved=2, added=0, removed=1),
    ]


def test_a_dynamic_member_replaced_one_for_one_keeps_its_process_slot_so_nothing_moves(spark: SparkSession) -> None:
    events = journal(
        spark,
        stored(15, "billing", ("consumer-1", None, assignment({"ledger": [0, 1]}))),
        stored(16, "orders", ("orders-0-a", "orders-0", assignment({"orders": [0]}))),  # another group between
        # consumer-1 restarted as consumer-2: one departed, one arrived, so it is the same slot (berth-demo's count)
        stored(25, "billing", ("consumer-2", None, assignment({"ledger": [0, 1]}))),
        stored(35, "billing"),  # everyone left: an empty assignment drops everything
    )

    assert rows(partitions_moved(events), "seq") == [
        moved_row("billing", 15, None, members=1, partitions=2, moved=0, added=2, removed=0),
        moved_row("orders", 16, None, members=1, partitions=1, moved=0, added=1, removed=0),
        moved_row("billing", 25, 15, members=1, partitions=2, moved=0, added=0, removed=0),
        moved_row("billing", 35, 25, members=0, partitions=0, moved=0, added=0, removed=2),
    ]


def test_dynamic_arrivals_inherit_a_slot_only_from_the_one_departed_member_whose_partitions_they_alone_took(
    spark: SparkSession,
) -> None:
    events = journal(
        spark,
        stored(10, "g", ("a", None, assignment({"t": [0, 1]})), ("b", None, assignment({"t": [2, 3]}))),
        # a left; x took all of a's partitions and nobody else did: x is a's restart. y is new and took 3 from b.
        stored(
            20,
            "g",
            ("b", None, assignment({"t": [2]})),
            ("x", None, assignment({"t": [0, 1]})),
            ("y", None, assignment({"t": [3]})),
        ),
        # b and x left, p and q arrived, both holding some of x's: no unambiguous pairing, so all three moved.
        stored(
            30,
            "g",
            ("y", None, assignment({"t": [3]})),
            ("p", None, assignment({"t": [0, 2]})),
            ("q", None, assignment({"t": [1]})),
        ),
        # a scale-up without a departure: r takes partitions from members that stay, which are moves.
        stored(
            40,
            "g",
            ("y", None, assignment({"t": [3]})),
            ("p", None, assignment({"t": [0]})),
            ("q", None, assignment({"t": [1]})),
            ("r", None, assignment({"t": [2]})),
        ),
    )

    assert [(r["seq"], r["partitions_moved"]) for r in rows(partitions_moved(events), "seq")] == [
        (10, 0),
        (20, 1),  # 3: b -> y; 0 and 1 stayed in a's slot
        (30, 3),  # 0: x -> p, 1: x -> q, 2: b -> p
        (40, 1),  # 2: p -> r
    ]


def test_partitions_of_a_member_with_an_unknown_encoding_are_counted_as_unknown_not_guessed(
    spark: SparkSession,
) -> None:
    events = journal(
        spark,
        stored(
            10,
            "orders",
            ("orders-0-a", "orders-0", assignment({"orders": [0, 1]})),
            ("orders-1-a", "orders-1", assignment({"orders": [2, 3]})),
        ),
        stored(
            20,
            "orders",
            ("orders-0-a", "orders-0", assignment({"orders": [0, 1]})),
            ("orders-1-b", "orders-1", b64(b"\x00\x03")),
        ),
    )

    assert rows(partitions_moved(events), "seq") == [
        moved_row("orders", 10, None, members=2, partitions=4, moved=0, added=4, removed=0),
        # orders-1's partitions are invisible now: they show as removed, and the unknown count says why
        moved_row("orders", 20, 10, members=2, partitions=2, moved=0, added=0, removed=2, unknown=1),
    ]


def test_a_converted_journal_uses_the_partitions_decoded_at_conversion(spark: SparkSession) -> None:
    # The converter's decoded partitions are trusted as they are: here they differ from the base64 on purpose,
    # which shows the analysis did not parse it again; null is an encoding the converter did not know.
    def converted(member_id: str, instance: str, encoded: str, partitions: dict[str, list[int]] | None) -> Any:
        return {"member_id": member_id, "group_instance_id": instance, "assignment": encoded, "partitions": partitions}

    events = journal(
        spark,
        event(
            10,
            10_000,
            "orders",
            "assignment_stored",
            generation_id=1,
            member_id="orders-0-a",
            assignments=[
                converted("orders-0-a", "orders-0", assignment({"orders": [9]}), {"orders": [0, 1]}),
                converted("orders-1-a", "orders-1", assignment({"orders": [2, 3]}), None),
            ],
        ),
        schema=CONVERTED_SCHEMA,
    )

    assert rows(member_assignments(events), "owner") == [
        {"group_id": "orders", "seq": 10, "owner": "orders-0", "partitions": {"orders": [0, 1]}},
        {"group_id": "orders", "seq": 10, "owner": "orders-1", "partitions": None},
    ]
    assert [(r["partitions"], r["unknown_assignments"]) for r in partitions_moved(events).collect()] == [(2, 1)]


def test_only_a_dynamic_departure_and_a_dynamic_arrival_in_one_assignment_make_a_restart(spark: SparkSession) -> None:
    # Slots are inferred only where a dynamic member left and another arrived between two assignments; every other
    # change of hands is a move, however much it looks like a restart.
    events = journal(
        spark,
        stored(10, "g", ("s-1", "static-0", assignment({"t": [0, 1]})), ("a", None, assignment({"t": [2, 3]}))),
        # the static member left and a dynamic one took exactly its partitions: not a restart (no dynamic departure)
        stored(20, "g", ("x", None, assignment({"t": [0, 1]})), ("a", None, assignment({"t": [2, 3]}))),
        # a left, nobody arrived: x takes a's partitions
        stored(30, "g", ("x", None, assignment({"t": [0, 1, 2, 3]}))),
        # x restarted as y (one dynamic departure, one dynamic arrival), and a static member joined beside it
        stored(40, "g", ("y", None, assignment({"t": [0, 1, 2]})), ("s-2", "static-0", assignment({"t": [3]}))),
    )

    assert [(r["seq"], r["partitions_moved"]) for r in rows(partitions_moved(events), "seq")] == [
        (10, 0),
        (20, 2),  # 0, 1: static-0 -> x
        (30, 2),  # 2, 3: a -> x
        (40, 1),  # 3: x's slot -> static-0; 0, 1, 2 stayed in x's slot, now y
    ]
