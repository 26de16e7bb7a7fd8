"""The journal's event types are the core's ``EventType``; the pipeline, which may not import the coordinator,
declares the same names (pipeline/berth/pipeline/schema.py), and this test holds the two to each other."""

from __future__ import annotations

import ast
from pathlib import Path

from berth.coordinator.core import EventType, ExpiryPhase, LeaveVia

SCHEMA = Path(__file__).resolve().parents[3] / "pipeline" / "berth" / "pipeline" / "schema.py"


def pipeline_constants() -> dict[str, str]:
    """The module-level ``NAME = "text"`` assignments of the pipeline's schema, read without importing Spark."""
    constants = {}
    for node in ast.parse(SCHEMA.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = node.value.value
    return constants


def test_the_pipeline_names_every_event_type_as_the_core_does() -> None:
    constants = pipeline_constants()
    declared = {name: constants.get(name) for name in EventType.__members__}
    assert declared == {member.name: member.value for member in EventType}


def test_the_pipeline_declares_no_event_type_the_core_does_not_emit() -> None:
    event_like = {value for value in pipeline_constants().values() if value.startswith(("member_", "group_"))}
    event_like |= {value for value in pipeline_constants().values() if value.startswith(("rebalance_", "assignment_"))}
    assert event_like <= {member.value for member in EventType}


def test_the_restart_markers_the_pipeline_reads_are_values_the_core_writes() -> None:
    constants = pipeline_constants()
    assert constants["RESTART_LEAVE_VIA"] in {v.value for v in LeaveVia}
    assert constants["RESTART_EXPIRY_PHASE"] in {p.value for p in ExpiryPhase}
