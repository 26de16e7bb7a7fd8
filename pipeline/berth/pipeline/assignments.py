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
    decoded = F.coalesce(_decoded(events), F.array())
    stored = events.where(F.col("type") == ASSIGNMENT_STORED).select(
        "group_id",
        "seq",
        "ts_ms",
        "generation_id",
        F.size(decoded).alias("members"),
        F.size(F.filter(decoded, lambda m: m["partitions"].isNull())).alias("unknown_assignments"),
        F.transform(decoded, _member).alias("assignment"),
    )
    # The one shuffle moves each assignment as the journal has it (topics and small partition numbers, which
    # compress), not its 64-bit keys: those are worked out after it, and the window reuses its partitioning.
    held = stored.repartition("group_id").select(
        *_PER_ASSIGNMENT, F.transform("assignment", _holding).alias("holdings")
    )
    # Everything compared is worked out once per assignment, before the window: the window hands the previous
    # assignment's lists over as they are, where computing them from its holdings again would double the work.
    own = held.select(
        *_PER_ASSIGNMENT,
        F.array_distinct(F.flatten(F.col("holdings.keys"))).alias("keys"),
        _pairs(F.col("holdings")).alias("pairs"),
        F.col("holdings.owner").alias("owners"),
        F.filter("holdings", lambda h: h["dynamic"]).alias("dynamic_holdings"),
    )
    previous = {"keys": _KEYS, "pairs": _KEYS, "owners": _OWNERS, "dynamic_holdings": _HOLDINGS}
    compared = own.select(
        "*",
        F.lag("seq").over(in_group_order).alias("previous_seq"),
        *(
            F.coalesce(F.lag(name).over(in_group_order), F.array().cast(type_)).alias(f"previous_{name}")
            for name, type_ in previous.items()
        ),
    )
    turnover = compared.select(
        "*",
        F.array_except("dynamic_holdings.owner", "previous_owners").alias("arrived_owners"),
        F.array_except("previous_dynamic_holdings.owner", "owners").alias("departed_owners"),
    )
    # Slots differ from owners only where a dynamic member arrived and another departed: a few assignments.
    restarts = (F.size("arrived_owners") > 0) & (F.size("departed_owners") > 0)
    candidates = turnover.select(
        "*",
        F.when(restarts, F.filter("previous_dynamic_holdings", lambda d: _among("departed_owners", d))).alias(
            "departed"
        ),
        F.when(restarts, F.filter("dynamic_holdings", lambda h: _among("arrived_owners", h))).alias("arrived"),
    )
    # There, the arrivals' pairs are those of their inferred slots; everyone else's stay as they are.
    arrivals = F.col("arrived")
    slotted = F.when(
        restarts,
        F.array_union(
            F.array_except("pairs", _pairs(arrivals)),
            _pairs(_with_inferred_slots(arrivals)),
        ),
    ).otherwise(F.col("pairs"))
    added = F.size(F.array_except("keys", "previous_keys"))
    # New pairs are partitions that are new, or that are not new and have another slot: moved.
    new_pairs = F.size(F.array_except(slotted, "previous_pairs"))
    return candidates.select(
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


# What each assignment carries through the comparison as it is.
_PER_ASSIGNMENT = ("group_id", "seq", "ts_ms", "generation_id", "members", "unknown_assignments")
# One member of an assignment: its owner (before slot inference), whether it is dynamic, its partition keys.
_HOLDINGS = "array<struct<owner:string,dynamic:boolean,keys:array<bigint>>>"
_KEYS = "array<bigint>"
_OWNERS = "array<string>"


def _member(member: Column) -> Column:
    """What the comparison needs of a decoded member: its owner, whether it is dynamic, its partitions."""
    return F.struct(
        _owner(member).alias("owner"),
        member["group_instance_id"].isNull().alias("dynamic"),
        member["partitions"].alias("partitions"),
    )


def _holding(member: Column) -> Column:
    return F.struct(
        member["owner"].alias("owner"),
        member["dynamic"].alias("dynamic"),
        _partition_keys(member["partitions"]).alias("keys"),
    )


def _partition_keys(partitions: Column) -> Column:
    """A member's partitions (map topic -> numbers) as 64-bit keys; empty when its encoding is unknown.

    A key is the topic's xxHash XOR the partition number: one hash per topic (hashed before the partitions are
    visited: an expression inside a lambda is evaluated again for every element), and the partitions of one topic
    can never collide with each other."""
    topics = F.transform(
        F.map_entries(partitions),
        lambda entry: F.struct(F.xxhash64(entry["key"]).alias("hash"), entry["value"].alias("partitions")),
    )
    per_topic = F.transform(
        topics, lambda topic: F.transform(topic["partitions"], lambda partition: topic["hash"].bitwiseXOR(partition))
    )
    return F.coalesce(F.flatten(per_topic), _no_hashes())


def _pairs(holdings: Column) -> Column:
    """``(partition, slot)`` keys: each partition key XOR its holder's hashed slot (``owner``, hashed once)."""
    hashed = F.transform(holdings, lambda h: F.struct(F.xxhash64(h["owner"]).alias("slot"), h["keys"].alias("keys")))
    return F.flatten(F.transform(hashed, lambda h: F.transform(h["keys"], lambda key: key.bitwiseXOR(h["slot"]))))


def _among(owners: str, holding: Column) -> Column:
    return F.array_contains(F.col(owners), holding["owner"])


def _with_inferred_slots(arrivals: Column) -> Column:
    """The dynamic ``arrivals``, each owner replaced by the departed member it restarts where the pairing is
    unambiguous (module rules). Reads the row's ``departed`` and ``arrived`` holdings: columns worked out once per
    assignment, where expressions inside the lambdas below would be evaluated again for every member."""
    departed, arrived = F.col("departed"), F.col("arrived")
    one_for_one = (F.size(departed) == 1) & (F.size(arrived) == 1)

    def with_sources(h: Column) -> Column:
        # The departed members whose partitions this arrival took: kept, so the next step reads them once.
        sources = F.when(~one_for_one, F.filter(departed, lambda d: F.arrays_overlap(d["keys"], h["keys"])))
        return F.struct(h["owner"].alias("owner"), h["keys"].alias("keys"), sources.alias("sources"))

    def slot(s: Column) -> Column:
        only_source = F.try_element_at(s["sources"], F.lit(1))
        mutual = (F.size(s["sources"]) == 1) & (
            F.size(F.filter(arrived, lambda a: F.arrays_overlap(a["keys"], only_source["keys"]))) == 1
        )
        predecessor = (
            F.when(one_for_one, F.try_element_at(departed, F.lit(1))["owner"])
            .when(mutual, only_source["owner"])
            .otherwise(s["owner"])
        )
        return F.struct(predecessor.alias("owner"), s["keys"].alias("keys"))

    return F.transform(F.transform(arrivals, with_sources), slot)


def _no_hashes() -> Column:
    return F.array().cast("array<bigint>")
