"""The journal's shape as Spark sees it: the explicit event schema, the assignment schema, and the event names.

Owns every column name and type the pipeline reads (docs/formats.md is the contract). Rules: schemas are explicit,
never inferred (inference costs a full extra pass and loses types); a field the journal may omit is nullable; the
nested ``members`` and ``assignments`` arrays are typed down to their leaves so that no transform parses JSON again.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

# Event types (docs/formats.md, "Journal events").
GROUP_CREATED = "group_created"
MEMBER_ID_REQUIRED = "member_id_required"
MEMBER_JOINED = "member_joined"
STATIC_MEMBER_REPLACED = "static_member_replaced"
MEMBER_FENCED = "member_fenced"
MEMBER_LEFT = "member_left"
MEMBER_EXPIRED = "member_expired"
REBALANCE_STARTED = "rebalance_started"
REBALANCE_COMPLETED = "rebalance_completed"
ASSIGNMENT_STORED = "assignment_stored"
GROUP_EMPTIED = "group_emptied"
GROUP_DELETED = "group_deleted"
EXPECTED_MEMBERS_CHANGED = "expected_members_changed"
# Who owns a group (docs/api.md §7a): not read by any transform, named so that the two lists agree.
OWNER_CLAIMED = "owner_claimed"
OWNER_RELEASED = "owner_released"

# The departures after which a rejoin of the same instance counts as a restart: a member that asked to leave, or
# one whose session ran out. Admin removals and KIP-389 refusals are scale-downs, not restarts.
RESTART_LEAVE_VIA = "leave"
RESTART_EXPIRY_PHASE = "session"

MEMBER_REF = StructType(
    [
        StructField("member_id", StringType()),
        StructField("group_instance_id", StringType()),
    ]
)

STORED_ASSIGNMENT = StructType(
    [
        StructField("member_id", StringType()),
        StructField("group_instance_id", StringType()),
        StructField("assignment", StringType()),  # base64 of the bytes the leader sent
    ]
)

# The member library's partitions (docs/formats.md, "Member library encoding"): topic -> partition numbers.
LIBRARY_PARTITIONS = MapType(StringType(), ArrayType(IntegerType()))

# A converted (Parquet) journal's assignment: the stored one plus its partitions, decoded once by the converter
# (null when the encoding is not the member library's). The base64 stays, so nothing of the journal is lost.
CONVERTED_ASSIGNMENT = StructType([*STORED_ASSIGNMENT.fields, StructField("partitions", LIBRARY_PARTITIONS)])

# One journal event. Field order is the column order of every DataFrame the readers return.
JOURNAL_SCHEMA = StructType(
    [
        StructField("seq", LongType()),
        StructField("ts_ms", LongType()),
        StructField("group_id", StringType()),
        StructField("type", StringType()),
        StructField("generation_id", IntegerType()),
        StructField("member_id", StringType()),
        StructField("group_instance_id", StringType()),
        StructField("static", BooleanType()),
        StructField("client_id", StringType()),
        StructField("old_member_id", StringType()),
        StructField("offline_ms", LongType()),
        StructField("rebalance", BooleanType()),
        StructField("reason", StringType()),
        StructField("via", StringType()),
        StructField("phase", StringType()),
        StructField("cause", StringType()),
        StructField("leader", StringType()),
        StructField("protocol_name", StringType()),
        StructField("members", ArrayType(MEMBER_REF)),
        StructField("assignments", ArrayType(STORED_ASSIGNMENT)),
    ]
)

JOURNAL_COLUMNS = tuple(field.name for field in JOURNAL_SCHEMA.fields)

# A converted journal's event: the journal's columns, with assignments as ``CONVERTED_ASSIGNMENT``.
CONVERTED_SCHEMA = StructType(
    [
        StructField("assignments", ArrayType(CONVERTED_ASSIGNMENT)) if field.name == "assignments" else field
        for field in JOURNAL_SCHEMA.fields
    ]
)

# The columns the transforms read: an analysis run caches only these (``members``, client ids and the like are
# for people reading the journal). A transform reading another column fails loudly until it is added here.
ANALYSED_COLUMNS = (
    "seq",
    "ts_ms",
    "group_id",
    "type",
    "generation_id",
    "group_instance_id",
    "offline_ms",
    "rebalance",
    "via",
    "phase",
    "cause",
    "assignments",
)

# Without these an event cannot be placed in order, in time or in a group: a line lacking one is malformed.
REQUIRED_COLUMNS = ("seq", "ts_ms", "group_id", "type")

# The member library's assignment (docs/formats.md, "Member library encoding"); unknown fields are ignored.
MEMBER_ASSIGNMENT_SCHEMA = StructType(
    [
        StructField("version", LongType()),
        StructField("partitions", LIBRARY_PARTITIONS),
    ]
)

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
