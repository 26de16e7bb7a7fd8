"""Assignments: decode what each rebalance handed out, and count the partitions that changed hands.

Owns the member library's assignment decoding (docs/formats.md: base64 of compact JSON
``{"version": 1, "partitions": {"topic": [0, 1]}, "user_data": null}``) and the partitions-moved transform.
Rules:
- Decoding is Spark built-ins only (no Python UDF): base64 -> bytes -> UTF-8 -> ``from_json``. Anything that is
  not that JSON with ``version >= 1`` and a ``partitions`` object (another client's encoding, empty bytes, bad
  base64) is *unknown*: counted per assignment, never guessed at. Parsing is most of this module's cost, so
  the converter decodes once (``decoded_assignments``) and a converted journal's transforms reuse its result.
- A partition's owner is the member's ``group_instance_id`` when static, else its ``member_id``, so that a static
  member's restart under a new member id is not a move.
- Each ``assignment_stored`` is compared with the group's previous ``assignment_stored``: a partition in both with
  another owner is *moved*, one only in the new is *added*, one only in the previous is *removed*. The first
  assignment of a group adds everything. Partitions held by members with an unknown encoding are invisible here.
- The comparison works on whole assignments, one row per assignment (no row per partition, one shuffle in all):
  set differences between this and the previous assignment's partitions and ``(partition, owner)`` pairs, each
  held as a 64-bit key (the topic's xxHash XOR the partition). Keys halve the time strings took; two entries of one
  group's consecutive assignments colliding is a ~1e-11 chance at ten thousand partitions, and would miscount one
  partition (partitions of one topic never collide).
  A partition an assignor gave to two members at once (a bug) is counted as each of its owners.
"""

from __future__ import annotations

from typing import cast

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructType

from berth.pipeline.schema import (
    ASSIGNMENT_STORED,
    MEMBER_ASSIGNMENT_SCHEMA,
    STORED_ASSIGNMENT,
)


def parsed_assignment(base64_text: Column) -> Column:
    """A base64 assignment -> ``struct<version, partitions>`` as parsed (fields null where the JSON had none).

    Kept apart from ``library_partitions`` so that callers materialise the parse once: Spark does not share a
    repeated ``from_json`` inside a lambda.
    """
    as_json = F.try_to_binary(base64_text, F.lit("base64")).cast("string")
    return F.from_json(as_json, MEMBER_ASSIGNMENT_SCHEMA)


def library_partitions(parsed: Column) -> Column:
    """A ``parsed_assignment`` -> its ``partitions`` map, null when it is not the member library's encoding."""
    return F.when((parsed["version"] >= 1) & parsed["partitions"].isNotNull(), parsed["partitions"])


def decoded_assignments(assignments: Column) -> Column:
    """``array<STORED_ASSIGNMENT>`` -> ``array<CONVERTED_ASSIGNMENT>``: every member's partitions decoded."""

    def with_parsed(member: Column) -> Column:
        return F.struct(*_stored_fields(member), parsed_assignment(member["assignment"]).alias("parsed"))

    def with_partitions(member: Column) -> Column:
        return F.struct(*_stored_fields(member), library_partitions(member["parsed"]).alias("partitions"))

    return F.transform(F.transform(assignments, with_parsed), with_partitions)


def _decoded(events: DataFrame) -> Column:
    """``events``' assignments with partitions: a converted journal's as they are (parsing JSON is most of this
    module's cost, and a converted journal paid it once, at conversion), a JSON Lines journal's decoded now.

    Reading only the fields needed (rebuilding the structs from pruned field arrays) measured slower: per-member
    index lookups re-extract the arrays, and zipping them costs more than the base64 it saves."""
    element = cast(ArrayType, events.schema["assignments"].dataType).elementType
    if "partitions" in cast(StructType, element).fieldNames():
        return F.col("assignments")
    return decoded_assignments(F.col("assignments"))


def _stored_fields(member: Column) -> list[Column]:
    return [member[name].alias(name) for name in STORED_ASSIGNMENT.fieldNames()]


