"""The journal event is declared once (``berth.coordinator.formats.journal``) for its three users, which may not
import one another: the coordinator core writes it, the operator writes it as Kafka evidence, the pipeline reads
it. These tests hold each user to the declaration, and the declaration to what lets all three import it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

from pyspark.sql.types import ArrayType, StructType

import berth.coordinator.formats.journal as journal
from berth.coordinator.formats.journal import (
    Column,
    EventType,
    ExpiryPhase,
    JournalEvent,
    LeaveVia,
    MemberRef,
    ObservedCause,
    RebalanceCause,
    StoredAssignment,
    columns,
)
from berth.operator.planners.evidence import EvidenceState, encode_line, numbered, observe_group, removal_events
from berth.operator.planners.observations import GroupDescription, GroupMember
from berth.pipeline import schema

ENUMS = {
    "type": set(EventType),
    "cause": {*RebalanceCause, *ObservedCause},
    "phase": set(ExpiryPhase),
    "via": set(LeaveVia),
}


def test_the_declarations_import_in_a_bare_interpreter_without_msgspec() -> None:
    """``python -S`` (no site-packages: no msgspec, nothing installed) imports the journal event and the advice
    document, and nothing of Berth comes with them but their packages."""
    code = (
        "import sys; sys.path.insert(0, 'coordinator');"
        "import berth.coordinator.formats.journal, berth.coordinator.formats.advice;"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('berth', 'msgspec')))))"
    )
    root = Path(journal.__file__).resolve().parents[4]
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "berth",
        "berth.coordinator",
        "berth.coordinator.formats",
        "berth.coordinator.formats.advice",
        "berth.coordinator.formats.journal",
    ]


def test_the_declaration_imports_only_the_standard_library() -> None:
    """The pipeline imports it (and so does the Spark image): nothing of Berth, msgspec or any other package."""
    tree = ast.parse(Path(journal.__file__).read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in ([node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def test_the_pipelines_schema_is_the_declarations_columns_in_order_down_to_the_nested_arrays() -> None:
    kinds = {Column.LONG: "bigint", Column.INT: "int", Column.STRING: "string", Column.BOOL: "boolean"}

    def expected(declaration: Any) -> list[tuple[str, str]]:
        return [(name, kinds.get(kind, kind.value)) for name, kind in columns(declaration)]

    def actual(struct: StructType) -> list[tuple[str, str]]:
        return [
            (field.name, "members" if field.name == "members" else "assignments")
            if isinstance(field.dataType, ArrayType)
            else (field.name, field.dataType.simpleString())
            for field in struct.fields
        ]

    assert actual(schema.JOURNAL_SCHEMA) == expected(JournalEvent)
    assert schema.JOURNAL_SCHEMA["members"].dataType == ArrayType(schema.MEMBER_REF)
    assert actual(schema.MEMBER_REF) == expected(MemberRef)
    assert schema.JOURNAL_SCHEMA["assignments"].dataType == ArrayType(schema.STORED_ASSIGNMENT)
    assert actual(schema.STORED_ASSIGNMENT) == expected(StoredAssignment)
    assert set(schema.ANALYSED_COLUMNS) <= set(schema.JOURNAL_COLUMNS)


def test_the_names_the_pipelines_transforms_use_are_the_declarations_values() -> None:
    for member in EventType:
        value = getattr(schema, member.name, member.value)
        assert value == member.value and type(value) is str  # plain text for Spark's literals
    assert schema.RESTART_LEAVE_VIA in set(LeaveVia)
    assert schema.RESTART_EXPIRY_PHASE in set(ExpiryPhase)


def test_the_operators_evidence_events_are_declared_journal_events_and_encode_as_the_coordinators() -> None:
    hints = typing.get_type_hints(JournalEvent)
    first = GroupDescription("orders", "Stable", -1, None, (GroupMember("m-0", "orders-0"), GroupMember("m-1", "x-1")))
    second = GroupDescription("orders", "PreparingRebalance", -1, None, (GroupMember("m-9", "orders-0"),))
    state, _ = observe_group(EvidenceState(), first, now_ms=1_000, key=first.group_id)
    state, observed = observe_group(state, second, now_ms=2_000, key=second.group_id)
    _, removed = removal_events(state, "orders", {"orders-0": "NONE"}, everyone=True, now_ms=3_000)
    events = numbered([*observed, *removed], 0)

    assert {event["type"] for event in events} == {
        "static_member_replaced",
        "member_expired",
        "rebalance_started",
        "member_left",
        "group_emptied",
    }
    for event in events:
        assert set(event) <= set(hints), set(event) - set(hints)
        for field, enum in ENUMS.items():
            if field in event:
                assert event[field] in enum, (field, event[field])  # type: ignore[literal-required]
        decoded = json.loads(encode_line(event))
        assert decoded["source"] == "operator" and isinstance(decoded["type"], str)
