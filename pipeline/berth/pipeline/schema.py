"""The journal's shape as Spark sees it: the explicit event schema, the assignment schema, and the event names.

The journal event is declared once, for the coordinator core, the operator's evidence and this pipeline, in
``berth.coordinator.formats.journal`` (the one module of the coordinator the pipeline may import: pure, standard
library only). This module owns how its columns are typed for Spark (:data:`SPARK_TYPES`) and every column the
pipeline derives (docs/formats.md is the contract). Rules: schemas are explicit, never inferred (inference costs a
full extra pass and loses types); a field the journal may omit is nullable; the nested ``members`` and
``assignments`` arrays are typed down to their leaves so that no transform parses JSON again.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from berth.coordinator.formats.journal import (
    Column,
    EventSource,
    EventType,
    ExpiryPhase,
    JournalEvent,
    LeaveVia,
    MemberRef,
    StoredAssignment,
    columns,
)

# Event types (docs/formats.md, "Journal events"), by the names the transforms use.
GROUP_CREATED = EventType.GROUP_CREATED.value
MEMBER_ID_REQUIRED = EventType.MEMBER_ID_REQUIRED.value
MEMBER_JOINED = EventType.MEMBER_JOINED.value
STATIC_MEMBER_REPLACED = EventType.STATIC_MEMBER_REPLACED.value
MEMBER_FENCED = EventType.MEMBER_FENCED.value
MEMBER_LEFT = EventType.MEMBER_LEFT.value
MEMBER_EXPIRED = EventType.MEMBER_EXPIRED.value
REBALANCE_STARTED = EventType.REBALANCE_STARTED.value
REBALANCE_COMPLETED = EventType.REBALANCE_COMPLETED.value
ASSIGNMENT_STORED = EventType.ASSIGNMENT_STORED.value
GROUP_EMPTIED = EventType.GROUP_EMPTIED.value
GROUP_DELETED = EventType.GROUP_DELETED.value
EXPECTED_MEMBERS_CHANGED = EventType.EXPECTED_MEMBERS_CHANGED.value

# The operator's Kafka evidence (``source: operator``) names each group ``kafka://<cluster>/<group>``; a coordinator's
# journal never carries that prefix (docs/formats.md): the readers flag an event keyed against its source.
EVIDENCE_SOURCE = EventSource.OPERATOR.value
KAFKA_GROUP_PREFIX = "kafka://"

# The departures after which a rejoin of the same instance counts as a restart: a member that asked to leave, or
# one whose session ran out. Admin removals and KIP-389 refusals are scale-downs, not restarts.
RESTART_LEAVE_VIA = LeaveVia.LEAVE.value
RESTART_EXPIRY_PHASE = ExpiryPhase.SESSION.value

#: The Spark type of each scalar column kind of the declaration.
SPARK_TYPES: dict[Column, DataType] = {
    Column.LONG: LongType(),
    Column.INT: IntegerType(),
    Column.STRING: StringType(),
    Column.BOOL: BooleanType(),
}


def _struct(declaration: object, nested: dict[Column, DataType] | None = None) -> StructType:
    """The declaration's columns as a Spark struct, in declaration order (every field nullable)."""
    types = {**SPARK_TYPES, **(nested or {})}
    return StructType([StructField(name, types[kind]) for name, kind in columns(declaration)])


MEMBER_REF = _struct(MemberRef)

STORED_ASSIGNMENT = _struct(StoredAssignment)  # ``assignment``: base64 of the bytes the leader sent

# The member library's partitions (docs/formats.md, "Member library encoding"): topic -> partition numbers.
LIBRARY_PARTITIONS = MapType(StringType(), ArrayType(IntegerType()))

# A converted (Parquet) journal's assignment: the stored one plus its partitions, decoded once by the converter
# (null when the encoding is not the member library's). The base64 stays, so nothing of the journal is lost.
CONVERTED_ASSIGNMENT = StructType([*STORED_ASSIGNMENT.fields, StructField("partitions", LIBRARY_PARTITIONS)])

# One journal event. Field order is the column order of every DataFrame the readers return.
JOURNAL_SCHEMA = _struct(
    JournalEvent, {Column.MEMBERS: ArrayType(MEMBER_REF), Column.ASSIGNMENTS: ArrayType(STORED_ASSIGNMENT)}
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
