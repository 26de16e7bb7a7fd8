"""Assignments: decode what each rebalance handed out, and count the partitions that changed hands.

Owns the member library's assignment decoding (docs/formats.md: base64 of compact JSON
``{"version": 1, "partitions": {"topic": [0, 1]}, "user_data": null}``) and the partitions-moved transform.
Rules:
- Decoding is Spark built-ins only (no Python UDF): base64 -> bytes -> UTF-8 -> ``from_json``. Anything that is
  not that JSON with ``version >= 1`` and a ``partitions`` object (another client's encoding, empty bytes, bad
  base64) is *unknown*: counted per assignment, never guessed at. Parsing is most of this module's cost, so
  the converter decodes once (``decoded_assignments``) and a converted journal's transforms reuse its result.
- A partition's owner is its *process slot*, as ``berth-demo`` counts: a static member's ``group_instance_id``, so
  that a static member's restart under a new member id is not a move. A dynamic member has no identity across
  restarts, so its slot is inferred: a dynamic member that arrives in the assignment in which a dynamic member
  departed is that member's restart (its slot) when the pairing is unambiguous: exactly one dynamic member
  departed and one arrived, or the two are each other's only counterpart holding partitions the other held
  (the sticky assignor hands a departed member's partitions to its replacement). Otherwise a dynamic member is
  its ``member_id``, and partitions it takes over from a departed member are moves.
- Each ``assignment_stored`` is compared with the group's previous ``assignment_stored``: a partition in both with
  another slot is *moved*, one only in the new is *added*, one only in the previous is *removed*. The first
  assignment of a group adds everything. Partitions held by members with an unknown encoding are invisible here.
- The comparison works on whole assignments, one row per assignment (no row per partition, one shuffle in all):
  set differences between this and the previous assignment's partitions and ``(partition, slot)`` pairs, each
  held as a 64-bit key: a partition's key is the topic's xxHash XOR the partition, a pair's key that XOR the
  slot's xxHash. Keys halve the time strings took; two entries of one group's consecutive assignments colliding
  is a ~1e-11 chance at ten thousand partitions, and would miscount one partition (partitions of one topic never
  collide). A partition an assignor gave to two members at once (a bug) is counted as each of its owners.
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
    """Who holds a member's partitions, before slot inference: its instance id when static, else its member id."""
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
    held = stored.select(
        "group_id",
        "seq",
        "ts_ms",
        "generation_id",
        F.size("assignments").alias("members"),
        F.size(F.filter("assignments", lambda m: m["partitions"].isNull())).alias("unknown_assignments"),
        F.transform("assignments", _holding).alias("holdings"),
    )
    compared = held.select(
        "*",
        F.lag("seq").over(in_group_order).alias("previous_seq"),
        F.coalesce(F.lag("holdings").over(in_group_order), F.array().cast(_HOLDINGS)).alias("previous_holdings"),
    )
    with_slots = compared.select(
        "*",
        _keys(F.col("holdings")).alias("keys"),
        _keys(F.col("previous_holdings")).alias("previous_keys"),
        _pairs(_with_inferred_slots(F.col("holdings"), F.col("previous_holdings"))).alias("pairs"),
        _pairs(F.col("previous_holdings")).alias("previous_pairs"),
    )
    added = F.size(F.array_except("keys", "previous_keys"))
    # New pairs are partitions that are new, or that are not new and have another slot: moved.
    new_pairs = F.size(F.array_except("pairs", "previous_pairs"))
    return with_slots.select(
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


# One member of an assignment: its owner (before slot inference), whether it is dynamic, its partition keys.
_HOLDINGS = "array<struct<owner:string,dynamic:boolean,keys:array<bigint>>>"


def _holding(member: Column) -> Column:
    return F.struct(
        _owner(member).alias("owner"),
        member["group_instance_id"].isNull().alias("dynamic"),
        _partition_keys(member["partitions"]).alias("keys"),
    )


def _partition_keys(partitions: Column) -> Column:
    """A member's partitions (map topic -> numbers) as 64-bit keys; empty when its encoding is unknown.

    A key is the topic's xxHash XOR the partition number: one hash per topic instead of one per partition (a
    quarter faster), and the partitions of one topic can never collide with each other."""
    per_topic = F.transform(
        F.map_entries(partitions),
        lambda entry: F.transform(entry["value"], lambda partition: F.xxhash64(entry["key"]).bitwiseXOR(partition)),
    )
    return F.coalesce(F.flatten(per_topic), _no_hashes())


def _keys(holdings: Column) -> Column:
    return F.array_distinct(F.flatten(F.transform(holdings, lambda h: h["keys"])))


def _pairs(holdings: Column) -> Column:
    """``(partition, slot)`` keys: each partition key XOR its holder's hashed slot (``owner``)."""
    return F.flatten(
        F.transform(holdings, lambda h: F.transform(h["keys"], lambda key: key.bitwiseXOR(F.xxhash64(h["owner"]))))
    )


def _with_inferred_slots(holdings: Column, previous: Column) -> Column:
    """``holdings`` with each dynamic arrival's owner replaced by the departed member it restarts, where the
    pairing is unambiguous (module rules)."""
    owners_now = F.transform(holdings, lambda h: h["owner"])
    owners_before = F.transform(previous, lambda h: h["owner"])
    departed = F.filter(previous, lambda h: h["dynamic"] & ~F.array_contains(owners_now, h["owner"]))
    arrived = F.filter(holdings, lambda h: h["dynamic"] & ~F.array_contains(owners_before, h["owner"]))
    one_for_one = (F.size(departed) == 1) & (F.size(arrived) == 1)

    def slot(h: Column) -> Column:
        is_arrival = h["dynamic"] & ~F.array_contains(owners_before, h["owner"])
        sources = F.filter(departed, lambda d: F.arrays_overlap(d["keys"], h["keys"]))
        only_source = F.try_element_at(sources, F.lit(1))
        mutual = (F.size(sources) == 1) & (
            F.size(F.filter(arrived, lambda a: F.arrays_overlap(a["keys"], only_source["keys"]))) == 1
        )
        predecessor = (
            F.when(one_for_one, F.try_element_at(departed, F.lit(1))["owner"])
            .when(mutual, only_source["owner"])
            .otherwise(h["owner"])
        )
        return F.struct(
            F.when(is_arrival, predecessor).otherwise(h["owner"]).alias("owner"),
            h["dynamic"].alias("dynamic"),
            h["keys"].alias("keys"),
        )

    return F.transform(holdings, slot)


def _no_hashes() -> Column:
    return F.array().cast("array<bigint>")