def member_assignments(events: DataFrame) -> DataFrame:
    """Journal events -> ``group_id, seq, owner, partitions`` (map topic -> partitions; null when unknown),
    one row per member of every ``assignment_stored``."""
    stored = events.where(F.col("type") == ASSIGNMENT_STORED)
    members = stored.select(
        "group_id",
        "seq",
        F.explode(_decoded(events)).alias("member"),
    )
    return members.select("group_id", "seq", _owner(F.col("member")).alias("owner"), "member.partitions")


def _owner(member: Column) -> Column:
    """Who holds a member's partitions: its instance id when static, so a static restart is not a move."""
    return F.coalesce(member["group_instance_id"], member["member_id"])


def partitions_moved(events: DataFrame) -> DataFrame:
    """Journal events -> one row per ``assignment_stored``: ``group_id, seq, ts_ms, generation_id, previous_seq,
    members, unknown_assignments, partitions, partitions_moved, partitions_added, partitions_removed``."""
    in_group_order = Window.partitionBy("group_id").orderBy("seq")
    stored = events.where(F.col("type") == ASSIGNMENT_STORED).select(
        "group_id",
        "seq",
        "ts_ms",
        "generation_id",
        F.coalesce(_decoded(events), F.array()).alias("assignments"),
    )
    owned = stored.select(
        "group_id",
        "seq",
        "ts_ms",
        "generation_id",
        F.size("assignments").alias("members"),
        F.transform("assignments", _owner_and_partitions).alias("owners"),
    ).select(
        "group_id",
        "seq",
        "ts_ms",
        "generation_id",
        "members",
        F.size(F.filter("owners", lambda o: o["partitions"].isNull())).alias("unknown_assignments"),
        F.flatten(F.transform("owners", lambda o: _partition_hashes(o, with_owner=True))).alias("pairs"),
        F.array_distinct(F.flatten(F.transform("owners", lambda o: _partition_hashes(o, with_owner=False)))).alias(
            "keys"
        ),
    )
    compared = owned.select(
        "*",
        F.lag("seq").over(in_group_order).alias("previous_seq"),
        F.coalesce(F.lag("pairs").over(in_group_order), _no_hashes()).alias("previous_pairs"),
        F.coalesce(F.lag("keys").over(in_group_order), _no_hashes()).alias("previous_keys"),
    )
    added = F.size(F.array_except("keys", "previous_keys"))
    # New pairs are partitions that are new, or that are not new and have another owner: moved.
    new_pairs = F.size(F.array_except("pairs", "previous_pairs"))
    return compared.select(
        "group_id",
        "seq",
        "ts_ms",
        "generation_id",
        "previous_seq",
        "members",
        "unknown_assignments",
        F.size("keys").alias("partitions"),
        (new_pairs - added).alias("partitions_moved"),
        added.alias("partitions_added"),
        F.size(F.array_except("previous_keys", "keys")).alias("partitions_removed"),
    )


def _no_hashes() -> Column:
    return F.array().cast("array<bigint>")


def _owner_and_partitions(member: Column) -> Column:
    return F.struct(_owner(member).alias("owner"), member["partitions"].alias("partitions"))


def _partition_hashes(owner: Column, with_owner: bool) -> Column:
    """One member's partitions as 64-bit keys of ``(topic, partition)``, or of ``(topic, partition, owner)`` when
    asked; empty when its encoding is unknown.

    A key is the topic's (and owner's) xxHash XOR the partition number: one hash per topic instead of one per
    partition (a quarter faster), and the partitions of one topic can never collide with each other."""
    per_topic = F.transform(F.map_entries(owner["partitions"]), lambda entry: _topic_keys(entry, owner, with_owner))
    return F.coalesce(F.flatten(per_topic), _no_hashes())


def _topic_keys(entry: Column, owner: Column, with_owner: bool) -> Column:
    base = F.xxhash64(entry["key"], owner["owner"]) if with_owner else F.xxhash64(entry["key"])
    return F.transform(entry["value"], lambda partition: base.bitwiseXOR(partition))
